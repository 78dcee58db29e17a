//! A short description of the trace for the end of every report: GPU, window, busy share,
//! kernels, the top kernel, and a verdict on what bounds the run.

use crate::context::Ctx;
use crate::finding::fmt_ns;
use crate::idle::CauseKind;
use crate::names::short_name;
use crate::window::{BUSY_SHARE, Window, WindowSource, busy_total_of, memory_in_window};
use serde::{Deserialize, Serialize};
use tracehound_parsers::{GpuOpKind, HostKind};

/// Per-device activity over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSummary {
    /// Device index.
    pub device: i32,
    /// GPU name, when the trace says.
    pub name: Option<String>,
    /// Busy share of the window (union of streams).
    pub busy_share: f64,
    /// Kernels in the window.
    pub kernels: u64,
    /// Memcpys in the window.
    pub memcpys: u64,
    /// Memsets in the window.
    pub memsets: u64,
    /// Peak memory reserved by the caching allocator in the window, when recorded.
    pub reserved_peak: Option<i64>,
    /// Peak memory allocated in the window, when recorded.
    pub allocated_peak: Option<i64>,
    /// Share of the window in collective kernels (NCCL/RCCL): busy time that may be a
    /// collective spinning while it waits for other ranks.
    pub collective_share: f64,
    /// Share of the window in collective kernels with no other GPU work beside them.
    pub exposed_collective_share: f64,
}

/// The kernel with the most GPU time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopKernel {
    /// Full name.
    pub name: String,
    /// Instances.
    pub count: u64,
    /// Total time, ns.
    pub total_ns: i64,
    /// Share of all kernel time.
    pub share_of_kernel_time: f64,
}

/// What bounds the run, the class of the summary's verdict. Serialized, and printed, as the
/// verdict names it (`GPU-bound`, `launch/host bound` ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Bound {
    /// The busiest GPU is busy at least 70% of the window (or nvidia-smi's SM utilisation is
    /// at least 70%, for counter logs).
    #[serde(rename = "GPU-bound")]
    Gpu,
    /// Busy, but a quarter of the window or more is collective communication with nothing
    /// beside it.
    #[serde(rename = "communication-bound")]
    Communication,
    /// The GPU idles, mostly waiting for data loading.
    #[serde(rename = "input-bound")]
    Input,
    /// The GPU idles because the host does not queue work fast enough.
    #[serde(rename = "launch/host bound")]
    LaunchHost,
    /// Counter logs alone, with SM utilisation under 70%.
    #[serde(rename = "underutilised")]
    Underutilised,
    /// An nvidia-smi XML alone: inventory, no activity over time.
    #[serde(rename = "snapshot")]
    Snapshot,
    /// No GPU activity in the trace or the window.
    #[serde(rename = "no GPU activity")]
    NoGpuActivity,
    /// Copies between host and device take most of the GPU's busy time.
    #[serde(rename = "transfer-bound")]
    Transfer,
    /// The capture holds no kernel records, so GPU time cannot be judged.
    #[serde(rename = "kernels not recorded")]
    NotRecorded,
    /// Most of the window is CUDA/HIP graph capture: launches recorded, not run.
    #[serde(rename = "graph capture")]
    GraphCapture,
    /// The GPU idles mostly in first calls (module loading, library initialisation): the
    /// window is a cold start, not the steady state.
    #[serde(rename = "cold start")]
    ColdStart,
    /// One gap holds most of the idle time: a one-time stall, not a launch-rate problem.
    #[serde(rename = "one-off stall")]
    Stall,
    /// The file ends before the trace does: no verdict on the part that is missing.
    #[serde(rename = "incomplete capture")]
    Incomplete,
    /// The GPU works under 1% of a capture that holds start-up or host-side work, and under
    /// 1 ms in all: too little to judge.
    #[serde(rename = "little GPU work")]
    LittleWork,
    /// Half the kernel launches or more returned an error: the kernels did not run, so there
    /// is no GPU work to judge.
    #[serde(rename = "launches failed")]
    LaunchesFailed,
}

impl Bound {
    /// The name the verdict gives it (`GPU-bound`).
    pub fn label(self) -> &'static str {
        match self {
            Bound::Gpu => "GPU-bound",
            Bound::Communication => "communication-bound",
            Bound::Input => "input-bound",
            Bound::LaunchHost => "launch/host bound",
            Bound::Underutilised => "underutilised",
            Bound::Snapshot => "snapshot",
            Bound::NoGpuActivity => "no GPU activity",
            Bound::Transfer => "transfer-bound",
            Bound::NotRecorded => "kernels not recorded",
            Bound::GraphCapture => "graph capture",
            Bound::ColdStart => "cold start",
            Bound::Stall => "one-off stall",
            Bound::Incomplete => "incomplete capture",
            Bound::LaunchesFailed => "launches failed",
            Bound::LittleWork => "little GPU work",
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.label())
    }
}

/// The trace summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceSummary {
    /// The analysed window.
    pub window: Window,
    /// Per device.
    pub devices: Vec<DeviceSummary>,
    /// Kernels in the window, all devices.
    pub kernels: u64,
    /// Top kernel by time.
    pub top_kernel: Option<TopKernel>,
    /// What bounds the run.
    pub bound: Bound,
    /// The verdict in one sentence.
    pub verdict: String,
    /// Matrix operators (GEMM, attention) with recorded shapes on each device's roofline,
    /// most GPU time first; empty without shapes or for GPUs without known peaks.
    pub roofline: Vec<crate::roofline::DeviceRoofline>,
    /// The software stack, layer by layer, with what needs attention.
    pub stack: Vec<crate::stack::StackFact>,
    /// Non-matrix operators (elementwise, reductions, norms, copies, optimizer kernels) on
    /// each device against its HBM roof, and how its kernel time splits between matrix,
    /// memory-bound, latency-bound and other kernels.
    pub membound: Vec<crate::membound::DeviceMembound>,
    /// Where each device's GPU time goes, whatever the cause: the largest operators under
    /// their Python frames, frames and kernels ([`crate::accounting`]), at most
    /// [`ACCOUNTING_ROWS`] of each.
    pub accounting: Vec<crate::accounting::DeviceAccounting>,
}

/// Rows of each list the summary keeps of the accounting (the JSON report's; the table prints
/// fewer).
pub const ACCOUNTING_ROWS: usize = 20;

/// Summarises a trace over the window of `cx`.
pub fn summarize(cx: &Ctx) -> TraceSummary {
    let t = cx.trace;
    let w = &cx.window;
    let mut devices = Vec::new();
    // Time and count per kernel name, by string id: summed as the ops go by, where a list of
    // every kernel sorted by name took an export's millions of them.
    let mut kernel_time: Vec<(i64, u64)> = vec![(0, 0); t.strings.len()];
    let mut kernels = 0u64;
    let exposure = cx.exposure();
    for d in t.devices() {
        let comm = exposure.iter().find(|e| e.device == d);
        let (mut k, mut c, mut s) = (0, 0, 0);
        for &i in t.device_ops(d) {
            let op = &t.gpu_ops[i as usize];
            if op.start < w.start || op.start >= w.end {
                continue;
            }
            match op.kind {
                GpuOpKind::Kernel => {
                    k += 1;
                    if let Some(e) = kernel_time.get_mut(op.name as usize) {
                        e.0 += op.dur();
                        e.1 += 1;
                    }
                }
                GpuOpKind::Memcpy => c += 1,
                GpuOpKind::Memset => s += 1,
                GpuOpKind::Sync => {}
            }
        }
        kernels += k;
        let busy = cx
            .idle()
            .iter()
            .find(|i| i.device == d)
            .map_or(0, |i| i.busy_ns);
        devices.push(DeviceSummary {
            device: d,
            name: t
                .meta
                .gpu(d)
                .filter(|g| !g.name.is_empty())
                .map(|g| g.name.clone()),
            busy_share: w.share(busy),
            kernels: k,
            memcpys: c,
            memsets: s,
            reserved_peak: mem_peak(cx, d, |m| m.total_reserved.get()),
            allocated_peak: mem_peak(cx, d, |m| m.total_allocated.get()),
            collective_share: comm.map_or(0.0, |e| w.share(e.collective_ns)),
            exposed_collective_share: comm.map_or(0.0, |e| w.share(e.exposed_ns)),
        });
    }
    let agg: Vec<(u32, i64, u64)> = (0u32..)
        .zip(kernel_time)
        .filter(|(_, (_, c))| *c > 0)
        .map(|(n, (d, c))| (n, d, c))
        .collect();
    let all: i64 = agg.iter().map(|a| a.1).sum();
    let top_kernel = agg
        .iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|&(n, d, c)| TopKernel {
            name: t.str(n).to_string(),
            count: c,
            total_ns: d,
            share_of_kernel_time: d as f64 / all.max(1) as f64,
        });
    let (bound, mut verdict) = verdict(cx, &devices);
    // Only a verdict on what the GPU did has a stretch to speak for.
    if !matches!(
        bound,
        Bound::NotRecorded
            | Bound::NoGpuActivity
            | Bound::Incomplete
            | Bound::Snapshot
            | Bound::LittleWork
            | Bound::LaunchesFailed
    ) && let Some(outside) = outside_gpu_stretch(cx)
    {
        verdict.push_str(&outside);
    }
    TraceSummary {
        window: w.clone(),
        devices,
        kernels,
        top_kernel,
        bound,
        verdict,
        roofline: cx.roofline().to_vec(),
        stack: cx.stack().to_vec(),
        membound: cx.membound().summary.clone(),
        accounting: cx
            .accounting()
            .iter()
            .map(|a| {
                let mut a = a.clone();
                a.holders.truncate(ACCOUNTING_ROWS);
                a.frames.truncate(ACCOUNTING_ROWS);
                a.kernels.truncate(ACCOUNTING_ROWS);
                a
            })
            .collect(),
    }
}

