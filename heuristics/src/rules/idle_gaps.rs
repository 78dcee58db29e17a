//! GPU idle gaps: intervals of at least `gap_threshold_ns` (100 µs) inside the analysed
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

use super::{Ctx, Rule, api_name, is_sync_call, short_name, span_name};
use crate::finding::{Confidence, Finding, Instance, Row, Severity, fmt_ns, metrics};
use crate::window::{WindowSource, busy_intervals, total};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::{Mutex, OnceLock};
use tracehound_parsers::{HostKind, NONE, Trace, activity::ThreadKey};

/// The rule.
pub struct IdleGaps;

/// A launch or runtime call this long is not launch overhead: the first call of a kernel
/// loads its module (lazy loading, `CUDA_MODULE_LOADING=LAZY`), which takes milliseconds,
/// while a launch takes 2-20 µs. 1 ms sits two orders of magnitude above a launch and below
/// every module load seen on H100/H200 captures (1.8-34 ms).
const SLOW_CALL_NS: i64 = 1_000_000;

/// From a launch call to its kernel's start on an idle GPU takes 4-20 µs on the H100/H200
/// captures; time beyond 50 µs with the work already queued is the GPU waiting on something
/// else (a dependency, an event, another stream), not launch overhead.
const LAUNCH_LATENCY_NS: i64 = 50_000;

/// A sync that returned at most this long before the gap began drained the queue: the host
/// wakes a few µs after the GPU finishes; 20 µs covers the wake-up and the return path.
const DRAIN_SLACK_NS: i64 = 20_000;

/// The leading gap of a Kineto capture up to this long is the profiler starting up: every
/// capture we have opens with a 1-4 ms hole; 5 ms leaves room and stays far below the stalls
/// the rule is for.
const PROFILER_STARTUP_NS: i64 = 5_000_000;

/// A gap whose largest category holds less than this share of its time is "mixed".
const MIXED_BELOW: f64 = 1.0 / 3.0;

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
}

impl CauseKind {
    /// Every category, in order.
    pub const ALL: [CauseKind; 14] = [
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
        }
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
        }
    }
}

/// Measured host time of one category and leaf inside a gap.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// Category.
    pub kind: CauseKind,
    /// What exactly: the call, operator or frame (`aten::item (cudaStreamSynchronize)`,
    /// `aten::upsample_bilinear2d on CPU`, `<built-in function sleep>`).
    pub leaf: String,
    /// The user's Python frame around it, when the trace has stacks.
    pub frame: Option<String>,
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
            .filter(|g| g.kind != CauseKind::ProfilerStartup)
            .map(|g| g.end - g.start)
            .sum()
    }

    /// Gaps that cost the program time (all but the profiler's start-up hole).
    pub fn costly_gaps(&self) -> impl Iterator<Item = &Gap> {
        self.gaps
            .iter()
            .filter(|g| g.kind != CauseKind::ProfilerStartup)
    }

    /// A launch-bound run: kernels so short that the idle time between them, in gaps below
    /// the threshold, is itself a cost of at least 10% of the window.
    pub fn launch_bound(&self, window_ns: i64) -> bool {
        self.median_kernel_ns > 0
            && self.median_kernel_ns < 20_000
            && self.short_idle_ns * 10 >= window_ns
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

/// Computes busy time, gaps and their causes for one device.
pub fn analyse_device(cx: &Ctx, device: i32) -> DeviceIdle {
    let trace = cx.trace;
    let w = &cx.window;
    let busy = busy_intervals(trace, device, w);
    let threshold = cx.config.gap_threshold_ns.max(1);
    let mut raw: Vec<(i64, i64)> = Vec::new();
    // Edge gaps count only when the window is not itself cut to the GPU activity.
    let edges = matches!(w.source, WindowSource::Steps { .. } | WindowSource::User);
    if let (Some(first), Some(last)) = (busy.first(), busy.last()) {
        if edges {
            raw.push((w.start, first.0));
        }
        raw.extend(busy.windows(2).map(|p| (p[0].1, p[1].0)));
        if edges {
            raw.push((last.1, w.end));
        }
    }
    let attr = Attributor::new(trace);
    let (mut short_idle_ns, mut short_count) = (0, 0);
    let mut long: Vec<(i64, i64)> = Vec::new();
    for (s, e) in raw {
        let d = e - s;
        if d <= 0 {
            continue;
        }
        if d < threshold {
            short_idle_ns += d;
            short_count += 1;
        } else {
            long.push((s, e));
        }
    }
    // Gaps are independent: classify them in parallel (collect keeps their order).
    use rayon::prelude::*;
    let gaps: Vec<Gap> = long
        .par_iter()
        .map(|&(s, e)| {
            let gap = attr.classify(device, s, e);
            if s == w.start
                && e - s <= PROFILER_STARTUP_NS
                && matches!(w.source, WindowSource::Steps { .. })
                && trace.meta.format == Some(tracehound_parsers::SourceFormat::Kineto)
            {
                return finish_gap(Gap {
                    parts: vec![Part {
                        kind: CauseKind::ProfilerStartup,
                        leaf: "the profiler starting at the first profiled step".into(),
                        frame: None,
                        ns: e - s,
                    }],
                    ..gap
                });
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
        busy_ns: total(&busy),
        gaps,
        short_idle_ns,
        short_count,
        median_kernel_ns,
    }
}

/// Allocator entry points of CUDA, the driver and HIP.
fn is_alloc_call(n: &str) -> bool {
    matches!(
        n,
        "cudaMalloc"
            | "cudaFree"
            | "cudaMallocAsync"
            | "cudaFreeAsync"
            | "cudaMallocHost"
            | "cudaFreeHost"
            | "cudaHostAlloc"
            | "cudaMallocManaged"
            | "cuMemAlloc"
            | "cuMemFree"
            | "cuMemCreate"
            | "cuMemRelease"
            | "cuMemMap"
            | "cuMemUnmap"
            | "cuMemAddressReserve"
            | "cuMemAddressFree"
            | "hipMalloc"
            | "hipFree"
            | "hipHostMalloc"
            | "hipHostFree"
            | "hipExtMallocWithFlags"
    )
}

/// Module loading and JIT compilation.
fn is_module_load_call(n: &str) -> bool {
    n.starts_with("cuModuleLoad")
        || n.starts_with("cuLibraryLoad")
        || n.starts_with("nvrtc")
        || n.starts_with("hipModuleLoad")
        || n.starts_with("hiprtc")
        || n == "cuModuleGetFunction"
        || n == "cuLibraryGetKernel"
        || n == "cudaGetFuncBySymbol"
}

/// The DataLoader, as `record_function` names it or as a Python frame.
fn is_loader(name: &str) -> bool {
    name.contains("DataLoader") || name.contains("dataloader.py")
}

/// Convolution operators (cuDNN / MIOpen autotune inside them).
fn is_conv(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("conv") && !n.contains("convert")
}

/// Event, stream and device synchronisation: what cuDNN's benchmark mode does between
/// trial kernels, and never inside a tuned convolution.
fn is_timing_sync(n: &str) -> bool {
    n.ends_with("EventSynchronize")
        || n.ends_with("StreamSynchronize")
        || n.ends_with("DeviceSynchronize")
}

/// A sampled C++ symbol as a reader wants it: the ATen kernel a `function_ref` callback or a
/// TensorIterator loop runs (`at::native::cpu_upsample_linear`), else the name without its
/// template and argument lists.
fn sampled_symbol(sym: &str) -> String {
    if sym.is_empty() {
        return "(unnamed function)".into();
    }
    if let Some(k) = sym.find("at::native::") {
        let rest = sym[k..].replace("(anonymous namespace)::", "");
        let end = rest.find(['<', '(', ' ', ',']).unwrap_or(rest.len());
        return rest[..end].to_string();
    }
    short_name(sym, 80)
}

/// `<built-in method tensor of type object at 0x7f..>` -> `built-in method tensor`.
fn clean_frame(name: &str) -> String {
    let n = name.trim();
    if let Some(inner) = n.strip_prefix('<').and_then(|x| x.strip_suffix('>')) {
        let cut = inner.find(" of ").unwrap_or(inner.len());
        return inner[..cut].to_string();
    }
    n.to_string()
}

/// What a measured slice of a gap was, as a key: ids and borrowed names, so that a gap's
/// hundreds of slices merge without building a string each; the words come after merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Leaf {
    /// No span (untraced).
    Untraced,
    /// The outermost DataLoader span's name.
    Loader(u32),
    /// An autotuned convolution operator (span index).
    Conv(u32),
    /// A runtime call (name) inside an operator (name, 0 for none).
    CallIn(u32, u32),
    /// A millisecond-long launch or runtime call (name) inside an operator.
    FirstCallIn(u32, u32),
    /// An operator (name, 0 for none) and the synchronising call (name) under it.
    OpCall(u32, u32),
    /// A launch or runtime call (name).
    Call(u32),
    /// The first call of an operator (name).
    FirstOp(u32),
    /// Milliseconds of host time in an operator that launches GPU work.
    HostWork(u32),
    /// An operator that launched no GPU work.
    OnCpu(u32),
    /// Operator dispatch.
    Dispatch,
    /// A Python frame (name).
    Frame(u32),
    /// A span named as it is (an OS call).
    Name(u32),
    /// A user annotation with no finer span inside.
    Inside(u32),
    /// From the launch call to the kernel's start.
    LaunchLatency,
    /// Launched, not started.
    Queued,
    /// Launch time after a sync that drained the queue: the sync's cost.
    Drained,
    /// Untraced time where CPU samples name a function (symbol, module).
    Sampled(u32, u32),
}

/// A measured slice before its words are spelled out.
struct Raw<'t> {
    kind: CauseKind,
    leaf: Leaf,
    frame: Option<&'t str>,
    ns: i64,
}

/// Name flags: the DataLoader, a convolution, a user's Python frame.
const LOADER: u8 = 1;
const CONV: u8 = 2;
const USER_FRAME: u8 = 4;
/// The name's flags have been worked out.
const KNOWN: u8 = 0x80;

/// What encloses a span.
#[derive(Debug, Clone, Copy)]
struct Around {
    /// The outermost DataLoader span.
    loader: u32,
    /// The outermost convolution operator.
    conv: u32,
    /// The outermost CPU operator.
    op: u32,
    /// The innermost user Python frame.
    frame: u32,
}

struct Attributor<'t> {
    trace: &'t Trace,
    /// The thread standing in for a gap without a launcher, found on first need.
    main_thread: OnceLock<Option<ThreadKey>>,
    sync_corr: FxHashSet<u64>,
    /// Per host span, one bit: it or a span inside it launched GPU work.
    launched: Vec<u64>,
    /// Whether the trace records CPU operators or Python frames.
    cpu_data: bool,
    /// What untraced time is called when the trace has no CPU-side data, by format.
    no_cpu_leaf: &'static str,
    /// Whether the trace shows module loading anywhere (a module-load call, or a launch
    /// or runtime call that took milliseconds): only then is host time in the first call of
    /// an operator read as first-call cost. Without it, such time at the start of a Kineto
    /// capture is the profiler starting up.
    loads_modules: OnceLock<bool>,
    /// Convolution operator -> whether it synchronised (autotuned), computed on demand.
    conv_tuned: Mutex<FxHashMap<u32, bool>>,
    /// (thread, name) -> start of the first CPU operator of that name, built on demand.
    first_op: OnceLock<FxHashMap<(ThreadKey, u32), i64>>,
    /// Per string id: what a span of that name is ([`LOADER`], [`CONV`], [`USER_FRAME`]),
    /// decided once per name instead of once per span visited.
    flags: Vec<std::sync::atomic::AtomicU8>,
    /// Whether any span carries an old-style `Call stack` (the frame fallback).
    call_stacks: OnceLock<bool>,
}

