//! One pipeline from options to analyses, for every command and for the Python package: the
//! options become load options and a [`Config`] here, files are loaded and grouped into
//! sessions (a trace with the nvidia-smi logs recorded beside it) here, and traces, jobs and
//! rank summaries are analysed here. Nothing here prints: the front ends show what comes back,
//! and an [`Error`] carries its exit code.

use anyhow::Context;
use std::path::{Path, PathBuf};
use tracehound_heuristics::job::{RankSummary, assemble};
use tracehound_heuristics::{Analysis, Config, Finding};
use tracehound_parsers::budget::MemoryLimit;
use tracehound_parsers::{LoadError, LoadOptions, Trace};

/// Why the pipeline stopped. The command line exits 2 for each ([`Error::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad option, or arguments that do not go together.
    #[error("{0}")]
    Usage(String),
    /// Input that cannot be used: one message per problem, each naming its file.
    #[error("{}", .0.join("\n"))]
    Input(Vec<String>),
    /// Anything else (a directory that cannot be listed, a file that cannot be written), with
    /// what was being done.
    #[error("{0:#}")]
    Other(#[from] anyhow::Error),
}

impl Error {
    /// The command line's exit code for it: 2, bad input or usage.
    pub fn exit_code(&self) -> i32 {
        2
    }

    /// Its messages, one per line of output.
    pub fn messages(&self) -> Vec<String> {
        match self {
            Error::Input(m) => m.clone(),
            e => vec![e.to_string()],
        }
    }
}

/// The result of a pipeline step.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which front end the messages name options for: the command line's flags or the Python
/// package's keyword arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Front {
    /// `--gap-threshold-us`.
    #[default]
    Cli,
    /// `gap_threshold_us`.
    Python,
}

/// The options every command and the Python package take, as given.
#[derive(Debug, Clone)]
pub struct Options {
    /// Whose words the messages use.
    pub front: Front,
    /// GPU idle intervals shorter than this are not gaps, µs.
    pub gap_threshold_us: f64,
    /// The analysed window in ms from the trace's first event, instead of its steps.
    pub window_ms: Option<(f64, f64)>,
    /// Hours east of UTC that the nvidia-smi logs' local timestamps are in.
    pub utc_offset_h: Option<f64>,
    /// Refuse a file estimated to need more memory than this.
    pub memory_limit: MemoryLimit,
    /// Run only these rules (ids); None runs every rule.
    pub rules: Option<Vec<String>>,
    /// Do not run these rules (ids).
    pub skip_rules: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            front: Front::Cli,
            gap_threshold_us: Config::default().gap_threshold_ns as f64 / 1000.0,
            window_ms: None,
            utc_offset_h: None,
            memory_limit: MemoryLimit::default(),
            rules: None,
            skip_rules: Vec::new(),
        }
    }
}

/// `--max-memory SIZE`: `64G`, `512M`, `0` (no check); the message says what is wrong.
pub fn parse_memory_limit(s: &str) -> Result<MemoryLimit, String> {
    tracehound_parsers::budget::parse_size(s)
        .ok_or_else(|| format!("`{s}` is not a size: write it like 64G, 512M or 0"))
}

