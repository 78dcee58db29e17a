//! The idle engine: GPU idle gaps, intervals of at least `gap_threshold_ns` (100 µs) inside the analysed
//! window where a GPU runs nothing on any stream, each attributed to what the host thread
//! that launched the next GPU operation was doing, **by measured time**.
//!
//! For each gap the launching thread is swept from the gap's start to the launch of the next
//! GPU work ([`Trace::exclusive_time`]): every instant goes to the innermost span active then,
//! and that span is put in a category (a synchronising call, an allocator call, module
//! loading, cuDNN autotuning, launch calls and operator dispatch, a CPU operator that
//! launched no GPU work, a Python frame, data loading, an OS call, untraced time). The time
//! from that launch to the gap's end is launch latency. The category holding most of the
//! gap's time is its cause; a gap where none holds a third is "mixed" and shows its top two.
//!
//! A second fact is kept beside it: whether a synchronising call returned just before the gap
//! (`.item()`, `.cpu()`, a pageable copy) and so drained the GPU's queue. A drained gap's
//! launch time is the sync's cost (the GPU could otherwise have run ahead of the host).
//! A gap whose next operation was launched before the gap began is a GPU-side wait.
//!
//! The engine computes; [`crate::rules::idle_gaps`] turns its result into findings, and the
//! summary's verdict and the views read it through [`crate::context::Ctx::idle`].

mod advice;
mod attribute;
mod calls;

pub use advice::{
    LAUNCH_OVERHEAD, LAUNCH_OVERHEAD_CUDA, LAUNCH_OVERHEAD_CUDA_NO_GRAPHS,
    LAUNCH_OVERHEAD_NO_GRAPHS, advice, allocator_once,
};

use crate::scope::Scope;
use crate::window::{WindowSource, for_each_busy};
use attribute::Attributor;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A launch or runtime call this long is not launch overhead: the first call of a kernel
/// loads its module (lazy loading, `CUDA_MODULE_LOADING=LAZY`), which takes milliseconds,
/// while a launch takes 2-20 µs. 1 ms sits two orders of magnitude above a launch and below
/// every module load seen on H100/H200 captures (1.8-34 ms).
const SLOW_CALL_NS: i64 = 1_000_000;

/// An operator's first call in the window taking this many times the median of its later
/// calls on the same thread did set-up the others skip (a library handle or workspace, lazy
/// loading, the profiler starting on that thread). In the Kineto captures held, first calls
/// of a millisecond or more fall in two groups: within 4x of their later calls (ordinary
/// variation, per-shape autotuning, recompiles) and 8x to over 1000x, with few between.
const ONE_OFF_RATIO: i64 = 8;

/// From a launch call to its kernel's start on an idle GPU takes 4-20 µs on the H100/H200
/// captures; time beyond 50 µs with the work already queued is the GPU waiting on something
/// else (a dependency, an event, another stream), not launch overhead.
const LAUNCH_LATENCY_NS: i64 = 50_000;

// A sync that returned at most this long before the gap began drained the queue: the same
// slack the starved-kernel pass uses for short gaps.
use crate::starved::DRAIN_SLACK_NS;

/// The leading gap of a capture that starts recording inside its first step (Kineto's, as
/// [`Capture::startup_hole`](tracehound_parsers::Capture::startup_hole) says) up to this long
/// is the profiler starting up: every capture we have opens with a 1-4 ms hole; 5 ms leaves
/// room and stays far below the stalls the rule is for.
const PROFILER_STARTUP_NS: i64 = 5_000_000;

/// First calls (module loading, library and handle start-up, JIT) holding at least half the
/// idle time make the window a cold start: that idle time is paid once, so the steady state
/// cannot be judged from it.
const COLD_SHARE: f64 = 0.5;

/// A one-off stall's named cause (an annotation, an operator, a call) recurs when the other
/// gaps hold at least 1/this of its time: then it is the loop's.
const RECURS_SHARE: i64 = 4;

