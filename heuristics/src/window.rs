//! The analysed window and the GPU busy timeline every rule shares.
//!
//! Kineto traces cover only the profiled steps, but an nsys capture covers start-up too, so
//! rules judge the span of the `ProfilerStep#N` markers when there are any. GPU work
//! launched inside the last step but finishing after its CPU-side end still belongs to it.

use crate::config::Config;
use serde::Serialize;
use tracehound_parsers::{MemorySample, NONE, Trace};

/// A GPU busy this share of the window is bound by what keeps it busy (kernels, copies or
/// collectives), not by the host.
pub const BUSY_SHARE: f64 = 0.7;

/// Where the window's bounds came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WindowSource {
    /// The profiler step markers.
    Steps {
        /// First step number.
        first: i64,
        /// Last step number.
        last: i64,
        /// Number of steps.
        count: usize,
    },
    /// First to last GPU operation (no step markers).
    GpuActivity,
    /// First to last event (no GPU activity at all).
    WholeTrace,
    /// Set by the user (`--window`).
    User,
    /// The file is cut short: from the first step (or GPU operation) to where its GPU records
    /// stop, since what the GPU did after that point is not in the file.
    CutShort,
}

/// The part of the timeline the rules judge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    /// Start, trace timeline ns.
    pub start: i64,
    /// End, trace timeline ns.
    pub end: i64,
    /// Where it came from.
    pub source: WindowSource,
}

impl Window {
    /// Length in ns (at least 1, so shares never divide by zero).
    pub fn len(&self) -> i64 {
        (self.end - self.start).max(1)
    }

    /// True when the window has no length.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// Profiler steps that start in the window.
    pub fn steps_in(&self, trace: &Trace) -> usize {
        trace
            .steps
            .iter()
            .filter(|s| s.start >= self.start && s.start < self.end)
            .count()
    }

    /// Profiler steps that overlap the window, in start order.
    pub fn steps_overlapping<'t>(
        &self,
        trace: &'t Trace,
    ) -> impl Iterator<Item = &'t tracehound_parsers::Step> + 't {
        let (start, end) = (self.start, self.end);
        trace
            .steps
            .iter()
            .filter(move |s| s.end > start && s.start < end)
    }

    /// `ns` as a share of the window.
    pub fn share(&self, ns: i64) -> f64 {
        ns as f64 / self.len() as f64
    }

    /// Offset of `t` from the window start in ms.
    pub fn offset_ms(&self, t: i64) -> f64 {
        ((t - self.start) as f64 / 1e4).round() / 100.0
    }

    /// Kernels of `device` that start inside the window, in start order, with their index
    /// in `trace.gpu_ops` (for the launch and operator indexes).
    pub fn kernels<'t>(
        &self,
        trace: &'t Trace,
        device: i32,
    ) -> impl Iterator<Item = (usize, &'t tracehound_parsers::GpuOp)> + 't {
        let (start, end) = (self.start, self.end);
        trace.device_ops(device).iter().filter_map(move |&i| {
            let op = &trace.gpu_ops[i as usize];
            (op.kind == tracehound_parsers::GpuOpKind::Kernel
                && op.start >= start
                && op.start < end)
                .then_some((i as usize, op))
        })
    }

    /// Each thread's outermost CPU operators that start inside the window, in start order, one
    /// iterator per thread: an operator that starts before the last outermost one ended is
    /// nested in it (spans nest on a thread), so no walk up the tree is needed.
    pub fn outermost_ops<'t>(
        &self,
        trace: &'t Trace,
    ) -> impl Iterator<Item = impl Iterator<Item = u32> + 't> + 't {
        let (start, end) = (self.start, self.end);
        trace.index.spans_by_thread.iter().map(move |(_, spans)| {
            let mut outer_end = i64::MIN;
            spans.iter().copied().filter(move |&i| {
                let s = &trace.host_spans[i as usize];
                if s.kind != tracehound_parsers::HostKind::CpuOp || s.start < outer_end {
                    return false;
                }
                outer_end = s.end;
                s.start >= start && s.start < end
            })
        })
    }

    /// Human description (`steps 0-4 (5 steps)`).
    pub fn describe(&self) -> String {
        match &self.source {
            WindowSource::Steps { first, last, count } => {
                format!("ProfilerStep#{first}..#{last} ({count} steps)")
            }
            WindowSource::GpuActivity => "first to last GPU operation (no step markers)".into(),
            WindowSource::WholeTrace => "the whole trace (no GPU activity)".into(),
            WindowSource::User => "set with --window".into(),
            WindowSource::CutShort => "up to where the cut file's GPU records stop".into(),
        }
    }
}

