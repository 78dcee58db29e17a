//! Kernels that started on an idle GPU with nothing queued behind them, split by why the queue
//! was empty.
//!
//! For each kernel, the queue depth at its start is the number of kernels of the device whose
//! launch call had begun by then and that had not started yet (launch calls against kernel
//! starts). A kernel that starts after a gap shorter than the idle-gap threshold with nothing
//! queued was waiting for its own launch; so was a copy or memset whose launch call began only
//! after the GPU had run out of work. Why the queue was empty decides what to change:
//!
//! - the host was blocked in a synchronising call (`cudaStreamSynchronize` under
//!   `aten::nonzero`, `.item()`, a boolean-mask index, a pageable copy) that returned as the
//!   GPU went idle: the sync drained the queue, and the gap is the sync's cost, as are the
//!   gaps of the next [`CHAIN_KERNELS`] kernels while the host has not got ahead again (no
//!   kernel started with work queued), up to as much idle time as the host waited in the sync
//!   (the lead it lost: without the sync, that much queued work would have covered the host's
//!   relaunch). Faster launches (CUDA graphs) cannot remove them: a graph cannot even capture
//!   a synchronisation. Such gaps are **drained**, kept with the operator and Python frame
//!   that synchronised;
//! - the operator that launched it is followed on its thread, within the gap threshold, by an
//!   operator that synchronises (`p.grad.norm()` then `.item()`): a loop that waits on the host
//!   after each call, which a graph cannot capture either: **read back**, kept with that sync;
//! - otherwise the host was simply slower than the GPU at issuing work: **launch-bound**.
//!
//! A memset or copy that restarts the GPU after a sync drained the queue is the first of the
//! chain too: code after `.item()` often starts with an allocation's memset or a small copy.
//!
//! The launch_bound rule reports the last set, the sync_stalls rule the first two. Gaps from the
//! threshold up are the idle_gaps rule's, which names drains of its own. Kernels replayed from
//! a CUDA graph (`cudaGraphLaunch`) are left out: a replay queues all of them at once.
//! Computed once per analysis ([`crate::context::Ctx::starved`]); O(kernels), with one
//! binary search per starved kernel.

use crate::blocking::BlockingCalls;
use crate::scope::Scope;
use rustc_hash::FxHashMap;
use tracehound_parsers::{GpuOpKind, NONE, Trace};

/// A sync that returned at most this long before the gap began drained the queue: the host
/// wakes a few µs after the GPU finishes; 20 µs covers the wake-up and the return path. The
/// idle engine judges its long gaps' drains by it too.
pub const DRAIN_SLACK_NS: i64 = 20_000;

/// After a sync drained the queue, this many more kernels that start on an idle GPU before
/// the host gets ahead again (a kernel starting with work queued behind it) are the sync's
/// cost too: the host relaunches the code after the sync onto an empty queue, and a boolean
/// index or `.item()` is followed by a few kernels before the next one. A bound, so that one
/// `.item()` in a launch-bound step is not charged with the whole step.
pub const CHAIN_KERNELS: usize = 16;

/// What removes the sync inside `torch.repeat_interleave` with a tensor of repeats (the
/// launch_bound and sync_stalls rules both give it, by where its waits fall).
pub(crate) const REPEAT_INTERLEAVE_ADVICE: &str = "torch.repeat_interleave with a tensor of repeats reads their sum on the host to size its result: pass output_size= (the total, known on the host or computed once per batch) and it queues its kernels without waiting.";

/// One kernel (or copy, or memset) that started after a short gap with nothing queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Starved {
    /// GPU op index of the kernel, or of a memset or copy: after a drain the sync's chain
    /// counts it like a kernel, and launched onto an idle GPU it waited for its launch too.
    pub op: u32,
    /// The idle time before it, ns (`start - busy end`).
    pub gap_ns: i64,
    /// Runtime call start to kernel start, ns (the launch path alone, since nothing was queued).
    pub latency_ns: i64,
    /// The synchronising runtime call (host span) that drained the queue, or [`NONE`].
    pub drained_by: u32,
    /// Where the queue was not drained: the blocking call inside the operator that runs right
    /// after the one that launched this kernel on its thread, the host reading its result
    /// (`p.grad.norm()` then `.item()`), or [`NONE`]. A loop that reads every result before
    /// launching the next call waits for its launches because of the reads.
    pub read_by: u32,
}

