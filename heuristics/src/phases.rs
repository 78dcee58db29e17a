//! Framework phases that the program passes through once and that are not its steady state:
//! CUDA/HIP graph capture today. The idle engine names gaps inside them as what they are
//! and keeps them out of the steady-state idle time; the verdict says when one fills the
//! window.

use crate::window::Window;
use tracehound_parsers::{HostKind, Trace};

/// Whether a span is torch.compile compiling: the spans its `dynamo_timed` instrumentation
/// records (`… (dynamo_timed)`), the outer `dynamo` operator around a frame's compilation,
/// and the whole-compile spans of a frame and of the lazy backward.
pub fn is_compile_span(name: &str) -> bool {
    name.ends_with("(dynamo_timed)")
        || matches!(
            name,
            "dynamo" | "entire_frame_compile" | "entire_backward_compile"
        )
}

/// Whether a span is Inductor benchmarking kernel configurations (autotuning a new shape).
pub fn is_inductor_tuning(name: &str) -> bool {
    name.starts_with("CachingAutotuner.benchmark_all_configs")
        || name.starts_with("AlgorithmSelectorCache.benchmark")
        || name.starts_with("AlgorithmSelectorCache.autotune")
}

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

/// The framework the traced program ran on, as far as the capture shows: advice names the
/// program's own calls (`pin_memory=True` only for PyTorch, `cudaMallocHost` otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    /// PyTorch: a PyTorch profiler trace, or an nsys export holding PyTorch's operator ranges,
    /// its Python frames or its kernels (`at::native::`).
    PyTorch,
    /// Anything else (CUDA C/C++, OpenACC, CuPy, JAX, Julia ...), or a capture that shows no
    /// sign of PyTorch.
    Other,
}

/// The framework of the traced program ([`Framework`]).
pub fn framework(trace: &Trace) -> Framework {
    if trace.meta.capture.pytorch_profiler {
        return Framework::PyTorch;
    }
    // Operator and kernel names, and Python frames (`torch/nn/modules/linear.py(125): forward`);
    // a path alone is not a sign (nsys exports keep the environment, PYTHONPATH included).
    let torch = trace.strings.matching(|n| {
        n.starts_with("aten::")
            || n.contains("at::native::")
            || (n.contains("torch/") && n.contains(".py("))
    });
    if torch.contains(&true) {
        Framework::PyTorch
    } else {
        Framework::Other
    }
}

/// Whether a span name is autograd's backward work: a `...Backward0` node or the engine's
/// span around it.
pub fn is_backward(name: &str) -> bool {
    name.contains("Backward") || name.starts_with("autograd::engine")
}