impl<'t> Attributor<'t> {
    fn new(trace: &'t Trace) -> Self {
        // Copies to or from pageable memory block the host like a synchronize.
        let sync_corr = trace
            .gpu_ops
            .iter()
            .filter(|o| o.is_pageable_copy())
            .map(|o| o.correlation)
            .filter(|&c| c != 0)
            .collect();
        // Mark each operator that launched GPU work and its ancestors, stopping at the first
        // ancestor already marked: every span is marked at most once.
        let mut launched = vec![0u64; trace.host_spans.len().div_ceil(64)];
        for &c in trace.index.op_cpu_op.iter().filter(|&&c| c != NONE) {
            for k in std::iter::once(c).chain(trace.ancestors(c)) {
                let (w, b) = (k as usize / 64, 1u64 << (k % 64));
                if launched.get(w).is_none_or(|x| x & b != 0) {
                    break;
                }
                launched[w] |= b;
            }
        }
        // OS runtime calls alone say where the host waited, not what it computed.
        let cpu_data = trace
            .host_spans
            .iter()
            .any(|s| matches!(s.kind, HostKind::CpuOp | HostKind::Python));
        let no_cpu_leaf = if trace.meta.format == Some(tracehound_parsers::SourceFormat::Nsys) {
            "host code outside CUDA calls (this export has no CPU-side data; capture with `-t cuda,nvtx,osrt --pytorch=autograd-nvtx -s cpu`)"
        } else {
            "host code outside CUDA calls (the trace has no CPU operators: profile with ProfilerActivity.CPU and with_stack=True)"
        };
        Attributor {
            trace,
            main_thread: OnceLock::new(),
            sync_corr,
            launched,
            cpu_data,
            no_cpu_leaf,
            loads_modules: OnceLock::new(),
            conv_tuned: Mutex::new(FxHashMap::default()),
            first_op: OnceLock::new(),
            flags: (0..trace.strings.len())
                .map(|_| std::sync::atomic::AtomicU8::new(0))
                .collect(),
            call_stacks: OnceLock::new(),
        }
    }