// When the GPU went idle and when the kernel ended are read from the kernel, not kept: the
// 1 GB benchmark trace has hundreds of thousands of starved kernels, kept while every rule
// runs.
impl Starved {
    /// When the GPU went idle (the end of its last work before the kernel).
    pub fn idle_from(&self, trace: &Trace) -> i64 {
        trace.gpu_ops[self.op as usize].start - self.gap_ns
    }

    /// The kernel (or copy, or memset).
    pub fn kernel<'t>(&self, trace: &'t Trace) -> &'t tracehound_parsers::GpuOp {
        &trace.gpu_ops[self.op as usize]
    }
}

/// Launch-bound waits by the outermost operator whose kernel waited (its name's string id):
/// waits, idle ns, and up to [`SYNC_SAMPLES`] of its spans.
pub(crate) type WaitsByOperator = FxHashMap<u32, (u64, i64, Vec<u32>)>;

/// Calls of an operator whose kernels waited that are checked for a synchronisation inside.
const SYNC_SAMPLES: usize = 16;

/// Counts the wait before starved kernel `s` against the outermost operator that launched it
/// (found by the nesting pass: walking up from each launch read the spans all over the list),
/// keeping a few of that operator's spans.
pub(crate) fn add_wait(waits: &mut WaitsByOperator, t: &Trace, s: &Starved) {
    let outer = t.index.op_outer_cpu_op[s.op as usize];
    let g = waits
        .entry(crate::names::span_name_id(t, outer))
        .or_default();
    g.0 += 1;
    g.1 += s.gap_ns;
    if g.2.len() < SYNC_SAMPLES && outer != NONE {
        g.2.push(outer);
    }
}

/// Of the three operators holding most of `waits`, those with a blocking call inside at least
/// half of their sampled calls (a boolean-mask index's `nonzero`, `.item()`, a copy to the
/// host): the host loses its lead there every call, and a CUDA graph cannot capture them.
/// Their labels (`aten::index › aten::nonzero (cudaStreamSynchronize) at train.py(12): f`) and
/// the waits they hold, ns. The launch_bound rule and the verdict read it.
pub(crate) fn syncing_operators(cx: &Scope, waits: &WaitsByOperator) -> (Vec<String>, i64) {
    let t = cx.trace;
    let syncs = Syncs::new(cx);
    let mut top: Vec<(u32, i64)> = waits.iter().map(|(&k, v)| (k, v.1)).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut syncing: Vec<String> = Vec::new();
    let mut syncing_ns = 0i64;
    for &(name, ns) in top.iter().take(3) {
        let calls = waits.get(&name).map_or(&[][..], |g| g.2.as_slice());
        let found: Vec<u32> = calls
            .iter()
            .map(|&o| syncs.inside(o))
            .filter(|&c| c != NONE)
            .collect();
        let Some(&call) = found.first() else { continue };
        if 2 * found.len() < calls.len() {
            continue;
        }
        let inner = t.enclosing(call, tracehound_parsers::HostKind::CpuOp);
        let outer_name = crate::names::name_or(t, name, "(no operator)");
        let inner_name = crate::names::span_name(t, inner, "");
        let frame = calls
            .iter()
            .find_map(|&o| t.user_frame(o))
            .map(|f| format!(" at {f}"))
            .unwrap_or_default();
        syncing.push(format!(
            "{outer_name}{} ({}){frame}",
            if inner_name.is_empty() || inner_name == outer_name {
                String::new()
            } else {
                format!(" › {inner_name}")
            },
            t.api_name(t.host_spans[call as usize].name)
        ));
        syncing_ns += ns;
    }
    (syncing, syncing_ns)
}

