//! Launch-bound stretches: the GPU finishes kernels faster than the host launches them.
//!
//! For each kernel, the queue depth at its start is the number of kernels of the device
//! whose launch call had begun by then and that had not started yet (launch calls against
//! kernel starts). A kernel that starts after an idle gap with nothing queued behind it was
//! waiting for its own launch: the gap is launch cost. Gaps from the idle-gap threshold up
//! are the `idle_gaps` rule's (it names what the host did instead); this rule owns the
//! shorter ones, which no single gap makes visible but which add up when kernels are a few
//! microseconds long. Kernels replayed from a CUDA graph (`cudaGraphLaunch`) are not counted:
//! a replay queues all of them at once. Reported from 3% of the window, with the launch
//! latency distribution of the kernels that waited (runtime call start to kernel start, the
//! launch path alone since nothing was queued) and the operators whose kernels waited.

use super::Rule;
use crate::context::{Ctx, new_finding, rows_by_time};
use crate::finding::{Confidence, Finding, Instance, fmt_ns, metrics};
use crate::names::{name_or, span_name_id};
use crate::stats::percentile;
use std::collections::BTreeMap;
use tracehound_parsers::NONE;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "launch_bound";

/// The rule.
pub struct LaunchBound;

/// Starved idle, as a share of the window, from which the rule reports: below it the short
/// gaps of a GPU-bound run (kernels of tens of µs, an occasional empty queue) add up to noise.
const MIN_SHARE: f64 = 0.03;

/// A stretch is this many starved kernels in a row, or more.
const STRETCH_KERNELS: usize = 3;

