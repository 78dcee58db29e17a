//! `aten::copy_` hotspots: copies made by `aten::copy_`, `aten::to`, `aten::_to_copy`,
//! `aten::contiguous` and `aten::clone`, with the GPU work they launch (copy and cast
//! kernels, device-to-device memcpys). Grouped by caller (the operator that asked for the
//! copy, e.g. `aten::linear` for autocast's weight casts) and by shape and dtype conversion;
//! dtype round trips (A -> B and B -> A on the same shape) are called out.
//!
//! The impact is the GPU time of that work. Host<->device memcpys are counted in the
//! evidence but not in the impact: the transfer rules own them, and ranking must not count
//! the same nanoseconds twice.

use super::Rule;
use crate::context::Ctx;
use crate::finding::{Confidence, Finding, Instance, Row, Severity, fmt_bytes, fmt_ns, metrics};
use crate::names::most_common;
use rustc_hash::FxHashMap;
use tracehound_parsers::{GpuOpKind, HostKind, NONE, Trace};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "copy_hotspots";

/// The rule.
pub struct CopyHotspots;

/// Operators whose job is to copy or convert a tensor.
pub fn is_copy_op(name: &str) -> bool {
    matches!(
        name,
        "aten::copy_"
            | "aten::to"
            | "aten::_to_copy"
            | "aten::contiguous"
            | "aten::clone"
            | "aten::_copy_from"
    )
}

/// Which interned names are copy-family operators, by string id: millions of spans are
/// tested, but a trace has only thousands of distinct names.
fn copy_names(t: &Trace) -> Vec<bool> {
    t.strings.matching(is_copy_op)
}

/// For every span, the outermost copy-family operator at or around it, or NONE; and the
/// host time of the outermost copies that start in the window, summed as the one pass over
/// the spans meets them (read again afterwards, each was a cache miss).
fn root_copies(t: &Trace, copy: &[bool], w: &crate::window::Window) -> (Vec<u32>, i64) {
    let mut cpu_ns = 0i64;
    let roots = t.outermost_where(
        |s| s.kind == HostKind::CpuOp && copy.get(s.name as usize).copied().unwrap_or(false),
        |s| {
            if s.start >= w.start && s.start < w.end {
                cpu_ns += s.dur();
            }
        },
    );
    (roots, cpu_ns)
}

/// Who asked for the copy: the nearest enclosing operator or user annotation
/// (`aten::linear`, `Optimizer.step#AdamW.step`), never the step marker itself.
fn caller_of(t: &Trace, root: u32) -> Option<&str> {
    caller_span(t, root).map(|a| t.str(t.host_spans[a as usize].name))
}

/// The span of [`caller_of`].
fn caller_span(t: &Trace, root: u32) -> Option<u32> {
    t.ancestors(root).find(|&a| {
        let s = &t.host_spans[a as usize];
        s.kind == HostKind::CpuOp
            || (s.kind == HostKind::Annotation && !t.str(s.name).starts_with("ProfilerStep#"))
    })
}

/// Whether a matrix operator's cast (under `aten::linear`, `aten::matmul`, a convolution) is
/// of its weight: the cast's input has the operator's second input's shape (`[out, in]`, or
/// `[out, in, kh, kw]`), not the first's (the activation). `None` when the records lack the
/// shapes or the operator is not a matrix one.
fn casts_weight(t: &Trace, caller: u32, root: u32) -> Option<bool> {
    let name = t.str(t.host_spans[caller as usize].name);
    if !(name == "aten::linear" || name == "aten::matmul" || name.starts_with("aten::conv")) {
        return None;
    }
    let ins = t.input_dims(caller);
    let cast = t.input_dims(root);
    let cast = cast.first().filter(|d| !d.is_empty())?;
    match (ins.first(), ins.get(1)) {
        (_, Some(w)) if w == cast => Some(true),
        (Some(x), _) if x == cast => Some(false),
        _ => None,
    }
}

/// `94%`: `part` as a share of `whole`.
fn pct(part: i64, whole: i64) -> String {
    format!("{:.0}%", 100.0 * part as f64 / whole.max(1) as f64)
}

