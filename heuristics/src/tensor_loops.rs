//! Python loops over a list of tensors: the same one to three per-tensor operators called back
//! to back, one call per tensor, each launching its own kernel (an EMA of the weights updated
//! parameter by parameter, gradients clipped or scaled one by one, a hand-written optimizer
//! step, `p.grad.zero_()` per parameter), where a `torch._foreach_*` operator takes the whole
//! list in a few launches. Found once per analysis ([`crate::context::Ctx::tensor_loops`]):
//! the tensor_loop rule prices the GPU's waits for their launches, and launch_bound leaves
//! those waits to it where it reports.
//!
//! A run is at least [`MIN_RUN`] consecutive outermost operators on one thread whose names are
//! all per-tensor operators with a foreach counterpart ([`FOREACH`]), at most [`MAX_NAMES`]
//! of them (`mul_`, `add_`; a norm per tensor). Any other operator between two calls ends the
//! run: a layer loop interleaves its per-tensor operators with matrix products and norms, and
//! `out[:, t] = acc` goes through `select`/`slice`. Operators inside an `Optimizer.*` range
//! are optimizer_overhead's (its single-tensor step is the same pattern, and that rule names
//! its cause). The trace records shapes, not tensor identities, so a loop that updates one
//! tensor many times looks the same: the advice says which reading it is for.

use crate::scope::Scope;
use rustc_hash::FxHashSet;
use tracehound_parsers::{NONE, StrId};

/// Per-tensor operators and the foreach operator that takes a list of them. `copy_` is not
/// one: libraries run it tensor by tensor themselves (`load_state_dict`, DDP's forward copies
/// its buckets and buffers: 106 calls in a row on HTA's A100 rank), where no user loop is
/// there to rewrite.
pub(crate) const FOREACH: &[(&str, &str)] = &[
    ("aten::mul_", "torch._foreach_mul_"),
    ("aten::add_", "torch._foreach_add_"),
    ("aten::sub_", "torch._foreach_sub_"),
    ("aten::div_", "torch._foreach_div_"),
    ("aten::lerp_", "torch._foreach_lerp_"),
    ("aten::addcmul_", "torch._foreach_addcmul_"),
    ("aten::addcdiv_", "torch._foreach_addcdiv_"),
    ("aten::zero_", "torch._foreach_zero_"),
    (
        "aten::clamp_",
        "torch._foreach_clamp_min_ / torch._foreach_clamp_max_",
    ),
    ("aten::clamp_min_", "torch._foreach_clamp_min_"),
    ("aten::clamp_max_", "torch._foreach_clamp_max_"),
    ("aten::sqrt_", "torch._foreach_sqrt_"),
    ("aten::neg_", "torch._foreach_neg_"),
    ("aten::exp_", "torch._foreach_exp_"),
    ("aten::pow_", "torch._foreach_pow_"),
    ("aten::norm", "torch._foreach_norm"),
    ("aten::linalg_vector_norm", "torch._foreach_norm"),
];

/// Consecutive calls from which a run is a loop over a list: more than a layer applies to its
/// few tensors, and as many as a model of a few dozen layers has parameters.
pub(crate) const MIN_RUN: usize = 32;

/// Distinct operators in a run at most: one update (`mul_`, then `add_`) or one reduction per
/// tensor. More is a step of its own (a hand-written optimizer's six is optimizer_overhead's
/// pattern inside its range).
pub(crate) const MAX_NAMES: usize = 3;

/// Share of the window the waits must reach for the rule to report, and for launch_bound to
/// leave them to it.
pub(crate) const MIN_SHARE: f64 = 0.01;

/// One run of per-tensor calls on a thread.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    /// Its operators' names, in first-call order.
    pub names: Vec<StrId>,
    /// Calls in the run.
    pub calls: usize,
    /// The first call's span.
    pub first: u32,
}

