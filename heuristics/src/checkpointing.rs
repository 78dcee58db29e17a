//! Activation checkpointing's recomputation, found once per analysis: the forward operators
//! that run again inside autograd's backward functions, the kernels they launched and the GPU
//! idle before those kernels. The `recomputation` rule reports it; `launch_bound` and the
//! verdict's count of launch waits leave the waits it prices to it, as they leave a
//! single-tensor optimizer's to `optimizer_overhead`.
//!
//! Autograd's backward functions (`autograd::engine::evaluate_function: …Backward0`) call the
//! backward formulas, which never call the composite forward operators a module calls
//! (`aten::linear`, `aten::layer_norm`, `aten::scaled_dot_product_attention`, `aten::conv2d`,
//! …): those run inside backward only when a checkpoint (`torch.utils.checkpoint`, either
//! form) recomputes the forward to rebuild the activations it did not keep.

use crate::scope::Scope;
use rustc_hash::{FxHashMap, FxHashSet};
use tracehound_parsers::{HostKind, NONE, StrId};

/// Composite forward operators that no backward formula calls: inside a backward function they
/// are a recomputation.
pub(crate) const FORWARD_OPS: &[&str] = &[
    "aten::linear",
    "aten::layer_norm",
    "aten::group_norm",
    "aten::batch_norm",
    "aten::rms_norm",
    "aten::scaled_dot_product_attention",
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::embedding",
    "aten::dropout",
    "aten::gelu",
    "aten::silu",
    "aten::relu",
];

/// Recomputed GPU time (kernels and the waits before them), as a share of the window, from
/// which it is reported: below it, neither the rule nor the exclusions apply.
pub(crate) const MIN_SHARE: f64 = 0.03;

/// The recomputation on one device.
#[derive(Debug, Default)]
pub(crate) struct DeviceRecomputation {
    /// The device.
    pub device: i32,
    /// Kernel time on the device in the window.
    pub kernel_ns: i64,
    /// Kernel time of the recomputed operators.
    pub recomputed_ns: i64,
    /// GPU idle before the recomputed kernels (the host running the forward again).
    pub waits_ns: i64,
    /// By recomputed operator name: its kernel time and the calls that launched it.
    pub by_name: FxHashMap<StrId, (i64, FxHashSet<u32>)>,
    /// The recomputed kernels (GPU op indices).
    pub kernels: FxHashSet<u32>,
    /// Whether it holds enough of the window to be reported ([`MIN_SHARE`]).
    pub reported: bool,
}

/// The window's recomputation, per device with any.
#[derive(Debug, Default)]
pub(crate) struct Recomputation {
    /// Per device, in device order.
    pub devices: Vec<DeviceRecomputation>,
    /// The user's frame that calls `torch.utils.checkpoint`, where the trace has Python frames.
    pub at: Option<String>,
}

impl Recomputation {
    /// Whether GPU op `op` on `device` is a reported recomputation's kernel: its wait is the
    /// recomputation's.
    pub(crate) fn owns(&self, device: i32, op: u32) -> bool {
        self.devices
            .iter()
            .any(|d| d.device == device && d.reported && d.kernels.contains(&op))
    }
}

/// Finds the recomputed forward operators and prices them on each device.
pub(crate) fn scan(cx: &Scope) -> Recomputation {
    let t = cx.trace;
    let w = &cx.window;
    let forward = t.strings.matching(|n| FORWARD_OPS.contains(&n));
    if !forward.iter().any(|&f| f) {
        return Recomputation::default();
    }
    let backward = t
        .strings
        .matching(|n| n.starts_with("autograd::engine::evaluate_function"));
    let is = |v: &[bool], name: u32| v.get(name as usize).copied().unwrap_or(false);
    // The outermost forward operators with a backward function above them.
    let mut recomputed: FxHashSet<u32> = FxHashSet::default();
    for (i, s) in t.host_spans.iter().enumerate() {
        if s.kind != HostKind::CpuOp
            || !is(&forward, s.name)
            || s.start < w.start
            || s.start >= w.end
        {
            continue;
        }
        let mut under_backward = false;
        for a in t.ancestors(i as u32) {
            let p = &t.host_spans[a as usize];
            if p.kind != HostKind::CpuOp {
                continue;
            }
            if is(&forward, p.name) {
                // Inside another forward operator: that one is counted.
                break;
            }
            if is(&backward, p.name) {
                under_backward = true;
                break;
            }
        }
        if under_backward {
            recomputed.insert(i as u32);
        }
    }
    if recomputed.is_empty() {
        return Recomputation::default();
    }
    let at = t
        .host_spans
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind == HostKind::Python)
        .find(|(_, s)| {
            let n = t.str(s.name);
            n.contains("utils/checkpoint.py(") && n.ends_with("): checkpoint")
        })
        .and_then(|(i, _)| t.user_frame(i as u32))
        .map(str::to_string);
    let mut devices = Vec::new();
    for d in t.devices() {
        let mut dev = DeviceRecomputation {
            device: d,
            ..Default::default()
        };
        let mut busy_end = i64::MIN;
        for (i, op) in w.kernels(t, d) {
            dev.kernel_ns += op.dur();
            let l = t.index.op_launch[i];
            let r = (l != NONE)
                .then(|| t.ancestors(l).find(|a| recomputed.contains(a)))
                .flatten();
            if let Some(r) = r {
                dev.recomputed_ns += op.dur();
                // The GPU idle before a recomputed kernel waited for the host to run the
                // forward again (its Python, its dispatch): the recomputation's too.
                if busy_end != i64::MIN {
                    dev.waits_ns += (op.start - busy_end).max(0);
                }
                let g = dev
                    .by_name
                    .entry(t.host_spans[r as usize].name)
                    .or_default();
                g.0 += op.dur();
                g.1.insert(r);
                dev.kernels.insert(i as u32);
            }
            busy_end = busy_end.max(op.end);
        }
        if dev.recomputed_ns == 0 {
            continue;
        }
        dev.reported = w.share(dev.recomputed_ns + dev.waits_ns) >= MIN_SHARE;
        devices.push(dev);
    }
    Recomputation { devices, at }
}
