//! Host<->device copies from or to pageable memory. The driver stages them through a pinned
//! bounce buffer, synchronously for the host, at a fraction of the bandwidth of a pinned copy.
//! Kineto states pageability in the memcpy name (`Memcpy HtoD (Pageable -> Device)`);
//! Nsight Systems in `srcKind`/`dstKind`. Reported per direction once the copies move at
//! least `pageable_min_bytes`; the impact is the time the copies took beyond what pinned
//! copies would need at a reference rate, taken from the capture first and the hardware next
//! ([`Reference`]): the rate pinned copies of the same direction reached in this trace, else
//! what the host link carries (its generation and width from an `nvidia-smi -q -x` snapshot,
//! else the link the GPU model ships with), else `assumed_pinned_gbps`, said as assumed.

use super::Rule;
use crate::context::Ctx;
use crate::finding::{Confidence, Finding, Instance, Row, Severity, fmt_bytes, fmt_ns, metrics};
use crate::copy_rate::{Reference, Source};
use crate::names::{most_common, span_name};
use rustc_hash::FxHashMap;
use tracehound_parsers::{CopyDirection, GpuOpKind, MemKind, NONE, Trace};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "pageable_memcpy";

/// The rule.
pub struct PageableMemcpy;

fn in_window(cx: &Ctx, start: i64) -> bool {
    start >= cx.window.start && start < cx.window.end
}

/// Whether GPU op `i`, a copy, was issued below the traced runtime calls: the trace records
/// runtime calls (launches of other work are there) but none for this copy.
fn library_copy(t: &Trace, i: usize) -> bool {
    t.meta.capture.api_calls && t.index.op_launch.get(i).is_none_or(|&l| l == NONE)
}

/// Operator chain from the outermost CPU operator to the innermost one around a launch.
fn op_chain(trace: &Trace, launch: u32) -> Option<String> {
    let inner = trace.enclosing(launch, tracehound_parsers::HostKind::CpuOp);
    if inner == NONE {
        return None;
    }
    let mut names: Vec<&str> = std::iter::once(inner)
        .chain(trace.ancestors(inner))
        .filter(|&i| trace.host_spans[i as usize].kind == tracehound_parsers::HostKind::CpuOp)
        .map(|i| trace.str(trace.host_spans[i as usize].name))
        .collect();
    names.reverse();
    names.truncate(4);
    Some(names.join(" > "))
}

impl Rule for PageableMemcpy {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "host<->device copies from or to pageable (unpinned) host memory"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        // Pinned bandwidth per direction, measured on this trace's own pinned copies.
        let mut pinned: FxHashMap<CopyDirection, (u64, i64)> = FxHashMap::default();
        let mut pageable: Vec<(CopyDirection, usize)> = Vec::new();
        for (i, op) in t.gpu_ops.iter().enumerate() {
            if op.kind != GpuOpKind::Memcpy || !op.direction.crosses_host() {
                continue;
            }
            if op.is_pageable_copy() {
                // A copy whose launch call is not in a trace that records the runtime's calls
                // was issued below them, by a library (cuFFT's plan tables, module loading):
                // the program cannot pin its memory, and its time is the library's first call.
                let library = library_copy(t, i);
                if in_window(cx, op.start) && !library {
                    pageable.push((op.direction, i));
                }
            } else if (op.src_kind == MemKind::Pinned || op.dst_kind == MemKind::Pinned)
                && op.bytes >= 64 * 1024
            {
                let e = pinned.entry(op.direction).or_default();
                e.0 += op.bytes;
                e.1 += op.dur();
            }
        }
        let mut dirs: Vec<CopyDirection> = pageable.iter().map(|p| p.0).collect();
        dirs.sort();
        dirs.dedup();
        let mut out = Vec::new();
        for dir in dirs {
            let idx: Vec<usize> = pageable
                .iter()
                .filter(|p| p.0 == dir)
                .map(|p| p.1)
                .collect();
            let bytes: u64 = idx.iter().map(|&i| t.gpu_ops[i].bytes).sum();
            if bytes < cx.config.pageable_min_bytes {
                continue;
            }
            out.push(direction_finding(
                cx,
                dir,
                &idx,
                bytes,
                pinned.get(&dir).copied(),
            ));
        }
        out
    }
}