/// `[16, 1024, 1024] float -> c10::BFloat16` from an `aten::copy_` (dst, src, ...) record.
fn shape_dtype(t: &Trace, copy: u32) -> (String, Option<(String, String)>) {
    let s = &t.host_spans[copy as usize];
    let dims = t.input_shapes(copy);
    let types = t.input_types(copy);
    let shape = dims.first().cloned().unwrap_or_else(|| "?".into());
    let conv = match (types.first(), types.get(1)) {
        (Some(dst), Some(src)) if t.str(s.name) == "aten::copy_" => {
            Some((src.clone(), dst.clone()))
        }
        _ => None,
    };
    (shape, conv)
}

/// The element count of a recorded shape (`[4096, 2048]`, `[]` for a scalar); None when the
/// text is no shape.
fn elements(shape: &str) -> Option<u64> {
    let inner = shape.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
    if inner.is_empty() {
        return Some(1);
    }
    inner.split(',').try_fold(1u64, |n, d| {
        d.trim().parse::<u64>().ok().map(|d| n.saturating_mul(d))
    })
}

/// A copy record's identity: input dims, input types and name of the copy operator, and the
/// name of the outermost copy operator around it (string ids).
type CopyKey = (u32, u32, u32, u32);

/// A dtype conversion, source then destination, when the record names both.
type Conversion = Option<(String, String)>;

#[derive(Default)]
struct Group<'t> {
    count: u64,
    gpu_ns: i64,
    bytes: u64,
    frames: Vec<Option<&'t str>>,
}

