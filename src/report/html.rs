//! A self-contained HTML report: no scripts, fonts or styles from elsewhere, so it opens
//! offline, as a CI artifact, on a phone and on paper. Charts are inline SVG: the GPU timeline
//! of the window with idle gaps coloured by their measured cause, the cause breakdown, the top
//! kernels, allocated and reserved memory, and the nvidia-smi series given with the trace.

use super::{TraceReport, gpu_names, words};
use std::fmt::Write;
use tracehound_heuristics::Finding;
use tracehound_heuristics::finding::fmt_ns;
use tracehound_heuristics::idle::CauseKind;
use tracehound_heuristics::rules::idle_gaps;
use tracehound_parsers::Trace;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:0 auto;padding:12px;color:#1b1f24;line-height:1.45}
h1{font-size:1.4em;word-break:break-all}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;font-size:.9em;display:block;overflow-x:auto}td,th{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}
.num{text-align:right;white-space:nowrap}.sev-high{color:#b3001b;font-weight:bold}.sev-medium{color:#a35c00}.sev-low{color:#00658f}.sev-info{color:#555}
.verdict{background:#f4f6f8;border-left:4px solid #0969da;padding:8px 12px}
svg{width:100%;height:auto;background:#fff}figure{margin:1em 0}figcaption{font-size:.85em;color:#555}
.legend span{display:inline-block;margin-right:12px;font-size:.85em}.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
code{font-size:.9em;word-break:break-all}code.rule{word-break:normal;white-space:nowrap}li{margin:.2em 0}
@media print{body{max-width:none}h2{page-break-after:avoid}figure,table{page-break-inside:avoid}}";

/// [`STYLE`] confined to an element of class `tracehound`, for HTML placed inside another page
/// (a Jupyter notebook), where the report's rules must not restyle the notebook: every
/// selector gets the class in front, and `body` becomes the element itself.
fn scoped_style() -> String {
    let mut out = String::new();
    for rule in STYLE.lines().flat_map(|l| l.split_inclusive('}')) {
        if rule.starts_with("@media") {
            continue;
        }
        let Some((selectors, body)) = rule.split_once('{') else {
            continue;
        };
        let scoped: Vec<String> = selectors
            .split(',')
            .map(|sel| match sel.trim() {
                "body" => ".tracehound".to_string(),
                sel => format!(".tracehound {sel}"),
            })
            .collect();
        let _ = write!(out, "{}{{{body}", scoped.join(","));
    }
    out
}

/// HTML for a notebook: what `body` writes, in a `div` with the report's style scoped to it.
fn scoped(body: impl FnOnce(&mut String)) -> String {
    let mut s = format!(
        "<div class=\"tracehound\"><style>{}</style>\n",
        scoped_style()
    );
    body(&mut s);
    s.push_str("</div>\n");
    s
}

/// One analysed trace as an HTML fragment for a notebook: the report's sections (verdict,
/// charts, tables, findings).
pub fn fragment(r: &TraceReport, top: Option<usize>) -> String {
    scoped(|s| report_sections(s, r, top))
}

/// A list of findings as an HTML fragment for a notebook: the report's findings section.
pub fn findings_fragment(findings: &[Finding]) -> String {
    scoped(|s| findings_section(s, &findings.iter().collect::<Vec<_>>()))
}

/// Colour of a cause category in the charts.
pub fn cause_color(k: CauseKind) -> &'static str {
    match k {
        CauseKind::HostSync => "#d7263d",
        CauseKind::Allocator => "#8f2d56",
        CauseKind::ModuleLoad => "#6a4c93",
        CauseKind::Autotune => "#9c6644",
        CauseKind::LaunchOverhead => "#f49d37",
        CauseKind::CpuOp => "#1982c4",
        CauseKind::Python => "#3f88c5",
        CauseKind::DataLoading => "#2a9d8f",
        CauseKind::OsCall => "#8ac926",
        CauseKind::Sampled => "#5f0f40",
        CauseKind::Untraced => "#9aa5b1",
        CauseKind::GpuWait => "#ffb703",
        CauseKind::Unknown => "#cccccc",
        CauseKind::ProfilerStartup => "#e0e0e0",
        CauseKind::ProfilerWork => "#ebebeb",
        CauseKind::GraphCapture => "#d9d9d9",
        CauseKind::Compile => "#b5179e",
        CauseKind::GarbageCollection => "#4a4e69",
        CauseKind::Gil => "#e76f51",
    }
}

/// Width of the charts' drawing area (viewBox units).
const W: f64 = 1000.0;

/// The GPU timeline of the window: per device, busy share per column in green, idle gaps
/// coloured by their measured cause.
fn timeline(s: &mut String, r: &TraceReport) {
    let a = &r.analysis;
    let w = &a.summary.window;
    let devices = &a.idle;
    if devices.is_empty() || w.len() <= 1 {
        return;
    }
    let lane = 26.0;
    let h = 24.0 + lane * devices.len() as f64;
    let x = |t: i64| ((t - w.start) as f64 / w.len() as f64 * W).clamp(0.0, W);
    // The caption, above the chart, lists the causes drawn: it is put in front once they are
    // known.
    let at = s.len();
    let _ = write!(
        s,
        "<svg viewBox=\"0 0 {} {h}\" role=\"img\" aria-label=\"GPU timeline\">",
        W + 90.0
    );
    let mut used: Vec<CauseKind> = Vec::new();
    for (k, d) in devices.iter().enumerate() {
        let y = 4.0 + lane * k as f64;
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\" font-size=\"12\">GPU {}</text><g transform=\"translate(90 0)\">",
            y + 14.0,
            d.device
        );
        let busy = tracehound_heuristics::views::busy_columns(r.trace, d.device, w, W as usize);
        for (c, b) in busy.iter().enumerate().filter(|(_, b)| **b > 0.0) {
            let _ = write!(
                s,
                "<rect x=\"{c}\" y=\"{y}\" width=\"1\" height=\"18\" fill=\"#2b9348\" fill-opacity=\"{:.2}\"/>",
                b.min(1.0)
            );
        }
        for g in &d.gaps {
            let (g0, g1) = (x(g.start), x(g.end));
            if !used.contains(&g.kind) {
                used.push(g.kind);
            }
            let _ = write!(
                s,
                "<rect x=\"{g0:.1}\" y=\"{}\" width=\"{:.1}\" height=\"6\" fill=\"{}\"><title>{} — {}</title></rect>",
                y + 18.0,
                (g1 - g0).max(0.5),
                cause_color(g.kind),
                fmt_ns(g.end - g.start),
                esc(&g.label)
            );
        }
        s.push_str("</g>");
    }
    let _ = write!(
        s,
        "<text x=\"90\" y=\"{}\" font-size=\"11\">0</text><text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text></svg>",
        h - 2.0,
        W + 90.0,
        h - 2.0,
        fmt_ns(w.len())
    );
    let mut caption = String::from(
        "<figure><figcaption>GPU busy time (green) over the analysed window; below each lane the idle gaps, coloured by their measured cause: <span class=\"legend\">",
    );
    used.sort();
    for k in used {
        let _ = write!(
            caption,
            "<span><i class=\"sw\" style=\"background:{}\"></i>{}</span>",
            cause_color(k),
            k.label()
        );
    }
    caption.push_str("</span></figcaption>");
    s.insert_str(at, &caption);
    s.push_str("</figure>\n");
}

/// Horizontal bars: (label, value, colour), with the value's text.
fn bars(s: &mut String, title: &str, rows: &[(String, f64, String, &str)]) {
    if rows.is_empty() {
        return;
    }
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max).max(1e-9);
    let h = 22.0 * rows.len() as f64 + 4.0;
    let _ = write!(
        s,
        "<figure><figcaption>{}</figcaption><svg viewBox=\"0 0 {W} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(title),
        esc(title)
    );
    for (k, (label, v, text, color)) in rows.iter().enumerate() {
        let y = 2.0 + 22.0 * k as f64;
        let len = v / max * 380.0;
        let _ = write!(
            s,
            "<rect x=\"0\" y=\"{y}\" width=\"{len:.1}\" height=\"16\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"12\">{} — {}</text>",
            len + 6.0,
            y + 12.5,
            esc(text),
            esc(&label.chars().take(110).collect::<String>())
        );
    }
    s.push_str("</svg></figure>\n");
}