    /// What time no span covers is called: code the profiler did not trace, or, in a trace
    /// without CPU-side data, host code outside CUDA calls with how to capture it.
    fn untraced_leaf(&self) -> &'static str {
        if self.cpu_data {
            "no span recorded (code the profiler did not trace)"
        } else {
            self.no_cpu_leaf
        }
    }

    fn is_blocking(&self, i: u32) -> bool {
        let s = &self.trace.host_spans[i as usize];
        matches!(s.kind, HostKind::Runtime | HostKind::Driver)
            && (is_sync_call(self.trace.str(s.name))
                || (s.correlation != 0 && self.sync_corr.contains(&s.correlation)))
    }

    /// Whether span `op` (an operator) or a span inside it launched GPU work.
    fn launches(&self, op: u32) -> bool {
        op != NONE
            && self
                .launched
                .get(op as usize / 64)
                .is_some_and(|x| x & (1u64 << (op % 64)) != 0)
    }

    /// Whether name `name` has flag `f`; each name's flags are worked out on first use (a
    /// trace holds far more names than gaps ever touch).
    fn flag(&self, name: u32, f: u8) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(slot) = self.flags.get(name as usize) else {
            return false;
        };
        let mut v = slot.load(Relaxed);
        if v & KNOWN == 0 {
            let n = self.trace.str(name);
            v = KNOWN
                | (if is_loader(n) { LOADER } else { 0 })
                | (if is_conv(n) { CONV } else { 0 })
                | (if tracehound_parsers::is_user_frame(n) {
                    USER_FRAME
                } else {
                    0
                });
            slot.store(v, Relaxed);
        }
        v & f != 0
    }

    /// What encloses span `i`: its own contribution on top of its parent's, memoised per
    /// gap in `memo` (a gap's spans share most of their ancestors). Iterative: nesting depth
    /// comes from the input.
    fn around(&self, i: u32, memo: &mut FxHashMap<u32, Around>) -> Around {
        let t = self.trace;
        let mut chain: Vec<u32> = Vec::new();
        let mut k = i;
        let mut a = loop {
            if k == NONE {
                break Around {
                    loader: NONE,
                    conv: NONE,
                    op: NONE,
                    frame: NONE,
                };
            }
            if let Some(a) = memo.get(&k) {
                break *a;
            }
            chain.push(k);
            k = t.host_spans[k as usize].parent;
        };
        // Outermost wins for the loader, convolution and operator (an ancestor's stays);
        // innermost wins for the frame.
        for &k in chain.iter().rev() {
            let s = &t.host_spans[k as usize];
            if a.loader == NONE && self.flag(s.name, LOADER) {
                a.loader = k;
            }
            match s.kind {
                HostKind::CpuOp => {
                    if a.op == NONE {
                        a.op = k;
                    }
                    if a.conv == NONE && self.flag(s.name, CONV) {
                        a.conv = k;
                    }
                }
                HostKind::Python if self.flag(s.name, USER_FRAME) => a.frame = k,
                _ => {}
            }
            memo.insert(k, a);
        }
        a
    }

    /// Whether convolution operator `conv` synchronised while it ran (cuDNN benchmark mode
    /// timing its candidates).
    fn is_tuned(&self, conv: u32) -> bool {
        let t = self.trace;
        let compute = || {
            let op = &t.host_spans[conv as usize];
            let spans = t.thread_spans((op.pid, op.tid));
            let from = spans.partition_point(|&k| t.host_spans[k as usize].start < op.start);
            spans[from..]
                .iter()
                .take_while(|&&k| t.host_spans[k as usize].start < op.end)
                .any(|&k| {
                    let s = &t.host_spans[k as usize];
                    matches!(s.kind, HostKind::Runtime | HostKind::Driver)
                        && is_timing_sync(api_name(t.str(s.name)))
                })
        };
        match self.conv_tuned.lock() {
            Ok(mut m) => *m.entry(conv).or_insert_with(compute),
            Err(_) => compute(),
        }
    }

    /// The thread that ran the most CPU operators (else CUDA calls): it stands in when a gap
    /// has no launcher.
    fn main_thread(&self) -> Option<ThreadKey> {
        let trace = self.trace;
        *self.main_thread.get_or_init(|| {
            trace
                .index
                .spans_by_thread
                .iter()
                .map(|(k, v)| {
                    let count = |kinds: &[HostKind]| {
                        v.iter()
                            .filter(|&&i| kinds.contains(&trace.host_spans[i as usize].kind))
                            .count()
                    };
                    (
                        count(&[HostKind::CpuOp]),
                        count(&[HostKind::Runtime, HostKind::Driver]),
                        std::cmp::Reverse(*k),
                        *k,
                    )
                })
                .max()
                .filter(|(ops, calls, _, _)| ops + calls > 0)
                .map(|(_, _, _, k)| k)
        })
    }

    /// Whether the trace shows module loading anywhere (a module-load call, or a launch or
    /// runtime call that took milliseconds); found on first need.
    fn loads_modules(&self) -> bool {
        let trace = self.trace;
        *self.loads_modules.get_or_init(|| {
            trace.host_spans.iter().any(|s| {
                matches!(s.kind, HostKind::Runtime | HostKind::Driver) && {
                    let n = api_name(trace.str(s.name));
                    is_module_load_call(n)
                        || (s.dur() >= SLOW_CALL_NS && !is_sync_call(n) && !is_alloc_call(n))
                }
            })
        })
    }

    /// Whether any span carries an old-style `Call stack`.
    fn call_stacks(&self) -> bool {
        *self
            .call_stacks
            .get_or_init(|| self.trace.host_spans.iter().any(|s| s.call_stack != 0))
    }

    /// Whether CPU operator `op` is the first of its name on its thread.
    fn is_first_op(&self, op: u32) -> bool {
        let t = self.trace;
        let map = self.first_op.get_or_init(|| {
            let mut m: FxHashMap<(ThreadKey, u32), i64> = FxHashMap::default();
            for s in t.host_spans.iter().filter(|s| s.kind == HostKind::CpuOp) {
                m.entry(((s.pid, s.tid), s.name)).or_insert(s.start);
            }
            m
        });
        let s = &t.host_spans[op as usize];
        map.get(&((s.pid, s.tid), s.name)) == Some(&s.start)
    }

    /// Category, leaf and user frame of the time span `i` was innermost for `ns`.
    fn categorize(&self, i: u32, ns: i64, memo: &mut FxHashMap<u32, Around>) -> Raw<'t> {
        let t = self.trace;
        let raw = |kind, leaf, frame| Raw {
            kind,
            leaf,
            frame,
            ns,
        };
        if i == NONE {
            return raw(CauseKind::Untraced, Leaf::Untraced, None);
        }
        let s = &t.host_spans[i as usize];
        let around = self.around(i, memo);
        let frame = if around.frame != NONE {
            Some(t.str(t.host_spans[around.frame as usize].name))
        } else if self.call_stacks() {
            t.user_frame(i)
        } else {
            None
        };
        if around.loader != NONE {
            let n = t.host_spans[around.loader as usize].name;
            return raw(CauseKind::DataLoading, Leaf::Loader(n), frame);
        }
        if around.conv != NONE && self.is_tuned(around.conv) {
            return raw(CauseKind::Autotune, Leaf::Conv(around.conv), frame);
        }
        let op = around.op;
        let op_name = if op == NONE {
            0
        } else {
            t.host_spans[op as usize].name
        };
        match s.kind {
            HostKind::Runtime | HostKind::Driver => {
                let call = api_name(t.str(s.name));
                if is_alloc_call(call) {
                    raw(CauseKind::Allocator, Leaf::CallIn(s.name, op_name), frame)
                } else if is_module_load_call(call) {
                    raw(CauseKind::ModuleLoad, Leaf::CallIn(s.name, op_name), frame)
                } else if self.is_blocking(i) {
                    raw(CauseKind::HostSync, Leaf::OpCall(op_name, s.name), frame)
                } else if s.dur() >= SLOW_CALL_NS {
                    raw(
                        CauseKind::ModuleLoad,
                        Leaf::FirstCallIn(s.name, op_name),
                        frame,
                    )
                } else {
                    raw(CauseKind::LaunchOverhead, Leaf::Call(s.name), frame)
                }
            }
            HostKind::CpuOp => {
                if self.launches(op) {
                    // Dispatch costs µs; milliseconds of host time in an operator that
                    // launches GPU work is set-up on a first call, or CPU work it does.
                    if ns >= SLOW_CALL_NS && self.loads_modules() && self.is_first_op(op) {
                        raw(CauseKind::ModuleLoad, Leaf::FirstOp(op_name), frame)
                    } else if ns >= SLOW_CALL_NS {
                        raw(CauseKind::CpuOp, Leaf::HostWork(op_name), frame)
                    } else {
                        raw(CauseKind::LaunchOverhead, Leaf::Dispatch, frame)
                    }
                } else {
                    raw(CauseKind::CpuOp, Leaf::OnCpu(op_name), frame)
                }
            }
            HostKind::Python => raw(CauseKind::Python, Leaf::Frame(s.name), frame),
            HostKind::OsCall => raw(CauseKind::OsCall, Leaf::Name(s.name), frame),
            HostKind::Annotation | HostKind::GpuAnnotation => {
                if t.str(s.name).starts_with("ProfilerStep#") {
                    raw(CauseKind::Untraced, Leaf::Untraced, frame)
                } else {
                    raw(CauseKind::Untraced, Leaf::Inside(s.name), frame)
                }
            }
        }
    }

    /// Splits untraced time by the CPU samples taken on the thread in `[a, b)` outside every
    /// span, in proportion to how many name each function.
    fn name_untraced_by_samples(&self, raws: &mut Vec<Raw<'t>>, thread: ThreadKey, a: i64, b: i64) {
        let t = self.trace;
        let Some(k) = raws
            .iter()
            .position(|r| r.kind == CauseKind::Untraced && r.leaf == Leaf::Untraced)
        else {
            return;
        };
        let samples = &t.cpu_samples;
        let from = samples.partition_point(|s| (s.pid, s.tid, s.ts) < (thread.0, thread.1, a));
        let spans = t.thread_spans(thread);
        let mut counts: FxHashMap<(u32, u32), u64> = FxHashMap::default();
        for s in samples[from..]
            .iter()
            .take_while(|s| (s.pid, s.tid) == thread && s.ts < b)
        {
            let (_, chain) = t.chain_at(spans, s.ts);
            // Step annotations cover everything and name nothing: they do not count.
            let covered = chain.iter().any(|&i| {
                let sp = &t.host_spans[i as usize];
                sp.end > s.ts && !matches!(sp.kind, HostKind::Annotation | HostKind::GpuAnnotation)
            });
            if !covered {
                *counts.entry((s.symbol, s.module)).or_default() += 1;
            }
        }
        let n: u64 = counts.values().sum();
        if n == 0 {
            return;
        }
        let untraced = raws.swap_remove(k);
        let mut counts: Vec<((u32, u32), u64)> = counts.into_iter().collect();
        counts.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        let mut left = untraced.ns;
        for (j, ((sym, module), c)) in counts.iter().enumerate() {
            let ns = if j + 1 == counts.len() {
                left
            } else {
                untraced.ns * *c as i64 / n as i64
            };
            left -= ns;
            raws.push(Raw {
                kind: CauseKind::Sampled,
                leaf: Leaf::Sampled(*sym, *module),
                frame: untraced.frame,
                ns,
            });
        }
    }

    /// The words for a leaf.
    fn leaf_text(&self, leaf: Leaf, drained: Option<&str>) -> String {
        let t = self.trace;
        let in_op = |what: &str, op: u32| {
            if op == 0 {
                what.to_string()
            } else {
                format!("{what} in {}", t.str(op))
            }
        };
        match leaf {
            Leaf::Untraced => self.untraced_leaf().to_string(),
            Leaf::Loader(n) => t.str(n).chars().take(90).collect(),
            Leaf::Conv(c) => {
                let c = &t.host_spans[c as usize];
                let shape = t
                    .str(c.input_dims)
                    .trim_start_matches('[')
                    .split(']')
                    .next()
                    .filter(|d| !d.is_empty())
                    .map(|d| format!(" on input [{d}]"))
                    .unwrap_or_default();
                format!("{}{shape}", t.str(c.name))
            }
            Leaf::CallIn(call, op) => in_op(api_name(t.str(call)), op),
            Leaf::FirstCallIn(call, op) => {
                in_op(&format!("first call ({})", api_name(t.str(call))), op)
            }
            Leaf::OpCall(0, call) => api_name(t.str(call)).to_string(),
            Leaf::OpCall(op, call) => format!("{} ({})", t.str(op), api_name(t.str(call))),
            Leaf::Call(call) => api_name(t.str(call)).to_string(),
            Leaf::FirstOp(op) => format!("first call of {}", t.str(op)),
            Leaf::HostWork(op) => format!("{} (host work)", t.str(op)),
            Leaf::OnCpu(op) => format!("{} on CPU", t.str(op)),
            Leaf::Dispatch => "dispatch in operators that launch GPU work".into(),
            Leaf::Frame(n) => clean_frame(t.str(n)),
            Leaf::Name(n) => t.str(n).to_string(),
            Leaf::Inside(n) => format!("inside {} (no finer span)", short_name(t.str(n), 60)),
            Leaf::LaunchLatency => "launch latency (call to kernel start)".into(),
            Leaf::Queued => {
                "launched but not started (a dependency, an event or another stream held it)".into()
            }
            Leaf::Drained => drained
                .unwrap_or("the sync that drained the queue")
                .to_string(),
            Leaf::Sampled(sym, module) => {
                let m = t.str(module);
                format!(
                    "{} in {}",
                    sampled_symbol(t.str(sym)),
                    m.rsplit('/').next().unwrap_or(m)
                )
            }
        }
    }

    fn classify(&self, device: i32, a: i64, b: i64) -> Gap {
        let t = self.trace;
        let ops = t.device_ops(device);
        let k = ops.partition_point(|&i| t.gpu_ops[i as usize].start < b);
        let next = ops[k..]
            .iter()
            .copied()
            .find(|&i| t.gpu_ops[i as usize].is_work());
        let next_op = next;
        let launch = next.map_or(NONE, |i| t.index.op_launch[i as usize]);
        let thread = if launch != NONE {
            let l = &t.host_spans[launch as usize];
            Some((l.pid, l.tid))
        } else {
            self.main_thread()
        };
        let whole = |kind: CauseKind, leaf: String, frame: Option<String>| Part {
            kind,
            leaf,
            frame,
            ns: b - a,
        };
        let mut gap = Gap {
            start: a,
            end: b,
            kind: CauseKind::Unknown,
            mixed: false,
            label: String::new(),
            cpu_op: None,
            frame: None,
            next_op,
            drained_by: None,
            parts: Vec::new(),
        };
        let Some(thread) = thread else {
            gap.parts = vec![whole(
                CauseKind::Unknown,
                "no host thread recorded".into(),
                None,
            )];
            return finish_gap(gap);
        };
        if launch != NONE && t.host_spans[launch as usize].end <= a {
            let op = t.outermost_cpu_op(launch);
            gap.cpu_op = (op != NONE).then(|| span_name(t, op, "").to_string());
            gap.parts = vec![whole(
                CauseKind::GpuWait,
                "the next operation was launched before the gap (a dependency, an event or another stream held it)".into(),
                t.user_frame(launch).map(str::to_string),
            )];
            return finish_gap(gap);
        }
        // A synchronising call around the moment the GPU ran dry: the chain containing `a`,
        // and the few spans that ended just before it (the host returns a moment after).
        let spans = t.thread_spans(thread);
        let (first_after, mut around) = t.chain_at(spans, a);
        if first_after > 0 {
            around.extend(
                spans[first_after.saturating_sub(12)..first_after - 1]
                    .iter()
                    .copied(),
            );
        }
        let drain = around.iter().copied().find(|&i| {
            let s = &t.host_spans[i as usize];
            self.is_blocking(i) && s.start <= a && s.end >= a - DRAIN_SLACK_NS
        });
        if let Some(sync) = drain {
            let op = t.outermost_cpu_op(sync);
            let call = api_name(span_name(t, sync, ""));
            gap.drained_by = Some(if op != NONE {
                format!("{} ({call})", span_name(t, op, ""))
            } else {
                call.to_string()
            });
        }
        let host_end = if launch != NONE {
            t.host_spans[launch as usize].start.clamp(a, b)
        } else {
            b
        };
        let mut memo = FxHashMap::default();
        let mut raws: Vec<Raw> = t
            .exclusive_time(thread, a, host_end)
            .into_iter()
            .map(|(i, ns)| self.categorize(i, ns, &mut memo))
            .collect();
        if b > host_end {
            let latency = (b - host_end).min(LAUNCH_LATENCY_NS);
            raws.push(Raw {
                kind: CauseKind::LaunchOverhead,
                leaf: Leaf::LaunchLatency,
                frame: None,
                ns: latency,
            });
            if b - host_end > latency {
                raws.push(Raw {
                    kind: CauseKind::GpuWait,
                    leaf: Leaf::Queued,
                    frame: None,
                    ns: b - host_end - latency,
                });
            }
        }
        if !t.cpu_samples.is_empty() {
            self.name_untraced_by_samples(&mut raws, thread, a, host_end);
        }
        // With the queue drained by a sync, launching again is the sync's cost: the GPU
        // would otherwise have had work queued.
        if gap.drained_by.is_some() {
            for r in raws
                .iter_mut()
                .filter(|r| r.kind == CauseKind::LaunchOverhead)
            {
                r.kind = CauseKind::HostSync;
                r.leaf = Leaf::Drained;
            }
        }
        // Merge by key (integers and borrowed names), then spell out only what is left.
        raws.sort_unstable_by(|x, y| (x.kind, x.leaf, x.frame).cmp(&(y.kind, y.leaf, y.frame)));
        let mut merged: Vec<Raw> = Vec::new();
        for r in raws {
            match merged.last_mut() {
                Some(l) if (l.kind, l.leaf, l.frame) == (r.kind, r.leaf, r.frame) => l.ns += r.ns,
                _ => merged.push(r),
            }
        }
        let parts: Vec<Part> = merged
            .into_iter()
            .map(|r| Part {
                kind: r.kind,
                leaf: self.leaf_text(r.leaf, gap.drained_by.as_deref()),
                frame: r.frame.map(str::to_string),
                ns: r.ns,
            })
            .collect();
        gap.parts = merge_parts(parts);
        if launch != NONE && gap.frame.is_none() {
            let f = self.around(launch, &mut memo).frame;
            gap.frame = if f != NONE {
                Some(t.str(t.host_spans[f as usize].name).to_string())
            } else if self.call_stacks() {
                t.user_frame(launch).map(str::to_string)
            } else {
                None
            };
        }
        finish_gap(gap)
    }
}