/// Computes the analysed window of a trace. In a file cut short the window ends where its GPU
/// records stop: Kineto writes the host's records before the GPU's, so past that point the
/// host's steps run on with no GPU record beside them, and idle time there would be made up.
pub fn analysed_window(trace: &Trace, config: &Config) -> Window {
    let w = recorded_window(trace, config);
    if !trace.stats.truncated || w.source == WindowSource::User {
        return w;
    }
    match trace
        .gpu_ops
        .iter()
        .filter(|o| o.is_work())
        .map(|o| o.end)
        .max()
    {
        Some(last) if last < w.end => Window {
            start: w.start.min(last),
            end: last,
            source: WindowSource::CutShort,
        },
        _ => w,
    }
}

/// The window the trace's own records give: the user's, the steps', the GPU's or the whole
/// trace.
fn recorded_window(trace: &Trace, config: &Config) -> Window {
    if let Some((start, end)) = config.window {
        return Window {
            start,
            end,
            source: WindowSource::User,
        };
    }
    if let (Some(first), Some(last)) = (trace.steps.first(), trace.steps.last()) {
        let start = first.start;
        let cpu_end = trace.steps.iter().map(|s| s.end).max().unwrap_or(last.end);
        // On all cores: each op reads its launch call, a span anywhere in the list, and
        // nothing else runs while the window is found.
        use rayon::prelude::*;
        let end = trace
            .gpu_ops
            .par_iter()
            .enumerate()
            .with_min_len(1 << 12)
            .filter(|(i, op)| {
                if !op.is_work() {
                    return false;
                }
                let launch = trace.index.op_launch.get(*i).copied().unwrap_or(NONE);
                if launch != NONE {
                    let l = &trace.host_spans[launch as usize];
                    l.start >= start && l.start <= cpu_end
                } else {
                    op.start >= start && op.start <= cpu_end
                }
            })
            .map(|(_, op)| op.end)
            .reduce(|| cpu_end, i64::max);
        return Window {
            start,
            end,
            source: WindowSource::Steps {
                first: first.number,
                last: last.number,
                count: trace.steps.len(),
            },
        };
    }
    let mut gpu = trace.gpu_ops.iter().filter(|o| o.is_work());
    if let Some(first) = gpu.next() {
        let (s, e) = gpu.fold((first.start, first.end), |(s, e), o| {
            (s.min(o.start), e.max(o.end))
        });
        return Window {
            start: s,
            end: e,
            source: WindowSource::GpuActivity,
        };
    }
    let (start, end) = trace.span().unwrap_or((0, 0));
    Window {
        start,
        end,
        source: WindowSource::WholeTrace,
    }
}

/// The union of GPU work (kernels, copies, memsets; all streams) on `device`, clipped to
/// the window, as sorted disjoint intervals.
pub fn busy_intervals(trace: &Trace, device: i32, window: &Window) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for_each_busy(trace, device, window, |iv| out.push(iv));
    out
}

/// The total length of the union of the operations `pick` keeps (only kernels, only copies
/// ...) on `device`, clipped to the window: [`total`] of their intervals, without the list
/// (an export's millions of them).
pub fn busy_total_of(
    trace: &Trace,
    device: i32,
    window: &Window,
    pick: impl Fn(&tracehound_parsers::GpuOp) -> bool,
) -> i64 {
    let mut sum = 0;
    union_of(trace, device, window, pick, |(s, e)| sum += e - s);
    sum
}

/// Hands `emit` each of [`busy_intervals`], in time order, without the list.
pub fn for_each_busy(trace: &Trace, device: i32, window: &Window, emit: impl FnMut((i64, i64))) {
    union_of(trace, device, window, |op| op.is_work(), emit);
}

/// Hands `emit` the union of the picked ops' intervals on `device`, cut to `window`, each
/// interval once it is complete, in time order.
fn union_of(
    trace: &Trace,
    device: i32,
    window: &Window,
    pick: impl Fn(&tracehound_parsers::GpuOp) -> bool,
    mut emit: impl FnMut((i64, i64)),
) {
    let mut run: Option<(i64, i64)> = None;
    for &i in trace.device_ops(device) {
        let op = &trace.gpu_ops[i as usize];
        if !pick(op) {
            continue;
        }
        let (s, e) = (op.start.max(window.start), op.end.min(window.end));
        if e <= s {
            continue;
        }
        match &mut run {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => {
                if let Some(done) = run.replace((s, e)) {
                    emit(done);
                }
            }
        }
    }
    if let Some(done) = run {
        emit(done);
    }
}

/// Total length of sorted disjoint intervals.
pub fn total(intervals: &[(i64, i64)]) -> i64 {
    intervals.iter().map(|(s, e)| e - s).sum()
}

/// Devices with allocator events, ascending (events without a device left out).
pub fn memory_devices(trace: &Trace) -> Vec<i32> {
    devices_of(trace.memory.iter())
}