/// A window of GPU activity shorter than this share of the capture is said to be one: the
/// verdict speaks for that stretch, not for the program the capture recorded.
const GPU_STRETCH_SHARE: f64 = 0.5;

/// The span of what the capture records: its first to its last call, operator or GPU
/// operation. Annotations are left out: an NVTX range the program never closed ends where
/// the capture stopped, after the last thing it did (pyprof leaves hundreds open).
pub(crate) fn capture_span(t: &tracehound_parsers::Trace) -> Option<(i64, i64)> {
    t.host_spans
        .iter()
        .filter(|s| !matches!(s.kind, HostKind::Annotation | HostKind::GpuAnnotation))
        .map(|s| (s.start, s.end))
        .chain(
            t.gpu_ops
                .iter()
                .filter(|o| o.is_work())
                .map(|o| (o.start, o.end)),
        )
        .reduce(|(a, b), (s, e)| (a.min(s), b.max(e)))
}

/// The GPU's work and the stretch it spans, both under this share of the capture: the
/// capture holds a program's start-up or host side with a few GPU operations in it, too
/// little to say what bounds a workload (a learner's first kernel, an initialisation check).
const LITTLE_WORK_SHARE: f64 = 0.01;

/// GPU work under this much time, ns, is too little to judge as well: less than one training
/// or inference step of any real model. A real workload in a long capture (146 ms of copies in
/// a 40 s program) is judged on its stretch; a few microseconds of kernels are a test or an
/// initialisation.
const LITTLE_WORK_NS: f64 = 1e6;

/// When the GPU works under [`LITTLE_WORK_SHARE`] of a capture that runs from its first to its
/// last GPU operation, over a stretch under that share too, and for under [`LITTLE_WORK_NS`]:
/// how little, and what holds the capture instead (its longest CUDA call, and whether it was
/// the first of its name, before the GPU's first operation: CUDA start-up).
fn little_gpu_work(cx: &Ctx, main: &DeviceSummary) -> Option<(Bound, String)> {
    if cx.window.source != WindowSource::GpuActivity {
        return None;
    }
    let t = cx.trace;
    let (start, end) = capture_span(t)?;
    let capture = (end - start) as f64;
    let window = cx.window.len() as f64;
    let busy = main.busy_share * window;
    if capture <= 0.0
        || window >= LITTLE_WORK_SHARE * capture
        || busy >= LITTLE_WORK_SHARE * capture
        || busy >= LITTLE_WORK_NS
    {
        return None;
    }
    let calls = || {
        t.host_spans
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s.kind, HostKind::Runtime | HostKind::Driver))
    };
    let longest = calls().max_by(|a, b| a.1.dur().cmp(&b.1.dur()).then(b.0.cmp(&a.0)));
    let host = longest.map_or(String::new(), |(i, l)| {
        // CUDA starts up (creates the context, loads modules) inside the first calls that
        // need it, before the GPU's first operation.
        let first_of_name = calls()
            .filter(|(_, s)| s.name == l.name)
            .min_by(|a, b| a.1.start.cmp(&b.1.start).then(a.0.cmp(&b.0)))
            .is_some_and(|(j, _)| j == i);
        format!(
            "; the longest CUDA call, {} ({}{}), holds {:.0}% of it",
            crate::failures::call_name(t.str(l.name)),
            fmt_ns(l.dur()),
            if first_of_name && l.start <= cx.window.start {
                ", its first call: CUDA start-up, context creation and module loading"
            } else {
                ""
            },
            100.0 * l.dur() as f64 / capture
        )
    });
    Some((
        Bound::LittleWork,
        format!(
            "little GPU work: GPU {} works {} ({} {}, {} {}) in the {} the capture records ({:.2}%), too few operations to say what bounds a workload{host}. Profile a run that does real work: a larger input, repeated iterations after a warm-up.",
            main.device,
            fmt_ns(busy.round() as i64),
            main.kernels,
            if main.kernels == 1 {
                "kernel"
            } else {
                "kernels"
            },
            main.memcpys + main.memsets,
            if main.memcpys + main.memsets == 1 {
                "copy or memset"
            } else {
                "copies and memsets"
            },
            fmt_ns(capture as i64),
            100.0 * busy / capture
        ),
    ))
}

/// " The verdict covers …", when the window runs from the first to the last GPU operation and
/// the capture's host records reach well beyond it (a whole program under nsys: start-up before
/// its first kernel, host-side work or teardown after its last): an engineer timing the program
/// must not read a transfer-bound 146 ms as the verdict on a 40 s run.
fn outside_gpu_stretch(cx: &Ctx) -> Option<String> {
    if cx.window.source != WindowSource::GpuActivity {
        return None;
    }
    let (start, end) = capture_span(cx.trace)?;
    let capture = end - start;
    let window = cx.window.len();
    if capture <= 0 || window as f64 >= GPU_STRETCH_SHARE * capture as f64 {
        return None;
    }
    let before = (cx.window.start - start).max(0);
    let after = (end - cx.window.end).max(0);
    // Under a millisecond outside there is nothing to judge.
    if before + after < 1_000_000 {
        return None;
    }
    // Only the sides that hold time.
    let sides = match (before > 0, after > 0) {
        (true, true) => format!(
            "the {} before its first operation and the {} after its last hold",
            fmt_ns(before),
            fmt_ns(after)
        ),
        (true, false) => format!("the {} before its first operation holds", fmt_ns(before)),
        _ => format!("the {} after its last operation holds", fmt_ns(after)),
    };
    Some(format!(
        " This verdict covers the {} in which the GPU works, {:.1}% of the {} the capture records; {sides} host activity only (start-up, host-side work, teardown), not judged here{}.",
        fmt_ns(window),
        100.0 * window as f64 / capture as f64,
        fmt_ns(capture),
        sampled_before(cx.trace, start, cx.window.start),
    ))
}

/// Where the CPU samples (nsys `-s cpu`) taken in `[from, to)` fell, by function, when the
/// stretch holds enough of them and one function a quarter or more: what the host did before
/// the GPU's first operation (a field CUTLASS benchmark spent 11.8 s of its 12.35 s generating
/// its inputs, in `std::generate_canonical` and `uniform_real_distribution` by its samples,
/// which the verdict had left at "not judged here").
fn sampled_before(t: &tracehound_parsers::Trace, from: i64, to: i64) -> String {
    const MIN_SAMPLES: usize = 20;
    let mut by: rustc_hash::FxHashMap<u32, usize> = Default::default();
    let mut n = 0usize;
    for s in t.cpu_samples.iter().filter(|s| s.ts >= from && s.ts < to) {
        *by.entry(s.symbol).or_default() += 1;
        n += 1;
    }
    if n < MIN_SAMPLES {
        return String::new();
    }
    // Unresolved addresses name nothing.
    let mut top: Vec<(u32, usize)> = by
        .into_iter()
        .filter(|&(sym, _)| !t.str(sym).starts_with("0x"))
        .collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    // Samples spread thin (start-up's library loading, a little of everything) say nothing
    // about what held the host: one function must hold a quarter of them.
    if top.first().is_none_or(|&(_, k)| k * 4 < n) {
        return String::new();
    }
    let named: Vec<String> = top
        .iter()
        .take(3)
        .filter(|(_, k)| *k * 10 >= n)
        .map(|&(sym, k)| {
            format!(
                "{:.0}% in {}",
                100.0 * k as f64 / n as f64,
                crate::names::short_name(t.str(sym), 60)
            )
        })
        .collect();
    if named.is_empty() {
        return String::new();
    }
    format!(
        " ({n} CPU samples of the host before the first operation: {})",
        named.join(", ")
    )
}

/// A file cut short: the verdict says so and how far its records go, and draws no conclusion
/// from the part that is missing (what bounds a run cannot be judged from the part of it
/// that a cut happened to keep: Kineto writes the GPU's records after the host's).
fn incomplete(cx: &Ctx) -> Option<(Bound, String)> {
    let t = cx.trace;
    if !t.stats.truncated {
        return None;
    }
    let read = t.stats.incomplete.as_ref().map_or(String::new(), |i| {
        format!(" after {} complete events", i.events_read)
    });
    let origin = t.span().map_or(0, |s| s.0);
    let ms = |ns: i64| (ns - origin) as f64 / 1e6;
    let host_end = t.host_spans.iter().map(|s| s.end).max();
    let gpu_end = t
        .gpu_ops
        .iter()
        .filter(|o| o.is_work())
        .map(|o| o.end)
        .max();
    let reach = match (gpu_end, host_end) {
        (Some(g), Some(h)) if h > g => format!(
            "; its GPU records stop at {:.1} ms while the host's run on to {:.1} ms, so the window ends at {:.1} ms",
            ms(g),
            ms(h),
            ms(g)
        ),
        (Some(g), _) => format!("; its last GPU record ends at {:.1} ms", ms(g)),
        (None, Some(h)) => format!(
            "; it holds host records up to {:.1} ms and no GPU record: the profiler writes the GPU's records after the host's, so the cut took them all and the file says nothing about the GPU",
            ms(h)
        ),
        _ => String::new(),
    };
    let held = if gpu_end.is_some() {
        " The GPU records it holds are real, so findings about them stand as lower bounds; the records it lacks are missing from all through the timeline (the profiler does not write them in time order), so idle time, busy share and waits are not judged (idle_gaps, step_outliers, launch_bound, exposed_communication and recompilation are not run)."
    } else {
        ""
    };
    Some((
        Bound::Incomplete,
        format!(
            "incomplete capture: the file ends before the trace does{read}{reach}.{held} No verdict is drawn on what bounds the run. Capture again and let the profiler finish writing (export_chrome_trace or on_trace_ready returning, nsys export completing) before copying the file."
        ),
    ))
}

