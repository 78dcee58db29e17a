//! Matrix operators (GEMM, batched GEMM, attention) placed on the GPU's roofline.
//!
//! For each operator with recorded shapes, the FLOPs and the minimum bytes it must move follow
//! from its input dims; with the GPU time of the kernels it launched, they give the achieved
//! TFLOP/s and TB/s. The roof at the operator's arithmetic intensity is
//! `min(peak FLOP/s, intensity × peak bandwidth)` for the math it ran in (tensor-core TF32,
//! BF16 ...: read from its kernels' names, since FP32 inputs run on CUDA cores unless TF32 is
//! allowed). Operators are grouped by name, shapes and math so a table row is one kind of
//! call. Convolutions are left out: their output size depends on stride and padding, which
//! the trace does not record as dims.

use crate::hardware::{Math, MathUnit, Peaks, peaks_for};

use crate::scope::Scope;
use serde::Serialize;
use std::collections::BTreeMap;
use tracehound_parsers::shapes::numbers;
use tracehound_parsers::{HostKind, NONE, Trace};

/// Which roof bounds an operator at its arithmetic intensity. Serialized, and printed, in
/// lowercase (`compute`, `memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RoofBound {
    /// The peak FLOP/s: intensity × bandwidth is above it.
    Compute,
    /// The memory bandwidth: intensity × bandwidth is below the peak FLOP/s.
    Memory,
}

impl RoofBound {
    /// The lowercase name (`compute`).
    pub fn label(self) -> &'static str {
        match self {
            RoofBound::Compute => "compute",
            RoofBound::Memory => "memory",
        }
    }
}

impl std::fmt::Display for RoofBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.label())
    }
}

/// One kind of matrix operator call on the roofline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoofRow {
    /// Operator name (`aten::addmm`).
    pub op: String,
    /// The shapes that set its FLOPs (`[4096, 4096] x [4096, 4096]`).
    pub shape: String,
    /// The math it ran in (`bf16`, `tf32`, `fp32` ...).
    pub math: Math,
    /// Calls.
    pub count: u64,
    /// GPU time of the kernels the calls launched, ns.
    pub time_ns: i64,
    /// FLOPs of all calls.
    pub flops: f64,
    /// Minimum bytes all calls move (each input read once, the output written once).
    pub bytes: f64,
    /// Achieved TFLOP/s.
    pub tflops: f64,
    /// Achieved TB/s (of the minimum traffic).
    pub tbps: f64,
    /// FLOPs per byte.
    pub intensity: f64,
    /// Which roof bounds it at its intensity.
    pub bound: RoofBound,
    /// The roof at its intensity, TFLOP/s.
    pub roof_tflops: f64,
    /// Achieved share of the roof (0..1).
    pub roof_share: f64,
    /// An attention call whose mask was not recorded: its FLOPs assume a full score matrix
    /// (a causal mask would halve them).
    pub attention: bool,
    /// `gemm`, `conv` or `attention`.
    pub kind: &'static str,
    /// A half-precision GEMM with N or K (a leading dimension) not a multiple of 8 (the tensor_cores rule's
    /// subject).
    pub misaligned: bool,
}

impl RoofRow {
    /// Small or skinny: its calls need under [`crate::membound::LATENCY_ROOF_NS`] each at the
    /// roof (too little work to fill the GPU past a kernel's fixed costs), or its shape gives
    /// too few FLOPs per byte to reach the compute roof.
    pub fn is_small(&self) -> bool {
        let per_call_ns = self.flops / self.count.max(1) as f64 / (self.roof_tflops * 1e3);
        self.bound == RoofBound::Memory || per_call_ns < crate::membound::LATENCY_ROOF_NS
    }
}

/// The roofline of one device.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceRoofline {
    /// Device index.
    pub device: i32,
    /// The peaks used.
    pub peaks: Peaks,
    /// Rows, most GPU time first.
    pub rows: Vec<RoofRow>,
    /// GPU time of all kernels in the window on this device, ns (for shares).
    pub kernel_ns: i64,
}

