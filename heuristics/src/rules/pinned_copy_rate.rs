//! Pinned host<->device copies far slower than the host link carries: a link trained below
//! its width or generation, host memory on the far NUMA node, or other transfers sharing the
//! link. Pinning is the cure for pageable copies; when pinned copies are slow too, the cause
//! is the machine's copy path, and pinning more promises nothing.
//!
//! Judged only on large copies (at least [`LARGE_BYTES`] each: a copy's fixed cost of a few µs
//! is then a few % of its time), by direction, over the union of their busy time on the device
//! (two copies of one direction at once share the link, so each alone looks slow), against the
//! link from an `nvidia-smi -q -x` snapshot or the GPU model's datasheet
//! ([`crate::copy_rate::Reference::link`]). Where the link is not known (GeForce cards ship with
//! x8 and x16 links) nothing is said. Reported below [`SLOW_SHARE`] of what the link carries;
//! impact: the copies' time beyond what the link's rate needs, within the time no other GPU
//! work overlaps them (kernels or the other direction's copies beside them keep that time).

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::copy_rate::Reference;
use crate::finding::{Confidence, Finding, fmt_bytes, fmt_ns, metrics};
use crate::window::busy_total_of;
use tracehound_parsers::{CopyDirection, GpuOp, GpuOpKind, MemKind};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "pinned_copy_rate";

/// The rule.
pub struct PinnedCopyRate;

/// Copies of at least this many bytes are judged: 8 MiB takes 160 µs at Gen5's 50 GB/s and
/// 670 µs at Gen3's 12.6, so a launch and completion cost of 5-10 µs is at most a few % of it.
pub const LARGE_BYTES: u64 = 8 << 20;

/// Pinned copies reaching under this share of the link's rate are slow: half of what large
/// pinned copies reach (80% of the raw rate, [`crate::hardware::LINK_ACHIEVABLE`]). Hosts
/// seen reach 64-90% of the raw rate; a copy at under 40% of it is not a matter of tuning.
pub const SLOW_SHARE: f64 = 0.5;

/// Large pinned copies hold at least this many ns before a rate is judged: below it the copies
/// cost nothing worth a finding whatever their rate.
const MIN_NS: i64 = 1_000_000;

impl Rule for PinnedCopyRate {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "pinned host<->device copies far slower than the host link carries (link, NUMA or a shared copy path)"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for d in cx.trace.devices() {
            let slow = slow_copies(cx, d);
            if slow.is_empty() {
                out.extend(copies_hold_the_window(cx, d));
            }
            for Slow {
                dir,
                link,
                count,
                bytes,
                busy_ns,
                exposed_ns,
                gbps,
            } in slow
            {
                let needed = bytes as f64 / link.gbps;
                // Faster copies shorten the window only where nothing else ran beside them:
                // kernels or the other direction's copies keep the time they overlap.
                let impact = (busy_ns as f64 - needed).max(0.0).min(exposed_ns as f64) as i64;
                let overlapped = busy_ns - exposed_ns;
                let mut f = new_finding(
                    cx,
                    ID,
                    Some(d),
                    format!(
                        "pinned {} copies reach {gbps:.1} GB/s, {:.0}% of what the host link carries ({:.1} GB/s)",
                        dir.label(),
                        // Floored: a rate just under the half reads as under it.
                        (100.0 * gbps / link.gbps).floor(),
                        link.gbps
                    ),
                    impact,
                    Confidence::Medium,
                    format!(
                        "{} pinned {} copies of at least {} each: {} in {} of copy time at {gbps:.1} GB/s; {}; impact: their time beyond the {} that rate needs{}",
                        count,
                        dir.label(),
                        fmt_bytes(LARGE_BYTES),
                        fmt_bytes(bytes),
                        fmt_ns(busy_ns),
                        link.said_link(),
                        fmt_ns(needed as i64),
                        if overlapped > 0 {
                            format!(
                                ", within the {} that no other GPU work overlaps ({} of them ran beside kernels or other copies, which keep that time whatever these copies' rate)",
                                fmt_ns(exposed_ns),
                                fmt_ns(overlapped)
                            )
                        } else {
                            String::new()
                        }
                    ),
                );
                f.subject = Some(dir.label().to_ascii_lowercase());
                f.advice = vec![
                    "Pinned copies this slow are the machine's copy path, not the program: check the link the GPU trained at under load (nvidia-smi -q, GPU Link Info: PCIe Generation and Link Width, Current against Max; a card in an x8 or x4 slot, or behind a riser, runs at a fraction) and which NUMA node the pinned memory sits on (nvidia-smi topo -m; bind the process to the GPU's node: numactl --cpunodebind=N --membind=N).".to_string(),
                    "Other GPUs or NICs copying at the same time share the host's root complex and memory bandwidth: a job whose ranks all copy at once sees each rank's copies slow down.".to_string(),
                ];
                f.metrics = metrics([
                    ("gbps", gbps),
                    ("link_gbps", link.gbps),
                    ("bytes", bytes as f64),
                    ("copies", count as f64),
                ]);
                out.push(f);
            }
        }
        out
    }
}