/// Share of the window from which unified-memory migrations (what the faults hold of the
/// kernels that faulted and of the idle time) make the verdict: then they, not the kernels or
/// the host, bound the run.
const UNIFIED_SHARE: f64 = 0.5;

/// When half the kernel launches or more failed: the kernels did not run, and neither the
/// GPU's idle time nor missing kernel records say anything about performance.
fn launches_failed(cx: &Ctx) -> Option<(Bound, String)> {
    let f = crate::failures::failures(cx.trace)?;
    let failed = f.failed_launches();
    let all = f.launch_calls.max(failed);
    if failed == 0 || 2 * failed < all {
        return None;
    }
    Some((
        Bound::LaunchesFailed,
        format!(
            "launches failed: {failed} of {all} kernel launches returned an error ({}), so {} and the capture says nothing about performance: make the program run first (see failed_calls), then profile again.",
            crate::failures::list(&f.launches),
            if failed == all {
                "no kernel ran"
            } else {
                "most kernels never ran"
            }
        ),
    ))
}

/// When the capture recorded no kernels: what it holds instead, and why nothing can be said
/// about kernel time. None when kernels were recorded.
fn kernels_not_recorded(cx: &Ctx, devices: &[DeviceSummary]) -> Option<(Bound, String)> {
    if cx.trace.meta.capture.kernels {
        return None;
    }
    let launches = crate::failures::launch_calls(cx.trace);
    let copies: u64 = devices.iter().map(|d| d.memcpys + d.memsets).sum();
    if launches == 0 && copies == 0 {
        return None;
    }
    // The runtime calls were recorded and none launched a kernel: the program ran copies only
    // (a transfer benchmark, a data-movement phase), and the copies are all there is to judge.
    let memcpys: u64 = devices.iter().map(|d| d.memcpys).sum();
    if launches == 0 && memcpys > 0 && cx.trace.meta.capture.api_calls {
        return None;
    }
    let mut held = Vec::new();
    if launches > 0 {
        held.push(format!("{launches} kernel launches"));
    }
    if copies > 0 {
        held.push(format!("{copies} copies and memsets"));
    }
    Some((
        Bound::NotRecorded,
        format!(
            "kernels not recorded: the capture holds {} but no kernel records, so it cannot say where GPU time went. GPU kernel tracing was off or could not run (nsys profile without -t cuda, CUPTI unavailable as under WSL2, a profiler run without ProfilerActivity.CUDA): capture again with kernel activity on.",
            held.join(" and ")
        ),
    ))
}