/// The starved kernels of one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceStarved {
    /// Device index.
    pub device: i32,
    /// Kernels in the window whose launch call is known (graph replays left out).
    pub kernels: usize,
    /// Kernels replayed from CUDA graphs, not counted.
    pub graph_kernels: u64,
    /// Copies and memsets in the window whose launch call is known (graph replays left out),
    /// of devices with two kernels or more: each may wait for its own launch too.
    pub other_ops: usize,
    /// Starved kernels in start order, drained or not.
    pub starved: Vec<Starved>,
}

impl DeviceStarved {
    /// The kernels that waited for a launch the host was slow to issue (no sync before, and
    /// no read of their operator's result right after).
    pub fn launch_bound(&self) -> impl Iterator<Item = &Starved> {
        self.starved
            .iter()
            .filter(|s| s.drained_by == NONE && s.read_by == NONE)
    }

    /// The kernels that waited for their launch in a loop that reads each result on the host
    /// before it launches the next call ([`Starved::read_by`]).
    pub fn read_back(&self) -> impl Iterator<Item = &Starved> {
        self.starved
            .iter()
            .filter(|s| s.drained_by == NONE && s.read_by != NONE)
    }

    /// The kernels that waited because a synchronising call had drained the queue.
    pub fn drained(&self) -> impl Iterator<Item = &Starved> {
        self.starved.iter().filter(|s| s.drained_by != NONE)
    }
}

/// How many runtime calls before the GPU went idle are searched for the blocking call on the
/// launching thread: a thread blocked in a sync starts nothing until it returns, so the sync
/// is the last call begun by then, or one of the last few when it returned within the slack
/// and the host launched again at once.
const SYNC_LOOKBACK: usize = 4;

/// Finds the synchronising call that drained the queue: the blocking runtime call the
/// launching thread began by `idle_from` and was still in then (or left at most
/// [`DRAIN_SLACK_NS`] before), returned before the launch at `launch_start`.
pub(crate) struct Syncs<'s, 't> {
    t: &'t Trace,
    calls: &'s BlockingCalls<'t>,
    /// Per thread, how many of its calls begin at or before the last `idle_from` asked about,
    /// and how many of its blocking calls: the starved pass asks in time order, so each
    /// thread's calls are searched forward from there.
    cursor: std::cell::RefCell<FxHashMap<(i64, i64), (usize, usize)>>,
}

impl<'s, 't> Syncs<'s, 't> {
    pub(crate) fn new(cx: &'s Scope<'t>) -> Self {
        Syncs {
            t: cx.trace,
            calls: cx.blocking_calls(),
            cursor: Default::default(),
        }
    }

    /// Starts over for a pass whose times begin again (the next device).
    fn rewind(&self) {
        self.cursor.borrow_mut().clear();
    }

    /// The first blocking runtime call inside operator span `op` (on its thread), or
    /// [`NONE`].
    pub(crate) fn inside(&self, op: u32) -> u32 {
        let Some(o) = self.t.host_spans.get(op as usize) else {
            return NONE;
        };
        let Some(th) = self.calls.threads.get(&(o.pid, o.tid)) else {
            return NONE;
        };
        let k = th.starts.partition_point(|&s| s < o.start);
        let b = th.blocking.partition_point(|&p| (p as usize) < k);
        th.blocking
            .get(b)
            .filter(|&&p| th.starts[p as usize] < o.end)
            .map_or(NONE, |&p| th.calls[p as usize])
    }

