//! What a rule reports. Every output format (table, JSON, Markdown) prints these.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bytes with binary units (`36.8 MiB`), shared with the loader's messages.
pub use tracehound_parsers::fmt_bytes;

/// How much a finding matters, from its share of the analysed window and its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; costs under 1% of the window.
    Info,
    /// Costs 1-5% of the window.
    Low,
    /// Costs 5-25% of the window.
    Medium,
    /// Costs 25% of the window or more.
    High,
}

impl Severity {
    /// The lowercase name (`high`).
    pub fn label(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }

    /// Parses `info|low|medium|high`.
    pub fn parse(s: &str) -> Option<Severity> {
        match s.to_ascii_lowercase().as_str() {
            "info" => Some(Severity::Info),
            "low" => Some(Severity::Low),
            "medium" => Some(Severity::Medium),
            "high" => Some(Severity::High),
            _ => None,
        }
    }

    /// The default mapping from the share of the window a finding costs.
    pub fn from_share(share: f64) -> Severity {
        if share >= 0.25 {
            Severity::High
        } else if share >= 0.05 {
            Severity::Medium
        } else if share >= 0.01 {
            Severity::Low
        } else {
            Severity::Info
        }
    }
}

/// How sure the rule is that the impact estimate is right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Inferred from indirect evidence.
    Low,
    /// Measured, with an estimate in the impact.
    Medium,
    /// Measured directly.
    High,
}

/// One row of a breakdown: a cause, a caller, a shape ... with what it costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What the row is about (`sync: aten::item (cudaStreamSynchronize)`).
    pub label: String,
    /// Occurrences.
    pub count: u64,
    /// Time in ns.
    pub time_ns: i64,
    /// Bytes, when the row is about data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The user's Python frame most often involved, when the trace has stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_frame: Option<String>,
    /// The measured cause category (`python`, `host_sync`, `cpu_op` ...), for rows that
    /// attribute time to a cause.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::intern::de_opt_str"
    )]
    pub cause: Option<crate::intern::Name>,
    /// The row's share of the time the breakdown divides (0..1), when it divides one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
}

/// One concrete instance, for the reader to find in a timeline viewer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// Start on the trace's timeline, ns.
    pub start_ns: i64,
    /// Duration, ns.
    pub dur_ns: i64,
    /// Offset from the window start, ms (for people).
    pub offset_ms: f64,
    /// What happened.
    pub what: String,
    /// The CPU operator responsible, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_op: Option<String>,
    /// The user's Python frame, when the trace has stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_frame: Option<String>,
}

/// A problem found in a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable id: the same rule about the same subject gets the same id across runs and
    /// captures (`idle_gaps/gpu0`, `pageable_memcpy/gpu0/htod`), so tools can follow a
    /// finding over time. Set by [`crate::analyze`] (and the job analysis) via [`Finding::stable_id`].
    pub id: String,
    /// Rule id (`idle_gaps`).
    #[serde(deserialize_with = "crate::intern::de_str")]
    pub rule: crate::intern::Name,
    /// What tells this finding apart from the rule's other findings on the same device, set
    /// by the rule that makes it: the copy direction (`htod`), the kind of problem (`leak`,
    /// `misaligned`), the software-stack item (`matrix_kernels`), the rank a job finding names
    /// (`rank1`); None when the rule makes at most one finding per device. Part of the stable
    /// id; not written to JSON, where `id` carries it.
    #[serde(skip)]
    pub subject: Option<String>,
    /// One line saying what is wrong, with the key number.
    pub title: String,
    /// Severity.
    pub severity: Severity,
    /// Estimated GPU time lost, ns.
    pub impact_ns: i64,
    /// `impact_ns` as a share of the analysed window (0..1).
    pub impact_share: f64,
    /// Confidence in the impact estimate.
    pub confidence: Confidence,
    /// The device concerned, when one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<i32>,
    /// The key evidence in one line (counts, bytes, bandwidth).
    pub evidence: String,
    /// Breakdown by cause / caller / shape, largest first.
    pub breakdown: Vec<Row>,
    /// The worst instances, largest first.
    pub instances: Vec<Instance>,
    /// What to change, concretely.
    pub advice: Vec<String>,
    /// The key numbers, machine-readable (`gaps`, `bytes`, `ooms` ...), for CI and scripts.
    #[serde(deserialize_with = "crate::intern::de_metrics")]
    pub metrics: BTreeMap<&'static str, f64>,
}

