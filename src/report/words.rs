//! The phrases every printer words findings with: a breakdown row, a worst instance, a
//! device's line, a rank's cells. The table, Markdown, HTML and JUnit reports, the job
//! reports and the TUI call these, each with its [`Markup`], so that a number is written the
//! same way everywhere and a rewording is made once.

use crate::report::esc_html;
use tracehound_heuristics::finding::{Instance, Row, fmt_bytes, fmt_ns};
use tracehound_heuristics::job::RankSummary;
use tracehound_heuristics::summary::DeviceSummary;

/// How a printer marks up text and code (operator names, Python frames).
pub trait Markup {
    /// Running text, escaped for the output.
    fn text(&self, s: &str) -> String;
    /// A name set as code.
    fn code(&self, s: &str) -> String;
    /// The CPU operator behind an instance, with its separator.
    fn op(&self, op: &str) -> String {
        format!(" — {}", self.code(op))
    }
}

/// Plain text: the terminal table and JUnit.
pub struct Plain;

impl Markup for Plain {
    fn text(&self, s: &str) -> String {
        s.to_string()
    }
    fn code(&self, s: &str) -> String {
        s.to_string()
    }
}

/// The TUI: plain, with the operator in brackets.
pub struct Tui;

impl Markup for Tui {
    fn text(&self, s: &str) -> String {
        s.to_string()
    }
    fn code(&self, s: &str) -> String {
        s.to_string()
    }
    fn op(&self, op: &str) -> String {
        format!(" [{op}]")
    }
}

/// Markdown: names in backticks.
pub struct Markdown;

impl Markup for Markdown {
    fn text(&self, s: &str) -> String {
        md(s)
    }
    fn code(&self, s: &str) -> String {
        format!("`{s}`")
    }
}

/// Prose for Markdown: code-like words (`__next__`, `aten::copy_`, `*args`,
/// `bn_bw<…>(…)`) in code spans, so that a renderer shows them as written instead of reading
/// `__x__` as bold, `*` as emphasis or `<…>` as HTML. Code spans already in the text stay.
pub fn md(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for (k, part) in text.split('`').enumerate() {
        if k > 0 {
            out.push('`');
        }
        if k % 2 == 1 {
            // Inside a code span the text already has.
            out.push_str(part);
            continue;
        }
        let mut word = String::new();
        for c in part.chars().chain(std::iter::once(' ')) {
            if c.is_whitespace() {
                out.push_str(&code_like(&word));
                word.clear();
                out.push(c);
            } else {
                word.push(c);
            }
        }
        out.pop();
    }
    out
}

/// One whitespace-delimited word, in a code span when Markdown would read it as markup
/// (`_` or `*` runs as emphasis, `<` as HTML, `\\` as an escape, `~` as strikethrough); the
/// punctuation around it stays outside, a closing bracket only when the word does not open it
/// (`f(x),` keeps its `)`).
fn code_like(word: &str) -> String {
    let lead = word
        .find(|c: char| !"(\"'[".contains(c))
        .unwrap_or(word.len());
    let mut trail = word.len();
    while trail > lead {
        let c = word[..trail].chars().next_back().unwrap_or(' ');
        let core = &word[lead..trail];
        let unopened = |open: char, close: char| {
            c == close && core.matches(close).count() > core.matches(open).count()
        };
        if ",.;:!?\"'".contains(c) || unopened('(', ')') || unopened('[', ']') {
            trail -= c.len_utf8();
        } else {
            break;
        }
    }
    let core = &word[lead..trail];
    let markup = core.contains(['_', '*', '<', '\\', '~']) || core.contains("::");
    if core.is_empty() || !markup {
        return word.to_string();
    }
    format!("{}`{core}`{}", &word[..lead], &word[trail..])
}

/// HTML: escaped, names in `<code>`.
pub struct Html;

impl Markup for Html {
    fn text(&self, s: &str) -> String {
        esc_html(s)
    }
    fn code(&self, s: &str) -> String {
        format!("<code>{}</code>", esc_html(s))
    }
}

/// A worst instance: `at +12.34 ms, 1.2 ms: what — op @ frame` (the operator only `with_op`).
pub fn instance(i: &Instance, m: &dyn Markup, with_op: bool) -> String {
    // An instance before the window's start (work queued before the capture began) has a
    // negative offset: `at -7.65 ms`, never `+-7.65`.
    let mut s = format!(
        "at {}{:.2} ms, {}: {}",
        if i.offset_ms < 0.0 { "-" } else { "+" },
        i.offset_ms.abs(),
        fmt_ns(i.dur_ns),
        m.text(&i.what)
    );
    if with_op && let Some(op) = &i.cpu_op {
        s.push_str(&m.op(op));
    }
    if let Some(fr) = &i.python_frame {
        s.push_str(&format!(" @ {}", m.code(fr)));
    }
    s
}

