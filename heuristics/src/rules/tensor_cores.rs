//! Tensor cores left idle: matrix math (GEMM, convolution) in FP32 on CUDA cores on a GPU
//! that has tensor cores, and half-precision GEMMs whose dimensions are not multiples of 8.
//!
//! The unit a kernel ran on is read from its name (cuBLAS, CUTLASS and cuDNN name the math:
//! `sgemm`, `ffma`, `simt` for CUDA cores; `tensorop`, `s1688`, `tf32`, `bf16`, `nvjet` for
//! tensor cores), so the rule needs no counters. FP32 on CUDA cores is reported when it costs
//! at least 1% of the window on compute capability 7.0+ (read from the trace, or from the
//! architecture the kernels were built for); the GPU time saved is that time less what the
//! same math needs at the GPU's TF32 (FP16 before 8.0) rate, by the datasheet ratio of the two
//! peaks, and the impact is the part of it the run gets back (`exposure.rs`): none of a
//! kernel's saving where the GPU next waited for the host.
//! Misaligned half-precision GEMMs fall back to kernels that cannot use the fastest tensor-core
//! paths (`align1` in their names); their impact is the time beyond 70% of the roof. Matrix
//! operators with float64 inputs (recorded input types) run at the FP64 peak, a fraction of
//! TF32's: their impact is the time beyond the same FLOPs in TF32 (FP32 without it) at 70% of
//! that peak, stated as conditional on the algorithm not needing FP64.

use super::Rule;
use crate::context::{Ctx, new_finding, rows_with_frames};
use crate::finding::{Confidence, Finding, fmt_ns, metrics};
use crate::hardware::{Math, MathUnit, peaks_for};
use crate::names::{name_or, short_name, span_name_id};
use crate::roofline::{ACHIEVABLE, time_at_roof_ns};
use std::collections::BTreeMap;
use tracehound_parsers::NONE;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "tensor_cores";

/// The rule.
pub struct TensorCores;

/// FP32 CUDA-core time, as a share of the window, from which it is reported.
const MIN_SHARE: f64 = 0.01;
/// Peak ratio FP32 : tensor-core math assumed when the GPU model is not in the table
/// (A100 and H100 have 1:8 and 1:7.4; 1:4 keeps the estimate conservative).
const UNKNOWN_RATIO: f64 = 0.25;

impl Rule for TensorCores {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "FP32 GEMMs and convolutions on CUDA cores, FP64 matrix math, and half-precision GEMMs with dimensions not multiples of 8"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for d in cx.trace.devices() {
            out.extend(fp32_on_cuda_cores(cx, d));
            out.extend(fp64_matrix_math(cx, d));
            out.extend(misaligned_half(cx, d));
        }
        out
    }
}

