//! What changed between two captures of the same job (`tracehound diff`): findings matched
//! by their stable id (resolved, new, changed with the impact delta); step time from the step
//! markers' own spans; busy and idle time with their measured causes, top kernels and
//! operators by delta, and memory peaks. The printers are `src/report/diff.rs`.

use crate::Analysis;
use crate::finding::Finding;
use crate::job::median_step_ns;
use serde::Serialize;
use tracehound_parsers::Trace;

/// A number before and after.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The value in the capture before.
    pub before: f64,
    /// The value in the capture after.
    pub after: f64,
    /// (after - before) / before, in percent; 0 when before is 0.
    pub change_pct: f64,
}

impl Change {
    fn new(before: f64, after: f64) -> Self {
        Change {
            before,
            after,
            change_pct: if before.abs() > 0.0 {
                100.0 * (after - before) / before.abs()
            } else {
                0.0
            },
        }
    }
}

/// What became of a finding from one capture to the other. Serialized, and printed, in
/// lowercase (`resolved`); the order is the report's (resolved first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// In the first capture only.
    Resolved,
    /// In the second capture only.
    New,
    /// In both (its impact may have changed).
    Changed,
}

impl Status {
    /// The lowercase name (`resolved`).
    pub fn label(self) -> &'static str {
        match self {
            Status::Resolved => "resolved",
            Status::New => "new",
            Status::Changed => "changed",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.label())
    }
}

/// A finding in one capture and not the other, or in both.
#[derive(Debug, Clone, Serialize)]
pub struct FindingChange {
    /// The finding's stable id.
    pub id: String,
    /// Its rule.
    pub rule: &'static str,
    /// Resolved, new or changed.
    pub status: Status,
    /// Its title before (none when new).
    pub title_before: Option<String>,
    /// Its title after (none when resolved).
    pub title_after: Option<String>,
    /// Its severity before.
    pub severity_before: Option<String>,
    /// Its severity after.
    pub severity_after: Option<String>,
    /// Its impact, ns.
    pub impact_ns: Change,
    /// Whether it names what holds the time without a saving to price, before or after
    /// ([`crate::Finding::unpriced`]): its impact of 0 is not "costs nothing".
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unpriced: bool,
}

/// A named time before and after (kernel, operator, idle cause).
#[derive(Debug, Clone, Serialize)]
pub struct NamedChange {
    /// Kernel, operator or cause name.
    pub name: String,
    /// Time before, ns.
    pub before_ns: i64,
    /// Time after, ns.
    pub after_ns: i64,
    /// After minus before, ns.
    pub delta_ns: i64,
}

/// The comparison of two captures.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// The capture before (its path).
    pub before: String,
    /// The capture after.
    pub after: String,
    /// Median step time from the step markers, ns, when both captures mark steps.
    pub step_ns: Option<Change>,
    /// Share of the window the GPU was busy.
    pub busy_share: Change,
    /// Idle time in gaps, ns.
    pub idle_gap_ns: Change,
    /// Idle time per measured cause.
    pub idle_causes: Vec<NamedChange>,
    /// Findings matched by id.
    pub findings: Vec<FindingChange>,
    /// Kernels, the largest changes in time first (every kernel of either capture's window
    /// that changed; a report shows the first few).
    pub kernels: Vec<NamedChange>,
    /// CPU operators, the largest changes in time first (every one that changed).
    pub operators: Vec<NamedChange>,
    /// Peak memory reserved by the caching allocator, bytes.
    pub reserved_peak: Option<Change>,
    /// Peak memory allocated to tensors, bytes.
    pub allocated_peak: Option<Change>,
}

fn idle_gap_ns(a: &Analysis) -> i64 {
    a.idle.iter().map(|d| d.gap_ns()).sum()
}

/// Per name totals of two tables, every change, the largest first.
fn by_delta(
    before: &[crate::tables::TimeRow],
    after: &[crate::tables::TimeRow],
) -> Vec<NamedChange> {
    use std::collections::BTreeMap;
    let mut m: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for r in before {
        m.entry(&r.name).or_default().0 += r.total_ns;
    }
    for r in after {
        m.entry(&r.name).or_default().1 += r.total_ns;
    }
    let mut v: Vec<NamedChange> = m
        .into_iter()
        .filter(|(_, (b, a))| a != b)
        .map(|(n, (b, a))| NamedChange {
            name: n.to_string(),
            before_ns: b,
            after_ns: a,
            delta_ns: a - b,
        })
        .collect();
    v.sort_by(|x, y| {
        y.delta_ns
            .abs()
            .cmp(&x.delta_ns.abs())
            .then(x.name.cmp(&y.name))
    });
    v
}