/// One gap holding at least half of all idle time (gaps and short idle) is a one-off stall:
/// it alone decides the picture, and a rate (launches, syncs per step) cannot explain it.
const STALL_SHARE: f64 = 0.5;

/// ... when it is also at least a quarter of the window: a 2 ms hole in a busy 20 ms window is
/// not what bounds the run.
const STALL_WINDOW_SHARE: f64 = 0.25;

/// A gap whose largest category holds less than this share of its time is "mixed".
const MIXED_BELOW: f64 = 1.0 / 3.0;

/// How untraced host time starts in a trace without CPU-side data; what follows, in
/// brackets, is the capture reader's note on what is missing.
const NO_CPU_DATA: &str = "host code outside CUDA calls";

/// Category of host activity during GPU idle time; the advice depends on it and on the leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CauseKind {
    /// Blocked in a synchronising call (`cudaStreamSynchronize` under `aten::item` ...).
    HostSync,
    /// In an allocator call (`cudaMalloc`, `cudaFree`, `hipFree` ...).
    Allocator,
    /// Module loading, JIT, or the first call of a kernel or operator.
    ModuleLoad,
    /// cuDNN autotuning inside a convolution (`cudnn.benchmark=True` on a new shape).
    Autotune,
    /// Launch calls, operator dispatch and launch latency.
    LaunchOverhead,
    /// A CPU operator that launched no GPU work (CPU tensor compute on the training thread).
    CpuOp,
    /// A Python frame: user code or a builtin such as `time.sleep`.
    Python,
    /// The DataLoader (`__next__` on the training thread).
    DataLoading,
    /// An OS call (sleep, poll, futex, read), from Nsight Systems' OS runtime trace.
    OsCall,
    /// Time no span covers, named by the CPU samples taken in it (Nsight Systems `-s cpu`).
    Sampled,
    /// Time no span covers.
    Untraced,
    /// The next GPU operation was already launched: the GPU waited on a dependency.
    GpuWait,
    /// No host thread is known for the gap.
    Unknown,
    /// The hole Kineto leaves at the start of the first profiled step while the profiler
    /// starts (1-4 ms on every capture we have): not the program's cost, so not in the impact.
    ProfilerStartup,
    /// The profiler's own work held the launching thread (CUPTI requesting or flushing its
    /// activity buffers, 0.3-5 ms each in our captures, the GPU idle throughout): not the
    /// program's cost, so not in the impact.
    ProfilerWork,
    /// The host was capturing a CUDA/HIP graph: launches are recorded, not run, once, at
    /// warm-up; not the steady state's cost, so not in the impact.
    GraphCapture,
    /// torch.compile compiling (Dynamo, AOTAutograd, Inductor) or Inductor autotuning a new
    /// shape: once at start, again on every recompilation.
    Compile,
    /// A garbage collection (`gc.collect()`).
    GarbageCollection,
    /// Another thread of the process ran Python through the gap while the launching thread
    /// waited: the GIL (inferred from Python frames in Kineto; from the GIL's condition wait
    /// in Nsight Systems' OS runtime trace).
    Gil,
}

impl CauseKind {
    /// Every category, in order.
    pub const ALL: [CauseKind; 19] = [
        CauseKind::HostSync,
        CauseKind::Allocator,
        CauseKind::ModuleLoad,
        CauseKind::Autotune,
        CauseKind::LaunchOverhead,
        CauseKind::CpuOp,
        CauseKind::Python,
        CauseKind::DataLoading,
        CauseKind::OsCall,
        CauseKind::Sampled,
        CauseKind::Untraced,
        CauseKind::GpuWait,
        CauseKind::Unknown,
        CauseKind::ProfilerStartup,
        CauseKind::ProfilerWork,
        CauseKind::GraphCapture,
        CauseKind::Compile,
        CauseKind::GarbageCollection,
        CauseKind::Gil,
    ];

