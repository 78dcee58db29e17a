//! What the hardware can do, and what a kernel's name says about how it uses it.
//!
//! Peak rates are NVIDIA's and AMD's datasheet figures for dense math (no 2:4 sparsity) at
//! boost clocks; `docs/rules.md` lists them with their sources. Real kernels reach 60-80% of
//! them at best, which is why the roofline rule compares against a share of the roof.

use serde::Serialize;

/// Dense peak rates of one GPU model: TFLOP/s per math type, TB/s of device memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Peaks {
    /// The model the figures are for (`H200 SXM`).
    pub model: &'static str,
    /// FP64 (tensor cores where the GPU has them for FP64).
    pub fp64: f64,
    /// FP32 on CUDA cores (no tensor cores).
    pub fp32: f64,
    /// TF32 on tensor cores; `None` before compute capability 8.0.
    pub tf32: Option<f64>,
    /// BF16 on tensor cores; `None` where the GPU has no BF16 tensor cores.
    pub bf16: Option<f64>,
    /// FP16 on tensor cores.
    pub fp16: f64,
    /// FP8 on tensor cores; `None` where the GPU has none.
    pub fp8: Option<f64>,
    /// Device memory bandwidth, TB/s.
    pub mem_tbps: f64,
}

/// The numeric format a GEMM runs in, for choosing its roof.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Math {
    /// FP64.
    Fp64,
    /// FP32 on CUDA cores.
    Fp32,
    /// FP32 inputs on TF32 tensor cores.
    Tf32,
    /// BF16 tensor cores.
    Bf16,
    /// FP16 tensor cores.
    Fp16,
    /// FP8 tensor cores.
    Fp8,
}

impl Math {
    /// The lowercase name (`tf32`).
    pub fn label(self) -> &'static str {
        match self {
            Math::Fp64 => "fp64",
            Math::Fp32 => "fp32",
            Math::Tf32 => "tf32",
            Math::Bf16 => "bf16",
            Math::Fp16 => "fp16",
            Math::Fp8 => "fp8",
        }
    }

    /// Bytes per element of the inputs.
    pub fn elem_bytes(self) -> f64 {
        match self {
            Math::Fp64 => 8.0,
            Math::Fp32 | Math::Tf32 => 4.0,
            Math::Bf16 | Math::Fp16 => 2.0,
            Math::Fp8 => 1.0,
        }
    }
}

impl Peaks {
    /// The peak TFLOP/s for `math`; a format the GPU has no tensor cores for runs at the
    /// rate it falls back to (BF16 on V100 runs at the FP32 rate).
    pub fn tflops(&self, math: Math) -> f64 {
        match math {
            Math::Fp64 => self.fp64,
            Math::Fp32 => self.fp32,
            Math::Tf32 => self.tf32.unwrap_or(self.fp32),
            Math::Bf16 => self.bf16.unwrap_or(self.fp32),
            Math::Fp16 => self.fp16,
            Math::Fp8 => self.fp8.or(self.bf16).unwrap_or(self.fp16),
        }
    }
}

/// Peaks from `[fp64, fp32, tf32, bf16, fp16, fp8, TB/s]`; 0 marks math the GPU has no
/// tensor cores for.
const fn p(model: &'static str, r: [f64; 7]) -> Peaks {
    const fn some(x: f64) -> Option<f64> {
        if x > 0.0 { Some(x) } else { None }
    }
    Peaks {
        model,
        fp64: r[0],
        fp32: r[1],
        tf32: some(r[2]),
        bf16: some(r[3]),
        fp16: r[4],
        fp8: some(r[5]),
        mem_tbps: r[6],
    }
}

