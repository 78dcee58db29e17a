//! Collective communication kernels (NCCL, RCCL) in one rank's trace: which kernels they are,
//! the sequence a rank ran them in (for matching across ranks), and how much of their time no
//! compute overlapped.
//!
//! Kernel names differ by library version: `ncclKernel_AllReduce_RING_LL_Sum_float` before
//! NCCL 2.19, `ncclDevKernel_AllReduce_Sum_f32_RING_LL` after, `ncclDevKernel_Generic` for
//! kernels that carry several collectives, and RCCL keeps NCCL's names. A finder that matches
//! only one scheme silently finds nothing on the other.

use crate::window::Window;
use serde::{Deserialize, Serialize};
use tracehound_parsers::{GpuOpKind, Trace};

/// Whether a kernel name is a communication kernel: NCCL's and RCCL's collectives (every
/// naming scheme), MSCCL's, NVSHMEM's, DeepEP's expert-parallel dispatch and combine
/// (`deep_ep::internode::combine`, DeepSeek's `dpsk::ep::…`), and the all-reduce and
/// all-gather kernels that frameworks write over symmetric or peer memory (PyTorch's
/// `multimem_all_reduce_kernel`, vLLM's `cross_device_reduce_1stage`). They run on purpose on
/// few SMs beside compute, so the compute-efficiency rules leave them out. Called for every
/// kernel of a trace: it allocates nothing.
pub fn is_collective_kernel(name: &str) -> bool {
    let n = name.trim_start_matches("void ");
    if n.starts_with("ncclKernel")
        || n.starts_with("ncclDevKernel")
        || n.starts_with("nccl::")
        || n.starts_with("rccl")
        || n.starts_with("msccl")
        || n.contains("ncclKernel_")
        || n.contains("nvshmem")
    {
        return true;
    }
    // DeepEP's kernels move tokens between ranks, except the layout it computes locally.
    if (n.contains("ep::internode::") || n.contains("ep::intranode::"))
        && !n.contains("get_dispatch_layout")
    {
        return true;
    }
    framework_collective(n).is_some()
}

/// Per string id, whether it names a communication kernel ([`is_collective_kernel`]), each
/// distinct kernel name judged once: a trace has millions of kernels and a few thousand
/// names.
pub fn communication_names(trace: &Trace) -> Vec<bool> {
    let mut comm = vec![false; trace.strings.len()];
    let mut seen = vec![false; trace.strings.len()];
    for o in trace.gpu_ops.iter().filter(|o| o.kind == GpuOpKind::Kernel) {
        let k = o.name as usize;
        if let Some(s) = seen.get_mut(k)
            && !*s
        {
            *s = true;
            comm[k] = is_collective_kernel(trace.str(o.name));
        }
    }
    comm
}

/// Whether op `o` is a communication kernel, by the table of [`communication_names`].
fn is_comm(comm: &[bool], o: &tracehound_parsers::GpuOp) -> bool {
    o.kind == GpuOpKind::Kernel && comm.get(o.name as usize).copied().unwrap_or(false)
}

/// The name before its template and argument lists (so that an argument type such as
/// `AllReduceParams` does not count), anonymous namespaces kept:
/// `(anonymous namespace)::multimem_all_reduce_kernel<…>(…)` →
/// `(anonymous namespace)::multimem_all_reduce_kernel`.
fn name_head(n: &str) -> &str {
    const ANON: &str = "(anonymous namespace)";
    let mut from = 0;
    while let Some(k) = n[from..].find(['<', '(']).map(|k| k + from) {
        if n[k..].starts_with(ANON) {
            from = k + ANON.len();
        } else {
            return &n[..k];
        }
    }
    n
}

/// The collective a framework's own communication kernel runs, from words in its name.
fn framework_collective(n: &str) -> Option<&'static str> {
    const WORDS: [(&str, &str); 13] = [
        ("all_reduce", "AllReduce"),
        ("allreduce", "AllReduce"),
        ("AllReduce", "AllReduce"),
        ("cross_device_reduce", "AllReduce"),
        ("all_gather", "AllGather"),
        ("allgather", "AllGather"),
        ("AllGather", "AllGather"),
        ("reduce_scatter", "ReduceScatter"),
        ("reducescatter", "ReduceScatter"),
        ("ReduceScatter", "ReduceScatter"),
        ("all_to_all", "AllToAll"),
        ("alltoall", "AllToAll"),
        ("AllToAll", "AllToAll"),
    ];
    let head = name_head(n);
    WORDS
        .iter()
        .find(|(w, _)| head.contains(w))
        .map(|(_, kind)| *kind)
}

