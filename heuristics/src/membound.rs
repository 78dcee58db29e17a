//! Non-matrix operators against the HBM roof: elementwise ops, reductions, norms, softmax,
//! dropout, copies, gathers and scatters, multi-tensor optimizer kernels.
//!
//! For each operator call with recorded `Input Dims` and `Input type`, the bytes it must read
//! and write follow from its family (`docs/rules.md` lists the formulas): an elementwise op
//! reads every tensor input and writes the broadcast shape, an in-place one writes its first
//! input, a reduction reads its input (its output's size depends on reduced dims the
//! profiler does not record, and is small), a norm reads its input and parameters and writes
//! one output ... With the GPU time of the kernels the call launched (summed: an op over
//! more than 2^31 elements launches two), they give the achieved bandwidth and its share of
//! the GPU's HBM roof (the datasheet table of [`crate::hardware`]). A call whose traffic
//! needs under [`LATENCY_ROOF_NS`] at the roof is latency-bound: its kernels' fixed costs
//! (block dispatch, ramp-up, tail) outweigh the transfer.
//!
//! Without shapes, kernels are classified by their names only ([`crate::hardware::kernel_family`])
//! and their duration, and no bandwidth is given. The same pass splits each device's kernel
//! time into matrix, memory-bound, latency-bound and other work, for the verdict. Computed
//! once per analysis ([`crate::context::Ctx::membound`]); O(kernels), with each distinct
//! operator name, shape and type list modelled once.

use crate::hardware::{KernelClass, KernelFamily, Peaks, peaks_for};
use crate::scope::Scope;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;
use tracehound_parsers::activity::RecentSpans;
use tracehound_parsers::shapes::{dims as dims_of, items, numbers};
use tracehound_parsers::{GpuOpKind, HostKind, NONE, StrId, Trace};

/// What decides a non-matrix operator's kernel time. Serialized, and printed, in lowercase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemClass {
    /// The bytes it moves: enough traffic that bandwidth sets its time.
    Memory,
    /// Fixed per-kernel costs: its traffic needs under [`LATENCY_ROOF_NS`] at the roof.
    Latency,
}

impl MemClass {
    /// The lowercase name (`memory`).
    pub fn label(self) -> &'static str {
        match self {
            MemClass::Memory => "memory",
            MemClass::Latency => "latency",
        }
    }
}

impl std::fmt::Display for MemClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.label())
    }
}

/// The operator families with a bytes formula. Serialized in snake case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Unary and binary elementwise ops (broadcasting), in place or not, and their
    /// activation-gradient ops (`gelu_backward`).
    Elementwise,
    /// Sums, means, norms, min/max, variance.
    Reduction,
    /// LayerNorm, RMSNorm, BatchNorm, GroupNorm, forward and backward.
    Norm,
    /// Softmax and log-softmax, forward and backward.
    Softmax,
    /// Dropout with its mask.
    Dropout,
    /// Copies, casts, fills and concatenations.
    Copy,
    /// Embedding lookups, gathers, index selects, scatters.
    Index,
    /// Multi-tensor (`_foreach_*`) and fused optimizer kernels.
    Optimizer,
}

impl Family {
    /// The snake-case name (`elementwise`).
    pub fn label(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Reduction => "reduction",
            Family::Norm => "norm",
            Family::Softmax => "softmax",
            Family::Dropout => "dropout",
            Family::Copy => "copy",
            Family::Index => "index",
            Family::Optimizer => "optimizer",
        }
    }
}

/// A call moving less than this at the HBM roof is latency-bound: a kernel's fixed costs on
/// the GPU (dispatching its blocks, ramping up to full bandwidth, draining the tail) are a
/// few microseconds, so below 4 µs of transfer they, not bandwidth, set its time. On an
/// H200 that is 19 MB; the [8192, 1] statistics of a hand-written LayerNorm move 64 KB.
pub const LATENCY_ROOF_NS: f64 = 4_000.0;

/// Without shapes (or peaks), a kernel shorter than this is latency-bound, for the same
/// reason: its fixed costs are most of its time.
pub const LATENCY_KERNEL_NS: i64 = 5_000;

/// A memory-family kernel launched with at most this share of the GPU's SM count in blocks
/// runs on at most a quarter of the SMs: one SM's share of HBM bandwidth is a small fraction
/// of the whole, so such a kernel (`kthvalue`'s one-block selection on a 132-SM H200, 44 ms)
/// is bound by its parallelism, not the bytes it moves.
pub const FEW_BLOCKS_SHARE: f64 = 0.25;

/// One kind of non-matrix operator call: an operator with one shape and type list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemRow {
    /// Operator name (`aten::mul`).
    pub op: String,
    /// The tensors it reads (`[8192, 4096], [8192, 4096]`, or a tensor list's count and size).
    pub shape: String,
    /// The first tensor's element type (`fp32`, `bf16`, `int64` ...).
    pub dtype: String,
    /// Its family.
    pub family: Family,
    /// Calls.
    pub count: u64,
    /// Kernels the calls launched.
    pub kernels: u64,
    /// GPU time of those kernels, ns.
    pub time_ns: i64,
    /// Bytes all calls read and write (minimum traffic: each input read once, each output
    /// written once).
    pub bytes: f64,
    /// Achieved TB/s.
    pub tbps: f64,
    /// Share of the GPU's HBM bandwidth reached (0..1); `None` for GPUs without known peaks.
    pub hbm_share: Option<f64>,
    /// Memory- or latency-bound.
    pub class: MemClass,
}

/// What bounds a device's kernels, from their time shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelBound {
    /// Memory-bound operators hold the largest share of kernel time.
    Memory,
    /// Matrix kernels (GEMM, convolution, attention) hold it.
    Compute,
    /// Kernels too small to reach either roof hold it.
    Latency,
    /// Long kernels launched with too few blocks to use the GPU hold it: their parallelism,
    /// not bandwidth or FLOPs, bounds them.
    Parallelism,
}

impl KernelBound {
    /// The lowercase name (`memory`).
    pub fn label(self) -> &'static str {
        match self {
            KernelBound::Memory => "memory",
            KernelBound::Compute => "compute",
            KernelBound::Latency => "latency",
            KernelBound::Parallelism => "parallelism",
        }
    }
}

/// The non-matrix operators of one device against its HBM roof, and how its kernel time
/// splits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceMembound {
    /// Device index.
    pub device: i32,
    /// The GPU model whose peaks were used, when known.
    pub model: Option<&'static str>,
    /// The GPU's HBM bandwidth, TB/s, when known.
    pub hbm_tbps: Option<f64>,
    /// Whether operator shapes were recorded for its kernels (else classes come from kernel
    /// names and there is no bandwidth).
    pub shapes: bool,
    /// Operator kinds with a bytes model, most GPU time first.
    pub rows: Vec<MemRow>,
    /// GPU time of all kernels in the window, ns.
    pub kernel_ns: i64,
    /// Of it, matrix kernels (by name) of at least [`LATENCY_KERNEL_NS`].
    pub matrix_ns: i64,
    /// Memory-bound kernels: modelled calls of the memory class, and kernels of memory
    /// families by name of at least [`LATENCY_KERNEL_NS`].
    pub memory_ns: i64,
    /// Latency-bound kernels: modelled calls of the latency class, other kernels shorter than
    /// [`LATENCY_KERNEL_NS`].
    pub latency_ns: i64,
    /// Kernels without a bytes model, of at least [`LATENCY_KERNEL_NS`], launched with at most
    /// [`FEW_BLOCKS_SHARE`] as many blocks as the GPU has SMs: too few to stream from HBM or
    /// fill the compute units, whatever their names say.
    pub parallelism_ns: i64,
    /// The rest (communication, kernels of unknown kinds).
    pub other_ns: i64,
    /// Of `memory_ns`, kernels with a bytes model.
    pub modelled_ns: i64,
    /// Bytes those moved.
    pub modelled_bytes: f64,
    /// Their achieved TB/s (`modelled_bytes / modelled_ns`), when any.
    pub tbps: Option<f64>,
    /// That as a share of the HBM roof, when the peaks are known.
    pub hbm_share: Option<f64>,
    /// What bounds the kernels: the largest of the matrix, memory and latency shares, when
    /// it holds at least [`BOUND_SHARE`] of kernel time.
    pub bound: Option<KernelBound>,
}