/// Every GPU model with known peaks, in the order names are matched (specific first).
pub const TABLE: &[(&str, Peaks)] = &[
    (
        "B200",
        p("B200", [40.0, 80.0, 1100.0, 2250.0, 2250.0, 4500.0, 8.0]),
    ),
    // A Grace Hopper superchip's GPU is an H100 die (its name contains "H200"): HBM3 96 GB at
    // 4.0 TB/s, or HBM3e 144 GB at 4.9 TB/s (see `peaks_for`).
    (
        "GH200",
        p("GH200 96GB", [67.0, 67.0, 494.7, 989.4, 989.4, 1978.9, 4.0]),
    ),
    (
        "H200",
        p("H200 SXM", [67.0, 67.0, 494.7, 989.4, 989.4, 1978.9, 4.8]),
    ),
    (
        "H100 NVL",
        p("H100 NVL", [60.0, 60.0, 417.5, 835.0, 835.0, 1670.5, 3.9]),
    ),
    (
        "H100 PCIE",
        p("H100 PCIe", [51.0, 51.0, 378.0, 756.0, 756.0, 1513.0, 2.0]),
    ),
    (
        "H100",
        p("H100 SXM", [67.0, 67.0, 494.7, 989.4, 989.4, 1978.9, 3.35]),
    ),
    (
        "A100 80GB PCIE",
        p(
            "A100 80GB PCIe",
            [19.5, 19.5, 156.0, 312.0, 312.0, 0.0, 1.935],
        ),
    ),
    (
        "A100",
        p("A100 SXM", [19.5, 19.5, 156.0, 312.0, 312.0, 0.0, 2.039]),
    ),
    (
        "L40S",
        p("L40S", [1.4, 91.6, 183.0, 362.0, 362.0, 733.0, 0.864]),
    ),
    ("L4", p("L4", [0.5, 30.3, 60.0, 121.0, 121.0, 242.5, 0.3])),
    ("A10", p("A10", [0.98, 31.2, 62.5, 125.0, 125.0, 0.0, 0.6])),
    (
        "MI300X",
        p("MI300X", [163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 5.3]),
    ),
    (
        "MI250",
        p("MI250X", [95.7, 95.7, 0.0, 383.0, 383.0, 0.0, 3.2]),
    ),
    (
        "V100",
        p("V100 SXM2", [7.8, 15.7, 0.0, 0.0, 125.0, 0.0, 0.9]),
    ),
    ("T4", p("T4", [0.25, 8.1, 0.0, 0.0, 65.0, 0.0, 0.32])),
    // GeForce Ampere (GA102 whitepaper, dense): TF32 on tensor cores runs at the FP32 rate,
    // and FP16/bf16 with FP32 accumulation at twice it.
    (
        "RTX 3090",
        p("RTX 3090", [0.56, 35.6, 35.6, 71.0, 71.0, 0.0, 0.936]),
    ),
];

/// Peaks for a GPU product name (`NVIDIA H200`, `NVIDIA A100-SXM4-80GB`), when known. A
/// 40 GB A100 has 1.555 TB/s instead of the 80 GB part's 2.039.
pub fn peaks_for(name: &str, memory_bytes: Option<u64>) -> Option<Peaks> {
    let n = name.to_ascii_uppercase().replace('-', " ");
    let (_, peaks) = TABLE.iter().find(|(key, _)| n.contains(key))?;
    let mut peaks = *peaks;
    if peaks.model == "A100 SXM" && memory_bytes.is_some_and(|b| b < 60 << 30) {
        peaks.model = "A100 40GB";
        peaks.mem_tbps = 1.555;
    }
    if peaks.model == "GH200 96GB" && memory_bytes.is_some_and(|b| b > 120 << 30) {
        peaks.model = "GH200 144GB";
        peaks.mem_tbps = 4.9;
    }
    Some(peaks)
}

/// Which units a matrix kernel (GEMM, convolution, attention) runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MathUnit {
    /// Tensor cores (HMMA/WGMMA: tf32, bf16, fp16, fp8, int8).
    TensorCore,
    /// FP32 on CUDA cores (SIMT `sgemm`, `ffma` paths).
    CudaCoreFp32,
}