    /// The category of a stable id ([`CauseKind::id`]).
    pub fn from_id(id: &str) -> Option<CauseKind> {
        CauseKind::ALL.into_iter().find(|k| k.id() == id)
    }

    /// Short name for summaries.
    pub fn label(self) -> &'static str {
        match self {
            CauseKind::HostSync => "host synchronisation",
            CauseKind::Allocator => "allocator calls",
            CauseKind::ModuleLoad => "module loading / first calls",
            CauseKind::Autotune => "cuDNN autotuning",
            CauseKind::LaunchOverhead => "launch overhead",
            CauseKind::CpuOp => "CPU operators",
            CauseKind::Python => "Python",
            CauseKind::DataLoading => "data loading",
            CauseKind::OsCall => "OS calls",
            CauseKind::Sampled => "host code (CPU samples)",
            CauseKind::Untraced => "untraced host code",
            CauseKind::GpuWait => "GPU-side waits",
            CauseKind::Unknown => "unknown host activity",
            CauseKind::ProfilerStartup => "profiler start-up",
            CauseKind::ProfilerWork => "the profiler's own work",
            CauseKind::GraphCapture => "CUDA-graph capture",
            CauseKind::Compile => "torch.compile compilation",
            CauseKind::GarbageCollection => "garbage collection",
            CauseKind::Gil => "GIL held by another thread",
        }
    }

    /// Whether gaps of this kind are not the program's steady-state cost: a one-time phase
    /// (profiler start-up, graph capture) or the profiler's own work.
    pub fn is_warm_up(self) -> bool {
        matches!(
            self,
            CauseKind::ProfilerStartup | CauseKind::ProfilerWork | CauseKind::GraphCapture
        )
    }

    /// Stable snake_case id, for JSON metrics and tests.
    pub fn id(self) -> &'static str {
        match self {
            CauseKind::HostSync => "host_sync",
            CauseKind::Allocator => "allocator",
            CauseKind::ModuleLoad => "module_loading",
            CauseKind::Autotune => "cudnn_autotune",
            CauseKind::LaunchOverhead => "launch_overhead",
            CauseKind::CpuOp => "cpu_op",
            CauseKind::Python => "python",
            CauseKind::DataLoading => "data_loading",
            CauseKind::OsCall => "os_call",
            CauseKind::Sampled => "sampled",
            CauseKind::Untraced => "untraced",
            CauseKind::GpuWait => "gpu_wait",
            CauseKind::Unknown => "unknown",
            CauseKind::ProfilerStartup => "profiler_startup",
            CauseKind::ProfilerWork => "profiler_work",
            CauseKind::GraphCapture => "graph_capture",
            CauseKind::Compile => "compile",
            CauseKind::GarbageCollection => "garbage_collection",
            CauseKind::Gil => "gil",
        }
    }
}

/// A text many gaps' parts share, behind one pointer: a trace's tens of thousands of gaps
/// hold a quarter of a million parts (the 1 GB benchmark trace), and a thin pointer keeps a
/// part at 32 bytes where `Arc<str>`'s two words made it 48.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharedText(Arc<Box<str>>);

