//! The native half of the `tracehound` Python package: loading, analysis, reports and the
//! model's tables, from the same crates and printers as the CLI. The Python half
//! (`tracehound/__init__.py`) wraps these in the documented API; everything here that takes
//! time (reading, parsing, analysing, building tables) runs with the GIL released.

use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::Arc;
use tracehound::pipeline::{self, Front, Options};
use tracehound::report::{self, Format, TraceReport};
use tracehound::tables::{self, Data};
use tracehound_heuristics::job::RankSummary;
use tracehound_heuristics::{Analysis, Finding};
use tracehound_parsers::Trace;

// Defined as `tracehound.TracehoundError`, where the package exports it, so that pickling (a
// Ray task's error crossing to the driver) finds the class by that name.
pyo3::create_exception!(
    tracehound,
    TracehoundError,
    PyException,
    "A trace or summary tracehound cannot read; the message is the CLI's."
);

fn err(msg: impl std::fmt::Display) -> PyErr {
    TracehoundError::new_err(msg.to_string())
}

/// The pipeline's options from the keyword arguments every entry point takes, named as
/// Python names them in messages.
fn options(
    gap_threshold_us: Option<f64>,
    window_ms: Option<(f64, f64)>,
    utc_offset_h: Option<f64>,
    max_memory: Option<String>,
    rules: Option<Vec<String>>,
    skip_rules: Option<Vec<String>>,
) -> PyResult<Options> {
    let memory_limit = match &max_memory {
        None => Default::default(),
        Some(s) => pipeline::parse_memory_limit(s).map_err(|e| err(format!("max_memory: {e}")))?,
    };
    let defaults = Options::default();
    Ok(Options {
        front: Front::Python,
        // None: the command line's default, written once in `Options::default`.
        gap_threshold_us: gap_threshold_us.unwrap_or(defaults.gap_threshold_us),
        window_ms,
        utc_offset_h,
        memory_limit,
        rules,
        skip_rules: skip_rules.unwrap_or_default(),
    })
}

/// Analysed traces, and the warnings of loading them.
type Loaded = (Vec<(Trace, Analysis)>, Vec<String>);

/// Opens the files as every command of the CLI does ([`pipeline::open`]: a trace with the
/// nvidia-smi logs beside it, each session analysed). Returns the analysed traces and the
/// warnings, each naming its file.
fn load_analyzed(paths: &[PathBuf], opts: &Options) -> PyResult<Loaded> {
    let how = pipeline::How {
        sessions: true,
        analyse: true,
    };
    let opening = pipeline::open(paths, opts, how, &pipeline::no_progress).map_err(err)?;
    let warnings = opening.warnings.clone();
    let opened = opening.into_result().map_err(err)?;
    Ok((
        opened
            .into_iter()
            .filter_map(|o| Some((o.trace, o.analysis?)))
            .collect(),
        warnings,
    ))
}

/// One analysed trace, kept in memory for its findings, summary, reports and tables.
#[pyclass(frozen, name = "NativeTrace", module = "tracehound._tracehound")]
struct NativeTrace {
    trace: Trace,
    analysis: Analysis,
    warnings: Vec<String>,
}

#[pymethods]
impl NativeTrace {
    /// The file it was read from.
    #[getter]
    fn source(&self) -> &str {
        &self.trace.source
    }

    /// The rank the trace records, if any.
    #[getter]
    fn rank(&self) -> Option<i64> {
        self.trace.meta.rank
    }

    /// What the loader warned about (each naming the file).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// The ranked findings, as the JSON report writes them.
    fn findings_json(&self) -> String {
        serde_json::to_string(&self.analysis.findings).unwrap_or_else(|_| "[]".into())
    }

    /// The summary (window, devices, verdict, roofline, memory-bound operators ...), as the JSON
    /// report writes it.
    fn summary_json(&self) -> String {
        serde_json::to_string(&self.analysis.summary).unwrap_or_else(|_| "{}".into())
    }