/// Whether kernel `name` is a matrix kernel and on which units, from the names cuBLAS,
/// cuBLASLt, CUTLASS and cuDNN give their kernels; `None` for every other kernel and for GEMV
/// kernels (memory-bound whatever the units).
pub fn matmul_unit(name: &str) -> Option<MathUnit> {
    let l = name.to_ascii_lowercase();
    if ["gemv", "gemmk1_kernel", "gemmsn_", "nccl"]
        .iter()
        .any(|k| l.contains(k))
    {
        return None;
    }
    let matrix = [
        "gemm",
        "nvjet",
        "xmma",
        "cutlass",
        "cudnn",
        "conv",
        "wgrad",
        "dgrad",
        "fprop",
        "sdpa",
        "flash",
        "fmha",
        "attention",
        "hmma",
        "mma",
    ]
    .iter()
    .any(|k| l.contains(k));
    if !matrix {
        return None;
    }
    const TENSOR: [&str; 21] = [
        "tensorop", "hmma", "imma", "wmma", "gmma", "s1688", "s16816", "s884", "h1688", "h16816",
        "h884", "i8816", "tf32", "bf16", "f16", "e4m3", "e5m2", "fp8", "nvjet", "_h_", "flash",
    ];
    if TENSOR.iter().any(|k| l.contains(k)) {
        return Some(MathUnit::TensorCore);
    }
    const SIMT: [&str; 5] = ["sgemm", "ffma", "scudnn", "simt", "engine<float"];
    if SIMT.iter().any(|k| l.contains(k)) || l.contains("f32f32_f32f32_f32") {
        return Some(MathUnit::CudaCoreFp32);
    }
    None
}

/// What a kernel's name says about its math: the units, and the architecture it was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelClass {
    /// The units of a matrix kernel; `None` for other kernels.
    pub unit: Option<MathUnit>,
    /// The architecture it was built for (`80`), when the name says.
    pub built_for: Option<u32>,
    /// The kind of work its name says it does.
    pub family: KernelFamily,
    /// The element size its template arguments name (`c10::BFloat16`: 2, `OpaqueType<4u>`: 4),
    /// when they do: the element type of tensor lists, which the profiler does not record.
    pub elem_bytes: Option<u8>,
}

/// The kind of work a kernel's name says it does, for telling memory-bound kernels from
/// matrix ones without shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelFamily {
    /// GEMM, convolution, attention (library matrix kernels, Triton GEMM templates).
    Matrix,
    /// Kernels a compiler generated by fusing operators (`triton_poi_fused_*`, nvFuser):
    /// already fused, never a fusion opportunity.
    Generated,
    /// PyTorch's and other libraries' memory-bound kernels: elementwise, reductions, norms,
    /// softmax, copies, gathers and scatters, multi-tensor optimizer kernels, GEMV.
    Memory,
    /// Communication (NCCL, RCCL) and everything else.
    #[default]
    Other,
}

/// What kind of work kernel `name` does, from the names PyTorch (ATen, on CUDA and ROCm),
/// Triton, nvFuser and the communication libraries give their kernels.
pub fn kernel_family(name: &str) -> KernelFamily {
    let l = name.to_ascii_lowercase();
    if [
        "nccl",
        "rccl",
        "all_reduce",
        "allreduce",
        "all_gather",
        "reduce_scatter",
    ]
    .iter()
    .any(|k| l.contains(k))
    {
        return KernelFamily::Other;
    }
    if l.contains("triton_") {
        // Inductor's GEMM templates are matrix work; its pointwise, reduction and
        // persistent-reduction kernels are fused memory-bound work.
        return if l.contains("triton_tem") {
            KernelFamily::Matrix
        } else {
            KernelFamily::Generated
        };
    }
    if l.contains("cudacodegen") || l.contains("nvfuser") {
        return KernelFamily::Generated;
    }
    if l.contains("gemv") || l.contains("gemmk1_kernel") {
        // Matrix-vector products read the matrix once: memory-bound whatever the units.
        return KernelFamily::Memory;
    }
    if matmul_unit(name).is_some() {
        return KernelFamily::Matrix;
    }
    const MEMORY: [&str; 24] = [
        "elementwise",
        "reduce_kernel",
        "reduce_",
        "layer_norm",
        "layernorm",
        "rms_norm",
        "rmsnorm",
        "batch_norm",
        "batchnorm",
        "group_norm",
        "groupnorm",
        "gammabeta",
        "softmax",
        "dropout",
        "index",
        "gather",
        "scatter",
        "embedding",
        "catarraybatchedcopy",
        "copy_kernel",
        "multi_tensor_apply",
        "fill_kernel",
        "distribution_",
        "cunn_",
    ];
    if MEMORY.iter().any(|k| l.contains(k)) {
        return KernelFamily::Memory;
    }
    KernelFamily::Other
}