/// The rate of each direction of copies on `device` in the window, largest volume first
/// (`HtoD 1.0 GiB at 53.2 GB/s, DtoH 1.0 GiB at 51.9 GB/s`).
fn copy_rates(cx: &Ctx, device: i32) -> String {
    copies_by_direction(cx, device)
        .iter()
        .map(|c| {
            format!(
                "{} {} at {:.1} GB/s{}",
                c.direction.label(),
                crate::finding::fmt_bytes(c.bytes),
                c.bytes as f64 / c.ns.max(1) as f64,
                match (c.pinned, c.pageable, c.other) {
                    (true, false, false) => " (pinned)",
                    (false, true, false) => " (pageable)",
                    (true, true, false) => " (pinned and pageable)",
                    _ => "",
                }
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The copies of one direction on a device in the window.
struct DirectionCopies {
    direction: tracehound_parsers::CopyDirection,
    bytes: u64,
    ns: i64,
    count: u64,
    /// Some are from or to pinned host memory.
    pinned: bool,
    /// Some are from or to pageable host memory.
    pageable: bool,
    /// Some are between device memory and host memory of unstated pageability (ROCm), or
    /// within the device.
    other: bool,
}

/// The device's copies in the window by direction, most bytes first.
fn copies_by_direction(cx: &Ctx, device: i32) -> Vec<DirectionCopies> {
    use tracehound_parsers::MemKind;
    let t = cx.trace;
    let mut by: Vec<DirectionCopies> = Vec::new();
    for &i in t.device_ops(device) {
        let op = &t.gpu_ops[i as usize];
        if op.kind != GpuOpKind::Memcpy || op.start < cx.window.start || op.start >= cx.window.end {
            continue;
        }
        let e = match by.iter().position(|e| e.direction == op.direction) {
            Some(k) => &mut by[k],
            None => {
                by.push(DirectionCopies {
                    direction: op.direction,
                    bytes: 0,
                    ns: 0,
                    count: 0,
                    pinned: false,
                    pageable: false,
                    other: false,
                });
                let k = by.len() - 1;
                &mut by[k]
            }
        };
        e.bytes += op.bytes;
        e.ns += op.dur();
        e.count += 1;
        let pinned = op.src_kind == MemKind::Pinned || op.dst_kind == MemKind::Pinned;
        let pageable = op.is_pageable_copy();
        e.pinned |= pinned;
        e.pageable |= pageable;
        e.other |= !pinned && !pageable;
    }
    by.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.direction.cmp(&b.direction)));
    by
}

/// What the host side of a device's copies is.
enum Pinning {
    SomePageable,
    AllPinned,
    /// Neither: host memory of unstated pageability (ROCm), or copies within the device.
    Unknown,
}

fn pinning(cx: &Ctx, device: i32) -> Pinning {
    use tracehound_parsers::CopyDirection;
    // Host copies only: a copy within the device has no host side to pin.
    let by: Vec<DirectionCopies> = copies_by_direction(cx, device)
        .into_iter()
        .filter(|c| matches!(c.direction, CopyDirection::HtoD | CopyDirection::DtoH))
        .collect();
    if by.iter().any(|c| c.pageable) {
        Pinning::SomePageable
    } else if !by.is_empty() && by.iter().all(|c| c.pinned && !c.other) {
        Pinning::AllPinned
    } else {
        Pinning::Unknown
    }
}

/// Copies of at least this many bytes are large: batching them saves nothing, as per-copy
/// overhead (a few µs) is under 1% of their time at PCIe rates.
const LARGE_COPY_BYTES: u64 = 4 << 20;

/// Whether copies under [`LARGE_COPY_BYTES`] hold at least half of the device's copy time in
/// the window (an average would let a few huge copies hide thousands of small ones).
fn small_copies(cx: &Ctx, device: i32) -> bool {
    let t = cx.trace;
    let (small, all) = t
        .device_ops(device)
        .iter()
        .map(|&i| &t.gpu_ops[i as usize])
        .filter(|op| {
            op.kind == GpuOpKind::Memcpy && op.start >= cx.window.start && op.start < cx.window.end
        })
        .fold((0i64, 0i64), |(s, a), op| {
            (
                s + if op.bytes < LARGE_COPY_BYTES {
                    op.dur()
                } else {
                    0
                },
                a + op.dur(),
            )
        });
    all > 0 && 2 * small >= all
}

/// Share of the window `device` spends in copies and memsets, and in kernels (each the union
/// of its intervals).
fn copy_and_kernel_share(cx: &Ctx, device: i32) -> (f64, f64) {
    let share = |pick: &dyn Fn(GpuOpKind) -> bool| {
        cx.window
            .share(busy_total_of(cx.trace, device, &cx.window, |op| {
                pick(op.kind)
            }))
    };
    (
        share(&|k| matches!(k, GpuOpKind::Memcpy | GpuOpKind::Memset)),
        share(&|k| k == GpuOpKind::Kernel),
    )
}

/// Graph capture holding at least half the window makes the window a warm-up phase.
pub(crate) const CAPTURE_SHARE: f64 = 0.5;

/// Whether graph capture holds at least [`CAPTURE_SHARE`] of the window: a one-time warm-up
/// phase whose idle time says nothing about the steady state.
pub(crate) fn window_is_graph_capture(cx: &Ctx) -> bool {
    cx.window.share(cx.graph_captures().in_window(&cx.window)) >= CAPTURE_SHARE
}

/// Copies (and memsets) hold the GPU longer than kernels do, and for at least half the window
/// or in a window the GPU is busy [`BUSY_SHARE`] of: the run is moving data more than
/// computing, and faster kernels would not shorten it. Below that, what the rest of the window holds (idle time, kernels) bounds the
/// run and the copies are a finding of their own.
const TRANSFER_SHARE: f64 = 0.5;

fn verdict(cx: &Ctx, devices: &[DeviceSummary]) -> (Bound, String) {
    let (bound, text) = verdict_of(cx, devices);
    // The shares a busy/idle verdict states are the steady state's (see `steady_state`); where
    // that differs from the summary's busy line, the verdict says what it left out.
    let shares = matches!(
        bound,
        Bound::Gpu | Bound::LaunchHost | Bound::Input | Bound::Communication
    );
    let left_out = busiest(devices).and_then(|main| {
        let steady = steady_state(cx, main);
        let pct = |x: f64| (100.0 * x).round() as i64;
        if pct(steady.busy_share) == pct(main.busy_share) {
            return None;
        }
        cx.idle()
            .iter()
            .find(|d| d.device == main.device)?
            .warm_up_words()
    });
    match left_out {
        Some(what) if shares => (
            bound,
            format!("{text} (These shares leave out {what}: not the program's steady state.)"),
        ),
        _ => (bound, text),
    }
}

/// What a capture without GPU records still says about the host: its annotation ranges (NVTX,
/// `record_function`), the outermost ones by total time (a TensorRT capture's 21,998 NVTX
/// ranges, without CUDA tracing, said nothing before: its `3D_backbone` holds 3.0 s of 7.5).
/// None without annotations.
fn annotated_host_time(t: &tracehound_parsers::Trace) -> Option<String> {
    let annotation = |i: u32| t.host_spans[i as usize].kind == HostKind::Annotation;
    let mut by_name: rustc_hash::FxHashMap<u32, (u64, i64)> = Default::default();
    let mut ranges = 0u64;
    for (i, s) in t.host_spans.iter().enumerate() {
        if s.kind != HostKind::Annotation {
            continue;
        }
        ranges += 1;
        if t.ancestors(i as u32).any(annotation) {
            continue;
        }
        let e = by_name.entry(s.name).or_default();
        e.0 += 1;
        e.1 += s.dur();
    }
    if ranges == 0 {
        return None;
    }
    let mut top: Vec<(u32, (u64, i64))> = by_name.into_iter().collect();
    top.sort_by(|a, b| b.1.1.cmp(&a.1.1).then_with(|| t.str(a.0).cmp(t.str(b.0))));
    let (first, last) = (
        t.host_spans.iter().map(|s| s.start).min()?,
        t.host_spans.iter().map(|s| s.end).max()?,
    );
    let listed: Vec<String> = top
        .iter()
        .take(3)
        .map(|(name, (n, ns))| format!("`{}` {} ×{n}", t.str(*name), fmt_ns(*ns)))
        .collect();
    Some(format!(
        " Its host threads hold {ranges} annotation range{} (NVTX, record_function) over {}; the outermost by total time (summed over their calls): {}.",
        if ranges == 1 { "" } else { "s" },
        fmt_ns(last - first),
        listed.join(", ")
    ))
}

/// The device a verdict is about: the busiest (the lowest index among equals).
fn busiest(devices: &[DeviceSummary]) -> Option<&DeviceSummary> {
    devices.iter().max_by(|a, b| {
        a.busy_share
            .total_cmp(&b.busy_share)
            .then(b.device.cmp(&a.device))
    })
}

fn verdict_of(cx: &Ctx, devices: &[DeviceSummary]) -> (Bound, String) {
    if let Some(v) = incomplete(cx) {
        return v;
    }
    if let Some(v) = launches_failed(cx) {
        return v;
    }
    if let Some(v) = kernels_not_recorded(cx, devices) {
        return v;
    }
    let Some(main) = busiest(devices) else {
        if let Some((gpu, m)) = counter_utilisation(cx) {
            let bound = if m >= 70.0 {
                Bound::Gpu
            } else {
                Bound::Underutilised
            };
            return (
                bound,
                format!(
                    "{bound}: nvidia-smi reports GPU {gpu} utilisation (time with a kernel running) at {m:.0}% on average while the job runs{}",
                    if m >= 70.0 {
                        "."
                    } else {
                        "; capture a profiler trace to see why the GPU waits."
                    }
                ),
            );
        }
        if !cx.trace.inventory.is_empty() {
            return (
                Bound::Snapshot,
                "An nvidia-smi snapshot: inventory checks only, no activity over time.".into(),
            );
        }
        if !cx.trace.counters.is_empty() {
            return (
                Bound::NoGpuActivity,
                "The nvidia-smi log shows no period of GPU activity to judge.".into(),
            );
        }
        let why = &cx.trace.meta.capture.no_gpu_data;
        let ranges = annotated_host_time(cx.trace).unwrap_or_default();
        return (
            Bound::NoGpuActivity,
            if why.is_empty() {
                format!(
                    "No GPU activity recorded: the capture holds no kernel, copy or kernel-launch records, so it says nothing about the GPU (the profiler recorded the CPU only, or GPU tracing was off: ProfilerActivity.CUDA, nsys profile -t cuda).{ranges}"
                )
            } else {
                format!(
                    "No GPU activity recorded: the capture holds no kernel, copy or kernel-launch records, so it says nothing about the GPU: {why}.{ranges}"
                )
            },
        );
    };
    if let Some(v) = little_gpu_work(cx, main) {
        return v;
    }
    // The verdict judges the steady state: the profiler's start-up hole is the profiler's, and
    // in a short window it is most of the idle time (a 5.8 ms window of four 0.6 ms steps, the
    // GPU busy through each, opened with 2.9 ms of it and was called host-bound at 43% busy).
    let steady = steady_state(cx, main);
    let main = &steady;
    let busy = main.busy_share;
    let captures = cx.graph_captures();
    let (capture_ns, captured) = (captures.in_window(&cx.window), captures.launches);
    if window_is_graph_capture(cx) {
        return (
            Bound::GraphCapture,
            format!(
                "graph capture: {:.0}% of the window is CUDA/HIP graph capture ({captured} launches recorded into a graph, not run), a one-time warm-up: GPU {}'s idle time here says nothing about the steady state. Profile the steps that replay the graph.",
                100.0 * cx.window.share(capture_ns),
                main.device
            ),
        );
    }
    // Pages migrating on demand: the kernels and the idle time they hold are data movement,
    // not compute or a slow host.
    if let Some(m) = crate::unified::migrations(cx, main.device)
        && cx.window.share(m.cost_ns) >= UNIFIED_SHARE
    {
        return (
            Bound::Transfer,
            format!(
                "transfer-bound on unified memory: GPU {} spends {:.0}% of the window on managed-memory pages migrating on demand ({} migrations in, {} out): they hold {} of the kernels that faulted pages in, and the host's page faults hold {} of idle time. {}",
                main.device,
                100.0 * cx.window.share(m.cost_ns),
                m.htod.count,
                m.dtoh.count,
                crate::finding::fmt_ns(m.fault_stall_ns),
                crate::finding::fmt_ns(m.host_fault_ns),
                if crate::unified::prefetch_undone(&m) {
                    "The program prefetches, but as much went back to the host on demand before the next kernel ran: the host touches managed memory between the prefetch and the kernels (see unified_memory)."
                } else {
                    "Prefetch or copy the data explicitly (see unified_memory)."
                }
            ),
        );
    }
    let (copy_share, kernel_share) = copy_and_kernel_share(cx, main.device);
    if kernel_share == 0.0 && main.memcpys > 0 && crate::failures::launch_calls(cx.trace) == 0 {
        return (
            Bound::Transfer,
            format!(
                "transfer-bound: the program launched no kernel in this capture; GPU {} is busy {:.0}% of the window, all of it copying data ({}). What bounds it is the copy path: the host link and the host memory behind it.",
                main.device,
                100.0 * busy,
                copy_rates(cx, main.device)
            ),
        );
    }
    if copy_share > kernel_share && (copy_share >= TRANSFER_SHARE || busy >= BUSY_SHARE) {
        return (
            Bound::Transfer,
            format!(
                "transfer-bound: GPU {} is busy {:.0}% of the window, {:.0}% of the window copying data ({}) and {:.0}% running kernels: {}{}{}.",
                main.device,
                100.0 * busy,
                100.0 * copy_share,
                copy_rates(cx, main.device),
                100.0 * kernel_share,
                // "Between steps" only where there are steps: a one-shot program (a benchmark
                // that copies its inputs in and its results out once) has none to keep data
                // across.
                if matches!(cx.window.source, WindowSource::Steps { .. }) {
                    "keep data on the GPU between steps instead of copying it back and forth"
                } else {
                    "moving the data decides its time; data that crosses the link more than once (a result copied back, then sent again) can stay on the GPU"
                },
                // Pinning is advice only where copies are pageable; "already pinned" only where
                // every copy is.
                match pinning(cx, main.device) {
                    Pinning::SomePageable => {
                        ", copy from pinned memory so copies run at the link's rate and overlap compute"
                    }
                    // Pinned but slow for the link: the copy path is the problem.
                    Pinning::AllPinned
                        if !crate::rules::pinned_copy_rate::slow_copies(cx, main.device)
                            .is_empty() =>
                    {
                        " (the copies are pinned but run under half of what the host link carries: see pinned_copy_rate)"
                    }
                    Pinning::AllPinned => {
                        " (the copies are already pinned: only moving fewer bytes, or overlapping them with compute, shortens this)"
                    }
                    Pinning::Unknown => "",
                },
                // Batching is advice only where copies are small.
                if small_copies(cx, main.device) {
                    ", and batch many small copies into few large ones"
                } else {
                    ""
                }
            ),
        );
    }
    // Collectives that run with nothing beside them may be spinning while other ranks arrive:
    // busy, but not with this rank's work.
    if busy >= BUSY_SHARE
        && busy - main.exposed_collective_share < BUSY_SHARE
        && main.exposed_collective_share >= 0.25
    {
        return (
            Bound::Communication,
            format!(
                "communication-bound: GPU {} is busy {:.0}% of the window, but {:.0}% of the window is collective communication with no compute beside it (waiting for other ranks or transferring): analyse the job's ranks together (tracehound analyze DIR) to see who waits for whom.",
                main.device,
                100.0 * busy,
                100.0 * main.exposed_collective_share
            ),
        );
    }
    if busy >= BUSY_SHARE {
        return (Bound::Gpu, gpu_bound(cx, main));
    }
    let Some(idle) = cx.idle().iter().find(|d| d.device == main.device) else {
        return (
            Bound::NoGpuActivity,
            "No GPU activity in the window.".into(),
        );
    };
    let kinds = idle.by_kind();
    let gap_ns = idle.gap_ns();
    let short = idle.short_idle_ns;
    let loading = kinds
        .iter()
        .find(|k| k.0 == CauseKind::DataLoading)
        .map_or(0, |k| k.1);
    let top = kinds.first().map(|k| k.0);
    let cause = match top {
        Some(k) => format!(
            "{} {:.0}% of the idle time in gaps ≥ {}",
            k.label(),
            100.0 * kinds[0].1 as f64 / gap_ns.max(1) as f64,
            fmt_ns(cx.config.gap_threshold_ns)
        ),
        None => "idle time spread over short gaps".into(),
    };
    let median = median_kernel_ns(cx, main.device);
    if let Some(v) = cold_start(cx, main, idle) {
        return v;
    }
    if let Some(v) = one_off_stall(cx, main, idle) {
        return v;
    }
    if loading * 2 >= gap_ns + short && loading > 0 {
        return (
            Bound::Input,
            format!(
                "input-bound: GPU {} idles {:.0}% of the window waiting for data loading ({cause}).",
                main.device,
                100.0 * (1.0 - busy)
            ),
        );
    }
    // A framework phase or another thread holding most of the idle time is named as what
    // held the host, not as a launch rate.
    if let Some(&(k, ns)) = kinds.first()
        && matches!(
            k,
            CauseKind::Compile | CauseKind::GarbageCollection | CauseKind::Gil
        )
        && 2 * ns >= gap_ns
    {
        // Compilation holding half the idle time in at most one step of the window, none of
        // it a recompilation, is a warm-up captured, not the loop: a field capture of one
        // torch.compile'd convolution (79% compiling, 19% first calls) was called host-bound.
        // Compilation in several steps, or recompiling, is the loop's own cost.
        let recompiles = cx
            .compilations()
            .iter()
            .any(|c| c.is_recompile() && c.start < cx.window.end && c.end > cx.window.start);
        if k == CauseKind::Compile && !recompiles {
            let compile_steps = cx
                .window
                .steps_overlapping(cx.trace)
                .filter(|s| {
                    idle.costly_gaps().any(|g| {
                        g.start < s.end
                            && g.end > s.start
                            && g.parts.iter().any(|p| p.kind == CauseKind::Compile)
                    })
                })
                .count();
            let first_calls = kinds
                .iter()
                .find(|k| k.0 == CauseKind::ModuleLoad)
                .map_or(0, |k| k.1);
            let once = ns + first_calls;
            if compile_steps <= 1 {
                return (
                    Bound::ColdStart,
                    format!(
                        "cold start: GPU {} idles {:.0}% of the window, and {:.0}% of that idle time is torch.compile compiling ({}) and first calls ({}) — paid once, not the steady state. Warm up before measuring: {}.",
                        main.device,
                        100.0 * (1.0 - busy),
                        100.0 * once as f64 / (gap_ns + short).max(1) as f64,
                        fmt_ns(ns),
                        fmt_ns(first_calls),
                        profile_past_it(cx),
                    ),
                );
            }
        }
        let who = match k {
            CauseKind::Compile => "torch.compile compiling".to_string(),
            CauseKind::GarbageCollection => "garbage collection".to_string(),
            _ => match idle.costly_gaps().find_map(|g| g.gil_holder.clone()) {
                Some(t) => format!("another thread holding the GIL ({t})"),
                None => "another thread holding the GIL".to_string(),
            },
        };
        return (
            Bound::LaunchHost,
            format!(
                "launch/host bound: GPU {} idles {:.0}% of the window while the host is held by {who} ({:.0}% of the idle time in gaps ≥ {}).",
                main.device,
                100.0 * (1.0 - busy),
                100.0 * ns as f64 / gap_ns.max(1) as f64,
                fmt_ns(cx.config.gap_threshold_ns)
            ),
        );
    }
    let syncs = sync_drained(cx, main, &kinds, gap_ns + short);
    if let Some((share, parts)) = &syncs
        && *share >= 0.5
    {
        return (
            Bound::LaunchHost,
            format!(
                "launch/host bound, on host synchronisations: GPU {} idles {:.0}% of the window, {:.0}% of that idle time around syncs that drained its queue ({parts}). {SYNC_ADVICE}",
                main.device,
                100.0 * (1.0 - busy),
                100.0 * share,
            ),
        );
    }
    // Syncs holding a large part, not most: the launch rate's verdict, and the syncs beside it.
    let beside = match &syncs {
        Some((share, parts)) if *share >= SYNC_MENTION => format!(
            " {:.0}% of the idle time is around syncs that drained the queue ({parts}): {SYNC_ADVICE}",
            100.0 * share
        ),
        _ => String::new(),
    };
    // Kineto's Python tracer (with_stack=True) slows Python code several-fold: a verdict
    // that Python holds the host, measured under it, says so.
    let tracer = if top == Some(CauseKind::Python) && cx.trace.meta.capture.python_frames {
        " Python frames were recorded (with_stack=True), and the Python tracer itself can slow Python code several-fold: confirm the cost in a capture without it before optimising."
    } else {
        ""
    };
    // Short gaps are named only where there are some (ten 400 MB copies and ten kernels leave
    // none: "0 ns more in 0 gaps" said nothing).
    let shorter = if idle.short_count > 0 {
        format!(
            "; {} more in {} gaps < {}",
            fmt_ns(short),
            idle.short_count,
            fmt_ns(cx.config.gap_threshold_ns)
        )
    } else {
        String::new()
    };
    // A host that lags no further behind than the profiler's own recording explains is the
    // capture's bound, not surely the program's: said so, with the timing that settles it.
    let profiler = match crate::profiled::within_profiler_slowdown(cx, main.device) {
        Some((ratio, _))
            if top.is_none_or(|k| matches!(k, CauseKind::LaunchOverhead | CauseKind::Untraced)) =>
        {
            format!(
                " Under the profiler: {}, so outside it the GPU may keep up; time a step without the profiler before optimising launches.",
                crate::profiled::lag_words(ratio)
            )
        }
        _ => String::new(),
    };
    (
        Bound::LaunchHost,
        format!(
            "launch/host bound: GPU {} idles {:.0}% of the window because the host does not queue work fast enough ({cause}{shorter}; median kernel {}).{beside}{tracer}{profiler}",
            main.device,
            100.0 * (1.0 - busy),
            fmt_ns(median)
        ),
    )
}

/// The main device's summary with its busy share taken over the window less the idle time
/// that is not the program's steady state (the profiler's start-up hole, its own buffer work,
/// graph capture); unchanged where there is none.
fn steady_state(cx: &Ctx, main: &DeviceSummary) -> DeviceSummary {
    let warm = cx
        .idle()
        .iter()
        .find(|d| d.device == main.device)
        .map_or(0, |d| d.warm_up_ns());
    let len = cx.window.len();
    if warm <= 0 || warm >= len {
        return main.clone();
    }
    let steady = (len - warm) as f64;
    let scale = len as f64 / steady;
    DeviceSummary {
        busy_share: (main.busy_share * scale).min(1.0),
        collective_share: (main.collective_share * scale).min(1.0),
        exposed_collective_share: (main.exposed_collective_share * scale).min(1.0),
        ..main.clone()
    }
}

/// From this share of the idle time up, host synchronisations are named beside a launch/host
/// verdict; from half up they are the verdict's cause.
const SYNC_MENTION: f64 = 1.0 / 3.0;

/// What a verdict that names host synchronisations advises.
const SYNC_ADVICE: &str = "each sync empties the queue and the host relaunches onto an idle GPU: remove the syncs; faster launches do not shorten these waits, and a CUDA graph cannot capture a sync.";

/// The share of the idle time (`idle_ns`) around host synchronisations, and its parts as text:
/// gaps ≥ the threshold with the host blocked in a sync, short gaps after a sync drained the
/// queue and launch waits of a loop that reads each result on the host (sync_stalls'), and
/// launch waits of operators that synchronise on most calls (launch_bound's). There the host is slow because it waits for the GPU and relaunches onto
/// an empty queue, not because launches are slow. `None` without any.
fn sync_drained(
    cx: &Ctx,
    main: &DeviceSummary,
    kinds: &[(CauseKind, i64)],
    idle_ns: i64,
) -> Option<(f64, String)> {
    let t = cx.trace;
    let dev = cx.starved().iter().find(|s| s.device == main.device)?;
    let long: i64 = kinds
        .iter()
        .filter(|k| k.0 == CauseKind::HostSync)
        .map(|k| k.1)
        .sum();
    let drained: i64 = dev.drained().map(|s| s.gap_ns).sum();
    let read_back: i64 = dev.read_back().map(|s| s.gap_ns).sum();
    let mut waits = crate::starved::WaitsByOperator::default();
    // As launch_bound counts them: the waits another finding prices are its.
    let handed = crate::rules::handed(cx);
    for s in dev.launch_bound() {
        if !handed.any(dev.device, s.op) {
            crate::starved::add_wait(&mut waits, t, s);
        }
    }
    let (ops, in_ops) = crate::starved::syncing_operators(cx, &waits);
    let sync_ns = long + drained + read_back + in_ops;
    if sync_ns <= 0 || idle_ns <= 0 {
        return None;
    }
    let threshold = fmt_ns(cx.config.gap_threshold_ns);
    let mut parts: Vec<String> = Vec::new();
    if long > 0 {
        parts.push(format!(
            "{} in gaps ≥ {threshold} blocked in syncs",
            fmt_ns(long)
        ));
    }
    if drained > 0 {
        parts.push(format!(
            "{} in short gaps right after syncs, see sync_stalls",
            fmt_ns(drained)
        ));
    }
    if read_back > 0 {
        parts.push(format!(
            "{} in the launches of a loop that reads each result on the host, see sync_stalls",
            fmt_ns(read_back)
        ));
    }
    if in_ops > 0 {
        parts.push(format!(
            "{} in the launches of operators that synchronise on most calls: {}",
            fmt_ns(in_ops),
            ops.join(", ")
        ));
    }
    Some((sync_ns as f64 / idle_ns as f64, parts.join("; ")))
}

/// The GPU-bound verdict: busy, and what bounds the kernels, from their time shares
/// ([`crate::membound::DeviceMembound::bound`]): memory-bound operators at the bandwidth they
/// reach against the HBM roof, matrix kernels, or kernels too small to reach either roof.
/// nvidia-smi's memory-controller utilisation is cited beside a memory-bound verdict when a
/// log was given.
fn gpu_bound(cx: &Ctx, main: &DeviceSummary) -> String {
    let verdict = gpu_bound_by_kind(cx, main);
    // Where the kind of kernel work is known, the verdict says it, and the summary's "where
    // the GPU time goes" rows name the operators; where it is not (no shapes, no operators: a
    // CUDA C or CuPy program), the holder is all there is to say, and it says more than the
    // generic ending.
    match (
        verdict.strip_suffix(EFFICIENCY_DECIDES),
        dominant(cx, main.device),
    ) {
        (Some(head), Some(d)) => format!("{head}. {d}"),
        _ => verdict,
    }
}

/// "One kernel, X, holds 69% of the GPU time (1.53 s in 26 calls): …", when, in a program
/// without framework operators (CUDA C, CuPy, Julia), one kernel holds at least
/// [`DOMINANT_SHARE`] of the device's GPU time. (In a PyTorch trace the summary's "where the
/// GPU time goes" rows name the operators, and hot_operator the ones that run badly.)
fn dominant(cx: &Ctx, device: i32) -> Option<String> {
    let a = cx.accounting().iter().find(|a| a.device == device)?;
    let (k, _) = crate::accounting::dominant_kernel(cx, a)?;
    Some(format!(
        "One kernel, {}, holds {:.0}% of the GPU time ({} in {}): its speed decides the run; the capture records no counters for it, so profile it with Nsight Compute{} to see what bounds it.",
        crate::names::short_name(&k.name, 80),
        100.0 * k.share,
        fmt_ns(k.gpu_ns),
        crate::accounting::calls_text(k),
        crate::names::ncu_command(&k.name),
    ))
}

/// " aten::_fused_adamw_ holds 88% of the GPU time, at 69% of its roof: …", when one operator
/// outside matrix work holds at least [`crate::accounting::DOMINANT_SHARE`] of a memory-bound
/// device's GPU time and runs near its roof: the bytes the verdict speaks of are its bytes,
/// and hot_operator, which names holders far from their roof
/// ([`crate::rules::hot_operator::FAR_FROM_ROOF`]), does not name it. Empty otherwise.
fn memory_holder(cx: &Ctx, device: i32) -> String {
    use crate::accounting::OpFamily;
    let Some(h) = cx
        .accounting()
        .iter()
        .find(|a| a.device == device)
        .and_then(|a| a.holders.first())
        .filter(|h| h.share >= crate::accounting::DOMINANT_SHARE && !h.matrix_work)
    else {
        return String::new();
    };
    let Some(roof) = h
        .roof_share
        .filter(|&r| r >= crate::rules::hot_operator::FAR_FROM_ROOF)
    else {
        return String::new();
    };
    let at = h
        .frame
        .as_ref()
        .map(|f| format!(" at {f}"))
        .unwrap_or_default();
    let roof = format!(", at {:.0}% of its roof", 100.0 * roof);
    let what = match h.family {
        // A fused or foreach step reads and writes every parameter and its state each step,
        // however few of them the step's gradients touched.
        OpFamily::Optimizer => {
            ": an optimizer step reads and writes every parameter and its state, so where most parameters are rows a step never touches (an embedding table with dense gradients), nn.Embedding(sparse=True) with torch.optim.SparseAdam updates only the rows used; otherwise fewer or narrower optimizer states (bf16 or 8-bit moments) move fewer bytes"
        }
        _ => {
            ": near its roof, only less work of it (fewer calls, smaller tensors, narrower dtypes) shortens the step"
        }
    };
    format!(
        " {}{at} holds {:.0}% of the GPU time{roof}{what}.",
        h.op,
        100.0 * h.share
    )
}

/// The rate of the matrix operators that the HBM roof bounds at their recorded shapes on
/// `device`: TB/s of their minimum traffic, its share of HBM, the GPU model, its HBM TB/s and
/// their GPU time; `None` when the roofline has none.
fn matrix_memory_rate(cx: &Ctx, device: i32) -> Option<(f64, f64, &'static str, f64, i64)> {
    let r = cx.roofline().iter().find(|r| r.device == device)?;
    let (bytes, ns) = r
        .rows
        .iter()
        .filter(|x| x.bound == crate::roofline::RoofBound::Memory)
        .fold((0.0, 0i64), |(b, n), x| (b + x.bytes, n + x.time_ns));
    if ns == 0 {
        return None;
    }
    let tb = bytes / (ns as f64 / 1e9) / 1e12;
    Some((
        tb,
        tb / r.peaks.mem_tbps,
        r.peaks.model,
        r.peaks.mem_tbps,
        ns,
    ))
}

/// How the GPU-bound verdict ends when nothing more is known of the kernels.
const EFFICIENCY_DECIDES: &str = ", so kernel efficiency decides the step time.";

/// The GPU-bound verdict's kind of kernel work.
fn gpu_bound_by_kind(cx: &Ctx, main: &DeviceSummary) -> String {
    use crate::membound::KernelBound;
    let head = format!(
        "GPU-bound: GPU {} is busy {:.0}% of the window",
        main.device,
        100.0 * main.busy_share
    );
    let Some(m) = cx.membound().summary_of(main.device) else {
        return format!("{head}{EFFICIENCY_DECIDES}");
    };
    let pct = |ns: i64| 100.0 * m.share(ns);
    let rest = |skip: KernelBound| {
        let mut parts = Vec::new();
        for (b, ns, what) in [
            (KernelBound::Compute, m.matrix_ns, "matrix kernels"),
            (KernelBound::Memory, m.memory_ns, "memory-bound kernels"),
            (KernelBound::Latency, m.latency_ns, "latency-bound kernels"),
            (
                KernelBound::Parallelism,
                m.parallelism_ns,
                "kernels on a few SMs",
            ),
        ] {
            if b != skip && m.share(ns) >= 0.05 {
                parts.push(format!("{:.0}% {what}", pct(ns)));
            }
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    };
    match m.bound {
        Some(KernelBound::Memory) => {
            // Where no other operator's bytes are modelled, the memory-bound kernels are
            // matrix operators under the HBM roof at their intensity (a GEMV, tiny batched
            // products): their recorded shapes give the rate.
            let matrix = m
                .tbps
                .is_none()
                .then(|| matrix_memory_rate(cx, main.device))
                .flatten();
            let rate = match (m.tbps, m.hbm_share, m.model, m.hbm_tbps) {
                (Some(tb), Some(share), Some(model), Some(peak)) => format!(
                    " at {tb:.2} TB/s ({:.0}% of the {model}'s {peak:.1} TB/s HBM, over the {:.0}% of kernel time with recorded shapes)",
                    100.0 * share,
                    pct(m.modelled_ns)
                ),
                (Some(tb), ..) => format!(" at {tb:.2} TB/s (HBM peak of this GPU unknown)"),
                _ => match matrix {
                    Some((tb, share, model, peak, covered)) => format!(
                        " at {tb:.2} TB/s ({:.0}% of the {model}'s {peak:.1} TB/s HBM, over the {:.0}% of kernel time in matrix operators under the HBM roof at their shapes)",
                        100.0 * share,
                        pct(covered)
                    ),
                    None => " (by kernel names: shapes not recorded, so no bandwidth)".into(),
                },
            };
            let smi = memory_controller(cx, main.device)
                .map(|u| format!("; nvidia-smi: memory-controller utilisation {u:.0}% on average"))
                .unwrap_or_default();
            // Matrix products far below the HBM roof: how they are computed decides, not the
            // bytes (a batch of tiny matrices in a GEMM kernel).
            let matrix_share = matrix.map(|r| r.1);
            let what = match m.hbm_share.or(matrix_share) {
                Some(s) if s < 0.7 && m.hbm_share.is_none() => {
                    "the matrix products that hold it run far below the HBM roof at their shapes, so how they are computed decides the step time, not the bytes they move (see the roofline finding)"
                }
                Some(s) if s >= 0.7 => {
                    "they already stream near the roof, so faster kernels cannot help: only moving fewer bytes does (fewer passes over the same tensors, narrower dtypes)"
                }
                Some(_) => {
                    "bytes moved decide the step time: fuse passes over the same tensors (torch.compile, fused F.* ops), and see why kernels stay below the roof (small or strided tensors)"
                }
                None => "bytes moved decide the step time: fuse passes over the same tensors",
            };
            format!(
                "{head}, memory-bound{rate}: {:.0}% of kernel time is memory-bound operators{}{smi}; {what}.{}",
                pct(m.memory_ns),
                rest(KernelBound::Memory),
                memory_holder(cx, main.device)
            )
        }
        Some(KernelBound::Compute) => {
            // Matrix kernels are compute-bound only when their shapes give enough FLOPs per
            // byte: a decode step's GEMMs (a few rows per weight read) sit under the HBM roof.
            let (under_hbm, over) = cx
                .roofline()
                .iter()
                .filter(|r| r.device == main.device)
                .flat_map(|r| r.rows.iter())
                .fold((0i64, 0i64), |(a, b), r| match r.bound {
                    crate::roofline::RoofBound::Memory => (a + r.time_ns, b),
                    crate::roofline::RoofBound::Compute => (a, b + r.time_ns),
                });
            if under_hbm > over {
                format!(
                    "{head}, memory-bound matrix work: {:.0}% of kernel time is matrix kernels (GEMM, convolution, attention){}, and {:.0}% of those with recorded shapes run shapes with too few FLOPs per byte to reach the compute roof (few rows per weight read, as in decoding): the bytes they read decide the step time, so more rows per call (batching requests or tokens) or narrower weights help, and faster math does not.",
                    pct(m.matrix_ns),
                    rest(KernelBound::Compute),
                    100.0 * under_hbm as f64 / (under_hbm + over).max(1) as f64
                )
            } else if over == 0 {
                format!(
                    "{head}, matrix kernels hold the time: {:.0}% of kernel time is matrix kernels (GEMM, convolution, attention){}; their shapes were not recorded, so whether compute or memory bounds them is not known.",
                    pct(m.matrix_ns),
                    rest(KernelBound::Compute)
                )
            } else if let Some(share) = matrix_near_roof(cx, main.device) {
                let other = 1.0 - m.share(m.matrix_ns);
                format!(
                    "{head}, compute-bound: {:.0}% of kernel time is matrix kernels (GEMM, convolution, attention){}, already at {:.0}% of their tensor-core roof (time-weighted, over those with recorded shapes): faster matrix kernels have little left to give; {}",
                    pct(m.matrix_ns),
                    rest(KernelBound::Compute),
                    100.0 * share,
                    if other >= 0.1 {
                        format!(
                            "the other {:.0}% of kernel time is where the step shortens.",
                            100.0 * other
                        )
                    } else {
                        "less matrix work, or narrower math where accuracy allows, is what shortens the step.".to_string()
                    }
                )
            } else {
                format!(
                    "{head}, compute-bound: {:.0}% of kernel time is matrix kernels (GEMM, convolution, attention){}, so their efficiency decides the step time.",
                    pct(m.matrix_ns),
                    rest(KernelBound::Compute)
                )
            }
        }
        Some(KernelBound::Latency) => format!(
            "{head}, latency-bound kernels: {:.0}% of kernel time is kernels too small to reach the memory or compute roof (under {} of traffic at the HBM roof, or shorter than {}){}: fewer, larger kernels (batching work, fusing with torch.compile) decide the step time.",
            pct(m.latency_ns),
            fmt_ns(crate::membound::LATENCY_ROOF_NS as i64),
            fmt_ns(crate::membound::LATENCY_KERNEL_NS),
            rest(KernelBound::Latency)
        ),
        Some(KernelBound::Parallelism) => format!(
            "{head}, in kernels that use a few of its SMs: {:.0}% of kernel time is kernels launched with at most a quarter as many blocks as the GPU has SMs{}, which neither stream from HBM nor fill the compute units: their parallelism decides the step time, not bytes or FLOPs (see underfilled_kernels for which; an operator with a parallel form, or more independent work per launch, is the change).",
            pct(m.parallelism_ns),
            rest(KernelBound::Parallelism)
        ),
        None => format!("{head}{EFFICIENCY_DECIDES}"),
    }
}

/// The share of their roof the matrix kernels of `device` reach, weighted by time, when it is
/// at least the achievable 70% ([`crate::roofline::ACHIEVABLE`]; attention against its own
/// 45%) and all of their time with recorded shapes runs on tensor cores: FP32 on CUDA cores or FP64 near their own roof is still far from what tensor
/// cores do (tensor_cores says so), so no "little left to give" there.
fn matrix_near_roof(cx: &Ctx, device: i32) -> Option<f64> {
    use crate::hardware::Math;
    let rows: Vec<&crate::roofline::RoofRow> = cx
        .roofline()
        .iter()
        .filter(|r| r.device == device)
        .flat_map(|r| r.rows.iter())
        .collect();
    let time: i64 = rows.iter().map(|r| r.time_ns).sum();
    if time <= 0
        || rows
            .iter()
            .any(|r| matches!(r.math, Math::Fp32 | Math::Fp64))
    {
        return None;
    }
    // Against what is achievable: attention at its 45% counts as a matrix product at 70%.
    let effective: f64 = rows
        .iter()
        .map(|r| {
            let scale = if r.attention {
                crate::roofline::ACHIEVABLE / crate::roofline::ACHIEVABLE_ATTENTION
            } else {
                1.0
            };
            r.time_ns as f64 * r.roof_share * scale
        })
        .sum::<f64>()
        / time as f64;
    let share: f64 = rows
        .iter()
        .map(|r| r.time_ns as f64 * r.roof_share)
        .sum::<f64>()
        / time as f64;
    (effective >= crate::roofline::ACHIEVABLE).then_some(share)
}

/// Mean nvidia-smi memory-controller utilisation (%) of `gpu` over the counter window, when a
/// log with it was given and saw the GPU work (a log whose SM % stays at 0 while the trace's
/// GPU is busy watched another GPU or another time, and its memory % says nothing).
fn memory_controller(cx: &Ctx, gpu: i32) -> Option<f64> {
    let w = crate::counters::counter_window(cx, gpu)?;
    let mean = |metric: &str| {
        let s = crate::counters::series(cx.trace, gpu, metric)?;
        crate::counters::mean(
            crate::counters::in_window(cx.trace, s, &w)
                .iter()
                .map(|x| x.1),
        )
    };
    mean("sm").filter(|&sm| sm >= 1.0)?;
    mean("mem")
}

/// The advice for a window that is not the steady state: what to profile instead.
/// How to capture past the first calls, in the program's terms.
fn profile_past_it(cx: &Ctx) -> &'static str {
    if cx.pytorch() {
        "profile past it with torch.profiler.schedule(wait=1, warmup=2, active=3) (or warm-up iterations before nsys's capture range)"
    } else {
        "run a warm-up iteration and capture only what follows (cudaProfilerStart/Stop with nsys --capture-range=cudaProfilerApi)"
    }
}

/// A gap left beside a cold start's first calls is a one-off of its own when it holds half the
/// idle time they leave and a quarter of the window they leave: the one-off stall's shares,
/// applied to what is left.
const REST_STALL_IDLE_SHARE: f64 = 0.5;
const REST_STALL_WINDOW_SHARE: f64 = 0.25;

fn cold_start(
    cx: &Ctx,
    main: &DeviceSummary,
    idle: &crate::idle::DeviceIdle,
) -> Option<(Bound, String)> {
    let first_calls = idle.cold_start_ns()?;
    let mut rest = rest_busy(cx, main, first_calls, "them");
    // What is left can itself be one gap no first call explains (untraced host code before a
    // scripted function's first run, a file read): the steady state is then what lies outside
    // both, and calling the rest host-bound would blame the loop for a one-off.
    if let Some((g, other)) = idle
        .costly_gaps()
        .map(|g| {
            let other: i64 = g
                .parts
                .iter()
                .filter(|p| p.kind != crate::idle::CauseKind::ModuleLoad)
                .map(|p| p.ns)
                .sum();
            (g, other)
        })
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.start.cmp(&a.0.start)))
    {
        let remaining_idle = idle.idle_ns() - first_calls;
        let remaining = cx.window.len() - first_calls;
        if remaining_idle > 0
            && other as f64 >= REST_STALL_IDLE_SHARE * remaining_idle as f64
            && other as f64 >= REST_STALL_WINDOW_SHARE * remaining as f64
        {
            rest = format!(
                "{}; one {} gap {} ({}) holds {:.0}% of that idle time{}",
                rest_busy_share(cx, main, first_calls, "them"),
                fmt_ns(g.end - g.start),
                crate::idle::gap_position(&cx.window, g),
                g.label,
                100.0 * other as f64 / remaining_idle as f64,
                rest_busy(cx, main, first_calls + other, "it too"),
            );
        }
    }
    Some((
        Bound::ColdStart,
        format!(
            "cold start: GPU {} idles {:.0}% of the window, and {:.0}% of that idle time is first calls (module loading, library and handle start-up, JIT: {}) — paid once, not the steady state{rest}. Warm up before measuring: {}; CUDA_MODULE_LOADING=EAGER moves module loading to start-up.",
            main.device,
            100.0 * (1.0 - main.busy_share),
            100.0 * first_calls as f64 / idle.idle_ns() as f64,
            fmt_ns(first_calls),
            profile_past_it(cx),
        ),
    ))
}

