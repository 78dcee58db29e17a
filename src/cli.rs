//! Command-line interface: argument parsing, dispatch through the pipeline
//! ([`crate::pipeline`]) to the printers, and the one place that prints messages and errors.

use crate::pipeline::{self, Error, Options};
use crate::report::{self, Format, TraceReport};
use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use tracehound_heuristics::{Finding, Severity};

/// What a command returns: its exit code (0, or 1 for findings at `--fail-on`), or why it
/// stopped.
type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Parser)]
#[command(name = "tracehound", version, about = "Find where GPU time is lost in PyTorch profiler traces", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Refuse, before reading it, a file estimated to need more memory than SIZE (e.g. 64G,
    /// 512M; 0 turns the check off). Default: the memory this machine has available.
    #[arg(long, global = true, value_name = "SIZE", value_parser = crate::pipeline::parse_memory_limit)]
    max_memory: Option<tracehound_parsers::budget::MemoryLimit>,
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
        /// Output format: a text table, CSV, or JSON (a list of rows).
        #[arg(long, value_enum, default_value = "table")]
        format: TableFormat,
        /// The same as `--format csv`.
        #[arg(long, conflicts_with = "format")]
        csv: bool,
        /// The same as `--format json`.
        #[arg(long, conflicts_with_all = ["csv", "format"])]
        json: bool,
        #[command(flatten)]
        analysis: AnalysisArgs,
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
        #[command(flatten)]
        analysis: AnalysisArgs,
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
        /// Output format: the text tables; CSV (the kernel table, a blank line, the memory
        /// table); or JSON (per file, both tables whole, names as recorded).
        #[arg(long, value_enum, default_value = "table")]
        format: TableFormat,
        /// The same as `--format csv`.
        #[arg(long, conflicts_with = "format")]
        csv: bool,
        /// Only the analysed window (the profiler steps) instead of the whole trace.
        #[arg(long)]
        steps: bool,
        /// Kernels shown in the text table.
        #[arg(long, default_value_t = 15, value_name = "N")]
        top: usize,
        #[command(flatten)]
        analysis: AnalysisArgs,
    },
    /// Explore a trace (or a job directory) in the terminal: findings, timeline, memory,
    /// kernel and operator tables, counters, ranks.
    Tui {
        /// A trace (with nvidia-smi logs beside it), or one directory of rank traces.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        analysis: AnalysisArgs,
    },
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell):
    /// `tracehound completions bash > ~/.local/share/bash-completion/completions/tracehound`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `tracehound man > tracehound.1 && man ./tracehound.1`.
    Man,
    /// Show what was detected and loaded from each file.
    Info {
        /// Trace files (Kineto JSON, plain or gzip; Nsight Systems SQLite).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output format: the text, or JSON (what was read, as data).
        #[arg(long, value_enum, default_value = "table")]
        format: InfoFormat,
        #[command(flatten)]
        analysis: AnalysisArgs,
    },
}

/// `summary --format` and `sql --format`.
#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum TableFormat {
    /// Text tables for people.
    Table,
    /// CSV (`summary`: the columns of `nsys stats`).
    Csv,
    /// JSON (`summary`: per file, its kernel and memory tables; `sql`: a list of rows).
    Json,
}

/// `info --format`.
#[derive(Clone, Copy, ValueEnum)]
enum InfoFormat {
    /// Text for people.
    Table,
    /// JSON: each file's format, metadata, what the capture recorded, counts and load stats.
    Json,
}

/// The options of the analysis every command that reads traces takes, declared once.
#[derive(clap::Args, Clone)]
struct AnalysisArgs {
    /// GPU idle intervals at least this long (µs) count as gaps.
    #[arg(long, default_value_t = Options::default().gap_threshold_us, value_name = "US")]
    gap_threshold_us: f64,
    /// Run only these rules (ids, comma-separated: `--rules idle_gaps,copy_hotspots`; the
    /// ids are the RULE column of the report and the README's rule table).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    rules: Option<Vec<String>>,
    /// Do not run these rules (ids, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    skip_rules: Vec<String>,
    /// Analyse only this window, in ms from the first event of the trace (e.g. --window 100 350).
    #[arg(long, num_args = 2, value_names = ["START_MS", "END_MS"])]
    window: Option<Vec<f64>>,
    /// Time zone of the machine that wrote nvidia-smi logs, hours east of UTC (e.g. -5, 5.5);
    /// dmon -o DT and --query-gpu timestamps are local wall time. Default: UTC.
    #[arg(long, value_name = "HOURS", allow_hyphen_values = true)]
    utc_offset: Option<f64>,
}

