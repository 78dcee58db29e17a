//! Benchmark: load + analyze of a real trace, wall time (median of runs) and peak RSS.
//!
//! `cargo bench --bench load_analyze [-- FILE [RUNS]]`. Without FILE it uses
//! `../shared/sample-traces/kineto/h200_gpt_train_big.pt.trace.json.gz` (121 MB of JSON,
//! 375k events) and skips with a message when that file is absent. Peak RSS is the
//! process's high-water mark (VmHWM), read from /proc, so it covers every run.

use std::path::PathBuf;
use std::time::Instant;

fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let path = args.first().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .expect("cargo sets CARGO_MANIFEST_DIR at run time"),
        )
        .join("../shared/sample-traces/kineto/h200_gpt_train_big.pt.trace.json.gz")
    });
    let runs: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(7);
    if !path.exists() {
        eprintln!("skipping: {} is absent", path.display());
        return;
    }
    let config = tracehound_heuristics::Config::default();
    let mut times = Vec::new();
    let mut findings = 0;
    let mut events = 0;
    for _ in 0..runs {
        let t0 = Instant::now();
        let trace = match tracehound_parsers::load(&path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        };
        let analysis = tracehound_heuristics::analyze(&trace, &config);
        times.push(t0.elapsed().as_secs_f64());
        findings = analysis.findings.len();
        events = trace.stats.events_total;
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!(
        "load+analyze {}: {} events, {} findings; median {:.3} s over {} runs (min {:.3}, max {:.3}); peak RSS {} MB; {} cores",
        path.file_name().unwrap_or_default().to_string_lossy(),
        events,
        findings,
        median,
        runs,
        times[0],
        times[times.len() - 1],
        peak_rss_kb().map_or("?".into(), |k| (k / 1024).to_string()),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}