fn one_off_stall(
    cx: &Ctx,
    main: &DeviceSummary,
    idle: &crate::idle::DeviceIdle,
) -> Option<(Bound, String)> {
    let g = idle.one_off_stall(cx.window.len())?;
    let len = g.end - g.start;
    let rest = rest_busy(cx, main, len, "it");
    Some((
        Bound::Stall,
        format!(
            "one-off stall: a single {} gap {} holds {:.0}% of GPU {}'s idle time ({}){rest}. {}.",
            fmt_ns(len),
            crate::idle::gap_position(&cx.window, g),
            100.0 * len as f64 / idle.idle_ns() as f64,
            main.device,
            g.label,
            crate::idle::stall_meaning(&cx.window, g, cx.pytorch())
        ),
    ))
}

/// How busy the GPU is in the window without `excluded_ns` of idle time, without a reading:
/// "; outside them GPU 0 is busy 20% of the remaining 463.3 ms".
fn rest_busy_share(cx: &Ctx, main: &DeviceSummary, excluded_ns: i64, pronoun: &str) -> String {
    let rest = cx.window.len() - excluded_ns;
    if rest <= 0 {
        return String::new();
    }
    let busy_ns = main.busy_share * cx.window.len() as f64;
    format!(
        "; outside {pronoun} GPU {} is busy {:.0}% of the remaining {}",
        main.device,
        100.0 * (busy_ns / rest as f64).min(1.0),
        fmt_ns(rest)
    )
}