/// The element size a kernel's template arguments name, when they do: `OpaqueType<4u>` (the
/// concatenation kernels), or the first of `c10::BFloat16`, `c10::Half`, `double`, `float`.
pub fn template_elem_bytes(name: &str) -> Option<u8> {
    if let Some(k) = name.find("OpaqueType<") {
        let digits: String = name[k + "OpaqueType<".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(n) = digits.parse::<u8>() {
            return Some(n);
        }
    }
    [
        ("c10::BFloat16", 2),
        ("c10::Half", 2),
        ("c10::Float8", 1),
        ("double", 8),
        ("float", 4),
    ]
    .iter()
    .filter_map(|&(k, n)| name.find(k).map(|at| (at, n)))
    .min()
    .map(|(_, n)| n)
}

/// Classifies a kernel by its name.
pub fn classify(name: &str) -> KernelClass {
    KernelClass {
        unit: matmul_unit(name),
        built_for: built_for_sm(name),
        family: kernel_family(name),
        elem_bytes: template_elem_bytes(name),
    }
}

/// The architecture (as `major*10+minor`) a library kernel was built for, when its name
/// says: `sm80_xmma_*`, `cutlass_75_*`, `ampere_sgemm_*`, `nvjet_sm90_*`.
pub fn built_for_sm(name: &str) -> Option<u32> {
    let l = name.to_ascii_lowercase();
    for (prefix, sm) in [
        ("volta_", 70),
        ("turing_", 75),
        ("ampere_", 80),
        ("hopper_", 90),
    ] {
        if l.starts_with(prefix) || l.contains(&format!("_{prefix}")) {
            return Some(sm);
        }
    }
    for marker in ["sm", "cutlass_"] {
        let mut rest = l.as_str();
        while let Some(k) = rest.find(marker) {
            let after = &rest[k + marker.len()..];
            let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
            let boundary = k == 0 || !rest.as_bytes()[k - 1].is_ascii_alphabetic();
            if boundary && (2..=3).contains(&digits.len()) && after[digits.len()..].starts_with('_')
            {
                return digits.parse().ok();
            }
            rest = &rest[k + marker.len()..];
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_links_carry_their_generation_s_rate() {
        // PCIe: 8, 16, 32 GT/s per lane for Gen3-5 with 128b/130b coding.
        let raw = |generation| {
            HostLink {
                generation,
                width: 16,
            }
            .raw_gbps()
        };
        assert!((raw(3) - 15.754).abs() < 0.01);
        assert!((raw(4) - 31.508).abs() < 0.01);
        assert!((raw(5) - 63.015).abs() < 0.01);
        assert_eq!(
            model_link("NVIDIA H100 80GB HBM3").map(|l| l.generation),
            Some(5)
        );
        assert_eq!(
            model_link("NVIDIA A100-SXM4-80GB").map(|l| l.generation),
            Some(4)
        );
        assert_eq!(model_link("NVIDIA GeForce RTX 3090"), None);
        // Names as the field corpus's captures record them.
        assert_eq!(
            model_link("Quadro RTX 6000").map(|l| (l.generation, l.width)),
            Some((3, 16))
        );
        assert_eq!(
            model_link("NVIDIA RTX 6000 Ada Generation").map(|l| l.generation),
            Some(4)
        );
        // The superchip's GPU is not an H200: HBM3 at 4.0 TB/s (the field GH200's 94.5 GiB).
        assert_eq!(
            peaks_for("NVIDIA GH200 480GB", Some(101_468_602_368)).map(|p| p.mem_tbps),
            Some(4.0)
        );
        assert_eq!(
            peaks_for("NVIDIA GH200 144G HBM3e", Some(150 << 30)).map(|p| p.mem_tbps),
            Some(4.9)
        );
        // A superchip's GPU reaches the host over NVLink-C2C, and GH200 contains "H200".
        assert_eq!(model_link("NVIDIA GH200 480GB"), None);
        assert_eq!(model_link("NVIDIA GB200"), None);
        // Whole tokens only: these x8 workstation cards are not an A100 or an A40.
        assert_eq!(model_link("NVIDIA RTX A1000"), None);
        assert_eq!(model_link("NVIDIA RTX A400"), None);
        assert_eq!(model_link("NVIDIA A10G").map(|l| l.width), Some(16));
        assert_eq!(
            model_link("AMD Instinct MI250X").map(|l| l.generation),
            Some(4)
        );
    }

    #[test]
    fn units_from_names_seen_in_real_traces() {
        use MathUnit::*;
        for (name, unit) in [
            (
                "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
                Some(CudaCoreFp32),
            ),
            (
                "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(cutlass_80_simt_sgemm_128x256_8x4_nt_align1::Params)",
                Some(CudaCoreFp32),
            ),
            (
                "sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize128x256x32_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
                Some(TensorCore),
            ),
            (
                "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NTT",
                Some(TensorCore),
            ),
            (
                "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(x)",
                Some(TensorCore),
            ),
            ("ampere_sgemm_128x128_tn", Some(CudaCoreFp32)),
            ("volta_sgemm_128x32_nt", Some(CudaCoreFp32)),
            (
                "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int)",
                Some(CudaCoreFp32),
            ),
            (
                "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26",
                Some(TensorCore),
            ),
            ("void gemmk1_kernel<float, 256, 5>(x)", None),
            (
                "void at::native::vectorized_elementwise_kernel<4>(int)",
                None,
            ),
            ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", None),
        ] {
            assert_eq!(matmul_unit(name), unit, "{name}");
        }
    }

    #[test]
    fn families_from_names_seen_in_real_traces() {
        use KernelFamily::*;
        for (name, family) in [
            (
                "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2> >(int, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2>)",
                Memory,
            ),
            (
                "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >(x)",
                Memory,
            ),
            (
                "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float, float const*)",
                Memory,
            ),
            (
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>(x)",
                Memory,
            ),
            ("triton_poi_fused_add_mul_pow_tanh_0", Generated),
            ("triton_red_fused_mean_pow_sub_1", Generated),
            ("triton_tem_fused_mm_0", Matrix),
            (
                "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
                Matrix,
            ),
            ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", Matrix),
            (
                "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(x)",
                Memory,
            ),
            ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", Other),
            (
                "void at::native::(anonymous namespace)::sort_postprocess_kernel<long>(x)",
                Other,
            ),
        ] {
            assert_eq!(kernel_family(name), family, "{name}");
        }
        assert_eq!(
            template_elem_bytes(
                "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 2, 128, 1>(x)"
            ),
            Some(4)
        );
        assert_eq!(
            template_elem_bytes(
                "multi_tensor_apply_kernel<TensorListMetadata<4>, FusedAdamMathFunctor<c10::BFloat16, 4, (ADAM_MODE)1, false>, float>"
            ),
            Some(2)
        );
        assert_eq!(template_elem_bytes("ampere_sgemm_128x128_tn"), None);
    }

    #[test]
    fn architectures_from_names() {
        assert_eq!(built_for_sm("sm80_xmma_gemm_f32f32"), Some(80));
        assert_eq!(
            built_for_sm("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm>"),
            Some(75)
        );
        assert_eq!(built_for_sm("nvjet_sm90_tst_320x128"), Some(90));
        assert_eq!(built_for_sm("ampere_sgemm_128x128_tn"), Some(80));
        assert_eq!(built_for_sm("void at::native::reduce_kernel<512, 1>"), None);
        assert_eq!(
            built_for_sm("void cudnn::engines_precompiled::nchwToNhwcKernel"),
            None
        );
    }

    #[test]
    fn peaks_by_product_name() {
        assert_eq!(
            peaks_for("NVIDIA H200", None).map(|p| p.mem_tbps),
            Some(4.8)
        );
        assert_eq!(
            peaks_for("NVIDIA H100 80GB HBM3", None).map(|p| p.model),
            Some("H100 SXM")
        );
        assert_eq!(
            peaks_for("NVIDIA A100-SXM4-40GB", Some(40 << 30)).map(|p| p.mem_tbps),
            Some(1.555)
        );
        assert_eq!(
            peaks_for("Tesla V100-SXM2-32GB", None).map(|p| p.tflops(Math::Bf16)),
            Some(15.7)
        );
        assert!(peaks_for("Quadro GP100", None).is_none());
    }
}

/// A host link: PCIe generation and lane count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLink {
    /// PCIe generation (3, 4, 5, 6).
    pub generation: u32,
    /// Lanes.
    pub width: u32,
}

/// Share of a PCIe link's raw rate that large pinned copies are taken to reach: 55 GB/s of
/// Gen5 x16's 63 (88%) on our H200, 57 GB/s on the H100 of issue 40's field report (90%); a
/// field A100 PCIe host reached 20 of Gen4 x16's 31.5 (64%), so the figure is an estimate,
/// said as the datasheet link's in the evidence, and the trace's own pinned copies replace it
/// wherever there are some.
pub const LINK_ACHIEVABLE: f64 = 0.8;

impl HostLink {
    /// Raw rate per direction, GB/s: transfers per lane times lanes, less the encoding
    /// (8b/10b up to Gen2, 128b/130b from Gen3; Gen6's FLITs carry 242 of 256 bytes).
    pub fn raw_gbps(self) -> f64 {
        let (gts, code) = match self.generation {
            1 => (2.5, 0.8),
            2 => (5.0, 0.8),
            3 => (8.0, 128.0 / 130.0),
            4 => (16.0, 128.0 / 130.0),
            5 => (32.0, 128.0 / 130.0),
            _ => (64.0, 242.0 / 256.0),
        };
        gts * self.width as f64 * code / 8.0
    }

    /// What large pinned copies reach over it, GB/s ([`LINK_ACHIEVABLE`] of the raw rate).
    pub fn pinned_gbps(self) -> f64 {
        self.raw_gbps() * LINK_ACHIEVABLE
    }
}

/// The host link of data-centre and workstation GPU models, from their datasheets (specific
/// names first). GeForce cards are left out: the same chip ships with x8 and x16 links.
const LINKS: &[(&str, HostLink)] = &[
    (
        "B200",
        HostLink {
            generation: 5,
            width: 16,
        },
    ),
    (
        "H200",
        HostLink {
            generation: 5,
            width: 16,
        },
    ),
    (
        "H100",
        HostLink {
            generation: 5,
            width: 16,
        },
    ),
    (
        "A100",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "L40S",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "L40",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "L4",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "A10",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "MI300X",
        HostLink {
            generation: 5,
            width: 16,
        },
    ),
    (
        "MI250",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "V100",
        HostLink {
            generation: 3,
            width: 16,
        },
    ),
    (
        "T4",
        HostLink {
            generation: 3,
            width: 16,
        },
    ),
    (
        "RTX 6000 ADA",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "RTX A6000",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "QUADRO RTX 6000",
        HostLink {
            generation: 3,
            width: 16,
        },
    ),
    (
        "QUADRO RTX 8000",
        HostLink {
            generation: 3,
            width: 16,
        },
    ),
    (
        "A40",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "A30",
        HostLink {
            generation: 4,
            width: 16,
        },
    ),
    (
        "P100",
        HostLink {
            generation: 3,
            width: 16,
        },
    ),
];

/// The host link a GPU model ships with (`NVIDIA H100 80GB HBM3` → Gen5 x16), when known.
pub fn model_link(name: &str) -> Option<HostLink> {
    let upper = name.to_ascii_uppercase();
    // A key names a model only as a whole token: "A100" is not in "RTX A1000", nor "A40" in
    // "RTX A400" (x8 cards), nor "H200" in "GH200" or "B200" in "GB200" (superchips, which
    // reach host memory over NVLink-C2C, not PCIe); a letter may follow ("A10G", "MI250X").
    let names = |key: &str| {
        upper.match_indices(key).any(|(i, _)| {
            let before = upper[..i].chars().next_back();
            let after = upper[i + key.len()..].chars().next();
            !before.is_some_and(|c| c.is_ascii_alphanumeric())
                && !after.is_some_and(|c| c.is_ascii_digit())
        })
    };
    LINKS.iter().find(|(key, _)| names(key)).map(|(_, l)| *l)
}