    fn drained_by(&self, thread: (i64, i64), idle_from: i64, launch_start: i64) -> u32 {
        let Some(th) = self.calls.threads.get(&thread) else {
            return NONE;
        };
        let mut cursors = self.cursor.borrow_mut();
        let (k, b) = cursors.entry(thread).or_insert((0, 0));
        let begun = |s: &i64| *s <= idle_from;
        let starts = &th.starts;
        // Asked in time order: search forward from the last answer, in steps that double; a
        // time before the last one starts over.
        if *k > 0 && !begun(&starts[*k - 1]) {
            *k = starts.partition_point(begun);
            *b = 0;
        } else {
            let (mut lo, mut step) = (*k, 1usize);
            while lo + step <= starts.len() && begun(&starts[lo + step - 1]) {
                lo += step;
                step *= 2;
            }
            let hi = (lo + step).min(starts.len());
            *k = lo + starts[lo..hi].partition_point(begun);
        }
        // The blocking calls begun by then: the last of them is the candidate.
        while *b < th.blocking.len() && (th.blocking[*b] as usize) < *k {
            *b += 1;
        }
        let (k, b) = (*k, *b);
        drop(cursors);
        let Some(&p) = b.checked_sub(1).and_then(|b| th.blocking.get(b)) else {
            return NONE;
        };
        if (p as usize) + SYNC_LOOKBACK < k {
            return NONE;
        }
        let i = th.calls[p as usize];
        let s = &self.t.host_spans[i as usize];
        if s.end >= idle_from - DRAIN_SLACK_NS && s.end <= launch_start {
            i
        } else {
            NONE
        }
    }
}

/// How many spans after an operator on its thread are searched for the next outermost one
/// (Python frames and the operators inside it come first).
const READ_LOOKAHEAD: usize = 32;

/// The blocking runtime call inside the outermost operator that runs next after operator span
/// `outer` on its thread, beginning within the idle-gap threshold of its end: the host reading
/// `outer`'s result (`.item()`, `.cpu()`, a boolean index) before it does anything else. [`NONE`]
/// otherwise.
pub(crate) fn read_right_after(t: &Trace, syncs: &Syncs, outer: u32, threshold: i64) -> u32 {
    let Some(o) = t.host_spans.get(outer as usize) else {
        return NONE;
    };
    let spans = t.thread_spans((o.pid, o.tid));
    let from = spans.partition_point(|&k| t.host_spans[k as usize].start < o.end);
    for &k in spans[from..].iter().take(READ_LOOKAHEAD) {
        let h = &t.host_spans[k as usize];
        if h.start - o.end > threshold {
            return NONE;
        }
        if h.kind != tracehound_parsers::HostKind::CpuOp || t.outermost_cpu_op(k) != k {
            continue;
        }
        return syncs.inside(k);
    }
    NONE
}