impl AnalysisArgs {
    /// The pipeline's options: these, over the global ones.
    fn options(&self, base: Options) -> Options {
        Options {
            gap_threshold_us: self.gap_threshold_us,
            window_ms: self.window.as_ref().map(|w| (w[0], w[1])),
            utc_offset_h: self.utc_offset,
            rules: self.rules.clone(),
            skip_rules: self.skip_rules.clone(),
            ..base
        }
    }
}

/// Exit code: a finding at or above `--fail-on`.
const EXIT_FINDINGS: i32 = 1;
/// Exit code: an input ends before its trace does (a file cut short), with `--fail-on` or
/// `--fail-on-regression`: its findings cover only what the file kept, so a gate must not
/// pass on it. It outranks [`EXIT_FINDINGS`].
const EXIT_INCOMPLETE: i32 = 3;

#[derive(Clone, Copy, ValueEnum)]
enum OutFormat {
    /// A readable table.
    Table,
    /// JSON (schema: docs/json-output.md).
    Json,
    /// Markdown, for reviews and pull requests.
    Md,
}

/// `--color`: colour the table's severities and verdict.
#[derive(Clone, Copy, ValueEnum, Default)]
enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set.
    #[default]
    Auto,
    /// Always, also into a pipe or a file.
    Always,
    /// Never.
    Never,
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
    #[command(flatten)]
    analysis: AnalysisArgs,
    /// Show at most N findings per trace.
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Colour severities and the verdict in the table: auto (on a terminal, unless NO_COLOR
    /// is set), always, never. On a terminal the table is also wrapped at its width.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    color: ColorChoice,
    /// Exit with code 1 when a finding of this severity or higher is found, and with code 3
    /// when an input is cut short (its findings cover only what the file kept).
    #[arg(long, value_enum, value_name = "SEVERITY")]
    fail_on: Option<FailOn>,
    /// Compare the traces of a directory as ranks even when they are not one job (ranks
    /// repeated or missing, world sizes or GPU models that differ): the report then says so.
    #[arg(long)]
    force_job: bool,
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
    /// The trace with tracehound's tracks added (idle gaps by cause, findings, flows), for
    /// ui.perfetto.dev and chrome://tracing; gzip when the path ends in .gz.
    Perfetto,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// Trace files (and nvidia-smi logs beside them).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Where to write the report (.md, .json, .html, .xml; .perfetto.json or .perfetto.json.gz
    /// for the Perfetto overlay).
    #[arg(short, long, value_name = "PATH")]
    output: PathBuf,
    /// The format, when the extension does not say it.
    #[arg(long, value_enum)]
    format: Option<ReportFormat>,
    /// Show at most N findings per trace (as `analyze --top`).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Exit with code 1 when a finding of this severity or higher is found (3 when an input
    /// is cut short); in JUnit, the severity from which a finding fails its test case
    /// (default low).
    #[arg(long, value_enum, value_name = "SEVERITY")]
    fail_on: Option<FailOn>,
    #[command(flatten)]
    analysis: AnalysisArgs,
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
    /// PCT percent, and with code 3 when either capture is cut short.
    #[arg(long, value_name = "PCT")]
    fail_on_regression: Option<f64>,
    /// Kernels and operators shown, the largest changes first.
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,
    #[command(flatten)]
    analysis: AnalysisArgs,
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
    let base = Options {
        memory_limit: cli.max_memory.unwrap_or_default(),
        ..Options::default()
    };
    let result = match cli.command {
        Command::Analyze(args) => analyze(args, base),
        Command::Info {
            files,
            format,
            analysis,
        } => info(files, format, &analysis.options(base)),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "tracehound", &mut out);
            write_bytes(&out, "writing the completion script").map(|()| 0)
        }
        Command::Man => {
            use clap::CommandFactory;
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .context("rendering the manual page")
                .map_err(Error::from)
                .and_then(|()| write_bytes(&out, "writing the manual page"))
                .map(|()| 0)
        }
        Command::Merge(args) => merge(args),
        Command::Report(args) => report_cmd(args, base),
        Command::Sql {
            args,
            format,
            csv,
            json,
            analysis,
        } => sql_cmd(
            args,
            csv || format == TableFormat::Csv,
            json || format == TableFormat::Json,
            &analysis.options(base),
        ),
        Command::Export {
            files,
            parquet,
            csv,
            analysis,
        } => export_cmd(files, parquet, csv, &analysis.options(base)),
        Command::Diff(args) => diff(args, base),
        Command::Tui { files, analysis } => tui(files, analysis.options(base)),
        Command::Summary {
            files,
            format,
            csv,
            steps,
            top,
            analysis,
        } => {
            let format = if csv { TableFormat::Csv } else { format };
            summary(files, format, steps, top, &analysis.options(base))
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`tracehound analyze x | head`) is not an error worth a message.
            if let Error::Other(a) = &e
                && a.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return 0;
            }
            for m in e.messages() {
                eprintln!("tracehound: error: {m}");
            }
            e.exit_code()
        }
    }
}