/// Sums parts of the same category, leaf and frame; largest first.
fn merge_parts(mut parts: Vec<Part>) -> Vec<Part> {
    parts.sort_by(|x, y| (x.kind, &x.leaf, &x.frame).cmp(&(y.kind, &y.leaf, &y.frame)));
    let mut out: Vec<Part> = Vec::new();
    for p in parts {
        match out.last_mut() {
            Some(l) if l.kind == p.kind && l.leaf == p.leaf && l.frame == p.frame => l.ns += p.ns,
            _ => out.push(p),
        }
    }
    out.sort_by(|x, y| {
        y.ns.cmp(&x.ns)
            .then(x.kind.cmp(&y.kind))
            .then(x.leaf.cmp(&y.leaf))
    });
    out
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
        && (top != CauseKind::HostSync || lead(top).is_some_and(|p| &p.leaf != d))
    {
        gap.label
            .push_str(&format!(" — queue drained by {d} just before"));
    }
    if let Some(p) = lead(top) {
        if p.frame.is_some() {
            gap.frame = p.frame.clone();
        }
        if matches!(
            top,
            CauseKind::CpuOp | CauseKind::HostSync | CauseKind::Autotune | CauseKind::Allocator
        ) {
            gap.cpu_op = Some(p.leaf.clone());
        }
    }
    gap
}