/// One line of a chart: name, colour, (x, y) points.
type Series<'a> = (&'a str, &'a str, Vec<(f64, f64)>);

/// A line chart of series of (x, y) points, downsampled to the chart's width, with its
/// caption and legend above it and an axis of x (in `x_unit`) below: over `x_range`, or
/// from the first point to the last.
fn lines(
    s: &mut String,
    title: &str,
    unit: &str,
    (x_unit, x_range): (&str, Option<(f64, f64)>),
    series: &[Series],
) {
    let pts: Vec<&(f64, f64)> = series.iter().flat_map(|x| x.2.iter()).collect();
    if pts.is_empty() {
        return;
    }
    let (x0, x1) = x_range.unwrap_or_else(|| {
        pts.iter()
            .fold((f64::MAX, f64::MIN), |a, p| (a.0.min(p.0), a.1.max(p.0)))
    });
    let y1 = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.1;
    let h = 180.0;
    let _ = write!(
        s,
        "<figure><figcaption>{} <span class=\"legend\">",
        esc(title)
    );
    for (name, color, _) in series {
        let _ = write!(
            s,
            "<span><i class=\"sw\" style=\"background:{color}\"></i>{}</span>",
            esc(name)
        );
    }
    let _ = write!(
        s,
        "</span></figcaption><svg viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">",
        W + 60.0,
        h + 24.0,
        esc(title)
    );
    for (name, color, data) in series {
        let stride = (data.len() / 2000).max(1);
        let path: Vec<String> = data
            .iter()
            .step_by(stride)
            .map(|p| {
                format!(
                    "{:.1},{:.1}",
                    60.0 + (p.0 - x0) / (x1 - x0).max(1e-9) * W,
                    h - p.1 / y1 * h
                )
            })
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>",
            path.join(" "),
            esc(name)
        );
    }
    let _ = write!(
        s,
        "<text x=\"0\" y=\"12\" font-size=\"11\">{y1:.1} {}</text><text x=\"0\" y=\"{h}\" font-size=\"11\">0</text>",
        esc(unit)
    );
    // The time axis: five ticks from the first point to the last, the unit on the last.
    let _ = write!(
        s,
        "<line x1=\"60\" y1=\"{h}\" x2=\"{}\" y2=\"{h}\" stroke=\"#999\"/>",
        60.0 + W
    );
    for k in 0..=4 {
        let px = 60.0 + W * f64::from(k) / 4.0;
        let value = x0 + (x1 - x0) * f64::from(k) / 4.0;
        let (anchor, label) = match k {
            0 => ("start", format!("{value:.1}")),
            4 => ("end", format!("{value:.1} {x_unit}")),
            _ => ("middle", format!("{value:.1}")),
        };
        let _ = write!(
            s,
            "<line x1=\"{px:.1}\" y1=\"{h}\" x2=\"{px:.1}\" y2=\"{}\" stroke=\"#999\"/><text x=\"{px:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"{anchor}\">{}</text>",
            h + 5.0,
            h + 18.0,
            esc(&label)
        );
    }
    s.push_str("</svg></figure>\n");
}