impl DeviceMembound {
    /// `ns` as a share of this device's kernel time.
    pub fn share(&self, ns: i64) -> f64 {
        ns as f64 / self.kernel_ns.max(1) as f64
    }
}

/// The share of kernel time one kind of work needs for the verdict to name it: a plurality
/// below 40% (say 35% matrix, 33% memory, 32% other) says nothing about what to change.
pub const BOUND_SHARE: f64 = 0.4;

/// A tensor shape (or a tensor list's shapes) in a device's shape table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    /// Dims of a tensor; of a list, its tensors' dims, each ended by `u64::MAX`.
    pub dims: Vec<u64>,
    /// A tensor list (`TensorList`).
    pub list: bool,
    /// Element size, bytes.
    pub elem: u8,
    /// How many times its dims repeat each element it holds: the product of the dims whose
    /// recorded stride is 0 (an expanded input, `index.expand(n, d)`), 1 for a dense tensor.
    pub reps: u64,
}

impl Shape {
    /// A dense tensor of these dims and elements (what an operator writes).
    fn dense(&self) -> Shape {
        Shape {
            reps: 1,
            ..self.clone()
        }
    }

    /// Bytes read: an expanded tensor's elements are read once, however often its dims
    /// repeat them (caches serve the repeats).
    pub(crate) fn read_bytes(&self) -> f64 {
        self.bytes() / self.reps.max(1) as f64
    }

    /// Elements (of all tensors of a list).
    pub(crate) fn numel(&self) -> f64 {
        if self.list {
            // Each tensor's dims end with the marker; a 0-dim tensor is one element.
            let (mut total, mut one) = (0.0, 1.0);
            for &d in &self.dims {
                if d == u64::MAX {
                    total += one;
                    one = 1.0;
                } else {
                    one *= d as f64;
                }
            }
            total
        } else {
            self.dims.iter().map(|&x| x as f64).product()
        }
    }

    /// Bytes (of all tensors of a list).
    pub(crate) fn bytes(&self) -> f64 {
        self.numel() * self.elem as f64
    }
}

/// Whether two shapes broadcast against each other (dims aligned from the right, each pair
/// equal or one of them 1); tensor lists only match equal lists.
pub(crate) fn broadcastable(a: &Shape, b: &Shape) -> bool {
    if a.list || b.list {
        return a.list == b.list && a.dims == b.dims;
    }
    a.dims
        .iter()
        .rev()
        .zip(b.dims.iter().rev())
        .all(|(&x, &y)| x == y || x == 1 || y == 1)
}

/// What one operator call reads and writes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpModel {
    /// Its family.
    pub family: Family,
    /// Bytes read.
    pub read: f64,
    /// Bytes written.
    pub write: f64,
    /// The tensors it reads, as shape ids, in input order.
    pub inputs: Vec<u32>,
    /// The tensor it writes, when its shape is known (in place: its first input; none for
    /// reductions).
    pub output: Option<u32>,
    /// Whether it writes its first input in place, and if so whether it reads it too
    /// (`add_` does, `fill_` and `copy_` do not).
    pub in_place: Option<bool>,
    /// Its largest tensor (read or written).
    pub full: u32,
    /// Row text of the shapes.
    pub shape: String,
    /// Element type of the first tensor.
    pub dtype: &'static str,
    /// An elementwise op over dimensioned tensors of different element types
    /// (`x_bf16 * mask_bool`): TensorIterator runs it on its casting path, slower than the
    /// vectorised one for the same traffic; a fused kernel casts in registers.
    pub mixed: bool,
}

impl OpModel {
    /// Bytes read and written.
    pub fn bytes(&self) -> f64 {
        self.read + self.write
    }
}

/// Where a call's code sits, for chains: kernels of one chain come from one origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Origin {
    /// Under this user Python frame (span index).
    Frame(u32),
    /// Under the autograd engine on this thread (backward nodes record no Python frame).
    Backward(i64, i64),
    /// On this thread, with no Python frame recorded.
    Thread(i64, i64),
}

/// One operator call with a bytes model and the kernels it launched on one device.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MemCall {
    /// The operator's span.
    pub span: u32,
    /// Its model (index into [`DeviceModel::models`]).
    pub model: u32,
    /// GPU time of its kernels, ns.
    pub ns: i64,
    /// Kernels.
    pub kernels: u32,
    /// Memory- or latency-bound.
    pub class: MemClass,
    /// Where its code sits.
    pub origin: Origin,
    /// The optimizer `step` range it ran in (`Optimizer.step#AdamW.step`, span index), or
    /// [`NONE`].
    pub optimizer: u32,
    /// The autograd node it ran under (span index), for backward calls; else [`NONE`].
    pub node: u32,
    /// The innermost `nn.Module` it ran in below its user frame (span index), else [`NONE`]:
    /// library models (transformers, diffusers) record their modules but no user frame.
    pub module: u32,
}

/// One GPU operation of a device in the window, in start order, with the modelled call it
/// belongs to ([`NONE`] for matrix, generated, unmodelled kernels and copies).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Item {
    /// Index in `trace.gpu_ops`.
    pub op: u32,
    /// Index in [`DeviceModel::calls`], or [`NONE`].
    pub call: u32,
}

/// The non-matrix operator calls of one device.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceModel {
    /// Device index.
    pub device: i32,
    /// Operator models, each distinct name, shapes and types once.
    pub models: Vec<OpModel>,
    /// Shapes, each once.
    pub shapes: Vec<Shape>,
    /// Calls, in the order their first kernel started.
    pub calls: Vec<MemCall>,
    /// Every GPU operation in the window, in start order.
    pub items: Vec<Item>,
    /// How its kernel time splits.
    pub split: Split,
}

/// A device's kernel time by kind of work, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Split {
    /// All kernels in the window.
    pub kernel_ns: i64,
    /// Matrix kernels of at least [`LATENCY_KERNEL_NS`].
    pub matrix_ns: i64,
    /// Memory-bound calls and memory-family kernels of at least [`LATENCY_KERNEL_NS`].
    pub memory_ns: i64,
    /// Latency-bound calls and other kernels shorter than [`LATENCY_KERNEL_NS`].
    pub latency_ns: i64,
    /// Long unmodelled kernels launched on a few SMs' worth of blocks.
    pub parallelism_ns: i64,
    /// The rest.
    pub other_ns: i64,
}

/// The membound model of a trace: per device, its calls and summary, and where the host
/// recorded or waited on events (chains do not cross them).
#[derive(Debug, Clone, Default)]
pub struct Membound {
    /// Per device, ascending.
    pub(crate) devices: Vec<DeviceModel>,
    /// Per device, the summary.
    pub summary: Vec<DeviceMembound>,
    /// Start times of event records and stream waits per host thread, sorted.
    fences: FxHashMap<(i64, i64), Vec<i64>>,
}

impl Membound {
    /// The model of `device`, when it ran kernels in the window.
    pub(crate) fn device(&self, device: i32) -> Option<&DeviceModel> {
        self.devices.iter().find(|d| d.device == device)
    }

    /// The summary of `device`.
    pub fn summary_of(&self, device: i32) -> Option<&DeviceMembound> {
        self.summary.iter().find(|d| d.device == device)
    }

    /// Whether the host recorded or waited on a CUDA/HIP event between the launches of GPU
    /// ops `a` and `b` (indices in `trace.gpu_ops`), or launched them from different threads:
    /// an event between two kernels is a point other code observes (a timer, another stream
    /// waiting), so fusing across it would change what it sees.
    pub(crate) fn fenced(&self, t: &Trace, a: u32, b: u32) -> bool {
        let launch = |i: u32| {
            t.index
                .op_launch
                .get(i as usize)
                .copied()
                .filter(|&l| l != NONE)
                .map(|l| &t.host_spans[l as usize])
        };
        let (Some(la), Some(lb)) = (launch(a), launch(b)) else {
            return false;
        };
        if (la.pid, la.tid) != (lb.pid, lb.tid) {
            return true;
        }
        self.fences.get(&(la.pid, la.tid)).is_some_and(|f| {
            let k = f.partition_point(|&s| s <= la.start);
            f.get(k).is_some_and(|&s| s < lb.start)
        })
    }
}

