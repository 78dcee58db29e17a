//! Thresholds, with documented defaults. The CLI sets them from flags.

/// Settings every rule reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// A GPU idle interval at least this long is a gap (default 100 µs).
    pub gap_threshold_ns: i64,
    /// Analyse only this window (trace timeline ns) instead of the detected one.
    pub window: Option<(i64, i64)>,
    /// Host<->device copies from pageable memory are reported per direction once they move
    /// at least this many bytes in total (default 1 MiB: a few `.item()` scalars are a sync
    /// problem, not a bandwidth one).
    pub pageable_min_bytes: u64,
    /// Pinned-memory bandwidth assumed when the trace has no pinned copy of the same
    /// direction to measure it from, GB/s (default 20: a conservative PCIe Gen4 x16 rate).
    pub assumed_pinned_gbps: f64,
    /// Worst instances kept per finding (default 5).
    pub max_instances: usize,
    /// Breakdown rows kept per finding (default 6).
    pub max_rows: usize,
    /// Unallocated share of reserved memory at the reserved peak from which the allocator is
    /// reported as fragmented (default 0.30).
    pub fragmentation_share: f64,
    /// Run only the rules with these ids (`--rules`); None runs every rule.
    pub rules: Option<Vec<String>>,
    /// Do not run the rules with these ids (`--skip-rules`).
    pub skip_rules: Vec<String>,
}

impl Config {
    /// Whether the rule with this id runs under `--rules` and `--skip-rules`.
    pub fn runs_rule(&self, id: &str) -> bool {
        self.rules
            .as_ref()
            .is_none_or(|only| only.iter().any(|r| r == id))
            && !self.skip_rules.iter().any(|r| r == id)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            gap_threshold_ns: 100_000,
            window: None,
            pageable_min_bytes: 1 << 20,
            assumed_pinned_gbps: 20.0,
            max_instances: 5,
            max_rows: 6,
            fragmentation_share: 0.30,
            rules: None,
            skip_rules: Vec::new(),
        }
    }
}