    /// The report in a CLI format: `table`, `json`, `md`, `html` or `junit`.
    #[pyo3(signature = (format = "table", top = None))]
    fn report(&self, py: Python<'_>, format: &str, top: Option<usize>) -> PyResult<String> {
        let format: Format = format.parse().map_err(err)?;
        Ok(py.detach(|| report::render(&[self.report_of()], format, top)))
    }

    /// The report's sections as an HTML fragment for a notebook.
    #[pyo3(signature = (top = None))]
    fn html(&self, top: Option<usize>) -> String {
        report::html_fragment(&self.report_of(), top)
    }

    /// This rank's summary file for `merge` (JSON text).
    #[pyo3(signature = (rank = None))]
    fn rank_summary(&self, rank: Option<i64>) -> PyResult<String> {
        pipeline::rank_summary(&self.trace, &self.analysis, rank).map_err(err)
    }

    /// The model's tables (docs/tables.md) as Arrow record batches handed to pyarrow through
    /// the Arrow C stream interface: `names` None gives every table.
    #[pyo3(signature = (names = None))]
    fn tables<'py>(
        &self,
        py: Python<'py>,
        names: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let names: Vec<String> =
            names.unwrap_or_else(|| tables::NAMES.iter().map(|n| n.to_string()).collect());
        for n in &names {
            if !tables::NAMES.contains(&n.as_str()) {
                return Err(err(format!(
                    "no table `{n}`: the tables are {}",
                    tables::NAMES.join(", ")
                )));
            }
        }
        let batches = py.detach(|| -> Result<Vec<(String, RecordBatch)>, String> {
            let source = tables::Source {
                trace: &self.trace,
                window: self.analysis.summary.window.clone(),
                analysis: Some(&self.analysis),
                rank: self.trace.meta.rank.unwrap_or(0),
            };
            names
                .iter()
                .filter_map(|n| tables::build(n, std::slice::from_ref(&source)))
                .map(|t| Ok((t.name.to_string(), to_arrow(t)?)))
                .collect()
        });
        let dict = PyDict::new(py);
        for (name, batch) in batches.map_err(err)? {
            let schema = batch.schema();
            let table = pyo3_arrow::PyTable::try_new(vec![batch], schema)?;
            dict.set_item(name, table.into_pyarrow(py)?)?;
        }
        Ok(dict)
    }
}

impl NativeTrace {
    fn report_of(&self) -> TraceReport<'_> {
        TraceReport {
            trace: &self.trace,
            analysis: std::borrow::Cow::Borrowed(&self.analysis),
        }
    }
}

