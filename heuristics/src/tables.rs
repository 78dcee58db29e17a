//! Summary tables computed from the model: GPU kernels and memory operations, with the same
//! columns as `nsys stats` (`cuda_gpu_kern_sum`, `cuda_gpu_mem_time_sum`,
//! `cuda_gpu_mem_size_sum`) so the two can be compared row for row.

use crate::window::Window;
use serde::Serialize;
use tracehound_parsers::{CopyDirection, GpuOpKind, Trace};

/// Time statistics of one group of GPU operations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeRow {
    /// Kernel name, or the operation (`[CUDA memcpy Host-to-Device]`).
    pub name: String,
    /// Instances.
    pub instances: u64,
    /// Total time, ns.
    pub total_ns: i64,
    /// Mean, ns.
    pub avg_ns: f64,
    /// Median, ns (mean of the two middle values for an even count).
    pub med_ns: f64,
    /// Minimum, ns.
    pub min_ns: i64,
    /// Maximum, ns.
    pub max_ns: i64,
    /// Sample standard deviation, ns.
    pub stddev_ns: f64,
    /// Total bytes (memory operations).
    pub bytes: u64,
    /// Share of the total time of the table.
    pub time_share: f64,
}

fn row(name: String, mut d: Vec<i64>, bytes: u64) -> TimeRow {
    d.sort_unstable();
    let n = d.len();
    let total: i64 = d.iter().sum();
    let avg = total as f64 / n.max(1) as f64;
    let med = if n == 0 {
        0.0
    } else if n % 2 == 1 {
        d[n / 2] as f64
    } else {
        (d[n / 2 - 1] + d[n / 2]) as f64 / 2.0
    };
    let var = if n > 1 {
        d.iter().map(|&x| (x as f64 - avg).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    TimeRow {
        name,
        instances: n as u64,
        total_ns: total,
        avg_ns: avg,
        med_ns: med,
        min_ns: d.first().copied().unwrap_or(0),
        max_ns: d.last().copied().unwrap_or(0),
        stddev_ns: var.sqrt(),
        bytes,
        time_share: 0.0,
    }
}

fn finish(mut rows: Vec<TimeRow>) -> Vec<TimeRow> {
    let all: i64 = rows.iter().map(|r| r.total_ns).sum();
    for r in &mut rows {
        r.time_share = r.total_ns as f64 / all.max(1) as f64;
    }
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    rows
}

fn in_scope(start: i64, window: Option<&Window>) -> bool {
    window.is_none_or(|w| start >= w.start && start < w.end)
}

/// Kernels grouped by name, largest total time first. `window` None: the whole trace.
pub fn kernel_summary(trace: &Trace, window: Option<&Window>) -> Vec<TimeRow> {
    by_name(
        trace,
        trace
            .gpu_ops
            .iter()
            .filter(|o| o.kind == GpuOpKind::Kernel && in_scope(o.start, window))
            .map(|o| (o.name, o.dur()))
            .collect(),
    )
}

/// CPU operators by name with their host time (inclusive, as the profiler's own operator
/// table counts it), largest first.
pub fn operator_summary(trace: &Trace, window: Option<&Window>) -> Vec<TimeRow> {
    by_name(
        trace,
        trace
            .host_spans
            .iter()
            .filter(|s| s.kind == tracehound_parsers::HostKind::CpuOp && in_scope(s.start, window))
            .map(|s| (s.name, s.dur()))
            .collect(),
    )
}

/// One row per name of (name, duration) pairs.
fn by_name(trace: &Trace, mut pairs: Vec<(u32, i64)>) -> Vec<TimeRow> {
    pairs.sort_unstable();
    let mut rows = Vec::new();
    let mut k = 0;
    while k < pairs.len() {
        let name = pairs[k].0;
        let mut j = k;
        while j < pairs.len() && pairs[j].0 == name {
            j += 1;
        }
        rows.push(row(
            trace.str(name).to_string(),
            pairs[k..j].iter().map(|x| x.1).collect(),
            0,
        ));
        k = j;
    }
    finish(rows)
}

/// The operation label `nsys stats` uses.
pub fn operation_label(kind: GpuOpKind, dir: CopyDirection) -> &'static str {
    match (kind, dir) {
        (GpuOpKind::Memset, _) => "[CUDA memset]",
        (_, CopyDirection::HtoD) => "[CUDA memcpy Host-to-Device]",
        (_, CopyDirection::DtoH) => "[CUDA memcpy Device-to-Host]",
        (_, CopyDirection::DtoD) => "[CUDA memcpy Device-to-Device]",
        (_, CopyDirection::HtoH) => "[CUDA memcpy Host-to-Host]",
        (_, CopyDirection::PtoP) => "[CUDA memcpy Peer-to-Peer]",
        (_, CopyDirection::Unknown) => "[CUDA memcpy Unknown]",
    }
}

/// Memcpys by direction and memsets, with time and bytes, largest total time first.
pub fn memory_summary(trace: &Trace, window: Option<&Window>) -> Vec<TimeRow> {
    let mut groups: Vec<(&'static str, i64, u64)> = trace
        .gpu_ops
        .iter()
        .filter(|o| {
            matches!(o.kind, GpuOpKind::Memcpy | GpuOpKind::Memset) && in_scope(o.start, window)
        })
        .map(|o| (operation_label(o.kind, o.direction), o.dur(), o.bytes))
        .collect();
    groups.sort_unstable();
    let mut rows = Vec::new();
    let mut k = 0;
    while k < groups.len() {
        let name = groups[k].0;
        let mut j = k;
        while j < groups.len() && groups[j].0 == name {
            j += 1;
        }
        let bytes = groups[k..j].iter().map(|x| x.2).sum();
        rows.push(row(
            name.to_string(),
            groups[k..j].iter().map(|x| x.1).collect(),
            bytes,
        ));
        k = j;
    }
    finish(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics() {
        let r = row("k".into(), vec![4, 1, 3, 2], 0);
        assert_eq!((r.instances, r.total_ns, r.min_ns, r.max_ns), (4, 10, 1, 4));
        assert_eq!(r.med_ns, 2.5);
        assert!((r.stddev_ns - 1.2909944).abs() < 1e-6);
    }
}
