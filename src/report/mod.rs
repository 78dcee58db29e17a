//! Printers over the same analysis: a table for terminals, JSON for tools, Markdown for
//! reviews. Each takes the ranked findings and the summary and writes a string, so output
//! is byte-for-byte deterministic.

pub mod diff;
mod html;
pub mod job;
pub(crate) mod json;
mod junit;
mod markdown;
pub mod perfetto;
pub mod table;
pub mod tables;
pub mod words;

use tracehound_heuristics::Analysis;
use tracehound_heuristics::finding::{fmt_bytes, fmt_ns};
use tracehound_parsers::{GpuOpKind, HostKind, Trace};

/// One analysed trace.
pub struct TraceReport<'t> {
    /// The trace.
    pub trace: &'t Trace,
    /// What the rules found: owned by the CLI, borrowed from a trace the Python package keeps
    /// (so that printing it again copies nothing).
    pub analysis: std::borrow::Cow<'t, Analysis>,
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Format {
    /// Terminal table.
    Table,
    /// JSON document.
    Json,
    /// Markdown.
    Markdown,
    /// Self-contained HTML with inline SVG charts.
    Html,
    /// JUnit XML; findings at or above the severity fail their rule's test case.
    Junit(tracehound_heuristics::Severity),
}

impl std::str::FromStr for Format {
    type Err = String;

    /// A format by the name the CLI's `--format` gives it (`table`, `json`, `md` or
    /// `markdown`, `html`, `junit`: JUnit failing at low severity), for every front end that
    /// takes a format as text (the Python package's `report(format=...)`).
    fn from_str(name: &str) -> Result<Format, String> {
        match name {
            "table" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            "md" | "markdown" => Ok(Format::Markdown),
            "html" => Ok(Format::Html),
            "junit" => Ok(Format::Junit(tracehound_heuristics::Severity::Low)),
            other => Err(format!(
                "format `{other}`: use table, json, md, html or junit"
            )),
        }
    }
}

/// Renders the reports of one run.
pub fn render(reports: &[TraceReport], format: Format, top: Option<usize>) -> String {
    match format {
        Format::Table => table::render(reports, top),
        Format::Json => json::render(reports, top),
        Format::Markdown => markdown::render(reports, top),
        Format::Html => html::render(reports, top),
        Format::Junit(s) => junit::render(reports, s),
    }
}

/// The GPUs a trace used, by name (`NVIDIA H200`), or the device indices when unnamed.
pub use html::esc as esc_html;
pub use html::{findings_fragment as html_findings_fragment, fragment as html_fragment};
pub use json::SCHEMA_VERSION as JSON_SCHEMA_VERSION;

