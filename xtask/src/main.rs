//! tracehound-dev: the developer tools, kept out of the user's `tracehound` binary.
//!
//!   cargo run --release -p tracehound-dev -- scale IN OUT --size-mb 1000
//!   cargo run --release -p tracehound-dev -- tui-bench TRACE
//!
//! Exit codes: 0 ok, 2 bad input or usage.

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "tracehound-dev",
    about = "tracehound's developer tools: benchmark inputs and TUI timings"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn parse_memory_limit(s: &str) -> Result<tracehound_parsers::budget::MemoryLimit, String> {
    tracehound_parsers::budget::parse_size(s)
        .ok_or_else(|| format!("`{s}` is not a size: write it like 64G, 512M or 0"))
}

#[derive(Subcommand)]
enum Command {
    /// Scale a real Kineto trace to a target size by repeating its steps (fresh ids, shifted
    /// times), or make a multi-rank job of it, for benchmarks and tests.
    Scale {
        /// A real Kineto trace.
        input: PathBuf,
        /// Output file, or directory with --ranks.
        output: PathBuf,
        /// Size of each output's JSON in MB (10^6 bytes).
        #[arg(long, default_value_t = 1000.0)]
        size_mb: f64,
        /// Write gzip.
        #[arg(long)]
        gzip: bool,
        /// Write a job of this many ranks (rank0.pt.trace.json ...) into the output directory.
        #[arg(long, default_value_t = 1)]
        ranks: u32,
        /// Make this rank slower (its timeline stretched by --slow-factor). Every event is
        /// stretched, collectives included, so this models a slow rank of a job without
        /// collectives (the slowest_rank finding), not ranks waiting for it at collectives.
        #[arg(long)]
        slow_rank: Option<u32>,
        /// Stretch of the slow rank's timeline.
        #[arg(long, default_value_t = 1.25)]
        slow_factor: f64,
        /// Make this rank a straggler: it arrives --late-ms late at every collective (its
        /// collective kernels start that much later and end on time), so the others wait.
        #[arg(long, value_name = "RANK")]
        late_rank: Option<u32>,
        /// How late the straggler arrives at each collective, ms.
        #[arg(long, default_value_t = 2.0, value_name = "MS")]
        late_ms: f64,
    },
    /// Time the TUI's views and redraws on a trace (benches/tui.sh).
    TuiBench {
        /// A trace.
        file: PathBuf,
        /// Refuse, before reading it, a trace estimated to need more memory than SIZE (e.g.
        /// 64G, 512M; 0 turns the check off), as `tracehound --max-memory`. Default: the
        /// memory this machine has available.
        #[arg(long, value_name = "SIZE", value_parser = parse_memory_limit)]
        max_memory: Option<tracehound_parsers::budget::MemoryLimit>,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Scale {
            input,
            output,
            size_mb,
            gzip,
            ranks,
            slow_rank,
            slow_factor,
            late_rank,
            late_ms,
        } => scale(
            &input,
            &output,
            &tracehound::scale::ScaleOptions {
                target_bytes: (size_mb * 1e6) as u64,
                gzip,
                ranks: ranks.max(1),
                slow_rank: slow_rank.map(|r| (r, slow_factor)),
                late_rank: late_rank.map(|r| (r, (late_ms * 1e6).round() as i64)),
            },
        ),
        Command::TuiBench { file, max_memory } => tui_bench(&file, max_memory.unwrap_or_default()),
    };
    if let Err(e) = result {
        eprintln!("tracehound-dev: error: {e:#}");
        std::process::exit(2);
    }
}

fn scale(
    input: &std::path::Path,
    output: &std::path::Path,
    opts: &tracehound::scale::ScaleOptions,
) -> Result<()> {
    for p in tracehound::scale::run(input, output, opts)? {
        let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        println!("{} ({:.1} MB)", p.display(), size as f64 / 1e6);
    }
    Ok(())
}

fn tui_bench(
    file: &std::path::Path,
    memory_limit: tracehound_parsers::budget::MemoryLimit,
) -> Result<()> {
    let options = tracehound_parsers::LoadOptions {
        memory_limit,
        ..Default::default()
    };
    let t = tracehound_parsers::load_with(file, options).map_err(|e| anyhow::anyhow!("{e}"))?;
    let config = tracehound_heuristics::Config::default();
    let start = std::time::Instant::now();
    let a = tracehound_heuristics::analyze(&t, &config);
    let analyze_s = start.elapsed().as_secs_f64();
    println!(
        "{}",
        tracehound::tui::bench(t, a, config.gap_threshold_ns, analyze_s)?
    );
    Ok(())
}
