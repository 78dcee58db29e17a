//! Launch-bound stretches: the GPU finishes kernels faster than the host launches them.
//!
//! For each kernel, the queue depth at its start is the number of kernels of the device
//! whose launch call had begun by then and that had not started yet (launch calls against
//! kernel starts). A kernel that starts after an idle gap with nothing queued behind it was
//! waiting for its own launch: the gap is launch cost. Gaps from the idle-gap threshold up
//! are the `idle_gaps` rule's (it names what the host did instead); this rule owns the
//! shorter ones, which no single gap makes visible but which add up when kernels are a few
//! microseconds long. Kernels replayed from a CUDA graph (`cudaGraphLaunch`) are not counted:
//! a replay queues all of them at once, and neither are kernels whose queue a synchronising
//! call had just drained or whose operator the host follows with a sync at once (the
//! sync_stalls rule's; [`crate::starved`] splits them), nor
//! kernels launched inside a single-tensor optimizer's step or a `zero_grad` that zeroes
//! gradients with kernels (optimizer_overhead's, which prices them and names that cause:
//! `foreach=False`, `set_to_none=False`, not launch speed), nor kernels a checkpoint's
//! recomputed forward launched (recomputation's), nor kernels of a Python loop's per-tensor
//! calls (tensor_loop's), each only where that rule runs and reports ([`super::handed`]). Reported
//! from 3% of the window, with the launch latency distribution of the kernels that waited
//! (runtime call start to kernel start, the launch path alone since nothing was queued) and
//! the operators whose kernels waited; when those operators synchronise on most calls, the
//! finding says so and gives no CUDA-graph advice (a graph cannot capture a sync). Where most
//! waits belong to no framework operator (CUDA C, OpenACC), the runtime calls the launching
//! thread was in during them are listed, and allocation or syncs in the loop are named.

use super::Rule;
use crate::context::{Ctx, new_finding, rows_by_time};
use crate::finding::{Confidence, Finding, Instance, fmt_ns, metrics};
use crate::names::name_or;
use crate::stats::percentile;
use std::collections::BTreeMap;
use tracehound_parsers::{CopyDirection, GpuOpKind};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "launch_bound";

/// The rule.
pub struct LaunchBound;

/// Starved idle, as a share of the window, from which the rule reports: below it the short
/// gaps of a GPU-bound run (kernels of tens of µs, an occasional empty queue) add up to noise.
const MIN_SHARE: f64 = 0.03;

/// torch.multinomial checks its probabilities on every call before it draws: in PyTorch 2.11
/// a min, a max, a sum, comparisons and two `aten::_assert_async`, eleven kernels and two
/// memsets around a draw of three (the seventeenth blind set's decode: 6.85 ms a step of 17.4
/// outside the profiler, against the draw alone); older releases read the check on the host.
const MULTINOMIAL_ADVICE: &str = "torch.multinomial checks its probabilities on every call (a min, a max, a sum and comparisons, about a dozen small kernels, or a read on the host in older releases) before it draws: for one sample a row, draw without the checks from the same distribution with (probs / torch.empty_like(probs).exponential_(1)).argmax(dim=-1) (gpt-fast's multinomial_sample_one_no_sync).";

/// The advice to replay the step as a CUDA graph, in a program that is not PyTorch (taken back
/// by the analysis where shapes change call over call, as [`GRAPH_ADVICE`] is).
pub const GRAPH_ADVICE_CUDA: &str = "Capture the launch sequence once as a CUDA graph (cudaStreamBeginCapture ... cudaStreamEndCapture, cudaGraphInstantiate) and replay it with cudaGraphLaunch: one launch then queues every kernel.";

/// How the advice begins where the operator whose kernels wait most runs on many shapes a step
/// (a hot_operator finding's growth, when there is one, says it more precisely and replaces it).
pub const VARYING_SHAPES_ADVICE: &str = "Shapes change call to call here";

/// The advice to replay the step as a CUDA graph (taken back by the analysis where shapes
/// change call over call).
pub const GRAPH_ADVICE: &str = "Replay the step as a CUDA graph: torch.compile(mode=\"reduce-overhead\"), or torch.cuda.CUDAGraph around a static-shape step; one launch then queues every kernel.";

