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
        // Without GPU work there is no time to place: the verdict says what the capture lacks.
        let _ = writeln!(
            s,
            "{}",
            if matches!(
                w.source,
                tracehound_heuristics::window::WindowSource::WholeTrace
            ) {
                "  No findings: the trace holds no GPU work to judge (the verdict says what the capture lacks)."
            } else {
                "  No findings: no rule found time to save in this trace (see the summary for where the time goes)."
            }
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
                "      {:<70} {:<12} {:>4} {:>9} {:>10}  roof {:>4}  {}",
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
        "  {:>2}  {:<8} {:<24} {:>10} {:>6}  {}",
        n,
        f.severity.label(),
        f.rule,
        f.impact_text(),
        f.share_text(),
        f.title
    );
}

/// How the table is shown on a terminal: wrapped at its width and coloured.
#[derive(Debug, Clone, Copy)]
pub struct Terminal {
    /// Columns.
    pub width: usize,
    /// Colour severity and verdict (ANSI).
    pub colour: bool,
}

/// The labels a wrapped line hangs its continuation under (`evidence: ` ...).
const LABELS: [&str; 6] = [
    "evidence: ",
    "worst: ",
    "fix: ",
    "· ",
    "verdict: ",
    "top kernel: ",
];

/// ANSI colour of a severity word.
fn severity_colour(word: &str) -> Option<&'static str> {
    match word {
        "high" => Some("\x1b[1;31m"),
        "medium" => Some("\x1b[33m"),
        "low" => Some("\x1b[36m"),
        "info" => Some("\x1b[2m"),
        _ => None,
    }
}

/// The table as a terminal shows it: each line longer than the width wrapped at spaces, its
/// continuation lines indented under the text after the line's label (a finding's headline
/// under its FINDING column), so nothing breaks mid-token as a terminal's own wrap does; with
/// colour, the severities and the verdict stand out. The text a pipe or file gets is the
/// unwrapped, uncoloured table.
pub fn for_terminal(text: &str, term: Terminal) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    // Where the FINDING column starts, from the header line.
    let mut finding_col: Option<usize> = None;
    for line in text.lines() {
        if let Some(k) = line.find("FINDING")
            && line.trim_start().starts_with('#')
        {
            finding_col = Some(line[..k].chars().count());
        }
        let indent = line.chars().take_while(|c| *c == ' ').count();
        let rest = &line[indent..];
        let headline = rest
            .split_whitespace()
            .nth(1)
            .and_then(severity_colour)
            .filter(|_| {
                rest.split_whitespace()
                    .next()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            });
        let hang = if headline.is_some() {
            finding_col.unwrap_or(indent + 4)
        } else {
            indent
                + LABELS
                    .iter()
                    .find(|l| rest.starts_with(*l))
                    .map_or(2, |l| l.chars().count())
        };
        let wrapped = wrap(line, term.width, hang);
        let wrapped = match (term.colour, headline) {
            (true, Some(code)) => {
                let sev = rest.split_whitespace().nth(1).unwrap_or("");
                wrapped.replacen(&format!(" {sev} "), &format!(" {code}{sev}\x1b[0m "), 1)
            }
            _ => wrapped,
        };
        let wrapped = if term.colour && rest.starts_with("verdict: ") {
            wrapped.replacen("verdict:", "\x1b[1mverdict:\x1b[0m", 1)
        } else {
            wrapped
        };
        out.push_str(&wrapped);
        out.push('\n');
    }
    out
}

/// `line` broken at spaces into lines of at most `width` characters, the continuations
/// indented by `hang` (a word longer than the room left stays whole on its own line).
fn wrap(line: &str, width: usize, hang: usize) -> String {
    if line.chars().count() <= width || width <= hang + 10 {
        return line.to_string();
    }
    let indent = line.chars().take_while(|c| *c == ' ').count();
    let mut out = String::new();
    let mut cur = " ".repeat(indent);
    let mut cur_len = indent;
    let mut at_start = true;
    for word in glued_words(&line[indent..]) {
        let word = word.as_str();
        let len = word.chars().count();
        if !at_start && cur_len + 1 + len > width {
            out.push_str(cur.trim_end());
            out.push('\n');
            cur = " ".repeat(hang);
            cur_len = hang;
            at_start = true;
        }
        if !at_start {
            cur.push(' ');
            cur_len += 1;
        }
        cur.push_str(word);
        cur_len += len;
        at_start = false;
    }
    out.push_str(cur.trim_end());
    out
}

/// Units that stay on the line of the number before them (`100 µs`, `37.9 ms`).
const UNITS: [&str; 16] = [
    "ns", "µs", "ms", "s", "%", "B", "KiB", "MiB", "GiB", "TiB", "GB/s", "TB/s", "MB", "GB",
    "points", "SMs",
];

/// The words of `text` as wrapping may break them: a unit joined to the number before it, a
/// comparison sign (`≥`) to what follows it, with the space between kept.
fn glued_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut glue_next = false;
    for word in text.split(' ') {
        let after_number = out
            .last()
            .and_then(|w| w.chars().last())
            .is_some_and(|c| c.is_ascii_digit());
        if (glue_next || (UNITS.contains(&word) && after_number))
            && let Some(last) = out.last_mut()
        {
            last.push(' ');
            last.push_str(word);
        } else {
            out.push(word.to_string());
        }
        glue_next = matches!(word, "≥" | "≤" | "<" | ">" | "~");
    }
    out
}

#[cfg(test)]
mod terminal_tests {
    use super::*;

    #[test]
    fn long_lines_wrap_at_spaces_under_their_label() {
        let text = "      evidence: busy 18.5% of 463.4 ms; causes: data loading 92%, Python 3%; largest gap 83.6 ms\n";
        let out = for_terminal(
            text,
            Terminal {
                width: 40,
                colour: false,
            },
        );
        for l in out.lines() {
            assert!(l.chars().count() <= 40, "{l:?}");
        }
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("      evidence: busy"));
        assert!(lines[1].starts_with(&" ".repeat(16)) && !lines[1].starts_with(&" ".repeat(17)));
        // Every word is there, whole and in order.
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(words(&out), words(text));
    }

    #[test]
    fn headlines_hang_under_the_finding_column_and_severities_are_coloured() {
        let text = "   #  SEVERITY RULE                         IMPACT WINDOW  FINDING\n   1  high     idle_gaps                    2.78 s  93.8%  GPU 2 idle 94% of the window, 98% of it one 2.74 s stall at +157.85 ms: 12 gaps ≥ 100 µs cost 2.78 s\n";
        let out = for_terminal(
            text,
            Terminal {
                width: 80,
                colour: true,
            },
        );
        let col = text.lines().next().unwrap().find("FINDING").unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() > 2);
        assert!(lines[1].contains("\x1b[1;31mhigh\x1b[0m"), "{out}");
        for l in &lines[2..] {
            assert!(l.starts_with(&" ".repeat(col)), "{l:?}");
        }
        assert!(out.contains("≥ 100 µs") || out.contains("≥\n"), "{out}");
    }
}