impl SharedText {
    /// Where the text lies: equal texts handed out by one [`attribute::Memo`] lie in one
    /// place.
    pub fn addr(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

impl std::ops::Deref for SharedText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SharedText {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for SharedText {
    fn from(s: String) -> Self {
        SharedText(Arc::new(s.into_boxed_str()))
    }
}

impl From<&str> for SharedText {
    fn from(s: &str) -> Self {
        SharedText(Arc::new(s.into()))
    }
}

/// Measured host time of one category and leaf inside a gap.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// Category.
    pub kind: CauseKind,
    /// What exactly: the call, operator or frame (`aten::item (cudaStreamSynchronize)`,
    /// `aten::upsample_bilinear2d on CPU`, `<built-in function sleep>`). Shared: a trace's
    /// tens of thousands of gaps repeat a few hundred leaves and frames.
    pub leaf: SharedText,
    /// The user's Python frame around it, when the trace has stacks.
    pub frame: Option<SharedText>,
    /// Time, ns.
    pub ns: i64,
}

/// One gap with its attribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// The category holding most of the gap's time.
    pub kind: CauseKind,
    /// Whether no category holds a third of the gap.
    pub mixed: bool,
    /// The cause in words, with its measured share.
    pub label: String,
    /// The CPU operator responsible, when one.
    pub cpu_op: Option<String>,
    /// The user's Python frame, when the trace has stacks.
    pub frame: Option<String>,
    /// The GPU operation that ended the gap (index into the trace's GPU ops), when one.
    pub next_op: Option<u32>,
    /// The synchronising call that returned just before the gap and drained the queue.
    pub drained_by: Option<String>,
    /// The innermost user annotation (`record_function`, NVTX range; not a step marker) on
    /// the launching thread at the gap's middle: the region of the program it fell in.
    pub region: Option<String>,
    /// The thread that ran Python through the gap while the launching thread waited (GIL
    /// contention), when one did.
    pub gil_holder: Option<String>,
    /// Measured time by category and leaf, largest first; adds up to the gap.
    pub parts: Vec<Part>,
}

/// Idle accounting of one device over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceIdle {
    /// Device index.
    pub device: i32,
    /// Busy time (union of all streams), ns.
    pub busy_ns: i64,
    /// Gaps at or above the threshold, in time order.
    pub gaps: Vec<Gap>,
    /// Idle time in gaps below the threshold, ns.
    pub short_idle_ns: i64,
    /// Number of gaps below the threshold.
    pub short_count: u64,
    /// Median kernel duration in the window, ns (0 without kernels).
    pub median_kernel_ns: i64,
}

impl DeviceIdle {
    /// Idle time in gaps at or above the threshold, less the profiler's start-up hole.
    pub fn gap_ns(&self) -> i64 {
        self.gaps
            .iter()
            .filter(|g| !g.kind.is_warm_up())
            .map(|g| g.end - g.start)
            .sum()
    }

    /// Idle time that is not the program's steady state (the profiler's start-up hole, its own
    /// buffer work, graph capture), ns.
    pub fn warm_up_ns(&self) -> i64 {
        self.gaps
            .iter()
            .filter(|g| g.kind.is_warm_up())
            .map(|g| g.end - g.start)
            .sum()
    }

    /// The idle time left out as not the program's steady state, by kind, in words ("the
    /// profiler's start-up (2.9 ms) and the profiler's own buffer work (2.2 ms)"); None
    /// without any.
    pub fn warm_up_words(&self) -> Option<String> {
        let parts: Vec<String> = [
            (CauseKind::ProfilerStartup, "the profiler's start-up"),
            (CauseKind::ProfilerWork, "the profiler's own buffer work"),
            (CauseKind::GraphCapture, "CUDA-graph capture"),
        ]
        .into_iter()
        .filter_map(|(k, what)| {
            let ns: i64 = self
                .gaps
                .iter()
                .filter(|g| g.kind == k)
                .map(|g| g.end - g.start)
                .sum();
            (ns > 0).then(|| format!("{what} ({})", crate::finding::fmt_ns(ns)))
        })
        .collect();
        (!parts.is_empty()).then(|| parts.join(" and "))
    }

    /// Gaps that cost the program time (all but the profiler's start-up hole).
    pub fn costly_gaps(&self) -> impl Iterator<Item = &Gap> {
        self.gaps.iter().filter(|g| !g.kind.is_warm_up())
    }

    /// A launch-bound run: kernels so short that the idle time between them, in gaps below
    /// the threshold, is itself a cost of at least 10% of the window.
    pub fn launch_bound(&self, window_ns: i64) -> bool {
        self.median_kernel_ns > 0
            && self.median_kernel_ns < 20_000
            && self.short_idle_ns * 10 >= window_ns
    }

    /// All idle time of the window: gaps that cost time and short idle.
    pub fn idle_ns(&self) -> i64 {
        self.gap_ns() + self.short_idle_ns
    }