impl Options {
    fn name(&self, cli: &'static str, python: &'static str) -> &'static str {
        match self.front {
            Front::Cli => cli,
            Front::Python => python,
        }
    }

    /// Checks every option, so that a bad one is refused before any file is read.
    pub fn check(&self) -> Result<()> {
        self.gap_threshold_ns()?;
        self.utc_offset_s()?;
        let ids: Vec<&str> = tracehound_heuristics::rules::all()
            .iter()
            .map(|r| r.id())
            .collect();
        for (flag, py, list) in [
            (
                "--rules",
                "rules",
                self.rules.as_deref().unwrap_or_default(),
            ),
            ("--skip-rules", "skip_rules", self.skip_rules.as_slice()),
        ] {
            if let Some(bad) = list.iter().find(|r| !ids.contains(&r.as_str())) {
                return Err(Error::Usage(format!(
                    "{}: there is no rule `{bad}`; the rules are {}",
                    self.name(flag, py),
                    ids.join(", ")
                )));
            }
        }
        if let Some((a, b)) = self.window_ms
            && !(a.is_finite() && b.is_finite() && a < b)
        {
            return Err(Error::Usage(format!(
                "{} needs START_MS < END_MS",
                self.name("--window START_MS END_MS", "window_ms (START_MS, END_MS)")
            )));
        }
        Ok(())
    }

    fn gap_threshold_ns(&self) -> Result<i64> {
        let us = self.gap_threshold_us;
        if !(us.is_finite() && us > 0.0) {
            return Err(Error::Usage(format!(
                "{} must be a positive number of microseconds",
                self.name("--gap-threshold-us", "gap_threshold_us")
            )));
        }
        Ok((us * 1000.0).round() as i64)
    }

    fn utc_offset_s(&self) -> Result<Option<i64>> {
        match self.utc_offset_h {
            Some(h) if h.is_finite() && h.abs() <= 14.0 => Ok(Some((h * 3600.0).round() as i64)),
            Some(_) => Err(Error::Usage(format!(
                "{} takes hours east of UTC, between -14 and 14",
                self.name("--utc-offset", "utc_offset")
            ))),
            None => Ok(None),
        }
    }

    /// What the readers are given: the memory limit and the logs' UTC offset.
    pub fn load_options(&self) -> Result<LoadOptions> {
        Ok(LoadOptions {
            utc_offset_s: self.utc_offset_s()?,
            memory_limit: self.memory_limit,
            ..Default::default()
        })
    }

    /// The settings of the analysis of `trace` (whose first event the window counts from;
    /// none for a job, whose ranks are analysed over their own steps).
    pub fn config(&self, trace: Option<&Trace>) -> Result<Config> {
        self.check()?;
        let mut config = Config {
            gap_threshold_ns: self.gap_threshold_ns()?,
            rules: self.rules.clone(),
            skip_rules: self.skip_rules.clone(),
            ..Config::default()
        };
        if let Some((a, b)) = self.window_ms {
            let origin = trace.and_then(|t| t.span()).map_or(0, |s| s.0);
            config.window = Some((origin + (a * 1e6) as i64, origin + (b * 1e6) as i64));
        }
        Ok(config)
    }

    /// The job directory the inputs name, if they name one; a directory given with other
    /// inputs, or a window for a job, is refused.
    pub fn job_dir<'p>(&self, inputs: &'p [PathBuf]) -> Result<Option<&'p Path>> {
        if !inputs.iter().any(|p| p.is_dir()) {
            return Ok(None);
        }
        let [dir] = inputs else {
            return Err(Error::Usage(
                "give one directory (the job's rank traces) and nothing else".into(),
            ));
        };
        // Ranks start at different moments: a window in ms from each trace's first event
        // would cut each rank somewhere else, so a job is analysed over its ranks' own steps.
        if self.window_ms.is_some() {
            return Err(Error::Usage(format!(
                "{} applies to one trace, not a job directory: analyse the rank's trace with it",
                self.name("--window", "window_ms")
            )));
        }
        Ok(Some(dir))
    }
}

/// Shows a file's loading progress (the command line's progress bar): called before each file
/// with its load options, it may set their progress counter and returns what finishes it.
pub type Progress<'a> = &'a dyn Fn(&Path, &mut LoadOptions) -> Option<Box<dyn FnOnce()>>;

/// No progress shown.
pub fn no_progress(_: &Path, _: &mut LoadOptions) -> Option<Box<dyn FnOnce()>> {
    None
}

/// Loaded traces, and what loading said about them.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The traces, in the order of the files (grouped into sessions by [`session`]).
    pub traces: Vec<Trace>,
    /// Warnings, each naming its file, in the order they arose.
    pub warnings: Vec<String>,
    /// The files that could not be read, each message naming its file. The front end says
    /// the warnings of the files that loaded, then fails with these.
    pub errors: Vec<String>,
}