/// How busy the GPU is in the window without `excluded_ns` of idle time, and what that
/// makes the rest: "; outside it GPU 0 is busy 95% (GPU-bound there)".
fn rest_busy(cx: &Ctx, main: &DeviceSummary, excluded_ns: i64, pronoun: &str) -> String {
    let rest = cx.window.len() - excluded_ns;
    if rest <= 0 {
        return String::new();
    }
    let busy_ns = main.busy_share * cx.window.len() as f64;
    let share = (busy_ns / rest as f64).min(1.0);
    // Busy is not compute: collectives with nothing beside them hold the GPU while it waits
    // for other ranks or moves data.
    let collective_ns = main.exposed_collective_share * cx.window.len() as f64;
    let what = if share >= BUSY_SHARE && 2.0 * collective_ns >= busy_ns {
        format!(
            "communication-bound there: {:.0}% of that busy time is collectives with no compute beside them",
            100.0 * collective_ns / busy_ns.max(1.0)
        )
    } else if share >= BUSY_SHARE {
        "GPU-bound there".to_string()
    } else if 2.0 * collective_ns >= busy_ns && busy_ns > 0.0 {
        // Collectives that hold the little busy time there may be waiting for a late rank,
        // not moving data: busy there is not work.
        format!(
            "the host holds it back there too, and {:.0}% of that busy time is collectives with no compute beside them, whose time includes waiting for the other ranks",
            100.0 * collective_ns / busy_ns
        )
    } else {
        "the host holds it back there too".to_string()
    };
    format!(
        "; outside {pronoun} GPU {} is busy {:.0}% of the remaining {} ({what})",
        main.device,
        100.0 * share,
        fmt_ns(rest)
    )
}

