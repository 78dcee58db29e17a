//! The job view: one row per rank, then the job-level findings (table, JSON, Markdown).

use std::fmt::Write;
use tracehound_heuristics::Finding;
use tracehound_heuristics::finding::fmt_ns;
use tracehound_heuristics::job::RankSummary;

/// A job analysed from a directory of rank traces.
pub struct JobReport<'a> {
    /// The directory.
    pub dir: &'a str,
    /// Ranks, by rank number.
    pub ranks: &'a [RankSummary],
    /// Job-level findings.
    pub findings: &'a [Finding],
}

pub fn table(j: &JobReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "job: {} ({} ranks)\n", j.dir, j.ranks.len());
    let _ = writeln!(
        s,
        "  {:>4} {:>6} {:>10} {:>6} {:>10} {:>10}  TOP FINDING",
        "RANK", "STEPS", "STEP TIME", "BUSY", "IDLE GAPS", "WAIT/STEP"
    );
    for r in j.ranks {
        let [rank, steps, step, busy, idle, wait, top] = super::words::rank_cells(r);
        let _ = writeln!(
            s,
            "  {rank:>4} {steps:>6} {step:>10} {busy:>6} {idle:>10} {wait:>10}  {top}"
        );
    }
    if j.ranks.iter().any(|r| !r.collectives.is_empty()) {
        let _ = writeln!(
            s,
            "  (WAIT/STEP: time a rank's collectives waited for the last rank with no other GPU work to run; BUSY counts that spinning as busy)"
        );
    }
    let _ = writeln!(s);
    if j.findings.is_empty() {
        let _ = writeln!(s, "  {}", balance_note(j.ranks));
    } else {
        super::table::findings_header(&mut s);
        for (i, f) in j.findings.iter().enumerate() {
            super::table::finding_headline(&mut s, i + 1, f);
            let _ = writeln!(s, "      evidence: {}", f.evidence);
            if let Some(a) = f.advice.first() {
                let _ = writeln!(s, "      fix: {a}");
            }
        }
    }
    s
}

/// What a job without findings looks like: balanced, or waits without a fixed straggler.
fn balance_note(ranks: &[RankSummary]) -> String {
    use tracehound_heuristics::job::STRAGGLER_MIN_STEP_SHARE as MIN;
    let worst = ranks
        .iter()
        .filter(|r| r.step_ns > 0)
        .map(|r| {
            let per_step = r.collective_exposed_wait_ns / r.steps.max(1) as i64;
            (per_step as f64 / r.step_ns as f64, per_step, r.rank)
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match worst {
        Some((share, per_step, rank)) if share >= MIN => format!(
            "No straggler: the ranks arrive last in no fixed order, yet rank {rank} waits {} per step ({:.0}% of a step) in collectives with nothing else to run: see exposed_communication in its own analysis.",
            fmt_ns(per_step),
            100.0 * share
        ),
        _ => format!(
            "Balanced: no rank keeps the others waiting (exposed collective waits below {:.0}% of a step) and GPU idle time is alike across ranks.",
            100.0 * MIN
        ),
    }
}

pub fn json(j: &JobReport) -> String {
    #[derive(serde::Serialize)]
    struct Job<'a> {
        directory: &'a str,
        ranks: &'a [RankSummary],
        findings: &'a [Finding],
    }
    #[derive(serde::Serialize)]
    struct Doc<'a> {
        schema_version: u32,
        tool: &'static str,
        tool_version: &'static str,
        job: Job<'a>,
    }
    let doc = Doc {
        schema_version: super::json::SCHEMA_VERSION,
        tool: "tracehound",
        tool_version: env!("CARGO_PKG_VERSION"),
        job: Job {
            directory: j.dir,
            ranks: j.ranks,
            findings: j.findings,
        },
    };
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

pub fn markdown(j: &JobReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# tracehound job: `{}` ({} ranks)\n",
        j.dir,
        j.ranks.len()
    );
    let _ = writeln!(
        s,
        "| Rank | Steps | Step time | Busy | Idle gaps | Exposed wait / step | Top finding |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---|");
    for r in j.ranks {
        let [rank, steps, step, busy, idle, wait, top] = super::words::rank_cells(r);
        let _ = writeln!(
            s,
            "| {rank} | {steps} | {step} | {busy} | {idle} | {wait} | {} |",
            top.replace('|', "\\|")
        );
    }
    let _ = writeln!(s, "\n## Job findings\n");
    if j.findings.is_empty() {
        let _ = writeln!(s, "{}", balance_note(j.ranks));
    }
    for f in j.findings {
        let _ = writeln!(
            s,
            "- **{}** `{}` ({}): {}",
            f.severity.label(),
            f.rule,
            f.impact_text(),
            f.title
        );
        let _ = writeln!(s, "  - {}", f.evidence);
        for a in &f.advice {
            let _ = writeln!(s, "  - Fix: {a}");
        }
    }
    s
}
