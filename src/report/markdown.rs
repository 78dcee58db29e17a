//! Markdown output, to paste into a performance review or a pull request.

use super::words::md;
use super::{TraceReport, gpu_names, words};
use std::fmt::Write;
use tracehound_heuristics::finding::fmt_ns;
use tracehound_heuristics::summary::short_kernel;

fn cell(s: &str) -> String {
    md(s).replace('|', "\\|").replace('\n', " ")
}

pub fn render(reports: &[TraceReport], top: Option<usize>) -> String {
    let mut s = String::new();
    for r in reports {
        let t = r.trace;
        let a = &r.analysis;
        let w = &a.summary.window;
        let _ = writeln!(s, "# tracehound: `{}`\n", t.source);
        let _ = writeln!(
            s,
            "{} · window {} ({})\n",
            gpu_names(t),
            fmt_ns(w.len()),
            w.describe()
        );
        let _ = writeln!(s, "**Verdict:** {}\n", md(&a.summary.verdict));
        let shown: Vec<_> = a.findings.iter().take(top.unwrap_or(usize::MAX)).collect();
        if shown.is_empty() {
            let _ = writeln!(s, "No findings.\n");
        } else {
            let _ = writeln!(
                s,
                "| # | Severity | Rule | Impact | % of window | Finding |"
            );
            let _ = writeln!(s, "|---|---|---|---:|---:|---|");
            for (i, f) in shown.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "| {} | {} | `{}` | {} | {} | {} |",
                    i + 1,
                    f.severity.label(),
                    f.rule,
                    f.impact_text(),
                    f.share_text(),
                    cell(&f.title)
                );
            }
            let _ = writeln!(s);
            for (i, f) in shown.iter().enumerate() {
                let _ = writeln!(s, "## {}. {}\n", i + 1, md(&f.title));
                let _ = writeln!(
                    s,
                    "*{}* · `{}` · confidence {:?}\n",
                    f.severity.label(),
                    f.rule,
                    f.confidence
                );
                let _ = writeln!(s, "{}\n", md(&f.evidence));
                if !f.breakdown.is_empty() {
                    let _ = writeln!(s, "| Breakdown | Count | Time | Bytes | Python frame |");
                    let _ = writeln!(s, "|---|---:|---:|---:|---|");
                    for row in &f.breakdown {
                        let [label, count, time, bytes, frame] = words::row_cells(row);
                        let _ = writeln!(
                            s,
                            "| {} | {count} | {time} | {bytes} | {} |",
                            cell(&label),
                            cell(&frame)
                        );
                    }
                    let _ = writeln!(s);
                }
                if !f.instances.is_empty() {
                    let _ = writeln!(s, "Worst instances:\n");
                    for inst in &f.instances {
                        let _ = writeln!(s, "- {}", words::instance(inst, &words::Markdown, true));
                    }
                    let _ = writeln!(s);
                }
                let _ = writeln!(s, "**Fix:**\n");
                for adv in &f.advice {
                    let _ = writeln!(s, "- {}", md(adv));
                }
                let _ = writeln!(s);
            }
        }
        let _ = writeln!(s, "## Summary\n");
        for d in &a.summary.devices {
            let _ = writeln!(
                s,
                "- {}, {}",
                md(&words::device_busy(d)),
                md(&words::device_ops(d))
            );
        }
        if let Some(k) = &a.summary.top_kernel {
            let _ = writeln!(
                s,
                "- Top kernel: `{}`, {} in {} calls ({:.0}% of kernel time)",
                short_kernel(&k.name),
                fmt_ns(k.total_ns),
                k.count,
                100.0 * k.share_of_kernel_time
            );
        }
        if !a.summary.stack.is_empty() {
            let _ = writeln!(s, "\nStack:\n");
            for f in &a.summary.stack {
                let _ = writeln!(
                    s,
                    "- {}: {}{}",
                    md(f.item),
                    md(&f.value),
                    f.warning
                        .as_deref()
                        .map(|w| format!(" **({w})**"))
                        .unwrap_or_default()
                );
            }
        }
        for (caption, rows) in super::accounting_tables(&a.summary) {
            let _ = writeln!(s, "\n{caption}:\n");
            let _ = writeln!(s, "| {} |", super::ACCOUNTING_HEADER.join(" | "));
            let _ = writeln!(s, "|{}", "---|".repeat(super::ACCOUNTING_HEADER.len()));
            for r in rows {
                let _ = writeln!(s, "| `{}` | {} |", r[0], r[1..].join(" | "));
            }
        }
        for (caption, rows) in super::roofline_tables(&a.summary) {
            let _ = writeln!(s, "\n{caption}:\n");
            let _ = writeln!(s, "| {} |", super::ROOFLINE_HEADER.join(" | "));
            let _ = writeln!(s, "|{}", "---|".repeat(super::ROOFLINE_HEADER.len()));
            for r in rows {
                let _ = writeln!(s, "| `{}` | {} |", r[0], r[1..].join(" | "));
            }
        }
        for (caption, rows) in super::membound_tables(&a.summary) {
            let _ = writeln!(
                s,
                "\n{caption}{}\n",
                if rows.is_empty() { "." } else { ":" }
            );
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(s, "| {} |", super::MEMBOUND_HEADER.join(" | "));
            let _ = writeln!(s, "|{}", "---|".repeat(super::MEMBOUND_HEADER.len()));
            for r in rows {
                let _ = writeln!(s, "| `{}` | {} |", r[0], r[1..].join(" | "));
            }
        }
        let _ = writeln!(s);
    }
    s
}