/// Operators that synchronise because they copy to the host (`.item()`, `.cpu()`, `.tolist()`).
const COPY_OPERATORS: &[&str] = &[
    "aten::to",
    "aten::_to_copy",
    "aten::copy_",
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::cpu",
];

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
        "kernels, copies and memsets that wait for their own launch: short GPU gaps with nothing queued, launch latency"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let threshold = cx.config.gap_threshold_ns;
        let mut out = Vec::new();
        let handed = super::handed(cx);
        for dev in cx.starved() {
            let d = dev.device;
            let graph = dev.graph_kernels;
            // Kernels that waited after a sync drained the queue are the sync's cost (the
            // sync_stalls rule's): faster launches would not have filled that queue.
            let drained_ns: i64 = dev.drained().map(|s| s.gap_ns).sum();
            // So are the waits of a loop that reads each result on the host before it
            // launches the next call: a graph cannot capture the reads either.
            let read_back_ns: i64 = dev.read_back().map(|s| s.gap_ns).sum();
            let (mut starved_ns, mut starved_n, mut optimizer_ns) = (0i64, 0u64, 0i64);
            let (mut recomputed_ns, mut loop_ns, mut uploads_ns) = (0i64, 0i64, 0i64);
            let mut latency: Vec<i64> = Vec::new();
            let mut durs: Vec<i64> = Vec::new();
            // Copies and memsets launched onto an idle GPU wait like kernels do: a loop of
            // `.cpu()` on single elements runs nothing else.
            let (mut others_n, mut other_durs) = (0u64, Vec::<i64>::new());
            let (mut to_host, mut to_device) = (0u64, 0u64);
            // Copies to the device of a few bytes: constants made from Python numbers.
            let (mut tiny_n, mut tiny_ns) = (0usize, 0i64);
            // By the operator's name id: no string built per starved kernel.
            // With a few of its outer operator spans, to see whether they synchronise.
            let mut by_name = crate::starved::WaitsByOperator::default();
            // The distinct calls behind each operator's waits (a sort launches a dozen kernels
            // a call, so its waits are no count of its calls): a call's kernels start in launch
            // order, one after another, so a new call is a change of span under the same name.
            // (last span, calls).
            let mut calls_of: rustc_hash::FxHashMap<u32, (u32, usize)> = Default::default();
            // The waits no framework operator launched (a CUDA C or OpenACC program): what
            // the host was doing instead is read from its runtime calls.
            let mut loose: Vec<crate::starved::Starved> = Vec::new();
            let (mut run, mut run_ns, mut run_start, mut last_end) = (0usize, 0i64, 0i64, i64::MIN);
            let mut stretches: Vec<(i64, usize, i64, i64)> = Vec::new();
            let mut prev: Option<u32> = None;
            for s in dev.launch_bound() {
                // Launched inside a single-tensor optimizer's step or a zeroing zero_grad:
                // optimizer_overhead's, which counts them and names the cause (faster launches
                // shorten these waits; one multi-tensor launch per step, or dropping the
                // gradients, removes them).
                if handed.to_optimizer(s.op) {
                    optimizer_ns += s.gap_ns;
                    continue;
                }
                // A checkpoint's recomputed forward: the recomputation finding's, whose
                // remedy (checkpoint less) removes the kernels and their waits alike.
                if handed.to_recomputation(d, s.op) {
                    recomputed_ns += s.gap_ns;
                    continue;
                }
                // A Python loop's per-tensor calls: tensor_loop's, whose foreach remedy
                // removes the launches rather than speeding them up.
                if handed.to_loop(d, s.op) {
                    loop_ns += s.gap_ns;
                    continue;
                }
                // A Python number copied to the device: constant_uploads', whose remedy (pass
                // the number as it is) removes the copy and its wait.
                if handed.to_uploads(d, s.op) {
                    uploads_ns += s.gap_ns;
                    continue;
                }
                latency.push(s.latency_ns);
                starved_ns += s.gap_ns;
                starved_n += 1;
                let kernel = s.kernel(t);
                if kernel.kind == GpuOpKind::Kernel {
                    durs.push(kernel.end - kernel.start);
                } else {
                    others_n += 1;
                    other_durs.push(kernel.end - kernel.start);
                    if crate::uploads::is_upload(kernel) {
                        tiny_n += 1;
                        tiny_ns += s.gap_ns;
                    }
                    match kernel.direction {
                        CopyDirection::HtoD => to_device += 1,
                        CopyDirection::DtoH => to_host += 1,
                        _ => {}
                    }
                }
                crate::starved::add_wait(&mut by_name, t, s);
                let outer = t.index.op_outer_cpu_op[s.op as usize];
                if outer == tracehound_parsers::NONE {
                    loose.push(*s);
                }
                let c = calls_of
                    .entry(crate::names::span_name_id(t, outer))
                    .or_insert((tracehound_parsers::NONE, 0));
                if c.0 != outer {
                    *c = (outer, c.1 + 1);
                }
                // A stretch: starved kernels back to back (each starting right after the
                // previous starved kernel's work ended).
                let idle_from = s.idle_from(t);
                let joined = prev.is_some() && idle_from <= last_end;
                if !joined {
                    if run >= STRETCH_KERNELS {
                        stretches.push((run_ns, run, run_start, last_end));
                    }
                    run = 0;
                    run_ns = 0;
                    run_start = idle_from;
                }
                run += 1;
                run_ns += s.gap_ns;
                last_end = kernel.end;
                prev = Some(s.op);
            }
            if run >= STRETCH_KERNELS {
                stretches.push((run_ns, run, run_start, last_end));
            }
            if w.share(starved_ns) < MIN_SHARE {
                continue;
            }
            // The median kernel, or the median copy where only copies waited.
            if durs.is_empty() {
                durs = other_durs;
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
                    "GPU {d} waits for {}launches: {} in {starved_n} short gaps with nothing queued (median {} {})",
                    if others_n == 0 {
                        "kernel "
                    } else if others_n == starved_n {
                        "copy and memset "
                    } else {
                        ""
                    },
                    fmt_ns(starved_ns),
                    if others_n == starved_n { "operation" } else { "kernel" },
                    fmt_ns(percentile(&durs, 0.5))
                ),
                starved_ns,
                Confidence::High,
                format!(
                    "{} started after a gap < {} with an empty queue that no sync explains (a sync costs at most the time it waited); {} stretches of {STRETCH_KERNELS}+ such {}; their launch latency (runtime call to kernel start) median {}, p99 {}, {} above max(10× median, {}){}{}{}{}{}{}{}{}",
                    if others_n == 0 {
                        format!("{starved_n} of {} kernels", dev.kernels)
                    } else {
                        format!(
                            "{} of {} kernels and {others_n} of {} copies and memsets",
                            starved_n - others_n,
                            dev.kernels,
                            dev.other_ops
                        )
                    },
                    fmt_ns(threshold),
                    stretches.len(),
                    if others_n == 0 { "kernels" } else { "operations" },
                    fmt_ns(p50),
                    fmt_ns(p99),
                    outliers,
                    fmt_ns(threshold),
                    if graph > 0 {
                        format!("; {graph} CUDA-graph kernels not counted")
                    } else {
                        String::new()
                    },
                    if drained_ns > 0 {
                        format!(
                            "; {} more after syncs that drained the queue (see sync_stalls)",
                            fmt_ns(drained_ns)
                        )
                    } else {
                        String::new()
                    },
                    if read_back_ns > 0 {
                        format!(
                            "; {} more before operators whose result the host reads right after (see sync_stalls)",
                            fmt_ns(read_back_ns)
                        )
                    } else {
                        String::new()
                    },
                    if optimizer_ns > 0 {
                        format!(
                            "; {} more in a single-tensor optimizer's step or zero_grad's zeroing (see optimizer_overhead)",
                            fmt_ns(optimizer_ns)
                        )
                    } else {
                        String::new()
                    },
                    if recomputed_ns > 0 {
                        format!(
                            "; {} more before forward operators a checkpoint recomputes in backward (see recomputation)",
                            fmt_ns(recomputed_ns)
                        )
                    } else {
                        String::new()
                    },
                    if loop_ns > 0 {
                        format!(
                            "; {} more before the per-tensor calls of a Python loop over a tensor list (see tensor_loop)",
                            fmt_ns(loop_ns)
                        )
                    } else {
                        String::new()
                    },
                    if uploads_ns > 0 {
                        format!(
                            "; {} more before copies of Python numbers to the GPU (see constant_uploads)",
                            fmt_ns(uploads_ns)
                        )
                    } else {
                        String::new()
                    },
                    crate::starved::profiler_note(cx)
                ),
            );
            // Waits that the profiler's own recording can explain are stated as measured, not
            // as the program's bound: no more than medium, and the graph advice after a timing.
            let hedge = crate::profiled::within_profiler_slowdown(cx, d);
            if let Some((ratio, _)) = hedge {
                f.evidence.push_str(&format!(
                    "; {}: whether the GPU waits outside the profiler is not in this capture",
                    crate::profiled::lag_words(ratio)
                ));
                f.severity = f.severity.min(crate::finding::Severity::Medium);
                f.confidence = Confidence::Medium;
            }
            let mut groups: BTreeMap<String, (u64, i64)> = BTreeMap::new();
            for (&name, &(n, ns, _)) in &by_name {
                let label = name_or(t, name, "(no operator)");
                let g = groups.entry(label.to_string()).or_default();
                g.0 += n;
                g.1 += ns;
            }
            f.breakdown = rows_by_time(cx, groups, starved_ns);
            // Each operator's line: the innermost user frame of its first sampled call, and
            // the one that called it (a per-sample loop's line calls the function whose
            // operators wait).
            for r in &mut f.breakdown {
                let span = by_name
                    .iter()
                    .filter(|&(&name, _)| name_or(t, name, "(no operator)") == r.label)
                    .find_map(|(_, g)| g.2.first().copied());
                r.python_frame = span.and_then(|s| user_frames(t, s));
            }
            f.instances = stretches
                .iter()
                .take(cx.config.max_instances)
                .map(|&(ns, n, a, b)| Instance {
                    start_ns: a,
                    dur_ns: b - a,
                    offset_ms: w.offset_ms(a),
                    what: format!(
                        "{n} {} in a row each waiting for its launch: {} idle in {}",
                        if others_n == 0 { "kernels" } else { "GPU operations" },
                        fmt_ns(ns),
                        fmt_ns(b - a)
                    ),
                    cpu_op: None,
                    python_frame: None,
                })
                .collect();
            // Without operators, the runtime calls the launching threads were in during the
            // waits say what held the host: an allocation or a sync every iteration is
            // removed, not sped up.
            let loose_ns: i64 = loose.iter().map(|s| s.gap_ns).sum();
            let host_calls = if 2 * loose_ns >= starved_ns && !cx.pytorch() {
                host_calls_in(cx, &loose)
            } else {
                Vec::new()
            };
            for (name, (ns, n)) in host_calls
                .iter()
                .filter(|(_, (ns, _))| ns * 100 >= starved_ns)
                .take(4)
            {
                f.breakdown.push(crate::finding::Row {
                    label: format!("host in {name} during these waits"),
                    count: *n,
                    time_ns: *ns,
                    bytes: None,
                    python_frame: None,
                    cause: None,
                    share: Some(*ns as f64 / starved_ns.max(1) as f64),
                });
            }
            f.advice = Vec::new();
            let openacc = !cx.pytorch() && openacc_kernels(cx, d);
            if !host_calls.is_empty() {
                let of = |pred: fn(&str) -> bool| {
                    host_calls
                        .iter()
                        .filter(|(n, _)| pred(n))
                        .fold((Vec::new(), 0i64, 0u64), |mut a, (n, (ns, k))| {
                            a.0.push(n.clone());
                            a.1 += ns;
                            a.2 += k;
                            a
                        })
                };
                let (allocs, alloc_ns, alloc_n) = of(crate::names::is_alloc_call);
                let (syncs, sync_ns, sync_n) = of(crate::names::is_sync_call);
                if alloc_ns * 10 >= loose_ns {
                    f.advice.push(format!(
                        "{} ran {alloc_n} times in these waits ({} of host time): device memory allocated or freed every iteration. Allocate the buffers once before the loop and reuse them{}.",
                        allocs.join(", "),
                        fmt_ns(alloc_ns),
                        if openacc {
                            " (an OpenACC compute region with its own data clauses allocates and copies on every entry: an enclosing `acc data` region, or `acc enter data` once, keeps the arrays on the device)"
                        } else {
                            " (or a stream-ordered pool, cudaMallocAsync with cudaMemPoolAttrReleaseThreshold set, so freed memory is not returned)"
                        }
                    ));
                }
                if sync_ns * 10 >= loose_ns {
                    f.advice.push(format!(
                        "{} ran {sync_n} times in these waits ({} of host time): each sync lets the queue run dry, so the host cannot launch ahead of the GPU; synchronise only where the host reads a result{}.",
                        syncs.join(", "),
                        fmt_ns(sync_ns),
                        if openacc {
                            " (OpenACC: `async` clauses on the compute regions and one `acc wait` where the data is needed)"
                        } else {
                            ""
                        }
                    ));
                }
            }
            // The operators whose kernels waited most: when they synchronise on most calls
            // (a boolean-mask index's nonzero, .item(), a copy to the host), the host loses its
            // lead there every call, and a CUDA graph cannot capture them.
            let mut top: Vec<(u32, (u64, i64))> =
                by_name.iter().map(|(&k, v)| (k, (v.0, v.1))).collect();
            top.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(&b.0)));
            let (syncing, syncing_ns) = crate::starved::syncing_operators(cx, &by_name);
            let sync_bound = 2 * syncing_ns >= starved_ns && !syncing.is_empty();
            if sync_bound {
                f.title.push_str(&format!(
                    ", most in operators that synchronise with the host every call ({})",
                    syncing
                        .iter()
                        .map(|x| x.split(" (").next().unwrap_or(x))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                f.evidence.push_str(&format!(
                    "; the operators holding most of it synchronise with the host on most calls: {}",
                    syncing.join(", ")
                ));
                // Copies to the host one element at a time (`.item()`, `.cpu()` in a loop)
                // are removed by one copy, not by a different index.
                let copies = syncing.iter().all(|x| {
                    // "aten::to › aten::copy_ (cudaMemcpyAsync) at f.py(6): g": the outer name.
                    let outer = x.split([' ', '(']).next().unwrap_or(x);
                    COPY_OPERATORS.contains(&outer)
                });
                f.advice.push(format!(
                    "The operators whose kernels wait most synchronise on most calls ({}): each sync empties the queue and the host relaunches onto an idle GPU, and a CUDA graph cannot capture a synchronisation. {}",
                    syncing.join("; "),
                    if copies && to_device > to_host {
                        "Move data once instead of per item: a small copy to the GPU each time round a loop (torch.tensor(v).to(\"cuda\") per item) pays a launch and a wait every call; build the batch on the host and move it once (torch.as_tensor of the whole list, from pinned memory with non_blocking=True)."
                    } else if copies {
                        "Copy once instead of per element: .cpu(), .item() or .tolist() on one element each time round a loop waits for the GPU every call; move the whole tensor to the host once before the loop (x.cpu(), x.tolist()), or keep the computation on the GPU (torch.sum, torch.where) and read one result at the end."
                    } else if syncing.iter().all(|x| x.starts_with("aten::repeat_interleave")) {
                        crate::starved::REPEAT_INTERLEAVE_ADVICE
                    } else {
                        "Remove the syncs: boolean-mask indexing (x[mask], x[mask] = y) and nonzero learn their size on the host — use torch.where or a multiply by the mask, integer indices computed once, or sort once and split by counts; keep .item() and copies to the host out of the loop."
                    }
                ));
            }
            // A graph replays the shapes it captured: where the operator whose kernels wait
            // most runs on many shapes a step, that comes first.
            let varying = top.first().and_then(|&(name, _)| {
                let shapes = shapes_per_step(cx, dev, name)?;
                Some(format!(
                    "{VARYING_SHAPES_ADVICE} ({} ran on {shapes:.0} distinct input shapes a step): a CUDA graph replays the shapes it captured, so each new shape is a new capture; pad to a few fixed sizes, or remove what varies, before replaying the step as a graph.",
                    name_or(t, name, "(no operator)")
                ))
            });
            // One operator waiting many times a step from one line is a Python loop of small
            // calls: if its iterations are independent, one batched call removes the launches.
            let steps = w.steps_overlapping(t).count().max(1);
            // The row of operator `name`, for its line.
            let frame_of = |name: u32| {
                let label = name_or(t, name, "(no operator)");
                f.breakdown
                    .iter()
                    .find(|r| r.label == label)
                    .and_then(|r| r.python_frame.clone())
            };
            // An in-place operator (`aten::mul_`) among the three that wait most, called this
            // often: an update applied tensor by tensor, or an accumulation.
            let in_place = top.iter().take(3).find(|&&(name, (n, _))| {
                IN_PLACE_ARITHMETIC.contains(&name_or(t, name, "")) && n as usize / steps >= LOOP_CALLS
            });
            // `aten::copy_` waiting most, this often: slices written one at a time (x[i, :n] =
            // y[s:s + n] in a loop), each a launch or a memcpy; the slices' lengths are what
            // makes the shapes vary, so this comes before the graph's shape advice.
            let copy_loop = top.first().filter(|&&(name, (n, _))| {
                name_or(t, name, "") == "aten::copy_"
                    && n as usize / steps >= LOOP_CALLS
                    && copies_in_runs(cx, name) / steps >= LOOP_CALLS
            });
            let loop_advice = if let Some(&(name, (n, _))) = copy_loop
                && !sync_bound
                && cx.pytorch()
            {
                let at = frame_of(name).map(|f| format!(" at {f}")).unwrap_or_default();
                Some(format!(
                    "aten::copy_ waits {} times a step{at}: slices copied one at a time in a Python loop (out[i, :n] = src[s:s + n], or pieces written into a buffer), each its own launch. Compute the destination rows once as a tensor of indices and move every row in one indexed copy (out.view(-1, d)[rows] = src, or out.index_copy_(0, rows, src); src[rows] to gather), or torch.cat the pieces in one call.",
                    n as usize / steps
                ))
            } else if !sync_bound && varying.is_none() && cx.pytorch() {
                if let Some(&(name, (n, _))) = in_place {
                    let at = frame_of(name).map(|f| format!(" at {f}")).unwrap_or_default();
                    Some(format!(
                        "{} waits {} times a step{at}: an in-place operator in a Python loop. Where it updates a list of tensors one by one (an EMA of the weights, gradient scaling, a hand-written optimizer), the torch._foreach_* operators take the whole list in a few launches (torch._foreach_mul_ then torch._foreach_add_, or torch._foreach_lerp_); where it accumulates into one tensor (total.add_(x[i])), one reduction over the inputs (torch.sum over a stacked tensor) replaces the loop.",
                        name_or(t, name, "(no operator)"),
                        n as usize / steps
                    ))
                } else if let Some(&(name, _)) = top.first()
                    && let calls = calls_of.get(&name).map_or(0, |c| c.1)
                    && calls / steps >= LOOP_CALLS
                    && let Some(at) = frame_of(name)
                {
                    Some(format!(
                        "{} is called {} times a step at {at}, its kernels waiting for their launches: a Python loop of small calls. Iterations over independent items (samples, images, heads) batch into one call (stack the inputs, or torch.vmap(f)), which removes the launches rather than their cost; iterations that depend on each other cannot be batched as they are: a running sum, product or maximum over steps (acc = acc + x[:, t]) is a scan that torch.cumsum, cumprod, cummax or logcumsumexp computes in one call; for layers or decode steps, make each call larger or replay them as a graph.",
                        name_or(t, name, "(no operator)"),
                        calls / steps
                    ))
                } else {
                    None
                }
            } else {
                None
            };
            f.advice.extend(loop_advice);
            // torch.multinomial among the operators that wait most: its own argument checks
            // are most of its kernels.
            if cx.pytorch()
                && top
                    .iter()
                    .take(3)
                    .any(|&(name, _)| name_or(t, name, "") == "aten::multinomial")
            {
                f.advice.push(MULTINOMIAL_ADVICE.into());
            }
            // Copies of a scalar to the device, several a step, holding a tenth of the waits:
            // Python numbers turned into device tensors in the loop (left here only where
            // constant_uploads does not take them: run without it, or under its share).
            if cx.pytorch()
                && tiny_n >= crate::uploads::MIN_PER_STEP * steps
                && tiny_ns * 10 >= starved_ns
            {
                f.advice.push(format!(
                    "{} copies of at most {} bytes to the GPU a step waited for their launches ({} a step): Python numbers or short lists made device tensors inside the loop (torch.tensor(c, device=\"cuda\"), a scalar's .to(\"cuda\")), each a copy from pageable memory and, with non_blocking=False, a wait for the stream. Pass a Python number as it is (x * c needs no copy); where a device tensor is needed, torch.full((), c, device=\"cuda\") fills it on the GPU with no copy, or build such constants once, before the loop.",
                    tiny_n / steps,
                    crate::uploads::MAX_BYTES,
                    fmt_ns(tiny_ns / steps as i64)
                ));
            }
            // Short of half the waits, syncs still decide what a graph of the step can hold:
            // where operators that synchronise on most calls hold waits, or the step
            // synchronises several times, it cannot be replayed as one graph, and the graph
            // advice is the second half of the sync's (remove them, then replay), never a line
            // of its own that promises one launch for every kernel. One sync a step (a decode
            // loop's end-of-sequence check, a logged loss) leaves the step between two syncs
            // to capture whole: the graph advice stands, the sync after it.
            let mut sync_calls: Vec<u32> = dev
                .drained()
                .map(|s| s.drained_by)
                .chain(dev.read_back().map(|s| s.read_by))
                .collect();
            sync_calls.sort_unstable();
            sync_calls.dedup();
            let many_syncs = sync_calls.len() >= 2 * steps;
            let step_syncs = !sync_bound
                && cx.pytorch()
                && (!syncing.is_empty() || (drained_ns + read_back_ns > 0 && many_syncs));
            if step_syncs && !syncing.is_empty() {
                f.advice.push(format!(
                    "A CUDA graph cannot capture a synchronisation, and {} {} with the host on most calls ({} of these waits are before {} kernels): remove {} before replaying the step as a graph (torch.compile(mode=\"reduce-overhead\"), or torch.cuda.CUDAGraph around a static-shape step), or capture only the work between the syncs.",
                    syncing.join("; "),
                    if syncing.len() == 1 { "synchronises" } else { "synchronise" },
                    fmt_ns(syncing_ns),
                    if syncing.len() == 1 { "its" } else { "their" },
                    if syncing.len() == 1 { "that sync" } else { "those syncs" },
                ));
            } else if step_syncs {
                f.advice.push(format!(
                    "The host waits for the GPU {} times a step ({} of these waits follow syncs, see sync_stalls), and a CUDA graph cannot contain a sync: remove those reads before replaying the step as a graph (torch.compile(mode=\"reduce-overhead\"), or torch.cuda.CUDAGraph around a static-shape step), or capture only the work between them.",
                    sync_calls.len() / steps,
                    fmt_ns(drained_ns + read_back_ns)
                ));
            }
            // A graph cannot capture the syncs that hold most of it: no graph advice then.
            f.advice.extend(if sync_bound { Vec::new() } else if let Some(v) = varying { vec![
                v,
                if cx.pytorch() {
                    "Or give each kernel more work: a larger batch, or torch.compile to fuse the elementwise chains into fewer kernels.".into()
                } else {
                    "Or give each kernel more work: fuse small kernels, process more elements per launch.".into()
                },
            ] } else if openacc { vec![
                "Or give each compute region more work: fuse loops into one region (`acc kernels` around the nest, `collapse`), so each launch does more.".into(),
            ] } else if !cx.pytorch() { vec![
                GRAPH_ADVICE_CUDA.into(),
                "Or give each kernel more work: fuse small kernels, process more elements per launch.".into(),
            ] } else if step_syncs { vec![
                "Or give each kernel more work: a larger batch, or torch.compile to fuse the elementwise chains into fewer kernels.".into(),
            ] } else { vec![
                match hedge {
                    Some((_, busy_ns)) => format!(
                        "Time a synchronised step outside the profiler first (torch.cuda.synchronize(), then time.perf_counter() around the step): the GPU's work takes {} a step here, and only where the step takes longer than that without the profiler does the host hold the GPU back; then replay the step as a CUDA graph (torch.compile(mode=\"reduce-overhead\"), or torch.cuda.CUDAGraph around a static-shape step), so one launch queues every kernel.",
                        fmt_ns(busy_ns / steps as i64)
                    ),
                    None => GRAPH_ADVICE.into(),
                },
                "Or give each kernel more work: a larger batch, or torch.compile to fuse the elementwise chains into fewer kernels.".into(),
            ] });
            // A step's single sync (sync_stalls') is where a graph of it must stop.
            if !sync_bound && !step_syncs && drained_ns + read_back_ns > 0 && cx.pytorch() {
                f.advice.push(format!(
                    "The step also waits on the host ({} around syncs, see sync_stalls): a graph cannot contain a sync, so capture the work between them.",
                    fmt_ns(drained_ns + read_back_ns)
                ));
            }
            f.metrics = metrics([
                ("starved_ns", starved_ns as f64),
                ("starved_kernels", (starved_n - others_n) as f64),
                ("kernels", dev.kernels as f64),
                ("starved_copies", others_n as f64),
                ("copies", dev.other_ops as f64),
                ("drained_ns", drained_ns as f64),
                ("read_back_ns", read_back_ns as f64),
                ("optimizer_ns", optimizer_ns as f64),
                ("recomputation_waits_ns", recomputed_ns as f64),
                ("tensor_loop_ns", loop_ns as f64),
                ("constant_uploads_ns", uploads_ns as f64),
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

/// The innermost user Python frame above span `i`, with its caller's when there is one
/// (`model.py(12): f ← train.py(40): step`).
fn user_frames(t: &tracehound_parsers::Trace, i: u32) -> Option<String> {
    let mut found: Vec<&str> = Vec::new();
    for a in std::iter::once(i).chain(t.ancestors(i)) {
        let s = &t.host_spans[a as usize];
        if s.kind == tracehound_parsers::HostKind::Python && t.is_user_frame_name(s.name) {
            found.push(t.str(s.name));
            if found.len() == 2 {
                break;
            }
        }
    }
    match found.as_slice() {
        [] => t.user_frame(i).map(str::to_string),
        [one] => Some(one.to_string()),
        [inner, outer, ..] => Some(format!("{inner} ← {outer}")),
    }
}

/// Distinct input shapes a step, on average, of the starved kernels' operator `name` when they
/// are at least [`VARYING_SHAPES`] (a model's layers run a handful; a loop that grows a
/// sequence or routes a variable number of tokens runs a new one every call); `None` when
/// fewer, or when the trace records no shapes.
fn shapes_per_step(cx: &Ctx, dev: &crate::starved::DeviceStarved, name: u32) -> Option<f64> {
    let t = cx.trace;
    if name == tracehound_parsers::NONE {
        return None;
    }
    let mut seen: rustc_hash::FxHashSet<u32> = Default::default();
    for s in dev.launch_bound() {
        let outer = t.index.op_outer_cpu_op[s.op as usize];
        if outer == tracehound_parsers::NONE || t.host_spans[outer as usize].name != name {
            continue;
        }
        let dims = t.op_args(&t.host_spans[outer as usize]).input_dims;
        if !t.str(dims).is_empty() {
            seen.insert(dims);
        }
    }
    let steps = cx.window.steps_overlapping(t).count().max(1);
    let per = seen.len() as f64 / steps as f64;
    (per >= VARYING_SHAPES).then_some(per)
}

/// The calls of copy operator `name` (string id) that come in runs of at least [`COPY_RUN`]
/// on their thread, with only views between them (`out[i, :n] = src[s:s + n]` is a select,
/// two slices and a copy): slices written one at a time. A loop that also computes between
/// its copies (a decode step writing its token into a cache) is not one.
fn copies_in_runs(cx: &Ctx, name: u32) -> usize {
    let t = cx.trace;
    let views: Vec<u32> = crate::names::VIEW_OPS
        .iter()
        .filter_map(|v| t.strings.lookup(v))
        .collect();
    let mut calls = 0usize;
    for ops in cx.window.outermost_ops(t) {
        let mut run = 0usize;
        for i in ops {
            let n = t.host_spans[i as usize].name;
            if n == name {
                run += 1;
            } else if !views.contains(&n) {
                if run >= COPY_RUN {
                    calls += run;
                }
                run = 0;
            }
        }
        if run >= COPY_RUN {
            calls += run;
        }
    }
    calls
}

/// Copies in a row, only views between them, from which they are a loop over slices.
const COPY_RUN: usize = 32;

/// In-place arithmetic with a `torch._foreach_*` counterpart: called in a loop, an update
/// applied tensor by tensor (an assignment, `copy_`, or an indexed write is not one).
const IN_PLACE_ARITHMETIC: &[&str] = &[
    "aten::mul_",
    "aten::add_",
    "aten::sub_",
    "aten::div_",
    "aten::lerp_",
    "aten::addcmul_",
    "aten::addcdiv_",
    "aten::zero_",
    "aten::clamp_",
    "aten::clamp_min_",
    "aten::clamp_max_",
    "aten::sqrt_",
    "aten::neg_",
    "aten::pow_",
    "aten::exp_",
];

/// Starved kernels a step of one operator from which the operator is called in a loop.
const LOOP_CALLS: usize = 64;

/// Distinct input shapes a step from which an operator's shapes vary call to call.
const VARYING_SHAPES: f64 = 32.0;

/// Host time, by runtime call name, that the launching threads spent in each call overlapping
/// the waits `loose` (idle start to kernel start), with how many calls overlapped; most first.
fn host_calls_in(cx: &Ctx, loose: &[crate::starved::Starved]) -> Vec<(String, (i64, u64))> {
    let t = cx.trace;
    let threads = &cx.blocking_calls().threads;
    let mut by: BTreeMap<String, (i64, u64)> = BTreeMap::new();
    // A call that spans two waits (a sync across a copy and the kernel after it) counts once.
    let mut seen: rustc_hash::FxHashSet<u32> = Default::default();
    for s in loose {
        let launch = t.index.op_launch.get(s.op as usize).copied().unwrap_or(tracehound_parsers::NONE);
        let Some(l) = t.host_spans.get(launch as usize) else {
            continue;
        };
        let Some(th) = threads.get(&(l.pid, l.tid)) else {
            continue;
        };
        let (from, to) = (s.idle_from(t), s.kernel(t).start);
        // Calls that end after `from`: none of a thread's calls overlap, so starts order ends.
        let k = th.starts.partition_point(|&x| x < from).saturating_sub(1);
        for &c in th.calls[k..].iter() {
            let span = &t.host_spans[c as usize];
            if span.start >= to {
                break;
            }
            let overlap = span.end.min(to) - span.start.max(from);
            if overlap > 0 {
                let e = by.entry(t.api_name(span.name).to_string()).or_default();
                e.0 += overlap;
                e.1 += u64::from(seen.insert(c));
            }
        }
    }
    let mut out: Vec<(String, (i64, u64))> = by.into_iter().collect();
    out.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    out
}

/// Whether most of device `d`'s kernels in the window are compiled from OpenACC by NVHPC
/// (`__pgi_uacc_*` runtime kernels and `<function>_<line>_gpu` compute regions): the program
/// controls launches, copies and syncs through directives, not CUDA calls.
fn openacc_kernels(cx: &Ctx, d: i32) -> bool {
    let t = cx.trace;
    let (mut acc, mut all) = (0usize, 0usize);
    for (_, op) in cx.window.kernels(t, d) {
        all += 1;
        let n = t.str(op.name);
        if n.starts_with("__pgi_uacc") || n.starts_with("__nv_acc") || n.ends_with("_gpu") {
            acc += 1;
        }
    }
    all > 0 && 2 * acc > all
}
