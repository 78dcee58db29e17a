//! Command-line interface: argument parsing, loading, and dispatch to the printers.

use crate::report::{self, Format, TraceReport};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use tracehound_heuristics::{Config, Finding, Severity};

#[derive(Parser)]
#[command(name = "tracehound", version, about = "Find where GPU time is lost in PyTorch profiler traces", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Refuse, before reading it, a file estimated to need more memory than SIZE (e.g. 64G,
    /// 512M; 0 turns the check off). Default: the memory this machine has available.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_memory_limit)]
    max_memory: Option<tracehound_parsers::budget::MemoryLimit>,
}

fn parse_memory_limit(s: &str) -> Result<tracehound_parsers::budget::MemoryLimit, String> {
    tracehound_parsers::budget::parse_size(s)
        .ok_or_else(|| format!("`{s}` is not a size: write it like 64G, 512M or 0"))
}

/// The memory limit of this run (`--max-memory`, else what the machine has available).
static MEMORY_LIMIT: std::sync::OnceLock<tracehound_parsers::budget::MemoryLimit> =
    std::sync::OnceLock::new();

/// Load options every command starts from: the run's memory limit.
pub(crate) fn load_options() -> tracehound_parsers::LoadOptions {
    tracehound_parsers::LoadOptions {
        memory_limit: MEMORY_LIMIT.get().copied().unwrap_or_default(),
        ..Default::default()
    }
}