fn fp32_on_cuda_cores(cx: &Ctx, d: i32) -> Option<Finding> {
    let t = cx.trace;
    let w = &cx.window;
    let (mut tc, mut simt) = (0i64, 0i64);
    // By caller and kernel name ids first: the label is spelled once per pair, not once per
    // kernel (a decode capture runs millions of FP32 GEMVs).
    // With the user's line that launched them: the operator alone does not say which model
    // code holds the time. Consecutive kernels mostly share their operator, so its line is
    // looked up once per operator.
    let mut by_id: rustc_hash::FxHashMap<(u32, u32, Option<&str>), (u64, i64)> = Default::default();
    let mut last: (u32, Option<&str>) = (NONE, None);
    let mut built = BTreeMap::<u32, i64>::new();
    let mut n = 0u64;
    // Each CUDA-core kernel (index, duration): what a faster one gives back is priced per
    // kernel (exposure.rs).
    let mut simt_ops: Vec<(u32, i64)> = Vec::new();
    for (i, op) in w.kernels(t, d) {
        let class = cx.kernel_class(op.name);
        match class.unit {
            Some(MathUnit::TensorCore) => tc += op.dur(),
            Some(MathUnit::CudaCoreFp32) => {
                simt += op.dur();
                simt_ops.push((i as u32, op.dur()));
                n += 1;
                if let Some(sm) = class.built_for {
                    *built.entry(sm).or_default() += op.dur();
                }
                let caller = span_name_id(t, t.index.op_cpu_op[i]);
                let outer = t.index.op_outer_cpu_op[i];
                if outer != last.0 {
                    last = (outer, (outer != NONE).then(|| t.user_frame(outer)).flatten());
                }
                let g = by_id.entry((caller, op.name, last.1)).or_default();
                g.0 += 1;
                g.1 += op.dur();
            }
            None => {}
        }
    }
    let mut groups: BTreeMap<(String, Option<String>), (u64, i64)> = BTreeMap::new();
    for ((caller, name, frame), (count, ns)) in by_id {
        let caller = name_or(t, caller, "(no operator)");
        let g = groups
            .entry((
                format!("{caller} → {}", short_name(t.str(name), 60)),
                frame.map(str::to_string),
            ))
            .or_default();
        g.0 += count;
        g.1 += ns;
    }
    if simt == 0 || w.share(simt) < MIN_SHARE {
        return None;
    }
    let gpu = t.meta.gpu(d);
    let cc = gpu.and_then(|g| g.compute_capability);
    let arch = cc
        .map(|(a, b)| a * 10 + b)
        .or_else(|| built.keys().next_back().copied())?;
    if arch < 70 {
        return None;
    }
    let peaks = gpu.and_then(|g| peaks_for(&g.name, g.memory_bytes));
    // TF32 where it runs faster than FP32; GeForce Ampere runs it at the FP32 rate, so there
    // (and before TF32) the gain is in a 16-bit type.
    let tf32 = arch >= 80 && peaks.is_none_or(|p| p.tflops(Math::Tf32) > p.fp32);
    let target = if tf32 {
        Math::Tf32
    } else if arch >= 80 {
        Math::Bf16
    } else {
        Math::Fp16
    };
    let ratio = peaks.map_or(UNKNOWN_RATIO, |p| p.fp32 / p.tflops(target));
    // The GPU time the faster math saves, and the part of it the run gets back: where the
    // next operation was launched only after a kernel ended, the saving becomes idle time.
    let saved = (simt as f64 * (1.0 - ratio)) as i64;
    let exposure = crate::exposure::Exposure::of(cx, d);
    let impact: i64 = simt_ops
        .iter()
        .map(|&(i, ns)| exposure.gain(i, (ns as f64 * (1.0 - ratio)) as i64))
        .sum();
    let matrix = tc + simt;
    let gpu_text = match (gpu, cc) {
        (Some(g), Some((a, b))) => format!("{} (compute capability {a}.{b})", g.name),
        (Some(g), None) => g.name.clone(),
        _ => format!("GPU {d}"),
    };
    let rate = match peaks {
        Some(p) => format!(
            "{}: {} {:.0} vs FP32 {:.0} TFLOP/s",
            p.model,
            target.label().to_uppercase(),
            p.tflops(target),
            p.fp32
        ),
        None => format!(
            "peaks unknown for this GPU: assumed FP32 at {:.0}% of the {} rate",
            100.0 * UNKNOWN_RATIO,
            target.label().to_uppercase()
        ),
    };
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "FP32 matrix math on CUDA cores: {} of GEMM/convolution time ({:.0}%) leaves the tensor cores idle",
            fmt_ns(simt),
            100.0 * simt as f64 / matrix as f64
        ),
        impact,
        if peaks.is_some() {
            Confidence::Medium
        } else {
            Confidence::Low
        },
        format!(
            "{n} FP32 CUDA-core kernels (sgemm/ffma/simt) on {gpu_text}; tensor cores ran {:.0}% of matrix-kernel time; {rate}; {} would save {} of GPU time at the peak ratio{}",
            100.0 * tc as f64 / matrix as f64,
            target.label().to_uppercase(),
            fmt_ns(saved),
            if impact * 10 < saved * 9 {
                format!(
                    ", of which the run gets back {} (impact): the rest falls where the GPU then waited for the host to launch its next operation, so a faster kernel only lengthens that wait",
                    fmt_ns(impact)
                )
            } else {
                " (impact)".to_string()
            }
        ),
    );
    f.subject = Some("fp32".into());
    f.breakdown = rows_with_frames(cx, groups, simt);
    f.advice = if !cx.pytorch() {
        vec![if tf32 {
            "Let cuBLAS use the tensor cores for FP32 GEMMs: cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH), or cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 (cuDNN: CUDNN_FMA_MATH / allow TF32 in the convolution descriptor's math type); or keep the data in BF16/FP16 where the precision allows.".into()
        } else if arch >= 80 {
            "TF32 runs no faster than FP32 on this GPU's tensor cores: run the GEMMs in BF16 or FP16 (cublasGemmEx with CUDA_R_16BF or CUDA_R_16F inputs and FP32 accumulation) where the precision allows.".into()
        } else {
            "This GPU has FP16 tensor cores but no TF32: run the GEMMs in FP16 (cublasGemmEx with CUDA_R_16F inputs and FP32 accumulation) where the precision allows.".into()
        }]
    } else if tf32 {
        vec![
            "Allow TF32 for FP32 matmuls: torch.set_float32_matmul_precision(\"high\") (or torch.backends.cuda.matmul.allow_tf32 = True) once at start-up; convolutions follow torch.backends.cudnn.allow_tf32 (on by default).".into(),
            "Or run the model in bf16: wrap the forward pass and loss in torch.autocast(\"cuda\", dtype=torch.bfloat16), which also halves activation memory.".into(),
        ]
    } else if arch >= 80 {
        vec!["TF32 runs no faster than FP32 on this GPU's tensor cores: run the matrix work in bf16, torch.autocast(\"cuda\", dtype=torch.bfloat16) around the forward pass (and loss), which also halves activation memory.".into()]
    } else if cx.workload() != crate::phases::Workload::Inference {
        vec!["This GPU has FP16 tensor cores but no TF32: train with torch.autocast(\"cuda\", dtype=torch.float16) and a torch.amp.GradScaler.".into()]
    } else {
        // No backward or optimizer step in the trace: inference needs no loss scaling.
        vec!["This GPU has FP16 tensor cores but no TF32: run the forward under torch.autocast(\"cuda\", dtype=torch.float16), or convert the model with model.half() where the precision allows.".into()]
    };
    if let Some((&old, _)) = built.iter().max_by_key(|(_, ns)| **ns)
        && old < arch
    {
        f.advice.push(format!(
            "The kernels are built for sm_{old} on an sm_{arch} GPU: the libraries (cuBLAS, cuDNN) have no newer FP32 CUDA-core kernels, so this is the FP32 path itself, not a stale library."
        ));
    }
    f.metrics = metrics([
        ("fp32_cuda_core_ns", simt as f64),
        ("gpu_time_saved_ns", saved as f64),
        ("tensor_core_ns", tc as f64),
        ("tensor_core_share", tc as f64 / matrix as f64),
        ("kernels", n as f64),
        ("peak_ratio", ratio),
    ]);
    Some(f)
}

