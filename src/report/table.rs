//! The terminal table: ranked findings, each with its key evidence, then the trace summary.

use super::{TraceReport, gpu_names, words};
use std::fmt::Write;
use tracehound_heuristics::Finding;
use tracehound_heuristics::finding::{fmt_bytes, fmt_ns};
use tracehound_heuristics::summary::short_kernel;

pub fn render(reports: &[TraceReport], top: Option<usize>) -> String {
    let mut s = String::new();
    for (k, r) in reports.iter().enumerate() {
        if k > 0 {
            s.push('\n');
        }
        one(&mut s, r, top);
    }
    s
}

fn one(s: &mut String, r: &TraceReport, top: Option<usize>) {
    let t = r.trace;
    let a = &r.analysis;
    let w = &a.summary.window;
    let _ = writeln!(s, "{}", t.source);
    let _ = writeln!(
        s,
        "  {} · window {} ({})",
        gpu_names(t),
        fmt_ns(w.len()),
        w.describe()
    );
    for n in t
        .stats
        .notes
        .iter()
        .filter(|n| n.contains("aligned by wall clock") || n.contains("inventory attached"))
    {
        let _ = writeln!(s, "  with {n}");
    }
    let _ = writeln!(s);
    let shown: Vec<_> = a.findings.iter().take(top.unwrap_or(usize::MAX)).collect();
    if shown.is_empty() {
        let _ = writeln!(
            s,
            "  No findings: nothing in this trace costs measurable GPU time."
        );
    } else {
        findings_header(s);
        for (i, f) in shown.iter().enumerate() {
            finding_headline(s, i + 1, f);
            let pad = " ".repeat(6);
            let _ = writeln!(s, "{pad}evidence: {}", f.evidence);
            for row in f.breakdown.iter().take(4) {
                let _ = writeln!(s, "{pad}  · {}", words::row_line(row));
            }
            if let Some(inst) = f.instances.first() {
                let _ = writeln!(
                    s,
                    "{pad}worst: {}",
                    words::instance(inst, &words::Plain, false)
                );
            }
            for adv in f.advice.iter().take(2) {
                let _ = writeln!(s, "{pad}fix: {adv}");
            }
        }
        if shown.len() < a.findings.len() {
            let _ = writeln!(
                s,
                "  ({} more findings; drop --top to see them)",
                a.findings.len() - shown.len()
            );
        }
    }
    let _ = writeln!(s);
    let sm = &a.summary;
    let _ = writeln!(s, "  summary");
    for d in &sm.devices {
        let _ = writeln!(
            s,
            "    {} · {} in the window",
            words::device_busy(d),
            words::device_ops(d)
        );
        if let (Some(r), Some(a)) = (d.reserved_peak, d.allocated_peak) {
            let _ = writeln!(
                s,
                "      memory: reserved peak {}, allocated peak {}",
                fmt_bytes(r.max(0) as u64),
                fmt_bytes(a.max(0) as u64)
            );
        }
    }
    if let Some(k) = &sm.top_kernel {
        let _ = writeln!(
            s,
            "    top kernel: {} — {} in {} calls ({:.0}% of kernel time)",
            short_kernel(&k.name),
            fmt_ns(k.total_ns),
            k.count,
            100.0 * k.share_of_kernel_time
        );
    }
    for (caption, rows) in super::accounting_tables(sm) {
        let _ = writeln!(s, "    {caption}");
        for r in rows {
            let _ = writeln!(
                s,
                "      {:<70} {:<12} {:>4} {:>9} {:>5}/step  roof {:>4}  {}",
                // Python frames keep their parentheses, which short_name drops as argument lists.
                tracehound_heuristics::names::clip(&r[0], 70),
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6]
            );
        }
    }
    for (caption, rows) in super::roofline_tables(sm) {
        let _ = writeln!(s, "    {caption}");
        for r in rows {
            let _ = writeln!(
                s,
                "      {:<58} {:<5} ×{:<4} {:>9} {:>5} TFLOP/s {:>5} TB/s  {} ({})",
                tracehound_heuristics::names::short_name(&r[0], 58),
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6],
                r[7]
            );
        }
    }
    for (caption, rows) in super::membound_tables(sm) {
        let _ = writeln!(s, "    {caption}");
        for r in rows {
            let _ = writeln!(
                s,
                "      {:<58} {:<5} ×{:<4} {:>9} {:>5} TB/s  {:>4} of HBM ({})",
                tracehound_heuristics::names::short_name(&r[0], 58),
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6]
            );
        }
    }
    if !sm.stack.is_empty() {
        let _ = writeln!(s, "    stack:");
        for f in &sm.stack {
            let _ = writeln!(
                s,
                "      {:<15}{}{}",
                f.item,
                f.value,
                if f.warning.is_some() { "  (!)" } else { "" }
            );
        }
    }
    let _ = writeln!(s, "    verdict: {}", sm.verdict);
}

/// The column header of a findings list.
pub(super) fn findings_header(s: &mut String) {
    let _ = writeln!(
        s,
        "  {:>2}  {:<8} {:<24} {:>10} {:>6}  FINDING",
        "#", "SEVERITY", "RULE", "IMPACT", "WINDOW"
    );
}

/// The first line of finding number `n`: severity, rule, impact, share and title.
pub(super) fn finding_headline(s: &mut String, n: usize, f: &Finding) {
    let _ = writeln!(
        s,
        "  {:>2}  {:<8} {:<24} {:>10} {:>5.1}%  {}",
        n,
        f.severity.label(),
        f.rule,
        fmt_ns(f.impact_ns),
        100.0 * f.impact_share,
        f.title
    );
}