/// The starved kernels of every device that ran kernels in the window, ascending by device.
pub(crate) fn starved(cx: &Scope) -> Vec<DeviceStarved> {
    let t = cx.trace;
    let w = &cx.window;
    let threshold = cx.config.gap_threshold_ns;
    let is_graph = t.strings.matching(|n| n.contains("GraphLaunch"));
    let syncs = Syncs::new(cx);
    let mut out = Vec::new();
    for d in t.devices() {
        // Each kernel with its launch's thread (an index into `threads`) and start, read in
        // this one pass: a launch span read again later is a cache miss per kernel.
        let mut ks: Vec<(u32, u32, i64)> = Vec::new();
        let mut threads: Vec<(i64, i64)> = Vec::new();
        let mut graph = 0u64;
        for (i, _) in w.kernels(t, d) {
            let l = t.index.op_launch[i];
            if l == NONE {
                continue;
            }
            let launch = &t.host_spans[l as usize];
            if is_graph.get(launch.name as usize).copied().unwrap_or(false) {
                graph += 1;
                continue;
            }
            let key = (launch.pid, launch.tid);
            // Most launches come from one thread: the last one found is tried first.
            let th = match threads.last() {
                Some(&k) if k == key => threads.len() - 1,
                _ => match threads.iter().position(|&k| k == key) {
                    Some(p) => p,
                    None => {
                        threads.push(key);
                        threads.len() - 1
                    }
                },
            };
            ks.push((i as u32, th as u32, launch.start));
        }
        syncs.rewind();
        let walk = Walk {
            t,
            w,
            threshold,
            syncs: &syncs,
            is_graph: &is_graph,
        };
        let mut dev = DeviceStarved {
            device: d,
            kernels: ks.len(),
            graph_kernels: graph,
            other_ops: 0,
            starved: Vec::new(),
        };
        // Something must start after something else: two kernels, or a kernel and copies (a
        // loop of `x[i].cpu()` after the one kernel that made `x`). A capture of copies only is
        // a transfer benchmark, which the transfer-bound verdict judges.
        let copies = || {
            t.device_ops(d).iter().any(|&i| {
                let o = &t.gpu_ops[i as usize];
                o.is_work() && o.kind != GpuOpKind::Kernel && o.start >= w.start && o.start < w.end
            })
        };
        if ks.len() < 2 && !(ks.len() == 1 && copies()) {
            out.push(dev);
            continue;
        }
        let mut launches: Vec<i64> = ks.iter().map(|k| k.2).collect();
        launches.sort_unstable();
        // Busy end across all GPU work of the device (any stream) before each kernel: the
        // device's ops are sorted by start, so one pointer walks them alongside.
        let dev_ops = t.device_ops(d);
        let mut busy_end = i64::MIN;
        let (mut oi, mut launched) = (0usize, 0usize);
        // The sync that last drained the queue, its thread, how many more kernels it may
        // explain while the host has not got ahead again, and the idle time it may explain.
        let mut chain: Option<(u32, (i64, i64), usize, i64)> = None;
        for (started, &(i, th, launch_start)) in ks.iter().enumerate() {
            let op = &t.gpu_ops[i as usize];
            while oi < dev_ops.len() && t.gpu_ops[dev_ops[oi] as usize].start < op.start {
                let oidx = dev_ops[oi];
                let o = &t.gpu_ops[oidx as usize];
                if o.is_work() {
                    if o.kind != GpuOpKind::Kernel {
                        restart(&walk, oidx, busy_end, &mut dev, &mut chain);
                    }
                    busy_end = busy_end.max(o.end);
                }
                oi += 1;
            }
            // Launch calls begun by the kernel's start, less kernels started before it.
            while launched < launches.len() && launches[launched] <= op.start {
                launched += 1;
            }
            let depth = launched.saturating_sub(started + 1);
            if depth != 0 {
                // The host got ahead of the GPU again: a sync before no longer explains gaps.
                chain = None;
                continue;
            }
            let gap = op.start.saturating_sub(busy_end);
            if busy_end == i64::MIN || gap <= 0 {
                continue;
            }
            // The last blocking call the launching thread began by the time the GPU went
            // idle: it drained the queue when it was still blocked then (or returned just
            // before) and returned before this launch.
            let thread = threads[th as usize];
            let direct = syncs.drained_by(thread, busy_end, launch_start);
            // A sync can cost at most the lead it destroyed: the GPU work that was queued when
            // the host began waiting, which is how long it waited. Gaps after it are the
            // sync's while they fit in that budget; a host that never had a lead (a
            // launch-bound loop with an occasional copy to the host) keeps its gaps.
            if direct != NONE {
                let s = &t.host_spans[direct as usize];
                chain = Some((direct, thread, CHAIN_KERNELS, s.end - s.start));
            }
            let drained_by = match &mut chain {
                Some((sync, th, left, budget)) if *th == thread && *left > 0 && gap <= *budget => {
                    *left -= 1;
                    *budget -= gap;
                    *sync
                }
                _ => {
                    chain = None;
                    NONE
                }
            };
            if gap >= threshold {
                // The idle-gap rule's: it names drains of its own.
                continue;
            }
            let read_by = if drained_by == NONE {
                read_right_after(t, &syncs, t.index.op_outer_cpu_op[i as usize], threshold)
            } else {
                NONE
            };
            dev.starved.push(Starved {
                op: i,
                gap_ns: gap,
                latency_ns: op.start - launch_start,
                drained_by,
                read_by,
            });
        }
        // Copies and memsets after the last kernel (a loop of copies to the host at the end
        // of the window).
        for &oidx in &dev_ops[oi..] {
            let o = &t.gpu_ops[oidx as usize];
            if o.is_work() {
                if o.kind != GpuOpKind::Kernel {
                    restart(&walk, oidx, busy_end, &mut dev, &mut chain);
                }
                busy_end = busy_end.max(o.end);
            }
        }
        out.push(dev);
    }
    out
}