#[derive(Subcommand)]
enum Command {
    /// Rank what costs GPU time in one or more traces.
    Analyze(AnalyzeArgs),
    /// Write a report to attach to a review or keep as a CI artifact: Markdown, JSON,
    /// self-contained HTML or JUnit XML (from the extension of -o, or --format). Written
    /// atomically.
    Report(ReportArgs),
    /// Compare two captures of the same job: findings resolved, new and changed, busy and idle
    /// time and their causes, step time, top kernels and memory peaks.
    Diff(DiffArgs),
    /// Query the model with SQL: tables kernels, memcpys, memsets, host_spans, memory,
    /// counters, steps, gaps, gap_causes, findings (docs/tables.md). Several files union their
    /// rows with source and rank columns. Needs the cargo feature `sql`.
    Sql {
        /// Trace files, then the query (the last argument).
        #[arg(required = true, num_args = 2..)]
        args: Vec<String>,
        /// Print CSV.
        #[arg(long)]
        csv: bool,
        /// Print JSON (a list of rows).
        #[arg(long, conflicts_with = "csv")]
        json: bool,
    },
    /// Write the model's tables as Parquet or CSV files into a directory, to continue in
    /// polars, pandas or DuckDB. Needs the cargo feature `sql`.
    Export {
        /// Trace files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Write Parquet files into this directory.
        #[arg(long, value_name = "DIR")]
        parquet: Option<PathBuf>,
        /// Write CSV files into this directory.
        #[arg(long, value_name = "DIR", conflicts_with = "parquet")]
        csv: Option<PathBuf>,
    },
    /// Put a job together from rank summaries: the same report as `analyze DIR` (stragglers,
    /// waits, exposed communication, spread across ranks), from summaries that any engine
    /// (Slurm array, Spark, Ray) wrote with `analyze TRACE --rank-summary OUT`.
    Merge(MergeArgs),
    /// Kernel and memory-operation tables (the columns of `nsys stats`).
    Summary {
        /// Trace files (Kineto JSON, plain or gzip; Nsight Systems SQLite).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print CSV: the kernel table, a blank line, the memory table.
        #[arg(long)]
        csv: bool,
        /// Only the analysed window (the profiler steps) instead of the whole trace.
        #[arg(long)]
        steps: bool,
        /// Kernels shown in the text table.
        #[arg(long, default_value_t = 15, value_name = "N")]
        top: usize,
    },
    /// Explore a trace (or a job directory) in the terminal: findings, timeline, memory,
    /// kernel and operator tables, counters, ranks.
    Tui {
        /// A trace (with nvidia-smi logs beside it), or one directory of rank traces.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// GPU idle intervals at least this long (µs) count as gaps.
        #[arg(long, default_value_t = 100.0, value_name = "US")]
        gap_threshold_us: f64,
        /// Time zone of the machine that wrote nvidia-smi logs, hours east of UTC.
        #[arg(long, value_name = "HOURS", allow_hyphen_values = true)]
        utc_offset: Option<f64>,
    },
    /// Show what was detected and loaded from each file.
    Info {
        /// Trace files (Kineto JSON, plain or gzip; Nsight Systems SQLite).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum OutFormat {
    /// A readable table.
    Table,
    /// JSON (schema: docs/json-output.md).
    Json,
    /// Markdown, for reviews and pull requests.
    Md,
}

#[derive(Clone, Copy, ValueEnum)]
enum FailOn {
    Low,
    Medium,
    High,
}

impl FailOn {
    fn severity(self) -> Severity {
        match self {
            FailOn::Low => Severity::Low,
            FailOn::Medium => Severity::Medium,
            FailOn::High => Severity::High,
        }
    }
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// Trace files (Kineto JSON, plain or gzip; Nsight Systems SQLite; nvidia-smi logs beside
    /// them), or one directory holding the rank traces of a job.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: OutFormat,
    /// GPU idle intervals at least this long (µs) count as gaps.
    #[arg(long, default_value_t = 100.0, value_name = "US")]
    gap_threshold_us: f64,
    /// Show at most N findings per trace.
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Exit with code 1 when a finding of this severity or higher is found.
    #[arg(long, value_enum, value_name = "SEVERITY")]
    fail_on: Option<FailOn>,
    /// Analyse only this window, in ms from the first event of the trace (e.g. --window 100 350).
    #[arg(long, num_args = 2, value_names = ["START_MS", "END_MS"])]
    window: Option<Vec<f64>>,
    /// Time zone of the machine that wrote nvidia-smi logs, hours east of UTC (e.g. -5, 5.5);
    /// dmon -o DT and --query-gpu timestamps are local wall time. Default: UTC.
    #[arg(long, value_name = "HOURS", allow_hyphen_values = true)]
    utc_offset: Option<f64>,
    /// Also write this rank's summary to PATH, for `tracehound merge` (the map of a job
    /// analysis: one trace per run).
    #[arg(long, value_name = "PATH")]
    rank_summary: Option<PathBuf>,
    /// The rank to record in the summary when the trace does not record one (Kineto's
    /// distributedInfo); without either, `merge` numbers ranks by file name.
    #[arg(long, value_name = "N", requires = "rank_summary")]
    rank: Option<i64>,
}

#[derive(clap::Args)]
struct MergeArgs {
    /// Rank summaries (`tracehound analyze TRACE --rank-summary OUT`), or directories of them.
    #[arg(required = true)]
    summaries: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: OutFormat,
    /// The job's name in the report. Default: the directory holding the ranks' traces, as
    /// `analyze DIR` names it.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Exit with code 1 when a finding of this severity or higher is found.
    #[arg(long, value_enum, value_name = "SEVERITY")]
    fail_on: Option<FailOn>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    Md,
    Json,
    Html,
    Junit,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// Trace files (and nvidia-smi logs beside them).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Where to write the report (.md, .json, .html, .xml).
    #[arg(short, long, value_name = "PATH")]
    output: PathBuf,
    /// The format, when the extension does not say it.
    #[arg(long, value_enum)]
    format: Option<ReportFormat>,
    /// Exit with code 1 when a finding of this severity or higher is found; in JUnit, the
    /// severity from which a finding fails its test case (default low).
    #[arg(long, value_enum, value_name = "SEVERITY")]
    fail_on: Option<FailOn>,
    /// GPU idle intervals at least this long (µs) count as gaps.
    #[arg(long, default_value_t = 100.0, value_name = "US")]
    gap_threshold_us: f64,
    /// Time zone of the machine that wrote nvidia-smi logs, hours east of UTC.
    #[arg(long, value_name = "HOURS", allow_hyphen_values = true)]
    utc_offset: Option<f64>,
}

#[derive(clap::Args)]
struct DiffArgs {
    /// The capture before the change.
    before: PathBuf,
    /// The capture after the change.
    after: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: DiffFormat,
    /// Exit with code 1 when step time (or, without steps, idle time) got worse by more than
    /// PCT percent.
    #[arg(long, value_name = "PCT")]
    fail_on_regression: Option<f64>,
    /// GPU idle intervals at least this long (µs) count as gaps.
    #[arg(long, default_value_t = 100.0, value_name = "US")]
    gap_threshold_us: f64,
}

#[derive(Clone, Copy, ValueEnum)]
enum DiffFormat {
    Table,
    Md,
    Json,
    Html,
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    if let Some(limit) = cli.max_memory {
        let _ = MEMORY_LIMIT.set(limit);
    }
    let result = match cli.command {
        Command::Analyze(args) => analyze(args),
        Command::Info { files } => info(files),
        Command::Merge(args) => merge(args),
        Command::Report(args) => report_cmd(args),
        Command::Sql { args, csv, json } => sql_cmd(args, csv, json),
        Command::Export {
            files,
            parquet,
            csv,
        } => export_cmd(files, parquet, csv),
        Command::Diff(args) => crate::diff::run(
            &args.before,
            &args.after,
            match args.format {
                DiffFormat::Table => crate::diff::Format::Text,
                DiffFormat::Md => crate::diff::Format::Markdown,
                DiffFormat::Json => crate::diff::Format::Json,
                DiffFormat::Html => crate::diff::Format::Html,
            },
            args.fail_on_regression,
            args.gap_threshold_us,
        ),
        Command::Tui {
            files,
            gap_threshold_us,
            utc_offset,
        } => tui(files, gap_threshold_us, utc_offset),
        Command::Summary {
            files,
            csv,
            steps,
            top,
        } => summary(files, csv, steps, top),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`tracehound analyze x | head`) is not an error worth a message.
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return 0;
            }
            eprintln!("tracehound: error: {e:#}");
            2
        }
    }
}