fn direction_finding(
    cx: &Ctx,
    dir: CopyDirection,
    idx: &[usize],
    bytes: u64,
    pinned: Option<(u64, i64)>,
) -> Finding {
    let t = cx.trace;
    let time: i64 = idx.iter().map(|&i| t.gpu_ops[i].dur()).sum();
    let gbps = |b: u64, ns: i64| b as f64 / ns.max(1) as f64;
    let achieved = gbps(bytes, time);
    let device = idx.first().map_or(0, |&i| t.gpu_ops[i].device);
    let reference = Reference::of(cx, device, pinned);
    let (ref_gbps, measured) = (reference.gbps, reference.source == Source::Measured);
    let impact: i64 = idx
        .iter()
        .map(|&i| {
            let op = &t.gpu_ops[i];
            let pinned_ns = (op.bytes as f64 / ref_gbps) as i64;
            (op.dur() - pinned_ns).max(0)
        })
        .sum();
    // Attribution: the outermost CPU operator (aten::to ...) and the user's frame.
    // count, time, bytes, user frames
    type Group = (u64, i64, u64, Vec<Option<String>>);
    let mut groups: FxHashMap<String, Group> = FxHashMap::default();
    let mut instances: Vec<(i64, Instance)> = Vec::new();
    for &i in idx {
        let op = &t.gpu_ops[i];
        let launch = t.index.op_launch[i];
        let chain = if launch != NONE {
            op_chain(t, launch)
        } else {
            None
        };
        let outer = t.index.op_outer_cpu_op[i];
        let frame = if launch != NONE {
            t.user_frame(launch).map(str::to_string)
        } else {
            None
        };
        let label = match (&chain, launch) {
            (Some(c), _) => c.clone(),
            (None, l) if l != NONE => span_name(t, l, "").to_string(),
            _ => "(launch not in trace)".to_string(),
        };
        let e = groups.entry(label.clone()).or_default();
        e.0 += 1;
        e.1 += op.dur();
        e.2 += op.bytes;
        e.3.push(frame.clone());
        instances.push((
            op.dur(),
            Instance {
                start_ns: op.start,
                dur_ns: op.dur(),
                offset_ms: cx.window.offset_ms(op.start),
                what: format!(
                    "{} {} at {:.1} GB/s",
                    t.str(op.name),
                    fmt_bytes(op.bytes),
                    gbps(op.bytes, op.dur())
                ),
                cpu_op: (outer != NONE).then(|| span_name(t, outer, "").to_string()),
                python_frame: frame,
            },
        ));
    }
    let mut rows: Vec<Row> = groups
        .into_iter()
        .map(|(label, (count, time_ns, b, frames))| Row {
            cause: None,
            share: None,
            label,
            count,
            time_ns,
            bytes: Some(b),
            python_frame: most_common(&frames),
        })
        .collect();
    rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.label.cmp(&b.label)));
    rows.truncate(cx.config.max_rows);
    instances.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.start_ns.cmp(&b.1.start_ns)));
    let instances: Vec<Instance> = instances
        .into_iter()
        .take(cx.config.max_instances)
        .map(|(_, i)| i)
        .collect();
    let share = cx.window.share(impact);
    // A program that is not PyTorch pins with the runtime's own calls.
    let cuda_advice = |side: &str| {
        vec![format!(
            "Allocate the {side} buffer as pinned memory once (cudaMallocHost / cudaHostAlloc, or cudaHostRegister on an existing buffer), then copy with cudaMemcpyAsync on a stream so the transfer runs at the link's rate and overlaps kernels; wait on an event only where the host reads the data."
        )]
    };
    let (subject, what, advice) = match dir {
        CopyDirection::DtoH if !cx.pytorch() => (
            "dtoh",
            "device-to-host copies into pageable memory",
            cuda_advice("destination"),
        ),
        _ if !cx.pytorch() => (
            "htod",
            "host-to-device copies from pageable memory",
            cuda_advice("source"),
        ),
        CopyDirection::DtoH => (
            "dtoh",
            "device-to-host copies into pageable memory",
            vec![
                "Copy into pinned memory: allocate the destination once with torch.empty(..., pin_memory=True), then dst.copy_(src, non_blocking=True) and wait on a CUDA event only where the values are needed.".to_string(),
            ],
        ),
        _ => (
            "htod",
            "host-to-device copies from pageable memory",
            vec![
                "Pin the source memory: DataLoader(pin_memory=True), or tensor.pin_memory() once for reused buffers.".to_string(),
                "Then copy with .to(device, non_blocking=True) so the transfer overlaps compute instead of blocking the host.".to_string(),
            ],
        ),
    };
    Finding {
        rule: ID,
        subject: Some(subject.into()),
        id: String::new(),
        title: format!(
            "{} {}: {} in {} at {:.1} GB/s",
            idx.len(),
            what,
            fmt_bytes(bytes),
            fmt_ns(time),
            achieved
        ),
        severity: Severity::from_share(share),
        impact_ns: impact,
        impact_share: share,
        confidence: match reference.source {
            Source::Measured => Confidence::High,
            Source::Snapshot | Source::Model => Confidence::Medium,
            Source::Assumed => Confidence::Low,
        },
        device: idx.first().map(|&i| t.gpu_ops[i].device),
        evidence: format!(
            "{} {} copies, {}, {} on the GPU at {:.1} GB/s; {}",
            idx.len(),
            dir.label(),
            fmt_bytes(bytes),
            fmt_ns(time),
            achieved,
            reference.said(dir)
        ),
        breakdown: rows,
        instances,
        advice,
        metrics: metrics([
            ("copies", idx.len() as f64),
            ("bytes", bytes as f64),
            ("time_ns", time as f64),
            ("achieved_gbps", achieved),
            ("reference_gbps", ref_gbps),
            ("reference_measured", if measured { 1.0 } else { 0.0 }),
            ("reference_source", reference.source as u8 as f64),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TB;
    use tracehound_parsers::GpuOpKind::Memcpy;

    fn check(t: &Trace) -> Vec<Finding> {
        crate::testutil::check(&PageableMemcpy, t)
    }

    #[test]
    fn measured_pinned_bandwidth_sets_the_impact() {
        // Pageable: 100 MB in 10 ms (10 GB/s). Pinned: 100 MB in 2 ms (50 GB/s).
        let t = TB::new()
            .op(
                Memcpy,
                "Memcpy HtoD (Pageable -> Device)",
                7,
                0,
                10_000_000,
                Some(0),
            )
            .bytes(100_000_000)
            .op(
                Memcpy,
                "Memcpy HtoD (Pinned -> Device)",
                7,
                20_000_000,
                22_000_000,
                Some(19_000_000),
            )
            .bytes(100_000_000)
            .build();
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].metrics["copies"], 1.0);
        assert_eq!(f[0].metrics["reference_measured"], 1.0);
        assert_eq!(f[0].impact_ns, 8_000_000);
        assert_eq!(f[0].confidence, Confidence::High);
    }

    #[test]
    fn each_direction_has_its_id_whatever_the_title_says() {
        let t = TB::new()
            .op(
                Memcpy,
                "Memcpy HtoD (Pageable -> Device)",
                7,
                0,
                10_000_000,
                Some(0),
            )
            .bytes(100_000_000)
            .op(
                Memcpy,
                "Memcpy DtoH (Device -> Pageable)",
                7,
                20_000_000,
                30_000_000,
                Some(19_000_000),
            )
            .bytes(100_000_000)
            .build();
        let mut f = check(&t);
        let ids: Vec<String> = f.iter().map(Finding::stable_id).collect();
        assert_eq!(
            ids,
            ["pageable_memcpy/gpu0/htod", "pageable_memcpy/gpu0/dtoh"]
        );
        // Titles reworded, even to name the other direction: the ids stay.
        f[0].title = "Unpinned uploads: device-to-host wording".into();
        f[1].title = "Unpinned downloads".into();
        let reworded: Vec<String> = f.iter().map(Finding::stable_id).collect();
        assert_eq!(reworded, ids);
    }

    #[test]
    fn zero_byte_and_tiny_copies_are_not_reported() {
        let t = TB::new()
            .op(
                Memcpy,
                "Memcpy HtoD (Pageable -> Device)",
                7,
                0,
                1_000,
                Some(0),
            )
            .bytes(0)
            .op(
                Memcpy,
                "Memcpy DtoH (Device -> Pageable)",
                7,
                5_000,
                6_000,
                Some(4_000),
            )
            .bytes(4)
            .build();
        assert!(check(&t).is_empty());
    }

    #[test]
    fn rocm_host_copies_are_not_called_pageable() {
        let t = TB::new()
            .op(
                Memcpy,
                "Memcpy HtoD (Host -> Device)",
                7,
                0,
                10_000_000,
                Some(0),
            )
            .bytes(100_000_000)
            .build();
        assert!(check(&t).is_empty());
    }
}