/// Writes `bytes` to `path` atomically: into a temporary file beside it, flushed to disk, then
/// renamed over it, so an interrupted run never leaves half a report over a good one.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let name = path
        .file_name()
        .map_or("report".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Rows of the roofline table shown per device: at most this many, most GPU time first.
const ROOFLINE_ROWS: usize = 8;

/// The roofline table of each device as a caption and rows of cells (operator and shape,
/// math, calls, GPU time, TFLOP/s, TB/s, share of the roof, bound), for every output format.
fn roofline_tables(sm: &tracehound_heuristics::TraceSummary) -> Vec<(String, Vec<[String; 8]>)> {
    use tracehound_heuristics::finding::fmt_ns;
    sm.roofline
        .iter()
        .filter_map(|d| {
            let matrix: i64 = d.rows.iter().map(|r| r.time_ns).sum();
            // A table of a few stray GEMMs (a classifier head under a convolution net) says
            // nothing about where the time goes.
            if (matrix as f64) < ROOFLINE_MIN_SHARE * d.kernel_ns as f64 {
                return None;
            }
            let caption = format!(
                "GPU {} roofline ({}: {:.1} TB/s; matrix operators with shapes {:.0}% of kernel time)",
                d.device,
                d.peaks.model,
                d.peaks.mem_tbps,
                100.0 * matrix as f64 / d.kernel_ns.max(1) as f64
            );
            let rows = d
                .rows
                .iter()
                .take(ROOFLINE_ROWS)
                .map(|r| {
                    [
                        format!("{} {}", r.op, r.shape),
                        r.math.label().to_string(),
                        r.count.to_string(),
                        fmt_ns(r.time_ns),
                        format!("{:.0}", r.tflops),
                        format!("{:.2}", r.tbps),
                        format!("{:.0}% of {:.0}", 100.0 * r.roof_share, r.roof_tflops),
                        r.bound.to_string(),
                    ]
                })
                .collect();
            Some((caption, rows))
        })
        .collect()
}

/// Columns of the table of where the GPU time goes.
pub(crate) const ACCOUNTING_HEADER: [&str; 7] = [
    "operator @ Python frame",
    "family",
    "share",
    "GPU time",
    "calls",
    "roof",
    "per call",
];

/// Rows of that table printed per device.
const ACCOUNTING_PRINTED: usize = 6;

/// Where each device's GPU time goes: a caption and rows of cells (operator and frame, family,
/// share of GPU time, GPU time, calls per step, share of the roof reached, how the cost per
/// call changes over a step), largest first, for every output format.
pub(crate) fn accounting_tables(
    sm: &tracehound_heuristics::TraceSummary,
) -> Vec<(String, Vec<[String; 7]>)> {
    sm.accounting
        .iter()
        .filter(|a| !a.holders.is_empty())
        .map(|a| {
            let caption = format!(
                "GPU {} where the GPU time goes ({} of GPU work, {:.0}% of it charged to an operator)",
                a.device,
                fmt_ns(a.gpu_ns),
                100.0 * a.attributed_ns as f64 / a.gpu_ns.max(1) as f64
            );
            let rows = a
                .holders
                .iter()
                .take(ACCOUNTING_PRINTED)
                .map(|h| {
                    [
                        format!(
                            "{}{}",
                            tracehound_heuristics::accounting::shown_op(&h.op),
                            h.frame
                                .as_deref()
                                .map(|f| format!(" @ {f}"))
                                .unwrap_or_default()
                        ),
                        h.family.label().to_string(),
                        format!("{:.0}%", 100.0 * h.share),
                        fmt_ns(h.gpu_ns),
                        // Per step where the trace has steps; a trace without steps has
                        // only the total.
                        h.calls_per_step.map_or_else(
                            || format!("{} in all", h.calls),
                            |c| format!("{c:.0}/step"),
                        ),
                        h.roof_share
                            .map_or_else(|| "-".into(), |r| format!("{:.0}%", 100.0 * r)),
                        h.growth
                            .map_or_else(|| "steady".into(), |g| format!("grows {g:.2}×")),
                    ]
                })
                .collect();
            (caption, rows)
        })
        .collect()
}

/// The memory-bound operator table of each device: a caption and rows of cells (operator
/// and shape, element type, calls, GPU time, TB/s, share of the HBM roof, memory- or
/// latency-bound), for every output format. Without shapes the caption alone says how much
/// kernel time memory-bound kernels take by name, and that there is no bandwidth.
fn membound_tables(sm: &tracehound_heuristics::TraceSummary) -> Vec<(String, Vec<[String; 7]>)> {
    sm.membound
        .iter()
        .filter_map(|d| {
            let modelled: i64 = d.rows.iter().map(|r| r.time_ns).sum();
            let gpu = d
                .model
                .zip(d.hbm_tbps)
                .map(|(m, tb)| format!("{m}: {tb:.1} TB/s HBM; "))
                .unwrap_or_default();
            if modelled == 0 || (modelled as f64) < ROOFLINE_MIN_SHARE * d.kernel_ns as f64 {
                // No shapes: what the kernel names say, when it matters.
                return (!d.shapes && d.share(d.memory_ns) >= ROOFLINE_MIN_SHARE).then(|| {
                    (
                        format!(
                            "GPU {} memory-bound kernels by name: {:.0}% of kernel time (shapes not recorded: no bytes, no bandwidth)",
                            d.device,
                            100.0 * d.share(d.memory_ns)
                        ),
                        Vec::new(),
                    )
                });
            }
            let rate = d
                .tbps
                .map(|tb| {
                    let share = d
                        .hbm_share
                        .map(|s| format!(", {:.0}% of HBM", 100.0 * s))
                        .unwrap_or_default();
                    format!(" at {tb:.2} TB/s{share}")
                })
                .unwrap_or_default();
            let caption = format!(
                "GPU {} memory-bound operators ({gpu}non-matrix operators with shapes {:.0}% of kernel time{rate})",
                d.device,
                100.0 * d.share(modelled),
            );
            let rows = d
                .rows
                .iter()
                .take(ROOFLINE_ROWS)
                .map(|r| {
                    [
                        format!("{} {}", r.op, r.shape),
                        r.dtype.clone(),
                        r.count.to_string(),
                        fmt_ns(r.time_ns),
                        format!("{:.2}", r.tbps),
                        r.hbm_share
                            .map(|s| format!("{:.0}%", 100.0 * s))
                            .unwrap_or_else(|| "–".into()),
                        r.class.to_string(),
                    ]
                })
                .collect();
            Some((caption, rows))
        })
        .collect()
}

/// Column names of [`membound_tables`].
const MEMBOUND_HEADER: [&str; 7] = [
    "operator and shape",
    "dtype",
    "calls",
    "GPU time",
    "TB/s",
    "HBM share",
    "bound",
];

/// Share of kernel time matrix operators with shapes need for the roofline table to show.
const ROOFLINE_MIN_SHARE: f64 = 0.05;

/// Column names of [`roofline_tables`].
const ROOFLINE_HEADER: [&str; 8] = [
    "operator and shape",
    "math",
    "calls",
    "GPU time",
    "TFLOP/s",
    "TB/s",
    "roof share (TFLOP/s)",
    "bound",
];

pub fn gpu_names(t: &Trace) -> String {
    let mut names: Vec<String> = t
        .devices()
        .iter()
        .map(|d| {
            t.meta
                .gpu(*d)
                .filter(|g| !g.name.is_empty())
                .map(|g| format!("GPU {d} {}", g.name))
                .unwrap_or_else(|| format!("GPU {d}"))
        })
        .collect();
    if names.is_empty() {
        names.push("no GPU activity".into());
    }
    names.join(", ")
}

/// Human name of a source format and the unit of its input.
pub fn format_name(t: &Trace) -> (&'static str, &'static str) {
    t.meta
        .format
        .unwrap_or(&tracehound_parsers::kineto::FORMAT)
        .describe()
}

/// `tracehound info`'s lines on what the capture recorded ([`tracehound_parsers::Capture`]).
fn capture_lines(c: &tracehound_parsers::Capture) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let with = |what: &str, extras: &[(bool, &str)]| {
        let e: Vec<&str> = extras.iter().filter(|x| x.0).map(|x| x.1).collect();
        if e.is_empty() {
            what.to_string()
        } else {
            format!("{what} ({})", e.join(", "))
        }
    };
    let kinds: Vec<String> = [
        (
            c.kernels,
            with(
                "kernels",
                &[
                    (c.launch_geometry, "launch geometry"),
                    (c.occupancy, "occupancy"),
                ],
            ),
        ),
        (c.api_calls, "runtime/driver calls".to_string()),
        (c.cpu_ops, "CPU operators".to_string()),
        (c.python_frames, "Python frames".to_string()),
        (c.call_stacks, "call stacks".to_string()),
        (c.shapes, "input shapes".to_string()),
        (
            c.memory_events,
            with(
                "allocator events",
                &[(c.allocated_totals, "allocated totals")],
            ),
        ),
        (c.annotations, "annotations".to_string()),
        (c.os_calls, "OS runtime calls".to_string()),
        (c.cpu_samples, "CPU samples".to_string()),
    ]
    .into_iter()
    .filter(|k| k.0)
    .map(|k| k.1)
    .collect();
    if !kinds.is_empty() {
        let _ = writeln!(s, "  capture: {}", kinds.join(", "));
    }
    if c.startup_hole {
        let _ = writeln!(
            s,
            "  capture starts inside its first step: the leading hole is the profiler's"
        );
    }
    if !c.host_threads.is_empty() {
        const SHOWN: usize = 8;
        let names: Vec<String> = c
            .host_threads
            .iter()
            .take(SHOWN)
            .map(|h| match &h.name {
                Some(n) => format!("{}/{} {n}", h.pid, h.tid),
                None => format!("{}/{}", h.pid, h.tid),
            })
            .collect();
        let more = c.host_threads.len().saturating_sub(SHOWN);
        let _ = writeln!(
            s,
            "  host threads: {}{}",
            names.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    if let Some(p) = c.counter_period {
        let _ = writeln!(
            s,
            "  counter period: {} ({})",
            fmt_ns(p.ns),
            if p.measured {
                "from the timestamps"
            } else {
                "assumed: nvidia-smi's default"
            }
        );
    }
    s
}

/// `tracehound info --format json`: per file, what was detected and loaded, as data: the
/// format, the trace's metadata (GPUs, rank, clock, capture options, software stack, what the
/// capture recorded), the events by kind, the span and the load's stats and warnings.
pub fn info_json(traces: &[&Trace]) -> String {
    let files: Vec<serde_json::Value> = traces
        .iter()
        .map(|t| {
            let ops = |k: GpuOpKind| t.gpu_ops.iter().filter(|o| o.kind == k).count();
            let spans = |k: HostKind| t.host_spans.iter().filter(|o| o.kind == k).count();
            serde_json::json!({
                "source": t.source,
                "format": t.meta.format.map(|f| f.id),
                "meta": t.meta,
                "span_ns": t.span().map(|(a, b)| b - a),
                "gpu_ops": {
                    "kernels": ops(GpuOpKind::Kernel),
                    "memcpys": ops(GpuOpKind::Memcpy),
                    "memsets": ops(GpuOpKind::Memset),
                    "syncs": ops(GpuOpKind::Sync),
                },
                "host_spans": {
                    "cpu_ops": spans(HostKind::CpuOp),
                    "runtime_calls": spans(HostKind::Runtime),
                    "driver_calls": spans(HostKind::Driver),
                    "python_frames": spans(HostKind::Python),
                    "annotations": spans(HostKind::Annotation),
                },
                "memory_events": t.memory.len(),
                "steps": t.steps.len(),
                "stats": t.stats,
                "warnings": t.warnings,
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&serde_json::json!({
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": "tracehound",
        "files": files,
    }))
    .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

/// `tracehound info`: what was detected and loaded.
pub fn info(t: &Trace) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let count = |k: GpuOpKind| t.gpu_ops.iter().filter(|o| o.kind == k).count();
    let hcount = |k: HostKind| t.host_spans.iter().filter(|o| o.kind == k).count();
    let (format, unit) = format_name(t);
    let _ = writeln!(s, "{}", t.source);
    let _ = writeln!(s, "  format: {format}, {}", t.meta.format_version);
    let _ = writeln!(
        s,
        "  input: {} of {unit}, {} {}{}",
        fmt_bytes(t.stats.bytes_total),
        t.stats.events_total,
        t.meta.format.map_or("events", |f| f.records),
        if t.stats.truncated {
            format!(" (TRUNCATED: parsed {})", fmt_bytes(t.stats.bytes_parsed))
        } else {
            String::new()
        }
    );
    if let Some((a, b)) = t.span() {
        let _ = writeln!(s, "  span: {}", fmt_ns(b - a));
    }
    if let Some(off) = t.meta.epoch_offset_ns.filter(|o| *o != 0) {
        let origin = t.meta.format.and_then(|f| f.clock_origin);
        let _ = writeln!(
            s,
            "  clock: timeline + {off} ns = Unix epoch ns{}",
            origin.map(|o| format!(" ({o})")).unwrap_or_default()
        );
    }
    if !t.meta.gpus.is_empty() {
        let mut names: Vec<&str> = t.meta.gpus.iter().map(|g| g.name.as_str()).collect();
        names.dedup();
        let _ = writeln!(
            s,
            "  GPUs listed: {} ({})",
            t.meta.gpus.len(),
            names.join(", ")
        );
    }
    let trace_like = t.meta.format.is_none_or(|f| f.records_gpu_work);
    if trace_like {
        let _ = writeln!(s, "  GPUs used: {}", gpu_names(t));
        if let Some(r) = t.meta.rank {
            let _ = writeln!(
                s,
                "  rank: {r}{}",
                t.meta
                    .world_size
                    .map(|w| format!(" of {w}"))
                    .unwrap_or_default()
            );
        }
        let _ = writeln!(
            s,
            "  GPU ops: {} kernels, {} memcpys ({} pageable), {} memsets, {} syncs",
            count(GpuOpKind::Kernel),
            count(GpuOpKind::Memcpy),
            t.gpu_ops.iter().filter(|o| o.is_pageable_copy()).count(),
            count(GpuOpKind::Memset),
            count(GpuOpKind::Sync)
        );
        let _ = writeln!(
            s,
            "  host: {} CPU ops, {} runtime calls, {} driver calls, {} Python frames, {} annotations, {} threads",
            hcount(HostKind::CpuOp),
            hcount(HostKind::Runtime),
            hcount(HostKind::Driver),
            hcount(HostKind::Python),
            hcount(HostKind::Annotation),
            t.index.spans_by_thread.len()
        );
        let _ = writeln!(
            s,
            "  memory events: {} allocator events, {} out-of-memory",
            t.memory.iter().filter(|m| !m.oom).count(),
            t.memory.iter().filter(|m| m.oom).count()
        );
        let linked = t
            .index
            .op_launch
            .iter()
            .filter(|&&l| l != tracehound_parsers::NONE)
            .count();
        let _ = writeln!(
            s,
            "  links: {linked} of {} GPU ops matched to their launch call by correlation id",
            t.gpu_ops.len()
        );
        match (t.steps.first(), t.steps.last()) {
            (Some(a), Some(b)) => {
                let _ = writeln!(
                    s,
                    "  steps: {} (ProfilerStep#{}..#{})",
                    t.steps.len(),
                    a.number,
                    b.number
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "  steps: none marked (the window is first to last GPU operation)"
                );
            }
        }
    }
    if !t.counters.is_empty() {
        let mut gpus: Vec<i32> = t.counters.iter().map(|c| c.gpu).collect();
        gpus.dedup();
        let metrics: Vec<String> = t
            .counters
            .iter()
            .filter(|c| c.gpu == gpus[0])
            .map(|c| {
                if c.unit.is_empty() {
                    c.metric.clone()
                } else {
                    format!("{} [{}]", c.metric, c.unit)
                }
            })
            .collect();
        let samples: usize = t
            .counters
            .iter()
            .filter(|c| c.gpu == gpus[0])
            .map(|c| c.samples.len())
            .max()
            .unwrap_or(0);
        let _ = writeln!(
            s,
            "  counter series: {} on {} GPU(s), {} samples each: {}",
            t.counters.len(),
            gpus.len(),
            samples,
            metrics.join(", ")
        );
        if let Some(c) = &t.counter_clock {
            let _ = writeln!(
                s,
                "  counter clock: {}",
                match c {
                    tracehound_parsers::CounterClock::Wall { utc_offset_s } =>
                        format!("wall time, UTC{:+} h", *utc_offset_s as f64 / 3600.0),
                    tracehound_parsers::CounterClock::Relative { interval_ns } => format!(
                        "sample number x {} (no date: cannot be aligned with a trace)",
                        fmt_ns(*interval_ns)
                    ),
                }
            );
        }
    }
    for g in &t.inventory {
        let opt = |v: Option<f64>, u: &str| v.map_or("?".to_string(), |x| format!("{x:.0} {u}"));
        let _ = writeln!(
            s,
            "  GPU {} {}: {}, driver {}, PCIe gen {}/{} x{}/{}, SM clock {} of {}, power {} of {}, throttle: {}",
            g.bus_id,
            g.product,
            g.pstate.as_deref().unwrap_or("?"),
            g.driver.as_deref().unwrap_or("?"),
            g.pcie_gen.0.map_or("?".into(), |v| v.to_string()),
            g.pcie_gen.1.map_or("?".into(), |v| v.to_string()),
            g.pcie_width.0.map_or("?".into(), |v| v.to_string()),
            g.pcie_width.1.map_or("?".into(), |v| v.to_string()),
            opt(g.sm_clock_mhz.0, "MHz"),
            opt(g.sm_clock_mhz.1, "MHz"),
            opt(g.power_w.0, "W"),
            opt(g.power_w.1, "W"),
            if g.throttle_reasons.is_empty() {
                "none".to_string()
            } else {
                g.throttle_reasons.join(", ")
            }
        );
    }
    if !t.meta.capture_options.is_empty() {
        let opts: Vec<String> = t
            .meta
            .capture_options
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "  capture options: {}", opts.join(", "));
    }
    let _ = write!(s, "{}", capture_lines(&t.meta.capture));
    if !t.stats.skipped.is_empty() {
        let sk: Vec<String> = t
            .stats
            .skipped
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(s, "  skipped: {}", sk.join(", "));
    }
    if !t.stats.tables.is_empty() {
        let _ = writeln!(s, "  tables read: {}", t.stats.tables.join(", "));
    }
    for n in &t.stats.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    for w in &t.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}