fn load_all(files: &[PathBuf]) -> Result<Vec<tracehound_parsers::Trace>, i32> {
    load_all_with(files, load_options())
}

fn load_all_with(
    files: &[PathBuf],
    options: tracehound_parsers::LoadOptions,
) -> Result<Vec<tracehound_parsers::Trace>, i32> {
    let mut traces = Vec::new();
    let mut failed = false;
    for f in files {
        let (options, bar) = progress(f, options.clone());
        let loaded = tracehound_parsers::load_with(f, options);
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        match loaded {
            Ok(t) => {
                for w in &t.warnings {
                    eprintln!("tracehound: warning: {}: {w}", f.display());
                }
                traces.push(t);
            }
            Err(e) => {
                eprintln!("tracehound: error: {e}");
                failed = true;
            }
        }
    }
    if failed { Err(2) } else { Ok(traces) }
}

fn analyze(args: AnalyzeArgs) -> Result<i32> {
    let (_, utc_offset_s) = match checked_options(args.gap_threshold_us, args.utc_offset) {
        Ok(x) => x,
        Err(code) => return Ok(code),
    };
    if let Some(w) = &args.window
        && !(w[0].is_finite() && w[1].is_finite() && w[0] < w[1])
    {
        eprintln!("tracehound: error: --window START_MS END_MS needs START_MS < END_MS");
        return Ok(2);
    }

    if args.files.iter().any(|f| f.is_dir()) {
        if args.rank_summary.is_some() {
            eprintln!(
                "tracehound: error: --rank-summary summarises one rank: give one trace file, not a directory"
            );
            return Ok(2);
        }
        return analyze_job(&args, utc_offset_s);
    }
    let traces = match load_session(&args.files, utc_offset_s) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    let mut reports = Vec::new();
    for t in &traces {
        let mut config = Config {
            gap_threshold_ns: (args.gap_threshold_us * 1000.0).round() as i64,
            ..Config::default()
        };
        if let Some(w) = &args.window {
            let origin = t.span().map_or(0, |s| s.0);
            config.window = Some((origin + (w[0] * 1e6) as i64, origin + (w[1] * 1e6) as i64));
        }
        let analysis = tracehound_heuristics::analyze(t, &config);
        reports.push(TraceReport {
            trace: t,
            analysis: std::borrow::Cow::Owned(analysis),
        });
    }
    let format = match args.format {
        OutFormat::Table => Format::Table,
        OutFormat::Json => Format::Json,
        OutFormat::Md => Format::Markdown,
    };
    if let Some(out) = &args.rank_summary {
        let [r] = reports.as_slice() else {
            eprintln!(
                "tracehound: error: --rank-summary summarises one rank: give one trace file ({} traces given)",
                reports.len()
            );
            return Ok(2);
        };
        if let Err(code) = write_rank_summary(r, out, args.rank) {
            return Ok(code);
        }
    }
    let text = report::render(&reports, format, args.top);
    emit(
        &text,
        args.fail_on,
        reports.iter().flat_map(|r| r.analysis.findings.iter()),
    )
}

/// Writes the report to stdout; the exit code is 1 when `--fail-on` is set and a finding
/// reaches its severity, 0 otherwise.
fn emit<'f>(
    text: &str,
    fail_on: Option<FailOn>,
    findings: impl IntoIterator<Item = &'f Finding>,
) -> Result<i32> {
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("writing the report")?;
    let failed = fail_on.is_some_and(|f| {
        let th = f.severity();
        findings.into_iter().any(|f| f.severity >= th)
    });
    Ok(if failed { 1 } else { 0 })
}