/// Matrix operators whose inputs are float64: the FP64 rate is a fraction of FP32's (with
/// TF32, of TF32's), and in a PyTorch program float64 usually comes from NumPy, whose arrays
/// are float64 by default and keep that dtype through torch.from_numpy. Impact: their time
/// beyond what the same FLOPs need in TF32 (FP32 without it) at the achievable 70% of that
/// peak. Only with the GPU's peaks known.
fn fp64_matrix_math(cx: &Ctx, d: i32) -> Option<Finding> {
    let t = cx.trace;
    let gpu = t.meta.gpu(d)?;
    let p = peaks_for(&gpu.name, gpu.memory_bytes)?;
    let target = if p.tf32.is_some() {
        Math::Tf32
    } else {
        Math::Fp32
    };
    let (mut time, mut flops, mut impact) = (0i64, 0f64, 0f64);
    // By operator, shape and the user's Python frame (the line to change).
    let mut groups: BTreeMap<(String, Option<String>), (u64, i64)> = BTreeMap::new();
    for c in cx
        .matrix_calls(d)
        .calls
        .iter()
        .filter(|c| c.math == Math::Fp64)
    {
        time += c.ns;
        flops += c.work.flops;
        let bytes = c.work.elems * target.elem_bytes();
        impact += (c.ns as f64
            - time_at_roof_ns(&p, target, c.work.flops, bytes, false) / ACHIEVABLE)
            .max(0.0);
        let g = groups
            .entry((
                format!(
                    "{} fp64 {}",
                    t.str(t.host_spans[c.op as usize].name),
                    c.work.shape
                ),
                t.user_frame(c.outer).map(str::to_string),
            ))
            .or_default();
        g.0 += 1;
        g.1 += c.ns;
    }
    if time == 0 || cx.window.share(time) < MIN_SHARE || p.fp64 <= 0.0 {
        return None;
    }
    let achieved = flops / time as f64 / 1e3;
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "FP64 matrix math: {} of GEMM time in double precision at {achieved:.0} TFLOP/s ({:.0}% of the {}'s FP64 peak of {:.0})",
            fmt_ns(time),
            100.0 * achieved / p.fp64,
            p.model,
            p.fp64
        ),
        impact as i64,
        if cx.pytorch() {
            Confidence::Medium
        } else {
            Confidence::Low
        },
        format!(
            "matrix operators with float64 inputs; {}: FP64 {:.0} vs {} {:.0} TFLOP/s; impact = their time beyond what the same FLOPs need in {} at {:.0}% of its peak (if the algorithm does not need FP64)",
            p.model,
            p.fp64,
            target.label().to_uppercase(),
            p.tflops(target),
            target.label().to_uppercase(),
            100.0 * ACHIEVABLE
        ),
    );
    f.subject = Some("fp64".into());
    f.breakdown = rows_with_frames(cx, groups, time);
    f.advice = if cx.pytorch() {
        vec![
            "Tensors made from NumPy arrays (torch.from_numpy, torch.tensor(ndarray)) keep NumPy's float64 default, and so does everything computed from them: convert at the source (.float(), dtype=torch.float32, or float32 arrays) and allow TF32 (torch.set_float32_matmul_precision(\"high\")), or run in bf16 under torch.autocast. Keep float64 only where the algorithm needs it (an ill-conditioned solve, a long accumulation).".into(),
        ]
    } else {
        vec![format!(
            "Where the algorithm tolerates it, run these GEMMs in FP32 with TF32 tensor-core math (cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32) or in mixed precision (FP32 or BF16 products, FP64 accumulation or iterative refinement where accuracy needs it): the {}'s FP64 peak is {:.0} TFLOP/s against {:.0}.",
            p.model,
            p.fp64,
            p.tflops(target)
        )]
    };
    f.metrics = metrics([
        ("fp64_ns", time as f64),
        ("fp64_tflops", achieved),
        ("fp64_peak_tflops", p.fp64),
    ]);
    Some(f)
}

