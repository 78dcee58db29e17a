//! Matrix operators that cost the most time far below their roofline.
//!
//! Reads the roofline of [`crate::roofline`]: operators grouped by name, shapes and math, each
//! with its achieved TFLOP/s against the roof at its arithmetic intensity. A group is flagged
//! when it reaches less than half of the achievable share of its roof (35% of the roof: tuned
//! library kernels reach 70-90% on large shapes, see `docs/rules.md`). FP32 on CUDA cores and
//! misaligned half-precision GEMMs are left to the `tensor_cores` rule, which names their
//! cause, where the compute roof bounds them: an FP32 product under the HBM roof at its
//! intensity, moving enough a call to stream (4 µs of traffic at the roof, as
//! [`crate::membound::LATENCY_ROOF_NS`]), gains nothing from tensor cores, so it stays here. Batched products of tiny
//! matrices (every matrix dim at most [`TINY_DIM`], many of them) get their own advice: a GEMM
//! kernel's tiles are far larger than such a matrix, and a larger batch is not the remedy. The
//! impact is the time beyond what the achievable share of the roof needs; reported from 1% of
//! the window.

use super::Rule;
use crate::context::{Ctx, new_finding, rows_with_frames};
use crate::finding::{Confidence, Finding, fmt_ns, metrics};
use crate::hardware::Math;
use crate::roofline::{
    ACHIEVABLE, ACHIEVABLE_ATTENTION, RoofBound, RoofRow, achievable, time_at_roof_ns,
};

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
                .filter(|r| {
                    // FP32 is tensor_cores' unless the HBM roof bounds it at its shapes and
                    // each call moves enough to stream (below that, a kernel's fixed costs
                    // set its time, and no rewrite of the product shortens it).
                    let streams = r.bound == RoofBound::Memory
                        && r.bytes / r.count.max(1) as f64 / (d.peaks.mem_tbps * 1e3)
                            >= crate::membound::LATENCY_ROOF_NS;
                    (r.math != Math::Fp32 || streams) && !r.misaligned
                })
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
            // Each row's line: the user's frame of its first call.
            let frames = first_frames(cx, d.device, &low);
            f.breakdown = rows_with_frames(
                cx,
                low.iter().zip(frames).map(|(r, frame)| {
                    (
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
                            frame,
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
            // Batched products of tiny matrices: most of the time below the roof.
            let tiny: Vec<&&RoofRow> = low.iter().filter(|r| tiny_batched(r).is_some()).collect();
            let tiny_ns: i64 = tiny.iter().map(|r| r.time_ns).sum();
            f.advice = Vec::new();
            if 2 * tiny_ns >= time
                && let Some((batch, dims)) = tiny.first().and_then(|r| tiny_batched(r))
            {
                f.advice.push(format!(
                    "{} multiplies {batch} matrices of {dims} a call: a GEMM kernel's tiles (tens to hundreds of rows and columns) are far larger than each matrix, so it runs near-empty at a few percent of the bandwidth, and a larger batch does not change that. For matrices this small write the product out as a broadcast multiply and a sum over the shared dim ((A * x.transpose(-1, -2)).sum(-1, keepdim=True) for A @ x with x a column; torch.einsum maps to the same batched GEMM), or fuse it with its neighbours (torch.compile): the operands are then read once at memory speed.",
                    tiny[0].op
                ));
            } else if small {
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

/// Every matrix dim of a batched product at most this: one tensor-core MMA tile (16 × 8 × 16)
/// or less per matrix, where GEMM kernels tile 64 × 64 and more.
const TINY_DIM: u64 = 16;

/// Batched products of at least this many matrices a call are a batch of tiny ones, not one
/// small product (a batch of a few tiny matrices is simply small work).
const TINY_BATCH: u64 = 1024;

/// The batch and the matrix dims (`[3, 3] x [3, 1]`) of a batched product whose matrices are
/// tiny (every dim at most [`TINY_DIM`]) and many (at least [`TINY_BATCH`] a call), from the
/// row's recorded shapes; `None` otherwise.
fn tiny_batched(r: &RoofRow) -> Option<(u64, String)> {
    if r.kind != "gemm" {
        return None;
    }
    let (a, b) = r.shape.split_once(" x ")?;
    let (a, b) = (
        tracehound_parsers::shapes::numbers(a),
        tracehound_parsers::shapes::numbers(b),
    );
    if a.len() < 3 || b.len() < 3 {
        return None;
    }
    let (ma, mb) = (&a[a.len() - 2..], &b[b.len() - 2..]);
    let batch: u64 = a[..a.len() - 2].iter().product();
    let tiny = ma.iter().chain(mb).all(|&x| x <= TINY_DIM);
    (tiny && batch >= TINY_BATCH).then(|| {
        (
            batch,
            format!("[{}, {}] x [{}, {}]", ma[0], ma[1], mb[0], mb[1]),
        )
    })
}

/// The user's Python frame of the first call of each of `rows` (by operator, shape and math),
/// from the device's matrix calls; `None` where the trace records none.
fn first_frames(cx: &Ctx, device: i32, rows: &[&RoofRow]) -> Vec<Option<String>> {
    let t = cx.trace;
    let mut out: Vec<Option<Option<String>>> = vec![None; rows.len()];
    let mut left = rows.len();
    for c in &cx.matrix_calls(device).calls {
        if left == 0 {
            break;
        }
        let name = t.str(t.host_spans[c.op as usize].name);
        for (k, r) in rows.iter().enumerate() {
            if out[k].is_none() && r.op == name && r.math == c.math && r.shape == c.work.shape {
                out[k] = Some(t.user_frame(c.outer).map(str::to_string));
                left -= 1;
            }
        }
    }
    out.into_iter().map(Option::flatten).collect()
}