fn summary(files: Vec<PathBuf>, csv: bool, steps: bool, top: usize) -> Result<i32> {
    let traces = match load_all(&files) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    let mut out = String::new();
    for t in &traces {
        let window = tracehound_heuristics::window::analysed_window(t, &Config::default());
        let scope = if steps { Some(&window) } else { None };
        let kernels = tracehound_heuristics::tables::kernel_summary(t, scope);
        let memory = tracehound_heuristics::tables::memory_summary(t, scope);
        if csv {
            out.push_str(&report::tables::kernels_csv(&kernels));
            out.push('\n');
            out.push_str(&report::tables::memory_csv(&memory));
        } else {
            let label = if steps {
                format!("window: {}", window.describe())
            } else {
                "whole trace".to_string()
            };
            out.push_str(&report::tables::text(
                &t.source, &label, &kernels, &memory, top,
            ));
            out.push('\n');
        }
    }
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .context("writing the report")?;
    Ok(0)
}

/// A progress bar on stderr for files over 64 MB, when stderr is a terminal.
fn progress(
    path: &std::path::Path,
    mut options: tracehound_parsers::LoadOptions,
) -> (
    tracehound_parsers::LoadOptions,
    Option<indicatif::ProgressBar>,
) {
    use std::io::IsTerminal;
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size < 64 << 20 || !std::io::stderr().is_terminal() {
        return (options, None);
    }
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    options.progress = Some(std::sync::Arc::clone(&count));
    let bar = indicatif::ProgressBar::new(size);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(format!(
        "loading {}",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    let b = bar.clone();
    std::thread::spawn(move || {
        while !b.is_finished() {
            b.set_position(count.load(std::sync::atomic::Ordering::Relaxed));
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    });
    (options, Some(bar))
}

/// A job's ranks (sorted by rank) and its job-level findings. `analyze DIR` treats every trace
/// in the directory as one rank: ranks are analysed in parallel, a few at a time, and each
/// trace is dropped once summarised, so memory holds at most one trace per worker however
/// many ranks there are.
pub type JobAnalysis = (Vec<tracehound_heuristics::job::RankSummary>, Vec<Finding>);

/// What reading a job directory said besides its ranks.
#[derive(Debug, Default)]
pub struct JobMessages {
    /// Files that are not rank traces, skipped (a truth file, a counter log), with why.
    pub notes: Vec<String>,
    /// Warnings of the rank traces read, each naming its file.
    pub warnings: Vec<String>,
    /// Why the job could not be analysed (a broken trace, no trace at all), each naming its
    /// file or the directory. Empty when the analysis came back.
    pub errors: Vec<String>,
}

/// The ranks of the job in `dir`, analysed a few at a time with bounded memory, sorted by
/// rank, and the job findings (collectives matched across ranks); None, with the errors in
/// the messages, when the directory holds no readable rank trace or a broken one. Prints
/// nothing: the CLI and the Python package each say the messages their own way.
pub fn read_job(
    dir: &std::path::Path,
    config: &Config,
    options: tracehound_parsers::LoadOptions,
) -> Result<(Option<JobAnalysis>, JobMessages)> {
    use rayon::prelude::*;
    use tracehound_heuristics::job::assemble;
    let mut msgs = JobMessages::default();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        msgs.errors.push(format!(
            "{}: no trace files in the directory",
            dir.display()
        ));
        return Ok((None, msgs));
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .context("starting worker threads")?;
    // A job directory often holds more than rank traces (a truth or config file, logs): what
    // is not a GPU trace is skipped with a note, what is a broken trace fails the run.
    let results: Vec<Result<RankFile, tracehound_parsers::LoadError>> = pool.install(|| {
        files
            .par_iter()
            .map(|f| read_rank(f, config, options.clone()))
            .collect()
    });
    let mut ranks = Vec::new();
    for r in results {
        match r {
            Ok(RankFile::Rank(s, known, w)) => {
                ranks.push((*s, known));
                msgs.warnings.extend(w);
            }
            Ok(RankFile::Skipped(why)) => msgs.notes.push(format!("skipped {why}")),
            Err(e) => msgs.errors.push(e.to_string()),
        }
    }
    if ranks.is_empty() && msgs.errors.is_empty() {
        msgs.errors.push(format!(
            "{}: no Kineto or Nsight Systems traces in the directory",
            dir.display()
        ));
    }
    if !msgs.errors.is_empty() {
        return Ok((None, msgs));
    }
    Ok((Some(assemble(ranks)), msgs))
}

/// One file of a job, as the job reads it.
pub enum RankFile {
    /// A rank trace: its summary, whether the trace recorded the rank (else the summary says
    /// rank 0), and the loader's warnings, each naming the file.
    Rank(
        Box<tracehound_heuristics::job::RankSummary>,
        bool,
        Vec<String>,
    ),
    /// Not a rank trace (a truth file, a counter log, not a trace at all): why, naming the
    /// file. A job skips it.
    Skipped(String),
}

/// Reads, analyses and summarises one file of a job (the map of a job analysis, for
/// `analyze DIR` and the Python package); an error for a broken trace.
pub fn read_rank(
    path: &std::path::Path,
    config: &Config,
    options: tracehound_parsers::LoadOptions,
) -> Result<RankFile, tracehound_parsers::LoadError> {
    use tracehound_parsers::SourceFormat as F;
    let t = match tracehound_parsers::load_with(path, options) {
        Ok(t) => t,
        Err(e @ tracehound_parsers::LoadError::NotATrace { .. }) => {
            return Ok(RankFile::Skipped(e.to_string()));
        }
        Err(e) => return Err(e),
    };
    if !matches!(t.meta.format, Some(F::Kineto) | Some(F::Nsys)) {
        return Ok(RankFile::Skipped(format!(
            "{}: not a rank trace (a counter log or GPU inventory)",
            path.display()
        )));
    }
    let warnings = t
        .warnings
        .iter()
        .map(|w| format!("{}: {w}", path.display()))
        .collect();
    let a = tracehound_heuristics::analyze(&t, config);
    let summary = tracehound_heuristics::job::RankSummary::new(&t, t.meta.rank.unwrap_or(0), &a);
    Ok(RankFile::Rank(
        Box::new(summary),
        t.meta.rank.is_some(),
        warnings,
    ))
}

/// [`read_job`] for the CLI: prints its messages; `Ok(Err(2))` when the job could not be
/// analysed.
pub(crate) fn job_ranks(
    dir: &std::path::Path,
    config: &Config,
    utc_offset_s: Option<i64>,
) -> Result<Result<JobAnalysis, i32>> {
    let options = tracehound_parsers::LoadOptions {
        utc_offset_s,
        ..load_options()
    };
    let (job, msgs) = read_job(dir, config, options)?;
    for w in &msgs.warnings {
        eprintln!("tracehound: warning: {w}");
    }
    for n in &msgs.notes {
        eprintln!("tracehound: note: {n}");
    }
    for e in &msgs.errors {
        eprintln!("tracehound: error: {e}");
    }
    Ok(job.ok_or(2))
}

/// Writes one rank's summary for `merge`, with the rank the trace records, else `rank`.
fn write_rank_summary(
    r: &TraceReport,
    out: &std::path::Path,
    rank: Option<i64>,
) -> Result<(), i32> {
    use tracehound_parsers::SourceFormat as F;
    if !matches!(r.trace.meta.format, Some(F::Kineto) | Some(F::Nsys)) {
        eprintln!(
            "tracehound: error: {}: --rank-summary needs a rank's trace (Kineto or Nsight Systems), not a counter log or GPU inventory",
            r.trace.source
        );
        return Err(2);
    }
    let known = r.trace.meta.rank.or(rank);
    let summary =
        tracehound_heuristics::job::RankSummary::new(r.trace, known.unwrap_or(0), &r.analysis);
    let text = summary.to_file_json(known.is_some(), env!("CARGO_PKG_VERSION"));
    report::write_atomic(out, text.as_bytes()).map_err(|e| {
        eprintln!("tracehound: error: writing {}: {e}", out.display());
        2
    })
}

/// `merge`: the job report from rank summaries, as `analyze DIR` gives it.
fn merge(args: MergeArgs) -> Result<i32> {
    use rayon::prelude::*;
    use tracehound_heuristics::job::{RankSummary, assemble};
    let mut files = Vec::new();
    for p in &args.summaries {
        if p.is_dir() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            inner.sort();
            files.extend(inner);
        } else {
            files.push(p.clone());
        }
    }
    let read: Vec<Result<(RankSummary, bool), String>> = files
        .par_iter()
        .map(|f| {
            let bytes = std::fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?;
            RankSummary::from_file_json(&bytes).map_err(|e| format!("{}: {e}", f.display()))
        })
        .collect();
    let mut ranks = Vec::with_capacity(read.len());
    let mut failed = false;
    for r in read {
        match r {
            Ok(x) => ranks.push(x),
            Err(e) => {
                eprintln!("tracehound: error: {e}");
                failed = true;
            }
        }
    }
    if failed {
        return Ok(2);
    }
    if ranks.is_empty() {
        eprintln!("tracehound: error: no rank summaries given");
        return Ok(2);
    }
    let mut seen = std::collections::BTreeMap::new();
    for (r, f) in ranks.iter().zip(&files) {
        if let Some(first) = seen.insert(r.0.source.as_str(), f) {
            eprintln!(
                "tracehound: error: {} and {} summarise the same trace {}: give each rank once",
                first.display(),
                f.display(),
                r.0.source
            );
            return Ok(2);
        }
    }
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| job_name(ranks.iter().map(|r| r.0.source.as_str())));
    let (ranks, findings) = assemble(ranks);
    print_job(&name, &ranks, &findings, args.format, args.fail_on)
}

/// A job's name from its ranks' trace paths: the directory holding them all (what
/// `analyze DIR` is given), else how many ranks there are.
pub fn job_name<'a>(sources: impl Iterator<Item = &'a str>) -> String {
    let mut dirs = sources.map(|s| std::path::Path::new(s).parent());
    let n = dirs.size_hint().0;
    match dirs.next() {
        Some(Some(first)) if dirs.all(|d| d == Some(first)) => first.display().to_string(),
        _ => format!("{n} ranks"),
    }
}