/// The element format of a recorded input type.
pub(crate) fn dtype_math(ty: &str) -> Option<Math> {
    Some(match ty {
        "float" => Math::Fp32,
        "c10::BFloat16" => Math::Bf16,
        "c10::Half" => Math::Fp16,
        "double" => Math::Fp64,
        t if t.contains("Float8") => Math::Fp8,
        _ => return None,
    })
}

/// What one matrix operator call computes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Work {
    /// FLOPs.
    pub flops: f64,
    /// Minimum elements moved.
    pub elems: f64,
    /// Shape text.
    pub shape: String,
    /// An attention call whose mask was not recorded (FLOPs assume a full score matrix).
    pub attention: bool,
    /// `gemm`, `conv` or `attention`.
    pub kind: &'static str,
    /// GEMM dimensions M, N, K.
    pub mnk: Option<(u64, u64, u64)>,
}

/// FLOPs, minimum elements moved and the shape text of a matrix operator call, from its
/// name and input dims; `None` for other operators.
pub(crate) fn matrix_work(
    name: &str,
    dims: &[Vec<u64>],
    concrete: Option<&[String]>,
) -> Option<Work> {
    let mat = |a: &Vec<u64>, b: &Vec<u64>| -> Option<Work> {
        // [.., M, K] x [.., K, N], with the batch of the first.
        let (&k, &m) = (a.last()?, a.get(a.len().checked_sub(2)?)?);
        let n = *b.last()?;
        if b.get(b.len().checked_sub(2)?)? != &k {
            return None;
        }
        let batch: u64 = a[..a.len() - 2].iter().product();
        let mnk = Some((m, n, k));
        let (b_, m, n, k) = (batch as f64, m as f64, n as f64, k as f64);
        let flops = 2.0 * b_ * m * n * k;
        let elems = b_ * (m * k + m * n) + k * n * if b.len() > 2 { b_ } else { 1.0 };
        Some(Work {
            flops,
            elems,
            shape: format!("{a:?} x {b:?}"),
            attention: false,
            kind: "gemm",
            mnk,
        })
    };
    let attn =
        |q: &Vec<u64>, k: &Vec<u64>, heads_second: bool, factor: f64, causal: Option<bool>| {
            if q.len() != 4 || k.len() != 4 {
                return None;
            }
            let (l, s) = if heads_second {
                (q[2], k[2])
            } else {
                (q[1], k[1])
            };
            let qn: f64 = q.iter().map(|&x| x as f64).product();
            let kn: f64 = k.iter().map(|&x| x as f64).product();
            // Q·Kᵀ and P·V: 2 GEMMs of 2·L·S·D per (batch, head); the backward pass does 2.5×.
            // A causal mask keeps the lower triangle: (L+1)/2L of a square score matrix.
            let kept = match causal {
                Some(true) if l == s && l > 0 => (l as f64 + 1.0) / (2.0 * l as f64),
                Some(true) => 0.5,
                _ => 1.0,
            };
            let flops = factor * 4.0 * qn * s as f64 * kept;
            // q, k, v read, output written.
            let elems = 2.0 * qn + 2.0 * kn;
            let mask = match causal {
                Some(true) => ", causal",
                Some(false) => "",
                None => ", mask not recorded",
            };
            Some(Work {
                flops,
                elems,
                shape: format!("q {q:?} k {k:?}{mask}"),
                attention: causal.is_none(),
                kind: "attention",
                mnk: None,
            })
        };
    let d = |i: usize| dims.get(i);
    // A 2-D (or N-D) convolution from input [N, C, H, W...], weight [O, C/g, kh, kw...] and
    // the output [N, O, Ho, Wo...]: 2·N·O·(C/g)·∏k·∏(output spatial) FLOPs per pass, and
    // the three tensors moved once per pass.
    let conv_from_output = |input: &Vec<u64>, w: &Vec<u64>, out: &Vec<u64>, passes: f64| {
        if input.len() < 3 || w.len() != input.len() || out.len() != input.len() {
            return None;
        }
        let f = |v: &[u64]| v.iter().map(|&x| x as f64).product::<f64>();
        let per_pass = 2.0 * f(out) * f(&w[1..]);
        let elems = f(input) + f(w) + f(out);
        (passes > 0.0).then(|| Work {
            flops: passes * per_pass,
            elems: elems * passes,
            shape: format!("conv {input:?} w {w:?} → {out:?}"),
            attention: false,
            kind: "conv",
            mnk: None,
        })
    };
    let conv = |input: &Vec<u64>,
                w: &Vec<u64>,
                pad: &Vec<u64>,
                stride: &Vec<u64>,
                dil: &Vec<u64>,
                passes: f64| {
        let sp = input.len().checked_sub(2)?;
        if sp == 0 || w.len() != input.len() {
            return None;
        }
        let at =
            |v: &Vec<u64>, k: usize, dflt: u64| v.get(k).or(v.first()).copied().unwrap_or(dflt);
        let mut out = vec![input[0], w[0]];
        for k in 0..sp {
            let (h, kk) = (input[2 + k] as i64, w[2 + k] as i64);
            let (p, s, dl) = (
                at(pad, k, 0) as i64,
                at(stride, k, 1).max(1) as i64,
                at(dil, k, 1) as i64,
            );
            let o = (h + 2 * p - dl * (kk - 1) - 1) / s + 1;
            if o <= 0 {
                return None;
            }
            out.push(o as u64);
        }
        conv_from_output(input, w, &out, passes)
    };
    match name {
        "aten::mm" | "aten::bmm" | "aten::matmul" | "aten::_scaled_mm" => mat(d(0)?, d(1)?),
        "aten::addmm" | "aten::baddbmm" | "aten::addbmm" => mat(d(1)?, d(2)?),
        "aten::cudnn_convolution" | "aten::convolution" | "aten::_convolution" => {
            // cudnn_convolution(input, weight, padding, stride, dilation, groups, ...);
            // convolution(input, weight, bias, stride, padding, dilation, transposed, ...,
            // groups).
            let c = concrete?;
            // (The weight's second dim is already C/groups.)
            let (p, st, dil) = if name == "aten::cudnn_convolution" {
                (2, 3, 4)
            } else {
                if c.get(6).is_some_and(|t| t == "True") {
                    return None; // transposed: another formula
                }
                (4, 3, 5)
            };
            let one = |k: usize| c.get(k).map(|v| numbers(v)).unwrap_or_default();
            conv(d(0)?, d(1)?, &one(p), &one(st), &one(dil), 1.0)
        }
        "aten::convolution_backward" => {
            // (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
            // output_padding, groups, output_mask): grad input and grad weight each cost a
            // forward pass; the output dims are the gradient's.
            let c = concrete.unwrap_or_default();
            let mask = c.get(10).map_or("[True, True, False]", String::as_str);
            let passes = mask
                .split(',')
                .take(2)
                .filter(|m| m.contains("True"))
                .count();
            let (go, input, w) = (d(0)?, d(1)?, d(2)?);
            conv_from_output(input, w, go, passes as f64)
        }
        n if n.contains("attention") && n.starts_with("aten::_") => {
            let backward = n.contains("backward");
            let heads_second = !(n.contains("_flash_attention_")
                || n.contains("_efficient_attention_"))
                || n.contains("scaled_dot_product");
            let (q, k) = if backward {
                (d(1)?, d(2)?)
            } else {
                (d(0)?, d(1)?)
            };
            attn(
                q,
                k,
                heads_second,
                if backward { 2.5 } else { 1.0 },
                attention_causal(n, concrete),
            )
        }
        _ => None,
    }
}