/// Pinned host<->device copies holding at least this share of the window make the run
/// transfer-bound: the link's speed, not the program's kernels, decides it.
const HOLD_SHARE: f64 = 0.5;

/// Pinned copies between the host and `device` that hold at least [`HOLD_SHARE`] of the window
/// and are not slow for the link: already at the rate the host gives them, so no change of
/// memory or copy call saves time, and what moving less data would save is not in the capture.
/// The finding names them without an impact ([`crate::finding::UNPRICED`]) and ranks first: a
/// cold start or a gap priced beside them is a small part of the run (a CUDA C stream demo on an
/// RTX 4060 Ti, 91% of its window in 1.1 GB of pinned copies at 13 GB/s, had led with 8.7 ms of
/// a first launch).
fn copies_hold_the_window(cx: &Ctx, device: i32) -> Option<Finding> {
    let t = cx.trace;
    let w = &cx.window;
    let pinned = |o: &GpuOp, dir: Option<CopyDirection>| {
        o.kind == GpuOpKind::Memcpy
            && o.direction.crosses_host()
            && dir.is_none_or(|d| o.direction == d)
            && (o.src_kind == MemKind::Pinned || o.dst_kind == MemKind::Pinned)
            && o.start >= w.start
            && o.end <= w.end
    };
    let busy = busy_total_of(t, device, w, |o| pinned(o, None));
    let share = w.share(busy);
    if share < HOLD_SHARE {
        return None;
    }
    // Per direction: bytes and the rate over its own busy time.
    let mut parts = Vec::new();
    let mut total = 0u64;
    for dir in [CopyDirection::HtoD, CopyDirection::DtoH] {
        let (_, bytes, ns) = totals(cx, device, |o| pinned(o, Some(dir)));
        if bytes > 0 && ns > 0 {
            total += bytes;
            parts.push(format!(
                "{} {} at {:.1} GB/s",
                fmt_bytes(bytes),
                if dir == CopyDirection::HtoD {
                    "to the GPU"
                } else {
                    "back to the host"
                },
                bytes as f64 / ns as f64
            ));
        }
    }
    let link = Reference::link(cx, device)
        .map(|l| format!("; {}", l.said_link()))
        .unwrap_or_else(|| "; the GPU's host link is not known, so the rate is not judged against it".into());
    let mut f = new_finding(
        cx,
        ID,
        Some(device),
        format!(
            "pinned copies between the host and GPU {device} hold {:.0}% of the window ({}): the host link's speed decides the run, and only moving less data shortens it",
            100.0 * share,
            parts.join(", ")
        ),
        0,
        Confidence::High,
        format!(
            "{} of copy time over {} of pinned copies in a {} window{link}; the copies already use pinned memory, so no change of memory or copy call makes them faster, and what moving less data would save is not in the capture",
            fmt_ns(busy),
            fmt_bytes(total),
            fmt_ns(w.len())
        ),
    );
    f.subject = Some("host<->device copies".to_string());
    f.advice = vec![if cx.pytorch() {
        "Move less: keep tensors on the GPU between steps and copy only what changes, send narrower dtypes (bf16, uint8) and widen them on the GPU, and overlap what must be copied with compute (non_blocking=True from pinned memory, a side stream) where there is compute to overlap with.".to_string()
    } else {
        "Move less: keep data resident on the GPU between kernels and copy only what changes, send narrower types and widen them in a kernel, and overlap what must be copied with compute (cudaMemcpyAsync on a second stream while kernels run) where there is compute to overlap with.".to_string()
    }];
    f.metrics = metrics([
        (crate::finding::UNPRICED, share),
        ("copy_ns", busy as f64),
        ("bytes", total as f64),
    ]);
    Some(f)
}

/// Large pinned copies of one direction that reach under [`SLOW_SHARE`] of the link.
pub(crate) struct Slow {
    dir: CopyDirection,
    link: Reference,
    count: u64,
    bytes: u64,
    busy_ns: i64,
    /// Their busy time that no other GPU work on the device overlaps.
    exposed_ns: i64,
    gbps: f64,
}