/// Says a warning on stderr.
fn warn(message: &str) {
    eprintln!("tracehound: warning: {message}");
}

/// Says a note on stderr.
fn note(message: &str) {
    eprintln!("tracehound: note: {message}");
}

/// The inputs opened the one way every command opens them ([`pipeline::open`]), after saying
/// what loading warned of; an error for the files that could not be read.
fn open(files: &[PathBuf], options: &Options, how: pipeline::How) -> Result<Vec<pipeline::Opened>> {
    let opening = pipeline::open(files, options, how, &progress)?;
    for w in &opening.warnings {
        warn(w);
    }
    opening.into_result()
}

/// Sessions, analysed: what `analyze`, `report` and the TUI show.
const ANALYSED: pipeline::How = pipeline::How {
    sessions: true,
    analyse: true,
};

/// The exit code of a gate: [`EXIT_INCOMPLETE`] when it is set and an input is cut short,
/// else [`EXIT_FINDINGS`] when it is set and a finding reaches its severity, else 0.
fn gate<'f>(
    fail_on: Option<FailOn>,
    incomplete: bool,
    findings: impl IntoIterator<Item = &'f Finding>,
) -> i32 {
    let Some(f) = fail_on else {
        return 0;
    };
    if incomplete {
        return EXIT_INCOMPLETE;
    }
    let th = f.severity();
    if findings.into_iter().any(|x| x.severity >= th) {
        EXIT_FINDINGS
    } else {
        0
    }
}

fn analyze(args: AnalyzeArgs, base: Options) -> Result<i32> {
    let opts = args.analysis.options(base);
    opts.check()?;
    if args.rank_summary.is_some() && args.files.iter().any(|f| f.is_dir()) {
        return Err(Error::Usage(
            "--rank-summary summarises one rank: give one trace file, not a directory".into(),
        ));
    }
    if let Some(dir) = opts.job_dir(&args.files)? {
        let (name, (ranks, findings), incomplete) = job(dir, &opts, args.force_job)?;
        print_job(&name, &ranks, &findings, args.format)?;
        return Ok(gate(
            args.fail_on,
            incomplete,
            findings
                .iter()
                .chain(ranks.iter().flat_map(|r| r.findings.iter())),
        ));
    }
    let mut clock = tracehound_parsers::timing::Phases::start();
    let opened = open(&args.files, &opts, ANALYSED)?;
    clock.mark("cli: load and analyze");
    let reports = reports(&opened);
    let format = report_format(args.format)?;
    if let Some(out) = &args.rank_summary {
        let [r] = reports.as_slice() else {
            return Err(Error::Usage(format!(
                "--rank-summary summarises one rank: give one trace file ({} traces given)",
                reports.len()
            )));
        };
        let text = pipeline::rank_summary(r.trace, &r.analysis, args.rank)?;
        report::write_atomic(out, text.as_bytes())
            .with_context(|| format!("writing {}", out.display()))?;
    }
    let mut text = report::render(&reports, format, args.top);
    if matches!(format, Format::Table)
        && let Some(term) = terminal(args.color)
    {
        text = report::table::for_terminal(&text, term);
    }
    clock.mark("cli: render");
    write_stdout(&text, "writing the report")?;
    let code = gate(
        args.fail_on,
        opened.iter().any(pipeline::Opened::incomplete),
        reports.iter().flat_map(|r| r.analysis.findings.iter()),
    );
    leave_to_exit(reports);
    leave_to_exit(opened);
    Ok(code)
}