fn analyze_job(args: &AnalyzeArgs, utc_offset_s: Option<i64>) -> Result<i32> {
    if args.files.len() != 1 {
        eprintln!("tracehound: error: give one directory (the job's rank traces) and nothing else");
        return Ok(2);
    }
    // Ranks start at different moments: a window in ms from each trace's first event would
    // cut each rank somewhere else, so a job is analysed over its ranks' own step windows.
    if args.window.is_some() {
        eprintln!(
            "tracehound: error: --window applies to one trace, not a job directory: analyse the rank's trace with it"
        );
        return Ok(2);
    }
    let dir = &args.files[0];
    let config = Config {
        gap_threshold_ns: (args.gap_threshold_us * 1000.0).round() as i64,
        ..Config::default()
    };
    let (ranks, findings) = match job_ranks(dir, &config, utc_offset_s)? {
        Ok(x) => x,
        Err(code) => return Ok(code),
    };
    print_job(
        &dir.display().to_string(),
        &ranks,
        &findings,
        args.format,
        args.fail_on,
    )
}

/// Prints a job's report (`analyze DIR`, `merge`).
fn print_job(
    name: &str,
    ranks: &[tracehound_heuristics::job::RankSummary],
    findings: &[Finding],
    format: OutFormat,
    fail_on: Option<FailOn>,
) -> Result<i32> {
    let job = report::job::JobReport {
        dir: name,
        ranks,
        findings,
    };
    let text = match format {
        OutFormat::Table => report::job::table(&job),
        OutFormat::Json => report::job::json(&job),
        OutFormat::Md => report::job::markdown(&job),
    };
    emit(
        &text,
        fail_on,
        findings
            .iter()
            .chain(ranks.iter().flat_map(|r| r.findings.iter())),
    )
}