/// The devices of `samples`, ascending, without collecting one entry per event (a large
/// trace has hundreds of thousands of them and a few devices), events without a device left
/// out.
pub fn devices_of<'t>(samples: impl Iterator<Item = &'t MemorySample>) -> Vec<i32> {
    let mut devices: Vec<i32> = Vec::new();
    for m in samples {
        if m.device >= 0 && devices.last() != Some(&m.device) && !devices.contains(&m.device) {
            devices.push(m.device);
        }
    }
    devices.sort_unstable();
    devices
}

/// The allocator events inside the window: a slice of the trace's, which the model sorts
/// by time.
fn memory_window<'t>(trace: &'t Trace, window: &Window) -> &'t [MemorySample] {
    let m = &trace.memory;
    let from = m.partition_point(|s| s.ts < window.start);
    let to = m.partition_point(|s| s.ts <= window.end).max(from);
    &m[from..to]
}

/// The allocator events of `device` inside the window, in time order.
pub fn memory_in_window<'t>(
    trace: &'t Trace,
    window: &Window,
    device: i32,
) -> impl Iterator<Item = &'t MemorySample> {
    memory_window(trace, window)
        .iter()
        .filter(move |m| m.device == device)
}

/// The allocator events of one device inside the window, in time order, for rules that read
/// them more than once ([`device_memory`]).
pub enum DeviceMemory<'t> {
    /// The trace's own events: no other device's lie among them (one GPU per file, the
    /// usual case).
    Slice(&'t [MemorySample]),
    /// The device's events picked out from among other devices'.
    Picked(Vec<&'t MemorySample>),
}

impl<'t> DeviceMemory<'t> {
    /// Number of events.
    pub fn len(&self) -> usize {
        match self {
            DeviceMemory::Slice(s) => s.len(),
            DeviceMemory::Picked(v) => v.len(),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `k` events (all of them when there are fewer), in time order.
    pub fn first(&self, k: usize) -> impl DoubleEndedIterator<Item = &'t MemorySample> + '_ {
        let (own, picked): (&'t [MemorySample], &[&'t MemorySample]) = match self {
            DeviceMemory::Slice(s) => (&s[..k.min(s.len())], &[]),
            DeviceMemory::Picked(v) => (&[], &v[..k.min(v.len())]),
        };
        own.iter().chain(picked.iter().copied())
    }

    /// Every event, in time order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &'t MemorySample> + '_ {
        self.first(self.len())
    }

    /// The number of leading events for which `pred` holds (they are in time order, so a
    /// predicate on the time splits them once).
    pub fn partition_point(&self, mut pred: impl FnMut(&MemorySample) -> bool) -> usize {
        match self {
            DeviceMemory::Slice(s) => s.partition_point(pred),
            DeviceMemory::Picked(v) => v.partition_point(|m| pred(m)),
        }
    }
}

/// The allocator events of `device` inside the window, borrowed from the trace when no other
/// device's lie among them: a list of references to every event cost 8 bytes an event, 4 MB
/// on the 1 GB benchmark trace for each rule reading them, for what is usually a slice.
pub fn device_memory<'t>(trace: &'t Trace, window: &Window, device: i32) -> DeviceMemory<'t> {
    let inside = memory_window(trace, window);
    if inside.iter().all(|m| m.device == device) {
        DeviceMemory::Slice(inside)
    } else {
        DeviceMemory::Picked(inside.iter().filter(|m| m.device == device).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracehound_parsers::*;

    fn op(device: i32, stream: i64, start: i64, end: i64) -> GpuOp {
        GpuOp::new(GpuOpKind::Kernel, device, stream, start, end, 0)
    }

    #[test]
    fn overlapping_streams_merge() {
        let mut t = Trace {
            gpu_ops: vec![
                op(0, 7, 0, 100),
                op(0, 8, 50, 150),
                op(0, 7, 300, 400),
                op(1, 7, 0, 1000),
            ],
            ..Default::default()
        };
        t.finish();
        let w = analysed_window(&t, &Config::default());
        assert_eq!((w.start, w.end), (0, 1000));
        assert_eq!(busy_intervals(&t, 0, &w), vec![(0, 150), (300, 400)]);
        assert_eq!(total(&busy_intervals(&t, 1, &w)), 1000);
        for d in [0, 1] {
            assert_eq!(
                busy_total_of(&t, d, &w, |op| op.is_work()),
                total(&busy_intervals(&t, d, &w))
            );
        }
    }

    #[test]
    fn empty_trace_window() {
        let t = Trace::default();
        let w = analysed_window(&t, &Config::default());
        assert!(w.is_empty());
        assert_eq!(w.len(), 1);
    }
}