impl Rule for LaunchBound {
    fn needs_whole_timeline(&self) -> bool {
        true
    }

    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "kernels that wait for their own launch: short GPU gaps with nothing queued, launch latency"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let threshold = cx.config.gap_threshold_ns;
        let mut out = Vec::new();
        // Whether a launch call's name is a graph launch, per name id: tested once per name.
        let is_graph = t.strings.matching(|n| n.contains("GraphLaunch"));
        for d in t.devices() {
            // Kernels in the window with their launch call's start, graph replays left out.
            // The launch call is read here only: it lies anywhere in the span list, and each
            // read of it was a cache miss per kernel.
            let mut ks: Vec<(u32, i64)> = Vec::new();
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
                ks.push((i as u32, launch.start));
            }
            if ks.len() < 2 {
                continue;
            }
            let mut launches: Vec<i64> = ks.iter().map(|&(_, at)| at).collect();
            launches.sort_unstable();
            // Launch latency of the kernels that waited for their launch: with the GPU idle and
            // nothing queued, runtime call to kernel start is the launch path alone.
            let mut latency: Vec<i64> = Vec::new();
            // Busy end across all GPU work of the device (any stream) before each kernel: the
            // device's ops are sorted by start, so one pointer walks them alongside.
            let dev_ops = t.device_ops(d);
            let (mut starved_ns, mut starved_n) = (0i64, 0u64);
            // By the operator's name id: no string built per starved kernel.
            let mut by_name: rustc_hash::FxHashMap<u32, (u64, i64)> = Default::default();
            let (mut run, mut run_ns, mut run_start) = (0usize, 0i64, 0i64);
            let mut stretches: Vec<(i64, usize, i64, i64)> = Vec::new();
            let mut busy_end = i64::MIN;
            let mut oi = 0;
            let mut launched = 0usize;
            let mut durs: Vec<i64> = Vec::new();
            for (started, &(i, launched_at)) in ks.iter().enumerate() {
                let op = &t.gpu_ops[i as usize];
                while oi < dev_ops.len() && t.gpu_ops[dev_ops[oi] as usize].start < op.start {
                    let o = &t.gpu_ops[dev_ops[oi] as usize];
                    if o.is_work() {
                        busy_end = busy_end.max(o.end);
                    }
                    oi += 1;
                }
                // Launch calls begun by the kernel's start, less kernels started before it.
                // Kernels come in start order, so the count of launch calls begun by the
                // kernel's start only grows.
                while launched < launches.len() && launches[launched] <= op.start {
                    launched += 1;
                }
                let depth = launched.saturating_sub(started + 1);
                let gap = op.start.saturating_sub(busy_end);
                let starved = busy_end != i64::MIN && gap > 0 && gap < threshold && depth == 0;
                if starved {
                    latency.push(op.start - launched_at);
                    starved_ns += gap;
                    starved_n += 1;
                    durs.push(op.dur());
                    // Found by the nesting pass: walking up from each launch read the
                    // spans all over the list.
                    let outer = t.index.op_outer_cpu_op[i as usize];
                    let g = by_name.entry(span_name_id(t, outer)).or_default();
                    g.0 += 1;
                    g.1 += gap;
                    if run == 0 {
                        run_start = busy_end;
                    }
                    run += 1;
                    run_ns += gap;
                } else if gap > 0 || depth > 0 {
                    if run >= STRETCH_KERNELS {
                        stretches.push((run_ns, run, run_start, busy_end));
                    }
                    run = 0;
                    run_ns = 0;
                }
            }
            if run >= STRETCH_KERNELS {
                stretches.push((run_ns, run, run_start, busy_end));
            }
            if w.share(starved_ns) < MIN_SHARE {
                continue;
            }
            durs.sort_unstable();
            latency.sort_unstable();
            stretches.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
            let (p50, p99) = (percentile(&latency, 0.5), percentile(&latency, 0.99));
            let outliers = latency
                .iter()
                .filter(|&&x| x > (10 * p50).max(threshold))
                .count();
            let mut f = new_finding(
                cx,
                ID,
                Some(d),
                format!(
                    "GPU {d} waits for kernel launches: {} in {starved_n} short gaps with nothing queued (median kernel {})",
                    fmt_ns(starved_ns),
                    fmt_ns(percentile(&durs, 0.5))
                ),
                starved_ns,
                Confidence::High,
                format!(
                    "{starved_n} of {} kernels started after a gap < {} with an empty queue; {} stretches of {STRETCH_KERNELS}+ such kernels; their launch latency (runtime call to kernel start) median {}, p99 {}, {} above max(10× median, {}){}",
                    ks.len(),
                    fmt_ns(threshold),
                    stretches.len(),
                    fmt_ns(p50),
                    fmt_ns(p99),
                    outliers,
                    fmt_ns(threshold),
                    if graph > 0 {
                        format!("; {graph} CUDA-graph kernels not counted")
                    } else {
                        String::new()
                    }
                ),
            );
            let mut groups: BTreeMap<String, (u64, i64)> = BTreeMap::new();
            for (name, (n, ns)) in by_name {
                let label = name_or(t, name, "(no operator)");
                let g = groups.entry(label.to_string()).or_default();
                g.0 += n;
                g.1 += ns;
            }
            f.breakdown = rows_by_time(cx, groups, starved_ns);
            f.instances = stretches
                .iter()
                .take(cx.config.max_instances)
                .map(|&(ns, n, a, b)| Instance {
                    start_ns: a,
                    dur_ns: b - a,
                    offset_ms: w.offset_ms(a),
                    what: format!(
                        "{n} kernels in a row each waiting for its launch: {} idle in {}",
                        fmt_ns(ns),
                        fmt_ns(b - a)
                    ),
                    cpu_op: None,
                    python_frame: None,
                })
                .collect();
            f.advice = vec![
                "Replay the step as a CUDA graph: torch.compile(mode=\"reduce-overhead\"), or torch.cuda.CUDAGraph around a static-shape step; one launch then queues every kernel.".into(),
                "Or give each kernel more work: a larger batch, or torch.compile to fuse the elementwise chains into fewer kernels.".into(),
            ];
            f.metrics = metrics([
                ("starved_ns", starved_ns as f64),
                ("starved_kernels", starved_n as f64),
                ("kernels", ks.len() as f64),
                ("stretches", stretches.len() as f64),
                ("launch_latency_p50_ns", p50 as f64),
                ("launch_latency_p99_ns", p99 as f64),
                ("graph_kernels", graph as f64),
            ]);
            out.push(f);
        }
        out
    }
}