/// The collective a kernel runs, from its name: `AllReduce`, `AllGather`, `ReduceScatter`,
/// `Broadcast`, `Reduce`, `SendRecv`, `AllToAll`, or `Generic`; DeepEP's dispatch and
/// combine are the all-to-all of expert parallelism.
pub fn collective_kind(name: &str) -> &'static str {
    const KINDS: [&str; 8] = [
        "AllReduce",
        "AllGather",
        "ReduceScatter",
        "Broadcast",
        "AllToAll",
        "SendRecv",
        "Reduce",
        "Generic",
    ];
    let n = name.trim_start_matches("void ");
    let rest = n
        .strip_prefix("ncclDevKernel_")
        .or_else(|| n.strip_prefix("ncclKernel_"))
        .unwrap_or(n);
    if let Some(k) = KINDS.iter().find(|k| rest.starts_with(*k)) {
        return k;
    }
    if n.contains("ep::internode::") || n.contains("ep::intranode::") {
        return "AllToAll";
    }
    framework_collective(n).unwrap_or("Other")
}

/// A rate no GPU interconnect moves a collective's data below, bytes per ns (1 GB/s: under
/// PCIe Gen3 x4 and under 10 Gb Ethernet's 1.25 GB/s).
pub const SLOWEST_LINK_BYTES_PER_NS: f64 = 1.0;

/// What a collective costs whatever its size, ns: its launch, the handshake between ranks and
/// a few network round trips stay well under a millisecond.
pub const COLLECTIVE_LATENCY_NS: f64 = 1e6;

/// The part of collective kernel `op`'s time that moving its message cannot explain, ns: its
/// duration beyond [`COLLECTIVE_LATENCY_NS`] plus twice its message (a ring all-reduce sends
/// and receives about twice the data) at [`SLOWEST_LINK_BYTES_PER_NS`]. Such a kernel spent
/// the rest waiting for another rank to join. `None` when the trace records no message size
/// or the time fits the message.
pub fn wait_beyond_message(op: &tracehound_parsers::GpuOp) -> Option<i64> {
    if op.bytes == 0 {
        return None;
    }
    let needs = COLLECTIVE_LATENCY_NS + 2.0 * op.bytes as f64 / SLOWEST_LINK_BYTES_PER_NS;
    let extra = op.dur() as f64 - needs;
    (extra > 0.0).then_some(extra as i64)
}

/// Messages from this size on are moved at the link's rate rather than its latency: the
/// fastest of a kind among them is the rate this trace shows its link reaching.
pub const RATE_BYTES: u64 = 1 << 20;

/// A collective kernel that waited: it took longer than its message explains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wait {
    /// Its GPU op index.
    pub op: u32,
    /// Its time beyond what its message needs, ns.
    pub wait_ns: i64,
    /// The rate it is judged against when that is the fastest collective of its kind in the
    /// trace (bytes per ns, and that collective's message in bytes); `None` when it is
    /// [`SLOWEST_LINK_BYTES_PER_NS`].
    pub reference: Option<(f64, u64)>,
}