/// A breakdown row as the cells of a table: label, count, time, bytes, Python frame.
pub fn row_cells(r: &Row) -> [String; 5] {
    [
        r.label.clone(),
        r.count.to_string(),
        fmt_ns(r.time_ns),
        r.bytes.map(fmt_bytes).unwrap_or_default(),
        r.python_frame.clone().unwrap_or_default(),
    ]
}

/// A breakdown row in one line: `label — 1.2 ms ×3, 4.0 MiB @ frame` (time and count when
/// measured, bytes when timed).
pub fn row_line(r: &Row) -> String {
    let mut line = r.label.clone();
    if r.count > 0 && r.time_ns > 0 {
        line.push_str(&format!(" — {} ×{}", fmt_ns(r.time_ns), r.count));
    }
    if let (Some(b), true) = (r.bytes, r.time_ns > 0) {
        line.push_str(&format!(", {}", fmt_bytes(b)));
    }
    if let Some(fr) = &r.python_frame {
        line.push_str(&format!(" @ {fr}"));
    }
    line
}

/// A breakdown row in brief: `label (1.2 ms)`.
pub fn row_brief(r: &Row) -> String {
    format!("{} ({})", r.label, fmt_ns(r.time_ns))
}

/// `GPU 0 NVIDIA H200: busy 97.1% (collectives ...)`, a device's first words.
pub fn device_busy(d: &DeviceSummary) -> String {
    format!(
        "GPU {}{}: busy {:.1}%{}",
        d.device,
        d.name
            .as_deref()
            .map(|n| format!(" {n}"))
            .unwrap_or_default(),
        100.0 * d.busy_share,
        collectives_note(d)
    )
}

/// `1200 kernels, 30 memcpys, 2 memsets`.
pub fn device_ops(d: &DeviceSummary) -> String {
    format!(
        "{} kernels, {} memcpys, {} memsets",
        d.kernels, d.memcpys, d.memsets
    )
}

/// ` (collectives 12% of the window, 3% with no compute beside them)`, or nothing when the
/// device ran almost no collectives.
pub fn collectives_note(d: &DeviceSummary) -> String {
    if d.collective_share < 0.005 {
        return String::new();
    }
    format!(
        " (collectives {:.0}% of the window, {:.0}% with no compute beside them)",
        100.0 * d.collective_share,
        100.0 * d.exposed_collective_share
    )
}

/// A rank's cells in a job table: rank, steps, step time, busy, idle gaps, exposed wait per
/// step (`-` without collectives), top finding (`-` without one).
pub fn rank_cells(r: &RankSummary) -> [String; 7] {
    [
        r.rank.to_string(),
        r.steps.to_string(),
        fmt_ns(r.step_ns),
        format!("{:.0}%", 100.0 * r.busy_share),
        fmt_ns(r.idle_gap_ns),
        if r.collectives.is_empty() {
            "-".to_string()
        } else {
            fmt_ns(r.collective_exposed_wait_ns / r.steps.max(1) as i64)
        },
        r.top_finding.clone().unwrap_or_else(|| "-".into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst() -> Instance {
        Instance {
            offset_ms: 1.5,
            dur_ns: 2_000_000,
            what: "gap <x>".into(),
            cpu_op: Some("aten::item".into()),
            python_frame: Some("train.py(3): step".into()),
            start_ns: 0,
        }
    }

    #[test]
    fn an_instance_in_each_markup() {
        let i = inst();
        assert_eq!(
            instance(&i, &Markdown, true),
            // `<x>` would be an HTML tag to a Markdown renderer: a code span keeps it.
            "at +1.50 ms, 2.0 ms: gap `<x>` — `aten::item` @ `train.py(3): step`"
        );
        assert_eq!(
            instance(&i, &Html, true),
            "at +1.50 ms, 2.0 ms: gap &lt;x&gt; — <code>aten::item</code> @ <code>train.py(3): step</code>"
        );
        assert_eq!(
            instance(&i, &Tui, true),
            "at +1.50 ms, 2.0 ms: gap <x> [aten::item] @ train.py(3): step"
        );
        assert_eq!(
            instance(&i, &Plain, false),
            "at +1.50 ms, 2.0 ms: gap <x> @ train.py(3): step"
        );
        let before = Instance {
            offset_ms: -148.44,
            ..inst()
        };
        assert!(instance(&before, &Plain, false).starts_with("at -148.44 ms,"));
    }
}
