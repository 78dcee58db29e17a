//! Job-level findings across the ranks of one distributed job: the slowest rank (every other
//! rank waits for it at each collective) and the spread of GPU idle time across ranks.

use crate::Analysis;
use crate::finding::{Confidence, Finding, Row, Severity, fmt_ns, metrics};
use serde::Serialize;

/// What the job view keeps of one rank after its trace is dropped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankSummary {
    /// The trace file.
    pub source: String,
    /// Rank (from `distributedInfo`, else the file's position).
    pub rank: i64,
    /// Profiler steps in the window.
    pub steps: usize,
    /// Analysed window, ns.
    pub window_ns: i64,
    /// Mean step time, ns.
    pub step_ns: i64,
    /// GPU busy share of the busiest device.
    pub busy_share: f64,
    /// GPU idle in gaps over the threshold, ns.
    pub idle_gap_ns: i64,
    /// The verdict's bound.
    pub bound: String,
    /// Title of the top finding, if any.
    pub top_finding: Option<String>,
    /// Findings of the rank (ranked).
    pub findings: Vec<Finding>,
}

impl RankSummary {
    /// Summarises one analysed rank.
    pub fn new(source: &str, rank: i64, steps: usize, analysis: &Analysis) -> Self {
        let w = analysis.summary.window.len();
        let busy = analysis
            .summary
            .devices
            .iter()
            .map(|d| d.busy_share)
            .fold(0.0, f64::max);
        let idle_gap_ns = analysis
            .findings
            .iter()
            .filter(|f| f.rule == "idle_gaps")
            .map(|f| f.impact_ns)
            .max()
            .unwrap_or(0);
        RankSummary {
            source: source.to_string(),
            rank,
            steps,
            window_ns: w,
            step_ns: w / steps.max(1) as i64,
            busy_share: busy,
            idle_gap_ns,
            bound: analysis.summary.bound.clone(),
            top_finding: analysis.findings.first().map(|f| f.title.clone()),
            findings: analysis.findings.clone(),
        }
    }
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    if v.is_empty() { 0 } else { v[v.len() / 2] }
}

/// Findings about the job as a whole, ranked by impact.
pub fn job_findings(ranks: &[RankSummary]) -> Vec<Finding> {
    let mut out = Vec::new();
    if ranks.len() < 2 {
        return out;
    }
    let med = median(ranks.iter().map(|r| r.step_ns).collect());
    if let Some(slow) = ranks
        .iter()
        .max_by(|a, b| a.step_ns.cmp(&b.step_ns).then(b.rank.cmp(&a.rank)))
        && med > 0
        && slow.step_ns as f64 > med as f64 * 1.05
    {
        let extra = slow.step_ns - med;
        let impact = extra * slow.steps.max(1) as i64;
        let share = impact as f64 / slow.window_ns.max(1) as f64;
        let others = ranks.len() - 1;
        out.push(Finding {
            rule: "slowest_rank",
            title: format!(
                "rank {} is {:.0}% slower per step than the median ({} vs {}): the other {others} ranks wait for it",
                slow.rank,
                100.0 * (slow.step_ns as f64 / med as f64 - 1.0),
                fmt_ns(slow.step_ns),
                fmt_ns(med)
            ),
            severity: Severity::from_share(share),
            impact_ns: impact,
            impact_share: share,
            confidence: Confidence::Medium,
            device: None,
            evidence: format!(
                "rank {}: {} steps, busy {:.0}%, {}; its top finding: {}",
                slow.rank,
                slow.steps,
                100.0 * slow.busy_share,
                slow.bound,
                slow.top_finding.as_deref().unwrap_or("none")
            ),
            breakdown: ranks
                .iter()
                .map(|r| Row {
 cause: None, share: None,
                    label: format!("rank {} step time", r.rank),
                    count: r.steps as u64,
                    time_ns: r.step_ns,
                    bytes: None,
                    python_frame: None,
                })
                .collect(),
            instances: Vec::new(),
            advice: vec![format!(
                "Every collective waits for rank {}: fix its findings first (run tracehound analyze {}), then check that its GPU, host and input shard match the others (clocks, data loader, imbalance in sequence lengths).",
                slow.rank, slow.source
            )],
            metrics: metrics([
                ("slow_rank", slow.rank as f64),
                ("slow_step_ns", slow.step_ns as f64),
                ("median_step_ns", med as f64),
            ]),
        });
    }
    let idle = |r: &RankSummary| 1.0 - r.busy_share;
    if let (Some(lo), Some(hi)) = (
        ranks
            .iter()
            .min_by(|a, b| idle(a).total_cmp(&idle(b)).then(a.rank.cmp(&b.rank))),
        ranks
            .iter()
            .max_by(|a, b| idle(a).total_cmp(&idle(b)).then(b.rank.cmp(&a.rank))),
    ) && idle(hi) - idle(lo) >= 0.10
    {
        let impact = (hi.idle_gap_ns - lo.idle_gap_ns).max(0);
        let share = impact as f64 / hi.window_ns.max(1) as f64;
        out.push(Finding {
            rule: "idle_spread",
            title: format!(
                "GPU idle time differs across ranks: {:.0}% on rank {} vs {:.0}% on rank {}",
                100.0 * idle(hi),
                hi.rank,
                100.0 * idle(lo),
                lo.rank
            ),
            severity: Severity::from_share(share),
            impact_ns: impact,
            impact_share: share,
            confidence: Confidence::Medium,
            device: None,
            evidence: format!(
                "idle share per rank ranges {:.0}%..{:.0}%; rank {}: {}",
                100.0 * idle(lo),
                100.0 * idle(hi),
                hi.rank,
                hi.top_finding.as_deref().unwrap_or("no findings")
            ),
            breakdown: Vec::new(),
            instances: Vec::new(),
            advice: vec![format!(
                "Ranks should idle alike: rank {}'s extra idle time points to host-side work only it does (logging, checkpointing, uneven data shards); see its idle_gaps finding.",
                hi.rank
            )],
            metrics: metrics([("max_idle_share", idle(hi)), ("min_idle_share", idle(lo))]),
        });
    }
    crate::rank(&mut out);
    out
}