/// The collective kernels among `ops` (one device's, starting in the window) that waited for
/// another rank: those
/// whose time [`wait_beyond_message`] cannot explain, and those of at least [`RATE_BYTES`]
/// whose time beyond the shortest of their kind (its fixed cost) and their message at the
/// rate the fastest of their kind (and at least that size) among `ops` reached, what the link
/// showed it carries, is half their time or more: that time is
/// waiting (a peer that arrived late), a lower bound, since the fastest may have waited too.
/// Kinds that name no one collective (`Generic`) are judged by the first test only. Largest
/// wait first.
fn waits(trace: &Trace, ops: &[(u32, &tracehound_parsers::GpuOp)]) -> Vec<Wait> {
    // A kernel that serves every collective (NCCL's `Generic`) moves data at a rate that
    // depends on which one it runs: no reference across them.
    let kind = |o: &tracehound_parsers::GpuOp| collective_kind(trace.str(o.name));
    let known = |k: &str| !matches!(k, "Generic" | "Other");
    let mut fastest: rustc_hash::FxHashMap<&'static str, (f64, u64)> = Default::default();
    // The shortest of each kind: what one costs whatever its size (launch, handshake).
    let mut floor: rustc_hash::FxHashMap<&'static str, i64> = Default::default();
    for (_, o) in ops.iter().filter(|(_, o)| known(kind(o)) && o.dur() > 0) {
        let f = floor.entry(kind(o)).or_insert(o.dur());
        *f = (*f).min(o.dur());
        if o.bytes >= RATE_BYTES {
            let rate = o.bytes as f64 / o.dur() as f64;
            let e = fastest.entry(kind(o)).or_insert((rate, o.bytes));
            if rate > e.0 {
                *e = (rate, o.bytes);
            }
        }
    }
    let mut out: Vec<Wait> = ops
        .iter()
        .filter_map(|&(i, o)| {
            let absolute = wait_beyond_message(o).map(|w| Wait {
                op: i,
                wait_ns: w,
                reference: None,
            });
            let relative = fastest
                .get(kind(o))
                .filter(|_| o.bytes >= RATE_BYTES)
                .and_then(|&(rate, bytes)| {
                    let fixed = floor.get(kind(o)).copied().unwrap_or(0);
                    let w = o.dur() - (o.bytes as f64 / rate) as i64 - fixed;
                    (2 * w >= o.dur()).then_some(Wait {
                        op: i,
                        wait_ns: w,
                        reference: Some((rate, bytes)),
                    })
                });
            match (absolute, relative) {
                (Some(a), Some(r)) => Some(if r.wait_ns > a.wait_ns { r } else { a }),
                (a, r) => a.or(r),
            }
        })
        .collect();
    out.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.op.cmp(&b.op)));
    out
}

/// One collective kernel a rank ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveRecord {
    /// `AllReduce`, `SendRecv` ...
    #[serde(deserialize_with = "crate::intern::de_str")]
    pub kind: crate::intern::Name,
    /// Its position among this rank's collectives of the same kind in the same step (or in
    /// the window, without steps), 0-based: in an SPMD job the n-th collective of a kind in a
    /// step is the same collective on every rank.
    pub ordinal: u32,
    /// Device.
    pub device: i32,
    /// Start on this rank's timeline, ns.
    pub start_ns: i64,
    /// Duration, ns: the rank's own transfer plus its wait for the last rank to arrive.
    pub dur_ns: i64,
    /// The step it ran in (profiler step number), when steps are marked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    /// The parts of it that no other GPU work on the device overlapped, as (offset from its
    /// start, length) in ns: a wait inside them held the GPU up, a wait outside them was
    /// hidden behind compute.
    pub uncovered: Vec<(i64, i64)>,
}

impl CollectiveRecord {
    /// How much of its first `wait` ns no other GPU work overlapped.
    pub fn exposed_within(&self, wait: i64) -> i64 {
        self.uncovered
            .iter()
            .map(|&(o, l)| (o + l).min(wait) - o)
            .filter(|&x| x > 0)
            .sum()
    }
}

