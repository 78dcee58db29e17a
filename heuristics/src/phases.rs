//! Framework phases that the program passes through once and that are not its steady state:
//! CUDA/HIP graph capture today. The idle engine names gaps inside them as what they are
//! and keeps them out of the steady-state idle time; the verdict says when one fills the
//! window.

use crate::window::Window;
use tracehound_parsers::{HostKind, Trace};

/// The host's CUDA/HIP graph captures: each from a `StreamBeginCapture` call to the next
/// `StreamEndCapture` on the same thread, sorted, and the kernel launches recorded into them
/// (launches inside a capture are recorded into the graph, not run).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GraphCaptures {
    /// (start, end) of each capture, ns, sorted by start.
    pub intervals: Vec<(i64, i64)>,
    /// Kernel launches made while a capture was open on their thread.
    pub launches: usize,
}

impl GraphCaptures {
    /// Time of `[start, end)` covered by a capture.
    pub fn overlap(&self, start: i64, end: i64) -> i64 {
        self.intervals
            .iter()
            .map(|&(a, b)| (b.min(end) - a.max(start)).max(0))
            .sum()
    }

    /// Capture time inside the window.
    pub fn in_window(&self, w: &Window) -> i64 {
        self.overlap(w.start, w.end)
    }
}

/// The graph captures of the trace's runtime and driver calls.
pub fn graph_captures(trace: &Trace) -> GraphCaptures {
    // What each distinct name is, decided once per name, not once per call: a trace has
    // millions of calls and a few hundred names.
    const OTHER: u8 = 3;
    let what: Vec<u8> = (0..trace.strings.len())
        .map(|id| {
            let n = trace.api_name(id as tracehound_parsers::StrId);
            if n.ends_with("StreamBeginCapture") {
                0
            } else if n.ends_with("StreamEndCapture") {
                1
            } else if n.contains("Launch") && !n.contains("GraphLaunch") {
                2
            } else {
                OTHER
            }
        })
        .collect();
    // Without a capture call there is nothing to find.
    if !what.contains(&0) {
        return GraphCaptures::default();
    }
    let mut calls: Vec<(i64, i64, u8)> = trace
        .host_spans
        .iter()
        .filter(|s| matches!(s.kind, HostKind::Runtime | HostKind::Driver))
        .filter_map(|s| {
            let w = what.get(s.name as usize).copied().unwrap_or(OTHER);
            (w != OTHER).then_some((s.start, s.tid, w))
        })
        .collect();
    calls.sort_unstable();
    let mut open: rustc_hash::FxHashMap<i64, i64> = Default::default();
    let mut out = GraphCaptures::default();
    for (ts, tid, what) in calls {
        match what {
            0 => {
                open.insert(tid, ts);
            }
            1 => {
                if let Some(begin) = open.remove(&tid) {
                    out.intervals.push((begin, ts));
                }
            }
            _ => {
                if open.contains_key(&tid) {
                    out.launches += 1;
                }
            }
        }
    }
    out.intervals.sort_unstable();
    out
}

/// What the profiled program was doing, as far as the trace shows: the advice differs (a
/// training loop has DataLoader workers and an optimizer; a server has neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// A backward pass or an optimizer step is in the trace.
    Training,
    /// CPU operators are recorded, with no backward pass and no optimizer step.
    Inference,
    /// The trace records no CPU operators (an nsys export without NVTX operator ranges): it
    /// cannot say.
    Unknown,
}

/// Whether the trace shows training, inference, or cannot say.
pub fn workload(trace: &Trace) -> Workload {
    let marks = trace.strings.matching(|n| {
        n.contains("Backward")
            || n.starts_with("autograd::engine")
            || n.contains("Optimizer.step")
            || n.contains("Optimizer.zero_grad")
    });
    let marked =
        |s: &tracehound_parsers::HostSpan| marks.get(s.name as usize).copied().unwrap_or(false);
    if trace.host_spans.iter().any(marked) {
        Workload::Training
    } else if trace.meta.capture.cpu_ops {
        Workload::Inference
    } else {
        Workload::Unknown
    }
}