/// Names of the operators [`matrix_work`] has a formula for.
const MATRIX_OPS: &[&str] = &[
    "aten::mm",
    "aten::bmm",
    "aten::matmul",
    "aten::_scaled_mm",
    "aten::addmm",
    "aten::baddbmm",
    "aten::addbmm",
    "aten::cudnn_convolution",
    "aten::convolution",
    "aten::_convolution",
    "aten::convolution_backward",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_cudnn_attention_backward",
    "aten::_flash_attention_forward",
    "aten::_flash_attention_backward",
    "aten::_efficient_attention_forward",
    "aten::_efficient_attention_backward",
    "aten::_cudnn_attention_forward",
    "aten::_cudnn_attention_backward",
];

/// Whether an attention call was causal, from its recorded scalars: the position of
/// `is_causal` (or of the memory-efficient kernels' `custom_mask_type`, non-zero for causal)
/// in each operator's ATen signature. `None` when not recorded.
fn attention_causal(name: &str, concrete: Option<&[String]>) -> Option<bool> {
    let at = match name {
        "aten::_scaled_dot_product_flash_attention" => 4,
        "aten::_scaled_dot_product_efficient_attention"
        | "aten::_scaled_dot_product_cudnn_attention" => 6,
        "aten::_flash_attention_forward" => 8,
        "aten::_efficient_attention_forward" => 9,
        "aten::_cudnn_attention_forward" => 10,
        "aten::_scaled_dot_product_flash_attention_backward"
        | "aten::_flash_attention_backward"
        | "aten::_scaled_dot_product_efficient_attention_backward" => 11,
        "aten::_cudnn_attention_backward"
        | "aten::_scaled_dot_product_cudnn_attention_backward"
        | "aten::_efficient_attention_backward" => 14,
        _ => return None,
    };
    match concrete?.get(at)?.trim() {
        "True" => Some(true),
        "False" | "0" => Some(false),
        v if v.parse::<u64>().is_ok() => Some(true),
        _ => None,
    }
}