/// Leaves `what` to the end of the process, which follows the command: the operating system
/// takes its memory back at once, where dropping it frees every list, name and gap part one
/// by one (45 ms of the 1 GB trace's `analyze`, for nothing). Nothing in a trace or an
/// analysis holds a file or a buffer that needs closing.
fn leave_to_exit<T>(what: T) {
    std::mem::forget(what);
}

/// Each trace with its analysis, for the printers.
fn reports(opened: &[pipeline::Opened]) -> Vec<TraceReport<'_>> {
    opened
        .iter()
        .filter_map(|o| {
            Some(TraceReport {
                trace: &o.trace,
                analysis: std::borrow::Cow::Borrowed(o.analysis.as_ref()?),
            })
        })
        .collect()
}

/// How the table is shown when standard output is a terminal: its width (`COLUMNS`, else
/// the terminal's own, else 100) and whether to colour (`--color`, and `NO_COLOR` for auto).
/// None for a pipe or a file, which get the plain table, unless `--color always`.
fn terminal(color: ColorChoice) -> Option<report::table::Terminal> {
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    let colour = match color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    if !tty && !colour {
        return None;
    }
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .or_else(terminal_width)
        .unwrap_or(100);
    Some(report::table::Terminal {
        width: if tty { width } else { usize::MAX },
        colour,
    })
}

/// The terminal's width in columns, when the TUI's terminal library is built in.
fn terminal_width() -> Option<usize> {
    #[cfg(feature = "tui")]
    {
        crossterm::terminal::size()
            .ok()
            .map(|(w, _)| usize::from(w))
    }
    #[cfg(not(feature = "tui"))]
    {
        None
    }
}

fn write_bytes(bytes: &[u8], what: &'static str) -> Result<()> {
    std::io::stdout().lock().write_all(bytes).context(what)?;
    Ok(())
}

fn write_stdout(text: &str, what: &'static str) -> Result<()> {
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context(what)?;
    Ok(())
}

fn summary(
    files: Vec<PathBuf>,
    format: TableFormat,
    steps: bool,
    top: usize,
    opts: &Options,
) -> Result<i32> {
    let how = pipeline::How {
        sessions: false,
        analyse: false,
    };
    let opened = open(&files, opts, how)?;
    let mut out = String::new();
    let mut json = Vec::new();
    for o in &opened {
        let t = &o.trace;
        let window = o.window();
        let scope = if steps { Some(&window) } else { None };
        let kernels = tracehound_heuristics::tables::kernel_summary(t, scope);
        let memory = tracehound_heuristics::tables::memory_summary(t, scope);
        let label = if steps {
            format!("window: {}", window.describe())
        } else {
            "whole trace".to_string()
        };
        match format {
            TableFormat::Csv => {
                out.push_str(&report::tables::kernels_csv(&kernels));
                out.push('\n');
                out.push_str(&report::tables::memory_csv(&memory));
            }
            TableFormat::Table => {
                out.push_str(&report::tables::text(
                    &t.source, &label, &kernels, &memory, top,
                ));
                out.push('\n');
            }
            TableFormat::Json => json.push(serde_json::json!({
                "file": t.source,
                "scope": label,
                "kernels": kernels,
                "memory": memory,
            })),
        }
    }
    if format == TableFormat::Json {
        out = serde_json::to_string_pretty(&json).context("writing the summary as JSON")?;
        out.push('\n');
    }
    write_stdout(&out, "writing the report")?;
    Ok(0)
}

