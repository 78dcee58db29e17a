//! Job-level findings across the ranks of one distributed job: collectives matched across
//! ranks (who arrives last, who waits and how long), the slowest rank when there are no
//! collectives, and the spread of GPU idle time across ranks.
//!
//! Matching: the n-th collective of a kind in a step is the same collective on every rank of
//! an SPMD job. A collective kernel runs from the moment its rank arrives until every rank
//! has arrived and the transfer is done, so the rank that arrives last spends the least time
//! in it, and every other rank's extra time over that minimum is its wait. Durations need no
//! clock alignment between hosts, which timestamps would.

use crate::Analysis;
use crate::collectives::CollectiveRecord;
use crate::finding::{Confidence, Finding, Row, Severity, fmt_ns, metrics};
use crate::rules::idle_gaps;
use serde::{Deserialize, Serialize};
use tracehound_parsers::Trace;

/// What the job view keeps of one rank after its trace is dropped: everything the job
/// findings and the job report read, so a job can be put together from these alone (written
/// by `analyze FILE --rank-summary`, read by `merge`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSummary {
    /// The trace file.
    pub source: String,
    /// Rank (from `distributedInfo`, else the file's position).
    pub rank: i64,
    /// Profiler steps in the window.
    pub steps: usize,
    /// Analysed window, ns.
    pub window_ns: i64,
    /// Median step time, ns (the window when there are no steps).
    pub step_ns: i64,
    /// Each profiler step's time, ns, in step order.
    #[serde(default)]
    pub step_times_ns: Vec<i64>,
    /// GPU busy share of the busiest device.
    pub busy_share: f64,
    /// GPU idle in gaps over the threshold, ns.
    pub idle_gap_ns: i64,
    /// The verdict's bound.
    pub bound: crate::summary::Bound,
    /// Title of the top finding, if any.
    pub top_finding: Option<String>,
    /// Findings of the rank (ranked).
    pub findings: Vec<Finding>,
    /// The rank's top measured cause of GPU idle time (the first row of its idle_gaps
    /// breakdown), when it has idle gaps.
    pub top_idle_cause: Option<String>,
    /// Collective kernels in the window, in start order.
    pub collectives: Vec<CollectiveRecord>,
    /// Time this rank's collectives spent waiting for the last rank to arrive, ns (set by
    /// [`match_collectives`]).
    pub collective_wait_ns: i64,
    /// The part of that wait no other GPU work overlapped: GPU time the rank lost, ns.
    pub collective_exposed_wait_ns: i64,
}

impl RankSummary {
    /// Summarises one analysed rank.
    pub fn new(trace: &Trace, rank: i64, analysis: &Analysis) -> Self {
        let w = analysis.summary.window.len();
        let steps = trace.steps.len();
        let busy = analysis
            .summary
            .devices
            .iter()
            .map(|d| d.busy_share)
            .fold(0.0, f64::max);
        let idle = analysis.findings.iter().find(|f| f.rule == idle_gaps::ID);
        RankSummary {
            source: trace.source.clone(),
            rank,
            steps,
            window_ns: w,
            step_ns: step_ns(trace, w),
            step_times_ns: trace.steps.iter().map(|s| s.end - s.start).collect(),
            busy_share: busy,
            idle_gap_ns: idle.map_or(0, |f| f.impact_ns),
            bound: analysis.summary.bound,
            top_finding: analysis
                .findings
                .iter()
                .find(|f| !f.unpriced())
                .map(|f| f.title.clone()),
            findings: analysis.findings.clone(),
            top_idle_cause: idle
                .and_then(|f| f.breakdown.first())
                .map(|r| r.label.clone()),
            collectives: crate::collectives::records(trace, &analysis.summary.window),
            collective_wait_ns: 0,
            collective_exposed_wait_ns: 0,
        }
    }
}

/// The version of the rank-summary file format; `merge` refuses other versions, since the
/// job findings would silently read missing fields as zero.
pub const SUMMARY_SCHEMA_VERSION: u32 = 1;

/// What a rank-summary file says it is, so that `merge` rejects a report or a trace given by
/// mistake with a clear message.
const SUMMARY_KIND: &str = "tracehound rank summary";

#[derive(Serialize, Deserialize)]
struct SummaryFile<'a> {
    kind: std::borrow::Cow<'a, str>,
    schema_version: u32,
    tool_version: std::borrow::Cow<'a, str>,
    /// Whether the trace recorded its rank; when not, `merge` numbers the rank by its file's
    /// place among the job's files, as `analyze DIR` does.
    rank_known: bool,
    summary: std::borrow::Cow<'a, RankSummary>,
}