/// Mean SM % of the first GPU with counters over its active period.
fn counter_utilisation(cx: &Ctx) -> Option<(i32, f64)> {
    let gpu = *crate::counters::gpus(cx.trace).first()?;
    let w = crate::counters::counter_window(cx, gpu)?;
    let m = crate::counters::mean(
        crate::counters::loaded(cx.trace, gpu, &w)
            .iter()
            .map(|x| x.1),
    )?;
    Some((gpu, m))
}

fn mem_peak(
    cx: &Ctx,
    device: i32,
    f: impl Fn(&tracehound_parsers::MemorySample) -> Option<i64>,
) -> Option<i64> {
    memory_in_window(cx.trace, &cx.window, device)
        .filter_map(f)
        .max()
}

fn median_kernel_ns(cx: &Ctx, device: i32) -> i64 {
    let t = cx.trace;
    let mut d: Vec<i64> = t
        .device_ops(device)
        .iter()
        .map(|&i| &t.gpu_ops[i as usize])
        .filter(|o| o.kind == GpuOpKind::Kernel)
        .map(|o| o.dur())
        .collect();
    if d.is_empty() {
        return 0;
    }
    let mid = d.len() / 2;
    *d.select_nth_unstable(mid).1
}

/// Short kernel name for tables.
pub fn short_kernel(name: &str) -> String {
    short_name(name, 70)
}