/// The collectives of a trace that start inside the window, in start order.
pub fn records(trace: &Trace, window: &Window) -> Vec<CollectiveRecord> {
    let comm = communication_names(trace);
    let mut ops: Vec<(usize, &tracehound_parsers::GpuOp)> = trace
        .gpu_ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.start >= window.start && o.start < window.end && is_comm(&comm, o))
        .collect();
    ops.sort_by_key(|(_, o)| (o.start, o.device, o.stream));
    let mut work: rustc_hash::FxHashMap<i32, Vec<(i64, i64)>> = Default::default();
    for (_, o) in &ops {
        work.entry(o.device)
            .or_insert_with(|| compute_union(trace, &comm, o.device));
    }
    let mut seen: rustc_hash::FxHashMap<(&'static str, Option<i64>), u32> =
        rustc_hash::FxHashMap::default();
    ops.into_iter()
        .map(|(i, o)| {
            let kind = collective_kind(trace.str(o.name));
            // A kernel belongs to the step that launched it: when the host runs ahead, it
            // starts steps later on the GPU. Without a launch record, the step it started in.
            let at = match trace.index.op_launch.get(i) {
                Some(&l) if l != tracehound_parsers::NONE => trace.host_spans[l as usize].start,
                _ => o.start,
            };
            let k = trace.steps.partition_point(|s| s.start <= at);
            let step = k.checked_sub(1).map(|k| trace.steps[k].number);
            let n = seen.entry((kind, step)).or_default();
            let ordinal = *n;
            *n += 1;
            let u = work.get(&o.device).map(Vec::as_slice).unwrap_or(&[]);
            CollectiveRecord {
                kind,
                ordinal,
                device: o.device,
                start_ns: o.start,
                dur_ns: o.dur(),
                step,
                uncovered: gaps_within(u, o.start, o.end)
                    .into_iter()
                    .map(|(s, e)| (s - o.start, e - s))
                    .collect(),
            }
        })
        .collect()
}

/// Sorted disjoint union of a device's GPU work other than collectives.
fn compute_union(trace: &Trace, comm: &[bool], device: i32) -> Vec<(i64, i64)> {
    union(
        trace
            .device_ops(device)
            .iter()
            .map(|&i| &trace.gpu_ops[i as usize])
            .filter(|o| o.is_work() && !is_comm(comm, o))
            .map(|o| (o.start, o.end))
            .collect(),
    )
}

/// The parts of `[a, b)` that the sorted disjoint intervals `u` do not cover.
fn gaps_within(u: &[(i64, i64)], a: i64, b: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut at = a;
    let k = u.partition_point(|x| x.1 <= a);
    for &(s, e) in u[k..].iter().take_while(|x| x.0 < b) {
        if s > at {
            out.push((at, s.min(b)));
        }
        at = at.max(e);
    }
    if at < b {
        out.push((at, b));
    }
    out
}