    /// Time in first calls (module loading, library start-up, JIT) when it holds at least
    /// half the idle time: the window is a cold start. None otherwise.
    pub fn cold_start_ns(&self) -> Option<i64> {
        let first_calls: i64 = self
            .costly_gaps()
            .flat_map(|g| &g.parts)
            .filter(|p| p.kind == CauseKind::ModuleLoad)
            .map(|p| p.ns)
            .sum();
        (self.idle_ns() > 0 && first_calls as f64 >= COLD_SHARE * self.idle_ns() as f64)
            .then_some(first_calls)
    }

    /// The one gap that holds at least half the idle time and a quarter of the window
    /// (`window_ns` long), when there is one.
    pub fn one_off_stall(&self, window_ns: i64) -> Option<&Gap> {
        let g = self.costly_gaps().max_by(|a, b| {
            (a.end - a.start)
                .cmp(&(b.end - b.start))
                .then(b.start.cmp(&a.start))
        })?;
        let len = (g.end - g.start) as f64;
        // A cause that holds the other gaps too is the loop's, not a one-off: the first
        // step's gap is the longest when it adds first calls to what every step does (a CPU
        // `randn` per step whose first call also warms up), and a wait that varies step to
        // step (a DataLoader's `__next__` taking 17 ms in one step and 44 ms in the next, on a
        // field trace) recurs at a fraction of its longest.
        let main = g.parts.iter().max_by_key(|p| p.ns)?;
        let elsewhere: i64 = self
            .costly_gaps()
            .filter(|o| o.start != g.start)
            .flat_map(|o| &o.parts)
            .filter(|p| p.kind == main.kind && p.leaf == main.leaf)
            .map(|p| p.ns)
            .sum();
        // Untraced host time has no name to match across gaps (every stretch of it is "host
        // code outside CUDA calls"): it recurs only when the others hold half as much.
        let share = if matches!(main.kind, CauseKind::Untraced | CauseKind::Unknown) {
            2
        } else {
            RECURS_SHARE
        };
        let recurs = share * elsewhere >= main.ns;
        (self.idle_ns() > 0
            && !recurs
            && len >= STALL_SHARE * self.idle_ns() as f64
            && len >= STALL_WINDOW_SHARE * window_ns as f64)
            .then_some(g)
    }

    /// Measured gap time by category, largest first.
    pub fn by_kind(&self) -> Vec<(CauseKind, i64)> {
        let mut m: FxHashMap<CauseKind, i64> = FxHashMap::default();
        for p in self.costly_gaps().flat_map(|g| &g.parts) {
            *m.entry(p.kind).or_default() += p.ns;
        }
        let mut v: Vec<(CauseKind, i64)> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }
}

/// Whether gap `g` opens the window: it begins within a hundredth of its own length of the
/// window's start, and the host had not seen the queue empty (a sync that returned just before
/// the gap proves nothing was queued then: a field capture's 616 s of host work after a checked
/// cudaMemcpy, 0.5 s into the window, was no first call and no work queued before the capture).
fn opens_window(w: &crate::window::Window, g: &Gap) -> bool {
    g.start <= w.start + (g.end - g.start) / 100 && g.drained_by.is_none()
}

/// Where a gap lies, in words: "at the start of the window" or "at +12.30 ms" / "at -3.00 ms".
pub fn gap_position(w: &crate::window::Window, g: &Gap) -> String {
    if opens_window(w, g) {
        return "at the start of the window".into();
    }
    let ms = w.offset_ms(g.start);
    if ms < 0.0 {
        format!("at -{:.2} ms", -ms)
    } else {
        format!("at +{ms:.2} ms")
    }
}