/// The element size of a recorded input type, for tensors; `None` for scalars, lists and
/// unknown types.
pub(crate) fn elem_size(ty: &str) -> Option<u8> {
    Some(match ty {
        "float" | "int" | "unsigned int" => 4,
        "c10::BFloat16" | "c10::Half" | "short int" | "short" => 2,
        "double" | "long int" | "long" | "c10::complex<float>" => 8,
        "bool" | "unsigned char" | "signed char" | "char" => 1,
        t if t.starts_with("c10::Float8") => 1,
        _ => return None,
    })
}

/// A short label for an element type (`fp32`).
pub(crate) fn dtype_label(ty: &str) -> &'static str {
    match ty {
        "float" => "fp32",
        "c10::BFloat16" => "bf16",
        "c10::Half" => "fp16",
        "double" => "fp64",
        "long int" | "long" => "int64",
        "int" => "int32",
        "bool" => "bool",
        "unsigned char" => "uint8",
        "c10::complex<float>" => "complex64",
        t if t.starts_with("c10::Float8") => "fp8",
        "TensorList" => "list",
        _ => "other",
    }
}

/// How an operator's bytes are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Formula {
    /// Read every tensor, write the broadcast shape (in place: the first input).
    Elementwise,
    /// Elementwise with a boolean result.
    Compare,
    /// Read every tensor; the output is small and its size not recorded.
    Reduction,
    /// Read every tensor, write one tensor the size of the first (norm and softmax forward
    /// and backward: the gradient of the input; parameter gradients are small).
    LikeFirst,
    /// Read the input, write the output and a one-byte mask.
    Dropout,
    /// `copy_(self, src)`: read the source, write self.
    CopyInto,
    /// Write the first input only (`fill_`, `zero_`).
    Fill,
    /// Read and write every tensor of the list (concatenation).
    Concat,
    /// `index_select(self, dim, index)` / `embedding(weight, indices)`: gather rows of the
    /// first tensor (dim 0: the recorded scalars do not say which dim). Its rows are read
    /// from memory at most once each: a source smaller than what is gathered (a 1 MB table
    /// expanded to 33 MB) is served by the cache after its first read. For a source larger
    /// than the cache, whose repeated rows may be read again, this is a lower bound.
    Rows,
    /// `gather(self, dim, index)`: as many elements as the index, the source read at most
    /// once (as [`Formula::Rows`]).
    Gather,
    /// Scatters and `index_put_`: read the index and source, write as many elements.
    Scatter,
    /// Read everything, write nothing counted (`embedding_dense_backward`: the rows it
    /// writes are not recorded).
    ReadOnly,
    /// A multi-tensor op: read every list, write the first.
    Foreach,
    /// A multi-tensor reduction (`_foreach_norm`).
    ForeachReduce,
    /// A fused optimizer: read every list, write all but the gradients (the second).
    FusedOptimizer,
}

/// Elementwise ops, without `aten::` and a trailing `_` (the in-place form).
const ELEMENTWISE: &[&str] = &[
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "true_divide",
    "floor_divide",
    "remainder",
    "fmod",
    "pow",
    "neg",
    "abs",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "square",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "erf",
    "erfc",
    "sign",
    "relu",
    "relu6",
    "gelu",
    "silu",
    "mish",
    "elu",
    "selu",
    "celu",
    "leaky_relu",
    "hardtanh",
    "hardswish",
    "hardsigmoid",
    "softplus",
    "threshold",
    "clamp",
    "clamp_min",
    "clamp_max",
    "clip",
    "where",
    "masked_fill",
    "lerp",
    "addcmul",
    "addcdiv",
    "maximum",
    "minimum",
    "floor",
    "ceil",
    "round",
    "trunc",
    "frac",
    "nan_to_num",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "cumsum",
    "cumprod",
    "tril",
    "triu",
    "gelu_backward",
    "silu_backward",
    "tanh_backward",
    "sigmoid_backward",
    "threshold_backward",
    "hardtanh_backward",
    "leaky_relu_backward",
    "elu_backward",
    "mish_backward",
    "hardswish_backward",
    "hardsigmoid_backward",
    "softplus_backward",
    "native_dropout_backward",
    "clone",
    "contiguous",
];

/// Elementwise operators of two operands, whose `.out` overloads Kineto records with a third
/// tensor: the output.
const BINARY: &[&str] = &[
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "true_divide",
    "floor_divide",
    "remainder",
    "fmod",
    "pow",
    "maximum",
    "minimum",
    "fmax",
    "fmin",
    "atan2",
    "hypot",
    "copysign",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
];

const COMPARE: &[&str] = &[
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "isnan",
    "isinf",
    "isfinite",
    "signbit",
];

const REDUCTION: &[&str] = &[
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "prod",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "norm",
    "linalg_vector_norm",
    "argmax",
    "argmin",
    "logsumexp",
    "any",
    "all",
    "count_nonzero",
    "nansum",
];

/// The family and formula of an operator, by name.
fn formula(name: &str) -> Option<(Family, Formula)> {
    let base = name.strip_prefix("aten::")?;
    if let Some(f) = base.strip_prefix("_foreach_") {
        let f = f.trim_end_matches('_');
        return Some((
            Family::Optimizer,
            match f {
                "norm" | "max" => Formula::ForeachReduce,
                "copy" => Formula::Foreach,
                "zero" => Formula::Fill,
                _ => Formula::Foreach,
            },
        ));
    }
    if base.starts_with("_fused_") && base.ends_with('_') && !base.contains("norm") {
        // _fused_adam_, _fused_adamw_, _fused_sgd_, _fused_adagrad_.
        return Some((Family::Optimizer, Formula::FusedOptimizer));
    }
    let stem = base.trim_end_matches('_');
    Some(match stem {
        "native_layer_norm"
        | "native_batch_norm"
        | "cudnn_batch_norm"
        | "miopen_batch_norm"
        | "_native_batch_norm_legit"
        | "_native_batch_norm_legit_no_training"
        | "native_group_norm"
        | "_fused_rms_norm"
        | "native_layer_norm_backward"
        | "native_batch_norm_backward"
        | "cudnn_batch_norm_backward"
        | "miopen_batch_norm_backward"
        | "native_group_norm_backward"
        | "_fused_rms_norm_backward"
        | "batch_norm_elemt"
        | "batch_norm_backward_elemt" => (Family::Norm, Formula::LikeFirst),
        "batch_norm_stats" | "batch_norm_backward_reduce" => (Family::Norm, Formula::Reduction),
        "_softmax"
        | "_log_softmax"
        | "_softmax_backward_data"
        | "_log_softmax_backward_data"
        | "_masked_softmax" => (Family::Softmax, Formula::LikeFirst),
        "native_dropout" => (Family::Dropout, Formula::Dropout),
        "copy" => (Family::Copy, Formula::CopyInto),
        "fill" | "zero" => (Family::Copy, Formula::Fill),
        // In-place random fills (`torch.rand_like` is `empty_like` + `uniform_`): they write
        // their tensor, and their generator's arithmetic is an elementwise kernel's.
        _ if random_fill(name) => (Family::Elementwise, Formula::Fill),
        "cat" | "_cat" | "stack" => (Family::Copy, Formula::Concat),
        "index_select" | "embedding" => (Family::Index, Formula::Rows),
        "gather" => (Family::Index, Formula::Gather),
        "scatter" | "scatter_add" | "scatter_reduce" | "index_add" | "index_copy" | "index_put"
        | "_index_put_impl" => (Family::Index, Formula::Scatter),
        "embedding_dense_backward" => (Family::Index, Formula::ReadOnly),
        s if REDUCTION.contains(&s) => (Family::Reduction, Formula::Reduction),
        s if COMPARE.contains(&s) => (Family::Elementwise, Formula::Compare),
        s if ELEMENTWISE.contains(&s) => (Family::Elementwise, Formula::Elementwise),
        _ => return None,
    })
}