/// Whether the trace shows training, inference, or cannot say.
pub fn workload(trace: &Trace) -> Workload {
    let marks = trace.strings.matching(|n| {
        is_backward(n) || n.contains("Optimizer.step") || n.contains("Optimizer.zero_grad")
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

/// What one torch.compile compilation compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileKind {
    /// A frame: Dynamo traced it and Inductor compiled its forward (`entire_frame_compile`).
    Frame,
    /// The backward graph, compiled lazily at its first backward (`entire_backward_compile`).
    Backward,
}

/// One compilation in the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Compilation {
    /// Frame or backward.
    pub kind: CompileKind,
    /// Start and end, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// The compiled graph's id (`0/1`: frame 0, its second compilation), from the
    /// `Torch-Compiled Region: 0/1` that first ran it; None when no region follows.
    pub graph: Option<String>,
    /// The input shapes it was compiled for that the previous compilation of the same kind did
    /// not have (`[16, 192, 256]`), or all of them for the first; empty without shapes.
    pub new_shapes: Vec<String>,
}

impl Compilation {
    /// Whether this compiled a graph again (a graph id `N/k` with k ≥ 1): a recompilation.
    pub fn is_recompile(&self) -> bool {
        self.graph
            .as_deref()
            .and_then(|g| g.split('/').nth(1))
            .and_then(|k| k.trim().parse::<u32>().ok())
            .is_some_and(|k| k >= 1)
    }
}

/// The torch.compile compilations of the trace, in time order: each `entire_frame_compile`
/// and `entire_backward_compile` span, with the graph it produced and the input shapes that
/// differ from the compiled code that ran before it on the same thread.
pub fn compilations(trace: &Trace) -> Vec<Compilation> {
    // A trace has millions of spans and a few thousand names: look at names first.
    let compiled = trace
        .strings
        .matching(|n| n == "entire_frame_compile" || n == "entire_backward_compile");
    if !compiled.contains(&true) {
        return Vec::new();
    }
    let named = |n: &str| -> Vec<u32> {
        let ids = trace.strings.matching(|x| x == n);
        let mut v: Vec<u32> = (0..trace.host_spans.len() as u32)
            .filter(|&k| {
                ids.get(trace.host_spans[k as usize].name as usize)
                    .copied()
                    .unwrap_or(false)
            })
            .collect();
        v.sort_by_key(|&k| trace.host_spans[k as usize].start);
        v
    };
    let frames = named("entire_frame_compile");
    let backwards = named("entire_backward_compile");
    // Compiled code as it ran: a region (with the CompiledFunction inside it carrying the
    // shapes) for forwards, CompiledFunctionBackward for backwards.
    let region_ids = trace
        .strings
        .matching(|n| n.starts_with("Torch-Compiled Region: "));
    let regions: Vec<(u32, String)> = (0..trace.host_spans.len() as u32)
        .filter(|&k| {
            region_ids
                .get(trace.host_spans[k as usize].name as usize)
                .copied()
                .unwrap_or(false)
        })
        .filter_map(|k| {
            let n = trace.str(trace.host_spans[k as usize].name);
            n.strip_prefix("Torch-Compiled Region: ")
                .map(|id| (k, id.trim().to_string()))
        })
        .collect();
    let region_shapes = |r: u32| -> Vec<String> {
        let s = &trace.host_spans[r as usize];
        trace
            .thread_spans((s.pid, s.tid))
            .iter()
            .copied()
            .find(|&k| {
                let c = &trace.host_spans[k as usize];
                c.start >= s.start && c.end <= s.end && trace.str(c.name) == "CompiledFunction"
            })
            .map(|k| trace.input_shapes(k))
            .unwrap_or_default()
    };
    let bw_runs = named("CompiledFunctionBackward");
    let changed = |now: &[String], before: &[String]| -> Vec<String> {
        if before.is_empty() {
            return Vec::new();
        }
        let mut v: Vec<String> = now
            .iter()
            .enumerate()
            .filter(|(k, sh)| before.get(*k) != Some(*sh))
            .map(|(_, sh)| sh.clone())
            .collect();
        v.dedup();
        v
    };
    let mut out = Vec::new();
    for &f in &frames {
        let s = &trace.host_spans[f as usize];
        let same_thread = |r: &&(u32, String)| {
            let h = &trace.host_spans[r.0 as usize];
            (h.pid, h.tid) == (s.pid, s.tid)
        };
        let next = regions
            .iter()
            .filter(same_thread)
            .find(|r| trace.host_spans[r.0 as usize].start >= s.end);
        let before = regions
            .iter()
            .filter(same_thread)
            .rfind(|r| trace.host_spans[r.0 as usize].end <= s.start);
        let now = next.map(|r| region_shapes(r.0)).unwrap_or_default();
        let was = before.map(|r| region_shapes(r.0)).unwrap_or_default();
        out.push(Compilation {
            kind: CompileKind::Frame,
            start: s.start,
            end: s.end,
            graph: next.map(|r| r.1.clone()),
            new_shapes: changed(&now, &was),
        });
    }
    for &b in &backwards {
        let s = &trace.host_spans[b as usize];
        let run = std::iter::once(b)
            .chain(trace.ancestors(b))
            .find(|&k| trace.str(trace.host_spans[k as usize].name) == "CompiledFunctionBackward");
        let now = run.map(|k| trace.input_shapes(k)).unwrap_or_default();
        let was = bw_runs
            .iter()
            .copied()
            .rfind(|&k| trace.host_spans[k as usize].end <= s.start)
            .map(|k| trace.input_shapes(k))
            .unwrap_or_default();
        out.push(Compilation {
            kind: CompileKind::Backward,
            start: s.start,
            end: s.end,
            graph: None,
            new_shapes: changed(&now, &was),
        });
    }
    out.sort_by(|a, b| a.start.cmp(&b.start).then(a.end.cmp(&b.end)));
    out
}