/// What the pass over one device reads while it walks: the trace, the window, the idle-gap
/// threshold, the blocking calls and which launch calls are graph replays.
struct Walk<'a, 's, 't> {
    t: &'t Trace,
    w: &'a crate::window::Window,
    threshold: i64,
    syncs: &'a Syncs<'s, 't>,
    is_graph: &'a [bool],
}

/// A memset or copy (GPU op `oidx`) that may restart an idle GPU (busy until `busy_end`), judged
/// as a kernel is: after a sync that drained the queue, while the sync's chain lasts and its
/// wait covers the gap, the gap is the sync's (the `aten::empty`/`zero_` or input copy at the
/// top of the code after `.item()`); otherwise, launched only after the GPU went idle, it
/// waited for its own launch (a Python loop of `.cpu()` on single elements runs nothing but tiny
/// copies, each issued onto an empty queue).
fn restart(
    walk: &Walk,
    oidx: u32,
    busy_end: i64,
    dev: &mut DeviceStarved,
    chain: &mut Option<(u32, (i64, i64), usize, i64)>,
) {
    let (t, w) = (walk.t, walk.w);
    let o = &t.gpu_ops[oidx as usize];
    if o.start < w.start || o.start >= w.end {
        return;
    }
    let Some(sp) = t
        .index
        .op_launch
        .get(oidx as usize)
        .filter(|&&l| l != NONE)
        .map(|&l| &t.host_spans[l as usize])
    else {
        return;
    };
    if walk
        .is_graph
        .get(sp.name as usize)
        .copied()
        .unwrap_or(false)
    {
        return;
    }
    dev.other_ops += 1;
    if busy_end == i64::MIN || o.start <= busy_end {
        return;
    }
    let thread = (sp.pid, sp.tid);
    let gap = o.start - busy_end;
    // As for a kernel: the sync that drained the queue starts a chain, and the gap is the
    // sync's while the chain lasts and its wait covers the gap; otherwise the chain ends.
    let direct = walk.syncs.drained_by(thread, busy_end, sp.start);
    if direct != NONE {
        let s = &t.host_spans[direct as usize];
        *chain = Some((direct, thread, CHAIN_KERNELS, s.end - s.start));
    }
    let drained_by = match chain {
        Some((sync, th, left, budget)) if *th == thread && *left > 0 && gap <= *budget => {
            *left -= 1;
            *budget -= gap;
            *sync
        }
        _ => {
            *chain = None;
            NONE
        }
    };
    // From the threshold up the gap is idle_gaps'; without a sync to blame, a copy launched
    // before the GPU ran out of work waited for something else than its launch.
    if gap >= walk.threshold || (drained_by == NONE && sp.start < busy_end) {
        return;
    }
    // A read's own copy (`.item()`'s) stays launch-bound: a loop of them is a loop of copies
    // waiting for their launches, which launch_bound names with its own advice.
    let read_by = if drained_by == NONE {
        read_right_after(
            t,
            walk.syncs,
            t.index.op_outer_cpu_op[oidx as usize],
            walk.threshold,
        )
    } else {
        NONE
    };
    dev.starved.push(Starved {
        op: oidx,
        gap_ns: gap,
        latency_ns: o.start - sp.start,
        drained_by,
        read_by,
    });
}

