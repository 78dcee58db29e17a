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
        "  {:>4} {:>6} {:>10} {:>6} {:>10}  TOP FINDING",
        "RANK", "STEPS", "STEP TIME", "BUSY", "IDLE GAPS"
    );
    for r in j.ranks {
        let _ = writeln!(
            s,
            "  {:>4} {:>6} {:>10} {:>5.0}% {:>10}  {}",
            r.rank,
            r.steps,
            fmt_ns(r.step_ns),
            100.0 * r.busy_share,
            fmt_ns(r.idle_gap_ns),
            r.top_finding.as_deref().unwrap_or("-")
        );
    }
    let _ = writeln!(s);
    if j.findings.is_empty() {
        let _ = writeln!(s, "  No job-level findings: the ranks run alike.");
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
        "| Rank | Steps | Step time | Busy | Idle gaps | Top finding |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---|");
    for r in j.ranks {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.0}% | {} | {} |",
            r.rank,
            r.steps,
            fmt_ns(r.step_ns),
            100.0 * r.busy_share,
            fmt_ns(r.idle_gap_ns),
            r.top_finding.as_deref().unwrap_or("-").replace('|', "\\|")
        );
    }
    let _ = writeln!(s, "\n## Job findings\n");
    if j.findings.is_empty() {
        let _ = writeln!(s, "None: the ranks run alike.");
    }
    for f in j.findings {
        let _ = writeln!(
            s,
            "- **{}** `{}` ({}): {}",
            f.severity.label(),
            f.rule,
            fmt_ns(f.impact_ns),
            f.title
        );
        let _ = writeln!(s, "  - {}", f.evidence);
        for a in &f.advice {
            let _ = writeln!(s, "  - Fix: {a}");
        }
    }
    s
}
