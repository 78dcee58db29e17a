//! JSON output. The schema is versioned (`schema_version`) and documented in
//! `docs/json-output.md`; fields are only ever added within a version.

use super::TraceReport;
use serde::Serialize;
use tracehound_heuristics::{Finding, TraceSummary};

/// Version of the JSON document layout.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct Doc<'a> {
    schema_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    traces: Vec<TraceDoc<'a>>,
}

#[derive(Serialize)]
struct TraceDoc<'a> {
    source: &'a str,
    format: &'static str,
    format_version: &'a str,
    events: u64,
    truncated: bool,
    /// How much of a file cut short was read; absent for a whole file.
    #[serde(skip_serializing_if = "Option::is_none")]
    incomplete: Option<&'a tracehound_parsers::Incomplete>,
    warnings: &'a [String],
    notes: &'a [String],
    summary: &'a TraceSummary,
    findings_total: usize,
    findings: &'a [Finding],
}

pub fn render(reports: &[TraceReport], top: Option<usize>) -> String {
    let doc = Doc {
        schema_version: SCHEMA_VERSION,
        tool: "tracehound",
        tool_version: env!("CARGO_PKG_VERSION"),
        traces: reports
            .iter()
            .map(|r| {
                let n = top.unwrap_or(usize::MAX).min(r.analysis.findings.len());
                TraceDoc {
                    source: &r.trace.source,
                    format: r.trace.meta.format.map_or("kineto", |f| f.id),
                    format_version: &r.trace.meta.format_version,
                    events: r.trace.stats.events_total,
                    truncated: r.trace.stats.truncated,
                    incomplete: r.trace.stats.incomplete.as_ref(),
                    warnings: &r.trace.warnings,
                    notes: &r.trace.stats.notes,
                    summary: &r.analysis.summary,
                    findings_total: r.analysis.findings.len(),
                    findings: &r.analysis.findings[..n],
                }
            })
            .collect(),
    };
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