/// The matrix operator a kernel belongs to: its innermost CPU operator or the nearest
/// ancestor (within three levels) that is one, by name id (no string is read per kernel).
fn matrix_ancestor(t: &Trace, names: &rustc_hash::FxHashSet<u32>, inner: u32) -> u32 {
    let mut i = inner;
    for _ in 0..4 {
        if i == NONE {
            return NONE;
        }
        let s = &t.host_spans[i as usize];
        if s.kind == HostKind::CpuOp && names.contains(&s.name) {
            return i;
        }
        i = t.enclosing(i, HostKind::CpuOp);
    }
    NONE
}

/// One matrix operator call with the kernels it launched on one device.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// The operator's span.
    pub op: u32,
    /// The outermost operator around it (itself when none is): the nesting pass found it
    /// for each kernel, and a walk up from the operator reads a deep Python stack.
    pub outer: u32,
    /// GPU time of its kernels, ns.
    pub ns: i64,
    /// The math it ran in: the input format, TF32 for FP32 inputs on tensor cores.
    pub math: Math,
    /// What it computes.
    pub work: Work,
    /// Whether a leading dimension is not a multiple of 8, from the recorded strides; `None`
    /// where the trace kept none for it ([`unaligned_leading_dim`]).
    pub unaligned_ld: Option<bool>,
}

impl Call {
    /// A half-precision GEMM with N or K (a leading dimension) not a multiple of 8.
    pub fn is_misaligned_half(&self) -> bool {
        // Tensor-core GEMM kernels need 16-byte-aligned rows: the leading dimensions in
        // multiples of 8 halves. From the recorded strides where the trace kept them (a
        // transposed operand's leading dimension is M or N, not K); else from the shapes of
        // contiguous operands: K (of the [M, K] input) and N (of the weight and the output),
        // M, the number of rows, changing no row's alignment.
        matches!(self.math, Math::Bf16 | Math::Fp16)
            && match self.unaligned_ld {
                Some(u) => u,
                None => self
                    .work
                    .mnk
                    .is_some_and(|(_, n, k)| n % 8 != 0 || k % 8 != 0),
            }
    }
}

/// The matrix operator calls of one device and its kernel time in the window.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceCalls {
    /// Calls, in span order.
    pub calls: Vec<Call>,
    /// GPU time of all kernels of the device in the window, ns.
    pub kernel_ns: i64,
}

