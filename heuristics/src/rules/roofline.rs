//! Matrix operators that cost the most time far below their roofline.
//!
//! Reads the roofline of [`crate::roofline`]: operators grouped by name, shapes and math, each
//! with its achieved TFLOP/s against the roof at its arithmetic intensity. A group is flagged
//! when it reaches less than half of the achievable share of its roof (35% of the roof: tuned
//! library kernels reach 70-90% on large shapes, see `docs/rules.md`). FP32 on CUDA cores and
//! misaligned half-precision GEMMs are left to the `tensor_cores` rule, which names their
//! cause. The impact is the time beyond what the achievable share of the roof needs;
//! reported from 1% of the window.

use super::Rule;
use crate::context::{Ctx, new_finding, rows_by_time};
use crate::finding::{Confidence, Finding, fmt_ns, metrics};
use crate::hardware::Math;
use crate::roofline::{ACHIEVABLE, ACHIEVABLE_ATTENTION, achievable, time_at_roof_ns};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "roofline";

/// The rule.
pub struct Roofline;

impl Rule for Roofline {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "GEMM and attention operators far below the GPU's roofline for their math and shapes"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for d in cx.roofline() {
            let low: Vec<_> = d
                .rows
                .iter()
                .filter(|r| r.math != Math::Fp32 && !r.misaligned)
                .filter(|r| r.roof_share < achievable(r.kind == "attention") / 2.0)
                .collect();
            let impact: f64 = low
                .iter()
                .map(|r| {
                    (r.time_ns as f64
                        - time_at_roof_ns(
                            &d.peaks,
                            r.math,
                            r.flops,
                            r.bytes,
                            r.kind == "attention",
                        ))
                    .max(0.0)
                })
                .sum();
            let time: i64 = low.iter().map(|r| r.time_ns).sum();
            if low.is_empty() || cx.window.share(impact as i64) < 0.01 {
                continue;
            }
            let worst = low[0];
            let mut f = new_finding(
                cx,
                ID,
                Some(d.device),
                format!(
                    "Matrix operators far below the roofline: {} at under half their achievable share of the roof, worst {} {} at {:.0}%",
                    fmt_ns(time),
                    worst.op,
                    worst.math.label(),
                    100.0 * worst.roof_share
                ),
                impact as i64,
                Confidence::Low,
                format!(
                    "{} operator shapes on {} ({:.1} TB/s); achievable = {:.0}% of the roof ({:.0}% for attention); impact = time beyond that; attention FLOPs follow the recorded mask (full when not recorded)",
                    low.len(),
                    d.peaks.model,
                    d.peaks.mem_tbps,
                    100.0 * ACHIEVABLE,
                    100.0 * ACHIEVABLE_ATTENTION
                ),
            );
            f.breakdown = rows_by_time(
                cx,
                low.iter().map(|r| {
                    (
                        format!(
                            "{} {} {}: {:.0} TFLOP/s, {:.0}% of {:.0} ({}-bound)",
                            r.op,
                            r.math.label(),
                            r.shape,
                            r.tflops,
                            100.0 * r.roof_share,
                            r.roof_tflops,
                            r.bound
                        ),
                        (r.count, r.time_ns),
                    )
                }),
                time,
            );
            let convs = low.iter().any(|r| r.kind == "conv");
            // "Small shapes" only when they hold most of the time below the roof
            // ([`crate::roofline::RoofRow::is_small`]): batch-128 convolutions are not small.
            let small_ns: i64 = low.iter().filter(|r| r.is_small()).map(|r| r.time_ns).sum();
            let small = 2 * small_ns >= time;
            f.advice = Vec::new();
            if small {
                f.advice.push("Small or skinny shapes cannot fill the GPU: batch more rows per call (larger batch, fused QKV or expert GEMMs via torch.bmm/grouped GEMM).".into());
            }
            f.advice.push("Try torch.compile(mode=\"max-autotune\") on the module: it benchmarks Triton and cuBLAS kernels for these exact shapes.".into());
            if low.iter().any(|r| r.kind == "attention") {
                f.advice.push("Attention: pick the fastest SDPA backend for the shapes (torch.nn.attention.sdpa_kernel with FLASH_ATTENTION or CUDNN_ATTENTION; FlashAttention-3 on Hopper), and prefer head dim 128 over 64 where the model allows.".into());
            }
            if convs {
                f.advice.push("Convolutions: run the model in channels_last (model.to(memory_format=torch.channels_last) and the inputs too), keep channel counts multiples of 8, and set torch.backends.cudnn.benchmark = True for fixed input shapes; a 3-channel stem convolution stays far below the roof.".into());
            }
            f.metrics = metrics([("below_roof_ns", time as f64), ("shapes", low.len() as f64)]);
            out.push(f);
        }
        out
    }
}