/// Loads every file (all of them, so that each bad one is named).
pub fn load(files: &[PathBuf], options: &LoadOptions, progress: Progress) -> Loaded {
    let mut out = Loaded::default();
    for f in files {
        let mut options = options.clone();
        let finish = progress(f, &mut options);
        let loaded = tracehound_parsers::load_with(f, options);
        if let Some(finish) = finish {
            finish();
        }
        match loaded {
            Ok(t) => {
                out.warnings
                    .extend(t.warnings.iter().map(|w| format!("{}: {w}", f.display())));
                out.traces.push(t);
            }
            Err(e) => out.errors.push(e.to_string()),
        }
    }
    out
}

/// Loads the files and groups them into sessions ([`group_sessions`]); the warnings of
/// attaching logs follow those of loading. Nothing is grouped when a file could not be read.
pub fn session(files: &[PathBuf], options: &LoadOptions, progress: Progress) -> Loaded {
    let loaded = load(files, options, progress);
    if !loaded.errors.is_empty() {
        return loaded;
    }
    let (traces, attach) = group_sessions(loaded.traces);
    let mut warnings = loaded.warnings;
    warnings.extend(attach);
    Loaded {
        traces,
        warnings,
        errors: Vec::new(),
    }
}

/// A trace opened by [`open`]: the settings it is analysed with and, when asked for, its
/// analysis.
#[derive(Debug)]
pub struct Opened {
    /// The trace (a session: with the logs recorded beside it, when grouped).
    pub trace: Trace,
    /// The settings of its analysis (window, gap threshold), from the options.
    pub config: Config,
    /// Its analysis, when [`How::analyse`] asked for one.
    pub analysis: Option<Analysis>,
}

impl Opened {
    /// The analysed window: the analysis's, or the one its settings give.
    pub fn window(&self) -> tracehound_heuristics::Window {
        match &self.analysis {
            Some(a) => a.summary.window.clone(),
            None => tracehound_heuristics::window::analysed_window(&self.trace, &self.config),
        }
    }

    /// Whether its file ends before the trace does.
    pub fn incomplete(&self) -> bool {
        self.trace.stats.truncated
    }
}

/// How [`open`] treats the files.
#[derive(Debug, Clone, Copy)]
pub struct How {
    /// Group the files into sessions (a trace with its nvidia-smi logs), as every command but
    /// `info` does; else each file stands alone.
    pub sessions: bool,
    /// Analyse each trace (not needed to describe a file or list its tables).
    pub analyse: bool,
}

/// What [`open`] gave: the traces, and what loading them said.
#[derive(Debug, Default)]
pub struct Opening {
    /// The traces, in the order of the files.
    pub opened: Vec<Opened>,
    /// Warnings, each naming its file, in the order they arose (an incomplete capture's
    /// first of its file's).
    pub warnings: Vec<String>,
    /// The files that could not be read, each message naming its file.
    pub errors: Vec<String>,
}

impl Opening {
    /// The traces, or an error listing the files that could not be read.
    pub fn into_result(self) -> Result<Vec<Opened>> {
        if self.errors.is_empty() {
            Ok(self.opened)
        } else {
            Err(Error::Input(self.errors))
        }
    }
}

/// Opens the inputs of a command or of the Python package, the one way they are all opened:
/// the options checked, every file loaded with the same load options (all of them, so that
/// each bad one is named), grouped into sessions when asked, and each trace analysed with the
/// options' settings. A bad option is an error before any file is read; the files that could
/// not be read come back in [`Opening::errors`], beside the warnings of those that could.
pub fn open(files: &[PathBuf], options: &Options, how: How, progress: Progress) -> Result<Opening> {
    options.check()?;
    let load_options = options.load_options()?;
    let loaded = if how.sessions {
        session(files, &load_options, progress)
    } else {
        load(files, &load_options, progress)
    };
    let mut out = Opening {
        warnings: loaded.warnings,
        errors: loaded.errors,
        ..Default::default()
    };
    if !out.errors.is_empty() {
        return Ok(out);
    }
    for trace in loaded.traces {
        let config = options.config(Some(&trace))?;
        let analysis = how
            .analyse
            .then(|| tracehound_heuristics::analyze(&trace, &config));
        out.opened.push(Opened {
            trace,
            config,
            analysis,
        });
    }
    Ok(out)
}