/// Why a rank-summary file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    /// Not JSON, or JSON without the fields of a summary.
    #[error("not a tracehound rank summary ({0})")]
    Malformed(#[from] serde_json::Error),
    /// JSON of something else (a report, a trace).
    #[error(
        "not a tracehound rank summary (kind is {0:?}; write one with `tracehound analyze TRACE --rank-summary OUT`)"
    )]
    Kind(String),
    /// Written by a tracehound with another summary format.
    #[error(
        "rank summary format {found}, this tracehound reads format {SUMMARY_SCHEMA_VERSION}: write it again with this version"
    )]
    Version {
        /// The file's version.
        found: u32,
    },
}

impl RankSummary {
    /// The rank-summary file: this summary with its format header. `rank_known` says whether
    /// the trace recorded the rank (else `merge` numbers it by file order).
    pub fn to_file_json(&self, rank_known: bool, tool_version: &str) -> String {
        let file = SummaryFile {
            kind: SUMMARY_KIND.into(),
            schema_version: SUMMARY_SCHEMA_VERSION,
            tool_version: tool_version.into(),
            rank_known,
            summary: std::borrow::Cow::Borrowed(self),
        };
        // Plain data of strings and numbers: serialising cannot fail; an empty object would
        // be refused by `from_file_json` with a message, never taken for a rank.
        serde_json::to_string(&file).unwrap_or_else(|_| "{}".to_string())
    }

    /// Reads a rank-summary file: the summary and whether its rank was recorded in the trace.
    pub fn from_file_json(text: &[u8]) -> Result<(RankSummary, bool), SummaryError> {
        #[derive(Deserialize)]
        struct Header<'a> {
            #[serde(borrow)]
            kind: Option<std::borrow::Cow<'a, str>>,
            schema_version: Option<u32>,
        }
        let h: Header = serde_json::from_slice(text)?;
        let kind = h.kind.unwrap_or_default();
        if kind != SUMMARY_KIND {
            return Err(SummaryError::Kind(kind.into_owned()));
        }
        match h.schema_version {
            Some(SUMMARY_SCHEMA_VERSION) => {}
            found => {
                return Err(SummaryError::Version {
                    found: found.unwrap_or(0),
                });
            }
        }
        let f: SummaryFile = serde_json::from_slice(text)?;
        Ok((f.summary.into_owned(), f.rank_known))
    }
}

/// Puts a job together from its ranks' summaries (the reduce of a job analysis): ranks the
/// trace did not record are numbered by their file's place among the job's files, ranks are
/// sorted, and the job findings are computed. `analyze DIR` and `merge` both end here, so
/// the two give the same job from the same traces.
pub fn assemble(mut ranks: Vec<(RankSummary, bool)>) -> (Vec<RankSummary>, Vec<Finding>) {
    ranks.sort_by(|a, b| a.0.source.cmp(&b.0.source));
    let mut ranks: Vec<RankSummary> = ranks
        .into_iter()
        .enumerate()
        .map(|(k, (mut r, known))| {
            if !known {
                r.rank = k as i64;
            }
            r
        })
        .collect();
    ranks.sort_by(|a, b| a.rank.cmp(&b.rank).then(a.source.cmp(&b.source)));
    let findings = job_findings(&mut ranks);
    (ranks, findings)
}

/// Median step time from the step markers' own spans, else the window over the step count.
fn step_ns(trace: &Trace, window_ns: i64) -> i64 {
    median_step_ns(trace).unwrap_or(window_ns)
}

/// The median step time from the step markers' own spans (the upper middle value for an
/// even count), or None without steps.
pub fn median_step_ns(trace: &Trace) -> Option<i64> {
    (!trace.steps.is_empty()).then(|| median(trace.steps.iter().map(|s| s.end - s.start).collect()))
}

/// Rule id of the finding that names the rank the others wait for at the collectives.
pub const STRAGGLER_RANK: &str = "straggler_rank";
/// Rule id of the finding that names the slowest rank, when the job has no collectives.
pub const SLOWEST_RANK: &str = "slowest_rank";
/// Rule id of the finding on GPU idle time that differs across ranks.
pub const IDLE_SPREAD: &str = "idle_spread";