/// `; cuDNN autotuning in steps 0, 1, 2`: the profiler steps whose gaps were mostly
/// autotuning, which paid for it (a new input shape each, with cudnn.benchmark).
fn tuning_steps(cx: &Ctx, idle: &DeviceIdle) -> String {
    let steps = &cx.trace.steps;
    let mut paid: Vec<i64> = idle
        .costly_gaps()
        .filter(|g| g.kind == CauseKind::Autotune)
        .filter_map(|g| {
            let k = steps.partition_point(|s| s.start <= g.start);
            k.checked_sub(1).map(|k| steps[k].number)
        })
        .collect();
    paid.sort_unstable();
    paid.dedup();
    if paid.is_empty() {
        return String::new();
    }
    let list: Vec<String> = paid.iter().map(|n| n.to_string()).collect();
    format!(
        "; cuDNN autotuning in step{} {} of {}",
        if paid.len() > 1 { "s" } else { "" },
        list.join(", "),
        steps.len()
    )
}

/// Advice for a measured leaf of a category: the concrete change, not the class.
pub fn advice(kind: CauseKind, leaf: &str) -> String {
    let l = leaf.to_ascii_lowercase();
    match kind {
        CauseKind::HostSync => {
            let what = if l.contains("aten::item") || l.contains("aten::_local_scalar_dense") {
                "`.item()` (and `float(t)`, `print(t)`) on a GPU tensor waits for the GPU: accumulate metrics on the GPU and read them every N steps"
            } else if l.contains("nonzero") || l.contains("masked_select") || l.contains("aten::index") {
                "boolean-mask indexing and `nonzero()` must read the result size from the GPU: use `torch.where`/masked arithmetic with static shapes"
            } else if l.contains("aten::to") || l.contains("copy_") || l.contains("aten::cpu") || l.contains("memcpy") {
                "a device-to-host copy (`.cpu()`, `.numpy()`, `.tolist()`) or a copy from pageable memory blocks the host: copy into pinned memory with `non_blocking=True` and read it a step later, or keep the computation on the GPU"
            } else if l.contains("synchronize") {
                "an explicit `torch.cuda.synchronize()` / event or stream sync in the loop: keep it in timing code only"
            } else {
                "a synchronising call in the loop waits for the GPU: remove it or move it out of the step"
            };
            format!("Host sync at {leaf}: {what}.")
        }
        CauseKind::Allocator => {
            if l.contains("conv") {
                format!(
                    "{leaf}: cuDNN/MIOpen convolution workspaces are allocated and released per call; keep them cached (avoid `torch.cuda.empty_cache()`, set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`; on ROCm `MIOPEN_FIND_MODE=FAST` and a warmed-up workspace), and run a few warm-up steps before measuring."
                )
            } else {
                format!(
                    "{leaf}: the caching allocator goes to the driver in the loop (cudaFree synchronises the device). Remove `torch.cuda.empty_cache()` from the loop, keep tensor sizes stable, or set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`."
                )
            }
        }
        CauseKind::ModuleLoad => format!(
            "{leaf}: first-call cost (lazy module loading, library and handle start-up, JIT). Run warm-up steps before profiling or timing; if it recurs in the steady state, something recompiles (changing shapes under torch.compile, new kernels), and `CUDA_MODULE_LOADING=EAGER` moves loading to start-up."
        ),
        CauseKind::Autotune => format!(
            "{leaf}: cuDNN autotuning (`torch.backends.cudnn.benchmark=True`) runs again for every new input shape. Keep shapes fixed (pad or bucket sizes, `drop_last=True`) or set `cudnn.benchmark=False` when shapes vary."
        ),
        CauseKind::LaunchOverhead => "The GPU finishes each kernel faster than the host launches the next: batch more work per kernel (larger batch), fuse operators with torch.compile, or replay the step as a CUDA graph (torch.compile(mode=\"reduce-overhead\") or torch.cuda.CUDAGraph).".to_string(),
        CauseKind::CpuOp => format!(
            "{leaf} runs on the training thread while the GPU waits: do it on the GPU (move the tensor first), in DataLoader workers (num_workers>0), or once outside the loop."
        ),
        CauseKind::Python => {
            if l.contains("sleep") {
                format!("{leaf}: the loop sleeps while the GPU idles; remove the sleep (or move throttling and polling to another thread).")
            } else if l.contains("built-in method tensor") || l.contains("as_tensor") || l.contains("from_numpy") {
                format!("{leaf}: inputs are built from Python objects on the training thread; build them on the GPU (torch.arange/randn(device=...)), or in DataLoader workers from NumPy arrays into pinned memory.")
            } else if l.contains("logging") || l.contains("print") || l.contains("write") {
                format!("{leaf}: logging in the loop; log every N steps, asynchronously, from values already on the host.")
            } else if tracehound_parsers::is_user_frame(leaf) {
                format!("{leaf}: your Python code runs while the GPU has nothing queued; move it out of the step, do it every N steps or on another thread, or express it as tensor operations on the GPU.")
            } else {
                format!("{leaf}: host-side Python work while the GPU idles; move it off the training thread (DataLoader workers, a background thread) or onto the GPU.")
            }
        }
        CauseKind::DataLoading => "Feed the GPU faster: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, prefetch_factor=4); move augmentation to the GPU (e.g. torchvision.transforms.v2 on CUDA tensors) or pre-process the dataset offline.".to_string(),
        CauseKind::Sampled => format!(
            "{leaf}: the host runs this between CUDA calls while the GPU idles (from CPU samples); move it off the training thread, out of the loop, or onto the GPU."
        ),
        CauseKind::OsCall => format!(
            "The training thread waits in {leaf}: a sleep, a lock or I/O on the critical path; move it off the training thread."
        ),
        CauseKind::Untraced => {
            if l.contains("no cpu-side data") || l.contains("no cpu operators") {
                format!("The trace cannot say what the host did: {leaf}.")
            } else {
                "Host time the profiler did not break down: record with `with_stack=True` (Kineto) to see the Python frames.".to_string()
            }
        }
        CauseKind::GpuWait => "Work was queued but the GPU still waited: check cross-stream event waits and collectives on other streams, and whether a previous stream blocks this one.".to_string(),
        CauseKind::Unknown => "The launching thread is not in the trace: profile with ProfilerActivity.CPU so gaps can be attributed.".to_string(),
        CauseKind::ProfilerStartup => "Not a cost of the program: Kineto starts recording a moment into the first profiled step.".to_string(),
    }
}