/// Loads the files and groups them into sessions (traces with the logs recorded beside them).
fn load_session(
    files: &[PathBuf],
    utc_offset_s: Option<i64>,
) -> Result<Vec<tracehound_parsers::Trace>, i32> {
    let loaded = load_all_with(
        files,
        tracehound_parsers::LoadOptions {
            utc_offset_s,
            ..load_options()
        },
    )?;
    Ok(session(loaded))
}

/// Groups the loaded files: every nvidia-smi log is attached to each GPU trace of the same
/// command (aligned by wall clock); logs given without a trace are analysed on their own.
fn session(loaded: Vec<tracehound_parsers::Trace>) -> Vec<tracehound_parsers::Trace> {
    let (traces, warnings) = group_sessions(loaded);
    for w in warnings {
        eprintln!("tracehound: warning: {w}");
    }
    traces
}

/// Groups loaded files into sessions: each GPU trace with the counter logs and GPU
/// inventories recorded beside it (or, without a GPU trace, the counter logs with the
/// inventories). Returns the sessions and why a log could not be attached (also kept in the
/// trace's warnings).
pub fn group_sessions(
    loaded: Vec<tracehound_parsers::Trace>,
) -> (Vec<tracehound_parsers::Trace>, Vec<String>) {
    use tracehound_parsers::SourceFormat as F;
    let mut warnings = Vec::new();
    let (mut primaries, mut aux): (Vec<_>, Vec<_>) = loaded
        .into_iter()
        .partition(|t| matches!(t.meta.format, Some(F::Kineto) | Some(F::Nsys)));
    if primaries.is_empty() {
        // No GPU trace: the counter logs are the subjects, the XML snapshots describe them.
        let (logs, xml): (Vec<_>, Vec<_>) = aux.into_iter().partition(|t| !t.counters.is_empty());
        if logs.is_empty() {
            return (xml, warnings);
        }
        primaries = logs;
        aux = xml;
    }
    for p in &mut primaries {
        for a in &aux {
            match tracehound_parsers::session::attach(p, a) {
                Ok(note) => p.stats.notes.push(note),
                Err(why) => {
                    warnings.push(why.clone());
                    p.warnings.push(why);
                }
            }
        }
    }
    (primaries, warnings)
}