/// A job waits for a straggler when the exposed waits it causes (waits no compute hid) add
/// up to at least this share of the median step. In a balanced job ranks still arrive in some
/// order, and the waits run on the communication stream while compute continues: on the
/// balanced H200 DDP job rank 1 waits 10% of a step in all-reduces, nearly all of it behind
/// backward kernels. A rank doing tens of ms of extra host work shows as 30-60% exposed.
/// 3% sits above what compute hides and below any imbalance worth a fix.
pub const STRAGGLER_MIN_STEP_SHARE: f64 = 0.03;

/// What matching the collectives of a job found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CollectiveMatch {
    /// Collectives present on every rank.
    pub matched: u64,
    /// Per rank (same order as the ranks): times it arrived last.
    pub last: Vec<u64>,
    /// Per rank: the longest exposed wait it caused another rank, summed over the
    /// collectives where it arrived last, ns.
    pub caused_ns: Vec<i64>,
}

/// Matches collectives across ranks; sets each rank's `collective_wait_ns` and
/// `collective_exposed_wait_ns`.
pub fn match_collectives(ranks: &mut [RankSummary]) -> CollectiveMatch {
    use std::collections::BTreeMap;
    let n = ranks.len();
    let mut m = CollectiveMatch {
        matched: 0,
        last: vec![0; n],
        caused_ns: vec![0; n],
    };
    if n < 2 {
        return m;
    }
    type Key = (&'static str, Option<i64>, u32);
    let mut table: BTreeMap<Key, Vec<Option<&CollectiveRecord>>> = BTreeMap::new();
    for (r, rank) in ranks.iter().enumerate() {
        for c in &rank.collectives {
            table
                .entry((c.kind, c.step, c.ordinal))
                .or_insert_with(|| vec![None; n])[r] = Some(c);
        }
    }
    let mut waits = vec![(0i64, 0i64); n];
    for recs in table.values() {
        let Some(recs) = recs
            .iter()
            .copied()
            .collect::<Option<Vec<&CollectiveRecord>>>()
        else {
            continue;
        };
        m.matched += 1;
        let (last, min) = recs
            .iter()
            .enumerate()
            .map(|(r, c)| (r, c.dur_ns))
            .min_by_key(|&(r, d)| (d, r))
            .unwrap_or((0, 0));
        m.last[last] += 1;
        let mut worst = 0;
        for (w, c) in waits.iter_mut().zip(&recs) {
            let wait = c.dur_ns - min;
            let exposed = c.exposed_within(wait);
            w.0 += wait;
            w.1 += exposed;
            worst = worst.max(exposed);
        }
        m.caused_ns[last] += worst;
    }
    for (r, (w, e)) in ranks.iter_mut().zip(waits) {
        r.collective_wait_ns = w;
        r.collective_exposed_wait_ns = e;
    }
    m
}

use crate::stats::median;

/// Findings about the job as a whole, ranked by impact. Matches the ranks' collectives first
/// (setting each rank's `collective_wait_ns`).
pub fn job_findings(ranks: &mut [RankSummary]) -> Vec<Finding> {
    let mut out = Vec::new();
    if ranks.len() < 2 {
        return out;
    }
    let matched = match_collectives(ranks);
    let ranks: &[RankSummary] = ranks;
    let med = median(ranks.iter().map(|r| r.step_ns).collect());
    let mut straggler_rank = None;
    if matched.matched > 0 {
        if let Some(f) = straggler(ranks, &matched, med) {
            straggler_rank = f.metrics.get("straggler_rank").map(|&r| r as i64);
            out.push(f);
        }
    } else if let Some(slow) = ranks
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
            rule: SLOWEST_RANK,
            subject: Some(format!("rank{}", slow.rank)),
            id: String::new(),
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
        // The straggler idles while the others spin in collectives: the straggler finding
        // already says so, with the cause.
        && straggler_rank != Some(hi.rank)
    {
        let impact = (hi.idle_gap_ns - lo.idle_gap_ns).max(0);
        let share = impact as f64 / hi.window_ns.max(1) as f64;
        out.push(Finding {
            rule: IDLE_SPREAD,
            subject: None,
            id: String::new(),
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
    for f in &mut out {
        f.id = f.stable_id();
    }
    crate::rank(&mut out);
    out
}

/// The straggler finding: the rank the others wait for at the collectives, when the waits it
/// causes reach [`STRAGGLER_MIN_STEP_SHARE`] of a step.
fn straggler(ranks: &[RankSummary], m: &CollectiveMatch, step_ns: i64) -> Option<Finding> {
    let (s, caused) = m
        .caused_ns
        .iter()
        .copied()
        .enumerate()
        .max_by_key(|&(r, c)| (c, std::cmp::Reverse(r)))?;
    let slow = &ranks[s];
    // A straggler arrives last more often than chance: at least a third of the way from
    // 1/n (arrival order is jitter) to always. Two ranks: 2 in 3 collectives.
    let n = ranks.len() as f64;
    let chance = 1.0 / n;
    if (m.last[s] as f64) < (chance + (1.0 - chance) / 3.0) * m.matched as f64 {
        return None;
    }
    let steps = ranks.iter().map(|r| r.steps).max().unwrap_or(0).max(1) as i64;
    let per_step = caused / steps;
    if step_ns <= 0 || (per_step as f64) < STRAGGLER_MIN_STEP_SHARE * step_ns as f64 {
        return None;
    }
    let waiter = ranks
        .iter()
        .enumerate()
        .filter(|(r, _)| *r != s)
        .max_by_key(|(r, x)| (x.collective_exposed_wait_ns, std::cmp::Reverse(*r)))
        .map(|(_, x)| x)?;
    let impact = waiter.collective_exposed_wait_ns;
    let share = impact as f64 / waiter.window_ns.max(1) as f64;
    let why = slow
        .top_idle_cause
        .as_deref()
        .map(|c| format!("; rank {} idles its GPU most in: {c}", slow.rank))
        .unwrap_or_default();
    // A large job lists only the ranks that wait most, so the line stays readable at 1,000
    // ranks; the breakdown keeps every rank.
    const LISTED: usize = 8;
    let mut listed: Vec<&RankSummary> = ranks.iter().collect();
    if listed.len() > LISTED {
        listed.sort_by_key(|r| (std::cmp::Reverse(r.collective_exposed_wait_ns), r.rank));
        listed.truncate(LISTED);
        listed.sort_by_key(|r| r.rank);
    }
    let more = ranks.len() - listed.len();
    let mut per_rank: Vec<String> = listed
        .iter()
        .map(|r| {
            format!(
                "rank {} {} ({} exposed)",
                r.rank,
                fmt_ns(r.collective_wait_ns / steps),
                fmt_ns(r.collective_exposed_wait_ns / steps)
            )
        })
        .collect();
    if more > 0 {
        per_rank.push(format!("{more} more ranks wait less"));
    }
    Some(Finding {
        rule: STRAGGLER_RANK,
        subject: Some(format!("rank{}", slow.rank)),
        id: String::new(),
        title: format!(
            "rank {} arrives last at {} of {} collectives: rank {} waits {} per step for it with nothing else to run ({:.0}% of a step)",
            slow.rank,
            m.last[s],
            m.matched,
            waiter.rank,
            fmt_ns(impact / steps),
            100.0 * (impact / steps) as f64 / step_ns as f64
        ),
        severity: Severity::from_share(share),
        impact_ns: impact,
        impact_share: share,
        confidence: Confidence::High,
        device: None,
        evidence: format!(
            "{} collectives matched across {} ranks; wait in collectives per step: {}{why}",
            m.matched,
            ranks.len(),
            per_rank.join(", ")
        ),
        breakdown: ranks
            .iter()
            .enumerate()
            .map(|(k, r)| Row {
                cause: None,
                share: None,
                label: format!(
                    "rank {}: exposed wait in collectives (of {} in all; last to arrive at {})",
                    r.rank,
                    fmt_ns(r.collective_wait_ns),
                    m.last[k]
                ),
                count: r.collectives.len() as u64,
                time_ns: r.collective_exposed_wait_ns,
                bytes: None,
                python_frame: None,
            })
            .collect(),
        instances: Vec::new(),
        advice: vec![format!(
            "Every collective waits for rank {}: fix what keeps it from launching its collectives on time (tracehound analyze {}){}. Then check that its input shard, host and GPU match the others.",
            slow.rank,
            slow.source,
            slow.top_idle_cause
                .as_deref()
                .map(|c| format!(": {c}"))
                .unwrap_or_default()
        )],
        metrics: metrics([
            ("straggler_rank", slow.rank as f64),
            ("matched_collectives", m.matched as f64),
            ("last_arrivals", m.last[s] as f64),
            ("wait_ns", impact as f64),
            ("wait_per_step_ns", (impact / steps) as f64),
            ("caused_ns", caused as f64),
        ]),
    })
}