fn memory(s: &mut String, t: &Trace, r: &TraceReport) {
    let w = &r.analysis.summary.window;
    for m in tracehound_heuristics::views::memory_series(t, w, None)
        .into_iter()
        .take(4)
    {
        lines(
            s,
            &format!(
                "GPU {}: memory reserved by the caching allocator and allocated, over the window (ms)",
                m.device
            ),
            "GiB",
            // The window's own span, as the timeline above: allocator events start later.
            ("ms", Some((0.0, w.len() as f64 / 1e6))),
            &[
                ("reserved", "#e09f3e", m.reserved),
                ("allocated", "#2b9348", m.allocated),
            ],
        );
    }
}

fn counters(s: &mut String, t: &Trace, r: &TraceReport) {
    let origin = r.analysis.summary.window.start;
    let colors = ["#1982c4", "#e09f3e", "#d7263d", "#6a4c93"];
    let mut gpus: Vec<i32> = t.counters.iter().map(|c| c.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    for g in gpus.into_iter().take(4) {
        for (k, m) in ["sm", "mem", "pwr"].iter().enumerate() {
            if let Some(c) = t.counters.iter().find(|c| c.gpu == g && c.metric == *m) {
                let data: Vec<(f64, f64)> = c
                    .samples
                    .iter()
                    .map(|&(ts, v)| ((ts - origin) as f64 / 1e9, v))
                    .collect();
                lines(
                    s,
                    &format!("GPU {g}: nvidia-smi {} over time (s)", c.metric),
                    &c.unit,
                    ("s", None),
                    &[(c.metric.as_str(), colors[k], data)],
                );
            }
        }
    }
}

pub fn render(reports: &[TraceReport], top: Option<usize>) -> String {
    let mut s = String::new();
    let title = reports.first().map_or("tracehound".to_string(), |r| {
        format!("tracehound: {}", r.trace.source)
    });
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(&title)
    );
    for r in reports {
        report_sections(&mut s, r, top);
    }
    s.push_str("</body></html>\n");
    s
}