/// Whether operator `name` fills its tensor with random numbers in place (`aten::uniform_`,
/// `aten::bernoulli_`): its time beyond its traffic is the generator's arithmetic, which a
/// kernel drawing the same numbers does too.
pub(crate) fn random_fill(name: &str) -> bool {
    matches!(
        name,
        "aten::uniform_"
            | "aten::normal_"
            | "aten::bernoulli_"
            | "aten::random_"
            | "aten::exponential_"
            | "aten::log_normal_"
            | "aten::geometric_"
            | "aten::cauchy_"
    )
}

/// One recorded input.
enum Input {
    /// A tensor: its shape.
    Tensor(Shape),
    /// A scalar, `None`, or a type without a size.
    Other,
}

/// The input of a recorded list item of `ty`; tensor lists take `list_elem` (their element
/// type is not recorded), 4 bytes when the kernels' names do not say.
fn input(dims: &str, ty: &str, list_elem: Option<u8>, strides: Option<&[u64]>) -> Input {
    if ty == "TensorList" {
        let mut d = Vec::new();
        for t in items(dims) {
            d.extend(numbers(&t));
            d.push(u64::MAX);
        }
        return Input::Tensor(Shape {
            dims: d,
            list: true,
            elem: list_elem.unwrap_or(4),
            reps: 1,
        });
    }
    let dims = numbers(dims);
    // A Python number passed to an operator is recorded as a 0-dim `double` or `long int`
    // tensor (PyTorch's wrapped numbers): it reaches the kernel as an argument, not from
    // device memory.
    if dims.is_empty() && matches!(ty, "double" | "long int" | "long") {
        return Input::Other;
    }
    // A stride of 0 repeats the dim's elements; strides of another rank do not describe
    // these dims and are not read.
    let reps = strides.filter(|s| s.len() == dims.len()).map_or(1, |s| {
        s.iter()
            .zip(&dims)
            .filter(|&(&st, _)| st == 0)
            .fold(1u64, |a, (_, &d)| a.saturating_mul(d.max(1)))
    });
    match elem_size(ty) {
        Some(elem) => Input::Tensor(Shape {
            dims,
            list: false,
            elem,
            reps,
        }),
        None => Input::Other,
    }
}

/// The broadcast shape of tensors (not lists).
fn broadcast(shapes: &[&Shape]) -> Vec<u64> {
    let rank = shapes.iter().map(|s| s.dims.len()).max().unwrap_or(0);
    let mut out = vec![1u64; rank];
    for s in shapes {
        let off = rank - s.dims.len();
        for (k, &d) in s.dims.iter().enumerate() {
            let o = &mut out[off + k];
            if *o == 1 {
                *o = d;
            }
        }
    }
    out
}

/// Shape table of one device: each shape once.
#[derive(Default)]
struct Shapes {
    list: Vec<Shape>,
    ids: FxHashMap<Shape, u32>,
}

impl Shapes {
    fn id(&mut self, s: Shape) -> u32 {
        if let Some(&i) = self.ids.get(&s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(s.clone());
        self.ids.insert(s, i);
        i
    }
}

/// Row text for a shape.
fn shape_text(s: &Shape) -> String {
    if s.list {
        let n = s.dims.iter().filter(|&&d| d == u64::MAX).count();
        format!("{n} tensors, {:.1}M elements", s.numel() / 1e6)
    } else {
        format!("{:?}", s.dims)
    }
}

/// The bytes model of one operator call, from its name, recorded dims, types and (where
/// one is 0) strides; `None` for operators without a formula or without recorded tensors.
fn model_op(
    name: &str,
    dims: &str,
    types: &str,
    strides: Option<&str>,
    list_elem: Option<u8>,
    two_pass: bool,
    shapes: &mut Shapes,
) -> Option<OpModel> {
    let (family, f) = formula(name)?;
    let dims = items(dims);
    let types = items(types);
    let strides = strides.map(dims_of);
    let inputs: Vec<Input> = types
        .iter()
        .enumerate()
        .map(|(k, ty)| {
            let st = strides.as_ref().and_then(|s| s.get(k)).map(Vec::as_slice);
            input(dims.get(k).map_or("", String::as_str), ty, list_elem, st)
        })
        .collect();
    let tensors: Vec<&Shape> = inputs
        .iter()
        .filter_map(|i| match i {
            Input::Tensor(s) => Some(s),
            Input::Other => None,
        })
        .collect();
    let first = *tensors.first()?;
    let at = |k: usize| match inputs.get(k) {
        Some(Input::Tensor(s)) => Some(s),
        _ => None,
    };
    let inplace = name.ends_with('_');
    let sum = |v: &[&Shape]| v.iter().map(|s| s.read_bytes()).sum::<f64>();
    let all_read = sum(&tensors);
    // Type promotion: a 0-dim tensor (a Python number the profiler records as `double` or
    // `long int`) does not widen a dimensioned tensor's result.
    let float_elem = tensors
        .iter()
        .filter(|s| !s.list && !s.dims.is_empty())
        .map(|s| s.elem)
        .max()
        .unwrap_or(first.elem);
    let mut output: Option<Shape> = None;
    let (read, write) = match f {
        Formula::Elementwise | Formula::Compare => {
            // A binary operator's `.out` overload is recorded with its `out=` tensor after its
            // two operands and any scalar (`aten::mul` of a wrapped 1/n, a tensor and an out
            // tensor of its shape, inside `torch.fft.irfft`): written, not read.
            let operands: Vec<&Shape> = (0..2).filter_map(at).filter(|s| !s.list).collect();
            let out_arg = if !inplace
                && !operands.is_empty()
                && BINARY.contains(&name.strip_prefix("aten::").unwrap_or(name))
            {
                inputs.iter().skip(2).find_map(|i| match i {
                    Input::Tensor(s) if !s.list && s.dims == broadcast(&operands) => Some(s),
                    _ => None,
                })
            } else {
                None
            };
            let plain: Vec<&Shape> = match out_arg {
                Some(_) => operands,
                None => tensors.iter().copied().filter(|s| !s.list).collect(),
            };
            if inplace {
                output = Some(first.dense());
            } else {
                output = Some(Shape {
                    dims: broadcast(&plain),
                    list: false,
                    elem: out_arg.map_or(if f == Formula::Compare { 1 } else { float_elem }, |o| {
                        o.elem
                    }),
                    reps: 1,
                });
            }
            (
                all_read - out_arg.map_or(0.0, Shape::read_bytes),
                output.as_ref().map_or(0.0, Shape::bytes),
            )
        }
        Formula::Reduction | Formula::ForeachReduce | Formula::ReadOnly => (all_read, 0.0),
        Formula::LikeFirst => {
            output = Some(first.dense());
            // A norm over a whole tensor's batch (BatchNorm in training, GroupNorm) reduces
            // before it can normalise: its full-size inputs are read twice.
            let again: f64 = if two_pass {
                tensors
                    .iter()
                    .filter(|s| !s.list && s.numel() == first.numel())
                    .map(|s| s.read_bytes())
                    .sum()
            } else {
                0.0
            };
            (all_read + again, first.bytes())
        }
        Formula::Dropout => {
            output = Some(first.dense());
            (first.read_bytes(), first.bytes() + first.numel())
        }
        Formula::CopyInto => {
            let src = at(1)?;
            output = Some(first.dense());
            (src.read_bytes(), first.bytes())
        }
        Formula::Fill => {
            output = Some(first.dense());
            // `bernoulli_(p)` with a tensor of probabilities reads it.
            let probabilities = if random_fill(name) {
                all_read - first.read_bytes()
            } else {
                0.0
            };
            (probabilities, first.bytes())
        }
        Formula::Concat => {
            output = Some(first.dense());
            // Each input is written whole, an expanded one as many times as it repeats.
            (all_read, tensors.iter().map(|s| s.bytes()).sum())
        }
        Formula::Rows => {
            // (weight, indices) for embedding, (self, dim, index) for index_select.
            let index = if name.ends_with("embedding") {
                at(1)?
            } else {
                at(2)?
            };
            let row: f64 = first.dims.iter().skip(1).map(|&d| d as f64).product();
            let out = index.numel() * row * first.elem as f64;
            (index.read_bytes() + out.min(first.read_bytes()), out)
        }
        Formula::Gather => {
            let index = at(2)?;
            let out = index.numel() * first.elem as f64;
            (index.read_bytes() + out.min(first.read_bytes()), out)
        }
        Formula::Scatter => {
            let rest: Vec<&Shape> = tensors.iter().skip(1).copied().collect();
            let src = rest
                .iter()
                .filter(|s| s.elem == first.elem && !s.list)
                .map(|s| s.bytes())
                .fold(0.0, f64::max);
            (sum(&rest), src)
        }
        Formula::Foreach => {
            output = Some(first.dense());
            if name.starts_with("aten::_foreach_copy") {
                (all_read - first.bytes(), first.bytes())
            } else {
                (all_read, first.bytes())
            }
        }
        Formula::FusedOptimizer => {
            let grads = at(1).map_or(0.0, Shape::bytes);
            output = Some(first.dense());
            (all_read, all_read - grads)
        }
    };
    if read + write <= 0.0 {
        return None;
    }
    let in_place = match f {
        Formula::Elementwise | Formula::Compare if inplace => Some(true),
        Formula::Fill | Formula::CopyInto => Some(false),
        Formula::Foreach if inplace => Some(!name.starts_with("aten::_foreach_copy")),
        Formula::FusedOptimizer => Some(true),
        _ => None,
    };
    let full = tensors
        .iter()
        .copied()
        .chain(output.iter())
        .max_by(|a, b| a.numel().total_cmp(&b.numel()))
        .cloned()
        .unwrap_or_else(|| first.clone());
    let shape = tensors
        .iter()
        .map(|s| shape_text(s))
        .collect::<Vec<_>>()
        .join(", ");
    // The first tensor's type: a Python number recorded as a 0-dim double is not one.
    let dtype = types
        .iter()
        .zip(&inputs)
        .find(|(_, i)| matches!(i, Input::Tensor(_)))
        .map_or("other", |(t, _)| dtype_label(t));
    // The condition of `where` and the mask of `masked_fill` are bool by design: those kernels
    // take them without the casting path.
    let by_design = match name.trim_end_matches('_') {
        "aten::where" => Some(0),
        "aten::masked_fill" => Some(1),
        _ => None,
    };
    let mixed = matches!(f, Formula::Elementwise | Formula::Compare) && {
        let mut dimensioned = types
            .iter()
            .zip(&inputs)
            .enumerate()
            .filter_map(|(k, (ty, i))| match i {
                Input::Tensor(s) if !s.list && !s.dims.is_empty() && Some(k) != by_design => {
                    Some(ty.as_str())
                }
                _ => None,
            });
        let first = dimensioned.next();
        dimensioned.any(|ty| Some(ty) != first)
    };
    let input_ids = tensors.iter().map(|&s| shapes.id(s.clone())).collect();
    let output = output.map(|s| shapes.id(s));
    Some(OpModel {
        family,
        read,
        write,
        inputs: input_ids,
        output,
        in_place,
        full: shapes.id(full),
        shape,
        dtype,
        mixed,
    })
}

/// Names of the spans the walk from an operator to its origin needs to know, each read once
/// from the string table.
struct Marks {
    /// Autograd engine nodes (`autograd::engine::evaluate_function: MulBackward0`, and the
    /// node's own `MulBackward0` record).
    engine: Vec<bool>,
    /// Optimizer step ranges (`Optimizer.step#AdamW.step`).
    optimizer: Vec<bool>,
    /// Module frames (`nn.Module: LayerNormUnfused_0`).
    module: Vec<bool>,
}

impl Marks {
    fn new(t: &Trace) -> Self {
        Marks {
            engine: t.strings.matching(|n| {
                n.starts_with("autograd::engine::evaluate_function")
                    || (!n.contains("::") && (n.contains("Backward") || n == "AccumulateGrad"))
                    || n.starts_with("torch::autograd::")
            }),
            optimizer: t.strings.matching(|n| n.starts_with("Optimizer.step#")),
            module: t.strings.matching(|n| n.starts_with("nn.Module: ")),
        }
    }

