//! Printers over the same analysis: a table for terminals, JSON for tools, Markdown for
//! reviews. Each takes the ranked findings and the summary and writes a string, so output
//! is byte-for-byte deterministic.

mod json;
mod markdown;
mod table;
pub mod tables;

use tracehound_heuristics::Analysis;
use tracehound_heuristics::finding::{fmt_bytes, fmt_ns};
use tracehound_parsers::{GpuOpKind, HostKind, Trace};

/// One analysed trace.
pub struct TraceReport<'t> {
    /// The trace.
    pub trace: &'t Trace,
    /// What the rules found.
    pub analysis: Analysis,
}

/// Output formats.
#[derive(Clone, Copy)]
pub enum Format {
    /// Terminal table.
    Table,
    /// JSON document.
    Json,
    /// Markdown.
    Markdown,
}

/// Renders the reports of one run.
pub fn render(reports: &[TraceReport], format: Format, top: Option<usize>) -> String {
    match format {
        Format::Table => table::render(reports, top),
        Format::Json => json::render(reports, top),
        Format::Markdown => markdown::render(reports, top),
    }
}

/// The GPUs a trace used, by name (`NVIDIA H200`), or the device indices when unnamed.
pub fn gpu_names(t: &Trace) -> String {
    let mut names: Vec<String> = t
        .devices()
        .iter()
        .map(|d| {
            t.meta
                .gpus
                .iter()
                .find(|g| g.id == *d)
                .map(|g| format!("GPU {d} {}", g.name))
                .unwrap_or_else(|| format!("GPU {d}"))
        })
        .collect();
    if names.is_empty() {
        names.push("no GPU activity".into());
    }
    names.join(", ")
}

/// `tracehound info`: what was detected and loaded.
pub fn info(t: &Trace) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let count = |k: GpuOpKind| t.gpu_ops.iter().filter(|o| o.kind == k).count();
    let hcount = |k: HostKind| t.host_spans.iter().filter(|o| o.kind == k).count();
    let _ = writeln!(s, "{}", t.source);
    let _ = writeln!(
        s,
        "  format: PyTorch profiler (Kineto) trace, {}",
        t.meta.format_version
    );
    let _ = writeln!(
        s,
        "  input: {} of JSON, {} events{}",
        fmt_bytes(t.stats.bytes_total),
        t.stats.events_total,
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
        let _ = writeln!(
            s,
            "  clock: timeline + {off} ns = Unix epoch ns (baseTimeNanoseconds)"
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
    if !t.meta.capture_options.is_empty() {
        let opts: Vec<String> = t
            .meta
            .capture_options
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "  capture options: {}", opts.join(", "));
    }
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
