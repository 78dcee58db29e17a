//! The software stack check: driver, CUDA runtime, CUPTI, the GPU and what its matrix kernels
//! were built for, MIG, other processes, retired pages. Four layers, read bottom up
//! (hardware, driver, runtime, libraries): a mismatch low in the stack explains symptoms
//! higher up, so the summary prints them as a short "stack" section and the
//! `software_stack` rule turns the ones that need action into findings.

use crate::finding::fmt_bytes;
use crate::hardware::MathUnit;
use crate::scope::Scope;
use serde::Serialize;
use tracehound_parsers::cuda_version_text;

/// One fact of the stack, with what is wrong with it, if anything.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StackFact {
    /// What the fact is about: `driver`, `runtime`, `cupti`, `gpu`, `matrix kernels`, `mig`,
    /// `processes`, `retired pages`, `os`.
    pub item: &'static str,
    /// The value, for people (`580.159.04, supports CUDA 13.0`).
    pub value: String,
    /// What needs attention, when something does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

fn fact(item: &'static str, value: String, warning: Option<String>) -> StackFact {
    StackFact {
        item,
        value,
        warning,
    }
}

/// GEMM/convolution time on one device: (total, tensor cores, in kernels built for an older
/// architecture than the GPU's, that older architecture), ns.
pub(crate) fn matrix_kernels(cx: &Scope, device: i32, arch: u32) -> (i64, i64, i64, Option<u32>) {
    let t = cx.trace;
    let w = &cx.window;
    let (mut all, mut tc, mut old) = (0i64, 0i64, 0i64);
    let mut old_arch: Option<(u32, i64)> = None;
    for (_, op) in w.kernels(t, device) {
        let class = cx.kernel_class(op.name);
        let Some(unit) = class.unit else {
            continue;
        };
        all += op.dur();
        if unit == MathUnit::TensorCore {
            tc += op.dur();
        }
        if let Some(sm) = class.built_for
            && sm / 10 < arch / 10
        {
            old += op.dur();
            if old_arch.is_none_or(|(_, ns)| op.dur() > ns) {
                old_arch = Some((sm, op.dur()));
            }
        }
    }
    (all, tc, old, old_arch.map(|a| a.0))
}

/// The stack facts of a trace, bottom layer last: driver and runtime first, since they are
/// what a reader checks first.
pub fn stack_facts(cx: &Scope) -> Vec<StackFact> {
    let t = cx.trace;
    let s = &t.meta.stack;
    let mut out = Vec::new();
    let inv = t.inventory.first();
    let driver = s
        .driver
        .clone()
        .or_else(|| inv.and_then(|g| g.driver.clone()));
    if driver.is_some() || s.driver_cuda.is_some() {
        out.push(fact(
            "driver",
            match (&driver, s.driver_cuda) {
                (Some(d), Some(c)) => format!("{d}, supports CUDA {}", cuda_version_text(c)),
                (Some(d), None) => d.clone(),
                (None, Some(c)) => format!("supports CUDA {}", cuda_version_text(c)),
                (None, None) => String::new(),
            },
            None,
        ));
    }
    if let Some(r) = s.runtime_cuda {
        let warning = s.driver_cuda.filter(|&d| r > d).map(|d| {
            if r / 1000 > d / 1000 {
                format!(
                    "the runtime (CUDA {}) is a newer major version than the driver supports (CUDA {}): it runs only with the CUDA forward-compatibility package; upgrade the driver",
                    cuda_version_text(r),
                    cuda_version_text(d)
                )
            } else {
                format!(
                    "the runtime (CUDA {}) is newer than the driver supports (CUDA {}): minor-version compatibility runs it, but features that need the newer driver (some PTX JIT, new APIs) fail; upgrade the driver",
                    cuda_version_text(r),
                    cuda_version_text(d)
                )
            }
        });
        out.push(fact(
            "runtime",
            format!("CUDA {}", cuda_version_text(r)),
            warning,
        ));
    }
    if let Some(c) = s.cupti {
        out.push(fact("cupti", c.to_string(), None));
    }
    for d in t.devices() {
        let Some(g) = t.meta.gpu(d) else {
            continue;
        };
        // A trace may list a GPU without its name (ROCm's deviceProperties): say what it does
        // list, without an empty name before it.
        let mut parts: Vec<String> = Vec::new();
        if !g.name.is_empty() {
            parts.push(g.name.clone());
        }
        if let Some((a, b)) = g.compute_capability {
            parts.push(format!("compute capability {a}.{b}"));
        }
        if let Some(n) = g.sm_count {
            parts.push(format!("{n} SMs"));
        }
        if let Some(m) = g.memory_bytes {
            parts.push(fmt_bytes(m));
        }
        out.push(fact("gpu", format!("GPU {d}: {}", parts.join(", ")), None));
        let Some((a, b)) = g.compute_capability else {
            continue;
        };
        let arch = a * 10 + b;
        let (all, tc, old, old_arch) = matrix_kernels(cx, d, arch);
        if all > 0 {
            let mut v = format!(
                "GPU {d}: tensor cores run {:.0}% of GEMM/convolution time",
                100.0 * tc as f64 / all as f64
            );
            let mut warning = None;
            if let Some(o) = old_arch
                && old * 10 >= all
                && cx.window.share(old) >= 0.01
            {
                v.push_str(&format!(
                    "; {:.0}% is in kernels built for sm_{o} on this sm_{arch}",
                    100.0 * old as f64 / all as f64
                ));
                warning = Some(
                    "cuBLAS, CUTLASS and cuDNN pick older-architecture kernels for paths their newest ones do not cover (FP32 on CUDA cores, unaligned half-precision shapes, some convolution shapes): usually not a broken install; the tensor_cores finding, when there is one, names the change".into(),
                );
            }
            out.push(fact("matrix kernels", v, warning));
        }
    }
    let mig = s.mig.or_else(|| {
        t.inventory
            .iter()
            .filter_map(|g| g.mig)
            .reduce(|a, b| a || b)
    });
    if mig == Some(true) {
        out.push(fact(
            "mig",
            "on".into(),
            Some("a MIG slice has a fraction of the GPU's SMs, memory and bandwidth: compare against the slice, not the full GPU".into()),
        ));
    }
    for g in &t.inventory {
        if g.processes > 1 {
            out.push(fact(
                "processes",
                format!("{} compute processes on {}", g.processes, g.bus_id),
                Some(
                    "other processes share this GPU's SMs and memory: timings move with their load"
                        .into(),
                ),
            ));
        }
        if let Some(r) = g.retired_pages.filter(|&r| r > 0) {
            out.push(fact(
                "retired pages",
                format!("{r} on {}", g.bus_id),
                Some("retired memory pages mean failing HBM cells: check `nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER` and the RMA threshold".into()),
            ));
        }
    }
    if let Some(os) = &s.os {
        out.push(fact("os", os.clone(), None));
    }
    out
}