impl Rule for CopyHotspots {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "GPU time spent in aten::copy_ / to / _to_copy / contiguous / clone, by caller and by shape and dtype"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let mut gpu_ns = 0i64;
        let mut kernel_total = 0i64;
        // Kernels plus the device's own copies and memsets: the copies counted here can be
        // device-to-device memcpys (a contiguous slice copied), which no kernel holds.
        let mut work_total = 0i64;
        let mut transfer_bytes = 0u64;
        let mut transfer_ns = 0i64;
        let mut n_ops = 0u64;
        let mut per_root: FxHashMap<u32, (i64, u64, u32)> = FxHashMap::default();
        let copy = copy_names(t);
        if !copy.contains(&true) {
            return Vec::new();
        }
        let (root_copy, cpu_ns) = root_copies(t, &copy, w);
        // The casts of one-hot matrix products hot_operator reports are priced there, with
        // the one-hot tensor and the product they feed: counted once, not here too.
        let onehot = cx.onehot_products();
        // Per device where hot_operator runs and prices them (it always keeps that finding).
        let onehot_casts: rustc_hash::FxHashSet<u32> = onehot.iter().map(|g| g.cast).collect();
        let mut onehot_devices: rustc_hash::FxHashSet<i32> = rustc_hash::FxHashSet::default();
        if !onehot.is_empty() && cx.config.runs_rule("hot_operator") {
            for a in cx.accounting() {
                if cx.onehot_priced(a.device).is_some() {
                    onehot_devices.insert(a.device);
                }
            }
        }
        let mut onehot_ns = 0i64;
        let copy_ = t.strings.lookup("aten::copy_");
        // The last operator read and whether it is `aten::copy_`: an operator's kernels come
        // one after another, and each read of it was a cache miss.
        let mut last: (u32, bool) = (NONE, false);
        for (i, op) in t.gpu_ops.iter().enumerate() {
            if !op.is_work() || op.start < w.start || op.start >= w.end {
                continue;
            }
            if op.kind == GpuOpKind::Kernel {
                kernel_total += op.dur();
            }
            if !(op.kind == GpuOpKind::Memcpy && op.direction.crosses_host()) {
                work_total += op.dur();
            }
            let cpu = t.index.op_cpu_op[i];
            if cpu == NONE {
                continue;
            }
            let root = root_copy.get(cpu as usize).copied().unwrap_or(NONE);
            if root == NONE {
                continue;
            }
            if op.kind == GpuOpKind::Memcpy && op.direction.crosses_host() {
                transfer_bytes += op.bytes;
                transfer_ns += op.dur();
                continue;
            }
            if onehot_devices.contains(&op.device) && onehot_casts.contains(&root) {
                onehot_ns += op.dur();
                continue;
            }
            n_ops += 1;
            gpu_ns += op.dur();
            let e = per_root.entry(root).or_insert((0, 0, cpu));
            e.0 += op.dur();
            e.1 += op.bytes;
            // The innermost copy op records the dtype conversion; remember one.
            if last.0 != cpu {
                last = (cpu, Some(t.host_spans[cpu as usize].name) == copy_);
            }
            if last.1 {
                e.2 = cpu;
            }
        }
        if gpu_ns == 0 {
            return Vec::new();
        }
        let mut by_caller: FxHashMap<&str, Group> = FxHashMap::default();
        let mut by_shape: FxHashMap<String, Group> = FxHashMap::default();
        // Copies repeat every step with the same records: read each distinct one once.
        let mut labels: FxHashMap<CopyKey, (String, String, Conversion)> = FxHashMap::default();
        let mut per_label: FxHashMap<CopyKey, (u64, i64)> = FxHashMap::default();
        let mut conversions: FxHashMap<(String, String, String), (u64, i64)> = FxHashMap::default();
        let mut roots: Vec<(&u32, &(i64, u64, u32))> = per_root.iter().collect();
        // Unstable: the roots are the keys of a map, so no two are equal.
        roots.sort_unstable_by_key(|(r, _)| **r);
        let mut frames = tracehound_parsers::activity::UserFrames::new(t);
        // GPU time of casts feeding a matrix operator: of its weight, of its activation.
        let (mut weight_ns, mut activation_ns) = (0i64, 0i64);
        // By the two operators' recorded dims (interned): a model repeats a few shapes over
        // thousands of casts, and each answer parses both.
        let mut cast_kind: FxHashMap<(u32, u32, u32), Option<bool>> = FxHashMap::default();
        for &(&root, &(ns, bytes, copy)) in &roots {
            let span = caller_span(t, root);
            let kind = span.and_then(|c| {
                let caller = &t.host_spans[c as usize];
                let key = (
                    caller.name,
                    t.op_args(caller).input_dims,
                    t.op_args(&t.host_spans[root as usize]).input_dims,
                );
                *cast_kind
                    .entry(key)
                    .or_insert_with(|| casts_weight(t, c, root))
            });
            match kind {
                Some(true) => weight_ns += ns,
                Some(false) => activation_ns += ns,
                None => {}
            }
            let caller = span.map(|a| t.str(t.host_spans[a as usize].name));
            let frame = frames.get(t, root);
            let caller_label = caller.or(frame).unwrap_or("(called from Python directly)");
            let g = by_caller.entry(caller_label).or_default();
            g.count += 1;
            g.gpu_ns += ns;
            g.bytes += bytes;
            g.frames.push(frame);
            let c = &t.host_spans[copy as usize];
            let root_name = t.host_spans[root as usize].name;
            let args = t.op_args(c);
            let key = (args.input_dims, args.input_types, c.name, root_name);
            let (shape_label, _, _) = labels.entry(key).or_insert_with(|| {
                let (shape, conv) = shape_dtype(t, copy);
                let label = match &conv {
                    Some((src, dst)) if src != dst => format!("{shape} {src} → {dst}"),
                    // The record holds no strides: a same-dtype copy may be a layout change
                    // (.contiguous()), a clone or a slice written in place, and a one-element
                    // one is a constant (`aten::lift_fresh`'s scalars were "layout copies").
                    Some((src, _)) if elements(&shape).is_some_and(|n| n <= 1) => {
                        format!("{shape} {src} (same dtype: a scalar)")
                    }
                    Some((src, _)) => {
                        format!("{shape} {src} (same dtype: a copy on the device, no conversion)")
                    }
                    None => format!("{shape} via {}", t.str(root_name)),
                };
                (label, shape, conv)
            });
            let g = by_shape.entry(shape_label.clone()).or_default();
            g.count += 1;
            g.gpu_ns += ns;
            g.bytes += bytes;
            g.frames.push(frame);
            let e = per_label.entry(key).or_default();
            e.0 += 1;
            e.1 += ns;
        }
        let mut keys: Vec<_> = per_label.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            if let (Some((_, shape, Some((src, dst)))), Some(&(n, ns))) =
                (labels.get(&key), per_label.get(&key))
                && src != dst
            {
                let e = conversions
                    .entry((shape.clone(), src.clone(), dst.clone()))
                    .or_default();
                e.0 += n;
                e.1 += ns;
            }
        }
        fn rows<K: std::fmt::Display>(m: FxHashMap<K, Group>, prefix: &str) -> Vec<Row> {
            let mut v: Vec<Row> = m
                .into_iter()
                .map(|(label, g)| Row {
                    cause: None,
                    share: None,
                    label: format!("{prefix}{label}"),
                    count: g.count,
                    time_ns: g.gpu_ns,
                    bytes: None,
                    python_frame: most_common(&g.frames),
                })
                .collect();
            v.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.label.cmp(&b.label)));
            v
        }
        let callers = rows(by_caller, "caller ");
        let shapes = rows(by_shape, "");
        let mut round_trips: Vec<(String, u64, i64)> = conversions
            .iter()
            .filter_map(|((shape, src, dst), &(n, ns))| {
                let back = conversions.get(&(shape.clone(), dst.clone(), src.clone()))?;
                (src < dst).then(|| {
                    (
                        format!("{shape}: {src} → {dst} → {src}"),
                        n.min(back.0),
                        ns + back.1,
                    )
                })
            })
            .collect();
        round_trips.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let steps = t.steps.len().max(1) as u64;
        let half = cx.config.max_rows.div_ceil(2);
        let mut breakdown: Vec<Row> = callers.iter().take(half).cloned().collect();
        breakdown.extend(shapes.iter().take(cx.config.max_rows - half).cloned());
        for (label, n, ns) in round_trips.iter().take(2) {
            breakdown.push(Row {
                cause: None,
                share: None,
                label: format!("round trip {label}"),
                count: *n,
                time_ns: *ns,
                bytes: None,
                python_frame: None,
            });
        }
        let mut worst: Vec<(&u32, &(i64, u64, u32))> = roots.clone();
        worst.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
        let instances = worst
            .iter()
            .take(cx.config.max_instances)
            .map(|&(&root, &(ns, bytes, copy))| {
                let s = &t.host_spans[root as usize];
                let (shape, conv) = shape_dtype(t, copy);
                let conv = conv.map(|(a, b)| format!(" {a} → {b}")).unwrap_or_default();
                Instance {
                    start_ns: s.start,
                    dur_ns: ns,
                    offset_ms: w.offset_ms(s.start),
                    what: format!(
                        "{} {shape}{conv}: {} of GPU work{}",
                        t.str(s.name),
                        fmt_ns(ns),
                        if bytes > 0 {
                            format!(", {}", fmt_bytes(bytes))
                        } else {
                            String::new()
                        }
                    ),
                    cpu_op: caller_of(t, root).map(str::to_string),
                    python_frame: t.user_frame(root).map(str::to_string),
                }
            })
            .collect();
        let share = w.share(gpu_ns);
        let mut advice = Vec::new();
        let top_caller = callers
            .first()
            .map(|r| r.label.trim_start_matches("caller ").to_string());
        let autocast = callers.iter().take(3).any(|r| {
            let c = r.label.trim_start_matches("caller ");
            c == "aten::linear" || c == "aten::matmul" || c.starts_with("aten::conv")
        });
        // The half type the GPUs run on tensor cores: bf16 from compute capability 8.0, FP16
        // only before it (a T4's autocast casts to FP16; model.to(torch.bfloat16) there would
        // leave the tensor cores idle). Unknown capabilities keep bf16.
        let (half, half_name) = if !t.meta.gpus.is_empty()
            && t
                .meta
                .gpus
                .iter()
                .all(|g| g.compute_capability.is_some_and(|c| c < (8, 0)))
        {
            ("torch.float16", "FP16")
        } else {
            ("torch.bfloat16", "bf16")
        };
        // Which input autocast casts decides the change: the weights (recast every forward)
        // or the activations (FP32 out of the ops autocast keeps in FP32, norms, softmax).
        if autocast && weight_ns + activation_ns == 0 {
            advice.push(format!("Many copies sit under matrix operators: autocast casts their inputs to half precision in every forward (the records have no shapes to tell weights from activations): keep the model in one dtype (model.to({half}), FP32 master weights in the optimizer), or let torch.compile fuse the casts into their neighbours."));
        } else if autocast && weight_ns >= activation_ns {
            advice.push(format!("Many copies are autocast casting FP32 weights to half precision inside every forward ({} of the casts feeding matrix operators, by their shapes): keep the weights in {half_name} (model.to({half}) with FP32 master weights in the optimizer), or let torch.compile fuse the casts into the consumers.", pct(weight_ns, weight_ns + activation_ns)));
        } else if autocast {
            advice.push(format!("Many copies cast the activations entering matrix operators to half precision ({} of the casts feeding them, by their shapes): the ops before them leave FP32 (autocast runs norms, softmax and reductions in FP32, or the model's own code does): keep the forward in one dtype (model.to({half})), or let torch.compile fuse each cast into the op that produces it.", pct(activation_ns, weight_ns + activation_ns)));
        }
        if !round_trips.is_empty() {
            advice.push("Some tensors are converted and converted back (see round trips): keep them in one dtype across the boundary.".to_string());
        }
        // An operator's own conversions (attention's backward making its inputs contiguous) are
        // not the model's calls to remove.
        match top_caller.as_deref() {
            // A repeat writes every copy of its input out; a broadcast view reads the one.
            Some(c) if matches!(c, "aten::repeat_interleave" | "aten::repeat" | "aten::tile") => {
                advice.push(format!(
                    "Most of these copies are {c} materialising a repeated tensor: keep it a view (x.expand(...) or indexing with None broadcasts without a copy) and let the consumer broadcast{}.",
                    if t.strings.lookup("aten::scaled_dot_product_attention").is_some() {
                        "; for grouped-query attention pass the unrepeated K and V to F.scaled_dot_product_attention(..., enable_gqa=True) (PyTorch 2.5+)"
                    } else {
                        ""
                    }
                ))
            }
            // F.pad before a convolution writes out what the convolution's own padding reads.
            Some("aten::constant_pad_nd" | "aten::pad") if pads_feed_convolutions(cx) => {
                advice.push("Most of these copies are F.pad writing a padded copy of each input to a convolution, and its backward copying the gradient back out: pass the padding to the convolution instead (nn.Conv2d(..., padding=1); padding_mode='reflect', 'replicate' or 'circular' for the other modes), which reads the border without a copy.".to_string())
            }
            Some(c) if converts_its_own_inputs(c) => advice.push(format!(
                "Most of these copies are made inside {c}, by the operator itself (its inputs are not in the layout or dtype it computes in): pass it inputs laid out as it needs them, or leave them if they cost little."
            )),
            _ => advice.push(format!(
                "Avoid .contiguous(), .to(dtype) and .clone() in the hot loop: keep tensors in the dtype, layout and device their consumer needs{}.",
                if cx.compiled() {
                    ""
                } else {
                    ", and fuse the rest with torch.compile"
                }
            )),
        }
        vec![Finding {
            rule: ID,
            subject: None,
            id: String::new(),
            title: format!(
                "copy/convert operators take {} of GPU time ({:.0}% of the GPU's work), {}",
                fmt_ns(gpu_ns),
                100.0 * gpu_ns as f64 / work_total.max(1) as f64,
                // "Per step" only where the trace has steps.
                if t.steps.is_empty() {
                    format!("{} copies", per_root.len())
                } else {
                    format!("{:.0} copies per step", per_root.len() as f64 / steps as f64)
                }
            ),
            severity: Severity::from_share(share),
            impact_ns: gpu_ns,
            impact_share: share,
            confidence: Confidence::Medium,
            device: None,
            evidence: format!(
                "{} GPU ops under {} copy operators; top caller {}; host time inside copy operators {} (includes time blocked on the GPU); host<->device copies under them (not counted here) {} in {}{}",
                n_ops,
                per_root.len(),
                top_caller.unwrap_or_else(|| "-".into()),
                fmt_ns(cpu_ns),
                fmt_bytes(transfer_bytes),
                fmt_ns(transfer_ns),
                if onehot_ns > 0 {
                    format!(
                        "; casts of one-hot matrix products (hot_operator's one-hot finding, not counted here) {}",
                        fmt_ns(onehot_ns)
                    )
                } else {
                    String::new()
                }
            ),
            breakdown,
            instances,
            advice,
            metrics: metrics([
                ("gpu_ns", gpu_ns as f64),
                ("gpu_ops", n_ops as f64),
                ("copy_operators", per_root.len() as f64),
                (
                    "share_of_kernel_time",
                    gpu_ns as f64 / kernel_total.max(1) as f64,
                ),
                (
                    "share_of_gpu_work",
                    gpu_ns as f64 / work_total.max(1) as f64,
                ),
                ("host_ns", cpu_ns as f64),
                ("round_trips", round_trips.len() as f64),
            ]),
        }]
    }
}