/// One trace's part of the report: its header and verdict, its first `top` findings (what a
/// reader came for, at the top), then the charts and tables behind them.
fn report_sections(s: &mut String, r: &TraceReport, top: Option<usize>) {
    trace_header(s, r);
    let shown: Vec<&Finding> = r
        .analysis
        .findings
        .iter()
        .take(top.unwrap_or(usize::MAX))
        .collect();
    findings_section(s, &shown);
    trace_charts(s, r);
}

/// The trace's header and verdict, and how to see the findings on its timeline.
fn trace_header(s: &mut String, r: &TraceReport) {
    let t = r.trace;
    let a = &r.analysis;
    let w = &a.summary.window;
    let (fmt, _) = super::format_name(t);
    let _ = writeln!(s, "<h1>{}</h1>", esc(&t.source));
    let _ = writeln!(
        s,
        "<p>{} · {} ({}) · {} · window {} ({}) · tracehound {}</p>",
        esc(&gpu_names(t)),
        esc(fmt),
        esc(&t.meta.format_version),
        if t.stats.truncated {
            "<b>file cut short: analysed as far as it is complete</b>"
        } else {
            "complete file"
        },
        fmt_ns(w.len()),
        esc(&w.describe()),
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(
        s,
        "<p class=\"verdict\"><b>Verdict:</b> {}</p>",
        esc(&a.summary.verdict)
    );
    let _ = writeln!(
        s,
        "<p>On the timeline: <code>tracehound report {} -o run.perfetto.json.gz</code> writes the trace with tracehound's tracks (idle gaps by cause, the findings' worst instances, arrows from the call that drained the queue); open that file at <a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a> or in chrome://tracing.</p>",
        esc(&t.source)
    );
}

/// The trace's charts and tables: the timeline, idle causes, memory, roofline, accounting.
fn trace_charts(s: &mut String, r: &TraceReport) {
    let t = r.trace;
    let a = &r.analysis;
    let w = &a.summary.window;
    timeline(s, r);
    if let Some(idle) = a.findings.iter().find(|f| f.rule == idle_gaps::ID) {
        let rows: Vec<(String, f64, String, &str)> = idle
            .breakdown
            .iter()
            .map(|row| {
                (
                    row.label.clone(),
                    row.time_ns as f64,
                    fmt_ns(row.time_ns),
                    row.cause
                        .and_then(CauseKind::from_id)
                        .map_or("#9aa5b1", cause_color),
                )
            })
            .collect();
        bars(s, "Where the GPU's idle time went: measured causes", &rows);
    }
    let kernels = tracehound_heuristics::tables::kernel_summary(t, Some(w));
    let top: Vec<&str> = kernels.iter().take(10).map(|k| k.name.as_str()).collect();
    let knames = tracehound_heuristics::names::distinct_short_names(&top, 70);
    let krows: Vec<(String, f64, String, &str)> = kernels
        .iter()
        .zip(&knames)
        .map(|(k, name)| {
            (
                format!("{name} ×{}", k.instances),
                k.total_ns as f64,
                fmt_ns(k.total_ns),
                "#2b9348",
            )
        })
        .collect();
    bars(s, "Top kernels by GPU time in the window", &krows);
    if !a.summary.stack.is_empty() {
        s.push_str("<table><caption>Software stack</caption>\n");
        for f in &a.summary.stack {
            let _ = writeln!(
                s,
                "<tr><th>{}</th><td>{}</td><td>{}</td></tr>",
                esc(f.item),
                esc(&f.value),
                esc(f.warning.as_deref().unwrap_or(""))
            );
        }
        s.push_str("</table>\n");
    }
    for (caption, rows) in super::accounting_tables(&a.summary) {
        table(s, &caption, &super::ACCOUNTING_HEADER, &rows);
    }
    for (caption, rows) in super::roofline_tables(&a.summary) {
        table(s, &caption, &super::ROOFLINE_HEADER, &rows);
    }
    for (caption, rows) in super::membound_tables(&a.summary) {
        if rows.is_empty() {
            let _ = writeln!(s, "<p>{}.</p>", esc(&caption));
            continue;
        }
        let _ = write!(s, "<table><caption>{}</caption><tr>", esc(&caption));
        for h in super::MEMBOUND_HEADER {
            let _ = write!(s, "<th>{}</th>", esc(h));
        }
        s.push_str("</tr>\n");
        for r in rows {
            s.push_str("<tr>");
            for c in &r {
                let _ = write!(s, "<td>{}</td>", esc(c));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</table>\n");
    }
    memory(s, t, r);
    counters(s, t, r);
}

/// The findings table, then each finding with its breakdown, instances and fixes.
fn findings_section(s: &mut String, shown: &[&Finding]) {
    if shown.is_empty() {
        s.push_str("<p>No findings.</p>\n");
    } else {
        s.push_str("<h2>Findings</h2><table><tr><th>#</th><th>Severity</th><th>Rule</th><th class=\"num\">Impact</th><th class=\"num\">% of window</th><th>Finding</th></tr>\n");
        for (i, f) in shown.iter().enumerate() {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td class=\"sev-{}\">{}</td><td><code class=\"rule\">{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td><a href=\"#f{}\">{}</a></td></tr>",
                i + 1,
                f.severity.label(),
                f.severity.label(),
                f.rule,
                f.impact_text(),
                f.share_text(),
                i + 1,
                esc(&f.title)
            );
        }
        s.push_str("</table>\n");
        for (i, f) in shown.iter().enumerate() {
            let _ = writeln!(
                s,
                "<h2 id=\"f{}\">{}. {}</h2><p><span class=\"sev-{}\">{}</span> · <code>{}</code> · id <code>{}</code> · confidence {:?}</p><p>{}</p>",
                i + 1,
                i + 1,
                esc(&f.title),
                f.severity.label(),
                f.severity.label(),
                f.rule,
                esc(&f.id),
                f.confidence,
                esc(&f.evidence)
            );
            if !f.breakdown.is_empty() {
                let cells: Vec<[String; 5]> = f.breakdown.iter().map(words::row_cells).collect();
                // A column no row fills (bytes of idle time, frames of a trace without stacks)
                // is left out rather than drawn empty.
                let bytes_col = cells.iter().any(|c| !c[3].is_empty());
                let frame_col = cells.iter().any(|c| !c[4].is_empty());
                let _ = writeln!(
                    s,
                    "<table><tr><th>Breakdown</th><th class=\"num\">Count</th><th class=\"num\">Time</th>{}{}</tr>",
                    if bytes_col {
                        "<th class=\"num\">Bytes</th>"
                    } else {
                        ""
                    },
                    if frame_col {
                        "<th>Python frame</th>"
                    } else {
                        ""
                    }
                );
                for [label, count, time, bytes, frame] in &cells {
                    let _ = writeln!(
                        s,
                        "<tr><td>{}</td><td class=\"num\">{count}</td><td class=\"num\">{time}</td>{}{}</tr>",
                        esc(label),
                        if bytes_col {
                            format!("<td class=\"num\">{bytes}</td>")
                        } else {
                            String::new()
                        },
                        if frame_col {
                            format!("<td><code>{}</code></td>", esc(frame))
                        } else {
                            String::new()
                        }
                    );
                }
                s.push_str("</table>\n");
            }
            if !f.instances.is_empty() {
                s.push_str("<p>Worst instances:</p><ul>\n");
                for inst in &f.instances {
                    let _ = writeln!(s, "<li>{}</li>", words::instance(inst, &words::Html, true));
                }
                s.push_str("</ul>\n");
            }
            s.push_str("<p><b>Fix:</b></p><ul>\n");
            for adv in &f.advice {
                let _ = writeln!(s, "<li>{}</li>", esc(adv));
            }
            s.push_str("</ul>\n");
        }
    }
}

/// A table with a caption, a header row and rows of cells, escaped.
fn table<const N: usize>(s: &mut String, caption: &str, header: &[&str], rows: &[[String; N]]) {
    let _ = write!(s, "<table><caption>{}</caption><tr>", esc(caption));
    for h in header {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>\n");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n");
}