fn misaligned_half(cx: &Ctx, d: i32) -> Option<Finding> {
    let t = cx.trace;
    let gpu = t.meta.gpu(d);
    let peaks = gpu.and_then(|g| peaks_for(&g.name, g.memory_bytes));
    let calls = &cx.matrix_calls(d).calls;
    let mut time = 0i64;
    let mut impact = 0f64;
    // By call and the user's line that made it: the fix (padding a width or a vocabulary) is
    // made where the layer is defined, and the line says which layer.
    let mut groups: BTreeMap<(String, Option<String>), (u64, i64)> = BTreeMap::new();
    for c in calls {
        let Some((m, n, k)) = c.work.mnk.filter(|_| c.is_misaligned_half()) else {
            continue;
        };
        time += c.ns;
        if let Some(p) = peaks {
            let bytes = c.work.elems * c.math.elem_bytes();
            impact +=
                (c.ns as f64 - time_at_roof_ns(&p, c.math, c.work.flops, bytes, false)).max(0.0);
        }
        let name = t.str(t.host_spans[c.op as usize].name);
        let g = groups
            .entry((
                format!(
                    "{name} {} {} (M={m} N={n} K={k})",
                    c.math.label(),
                    c.work.shape
                ),
                t.user_frame(c.op).map(str::to_string),
            ))
            .or_default();
        g.0 += 1;
        g.1 += c.ns;
    }
    if time == 0 || cx.window.share(time) < MIN_SHARE {
        return None;
    }
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "Half-precision GEMMs with dimensions not multiples of 8 take {}",
            fmt_ns(time)
        ),
        impact as i64,
        Confidence::Low,
        format!(
            "{} calls with a leading dimension not a multiple of 8 (N or K; M too where the recorded strides show a transposed operand, as in a weight gradient) run on unaligned kernels; impact = time beyond {:.0}% of the roof{}",
            groups.values().map(|g| g.0).sum::<u64>(),
            100.0 * crate::roofline::ACHIEVABLE,
            if peaks.is_none() {
                " (GPU peaks unknown: not estimated)"
            } else {
                ""
            }
        ),
    );
    f.subject = Some("misaligned".into());
    f.breakdown = rows_with_frames(cx, groups, time);
    f.advice = vec![
        "Pad the leading dimensions to multiples of 8 (64 for vocabulary sizes): hidden and FFN widths, head sizes; pad the vocabulary with unused tokens. The number of rows (batch × sequence) does not need padding.".into(),
    ];
    f.metrics = metrics([("misaligned_ns", time as f64)]);
    Some(f)
}