/// One device's waits for the launches of loop calls.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceWaits {
    /// Device index.
    pub device: i32,
    /// GPU idle before loop kernels that waited for their launch, ns.
    pub waits_ns: i64,
    /// Those kernels.
    pub kernels: usize,
    /// Whether the waits reach [`MIN_SHARE`] of the window.
    pub reported: bool,
}

/// The window's per-tensor loops.
#[derive(Debug, Clone, Default)]
pub(crate) struct TensorLoops {
    /// The runs, by thread then start.
    pub runs: Vec<Run>,
    /// Every call of every run (outermost operator spans).
    pub spans: FxHashSet<u32>,
    /// Waits per device with loop kernels.
    pub devices: Vec<DeviceWaits>,
}

impl TensorLoops {
    /// Adds device `device`'s waits: `waits` are its kernels that waited for a slow host (GPU
    /// op index and idle before it, ns; launch_bound's kind of wait), of which those launched
    /// by a loop call count.
    pub(crate) fn add_device(
        &mut self,
        t: &tracehound_parsers::Trace,
        window: &crate::window::Window,
        device: i32,
        waits: impl Iterator<Item = (u32, i64)>,
    ) {
        let mut d = DeviceWaits {
            device,
            ..Default::default()
        };
        for (op, gap) in waits {
            let o = t.index.op_outer_cpu_op[op as usize];
            if o != NONE && self.spans.contains(&o) {
                d.waits_ns += gap;
                d.kernels += 1;
            }
        }
        if d.kernels > 0 {
            d.reported = window.share(d.waits_ns) >= MIN_SHARE;
            self.devices.push(d);
        }
    }

    /// Whether GPU op `op` on `device` was launched by a loop call of a reported device: its
    /// wait is the tensor_loop finding's.
    pub(crate) fn owns(&self, t: &tracehound_parsers::Trace, device: i32, op: u32) -> bool {
        self.devices
            .iter()
            .any(|d| d.device == device && d.reported)
            && t.index
                .op_outer_cpu_op
                .get(op as usize)
                .is_some_and(|&o| o != NONE && self.spans.contains(&o))
    }
}

/// The foreach counterpart of per-tensor operator `name`.
pub(crate) fn counterpart(name: &str) -> Option<&'static str> {
    FOREACH.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The window's loops over tensor lists; their waits are added per device by
/// [`TensorLoops::add_device`].
pub(crate) fn scan(cx: &Scope) -> TensorLoops {
    let t = cx.trace;
    let w = &cx.window;
    let per_tensor = t.strings.matching(|n| counterpart(n).is_some());
    if !per_tensor.contains(&true) {
        return TensorLoops::default();
    }
    let optimizer = t.strings.matching(|n| n.starts_with("Optimizer."));
    let is = |v: &[bool], name: u32| v.get(name as usize).copied().unwrap_or(false);
    let mut loops = TensorLoops::default();
    let mut run: Vec<u32> = Vec::new();
    let mut names: Vec<StrId> = Vec::new();
    let close = |run: &mut Vec<u32>, names: &mut Vec<StrId>, loops: &mut TensorLoops| {
        if run.len() >= MIN_RUN {
            loops.spans.extend(run.iter().copied());
            loops.runs.push(Run {
                names: std::mem::take(names),
                calls: run.len(),
                first: run[0],
            });
        }
        run.clear();
        names.clear();
    };
    for ops in w.outermost_ops(t) {
        for i in ops {
            let s = &t.host_spans[i as usize];
            let per = is(&per_tensor, s.name)
                && !t
                    .ancestors(i)
                    .any(|a| is(&optimizer, t.host_spans[a as usize].name));
            if !per || (!names.contains(&s.name) && names.len() >= MAX_NAMES) {
                close(&mut run, &mut names, &mut loops);
                // A per-tensor call that ended the previous run starts the next one.
                if !per {
                    continue;
                }
            }
            if !names.contains(&s.name) {
                names.push(s.name);
            }
            run.push(i);
        }
        close(&mut run, &mut names, &mut loops);
    }
    loops
}