#[cfg(test)]
mod tests {
    use super::Bound;

    #[test]
    fn nsight_compute_matches_the_function_s_own_name() {
        use crate::names::ncu_function_name as n;
        assert_eq!(
            n("calcAllLowestResidualsGPU").as_deref(),
            Some("calcAllLowestResidualsGPU")
        );
        assert_eq!(
            n("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)").as_deref(),
            Some("vectorized_elementwise_kernel")
        );
        assert_eq!(
            n("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4>(float*)").as_deref(),
            Some("cunn_SoftMaxForward")
        );
        assert_eq!(
            n("(anonymous namespace)::stencil_kernel(float*)").as_deref(),
            Some("stencil_kernel")
        );
        assert_eq!(n("(anonymous namespace)::(unnamed)"), None);
    }

    #[test]
    fn a_bound_is_written_and_printed_as_the_verdict_names_it() {
        for (b, text) in [
            (Bound::Gpu, "GPU-bound"),
            (Bound::Communication, "communication-bound"),
            (Bound::Input, "input-bound"),
            (Bound::LaunchHost, "launch/host bound"),
            (Bound::Underutilised, "underutilised"),
            (Bound::Snapshot, "snapshot"),
            (Bound::NoGpuActivity, "no GPU activity"),
        ] {
            assert_eq!(b.to_string(), text);
            let json = serde_json::to_string(&b).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Bound>(&json).unwrap(), b);
        }
        assert_eq!(format!("[{:<12}]", Bound::Input), "[input-bound ]");
    }

    /// A step of one in-place add over two 4 GiB tensors (3 ms on an H200), with an
    /// nvidia-smi log at `sm`% SM and 88% memory controller, sampled every millisecond (the
    /// window's own resolution: a 1 s sample over a 3 ms window would describe nothing).
    fn streaming(sm: f64) -> tracehound_parsers::Trace {
        use tracehound_parsers::*;
        let mut tb = crate::testutil::TB::new();
        tb.span(HostKind::CpuOp, "aten::add_", 0, 50_000);
        let args = OpArgs {
            input_dims: tb.t.strings.intern("[[1073741824], [1073741824], []]"),
            input_types: tb.t.strings.intern(r#"["float", "float", "Scalar"]"#),
            call_stack: 0,
        };
        tb.t.host_spans.last_mut().unwrap().args = tb.t.args.intern(args);
        tb.op(
            GpuOpKind::Kernel,
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)",
            7,
            100_000,
            3_040_000,
            Some(10_000),
        );
        let mut t = tb.build();
        t.meta.capture.kernels = true;
        t.meta.gpus.push(GpuInfo {
            id: 0,
            name: "NVIDIA H200".into(),
            ..Default::default()
        });
        t.meta.capture.counter_period = Some(CounterPeriod {
            ns: 1_000_000,
            measured: true,
        });
        for (metric, v) in [("sm", sm), ("mem", 88.0)] {
            t.counters.push(CounterSeries {
                gpu: 0,
                metric: metric.into(),
                unit: "%".into(),
                samples: (0..4).map(|k| (k * 1_000_000, v)).collect(),
            });
        }
        t
    }

    /// A 40 ms stall on the host (a CPU operator that launches nothing), then a 20 ms
    /// all-gather with nothing beside it among 2 ms of compute: a one-off stall, and what is
    /// left of the window is busy, but busy with a collective, so it is communication-bound
    /// there, not GPU-bound (issue 40: busy is not compute).
    #[test]
    fn the_rest_of_a_stalled_window_that_is_collectives_is_communication_bound_there() {
        use tracehound_parsers::*;
        let ms = 1_000_000;
        let mut tb = crate::testutil::TB::new();
        tb.op(
            GpuOpKind::Kernel,
            "void at::native::vectorized_elementwise_kernel<4>(int)",
            7,
            0,
            ms,
            Some(0),
        );
        tb.span(
            HostKind::CpuOp,
            "aten::randn",
            ms + ms / 2,
            40 * ms + ms / 2,
        );
        tb.op(
            GpuOpKind::Kernel,
            "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            9,
            41 * ms,
            61 * ms,
            Some(40 * ms + 600_000),
        );
        tb.op(
            GpuOpKind::Kernel,
            "void at::native::vectorized_elementwise_kernel<4>(int)",
            7,
            61 * ms,
            62 * ms,
            Some(40 * ms + 700_000),
        );
        let mut t = tb.build();
        t.meta.capture.kernels = true;
        let config = crate::Config::default();
        let s = super::summarize(&crate::context::Ctx::new(&t, &config));
        assert_eq!(s.bound, Bound::Stall, "{}", s.verdict);
        assert!(
            s.verdict
                .contains("(communication-bound there: 91% of that busy time is collectives"),
            "{}",
            s.verdict
        );
        assert!(!s.verdict.contains("GPU-bound there"), "{}", s.verdict);
    }

    /// Copies that hold a busy GPU longer than kernels bound it, whether or not they reach
    /// twice the kernels' time (OpenSIFT's separable convolution: copies 52% of the window,
    /// kernels 36%); kernels that hold it longer keep it GPU-bound.
    #[test]
    fn copies_longer_than_kernels_in_a_busy_window_are_transfer_bound() {
        use tracehound_parsers::*;
        let ms = 1_000_000;
        for (kernel_ms, copy_ms, bound) in [
            (36, 52, Bound::Transfer),
            (35, 40, Bound::Transfer),
            (45, 40, Bound::Gpu),
            // Busy 65%, copies under half the window: not transfer-bound (its one idle gap,
            // 35 ms, bounds it).
            (30, 35, Bound::Stall),
        ] {
            let mut tb = crate::testutil::TB::new();
            tb.op(
                GpuOpKind::Kernel,
                "conv_x(float*)",
                7,
                0,
                kernel_ms * ms,
                Some(0),
            );
            tb.op(
                GpuOpKind::Memcpy,
                "Memcpy DtoH (Device -> Pageable)",
                7,
                kernel_ms * ms,
                (kernel_ms + copy_ms) * ms,
                Some(1_000),
            )
            .bytes(1 << 28);
            // A last 1 µs kernel closes the window at 100 ms: the rest is idle.
            tb.op(
                GpuOpKind::Kernel,
                "conv_y(float*)",
                7,
                100 * ms - 1_000,
                100 * ms,
                Some(99 * ms),
            );
            let mut t = tb.build();
            t.meta.capture.kernels = true;
            let config = crate::Config::default();
            let s = super::summarize(&crate::context::Ctx::new(&t, &config));
            assert_eq!(s.bound, bound, "{kernel_ms}/{copy_ms}: {}", s.verdict);
        }
    }

    #[test]
    fn a_streaming_step_is_memory_bound_at_its_bandwidth_with_the_memory_controller_beside_it() {
        let config = crate::Config::default();
        let t = streaming(95.0);
        let s = super::summarize(&crate::context::Ctx::new(&t, &config));
        assert_eq!(s.bound, Bound::Gpu);
        // 12.9 GB in 2.94 ms: 4.38 TB/s, 91% of 4.8.
        assert!(
            s.verdict
                .contains("memory-bound at 4.38 TB/s (91% of the H200 SXM's 4.8 TB/s HBM"),
            "{}",
            s.verdict
        );
        assert!(
            s.verdict.contains("memory-controller utilisation 88%"),
            "{}",
            s.verdict
        );
        // A log that saw no SM activity watched something else: not cited.
        let t = streaming(0.0);
        let s = super::summarize(&crate::context::Ctx::new(&t, &config));
        assert!(!s.verdict.contains("nvidia-smi"), "{}", s.verdict);
    }
}