/// Whether one-off stall `g` is paid once, not by the program's steps: it opens a window of
/// `steps` profiled steps, at least two, so the later steps show the stall does not come back
/// (a stall is a one-off only when it does not recur, [`DeviceIdle::one_off_stall`]), and
/// what it measured is a first call, a wait on work queued before the capture began, or host
/// time the trace does not break down. A window of one step cannot tell a start-up from what
/// every step pays (a server's step that waits behind another stream's event each time).
pub fn paid_once(w: &crate::window::Window, g: &Gap, steps: usize) -> bool {
    steps >= 2
        && opens_window(w, g)
        && matches!(
            g.kind,
            CauseKind::GpuWait | CauseKind::ModuleLoad | CauseKind::Untraced | CauseKind::Unknown
        )
}

/// What a one-off stall most likely is, from its measured cause and where it lies, in words
/// that end with what to do.
pub fn stall_meaning(w: &crate::window::Window, g: &Gap, pytorch: bool) -> &'static str {
    let at_start = opens_window(w, g);
    match g.kind {
        CauseKind::GpuWait | CauseKind::ModuleLoad | CauseKind::Untraced | CauseKind::Unknown
            if at_start && !pytorch =>
        {
            "A stall at the start of a capture is a first call or a wait on work queued before the capture began, not a launch-rate problem: capture past it (a warm-up iteration first, then cudaProfilerStart/Stop with nsys --capture-range=cudaProfilerApi) and see whether it recurs"
        }
        CauseKind::GpuWait | CauseKind::ModuleLoad | CauseKind::Untraced | CauseKind::Unknown
            if at_start =>
        {
            "A stall at the start of a capture is a first call or a wait on work queued before the capture began, not a launch-rate problem: profile past it with torch.profiler.schedule(wait=1, warmup=2, active=3) and see whether it recurs"
        }
        CauseKind::ModuleLoad => {
            "A first call in the middle of the run loads code for something new (a new shape, a new kernel): warm every path up before measuring"
        }
        CauseKind::Untraced | CauseKind::Unknown => {
            "The trace does not record what the host did then: capture CPU-side data (Kineto with with_stack=True; nsys with -t osrt and -s cpu) to see it"
        }
        CauseKind::GpuWait => {
            "The GPU had work queued and waited on something the trace does not show (an event, another stream, another process): look at what the queued work depended on"
        }
        _ => {
            "Work that happens once in the window (a checkpoint, an evaluation, a collection) costs this once per period: move it off the step or run it less often"
        }
    }
}

/// The idle stretches between busy intervals: the short ones summed, the long ones (the
/// gaps) listed in time order.
struct Holes {
    threshold: i64,
    short_idle_ns: i64,
    short_count: u64,
    long: Vec<(i64, i64)>,
}

impl Holes {
    fn add(&mut self, s: i64, e: i64) {
        let d = e - s;
        if d <= 0 {
            return;
        }
        if d < self.threshold {
            self.short_idle_ns += d;
            self.short_count += 1;
        } else {
            self.long.push((s, e));
        }
    }
}