/// Loads files for the table commands, analysing them only when a table needs it.
#[cfg(feature = "sql")]
type ForTables = Vec<(
    tracehound_parsers::Trace,
    tracehound_heuristics::Window,
    Option<tracehound_heuristics::Analysis>,
)>;

#[cfg(feature = "sql")]
fn loaded_for_tables(files: &[PathBuf], analyse: bool) -> Result<ForTables, i32> {
    let traces = session(load_all(files)?);
    let config = Config::default();
    Ok(traces
        .into_iter()
        .map(|t| {
            let w = tracehound_heuristics::window::analysed_window(&t, &config);
            let a = analyse.then(|| tracehound_heuristics::analyze(&t, &config));
            (t, w, a)
        })
        .collect())
}

#[cfg(feature = "sql")]
fn sources(loaded: &ForTables) -> Vec<crate::tables::Source<'_>> {
    loaded
        .iter()
        .enumerate()
        .map(|(k, (t, w, a))| crate::tables::Source {
            trace: t,
            window: w.clone(),
            analysis: a.as_ref(),
            rank: t.meta.rank.unwrap_or(k as i64),
        })
        .collect()
}

#[cfg(feature = "sql")]
fn sql_cmd(mut args: Vec<String>, csv: bool, json: bool) -> Result<i32> {
    // SAFETY: nothing has started a thread yet (loading, which starts the worker pool, comes
    // after), so no thread reads the environment while it is set.
    unsafe { crate::sql::show_whole_results() };
    let query = args.pop().unwrap_or_default();
    let files: Vec<PathBuf> = args.into_iter().map(PathBuf::from).collect();
    let analyse = crate::tables::named_in(&query)
        .iter()
        .any(|n| crate::tables::ANALYSED.contains(n));
    let loaded = match loaded_for_tables(&files, analyse) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let out = if csv {
        crate::sql::Output::Csv
    } else if json {
        crate::sql::Output::Json
    } else {
        crate::sql::Output::Table
    };
    crate::sql::query(&sources(&loaded), &query, out)
}