/// A progress bar on stderr for files over 64 MB, when stderr is a terminal.
fn progress(
    path: &std::path::Path,
    options: &mut tracehound_parsers::LoadOptions,
) -> Option<Box<dyn FnOnce()>> {
    use std::io::IsTerminal;
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size < 64 << 20 || !std::io::stderr().is_terminal() {
        return None;
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
    Some(Box::new(move || bar.finish_and_clear()))
}

/// The job in `dir` ([`pipeline::read_job`]), after saying its warnings and notes; its name
/// (the directory, and that it is not one job when `force_job` compared such traces), and
/// whether a rank's trace is cut short.
fn job(
    dir: &std::path::Path,
    opts: &Options,
    force_job: bool,
) -> Result<(String, pipeline::JobAnalysis, bool)> {
    let (job, msgs) =
        pipeline::read_job(dir, &opts.config(None)?, &opts.load_options()?, force_job)?;
    for w in &msgs.warnings {
        warn(w);
    }
    for n in &msgs.notes {
        note(n);
    }
    let incomplete = !msgs.incomplete.is_empty();
    let name = if msgs.not_one_job {
        format!(
            "{} (not one job: traces compared as ranks with --force-job)",
            dir.display()
        )
    } else {
        dir.display().to_string()
    };
    job.map(|j| (name, j, incomplete))
        .ok_or(Error::Input(msgs.errors))
}

/// `merge`: the job report from rank summaries, as `analyze DIR` gives it.
fn merge(args: MergeArgs) -> Result<i32> {
    let ranks = pipeline::read_summaries(&args.summaries)?;
    let (name, (ranks, findings)) = pipeline::merge(ranks, args.name.clone())?;
    print_job(&name, &ranks, &findings, args.format)?;
    Ok(gate(
        args.fail_on,
        false,
        findings
            .iter()
            .chain(ranks.iter().flat_map(|r| r.findings.iter())),
    ))
}

/// Prints a job's report (`analyze DIR`, `merge`).
fn print_job(
    name: &str,
    ranks: &[tracehound_heuristics::job::RankSummary],
    findings: &[Finding],
    format: OutFormat,
) -> Result<()> {
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
    write_stdout(&text, "writing the report")
}

/// Opens files for the table commands, analysing them only when a table needs it.
#[cfg(feature = "sql")]
fn loaded_for_tables(
    files: &[PathBuf],
    analyse: bool,
    opts: &Options,
) -> Result<Vec<pipeline::Opened>> {
    open(
        files,
        opts,
        pipeline::How {
            sessions: true,
            analyse,
        },
    )
}

#[cfg(feature = "sql")]
fn sources(loaded: &[pipeline::Opened]) -> Vec<crate::tables::Source<'_>> {
    loaded
        .iter()
        .enumerate()
        .map(|(k, o)| crate::tables::Source {
            trace: &o.trace,
            window: o.window(),
            analysis: o.analysis.as_ref(),
            rank: o.trace.meta.rank.unwrap_or(k as i64),
        })
        .collect()
}

#[cfg(feature = "sql")]
fn sql_cmd(mut args: Vec<String>, csv: bool, json: bool, base: &Options) -> Result<i32> {
    // SAFETY: nothing has started a thread yet (loading, which starts the worker pool, comes
    // after), so no thread reads the environment while it is set.
    unsafe { crate::sql::show_whole_results() };
    let query = args.pop().unwrap_or_default();
    let files: Vec<PathBuf> = args.into_iter().map(PathBuf::from).collect();
    let analyse = crate::tables::named_in(&query)
        .iter()
        .any(|n| crate::tables::ANALYSED.contains(n));
    let loaded = loaded_for_tables(&files, analyse, base)?;
    let out = if csv {
        crate::sql::Output::Csv
    } else if json {
        crate::sql::Output::Json
    } else {
        crate::sql::Output::Table
    };
    Ok(crate::sql::query(&sources(&loaded), &query, out)?)
}

#[cfg(feature = "sql")]
fn export_cmd(
    files: Vec<PathBuf>,
    parquet: Option<PathBuf>,
    csv: Option<PathBuf>,
    base: &Options,
) -> Result<i32> {
    let (dir, is_parquet) = match (parquet, csv) {
        (Some(d), _) => (d, true),
        (None, Some(d)) => (d, false),
        (None, None) => return Err(Error::Usage("say where: --parquet DIR or --csv DIR".into())),
    };
    let loaded = loaded_for_tables(&files, true, base)?;
    Ok(crate::sql::export(&sources(&loaded), &dir, is_parquet)?)
}

