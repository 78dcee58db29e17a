//! `tracehound diff`'s printers: text, Markdown, HTML and JSON of the comparisons made by
//! [`tracehound_heuristics::diff`].

use tracehound_heuristics::diff::{Change, Diff, Status};
use tracehound_heuristics::finding::{fmt_bytes, fmt_ns};

/// Output formats.
#[derive(Clone, Copy)]
pub enum Format {
    Text,
    Markdown,
    Json,
    Html,
}

/// The comparisons in `format`.
pub fn render(diffs: &[Diff], format: Format) -> String {
    match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&serde_json::json!({
                "schema_version": crate::report::JSON_SCHEMA_VERSION,
                "tool": "tracehound",
                "diffs": diffs,
            }))
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
            s.push('\n');
            s
        }
        Format::Text => diffs
            .iter()
            .map(|d| text(d, false))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Markdown => diffs
            .iter()
            .map(|d| text(d, true))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Html => diffs.iter().map(html).collect::<Vec<_>>().join("\n"),
    }
}

fn pct(c: &Change) -> String {
    format!("{:+.1}%", c.change_pct)
}

/// A change of time with its sign always written: `+12.3 ms`, `-4.0 µs`, `0 ns`.
fn signed_ns(ns: i64) -> String {
    match ns {
        0 => fmt_ns(0),
        n if n > 0 => format!("+{}", fmt_ns(n)),
        n => format!("-{}", fmt_ns(-n)),
    }
}

/// The diff in one line: faster, slower or about the same (by the median step, else by the
/// idle time in gaps, a 2% change counting as none), and the findings resolved and new.
pub fn verdict(d: &Diff) -> String {
    let (what, c) = match &d.step_ns {
        Some(c) => ("median step", c),
        None => ("idle in gaps (no step markers in both)", &d.idle_gap_ns),
    };
    let word = if c.change_pct <= -2.0 {
        "better"
    } else if c.change_pct >= 2.0 {
        "worse"
    } else {
        "about the same"
    };
    let count = |st: Status| d.findings.iter().filter(|f| f.status == st).count();
    format!(
        "{word}: {what} {} -> {} ({}); findings {} resolved, {} new, {} in both",
        fmt_ns(c.before as i64),
        fmt_ns(c.after as i64),
        pct(c),
        count(Status::Resolved),
        count(Status::New),
        count(Status::Changed)
    )
}

/// The diff as plain text (`html` false) or Markdown.
fn text(d: &Diff, markdown: bool) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let h = |s: &mut String, t: &str| {
        if markdown {
            let _ = writeln!(s, "\n## {t}\n");
        } else {
            let _ = writeln!(s, "\n  {t}");
        }
    };
    if markdown {
        let _ = writeln!(
            s,
            "# tracehound diff\n\nbefore: `{}`  \nafter: `{}`\n\n**Verdict:** {}",
            d.before,
            d.after,
            verdict(d)
        );
    } else {
        let _ = writeln!(
            s,
            "before: {}\nafter:  {}\nverdict: {}",
            d.before,
            d.after,
            verdict(d)
        );
    }
    h(&mut s, "Time");
    let line = |s: &mut String, what: &str, b: String, a: String, p: String| {
        if markdown {
            let _ = writeln!(s, "| {what} | {b} | {a} | {p} |");
        } else {
            let _ = writeln!(s, "    {what:<36} {b:>12} -> {a:>12}  {p}");
        }
    };
    if markdown {
        let _ = writeln!(s, "| | before | after | change |\n|---|---:|---:|---:|");
    }
    if let Some(c) = &d.step_ns {
        line(
            &mut s,
            "median step",
            fmt_ns(c.before as i64),
            fmt_ns(c.after as i64),
            pct(c),
        );
    }
    line(
        &mut s,
        "GPU busy",
        format!("{:.1}%", 100.0 * d.busy_share.before),
        format!("{:.1}%", 100.0 * d.busy_share.after),
        format!(
            "{:+.1} points",
            100.0 * (d.busy_share.after - d.busy_share.before)
        ),
    );
    line(
        &mut s,
        "idle in gaps",
        fmt_ns(d.idle_gap_ns.before as i64),
        fmt_ns(d.idle_gap_ns.after as i64),
        pct(&d.idle_gap_ns),
    );
    for c in d.idle_causes.iter().take(6) {
        line(
            &mut s,
            &format!("  idle: {}", c.name),
            fmt_ns(c.before_ns),
            fmt_ns(c.after_ns),
            signed_ns(c.delta_ns),
        );
    }
    for (what, c) in [
        ("reserved peak", &d.reserved_peak),
        ("allocated peak", &d.allocated_peak),
    ] {
        if let Some(c) = c {
            line(
                &mut s,
                what,
                fmt_bytes(c.before as u64),
                fmt_bytes(c.after as u64),
                pct(c),
            );
        }
    }
    h(&mut s, "Findings");
    if d.findings.is_empty() {
        let _ = writeln!(s, "    none in either capture");
    }
    for f in &d.findings {
        let title = f
            .title_after
            .as_ref()
            .or(f.title_before.as_ref())
            .cloned()
            .unwrap_or_default();
        let impact = if f.unpriced {
            "not priced".to_string()
        } else {
            format!(
                "{} -> {}",
                fmt_ns(f.impact_ns.before as i64),
                fmt_ns(f.impact_ns.after as i64)
            )
        };
        if markdown {
            let _ = writeln!(s, "- **{}** `{}` ({impact}): {title}", f.status, f.id);
        } else {
            let _ = writeln!(s, "    {:<9} {:<32} {impact:<24} {title}", f.status, f.id);
        }
    }
    for (t, rows) in [
        ("Kernels by change", &d.kernels),
        ("Operators by change", &d.operators),
    ] {
        h(&mut s, t);
        let all: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        let names = tracehound_heuristics::names::distinct_short_names(&all, 70);
        for (r, name) in rows.iter().zip(names) {
            if markdown {
                let _ = writeln!(
                    s,
                    "- `{name}`: {} -> {} ({})",
                    fmt_ns(r.before_ns),
                    fmt_ns(r.after_ns),
                    signed_ns(r.delta_ns)
                );
            } else {
                let _ = writeln!(
                    s,
                    "    {:>10} -> {:>10} ({:>10})  {name}",
                    fmt_ns(r.before_ns),
                    fmt_ns(r.after_ns),
                    signed_ns(r.delta_ns)
                );
            }
        }
    }
    s
}

fn html(d: &Diff) -> String {
    let md = text(d, false);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>tracehound diff</title><style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:0 auto;padding:12px}}pre{{white-space:pre-wrap;font-size:.9em}}</style></head><body><h1>tracehound diff</h1><pre>{}</pre></body></html>\n",
        crate::report::esc_html(&md)
    )
}