/// Computes busy time, gaps and their causes for one device.
pub fn analyse_device(cx: &Scope, device: i32) -> DeviceIdle {
    let trace = cx.trace;
    let w = &cx.window;
    // Edge gaps count only when the window is not itself cut to the GPU activity.
    let edges = matches!(w.source, WindowSource::Steps { .. } | WindowSource::User);
    // The busy intervals are walked, not listed: an export's millions of them, and of the
    // short gaps between them, were lists of fresh pages.
    let mut holes = Holes {
        threshold: cx.config.gap_threshold_ns.max(1),
        short_idle_ns: 0,
        short_count: 0,
        long: Vec::new(),
    };
    let (mut busy_ns, mut last) = (0i64, None::<(i64, i64)>);
    for_each_busy(trace, device, w, |(s, e)| {
        busy_ns += e - s;
        match last {
            Some((_, end)) => holes.add(end, s),
            None if edges => holes.add(w.start, s),
            None => {}
        }
        last = Some((s, e));
    });
    if let Some((_, end)) = last
        && edges
    {
        holes.add(end, w.end);
    }
    let attr = Attributor::new(trace, cx.pageable_launches());
    let Holes {
        short_idle_ns,
        short_count,
        long,
        ..
    } = holes;
    // Gaps are independent: classify them in parallel (collect keeps their order).
    use rayon::prelude::*;
    let captures = cx.graph_captures();
    let gaps: Vec<Gap> = long
        .par_iter()
        .map_init(attribute::Memo::default, |memo, &(s, e)| {
            let gap = attr.classify(device, s, e, memo);
            // A gap mostly inside a graph capture: the host records launches, none run.
            if 2 * captures.overlap(s, e) >= e - s {
                let leaf = format!(
                    "capturing a CUDA/HIP graph ({} launches recorded, not run)",
                    captures.launches
                );
                return held_whole(gap, CauseKind::GraphCapture, leaf.into());
            }
            if s == w.start
                && e - s <= PROFILER_STARTUP_NS
                && matches!(w.source, WindowSource::Steps { .. })
                && trace.meta.capture.startup_hole
            {
                let leaf = "the profiler starting at the first profiled step";
                return held_whole(gap, CauseKind::ProfilerStartup, leaf.into());
            }
            // A later gap mostly inside the profiler's own work (a CUPTI buffer request holding the
            // launching thread): the capture's cost, not the program's.
            if 2 * profiler_work_in(&trace.meta.capture.profiler_work, s, e) >= e - s {
                let leaf = "the profiler requesting or flushing its activity buffers (CUPTI)";
                return held_whole(gap, CauseKind::ProfilerWork, leaf.into());
            }
            gap
        })
        .collect();
    let mut kernels: Vec<i64> = trace
        .device_ops(device)
        .iter()
        .map(|&i| &trace.gpu_ops[i as usize])
        .filter(|o| {
            o.kind == tracehound_parsers::GpuOpKind::Kernel && o.start >= w.start && o.start < w.end
        })
        .map(|o| o.dur())
        .collect();
    let median_kernel_ns = if kernels.is_empty() {
        0
    } else {
        let mid = kernels.len() / 2;
        *kernels.select_nth_unstable(mid).1
    };
    DeviceIdle {
        device,
        busy_ns,
        gaps,
        short_idle_ns,
        short_count,
        median_kernel_ns,
    }
}

/// Gap `gap` given whole to one cause, whatever the host did in it: a phase that is not the
/// program's steady state (graph capture, the profiler's start-up or its own work).
fn held_whole(gap: Gap, kind: CauseKind, leaf: SharedText) -> Gap {
    let ns = gap.end - gap.start;
    finish_gap(Gap {
        parts: vec![Part {
            kind,
            leaf,
            frame: None,
            ns,
        }],
        ..gap
    })
}

/// How much of `[s, e)` the profiler's own work covers, ns (`work` in time order, as the
/// capture lists it).
fn profiler_work_in(work: &[(i64, i64)], s: i64, e: i64) -> i64 {
    // From the first: an early request may outlast later ones (a capture holds a handful).
    let mut covered = 0;
    let mut reached = s;
    for &(a, b) in work.iter().take_while(|w| w.0 < e) {
        let (a, b) = (a.max(reached), b.min(e));
        if b > a {
            covered += b - a;
            reached = b;
        }
    }
    covered
}