#[cfg(not(feature = "sql"))]
fn sql_cmd(_: Vec<String>, _: bool, _: bool, _: &Options) -> Result<i32> {
    without_sql("sql")
}

#[cfg(not(feature = "sql"))]
fn export_cmd(_: Vec<PathBuf>, _: Option<PathBuf>, _: Option<PathBuf>, _: &Options) -> Result<i32> {
    without_sql("export")
}

#[cfg(not(feature = "sql"))]
fn without_sql(cmd: &str) -> Result<i32> {
    Err(Error::Usage(format!(
        "`{cmd}` needs tracehound built with the `sql` feature (polars): cargo install --path . --features sql, or cargo run --release --features sql -- {cmd} ..."
    )))
}

fn report_cmd(args: ReportArgs, base: Options) -> Result<i32> {
    let opts = args.analysis.options(base);
    opts.check()?;
    let ext = args
        .output
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let file_name = args
        .output
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let format = match (args.format, ext.as_deref()) {
        (Some(f), _) => f,
        (None, _)
            if file_name.ends_with(".perfetto.json")
                || file_name.ends_with(".perfetto.json.gz") =>
        {
            ReportFormat::Perfetto
        }
        (None, Some("md" | "markdown")) => ReportFormat::Md,
        (None, Some("json")) => ReportFormat::Json,
        (None, Some("html" | "htm")) => ReportFormat::Html,
        (None, Some("xml")) => ReportFormat::Junit,
        _ => {
            return Err(Error::Usage(format!(
                "{}: say the format with --format md|json|html|junit|perfetto, or end the path in .md, .json, .html, .xml or .perfetto.json(.gz)",
                args.output.display()
            )));
        }
    };
    let opened = open(&args.files, &opts, ANALYSED)?;
    let reports = reports(&opened);
    let fmt = match format {
        ReportFormat::Md => Format::Markdown,
        ReportFormat::Json => Format::Json,
        ReportFormat::Html => Format::Html,
        ReportFormat::Junit => Format::Junit(args.fail_on.map_or(Severity::Low, FailOn::severity)),
        ReportFormat::Perfetto => {
            let [r] = reports.as_slice() else {
                return Err(Error::Usage(format!(
                    "{}: the Perfetto overlay is of one trace (with the logs beside it); {} given",
                    args.output.display(),
                    reports.len()
                )));
            };
            let n = report::perfetto::write(&args.output, r.trace, &r.analysis)
                .with_context(|| format!("writing {}", args.output.display()))?;
            eprintln!(
                "tracehound: wrote {}: the trace's {} events, {} idle gaps, {} finding instances, {} flows; open it at https://ui.perfetto.dev",
                args.output.display(),
                n.original,
                n.gaps,
                n.instances,
                n.flows
            );
            return Ok(gate(
                args.fail_on,
                opened.iter().any(pipeline::Opened::incomplete),
                reports.iter().flat_map(|r| r.analysis.findings.iter()),
            ));
        }
    };
    let text = report::render(&reports, fmt, args.top);
    report::write_atomic(&args.output, text.as_bytes())
        .with_context(|| format!("writing {}", args.output.display()))?;
    eprintln!("tracehound: wrote {}", args.output.display());
    Ok(gate(
        args.fail_on,
        opened.iter().any(pipeline::Opened::incomplete),
        reports.iter().flat_map(|r| r.analysis.findings.iter()),
    ))
}