/// The metric of a finding that names what holds most of the time where the capture cannot
/// price a saving (one kernel of a GPU-bound CUDA C run, no hardware counters): its value is the
/// share of the window it holds, its impact is 0, and it ranks first ([`Finding::unpriced`]).
pub const UNPRICED: &str = "unpriced_share";

impl Finding {
    /// Whether this finding names what holds the time without a saving the capture can measure
    /// (impact 0, metric [`UNPRICED`]): ranked first, its impact shown as "—".
    pub fn unpriced(&self) -> bool {
        self.impact_ns == 0 && self.metrics.contains_key(UNPRICED)
    }

    /// The impact as printed: "—" where the capture cannot price one, else [`fmt_ns`].
    pub fn impact_text(&self) -> String {
        if self.unpriced() {
            "—".into()
        } else {
            fmt_ns(self.impact_ns)
        }
    }

    /// The impact's share of the window as printed: "—" where the capture cannot price one,
    /// else "77.6%".
    pub fn share_text(&self) -> String {
        if self.unpriced() {
            "—".into()
        } else {
            format!("{:.1}%", 100.0 * self.impact_share)
        }
    }

    /// The stable id of this finding: its rule, device and [`subject`](Finding::subject)
    /// (`pageable_memcpy/gpu0/htod`, `straggler_rank/rank1`), never its title or a measured
    /// number, so rewording a title keeps the id. Computed from a finding as its rule made it
    /// (a finding read back from JSON has no subject, and carries its id in `id`).
    pub fn stable_id(&self) -> String {
        let mut id = self.rule.to_string();
        if let Some(d) = self.device {
            id.push_str(&format!("/gpu{d}"));
        }
        if let Some(s) = &self.subject {
            id.push('/');
            id.push_str(s);
        }
        id
    }
}

/// Builds a metrics map from pairs.
pub fn metrics<const N: usize>(pairs: [(&'static str, f64); N]) -> BTreeMap<&'static str, f64> {
    pairs.into_iter().collect()
}

/// `ns` over `steps` profiler steps as "X a step", for titles; `None` without steps (a
/// trace without step markers has no "per step").
pub fn a_step(ns: f64, steps: usize) -> Option<String> {
    (steps > 0).then(|| format!("{} a step", fmt_ns((ns / steps as f64).round() as i64)))
}

/// Formats ns as a short human duration (`1.23 ms`, `456 µs`).
pub fn fmt_ns(ns: i64) -> String {
    let a = ns.unsigned_abs() as f64;
    if a >= 1e9 {
        format!("{:.2} s", ns as f64 / 1e9)
    } else if a >= 1e6 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else if a >= 1e3 {
        format!("{:.0} µs", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_ns(1_234_567), "1.2 ms");
        assert_eq!(fmt_ns(456_000), "456 µs");
        assert_eq!(fmt_ns(12), "12 ns");
        assert_eq!(fmt_bytes(38_535_168), "36.8 MiB");
        assert_eq!(fmt_bytes(4), "4 B");
        assert_eq!(Severity::from_share(0.3), Severity::High);
        assert_eq!(Severity::from_share(0.006), Severity::Info);
    }

    #[test]
    fn the_id_is_rule_device_and_subject_never_the_title() {
        let mut f = Finding {
            id: String::new(),
            rule: "memory_pressure",
            subject: Some("leak".into()),
            title: "GPU 0: allocated memory grows 128.0 MiB per step: a leak".into(),
            severity: Severity::High,
            impact_ns: 0,
            impact_share: 0.0,
            confidence: Confidence::Medium,
            device: Some(0),
            evidence: String::new(),
            breakdown: Vec::new(),
            instances: Vec::new(),
            advice: Vec::new(),
            metrics: metrics([("steps", 8.0)]),
        };
        assert_eq!(f.stable_id(), "memory_pressure/gpu0/leak");
        // Reworded, with words other subjects' titles once had, and a metric named like a
        // job finding's rank: the id stays.
        f.title = "GPU 0: memory grows each step (empty_cache will not help)".into();
        f.metrics.insert("straggler_rank", 3.0);
        assert_eq!(f.stable_id(), "memory_pressure/gpu0/leak");
        f.device = None;
        f.subject = None;
        assert_eq!(f.stable_id(), "memory_pressure");
        // The subject is not written to JSON: the id carries it.
        f.id = f.stable_id();
        let json = serde_json::to_value(&f).unwrap();
        assert!(json.get("subject").is_none(), "{json}");
    }
}