/// Sums parts of the same category, leaf and frame; largest first. The parts' texts come
/// from one [`attribute::Memo`], which hands out one shared copy of each text: equal texts
/// lie in one place, so parts are grouped by where their texts lie, not by comparing them.
fn merge_parts(mut parts: Vec<Part>) -> Vec<Part> {
    let at = |p: &Part| {
        (
            p.kind,
            p.leaf.addr(),
            p.frame.as_ref().map(SharedText::addr),
        )
    };
    // Unstable: parts with equal keys are summed into one, so their order cannot show.
    parts.sort_unstable_by_key(at);
    // Summed in place: a list built part by part grew by reallocation, for every gap.
    parts.dedup_by(|p, kept| {
        let same = at(kept) == at(p);
        if same {
            kept.ns += p.ns;
        }
        same
    });
    debug_assert!(
        parts
            .iter()
            .enumerate()
            .all(|(i, x)| parts[i + 1..]
                .iter()
                .all(|y| (x.kind, &x.leaf, &x.frame) != (y.kind, &y.leaf, &y.frame))),
        "equal texts from more than one place"
    );
    // The keys are unique now, so the order is total.
    parts.sort_unstable_by(|x, y| {
        y.ns.cmp(&x.ns)
            .then(x.kind.cmp(&y.kind))
            .then(x.leaf.cmp(&y.leaf))
            .then(x.frame.cmp(&y.frame))
    });
    // Kept with the gap for the whole analysis (tens of thousands of gaps).
    parts.shrink_to_fit();
    parts
}

/// Sets a gap's cause, label, operator and frame from its measured parts.
fn finish_gap(mut gap: Gap) -> Gap {
    let len = (gap.end - gap.start).max(1);
    let mut kinds: FxHashMap<CauseKind, i64> = FxHashMap::default();
    for p in &gap.parts {
        *kinds.entry(p.kind).or_default() += p.ns;
    }
    let mut kinds: Vec<(CauseKind, i64)> = kinds.into_iter().collect();
    kinds.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    let Some(&(top, top_ns)) = kinds.first() else {
        gap.label = "no host activity recorded".into();
        return gap;
    };
    gap.kind = top;
    gap.mixed = (top_ns as f64) < MIXED_BELOW * len as f64;
    let pct = |ns: i64| 100.0 * ns as f64 / len as f64;
    let lead = |k: CauseKind| gap.parts.iter().find(|p| p.kind == k);
    let describe = |k: CauseKind, ns: i64| match lead(k) {
        Some(p) => format!("{}: {} {:.0}%", k.label(), p.leaf, pct(ns)),
        None => format!("{} {:.0}%", k.label(), pct(ns)),
    };
    gap.label = if gap.mixed {
        let second = kinds
            .get(1)
            .map(|&(k, ns)| format!(", {}", describe(k, ns)))
            .unwrap_or_default();
        format!("mixed: {}{second}", describe(top, top_ns))
    } else {
        describe(top, top_ns)
    };
    if let Some(d) = &gap.drained_by
        && (top != CauseKind::HostSync || lead(top).is_some_and(|p| *p.leaf != **d))
    {
        gap.label
            .push_str(&format!(" — queue drained by {d} just before"));
    }
    if let Some(p) = lead(top) {
        if p.frame.is_some() {
            gap.frame = p.frame.as_deref().map(str::to_string);
        }
        if matches!(
            top,
            CauseKind::CpuOp | CauseKind::HostSync | CauseKind::Autotune | CauseKind::Allocator
        ) {
            gap.cpu_op = Some(p.leaf.to_string());
        }
    }
    gap
}

#[cfg(test)]
mod tests {
    use super::profiler_work_in;

    #[test]
    fn profiler_work_is_counted_once_where_it_covers_a_gap() {
        let work = [(0, 10), (20, 40), (30, 50), (60, 70)];
        // Before, inside, across, and after the recorded work.
        assert_eq!(profiler_work_in(&work, -10, 0), 0);
        assert_eq!(profiler_work_in(&work, 2, 8), 6);
        assert_eq!(profiler_work_in(&work, 5, 25), 5 + 5);
        // Two requests that overlap each other count their union.
        assert_eq!(profiler_work_in(&work, 15, 55), 30);
        assert_eq!(profiler_work_in(&work, 45, 65), 5 + 5);
        assert_eq!(profiler_work_in(&work, 70, 90), 0);
        assert_eq!(profiler_work_in(&[], 0, 100), 0);
        // A long request that began before a shorter one still covers past it.
        assert_eq!(profiler_work_in(&[(0, 100), (10, 20)], 50, 60), 10);
    }
}