impl Rule for IdleGaps {
    fn id(&self) -> &'static str {
        "idle_gaps"
    }

    fn description(&self) -> &'static str {
        "GPU idle intervals over the gap threshold inside the analysed window, attributed to what the host was doing"
    }

    fn uses_idle(&self) -> bool {
        true
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for idle in cx.idle() {
            if idle.costly_gaps().next().is_none() {
                continue;
            }
            out.push(finding(cx, idle));
        }
        out
    }
}

fn finding(cx: &Ctx, idle: &DeviceIdle) -> Finding {
    let w = &cx.window;
    let gap_ns = idle.gap_ns();
    let idle_share = 1.0 - w.share(idle.busy_ns);
    // In a launch-bound run the short gaps between tiny kernels are a cost too; the
    // launch_bound rule reports them (with queue depth and launch latency), so they are
    // pointed to here, not counted twice.
    let launch_bound = idle.launch_bound(w.len());
    // Measured time by (category, leaf, frame) over all gaps, with the number of gaps it
    // appears in and the syncs that drained the queue before them.
    type Key<'g> = (CauseKind, &'g str, Option<&'g str>);
    type Group<'g> = (u64, i64, FxHashMap<&'g str, i64>);
    let mut groups: FxHashMap<Key, Group> = FxHashMap::default();
    for g in idle.costly_gaps() {
        for p in &g.parts {
            let e = groups
                .entry((p.kind, p.leaf.as_str(), p.frame.as_deref()))
                .or_default();
            e.0 += 1;
            e.1 += p.ns;
            if let Some(d) = &g.drained_by {
                *e.2.entry(d.as_str()).or_default() += p.ns;
            }
        }
    }
    let denom = gap_ns.max(1) as f64;
    let leaf_totals: Vec<(Key, i64)> = groups.iter().map(|(k, g)| (*k, g.1)).collect();
    let mut rows: Vec<(CauseKind, Row)> = groups
        .into_iter()
        .map(|((kind, leaf, frame), (count, time_ns, drained))| {
            let drained = drained
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
                .filter(|(d, ns)| *ns * 2 >= time_ns && *d != leaf);
            let mut label = format!(
                "{:.0}% {}: {leaf}",
                100.0 * time_ns as f64 / denom,
                kind.label()
            );
            if let Some((d, _)) = drained {
                label.push_str(&format!(" — queue drained by {d} just before"));
            }
            (
                kind,
                Row {
                    cause: Some(kind.id()),
                    share: Some(time_ns as f64 / denom),
                    label,
                    count,
                    time_ns,
                    bytes: None,
                    python_frame: frame.map(str::to_string),
                },
            )
        })
        .collect();
    rows.sort_by(|a, b| {
        b.1.time_ns
            .cmp(&a.1.time_ns)
            .then(a.1.label.cmp(&b.1.label))
    });
    // The leaf holding most of each category's time, from the groups (not every part again).
    let mut leaves: FxHashMap<(CauseKind, &str), i64> = FxHashMap::default();
    for ((kind, leaf, _), ns) in &leaf_totals {
        *leaves.entry((*kind, leaf)).or_default() += ns;
    }
    let leaf_of = |k: CauseKind| -> String {
        leaves
            .iter()
            .filter(|((kind, _), _)| *kind == k)
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.1.cmp(a.0.1)))
            .map(|((_, l), _)| l.to_string())
            .unwrap_or_default()
    };
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|(_, r)| r)
        .take(cx.config.max_rows)
        .collect();
    let mut worst: Vec<&Gap> = idle.costly_gaps().collect();
    worst.sort_by(|a, b| {
        (b.end - b.start)
            .cmp(&(a.end - a.start))
            .then(a.start.cmp(&b.start))
    });
    // With an nvidia-smi log attached: the SM utilisation of the second each gap fell in.
    let sm = crate::counters::series(cx.trace, idle.device, "sm");
    let pwr = crate::counters::series(cx.trace, idle.device, "pwr");
    let cite = |t: i64| {
        let at = |s: Option<&tracehound_parsers::CounterSeries>| {
            s.and_then(|s| crate::counters::value_at(s, t))
        };
        match (at(sm), at(pwr)) {
            (Some(u), Some(p)) => format!(" [nvidia-smi that second: SM {u:.0}%, {p:.0} W]"),
            (Some(u), None) => format!(" [nvidia-smi that second: SM {u:.0}%]"),
            _ => String::new(),
        }
    };
    let instances = worst
        .iter()
        .take(cx.config.max_instances)
        .map(|g| Instance {
            start_ns: g.start,
            dur_ns: g.end - g.start,
            offset_ms: w.offset_ms(g.start),
            what: match g
                .next_op
                .map(|i| short_name(cx.trace.str(cx.trace.gpu_ops[i as usize].name), 60))
            {
                Some(n) => format!("{}; next on the GPU: {n}{}", g.label, cite(g.start)),
                None => format!("{} (to the end of the window){}", g.label, cite(g.start)),
            },
            cpu_op: g.cpu_op.clone(),
            python_frame: g.frame.clone(),
        })
        .collect();
    let kinds = idle.by_kind();
    let main = kinds.first().map(|k| k.0).unwrap_or(CauseKind::Unknown);
    let mut advice_list: Vec<String> = Vec::new();
    for (k, ns) in kinds.iter().take(3) {
        let a = advice(*k, &leaf_of(*k));
        if *ns * 5 >= gap_ns && !advice_list.contains(&a) {
            advice_list.push(a);
        }
    }
    if advice_list.is_empty() {
        advice_list.push(advice(main, &leaf_of(main)));
    }
    // The sync that drained the queue before a third or more of the idle time is the second
    // fact of those gaps: removing it lets the GPU run ahead of the host.
    let mut drains: FxHashMap<&str, i64> = FxHashMap::default();
    for g in idle.costly_gaps() {
        if let Some(d) = &g.drained_by {
            *drains.entry(d.as_str()).or_default() += g.end - g.start;
        }
    }
    if let Some((d, ns)) = drains
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
        && ns * 3 >= gap_ns
    {
        let a = advice(CauseKind::HostSync, d);
        if !advice_list.contains(&a) {
            advice_list.push(a);
        }
    }
    let largest = idle
        .costly_gaps()
        .map(|g| g.end - g.start)
        .max()
        .unwrap_or(0);
    let n_gaps = idle.costly_gaps().count();
    let causes: Vec<String> = kinds
        .iter()
        .take(3)
        .map(|(k, ns)| {
            format!(
                "{} {:.0}%",
                k.label(),
                100.0 * *ns as f64 / gap_ns.max(1) as f64
            )
        })
        .collect();
    let impact = gap_ns;
    let share = w.share(impact);
    Finding {
        rule: "idle_gaps",
        id: String::new(),
        title: if launch_bound {
            format!(
                "GPU {} idle {:.0}% of the window: {} gaps ≥ {} cost {}; {} more in gaps between tiny kernels (see launch_bound)",
                idle.device,
                100.0 * idle_share,
                n_gaps,
                fmt_ns(cx.config.gap_threshold_ns),
                fmt_ns(gap_ns),
                fmt_ns(idle.short_idle_ns)
            )
        } else {
            format!(
                "GPU {} idle {:.0}% of the window: {} gaps ≥ {} cost {}",
                idle.device,
                100.0 * idle_share,
                n_gaps,
                fmt_ns(cx.config.gap_threshold_ns),
                fmt_ns(gap_ns)
            )
        },
        severity: Severity::from_share(share),
        impact_ns: impact,
        impact_share: share,
        confidence: if matches!(main, CauseKind::Unknown | CauseKind::Untraced) {
            Confidence::Low
        } else {
            Confidence::High
        },
        device: Some(idle.device),
        evidence: format!(
            "busy {:.1}% of {}; causes: {}; largest gap {}; plus {} in {} shorter gaps{}",
            100.0 * w.share(idle.busy_ns),
            fmt_ns(w.len()),
            causes.join(", "),
            fmt_ns(largest),
            fmt_ns(idle.short_idle_ns),
            idle.short_count,
            match sm.and_then(|s| crate::counters::mean(
                crate::counters::in_window(s, w).iter().map(|x| x.1)
            )) {
                Some(m) => format!("; nvidia-smi SM utilisation over the window {m:.0}%"),
                None => String::new(),
            }
        ) + &tuning_steps(cx, idle),
        breakdown: rows,
        instances,
        advice: advice_list,
        metrics: metrics([
            ("gaps", n_gaps as f64),
            ("gap_ns", gap_ns as f64),
            ("busy_share", w.share(idle.busy_ns)),
            ("idle_share", idle_share),
            ("short_gaps", idle.short_count as f64),
            ("short_idle_ns", idle.short_idle_ns as f64),
            ("largest_gap_ns", largest as f64),
            ("median_kernel_ns", idle.median_kernel_ns as f64),
            ("launch_bound", if launch_bound { 1.0 } else { 0.0 }),
            (
                "host_sync_ns",
                kinds
                    .iter()
                    .find(|k| k.0 == CauseKind::HostSync)
                    .map_or(0.0, |k| k.1 as f64),
            ),
            (
                "top_cause_share",
                kinds
                    .first()
                    .map_or(0.0, |k| k.1 as f64 / gap_ns.max(1) as f64),
            ),
            (
                "data_loading_ns",
                kinds
                    .iter()
                    .find(|k| k.0 == CauseKind::DataLoading)
                    .map_or(0.0, |k| k.1 as f64),
            ),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::testutil::TB;
    use tracehound_parsers::GpuOpKind::{self, Kernel};

    fn run(t: &Trace, config: &Config) -> (Vec<Finding>, DeviceIdle) {
        let cx = Ctx::new(t, config);
        (IdleGaps.check(&cx), analyse_device(&cx, 0))
    }

    #[test]
    fn empty_trace_has_no_gaps() {
        let t = TB::new().build();
        assert!(run(&t, &Config::default()).0.is_empty());
    }

    #[test]
    fn overlapping_streams_hide_each_others_gaps() {
        // Stream 7 idles 200-700 µs, but stream 8 runs through it: no gap.
        let t = TB::new()
            .op(Kernel, "a", 7, 0, 200_000, Some(0))
            .op(Kernel, "b", 8, 150_000, 750_000, Some(1_000))
            .op(Kernel, "c", 7, 700_000, 900_000, Some(2_000))
            .build();
        let (f, idle) = run(&t, &Config::default());
        assert!(f.is_empty());
        assert_eq!(idle.busy_ns, 900_000);
    }

    #[test]
    fn gaps_at_window_edges_count_with_step_markers() {
        // Step 0..1000 µs; the GPU works 300-400 µs only: 300 µs idle at each edge.
        let mut b = TB::new();
        b.span(HostKind::Annotation, "ProfilerStep#0", 0, 1_000_000)
            .span(HostKind::CpuOp, "aten::slow_cpu_op", 10_000, 290_000)
            .op(Kernel, "k", 7, 300_000, 400_000, Some(295_000))
            .span(HostKind::CpuOp, "aten::tail_op", 410_000, 990_000);
        let t = b.build();
        let (f, idle) = run(&t, &Config::default());
        assert_eq!(idle.gaps.len(), 2);
        assert_eq!((idle.gaps[0].start, idle.gaps[0].end), (0, 300_000));
        // 280 of the 300 µs in an operator that launched nothing; 10 + 5 µs untraced.
        assert_eq!(idle.gaps[0].kind, CauseKind::CpuOp);
        assert_eq!(
            idle.gaps[0].label,
            "CPU operators: aten::slow_cpu_op on CPU 93%"
        );
        let total: i64 = idle.gaps[0].parts.iter().map(|p| p.ns).sum();
        assert_eq!(total, 300_000, "the parts add up to the gap");
        assert_eq!((idle.gaps[1].start, idle.gaps[1].end), (400_000, 1_000_000));
        assert!(idle.gaps[1].next_op.is_none());
        assert_eq!(f[0].impact_ns, 900_000);
        assert_eq!(f[0].severity, Severity::High);
    }

    #[test]
    fn without_steps_the_window_starts_at_the_first_op() {
        let t = TB::new()
            .op(Kernel, "a", 7, 1_000_000, 1_100_000, None)
            .op(Kernel, "b", 7, 1_150_000, 1_200_000, None)
            .build();
        let (f, idle) = run(&t, &Config::default());
        assert!(f.is_empty(), "a 50 µs gap is under the threshold");
        assert_eq!((idle.short_count, idle.short_idle_ns), (1, 50_000));
        let (f, _) = run(
            &t,
            &Config {
                gap_threshold_ns: 10_000,
                ..Config::default()
            },
        );
        assert_eq!(f[0].impact_ns, 50_000);
        assert_eq!(f[0].instances[0].offset_ms, 0.1);
    }

    #[test]
    fn a_sync_names_the_drain_and_the_measured_time_names_the_cause() {
        // .item() returns 5 µs after the GPU drains; then 400 µs of Python bookkeeping and
        // 84 µs nothing traced before the next launch at 590 µs.
        let mut b = TB::new();
        b.op(Kernel, "a", 7, 0, 100_000, Some(0))
            .span(HostKind::CpuOp, "aten::item", 5_000, 106_000)
            .span(HostKind::Runtime, "cudaStreamSynchronize", 6_000, 105_000)
            .span(
                HostKind::Python,
                "train.py(10): bookkeeping",
                106_000,
                506_000,
            )
            .op(Kernel, "b", 7, 600_000, 700_000, Some(590_000));
        let t = b.build();
        let (f, idle) = run(&t, &Config::default());
        assert_eq!(idle.gaps.len(), 1);
        let g = &idle.gaps[0];
        assert_eq!(g.kind, CauseKind::Python);
        assert_eq!(
            g.drained_by.as_deref(),
            Some("aten::item (cudaStreamSynchronize)")
        );
        assert_eq!(
            g.label,
            "Python: train.py(10): bookkeeping 80% — queue drained by aten::item (cudaStreamSynchronize) just before"
        );
        // The launch latency (590 -> 600 µs) and the sync itself are the sync's cost.
        let sync: i64 = g
            .parts
            .iter()
            .filter(|p| p.kind == CauseKind::HostSync)
            .map(|p| p.ns)
            .sum();
        assert_eq!(sync, 5_000 + 10_000);
        assert!(
            f[0].breakdown[0]
                .label
                .starts_with("80% Python: train.py(10): bookkeeping")
        );
        assert!(
            f[0].advice[0].contains("train.py(10): bookkeeping"),
            "{:?}",
            f[0].advice
        );
    }

    #[test]
    fn a_sync_followed_only_by_launches_is_the_syncs_cost() {
        let mut b = TB::new();
        b.op(Kernel, "a", 7, 0, 100_000, Some(0))
            .span(HostKind::CpuOp, "aten::item", 5_000, 140_000)
            .span(HostKind::Runtime, "cudaStreamSynchronize", 6_000, 139_000)
            .op(Kernel, "b", 7, 250_000, 300_000, Some(140_000));
        let t = b.build();
        let (_, idle) = run(&t, &Config::default());
        assert_eq!(idle.gaps[0].kind, CauseKind::HostSync);
        assert!(!idle.gaps[0].mixed);
        assert!(
            idle.gaps[0]
                .label
                .starts_with("host synchronisation: aten::item (cudaStreamSynchronize)")
        );
    }

    #[test]
    fn an_operator_that_launches_is_dispatch_and_one_that_does_not_is_cpu_work() {
        // Two gaps: in one the host sits 400 µs in aten::rand (no GPU work); in the other,
        // 150 µs in each of three operators that launch kernels (dispatch, µs each).
        let mut b = TB::new();
        b.op(Kernel, "a", 7, 0, 100_000, Some(0))
            .span(HostKind::CpuOp, "aten::rand", 100_000, 500_000)
            .op(Kernel, "b", 7, 510_000, 520_000, Some(500_000))
            .span(HostKind::CpuOp, "aten::add", 520_000, 570_000)
            .op(Kernel, "c", 7, 600_000, 610_000, Some(560_000))
            .span(HostKind::CpuOp, "aten::mul", 570_000, 620_000)
            .op(Kernel, "d", 7, 630_000, 640_000, Some(610_000))
            .span(HostKind::CpuOp, "aten::sub", 620_000, 760_000)
            .op(Kernel, "e", 7, 780_000, 800_000, Some(750_000));
        let t = b.build();
        let (_, idle) = run(&t, &Config::default());
        assert_eq!(idle.gaps.len(), 2);
        assert_eq!(idle.gaps[0].kind, CauseKind::CpuOp);
        assert!(idle.gaps[0].label.contains("aten::rand on CPU"));
        assert_eq!(idle.gaps[1].kind, CauseKind::LaunchOverhead);
    }

    #[test]
    fn a_gap_without_a_dominant_category_is_mixed() {
        let mut b = TB::new();
        b.op(Kernel, "a", 7, 0, 100_000, Some(0))
            .span(HostKind::CpuOp, "aten::rand", 100_000, 250_000)
            .span(HostKind::Python, "train.py(3): f", 250_000, 400_000)
            .span(HostKind::OsCall, "clock_nanosleep", 400_000, 550_000)
            .op(Kernel, "b", 7, 700_000, 800_000, Some(700_000));
        let t = b.build();
        let (_, idle) = run(&t, &Config::default());
        let g = &idle.gaps[0];
        assert!(g.mixed, "{g:?}");
        assert!(g.label.starts_with("mixed: "), "{}", g.label);
    }

    #[test]
    fn op_launched_before_the_gap_is_a_gpu_wait() {
        let t = TB::new()
            .op(Kernel, "a", 7, 0, 100_000, Some(0))
            .op(Kernel, "b", 8, 500_000, 600_000, Some(2_000))
            .build();
        let (_, idle) = run(&t, &Config::default());
        assert_eq!(idle.gaps[0].kind, CauseKind::GpuWait);
    }

    #[test]
    fn short_gaps_between_tiny_kernels_go_to_the_launch_bound_rule() {
        // 100 kernels of 5 µs, 20 µs apart: no gap reaches 100 µs, yet the GPU idles 80%.
        let mut b = TB::new();
        for k in 0..100 {
            let t = k * 25_000;
            b.op(Kernel, "tiny", 7, t, t + 5_000, Some(t - 1_000));
        }
        let t = b.build();
        let (f, idle) = run(&t, &Config::default());
        assert!(idle.gaps.is_empty());
        assert_eq!(idle.median_kernel_ns, 5_000);
        assert!(idle.launch_bound(100 * 25_000));
        // No gap reaches the threshold: nothing for this rule, everything for launch_bound.
        assert!(f.is_empty());
        let lb = crate::testutil::check(&crate::rules::launch_bound::LaunchBound, &t);
        assert_eq!(lb.len(), 1);
        assert_eq!(lb[0].impact_ns, 99 * 20_000);
        assert_eq!(lb[0].metrics["starved_kernels"], 99.0);
        assert_eq!(lb[0].metrics["launch_latency_p50_ns"], 1_000.0);
        assert_eq!(lb[0].severity, Severity::High);
    }

    #[test]
    fn sync_records_are_not_busy_time() {
        let t = TB::new()
            .op(Kernel, "a", 7, 0, 100_000, None)
            .op(GpuOpKind::Sync, "Stream Sync", 7, 100_000, 900_000, None)
            .op(Kernel, "b", 7, 900_000, 1_000_000, None)
            .build();
        let (f, _) = run(&t, &Config::default());
        assert_eq!(f[0].impact_ns, 800_000);
    }
}