/// Whether most of the program's own pads (outermost `aten::pad` or `aten::constant_pad_nd`,
/// not a pad inside another operator such as `torch.fft.rfft(x, n=...)`) are followed on their
/// thread by a convolution.
fn pads_feed_convolutions(cx: &Ctx) -> bool {
    let t = cx.trace;
    let (mut pads, mut fed) = (0u64, 0u64);
    for ops in cx.window.outermost_ops(t) {
        let mut after_pad = false;
        for i in ops {
            let name = t.str(t.host_spans[i as usize].name);
            if after_pad && name.contains("conv") {
                fed += 1;
            }
            after_pad = matches!(name, "aten::pad" | "aten::constant_pad_nd");
            pads += u64::from(after_pad);
        }
    }
    pads > 0 && 2 * fed > pads
}

/// Operators known to convert their own inputs (make them contiguous, cast them) inside:
/// PyTorch's fused attention and multi-head attention, cuDNN's convolutions. Underscore
/// operators users call themselves (`aten::_foreach_*`, `aten::_amp_*`) are not among them.
fn converts_its_own_inputs(op: &str) -> bool {
    op.starts_with("aten::_")
        && ["attention", "multi_head", "cudnn", "convolution"]
            .iter()
            .any(|k| op.contains(k))
}