#[cfg(feature = "sql")]
fn export_cmd(files: Vec<PathBuf>, parquet: Option<PathBuf>, csv: Option<PathBuf>) -> Result<i32> {
    let (dir, is_parquet) = match (parquet, csv) {
        (Some(d), _) => (d, true),
        (None, Some(d)) => (d, false),
        (None, None) => {
            eprintln!("tracehound: error: say where: --parquet DIR or --csv DIR");
            return Ok(2);
        }
    };
    let loaded = match loaded_for_tables(&files, true) {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    crate::sql::export(&sources(&loaded), &dir, is_parquet)
}

#[cfg(not(feature = "sql"))]
fn sql_cmd(_: Vec<String>, _: bool, _: bool) -> Result<i32> {
    without_sql("sql")
}

#[cfg(not(feature = "sql"))]
fn export_cmd(_: Vec<PathBuf>, _: Option<PathBuf>, _: Option<PathBuf>) -> Result<i32> {
    without_sql("export")
}

#[cfg(not(feature = "sql"))]
fn without_sql(cmd: &str) -> Result<i32> {
    eprintln!(
        "tracehound: error: `{cmd}` needs tracehound built with the `sql` feature (polars): cargo install --path . --features sql, or cargo run --release --features sql -- {cmd} ..."
    );
    Ok(2)
}

fn report_cmd(args: ReportArgs) -> Result<i32> {
    let (gap_threshold_ns, utc_offset_s) =
        match checked_options(args.gap_threshold_us, args.utc_offset) {
            Ok(x) => x,
            Err(code) => return Ok(code),
        };
    let ext = args
        .output
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let format = match (args.format, ext.as_deref()) {
        (Some(f), _) => f,
        (None, Some("md" | "markdown")) => ReportFormat::Md,
        (None, Some("json")) => ReportFormat::Json,
        (None, Some("html" | "htm")) => ReportFormat::Html,
        (None, Some("xml")) => ReportFormat::Junit,
        _ => {
            eprintln!(
                "tracehound: error: {}: say the format with --format md|json|html|junit, or end the path in .md, .json, .html or .xml",
                args.output.display()
            );
            return Ok(2);
        }
    };
    let traces = match load_session(&args.files, utc_offset_s) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    let config = Config {
        gap_threshold_ns,
        ..Config::default()
    };
    let reports: Vec<TraceReport> = traces
        .iter()
        .map(|t| TraceReport {
            trace: t,
            analysis: std::borrow::Cow::Owned(tracehound_heuristics::analyze(t, &config)),
        })
        .collect();
    let fmt = match format {
        ReportFormat::Md => Format::Markdown,
        ReportFormat::Json => Format::Json,
        ReportFormat::Html => Format::Html,
        ReportFormat::Junit => Format::Junit(args.fail_on.map_or(Severity::Low, FailOn::severity)),
    };
    let text = report::render(&reports, fmt, None);
    report::write_atomic(&args.output, text.as_bytes())
        .with_context(|| format!("writing {}", args.output.display()))?;
    eprintln!("tracehound: wrote {}", args.output.display());
    let failed = args.fail_on.is_some_and(|f| {
        reports
            .iter()
            .flat_map(|r| r.analysis.findings.iter())
            .any(|x| x.severity >= f.severity())
    });
    Ok(if failed { 1 } else { 0 })
}

/// The gap threshold in ns and the nvidia-smi logs' UTC offset in s, checked; a bad value
/// gets its message and exit code 2.
fn checked_options(
    gap_threshold_us: f64,
    utc_offset: Option<f64>,
) -> Result<(i64, Option<i64>), i32> {
    if !(gap_threshold_us.is_finite() && gap_threshold_us > 0.0) {
        eprintln!(
            "tracehound: error: --gap-threshold-us must be a positive number of microseconds"
        );
        return Err(2);
    }
    let utc_offset_s = match utc_offset {
        Some(h) if h.is_finite() && h.abs() <= 14.0 => Some((h * 3600.0).round() as i64),
        Some(_) => {
            eprintln!(
                "tracehound: error: --utc-offset takes hours east of UTC, between -14 and 14"
            );
            return Err(2);
        }
        None => None,
    };
    Ok(((gap_threshold_us * 1000.0).round() as i64, utc_offset_s))
}

#[cfg(feature = "tui")]
fn tui(files: Vec<PathBuf>, gap_threshold_us: f64, utc_offset: Option<f64>) -> Result<i32> {
    let (gap_threshold_ns, utc_offset_s) = match checked_options(gap_threshold_us, utc_offset) {
        Ok(x) => x,
        Err(code) => return Ok(code),
    };
    let config = Config {
        gap_threshold_ns,
        ..Config::default()
    };
    let app = if files.len() == 1 && files[0].is_dir() {
        let (ranks, findings) = match job_ranks(&files[0], &config, utc_offset_s)? {
            Ok(x) => x,
            Err(code) => return Ok(code),
        };
        let mut app = crate::tui::app::App::new(None);
        app.job = Some((files[0].display().to_string(), ranks, findings));
        app.screen = crate::tui::app::Screen::Job;
        app
    } else {
        let mut traces = match load_session(&files, utc_offset_s) {
            Ok(t) => t,
            Err(code) => return Ok(code),
        };
        if traces.is_empty() {
            eprintln!("tracehound: error: nothing to show");
            return Ok(2);
        }
        if traces.len() > 1 {
            eprintln!(
                "tracehound: note: {} traces given; showing {} (open a directory to compare ranks)",
                traces.len(),
                traces[0].source
            );
        }
        let t = traces.swap_remove(0);
        let a = tracehound_heuristics::analyze(&t, &config);
        crate::tui::app::App::new(Some(crate::tui::app::Loaded::new(t, a, gap_threshold_ns)))
    };
    crate::tui::run(app, gap_threshold_ns)?;
    Ok(0)
}

#[cfg(not(feature = "tui"))]
fn tui(_: Vec<PathBuf>, _: f64, _: Option<f64>) -> Result<i32> {
    eprintln!(
        "tracehound: error: `tui` needs tracehound built with the `tui` feature (on by default): cargo install --path ., or cargo run --release -- tui ..."
    );
    Ok(2)
}

fn info(files: Vec<PathBuf>) -> Result<i32> {
    let traces = match load_all(&files) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    let mut out = String::new();
    for t in &traces {
        out.push_str(&report::info(t));
    }
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .context("writing the report")?;
    Ok(0)
}