    fn get(v: &[bool], id: StrId) -> bool {
        v.get(id as usize).copied().unwrap_or(false)
    }
}

/// Where a span's code sits, as seen from the span: its origin, the optimizer step range and
/// the innermost module at or above it (below the origin's frame), the autograd node.
#[derive(Debug, Clone, Copy)]
struct Seen {
    origin: Origin,
    optimizer: u32,
    node: u32,
    module: u32,
}

/// Slots of [`origin`]'s table of recent spans (a power of two): the ancestry of the last few
/// hundred operators. A span's [`Seen`] depends only on its ancestry, so a span forgotten is
/// only walked again: the answers do not depend on what the table kept. (A hash map of every
/// span seen, cleared when full, cost a probe, an insert and its growth's fresh pages a span.)
const SEEN_SLOTS: usize = 1 << 12;

/// Where the code of operator span `op` sits: under a user Python frame, under the autograd
/// engine, or just on its thread; the optimizer step range around it, the autograd node and
/// the innermost module above it ([`NONE`] when none). The walk up the span tree stops at
/// the first ancestor remembered (`memo`), so sibling operators share it.
fn origin(
    t: &Trace,
    marks: &Marks,
    op: u32,
    memo: &mut RecentSpans<Seen>,
    path: &mut Vec<(u32, u8)>,
) -> Seen {
    const ENGINE: u8 = 1;
    const FRAME: u8 = 2;
    const OPTIMIZER: u8 = 3;
    const MODULE: u8 = 4;
    let s = &t.host_spans[op as usize];
    let mut r = Seen {
        origin: Origin::Thread(s.pid, s.tid),
        optimizer: NONE,
        node: NONE,
        module: NONE,
    };
    // The optimizer's range lies between the user's `opt.step()` frame and the operators,
    // so the walk can stop at the first user frame or autograd node.
    path.clear();
    for a in t.ancestors(op) {
        if let Some(m) = memo.get(a) {
            r = m;
            break;
        }
        let sp = &t.host_spans[a as usize];
        let kind = match sp.kind {
            HostKind::CpuOp if Marks::get(&marks.engine, sp.name) => ENGINE,
            HostKind::Python if t.is_user_frame_name(sp.name) => FRAME,
            HostKind::Python if Marks::get(&marks.module, sp.name) => MODULE,
            HostKind::Annotation | HostKind::CpuOp if Marks::get(&marks.optimizer, sp.name) => {
                OPTIMIZER
            }
            _ => 0,
        };
        path.push((a, kind));
        if matches!(kind, ENGINE | FRAME) {
            break;
        }
    }
    for &(a, kind) in path.iter().rev() {
        r = match kind {
            ENGINE => Seen {
                origin: Origin::Backward(s.pid, s.tid),
                optimizer: NONE,
                node: a,
                module: NONE,
            },
            FRAME => Seen {
                origin: Origin::Frame(a),
                optimizer: NONE,
                node: NONE,
                module: NONE,
            },
            OPTIMIZER => Seen { optimizer: a, ..r },
            MODULE => Seen { module: a, ..r },
            _ => r,
        };
        memo.set(a, r);
    }
    r
}

/// Whether norm operator `name` (span `i`) reduces over the whole batch before it normalises,
/// reading its full-size inputs twice: GroupNorm always; BatchNorm in training (its recorded
/// `training` flag; cuDNN's and MIOpen's backward exist only for training). Without recorded
/// values, one pass: the least it can move.
fn two_pass(t: &Trace, i: u32, name: &str) -> bool {
    let flag = |k: usize| {
        t.concrete_inputs_of(i)
            .is_some_and(|c| c.get(k).is_some_and(|v| v == "True"))
    };
    match name {
        "aten::native_group_norm"
        | "aten::native_group_norm_backward"
        | "aten::cudnn_batch_norm_backward"
        | "aten::miopen_batch_norm_backward" => true,
        "aten::native_batch_norm"
        | "aten::_native_batch_norm_legit"
        | "aten::cudnn_batch_norm"
        | "aten::miopen_batch_norm" => flag(5),
        "aten::native_batch_norm_backward" => flag(7),
        _ => false,
    }
}

/// Each operator call's model by what decides it: name, dims, types, strides with a 0, the
/// element size of its tensor lists and whether it reads its input twice.
type ModelCache = FxHashMap<(StrId, StrId, StrId, StrId, u8, bool), Option<u32>>;

/// The modelled operator of a kernel: its innermost CPU operator or the nearest ancestor
/// (within three levels) with a formula, and its model.
fn modelled_op(
    t: &Trace,
    cache: &mut ModelCache,
    models: &mut Vec<OpModel>,
    shapes: &mut Shapes,
    inner: u32,
    list_elem: Option<u8>,
) -> Option<(u32, u32)> {
    let mut i = inner;
    for _ in 0..4 {
        if i == NONE {
            return None;
        }
        let s = &t.host_spans[i as usize];
        let args = t.op_args(s);
        if s.kind == HostKind::CpuOp && args.input_types != 0 {
            let name = t.str(s.name);
            let twice = name.contains("_norm") && two_pass(t, i, name);
            let strides = t.strides_id(i);
            let key = (
                s.name,
                args.input_dims,
                args.input_types,
                strides,
                list_elem.unwrap_or(0),
                twice,
            );
            let m = *cache.entry(key).or_insert_with(|| {
                model_op(
                    name,
                    t.str(args.input_dims),
                    t.str(args.input_types),
                    (strides != 0).then(|| t.str(strides)),
                    list_elem,
                    twice,
                    shapes,
                )
                .map(|m| {
                    models.push(m);
                    (models.len() - 1) as u32
                })
            });
            if let Some(m) = m {
                return Some((i, m));
            }
        }
        i = t.enclosing(i, HostKind::CpuOp);
    }
    None
}

/// The model and summary of every device that ran kernels in the window.
pub(crate) fn membound(cx: &Scope) -> Membound {
    let t = cx.trace;
    let marks = Marks::new(t);
    // Each distinct string's kernel class, dense by id: a trace has millions of kernels but
    // few names, and this loop reads one per kernel.
    let classes: Vec<KernelClass> = (0..t.strings.len() as StrId)
        .map(|id| cx.kernel_class(id))
        .collect();
    let devices: Vec<DeviceModel> = {
        use rayon::prelude::*;
        t.devices()
            .into_par_iter()
            .map(|d| device_model(cx, &marks, &classes, d))
            .collect()
    };
    let summary = devices.iter().map(|m| summarize(cx, m)).collect();
    Membound {
        devices,
        summary,
        fences: fences(t),
    }
}

/// Event records and stream waits per host thread.
fn fences(t: &Trace) -> FxHashMap<(i64, i64), Vec<i64>> {
    let names = t.strings.matching(|n| {
        (n.starts_with("cuda") || n.starts_with("hip"))
            && (n.contains("EventRecord") || n.contains("StreamWaitEvent"))
    });
    if !names.contains(&true) {
        return FxHashMap::default();
    }
    let mut out: FxHashMap<(i64, i64), Vec<i64>> = FxHashMap::default();
    for s in &t.host_spans {
        if matches!(s.kind, HostKind::Runtime | HostKind::Driver) && Marks::get(&names, s.name) {
            out.entry((s.pid, s.tid)).or_default().push(s.start);
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

/// Slots of [`device_model`]'s table of recent launching spans (a power of two).
const RECENT_INNER: usize = 1 << 10;

fn device_model(cx: &Scope, marks: &Marks, classes: &[KernelClass], device: i32) -> DeviceModel {
    let (t, w) = (cx.trace, &cx.window);
    let mut cache = ModelCache::default();
    let mut models = Vec::new();
    let mut shapes = Shapes::default();
    let mut calls: Vec<MemCall> = Vec::new();
    // The call of each launching operator span ([`NONE`]: no model), remembered for recent
    // spans (a direct-mapped table: an operator's kernels come together, and a span looked
    // up again after it left the table gets the same answer from the models' cache).
    let mut by_inner = RecentSpans::new(RECENT_INNER);
    let mut by_span: FxHashMap<u32, u32> = FxHashMap::default();
    let mut memo = RecentSpans::with_filler(
        SEEN_SLOTS,
        Seen {
            origin: Origin::Frame(NONE),
            optimizer: NONE,
            node: NONE,
            module: NONE,
        },
    );
    let mut path: Vec<(u32, u8)> = Vec::new();
    let mut items_out = Vec::with_capacity(t.device_ops(device).len());
    let mut split = Split::default();
    let sms = t.meta.gpu(device).and_then(|g| g.sm_count).unwrap_or(0);
    for &i in t.device_ops(device) {
        let op = &t.gpu_ops[i as usize];
        if op.start < w.start || op.start >= w.end {
            continue;
        }
        let mut call = NONE;
        if op.kind == GpuOpKind::Kernel {
            let class = classes.get(op.name as usize).copied().unwrap_or_default();
            let inner = t.index.op_cpu_op.get(i as usize).copied().unwrap_or(NONE);
            if inner != NONE && matches!(class.family, KernelFamily::Memory | KernelFamily::Other) {
                call = if let Some(c) = by_inner.get(inner) {
                    c
                } else {
                    let c = 'call: {
                        let found = modelled_op(
                            t,
                            &mut cache,
                            &mut models,
                            &mut shapes,
                            inner,
                            class.elem_bytes,
                        );
                        let Some((span, m)) = found else {
                            break 'call NONE;
                        };
                        *by_span.entry(span).or_insert_with(|| {
                            let seen = origin(t, marks, span, &mut memo, &mut path);
                            calls.push(MemCall {
                                span,
                                model: m,
                                ns: 0,
                                kernels: 0,
                                class: MemClass::Memory,
                                origin: seen.origin,
                                optimizer: seen.optimizer,
                                node: seen.node,
                                module: seen.module,
                            });
                            (calls.len() - 1) as u32
                        })
                    };
                    by_inner.set(inner, c);
                    c
                };
            }
            let d = op.dur();
            split.kernel_ns += d;
            if call != NONE {
                let e = &mut calls[call as usize];
                e.ns += d;
                e.kernels += 1;
            } else {
                // A long kernel launched with a few SMs' worth of blocks (a one-block
                // selection, a serial scan) can neither stream from HBM nor fill the
                // compute units: its parallelism bounds it, whatever its name's family.
                let few_blocks = op
                    .kernel
                    .and_then(|k| k.blocks())
                    .is_some_and(|b| (b as f64) <= FEW_BLOCKS_SHARE * f64::from(sms));
                match (class.family, d < LATENCY_KERNEL_NS) {
                    (_, true) => split.latency_ns += d,
                    (KernelFamily::Memory | KernelFamily::Generated, false) if few_blocks => {
                        split.parallelism_ns += d
                    }
                    (KernelFamily::Matrix, false) => split.matrix_ns += d,
                    (KernelFamily::Memory | KernelFamily::Generated, false) => split.memory_ns += d,
                    (KernelFamily::Other, false) => split.other_ns += d,
                }
            }
        }
        items_out.push(Item { op: i, call });
    }
    let peaks = peaks_of(t, device);
    for c in &mut calls {
        let bytes = models[c.model as usize].bytes();
        c.class = match peaks {
            Some(p) if bytes / (p.mem_tbps * 1e3) < LATENCY_ROOF_NS => MemClass::Latency,
            Some(_) => MemClass::Memory,
            None if c.ns / i64::from(c.kernels.max(1)) < LATENCY_KERNEL_NS => MemClass::Latency,
            None => MemClass::Memory,
        };
        match c.class {
            MemClass::Memory => split.memory_ns += c.ns,
            MemClass::Latency => split.latency_ns += c.ns,
        }
    }
    // Kept for every rule that reads the model: without the spare capacity of growing.
    calls.shrink_to_fit();
    items_out.shrink_to_fit();
    DeviceModel {
        device,
        models,
        shapes: shapes.list,
        calls,
        items: items_out,
        split,
    }
}

/// The peaks of `device`'s GPU, when its model is in the table.
pub(crate) fn peaks_of(t: &Trace, device: i32) -> Option<Peaks> {
    let gpu = t.meta.gpu(device)?;
    peaks_for(&gpu.name, gpu.memory_bytes)
}

fn summarize(cx: &Scope, m: &DeviceModel) -> DeviceMembound {
    let t = cx.trace;
    let peaks = peaks_of(t, m.device);
    let Split {
        kernel_ns,
        matrix_ns,
        memory_ns,
        latency_ns,
        parallelism_ns,
        other_ns,
    } = m.split;
    let (mut modelled_ns, mut modelled_bytes) = (0i64, 0.0f64);
    // Calls summed by operator name and model first (no text per call), then by the row's
    // text: models that differ only in scalars' types share a row.
    // family, calls, kernels, time, bytes
    type Sums = (Family, u64, u64, i64, f64);
    let mut by_model: FxHashMap<(StrId, u32), Sums> = FxHashMap::default();
    for c in &m.calls {
        let model = &m.models[c.model as usize];
        if c.class == MemClass::Memory {
            modelled_ns += c.ns;
            modelled_bytes += model.bytes();
        }
        let g = by_model
            .entry((t.host_spans[c.span as usize].name, c.model))
            .or_insert((model.family, 0, 0, 0, 0.0));
        g.1 += 1;
        g.2 += u64::from(c.kernels);
        g.3 += c.ns;
        g.4 += model.bytes();
    }
    type Key = (String, String, &'static str);
    let mut groups: BTreeMap<Key, Sums> = BTreeMap::new();
    for ((name, model), (family, count, kernels, ns, bytes)) in by_model {
        let model = &m.models[model as usize];
        let g = groups
            .entry((t.str(name).to_string(), model.shape.clone(), model.dtype))
            .or_insert((family, 0, 0, 0, 0.0));
        g.1 += count;
        g.2 += kernels;
        g.3 += ns;
        g.4 += bytes;
    }
    let mut rows: Vec<MemRow> = groups
        .into_iter()
        .filter(|(_, g)| g.3 > 0)
        .map(
            |((op, shape, dtype), (family, count, kernels, ns, bytes))| {
                let tbps = bytes / ns as f64 / 1e3;
                let per_call = bytes / count.max(1) as f64;
                let class = match peaks {
                    Some(p) if per_call / (p.mem_tbps * 1e3) < LATENCY_ROOF_NS => MemClass::Latency,
                    Some(_) => MemClass::Memory,
                    None if ns / kernels.max(1) as i64 >= LATENCY_KERNEL_NS => MemClass::Memory,
                    None => MemClass::Latency,
                };
                MemRow {
                    op,
                    shape,
                    dtype: dtype.to_string(),
                    family,
                    count,
                    kernels,
                    time_ns: ns,
                    bytes,
                    tbps,
                    hbm_share: peaks.map(|p| tbps / p.mem_tbps),
                    class,
                }
            },
        )
        .collect();
    rows.sort_by(|a, b| {
        b.time_ns
            .cmp(&a.time_ns)
            .then(a.op.cmp(&b.op))
            .then(a.shape.cmp(&b.shape))
    });
    let tbps = (modelled_ns > 0).then(|| modelled_bytes / modelled_ns as f64 / 1e3);
    let shares = [
        (KernelBound::Memory, memory_ns),
        (KernelBound::Compute, matrix_ns),
        (KernelBound::Latency, latency_ns),
        (KernelBound::Parallelism, parallelism_ns),
    ];
    let bound = shares
        .iter()
        .max_by_key(|s| s.1)
        .filter(|s| s.1 > 0 && s.1 as f64 >= BOUND_SHARE * kernel_ns as f64)
        .map(|s| s.0);
    DeviceMembound {
        device: m.device,
        model: peaks.map(|p| p.model),
        hbm_tbps: peaks.map(|p| p.mem_tbps),
        shapes: !m.calls.is_empty(),
        rows,
        kernel_ns,
        matrix_ns,
        memory_ns,
        latency_ns,
        parallelism_ns,
        other_ns,
        modelled_ns,
        modelled_bytes,
        tbps,
        hbm_share: tbps.zip(peaks).map(|(b, p)| b / p.mem_tbps),
        bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str, dims: &str, types: &str) -> OpModel {
        model_op(name, dims, types, None, None, false, &mut Shapes::default())
            .unwrap_or_else(|| panic!("{name} {dims} {types}: no model"))
    }

    #[test]
    fn elementwise_bytes_broadcast_and_in_place() {
        // The GELU chain of the unfused capture: 32M floats read and written.
        let m = model("aten::tanh", "[[8192, 4096]]", r#"["float"]"#);
        assert_eq!((m.read, m.write), (134_217_728.0, 134_217_728.0));
        assert_eq!(m.family, Family::Elementwise);
        // Broadcasting a row statistic: reads both, writes the full shape.
        let m = model(
            "aten::sub",
            "[[8192, 1024], [8192, 1], []]",
            r#"["float", "float", "Scalar"]"#,
        );
        assert_eq!(m.read, 4.0 * (8192.0 * 1024.0 + 8192.0));
        assert_eq!(m.write, 4.0 * 8192.0 * 1024.0);
        // The streaming capture's in-place add: 2^30 floats read twice, written once.
        let m = model(
            "aten::add_",
            "[[1073741824], [1073741824], []]",
            r#"["float", "float", "Scalar"]"#,
        );
        assert_eq!(m.bytes(), 12_884_901_888.0);
        let m = model("aten::mul_", "[[1073741824], []]", r#"["float", "Scalar"]"#);
        assert_eq!(m.bytes(), 8_589_934_592.0);
        // A Python number recorded as a 0-dim double is no memory traffic, and does not
        // widen the result.
        let m = model("aten::mul", "[[8192, 4096], []]", r#"["float", "double"]"#);
        assert_eq!((m.read, m.write), (134_217_728.0, 134_217_728.0));
        // Comparisons write booleans.
        let m = model("aten::gt", "[[1024], []]", r#"["c10::BFloat16", "Scalar"]"#);
        assert_eq!((m.read, m.write), (2048.0, 1024.0));
        // `torch.fft.irfft`'s normalisation, `mul.out(1/n, y, out=y)`, recorded in the
        // seventeenth blind set's fft_prime_length capture: one [8192, 16096] float read, the
        // out tensor written (not read as a third operand).
        let m = model(
            "aten::mul",
            "[[], [8192, 16096], [8192, 16096]]",
            r#"["double", "float", "float"]"#,
        );
        let full = 4.0 * 8192.0 * 16096.0;
        assert_eq!((m.read, m.write), (full, full));
        // Three operands of a ternary operator are all read.
        let m = model(
            "aten::where",
            "[[1024], [1024], [1024]]",
            r#"["bool", "float", "float"]"#,
        );
        assert_eq!(m.read, 1024.0 * 9.0);
    }

    #[test]
    fn a_batchnorm_in_training_reads_its_input_twice() {
        // The NCHW capture's first BatchNorm backward: dy and x, [128, 512, 14, 14] bf16,
        // read for the reductions and again for dx; five parameter-sized vectors once.
        let dims = "[[128, 512, 14, 14], [128, 512, 14, 14], [512], [512], [512], [512], [512], [], [], []]";
        let types = r#"["c10::BFloat16", "c10::BFloat16", "float", "float", "float", "float", "float", "Scalar", "Scalar", "ScalarList"]"#;
        let full = 128.0 * 512.0 * 14.0 * 14.0 * 2.0;
        let once = model_op(
            "aten::native_batch_norm_backward",
            dims,
            types,
            None,
            None,
            false,
            &mut Shapes::default(),
        )
        .map(|m| (m.read, m.write));
        let twice = model_op(
            "aten::native_batch_norm_backward",
            dims,
            types,
            None,
            None,
            true,
            &mut Shapes::default(),
        )
        .map(|m| (m.read, m.write));
        assert_eq!(once, Some((2.0 * full + 5.0 * 2048.0, full)));
        assert_eq!(twice, Some((4.0 * full + 5.0 * 2048.0, full)));
    }

    #[test]
    fn random_fills_write_and_mixed_types_are_marked() {
        // rand_like's fill of the dropout capture: 32M bf16 written, nothing read.
        let m = model(
            "aten::uniform_",
            "[[8192, 4096], [], [], []]",
            r#"["c10::BFloat16", "Scalar", "Scalar", ""]"#,
        );
        assert_eq!((m.read, m.write), (0.0, 67_108_864.0));
        assert_eq!((m.family, m.in_place), (Family::Elementwise, Some(false)));
        // The out-of-place draw reads its probabilities: no fill formula for it.
        assert!(
            model_op(
                "aten::bernoulli",
                "[[8192, 4096], []]",
                r#"["float", ""]"#,
                None,
                None,
                false,
                &mut Shapes::default()
            )
            .is_none()
        );
        // bf16 times a bool mask runs on the casting path; bf16 times a Python number does not.
        let mixed = |types: &str, dims: &str| model("aten::mul", dims, types).mixed;
        assert!(mixed(
            r#"["c10::BFloat16", "bool"]"#,
            "[[8192, 4096], [8192, 4096]]"
        ));
        assert!(!mixed(
            r#"["c10::BFloat16", "double"]"#,
            "[[8192, 4096], []]"
        ));
        // A where's bool condition and a masked_fill's mask are bool by design.
        let m = model(
            "aten::where",
            "[[8192, 4096], [8192, 4096], [8192, 4096]]",
            r#"["bool", "c10::BFloat16", "c10::BFloat16"]"#,
        );
        assert!(!m.mixed);
        let m = model(
            "aten::masked_fill",
            "[[8192, 4096], [8192, 4096], []]",
            r#"["c10::BFloat16", "bool", "Scalar"]"#,
        );
        assert!(!m.mixed);
        assert!(!mixed(
            r#"["c10::BFloat16", "c10::BFloat16"]"#,
            "[[8192, 4096], [8192, 4096]]"
        ));
    }

    #[test]
    fn norms_copies_gathers_and_optimizers() {
        let m = model(
            "aten::native_layer_norm",
            "[[8192, 1024], [], [1024], [1024], []]",
            r#"["float", "ScalarList", "float", "float", "Scalar"]"#,
        );
        assert_eq!(m.read, 4.0 * (8192.0 * 1024.0 + 2048.0));
        assert_eq!(m.write, 4.0 * 8192.0 * 1024.0);
        assert_eq!(m.family, Family::Norm);
        // A cast: fp32 read, bf16 written.
        let m = model(
            "aten::copy_",
            "[[4096, 4096], [4096, 4096], []]",
            r#"["c10::BFloat16", "float", "Scalar"]"#,
        );
        assert_eq!((m.read, m.write), (4.0 * 16_777_216.0, 2.0 * 16_777_216.0));
        // An embedding lookup: 2048 rows of 768 bf16 values and their int64 indices.
        let m = model(
            "aten::embedding",
            "[[50257, 768], [4, 512], [], [], []]",
            r#"["c10::BFloat16", "long int", "Scalar", "Scalar", "Scalar"]"#,
        );
        assert_eq!(m.write, 2048.0 * 768.0 * 2.0);
        assert_eq!(m.read, 2048.0 * 8.0 + m.write);
        // repeat_interleave's gather as the H100 capture recorded it: a [512, 1024] bf16
        // source, its index [16116, 1] expanded to [16116, 1024] (strides [1, 0]): the index
        // is 16116 int64 values, the source 1 MB read once, 33 MB written.
        let m = model_op(
            "aten::gather",
            "[[512, 1024], [], [16116, 1024], [], [16116, 1024]]",
            r#"["c10::BFloat16", "Scalar", "long int", "Scalar", "c10::BFloat16"]"#,
            Some("[[1024, 1], [], [1, 0], [], [1024, 1]]"),
            None,
            false,
            &mut Shapes::default(),
        )
        .map(|m| (m.read, m.write));
        let out = 16116.0 * 1024.0 * 2.0;
        assert_eq!(m, Some((16116.0 * 8.0 + 512.0 * 1024.0 * 2.0, out)));
        // Without strides the index counts whole, and an add of an expanded bias reads it once.
        let m = model(
            "aten::gather",
            "[[512, 1024], [], [16116, 1024]]",
            r#"["c10::BFloat16", "Scalar", "long int"]"#,
        );
        assert_eq!(m.read, 16116.0 * 1024.0 * 8.0 + 512.0 * 1024.0 * 2.0);
        let add = |strides| {
            model_op(
                "aten::add",
                "[[4096, 1024], [4096, 1024], []]",
                r#"["float", "float", "Scalar"]"#,
                strides,
                None,
                false,
                &mut Shapes::default(),
            )
            .map(|m| (m.read, m.write))
        };
        let full = 4096.0 * 1024.0 * 4.0;
        assert_eq!(add(None), Some((2.0 * full, full)));
        assert_eq!(
            add(Some("[[1024, 1], [0, 1], []]")),
            Some((full + 4096.0, full))
        );
        let m = model(
            "aten::native_dropout",
            "[[64, 1024], [], []]",
            r#"["c10::BFloat16", "Scalar", "Scalar"]"#,
        );
        assert_eq!(m.write, 65536.0 * 3.0);
        // foreach SGD: reads params and grads, writes params; elements 2 × 1024 + 4096×1024.
        let m = model(
            "aten::_foreach_add_",
            "[[[1024], [4096, 1024], [1024]], [[1024], [4096, 1024], [1024]], []]",
            r#"["TensorList", "TensorList", "Scalar"]"#,
        );
        let n = 2048.0 + 4096.0 * 1024.0;
        assert_eq!((m.read, m.write), (8.0 * n, 4.0 * n));
        assert_eq!(m.family, Family::Optimizer);
        // Fused AdamW: reads params, grads, m, v (and the steps), writes all but the grads.
        let m = model(
            "aten::_fused_adamw_",
            "[[[1024]], [[1024]], [[1024]], [[1024]], [], [[]], [], [], [], [], [], [], [], [], []]",
            r#"["TensorList", "TensorList", "TensorList", "TensorList", "TensorList", "TensorList", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "", ""]"#,
        );
        assert_eq!(m.read, 4.0 * (4.0 * 1024.0 + 1.0));
        assert_eq!(m.write, 4.0 * (3.0 * 1024.0 + 1.0));
        // A reduction reads its input; the output's dims are not recorded.
        let m = model(
            "aten::mean",
            "[[8192, 1024], [], [], []]",
            r#"["float", "ScalarList", "Scalar", ""]"#,
        );
        assert_eq!((m.read, m.write, m.output), (33_554_432.0, 0.0, None));
        assert!(formula("aten::mm").is_none());
        assert!(formula("aten::sort").is_none());
    }

    #[test]
    fn shapes_broadcast_from_the_right() {
        let s = |d: &[u64]| Shape {
            dims: d.to_vec(),
            list: false,
            elem: 4,
            reps: 1,
        };
        assert!(broadcastable(&s(&[8192, 1024]), &s(&[8192, 1])));
        assert!(broadcastable(&s(&[8192, 1024]), &s(&[1024])));
        assert!(!broadcastable(&s(&[8192, 1024]), &s(&[8192, 4096])));
        assert!(!broadcastable(&s(&[4096]), &s(&[1024])));
    }
}