#[cfg(test)]
mod rule_tests {
    use super::*;
    use crate::testutil::TB;
    use tracehound_parsers::GpuOpKind::{Kernel, Memcpy};

    fn check(t: &Trace) -> Vec<Finding> {
        crate::testutil::check(&CopyHotspots, t)
    }

    #[test]
    fn casts_under_linear_are_attributed_and_transfers_excluded() {
        let mut b = TB::new();
        b.span(HostKind::CpuOp, "aten::linear", 0, 100_000)
            .span(HostKind::CpuOp, "aten::to", 1_000, 50_000)
            .span(HostKind::CpuOp, "aten::_to_copy", 2_000, 49_000)
            .span(HostKind::CpuOp, "aten::copy_", 3_000, 48_000)
            .op(Kernel, "copy_kernel", 7, 10_000, 40_000, Some(4_000))
            .span(HostKind::CpuOp, "aten::mm", 60_000, 90_000)
            .op(Kernel, "gemm", 7, 60_000, 90_000, Some(61_000))
            // A host-to-device copy under aten::to: counted in evidence, not in the impact.
            .span(HostKind::CpuOp, "aten::to", 200_000, 300_000)
            .span(HostKind::CpuOp, "aten::copy_", 201_000, 299_000)
            .op(
                Memcpy,
                "Memcpy HtoD (Pinned -> Device)",
                7,
                210_000,
                290_000,
                Some(202_000),
            );
        let mut t = b.build();
        let args = tracehound_parsers::OpArgs {
            input_dims: t.strings.intern("[[16, 1024], [16, 1024], []]"),
            input_types: t
                .strings
                .intern("[\"c10::BFloat16\", \"float\", \"Scalar\"]"),
            call_stack: 0,
        };
        let args = t.args.intern(args);
        for s in t.host_spans.iter_mut() {
            if t.strings.get(s.name) == "aten::copy_" && s.start == 3_000 {
                s.args = args;
            }
        }
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].impact_ns, 30_000, "only the copy kernel counts");
        assert_eq!(f[0].metrics["gpu_ops"], 1.0);
        assert_eq!(f[0].breakdown[0].label, "caller aten::linear");
        assert!(
            f[0].breakdown
                .iter()
                .any(|r| r.label == "[16, 1024] float → c10::BFloat16")
        );
        assert!(f[0].advice[0].contains("autocast"));
    }

    #[test]
    fn no_copies_no_finding() {
        let t = TB::new().op(Kernel, "gemm", 7, 0, 10_000, None).build();
        assert!(check(&t).is_empty());
    }
}


#[cfg(test)]
mod tests {
    use super::elements;

    #[test]
    fn recorded_shapes_count_their_elements() {
        assert_eq!(elements("[]"), Some(1));
        assert_eq!(elements("[1]"), Some(1));
        assert_eq!(elements("[4096, 2048]"), Some(4096 * 2048));
        assert_eq!(elements("[0]"), Some(0));
        assert_eq!(elements("?"), None);
        assert_eq!(elements("[a, 2]"), None);
    }
}