/// The matrix operator calls with recorded shapes and a known input format whose kernels
/// started on `device` in the window, in span order, and the device's kernel time there.
pub(crate) fn matrix_calls(cx: &Scope, device: i32) -> DeviceCalls {
    let (t, w) = (cx.trace, &cx.window);
    let names: rustc_hash::FxHashSet<u32> = MATRIX_OPS
        .iter()
        .filter_map(|n| t.strings.lookup(n))
        .collect();
    // Per matrix operator: its kernels' time and the units they ran on (kernels of one call
    // may hang off an operator inside it, a split-K reduction off the same operator).
    let mut per_op: rustc_hash::FxHashMap<u32, (i64, bool, bool, u32)> = Default::default();
    let mut kernel_ns = 0;
    // The last operator read, whether it is a matrix operator, and its matrix ancestor (found
    // on need): an operator's kernels come one after another, and each read of it was a
    // cache miss.
    let mut last: (u32, bool, Option<u32>) = (NONE, false, None);
    for (i, op) in w.kernels(t, device) {
        kernel_ns += op.dur();
        let cpu = t.index.op_cpu_op[i];
        if cpu == NONE || names.is_empty() {
            continue;
        }
        let unit = cx.kernel_class(op.name).unit;
        if last.0 != cpu {
            last = (cpu, names.contains(&t.host_spans[cpu as usize].name), None);
        }
        // Kernels of a matrix operator are launched by it, except the library's own matrix
        // kernels a wrapper operator's child launched: only those need the walk up the tree.
        let m = if last.1 {
            cpu
        } else if unit.is_some() {
            *last
                .2
                .get_or_insert_with(|| matrix_ancestor(t, &names, cpu))
        } else {
            NONE
        };
        if m == NONE {
            continue;
        }
        let e = per_op
            .entry(m)
            .or_insert((0, false, false, t.index.op_outer_cpu_op[i]));
        e.0 += op.dur();
        e.1 |= unit == Some(MathUnit::TensorCore);
        e.2 |= unit == Some(MathUnit::CudaCoreFp32);
    }
    let mut by_op: Vec<(u32, (i64, bool, bool, u32))> = per_op.into_iter().collect();
    by_op.sort_unstable_by_key(|e| e.0);
    // Calls of one operator repeat the same recorded dims and types text: each is read once.
    let mut dims_of: rustc_hash::FxHashMap<u32, Vec<Vec<u64>>> = Default::default();
    let mut math_of: rustc_hash::FxHashMap<(u32, u32), Option<Math>> = Default::default();
    let calls = by_op
        .into_iter()
        .filter_map(|(op, (ns, tc, simt, outer))| {
            let s = &t.host_spans[op as usize];
            let name = t.str(s.name);
            let args = t.op_args(s);
            let dims = dims_of
                .entry(args.input_dims)
                .or_insert_with(|| t.input_dims(op));
            let work = matrix_work(name, dims, t.concrete_inputs_of(op).as_deref())?;
            let dtype = (*math_of
                .entry((s.name, args.input_types))
                .or_insert_with(|| {
                    let types = t.input_types(op);
                    dtype_math(types.get(first_operand(name))?)
                }))?;
            let math = match dtype {
                Math::Fp32 if tc && !simt => Math::Tf32,
                m => m,
            };
            let unaligned_ld = t
                .input_strides_of(op)
                .map(|st| unaligned_leading_dim(name, dims, &st));
            Some(Call {
                op,
                outer,
                ns,
                math,
                work,
                unaligned_ld,
            })
        })
        .collect();
    DeviceCalls { calls, kernel_ns }
}

/// The position of a matrix operator's first matrix input: after the bias of `addmm` and
/// `baddbmm`, first otherwise.
fn first_operand(name: &str) -> usize {
    if name.starts_with("aten::add") || name.starts_with("aten::badd") {
        1
    } else {
        0
    }
}

/// Whether a matrix product's operands or output have a leading dimension (the stride of the
/// row or column that is not unit-stride) not a multiple of 8, from its recorded dims and
/// strides: a transposed operand's leading dimension is its row count, which the shapes alone
/// do not show (autograd's weight gradient of an LM head over 50257 words multiplies a
/// [50257, 8192] view with strides [1, 50257]). The output is written row-major, its leading
/// dimension N.
fn unaligned_leading_dim(name: &str, dims: &[Vec<u64>], strides: &[Vec<u64>]) -> bool {
    let first = first_operand(name);
    let operand = |k: usize| -> bool {
        let (Some(d), Some(st)) = (dims.get(k), strides.get(k)) else {
            return false;
        };
        if d.len() < 2 || st.len() != d.len() {
            return false;
        }
        let (r, c) = (d.len() - 2, d.len() - 1);
        // The leading dimension is the stride of whichever of the two dims is not unit-stride;
        // a dim of size 1 is never stepped over.
        let ld = if st[c] == 1 || d[c] == 1 {
            (d[r] > 1).then_some(st[r])
        } else if st[r] == 1 || d[r] == 1 {
            Some(st[c])
        } else {
            Some(st[r].max(st[c]))
        };
        ld.is_some_and(|ld| ld % 8 != 0)
    };
    let n_out = dims
        .get(first + 1)
        .and_then(|b| b.last())
        .is_some_and(|&n| n % 8 != 0);
    operand(first) || operand(first + 1) || n_out
}