/// A table of the model as one Arrow record batch. Strings are copied into Arrow's buffers
/// once here; from there pyarrow, polars and pandas share the memory.
fn to_arrow(t: tables::Table<'_>) -> Result<RecordBatch, String> {
    let mut fields = Vec::with_capacity(t.columns.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(t.columns.len());
    for (name, data) in t.columns {
        let (ty, array): (DataType, ArrayRef) = match data {
            Data::I64(v) => (DataType::Int64, Arc::new(Int64Array::from(v))),
            Data::F64(v) => (DataType::Float64, Arc::new(Float64Array::from(v))),
            Data::Str(v) => (DataType::Utf8, Arc::new(StringArray::from(v))),
            Data::Owned(v) => (DataType::Utf8, Arc::new(StringArray::from(v))),
            Data::Bool(v) => (DataType::Boolean, Arc::new(BooleanArray::from(v))),
        };
        fields.push(Field::new(name, ty, true));
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| format!("table {}: {e}", t.name))
}

/// Loads and analyses one trace (with the nvidia-smi logs beside it, when given).
#[pyfunction]
#[pyo3(signature = (paths, gap_threshold_us = None, window_ms = None, utc_offset = None, max_memory = None, rules = None, skip_rules = None))]
#[allow(clippy::too_many_arguments)]
fn load(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    gap_threshold_us: Option<f64>,
    window_ms: Option<(f64, f64)>,
    utc_offset: Option<f64>,
    max_memory: Option<String>,
    rules: Option<Vec<String>>,
    skip_rules: Option<Vec<String>>,
) -> PyResult<NativeTrace> {
    let opts = options(
        gap_threshold_us,
        window_ms,
        utc_offset,
        max_memory,
        rules,
        skip_rules,
    )?;
    let (mut traces, warnings) = py.detach(|| load_analyzed(&paths, &opts))?;
    if traces.len() != 1 {
        return Err(err(format!(
            "load takes one trace (with the nvidia-smi logs recorded beside it); {} traces given: use analyze for several",
            traces.len()
        )));
    }
    let (trace, analysis) = traces.remove(0);
    Ok(NativeTrace {
        trace,
        analysis,
        warnings,
    })
}

/// `tracehound analyze --format json`: the report of the files, or of a job directory. Returns
/// the document and the warnings.
#[pyfunction]
#[pyo3(signature = (paths, gap_threshold_us = None, window_ms = None, utc_offset = None, max_memory = None, top = None, rules = None, skip_rules = None))]
#[allow(clippy::too_many_arguments)]
fn analyze_json(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    gap_threshold_us: Option<f64>,
    window_ms: Option<(f64, f64)>,
    utc_offset: Option<f64>,
    max_memory: Option<String>,
    top: Option<usize>,
    rules: Option<Vec<String>>,
    skip_rules: Option<Vec<String>>,
) -> PyResult<(String, Vec<String>)> {
    let opts = options(
        gap_threshold_us,
        window_ms,
        utc_offset,
        max_memory,
        rules,
        skip_rules,
    )?;
    py.detach(|| {
        if let Some(dir) = opts.job_dir(&paths).map_err(err)? {
            let config = opts.config(None).map_err(err)?;
            let (job, msgs) =
                pipeline::read_job(dir, &config, &opts.load_options().map_err(err)?, false)
                    .map_err(err)?;
            let Some((ranks, findings)) = job else {
                return Err(err(msgs.errors.join("\n")));
            };
            let doc = report::job::json(&report::job::JobReport {
                dir: &dir.display().to_string(),
                ranks: &ranks,
                findings: &findings,
            });
            let mut notes = msgs.warnings;
            notes.extend(msgs.notes);
            return Ok((doc, notes));
        }
        let (traces, warnings) = load_analyzed(&paths, &opts)?;
        let reports: Vec<TraceReport> = traces
            .iter()
            .map(|(t, a)| TraceReport {
                trace: t,
                analysis: std::borrow::Cow::Borrowed(a),
            })
            .collect();
        Ok((report::render(&reports, Format::Json, top), warnings))
    })
}

/// `tracehound analyze TRACE --rank-summary`: the rank summary of one trace (JSON text), the
/// map of a job analysis.
#[pyfunction]
#[pyo3(signature = (path, rank = None, gap_threshold_us = None, max_memory = None))]
fn rank_summary(
    py: Python<'_>,
    path: PathBuf,
    rank: Option<i64>,
    gap_threshold_us: Option<f64>,
    max_memory: Option<String>,
) -> PyResult<String> {
    let opts = options(gap_threshold_us, None, None, max_memory, None, None)?;
    py.detach(|| summarise(&path, &opts, rank))?.map_err(err)
}

/// One rank of a job directory, as `analyze DIR` reads it: `(summary, None)` for a rank trace,
/// `(None, note)` for a file that is not one (a truth file, a counter log), which the job
/// skips; a broken trace raises. `threads` caps the threads it uses (the CPUs a scheduler
/// gave the task; None: every core), so that tasks packed onto a node do not each start one
/// thread per core.
#[pyfunction]
#[pyo3(signature = (path, gap_threshold_us = None, max_memory = None, threads = None))]
fn map_rank(
    py: Python<'_>,
    path: PathBuf,
    gap_threshold_us: Option<f64>,
    max_memory: Option<String>,
    threads: Option<usize>,
) -> PyResult<(Option<String>, Option<String>)> {
    let opts = options(gap_threshold_us, None, None, max_memory, None, None)?;
    let run = || summarise(&path, &opts, None);
    let outcome = py.detach(|| match threads {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build()
            .map_err(|e| err(format!("starting worker threads: {e}")))?
            .install(run),
        None => run(),
    });
    match outcome? {
        Ok(summary) => Ok((Some(summary), None)),
        Err(note) => Ok((None, Some(format!("skipped {note}")))),
    }
}

/// One rank's summary file (JSON text), or why the file is not a rank trace (a file that is
/// not a trace, a counter log), as `analyze DIR` skips it; an error for a broken trace.
fn summarise(
    path: &std::path::Path,
    opts: &Options,
    rank: Option<i64>,
) -> PyResult<Result<String, String>> {
    let config = opts.config(None).map_err(err)?;
    let file =
        pipeline::read_rank(path, &config, opts.load_options().map_err(err)?).map_err(err)?;
    Ok(match file {
        pipeline::RankFile::Rank(mut summary, recorded, _, _) => {
            // The trace's own rank wins; `rank` stands in for a rank it does not record.
            if let (false, Some(r)) = (recorded, rank) {
                summary.rank = r;
            }
            Ok(summary.to_file_json(recorded || rank.is_some(), env!("CARGO_PKG_VERSION")))
        }
        pipeline::RankFile::Skipped(why) => Err(why),
    })
}

/// The memory loading and analysing `path` is expected to take, bytes (what `--max-memory`
/// checks), for a scheduler to reserve per task.
#[pyfunction]
fn memory_estimate(path: PathBuf) -> PyResult<u64> {
    use std::io::Read;
    let f = std::fs::File::open(&path).map_err(|e| err(format!("{}: {e}", path.display())))?;
    let len = f
        .metadata()
        .map_err(|e| err(format!("{}: {e}", path.display())))?
        .len();
    let mut head = Vec::with_capacity(16);
    f.take(16)
        .read_to_end(&mut head)
        .map_err(|e| err(format!("{}: {e}", path.display())))?;
    Ok(tracehound_parsers::budget::estimate(&path, len, &head).need_bytes)
}

/// `tracehound merge`: the job report from rank summaries (their JSON texts, with names for
/// messages), in `json`, `table` or `md`.
#[pyfunction]
#[pyo3(signature = (summaries, name = None, format = "json"))]
fn merge(
    py: Python<'_>,
    summaries: Vec<(String, String)>,
    name: Option<String>,
    format: &str,
) -> PyResult<String> {
    let render = match format {
        "json" => report::job::json,
        "table" => report::job::table,
        "md" | "markdown" => report::job::markdown,
        other => return Err(err(format!("format `{other}`: use json, table or md"))),
    };
    py.detach(|| {
        use rayon::prelude::*;
        let ranks = summaries
            .par_iter()
            .map(|(origin, text)| {
                RankSummary::from_file_json(text.as_bytes()).map_err(|e| format!("{origin}: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(err)?;
        let (name, (ranks, findings)) = pipeline::merge(ranks, name).map_err(err)?;
        Ok(render(&report::job::JobReport {
            dir: &name,
            ranks: &ranks,
            findings: &findings,
        }))
    })
}

/// A list of findings (the JSON report's objects) as an HTML fragment for a notebook.
#[pyfunction]
fn findings_html(findings_json: &str) -> PyResult<String> {
    let findings: Vec<Finding> = serde_json::from_str(findings_json)
        .map_err(|e| err(format!("not a list of tracehound findings: {e}")))?;
    Ok(report::html_findings_fragment(&findings))
}

#[pymodule]
fn _tracehound(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TracehoundError", m.py().get_type::<TracehoundError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("TABLES", tables::NAMES.to_vec())?;
    m.add_class::<NativeTrace>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_json, m)?)?;
    m.add_function(wrap_pyfunction!(rank_summary, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(map_rank, m)?)?;
    m.add_function(wrap_pyfunction!(memory_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(findings_html, m)?)?;
    Ok(())
}