/// What waits for launches are measured under, in a capture whose operators the profiler
/// recorded: it adds host time to every operator call (more with shapes and Python stacks), so
/// a loop the host cannot feed waits longer in the capture than outside it (on the blind set's
/// launch-bound loops the twins gained 1.5–2.4× less outside the profiler than in it). The
/// trace holds no measure of that cost, so the finding says it rather than correct for it.
pub(crate) fn profiler_note(cx: &crate::scope::Scope) -> String {
    let c = &cx.trace.meta.capture;
    if !c.cpu_ops {
        return String::new();
    }
    let on: Vec<&str> = [(c.shapes, "record_shapes"), (c.python_frames, "with_stack")]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
    format!(
        "; measured under the profiler, which adds host time to every operator call it records{}: outside it the host launches faster and these waits are shorter, so size the gain with a timing outside the profiler",
        if on.is_empty() {
            String::new()
        } else {
            format!(" (more with {}, on here)", on.join(" and "))
        }
    )
}

/// The waits another finding prices, which launch_bound and the verdict's count of launch
/// waits leave to it: those launched inside a single-tensor optimizer's step or a zeroing
/// `zero_grad` (optimizer_overhead's), those before a checkpoint's recomputed forward
/// kernels (recomputation's), those before a loop's per-tensor kernels (tensor_loop's) and
/// those before copies of Python numbers to the device or after their syncs (constant_uploads';
/// sync_stalls leaves it the latter), each only where that rule runs and reports, so that no
/// wait is left to a finding nobody sees.
pub(crate) struct Handed<'a> {
    trace: &'a tracehound_parsers::Trace,
    optimizer: &'a [((i64, i64), i64, i64)],
    recomputation: Option<&'a crate::checkpointing::Recomputation>,
    loops: Option<&'a crate::tensor_loops::TensorLoops>,
    uploads: Option<&'a crate::uploads::Uploads>,
}

impl<'a> Handed<'a> {
    /// The waits inside `optimizer` ranges (optimizer_overhead's priced ranges, empty where it
    /// does not run), before `recomputation`'s kernels, before `loops`' kernels and before
    /// `uploads`' copies (each `None` where its rule does not run); built by
    /// [`crate::rules::handed`], which knows the rules.
    pub(crate) fn new(
        trace: &'a tracehound_parsers::Trace,
        optimizer: &'a [((i64, i64), i64, i64)],
        recomputation: Option<&'a crate::checkpointing::Recomputation>,
        loops: Option<&'a crate::tensor_loops::TensorLoops>,
        uploads: Option<&'a crate::uploads::Uploads>,
    ) -> Self {
        Handed {
            trace,
            optimizer,
            recomputation,
            loops,
            uploads,
        }
    }

    /// Whether GPU op `op` on `device` waited because of a reported copy of a Python number to
    /// the device, for its launch or after its sync (constant_uploads'; `None` where it does
    /// not run).
    pub(crate) fn to_uploads(&self, device: i32, op: u32) -> bool {
        self.uploads.is_some_and(|u| u.owns(device, op))
    }

    /// Whether GPU op `op` on `device` was launched by a call of a reported loop over a
    /// tensor list (tensor_loop's; `None` where it does not run).
    pub(crate) fn to_loop(&self, device: i32, op: u32) -> bool {
        self.loops.is_some_and(|l| l.owns(self.trace, device, op))
    }

    /// Whether GPU op `op` waited inside a range optimizer_overhead prices.
    pub(crate) fn to_optimizer(&self, op: u32) -> bool {
        crate::optimizer::launched_in(self.trace, self.optimizer, op)
    }

    /// Whether GPU op `op` on `device` is a reported recomputation's kernel.
    pub(crate) fn to_recomputation(&self, device: i32, op: u32) -> bool {
        self.recomputation.is_some_and(|r| r.owns(device, op))
    }

    /// Whether GPU op `op` on `device` waited for another finding.
    pub(crate) fn any(&self, device: i32, op: u32) -> bool {
        self.to_optimizer(op)
            || self.to_recomputation(device, op)
            || self.to_loop(device, op)
            || self.to_uploads(device, op)
    }
}