/// Achievable share of a roof for GEMMs and convolutions: the best library kernels reach
/// 70-90% of datasheet peaks on large shapes (85-91% for the aligned bf16 GEMMs of our H200
/// captures), so time beyond what 70% of the roof needs is counted as recoverable.
pub const ACHIEVABLE: f64 = 0.7;

/// Achievable share of the roof for attention: fused attention kernels reach 35-60% of dense
/// peak on Hopper (FlashAttention-3 reports 40-75% forward at head dim 64-256, less backward;
/// cuDNN's reach 25-33% at head dim 64 on our H200 capture).
pub const ACHIEVABLE_ATTENTION: f64 = 0.45;

/// The achievable share of the roof for a kind of work.
pub fn achievable(attention: bool) -> f64 {
    if attention {
        ACHIEVABLE_ATTENTION
    } else {
        ACHIEVABLE
    }
}

/// Time work of `flops` and `bytes` needs at the achievable share of the roof.
pub(crate) fn time_at_roof_ns(
    peaks: &Peaks,
    math: Math,
    flops: f64,
    bytes: f64,
    attention: bool,
) -> f64 {
    let intensity = flops / bytes.max(1.0);
    let roof = peaks.tflops(math).min(intensity * peaks.mem_tbps);
    flops / (roof * 1e12 * achievable(attention)) * 1e9
}

/// The calls of `device` among every device's (none when it ran no matrix operators).
pub(crate) fn calls_of(matrix: &[(i32, DeviceCalls)], device: i32) -> &DeviceCalls {
    static EMPTY: DeviceCalls = DeviceCalls {
        calls: Vec::new(),
        kernel_ns: 0,
    };
    matrix
        .iter()
        .find(|(d, _)| *d == device)
        .map_or(&EMPTY, |(_, c)| c)
}