/// Groups loaded files into sessions: each GPU trace with the counter logs and GPU
/// inventories recorded beside it (or, without a GPU trace, the counter logs with the
/// inventories). Returns the sessions and why a log could not be attached (also kept in the
/// trace's warnings).
pub fn group_sessions(loaded: Vec<Trace>) -> (Vec<Trace>, Vec<String>) {
    let mut warnings = Vec::new();
    let (mut primaries, mut aux): (Vec<_>, Vec<_>) = loaded.into_iter().partition(is_rank_trace);
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

/// Whether a trace records a process's GPU work (Kineto or Nsight Systems), as opposed to a
/// counter log or a GPU inventory.
pub fn is_rank_trace(t: &Trace) -> bool {
    t.meta.format.is_some_and(|f| f.records_gpu_work)
}

/// A job's ranks (sorted by rank) and its job-level findings.
pub type JobAnalysis = (Vec<RankSummary>, Vec<Finding>);

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
    /// The rank traces cut short (their files end before the trace does).
    pub incomplete: Vec<String>,
    /// Whether the traces are not one job and were compared as ranks all the same
    /// (`--force-job`): the report says so.
    pub not_one_job: bool,
}

/// The ranks of the job in `dir`, analysed a few at a time with bounded memory, sorted by
/// rank, and the job findings (collectives matched across ranks); None, with the errors in
/// the messages, when the directory holds no readable rank trace or a broken one. Every
/// trace in the directory is one rank; each is dropped once summarised, so memory holds at
/// most one trace per worker however many ranks there are.
pub fn read_job(
    dir: &Path,
    config: &Config,
    options: &LoadOptions,
    force_job: bool,
) -> Result<(Option<JobAnalysis>, JobMessages)> {
    use rayon::prelude::*;
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
    let results: Vec<Result<RankFile, LoadError>> = pool.install(|| {
        files
            .par_iter()
            .map(|f| read_rank(f, config, options.clone()))
            .collect()
    });
    let mut ranks = Vec::new();
    let mut facts = Vec::new();
    for r in results {
        match r {
            Ok(RankFile::Rank(s, known, w, f)) => {
                ranks.push((*s, known));
                msgs.warnings.extend(w);
                facts.push(f);
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
    msgs.incomplete = facts
        .iter()
        .filter(|f| f.incomplete)
        .map(|f| f.source.clone())
        .collect();
    let (errors, warnings) = one_job(&facts);
    msgs.not_one_job = !errors.is_empty();
    if force_job {
        // Compared on purpose: what makes them not one job is said, not refused.
        msgs.warnings.extend(
            errors
                .into_iter()
                .map(|e| format!("{e}; compared as ranks all the same (--force-job)")),
        );
    } else {
        msgs.errors.extend(errors);
    }
    msgs.warnings.extend(warnings);
    if !msgs.errors.is_empty() {
        return Ok((None, msgs));
    }
    Ok((Some(assemble(ranks)), msgs))
}

/// Whether the traces of a directory form one job: each recorded rank once and one world size
/// (else the errors say which files disagree), on one GPU model (else a warning). A directory
/// of unrelated traces would otherwise be compared as ranks of one job ("rank 0 is 603%
/// slower").
pub fn one_job(facts: &[JobFacts]) -> (Vec<String>, Vec<String>) {
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    let mut by_rank: std::collections::BTreeMap<i64, Vec<&str>> = Default::default();
    for f in facts {
        if let Some(r) = f.rank {
            by_rank.entry(r).or_default().push(&f.source);
        }
    }
    for (r, files) in &by_rank {
        if files.len() > 1 {
            errors.push(format!(
                "{} all record rank {r}: these are not the ranks of one job (give each rank's trace once, analyse the traces one by one, or pass --force-job to compare them all the same)",
                files.join(", ")
            ));
        }
    }
    // A rank is known from the trace (Kineto's distributedInfo, an nsys export's rank): a
    // directory where some traces record one and others none holds traces of more than one
    // run, and one where none does is one job's only when the ranks ran on one GPU model.
    let (known, unknown): (Vec<&JobFacts>, Vec<&JobFacts>) =
        facts.iter().partition(|f| f.rank.is_some());
    if !known.is_empty() && !unknown.is_empty() {
        errors.push(format!(
            "{} record a rank and {} record none: these are not the ranks of one job (analyse the traces one by one, or pass --force-job to compare them all the same)",
            names(&known),
            names(&unknown)
        ));
    }
    let models = |fs: &[&JobFacts]| -> std::collections::BTreeSet<String> {
        fs.iter().filter_map(|f| f.gpu.clone()).collect()
    };
    if known.is_empty() && unknown.len() > 1 && models(&unknown).len() > 1 {
        errors.push(format!(
            "{} record no rank and ran on different GPU models ({}): nothing says they are the ranks of one job (analyse the traces one by one, or pass --force-job to compare them all the same)",
            names(&unknown),
            models(&unknown).into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let sizes: std::collections::BTreeSet<i64> =
        facts.iter().filter_map(|f| f.world_size).collect();
    if sizes.len() > 1 {
        let each: Vec<String> = facts
            .iter()
            .filter_map(|f| {
                f.world_size
                    .map(|w| format!("{} (world size {w})", f.source))
            })
            .collect();
        errors.push(format!(
            "the traces record different world sizes, so they are not one job (pass --force-job to compare them all the same): {}",
            each.join(", ")
        ));
    }
    let gpus: std::collections::BTreeSet<&str> =
        facts.iter().filter_map(|f| f.gpu.as_deref()).collect();
    if gpus.len() > 1 && !known.is_empty() {
        warnings.push(format!(
            "the ranks ran on different GPU models ({}): a job's ranks usually share one; compare their times with care",
            gpus.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    (errors, warnings)
}

/// The files of `facts`, comma-separated.
fn names(facts: &[&JobFacts]) -> String {
    facts
        .iter()
        .map(|f| f.source.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a rank's trace says about the job it belongs to, to check that the files of a
/// directory form one job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFacts {
    /// The file.
    pub source: String,
    /// The rank it records.
    pub rank: Option<i64>,
    /// The world size it records.
    pub world_size: Option<i64>,
    /// The GPU model its work ran on.
    pub gpu: Option<String>,
    /// Whether its file ends before the trace does.
    pub incomplete: bool,
}

/// One file of a job, as the job reads it.
pub enum RankFile {
    /// A rank trace: its summary, whether the trace recorded the rank (else the summary says
    /// rank 0), the loader's warnings, each naming the file, and what it says of its job.
    Rank(Box<RankSummary>, bool, Vec<String>, JobFacts),
    /// Not a rank trace (a truth file, a counter log, not a trace at all): why, naming the
    /// file. A job skips it.
    Skipped(String),
}

/// Reads, analyses and summarises one file of a job (the map of a job analysis, for
/// `analyze DIR` and the Python package); an error for a broken trace.
pub fn read_rank(
    path: &Path,
    config: &Config,
    options: LoadOptions,
) -> Result<RankFile, LoadError> {
    let t = match tracehound_parsers::load_with(path, options) {
        Ok(t) => t,
        Err(e @ LoadError::NotATrace { .. }) => {
            return Ok(RankFile::Skipped(e.to_string()));
        }
        Err(e) => return Err(e),
    };
    if !is_rank_trace(&t) {
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
    let summary = RankSummary::new(&t, t.meta.rank.unwrap_or(0), &a);
    let devices = t.devices();
    let facts = JobFacts {
        source: path.display().to_string(),
        rank: t.meta.rank,
        world_size: t.meta.world_size,
        gpu: t
            .meta
            .gpus
            .iter()
            .find(|g| devices.contains(&g.id) && !g.name.is_empty())
            .map(|g| g.name.clone()),
        incomplete: t.stats.truncated,
    };
    Ok(RankFile::Rank(
        Box::new(summary),
        t.meta.rank.is_some(),
        warnings,
        facts,
    ))
}

/// One rank's summary file for `merge` (JSON text), with the rank the trace records, else
/// `rank`; refused for a file that is not a rank's trace.
pub fn rank_summary(trace: &Trace, analysis: &Analysis, rank: Option<i64>) -> Result<String> {
    if !is_rank_trace(trace) {
        return Err(Error::Input(vec![format!(
            "{}: --rank-summary needs a rank's trace (Kineto or Nsight Systems), not a counter log or GPU inventory",
            trace.source
        )]));
    }
    let known = trace.meta.rank.or(rank);
    let summary = RankSummary::new(trace, known.unwrap_or(0), analysis);
    Ok(summary.to_file_json(known.is_some(), env!("CARGO_PKG_VERSION")))
}

/// Rank summaries read back: each with whether its rank was recorded.
pub type Summaries = Vec<(RankSummary, bool)>;

/// Reads rank summary files (a directory stands for the files in it); an error lists each
/// file that is not a summary, or names two that summarise the same trace.
pub fn read_summaries(paths: &[PathBuf]) -> Result<Summaries> {
    use rayon::prelude::*;
    let mut files = Vec::new();
    for p in paths {
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
    let mut errors = Vec::new();
    for r in read {
        match r {
            Ok(x) => ranks.push(x),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(Error::Input(errors));
    }
    let mut seen = std::collections::BTreeMap::new();
    for (r, f) in ranks.iter().zip(&files) {
        if let Some(first) = seen.insert(r.0.source.as_str(), f) {
            return Err(Error::Input(vec![format!(
                "{} and {} summarise the same trace {}: give each rank once",
                first.display(),
                f.display(),
                r.0.source
            )]));
        }
    }
    Ok(ranks)
}

/// The job from rank summaries (the reduce of a job analysis): its name (`name`, else
/// [`job_name`]), ranks and job findings.
pub fn merge(ranks: Summaries, name: Option<String>) -> Result<(String, JobAnalysis)> {
    if ranks.is_empty() {
        return Err(Error::Input(vec!["no rank summaries given".into()]));
    }
    let name = name.unwrap_or_else(|| job_name(ranks.iter().map(|r| r.0.source.as_str())));
    Ok((name, assemble(ranks)))
}

/// A job's name from its ranks' trace paths: the directory holding them all (what
/// `analyze DIR` is given), else how many ranks there are.
pub fn job_name<'a>(sources: impl Iterator<Item = &'a str>) -> String {
    let mut dirs = sources.map(|s| Path::new(s).parent());
    let n = dirs.size_hint().0;
    match dirs.next() {
        Some(Some(first)) if dirs.all(|d| d == Some(first)) => first.display().to_string(),
        _ => format!("{n} ranks"),
    }
}

/// Pairs of files to compare: the two files, or the files of the same name in two
/// directories (a job rank by rank).
pub fn diff_pairs(before: &Path, after: &Path) -> Result<Vec<(PathBuf, PathBuf)>> {
    if before.is_dir() && after.is_dir() {
        let mut names: Vec<_> = std::fs::read_dir(before)
            .with_context(|| format!("reading {}", before.display()))?
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .filter(|n| after.join(n).is_file() && before.join(n).is_file())
            .collect();
        names.sort();
        Ok(names
            .into_iter()
            .map(|n| (before.join(&n), after.join(&n)))
            .collect())
    } else {
        Ok(vec![(before.to_path_buf(), after.to_path_buf())])
    }
}

/// What `tracehound diff` found: the comparisons, and what loading the files said.
#[derive(Debug, Default)]
pub struct DiffRun {
    /// Each pair of [`diff_pairs`] compared.
    pub diffs: Vec<tracehound_heuristics::diff::Diff>,
    /// The loaders' warnings, each naming its file.
    pub warnings: Vec<String>,
    /// The files cut short (their traces end early: a comparison with them is of a part).
    pub incomplete: Vec<String>,
}

/// The comparisons of `tracehound diff`: each pair of [`diff_pairs`] opened ([`open`]),
/// analysed and compared. A file that cannot be read fails the run.
pub fn diff(before: &Path, after: &Path, options: &Options, progress: Progress) -> Result<DiffRun> {
    let pairs = diff_pairs(before, after)?;
    if pairs.is_empty() {
        return Err(Error::Input(vec![format!(
            "{} and {}: no files of the same name to compare",
            before.display(),
            after.display()
        )]));
    }
    let how = How {
        sessions: false,
        analyse: true,
    };
    let mut run = DiffRun::default();
    for (b, a) in pairs {
        let opening = open(&[b, a], options, how, progress)?;
        run.warnings.extend(opening.warnings);
        if !opening.errors.is_empty() {
            return Err(Error::Input(opening.errors));
        }
        let [tb, ta] = <[Opened; 2]>::try_from(opening.opened)
            .map_err(|_| Error::Usage("diff compares two traces".into()))?;
        for t in [&tb, &ta] {
            if t.incomplete() {
                run.incomplete.push(t.trace.source.clone());
            }
        }
        let (Some(ab), Some(aa)) = (&tb.analysis, &ta.analysis) else {
            continue;
        };
        run.diffs.push(tracehound_heuristics::diff::compare(
            &tb.trace, ab, &ta.trace, aa,
        ));
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(source: &str, rank: Option<i64>, world: Option<i64>, gpu: &str) -> JobFacts {
        JobFacts {
            source: source.into(),
            rank,
            world_size: world,
            gpu: Some(gpu.into()),
            incomplete: false,
        }
    }

    #[test]
    fn files_that_are_not_one_job_are_refused() {
        let ok = [
            rank("r0", Some(0), Some(2), "NVIDIA H200"),
            rank("r1", Some(1), Some(2), "NVIDIA H200"),
        ];
        assert_eq!(one_job(&ok), (vec![], vec![]));
        // Three unrelated traces: two record rank 0, world sizes 64, 8 and none, GPU models
        // of three kinds.
        let mixed = [
            rank("a", Some(0), Some(64), "NVIDIA A100-SXM4-80GB"),
            rank("b", Some(0), Some(8), "Tesla V100-SXM2-16GB"),
            rank("c", None, None, "NVIDIA H100"),
        ];
        let (errors, warnings) = one_job(&mixed);
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors[0].starts_with("a, b all record rank 0"),
            "{}",
            errors[0]
        );
        assert!(
            errors[1].starts_with("a, b record a rank and c record none"),
            "{}",
            errors[1]
        );
        assert!(
            errors[2].contains("a (world size 64), b (world size 8)"),
            "{}",
            errors[2]
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("different GPU models"));
        // No trace records a rank: one job's only on one GPU model.
        let same = [
            rank("r0", None, None, "NVIDIA H200"),
            rank("r1", None, None, "NVIDIA H200"),
        ];
        assert_eq!(one_job(&same), (vec![], vec![]));
        let unrelated = [
            rank("x", None, None, "NVIDIA H200"),
            rank("y", None, None, "NVIDIA A100-SXM4-80GB"),
        ];
        let (errors, warnings) = one_job(&unrelated);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("x, y record no rank and ran on different GPU models"),
            "{}",
            errors[0]
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