fn diff(args: DiffArgs, base: Options) -> Result<i32> {
    use crate::report::diff::Format as F;
    let opts = args.analysis.options(base);
    opts.check()?;
    let mut run = pipeline::diff(&args.before, &args.after, &opts, &progress)?;
    for d in &mut run.diffs {
        d.kernels.truncate(args.top);
        d.operators.truncate(args.top);
    }
    for w in &run.warnings {
        warn(w);
    }
    let format = match args.format {
        DiffFormat::Table => F::Text,
        DiffFormat::Md => F::Markdown,
        DiffFormat::Json => F::Json,
        DiffFormat::Html => F::Html,
    };
    write_stdout(
        &crate::report::diff::render(&run.diffs, format),
        "writing the diff",
    )?;
    if let Some(limit) = args.fail_on_regression {
        if !run.incomplete.is_empty() {
            eprintln!(
                "tracehound: {} cut short: a comparison with part of a capture cannot pass a gate",
                run.incomplete.join(", ")
            );
            return Ok(EXIT_INCOMPLETE);
        }
        for d in &run.diffs {
            let (what, p) = tracehound_heuristics::diff::regression_pct(d);
            if p > limit {
                eprintln!(
                    "tracehound: {what} got worse by {p:.1}% (more than {limit}%): {} -> {}",
                    d.before, d.after
                );
                return Ok(EXIT_FINDINGS);
            }
        }
    }
    Ok(0)
}

#[cfg(feature = "tui")]
fn tui(files: Vec<PathBuf>, opts: Options) -> Result<i32> {
    opts.check()?;
    let app = if files.len() == 1 && files[0].is_dir() {
        let (name, (ranks, findings), _) = job(&files[0], &opts, false)?;
        let mut app = crate::tui::app::App::new(None);
        app.job = Some((name, ranks, findings));
        app.screen = crate::tui::app::Screen::Job;
        app
    } else {
        let mut opened = open(&files, &opts, ANALYSED)?;
        if opened.is_empty() {
            return Err(Error::Usage("nothing to show".into()));
        }
        if opened.len() > 1 {
            note(&format!(
                "{} traces given; showing {} (open a directory to compare ranks)",
                opened.len(),
                opened[0].trace.source
            ));
        }
        let o = opened.swap_remove(0);
        let Some(a) = o.analysis else {
            return Err(Error::Usage("nothing to show".into()));
        };
        crate::tui::app::App::new(Some(crate::tui::app::Loaded::new(
            o.trace,
            a,
            o.config.gap_threshold_ns,
        )))
    };
    crate::tui::run(app, &opts)?;
    Ok(0)
}

#[cfg(not(feature = "tui"))]
fn tui(_: Vec<PathBuf>, _: Options) -> Result<i32> {
    Err(Error::Usage(
        "`tui` needs tracehound built with the `tui` feature (on by default): cargo install --path ., or cargo run --release -- tui ...".into(),
    ))
}

fn info(files: Vec<PathBuf>, format: InfoFormat, opts: &Options) -> Result<i32> {
    let how = pipeline::How {
        sessions: false,
        analyse: false,
    };
    let opened = open(&files, opts, how)?;
    let mut out = String::new();
    match format {
        InfoFormat::Table => {
            for o in &opened {
                out.push_str(&report::info(&o.trace));
            }
        }
        InfoFormat::Json => {
            let traces: Vec<&tracehound_parsers::Trace> = opened.iter().map(|o| &o.trace).collect();
            out = report::info_json(&traces);
        }
    }
    write_stdout(&out, "writing the report")?;
    leave_to_exit(opened);
    Ok(0)
}

/// The report format a `--format` value names, read by its name through [`Format`]'s parser,
/// the one the Python package's `report(format=...)` uses too.
fn report_format(value: impl ValueEnum) -> Result<Format> {
    let name = value
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    name.parse::<Format>().map_err(Error::Usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_report_format_the_cli_takes_is_one_the_shared_parser_knows() {
        let names = |values: Vec<Option<clap::builder::PossibleValue>>| -> Vec<String> {
            values
                .into_iter()
                .flatten()
                .map(|v| v.get_name().to_string())
                .collect()
        };
        let analyze = names(
            OutFormat::value_variants()
                .iter()
                .map(|v| v.to_possible_value())
                .collect(),
        );
        assert_eq!(analyze, ["table", "json", "md"]);
        for v in OutFormat::value_variants() {
            assert!(report_format(*v).is_ok());
        }
        let report = names(
            ReportFormat::value_variants()
                .iter()
                .map(|v| v.to_possible_value())
                .collect(),
        );
        for name in report.iter().filter(|n| *n != "perfetto") {
            assert!(name.parse::<Format>().is_ok(), "{name}");
        }
        assert_eq!("markdown".parse::<Format>(), Ok(Format::Markdown));
        assert!("pdf".parse::<Format>().is_err());
    }
}