/// The roofline of every device that has known peaks and ran matrix operators with
/// recorded shapes in the window.
pub(crate) fn roofline(cx: &Scope, matrix: &[(i32, DeviceCalls)]) -> Vec<DeviceRoofline> {
    let t = cx.trace;
    let mut out = Vec::new();
    for d in t.devices() {
        let Some(gpu) = t.meta.gpu(d) else {
            continue;
        };
        let Some(peaks) = peaks_for(&gpu.name, gpu.memory_bytes) else {
            continue;
        };
        let DeviceCalls { calls, kernel_ns } = calls_of(matrix, d);
        let kernel_ns = *kernel_ns;
        type Key = (String, String, Math);
        // calls, time, FLOPs, bytes, mask unknown, misaligned, kind
        type Sums = (u64, i64, f64, f64, bool, bool, &'static str);
        let mut groups: BTreeMap<Key, Sums> = BTreeMap::new();
        for c in calls {
            let name = t.str(t.host_spans[c.op as usize].name).to_string();
            let misaligned = c.is_misaligned_half();
            let g = groups
                .entry((name, c.work.shape.clone(), c.math))
                .or_default();
            g.0 += 1;
            g.1 += c.ns;
            g.2 += c.work.flops;
            g.3 += c.work.elems * c.math.elem_bytes();
            g.4 = c.work.attention;
            g.5 = misaligned;
            g.6 = c.work.kind;
        }
        let mut rows: Vec<RoofRow> = groups
            .into_iter()
            .filter(|(_, g)| g.1 > 0)
            .map(
                |((op, shape, math), (count, ns, flops, bytes, attention, misaligned, kind))| {
                    let secs = ns as f64 / 1e9;
                    let tflops = flops / secs / 1e12;
                    let intensity = flops / bytes.max(1.0);
                    let compute = peaks.tflops(math);
                    let memory = intensity * peaks.mem_tbps;
                    let roof = compute.min(memory);
                    RoofRow {
                        op,
                        shape,
                        math,
                        count,
                        time_ns: ns,
                        flops,
                        bytes,
                        tflops,
                        tbps: bytes / secs / 1e12,
                        intensity,
                        bound: if memory < compute {
                            RoofBound::Memory
                        } else {
                            RoofBound::Compute
                        },
                        roof_tflops: roof,
                        roof_share: tflops / roof,
                        attention,
                        kind,
                        misaligned,
                    }
                },
            )
            .collect();
        if rows.is_empty() {
            continue;
        }
        rows.sort_by(|a, b| {
            b.time_ns
                .cmp(&a.time_ns)
                .then(a.op.cmp(&b.op))
                .then(a.shape.cmp(&b.shape))
        });
        out.push(DeviceRoofline {
            device: d,
            peaks,
            rows,
            kernel_ns,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_written_and_printed_in_lowercase() {
        for (b, text) in [
            (RoofBound::Compute, "compute"),
            (RoofBound::Memory, "memory"),
        ] {
            assert_eq!(b.to_string(), text);
            assert_eq!(serde_json::to_string(&b).unwrap(), format!("\"{text}\""));
        }
    }

    #[test]
    fn dims_and_work() {
        use tracehound_parsers::shapes::{dims, items};
        let d = dims("[[1024], [16384, 1024], [1024, 1024], [], []]");
        assert_eq!(
            d,
            vec![
                vec![1024],
                vec![16384, 1024],
                vec![1024, 1024],
                vec![],
                vec![]
            ]
        );
        let w = matrix_work("aten::addmm", &d, None).unwrap();
        assert_eq!(w.flops, 2.0 * 16384.0 * 1024.0 * 1024.0);
        assert_eq!(w.elems, 16384.0 * 1024.0 * 2.0 + 1024.0 * 1024.0);
        assert_eq!(w.mnk, Some((16384, 1024, 1024)));
        let q = vec![16, 16, 1024, 64];
        let w = matrix_work(
            "aten::_cudnn_attention_forward",
            &[q.clone(), q.clone(), q.clone()],
            None,
        )
        .unwrap();
        assert!(w.attention, "no scalars recorded: mask unknown");
        // The GPT capture's call: is_causal (11th scalar) True keeps (L+1)/2L of the scores.
        let causal = matrix_work(
            "aten::_cudnn_attention_forward",
            &[q.clone(), q.clone(), q.clone()],
            Some(&items(
                r#"["","","","","","","1024","1024","True","0.","True","False",""]"#,
            )),
        )
        .unwrap();
        assert!(!causal.attention);
        assert_eq!(causal.flops, w.flops * 1025.0 / 2048.0);
        assert_eq!(w.flops, 4.0 * 16.0 * 16.0 * 1024.0 * 1024.0 * 64.0);
        assert!(matrix_work("aten::mm", &[vec![4, 8], vec![9, 2]], None).is_none());
        // ResNet's stem: 7×7 stride 2 padding 3 on 224×224 gives 112×112.
        let stem = [vec![64, 3, 224, 224], vec![64, 3, 7, 7]];
        let w = matrix_work(
            "aten::cudnn_convolution",
            &stem,
            Some(&items(
                r#"["","","[3, 3]","[2, 2]","[1, 1]","1","False","False","True"]"#,
            )),
        )
        .unwrap();
        assert_eq!(w.flops, 2.0 * 64.0 * 64.0 * 112.0 * 112.0 * 3.0 * 49.0);
        let same = matrix_work(
            "aten::convolution",
            &stem,
            Some(&items(
                r#"["","","","[2, 2]","[3, 3]","[1, 1]","False","[0, 0]","1"]"#,
            )),
        )
        .unwrap();
        assert_eq!(same.flops, w.flops);
        // Backward with both gradients: two forward passes, from the gradient's dims.
        let b = matrix_work(
            "aten::convolution_backward",
            &[vec![64, 512, 7, 7], vec![64, 512, 7, 7], vec![512, 512, 3, 3]],
            Some(&items(r#"["","","","[0]","[1, 1]","[1, 1]","[1, 1]","False","[0, 0]","1","[True, True, False]"]"#)),
        )
        .unwrap();
        assert_eq!(b.flops, 2.0 * 2.0 * 64.0 * 512.0 * 49.0 * 512.0 * 9.0);
    }
}