fn peak(a: &Analysis, f: impl Fn(&crate::summary::DeviceSummary) -> Option<i64>) -> Option<i64> {
    a.summary.devices.iter().filter_map(f).max()
}

/// Compares two analysed captures.
pub fn compare(tb: &Trace, ab: &Analysis, ta: &Trace, aa: &Analysis) -> Diff {
    let busy = |a: &Analysis| {
        a.summary
            .devices
            .iter()
            .map(|d| d.busy_share)
            .fold(0.0, f64::max)
    };
    let causes = |a: &Analysis| {
        let mut m: std::collections::BTreeMap<&'static str, i64> = Default::default();
        for d in &a.idle {
            for (k, ns) in d.by_kind() {
                *m.entry(k.label()).or_default() += ns;
            }
        }
        m
    };
    let (cb, ca) = (causes(ab), causes(aa));
    let mut idle_causes: Vec<NamedChange> = cb
        .keys()
        .chain(ca.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|k| {
            let (b, a) = (
                cb.get(k).copied().unwrap_or(0),
                ca.get(k).copied().unwrap_or(0),
            );
            NamedChange {
                name: k.to_string(),
                before_ns: b,
                after_ns: a,
                delta_ns: a - b,
            }
        })
        .collect();
    idle_causes.sort_by(|x, y| {
        y.delta_ns
            .abs()
            .cmp(&x.delta_ns.abs())
            .then(x.name.cmp(&y.name))
    });
    let mut findings: Vec<FindingChange> = Vec::new();
    let find = |fs: &[Finding], id: &str| fs.iter().find(|f| f.id == id).cloned();
    let mut ids: Vec<&str> = ab
        .findings
        .iter()
        .chain(aa.findings.iter())
        .map(|f| f.id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        let (b, a) = (find(&ab.findings, id), find(&aa.findings, id));
        let rule = b.as_ref().or(a.as_ref()).map_or("", |f| f.rule);
        findings.push(FindingChange {
            id: id.to_string(),
            rule,
            status: match (&b, &a) {
                (Some(_), None) => Status::Resolved,
                (None, Some(_)) => Status::New,
                _ => Status::Changed,
            },
            title_before: b.as_ref().map(|f| f.title.clone()),
            title_after: a.as_ref().map(|f| f.title.clone()),
            severity_before: b.as_ref().map(|f| f.severity.label().to_string()),
            severity_after: a.as_ref().map(|f| f.severity.label().to_string()),
            impact_ns: Change::new(
                b.as_ref().map_or(0.0, |f| f.impact_ns as f64),
                a.as_ref().map_or(0.0, |f| f.impact_ns as f64),
            ),
            unpriced: b.as_ref().is_some_and(|f| f.unpriced())
                || a.as_ref().is_some_and(|f| f.unpriced()),
        });
    }
    findings.sort_by(|x, y| x.status.cmp(&y.status).then(x.id.cmp(&y.id)));
    let (wb, wa) = (&ab.summary.window, &aa.summary.window);
    let tables = crate::tables::kernel_summary;
    let ops = crate::tables::operator_summary;
    let change = |b: Option<i64>, a: Option<i64>| match (b, a) {
        (Some(b), Some(a)) => Some(Change::new(b as f64, a as f64)),
        _ => None,
    };
    Diff {
        before: tb.source.clone(),
        after: ta.source.clone(),
        step_ns: match (median_step_ns(tb), median_step_ns(ta)) {
            (Some(b), Some(a)) => Some(Change::new(b as f64, a as f64)),
            _ => None,
        },
        busy_share: Change::new(busy(ab), busy(aa)),
        idle_gap_ns: Change::new(idle_gap_ns(ab) as f64, idle_gap_ns(aa) as f64),
        idle_causes,
        findings,
        kernels: by_delta(&tables(tb, Some(wb)), &tables(ta, Some(wa))),
        operators: by_delta(&ops(tb, Some(wb)), &ops(ta, Some(wa))),
        reserved_peak: change(peak(ab, |d| d.reserved_peak), peak(aa, |d| d.reserved_peak)),
        allocated_peak: change(
            peak(ab, |d| d.allocated_peak),
            peak(aa, |d| d.allocated_peak),
        ),
    }
}

/// The regression the CI gate looks at: step time when both captures mark steps, else idle
/// time, in percent.
pub fn regression_pct(d: &Diff) -> (&'static str, f64) {
    match &d.step_ns {
        Some(c) => ("step time", c.change_pct),
        None => ("idle time", d.idle_gap_ns.change_pct),
    }
}