/// The directions of `device` whose large pinned copies are slow for its known link.
pub(crate) fn slow_copies(cx: &Ctx, device: i32) -> Vec<Slow> {
    let w = &cx.window;
    let mut out = Vec::new();
    let Some(link) = Reference::link(cx, device) else {
        return out;
    };
    for dir in [CopyDirection::HtoD, CopyDirection::DtoH] {
        let pick = |o: &GpuOp| {
            o.kind == GpuOpKind::Memcpy
                && o.direction == dir
                && o.bytes >= LARGE_BYTES
                && (o.src_kind == MemKind::Pinned || o.dst_kind == MemKind::Pinned)
                && o.start >= w.start
                && o.end <= w.end
        };
        let (count, bytes, busy_ns) = totals(cx, device, pick);
        if busy_ns < MIN_NS {
            continue;
        }
        let gbps = bytes as f64 / busy_ns as f64;
        if gbps < SLOW_SHARE * link.gbps {
            // |picked \ others| = |picked ∪ others| − |others|.
            let other = |o: &GpuOp| o.is_work() && !pick(o);
            let t = cx.trace;
            let exposed_ns = busy_total_of(t, device, w, |o| pick(o) || other(o))
                - busy_total_of(t, device, w, other);
            out.push(Slow {
                dir,
                link: link.clone(),
                count,
                bytes,
                busy_ns,
                exposed_ns,
                gbps,
            });
        }
    }
    out
}

/// The copies of `device` in the window that `pick` takes: their count, bytes, and the union
/// of their busy time (copies at once share the link, so their times do not add).
fn totals(cx: &Ctx, device: i32, pick: impl Fn(&GpuOp) -> bool + Copy) -> (u64, u64, i64) {
    let t = cx.trace;
    let (count, bytes) = t
        .device_ops(device)
        .iter()
        .map(|&i| &t.gpu_ops[i as usize])
        .filter(|o| pick(o))
        .fold((0u64, 0u64), |(n, b), o| (n + 1, b + o.bytes));
    (count, bytes, busy_total_of(t, device, &cx.window, pick))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{TB, check};
    use tracehound_parsers::GpuInfo;

    /// `n` pinned HtoD copies of 64 MiB, each `ms` long, back to back on one stream, on a GPU
    /// named `gpu`.
    fn pinned(gpu: &str, n: i64, ms: i64) -> tracehound_parsers::Trace {
        let mut b = TB::new();
        for k in 0..n {
            let start = 1_000_000 + k * (ms * 1_000_000 + 10_000);
            b.op(
                GpuOpKind::Memcpy,
                "Memcpy HtoD (Pinned -> Device)",
                7,
                start,
                start + ms * 1_000_000,
                Some(start - 5_000),
            )
            .bytes(64 << 20);
        }
        let mut t = b.build();
        t.meta.gpus.push(GpuInfo {
            id: 0,
            name: gpu.to_string(),
            ..Default::default()
        });
        t
    }

    #[test]
    fn pinned_copies_at_a_fifth_of_the_link_are_named_with_the_time_they_lose() {
        // 64 MiB in 13.4 ms: 5.0 GB/s on an A100 PCIe (Gen4 x16, 25.2 GB/s at 80%), as issue
        // 40's field host reached.
        let f = check(&PinnedCopyRate, &pinned("NVIDIA A100-PCIE-40GB", 10, 13));
        assert_eq!(f.len(), 1, "{f:?}");
        let gbps = f[0].metrics["gbps"];
        assert!((gbps - (64u64 << 20) as f64 / 13e6).abs() < 0.01, "{gbps}");
        // Time beyond what 25.2 GB/s needs for 640 MiB.
        let needed = (640u64 << 20) as f64 / (16.0 * 16.0 * 128.0 / 130.0 / 8.0 * 0.8);
        assert!((f[0].impact_ns as f64 - (130e6 - needed)).abs() < 1e3);
        assert!(f[0].title.contains("PCIe") || f[0].evidence.contains("PCIe Gen4 x16"));
    }

    #[test]
    fn pinned_copies_near_the_link_or_on_an_unknown_link_are_not() {
        // Copies that fill the window are named as holding it, unpriced; never as slow.
        let holding = |f: &Vec<Finding>| {
            f.len() == 1 && f[0].unpriced() && f[0].title.contains("hold 100% of the window")
        };
        // 64 MiB in 3 ms: 22 GB/s on Gen4 x16.
        let f = check(&PinnedCopyRate, &pinned("NVIDIA A100-PCIE-40GB", 10, 3));
        assert!(holding(&f), "{f:?}");
        // The same slow copies on a GeForce card: x8 or x16 is not known, so their rate is not
        // judged.
        let f = check(&PinnedCopyRate, &pinned("NVIDIA GeForce RTX 4090", 10, 13));
        assert!(holding(&f), "{f:?}");
        assert!(f[0].evidence.contains("not known"), "{f:?}");
    }
}