/// Collective time on one device over the window, and the part of it no other GPU work
/// overlapped (exposed).
#[derive(Debug, Clone, PartialEq)]
pub struct Exposure {
    /// Device.
    pub device: i32,
    /// Union of collective kernels, ns.
    pub collective_ns: i64,
    /// Union of collective kernels minus the union of all other GPU work, ns.
    pub exposed_ns: i64,
    /// Exposed time by collective kind, largest first, with the number of kernels.
    pub by_kind: Vec<(&'static str, i64, u64)>,
    /// The collectives with the most exposed time, most first (at most [`LONGEST`]): GPU op
    /// index, start, end, and their own exposed time, ns.
    pub longest: Vec<(u32, i64, i64, i64)>,
    /// The collectives starting in the window that waited for another rank ([`Wait`]),
    /// largest wait first; empty where the trace records no message sizes.
    pub waits: Vec<Wait>,
}

/// How many of the most exposed collectives an [`Exposure`] keeps.
pub const LONGEST: usize = 5;

/// Exposed collective time per device that ran collectives in the window.
pub fn exposure(trace: &Trace, window: &Window) -> Vec<Exposure> {
    let comm_names = communication_names(trace);
    let mut out = Vec::new();
    for d in trace.devices() {
        let mut comm: Vec<(i64, i64, &'static str, u32)> = Vec::new();
        // Those that start in the window, whole, for the waits.
        let mut started: Vec<(u32, &tracehound_parsers::GpuOp)> = Vec::new();
        let mut work: Vec<(i64, i64)> = Vec::new();
        for &i in trace.device_ops(d) {
            let o = &trace.gpu_ops[i as usize];
            if !o.is_work() {
                continue;
            }
            let (s, e) = (o.start.max(window.start), o.end.min(window.end));
            if e <= s {
                continue;
            }
            if is_comm(&comm_names, o) {
                comm.push((s, e, collective_kind(trace.str(o.name)), i));
                if o.start >= window.start {
                    started.push((i, o));
                }
            } else {
                work.push((s, e));
            }
        }
        if comm.is_empty() {
            continue;
        }
        let work = union(work);
        let collective_ns = crate::window::total(&union(comm.iter().map(|c| (c.0, c.1)).collect()));
        // Each collective's own uncovered time; overlapping collectives (two process
        // groups at once) are counted once, on the earlier one.
        let mut by: rustc_hash::FxHashMap<&'static str, (i64, u64)> = Default::default();
        let mut exposed_ns = 0;
        let mut done_to = i64::MIN;
        let mut longest: Vec<(u32, i64, i64, i64)> = Vec::new();
        for (s, e, kind, i) in comm {
            let s2 = s.max(done_to);
            let own = if e > s2 {
                e - s2 - covered(&work, s2, e)
            } else {
                0
            };
            done_to = done_to.max(e);
            exposed_ns += own;
            if own > 0 {
                longest.push((i, s, e, own));
            }
            let entry = by.entry(kind).or_default();
            entry.0 += own;
            entry.1 += 1;
        }
        let mut by_kind: Vec<(&'static str, i64, u64)> =
            by.into_iter().map(|(k, (ns, n))| (k, ns, n)).collect();
        by_kind.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        longest.sort_by(|a, b| b.3.cmp(&a.3).then(a.1.cmp(&b.1)));
        longest.truncate(LONGEST);
        out.push(Exposure {
            device: d,
            collective_ns,
            exposed_ns,
            by_kind,
            longest,
            waits: waits(trace, &started),
        });
    }
    out
}

/// Sorted disjoint union of intervals.
fn union(mut v: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    v.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(l) if s <= l.1 => l.1 = l.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Length of `[a, b)` covered by the sorted disjoint intervals `u`.
fn covered(u: &[(i64, i64)], a: i64, b: i64) -> i64 {
    let k = u.partition_point(|x| x.1 <= a);
    u[k..]
        .iter()
        .take_while(|x| x.0 < b)
        .map(|x| (x.1.min(b) - x.0.max(a)).max(0))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn communication_beyond_nccl() {
        for n in [
            "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*)",
            "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)",
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)",
            "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*)",
            "nvshmemi_transfer_rma_kernel(void*)",
            "mscclKernel_Sum_float_Simple(ncclDevComm*)",
        ] {
            assert!(is_collective_kernel(n), "{n}");
        }
        for n in [
            "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*)",
            "void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)",
            "sm90_xmma_gemm_bf16bf16_bf16f32(AllReduceParams)",
            "triton_poi_fused_add_0",
        ] {
            assert!(!is_collective_kernel(n), "{n}");
        }
        assert_eq!(
            collective_kind("void dpsk::ep::internode::combine<false, 8>(int4*)"),
            "AllToAll"
        );
        assert_eq!(
            collective_kind(
                "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
            ),
            "AllReduce"
        );
    }

    #[test]
    fn names_across_nccl_versions() {
        for n in [
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "void ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
        ] {
            assert!(is_collective_kernel(n), "{n}");
        }
        assert!(!is_collective_kernel("sm90_xmma_gemm_bf16bf16"));
        assert_eq!(
            collective_kind("ncclKernel_AllReduce_RING_LL_Sum_float"),
            "AllReduce"
        );
        assert_eq!(
            collective_kind("ncclDevKernel_AllGather_RING_LL"),
            "AllGather"
        );
        assert_eq!(
            collective_kind("void ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"),
            "SendRecv"
        );
        assert_eq!(
            collective_kind("ncclDevKernel_ReduceScatter_Sum_bf16"),
            "ReduceScatter"
        );
    }

    #[test]
    fn coverage() {
        let u = union(vec![(0, 10), (5, 20), (30, 40)]);
        assert_eq!(u, vec![(0, 20), (30, 40)]);
        assert_eq!(covered(&u, 15, 35), 10);
        assert_eq!(covered(&u, 20, 30), 0);
        assert_eq!(gaps_within(&u, 15, 45), vec![(20, 30), (40, 45)]);
        let r = CollectiveRecord {
            kind: "AllReduce",
            ordinal: 0,
            device: 0,
            start_ns: 15,
            dur_ns: 30,
            step: None,
            uncovered: vec![(5, 10), (25, 5)],
        };
        assert_eq!(r.exposed_within(8), 3);
        assert_eq!(r.exposed_within(30), 15);
    }
}
