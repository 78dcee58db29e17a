//! Corpus test: every Kineto file of the shared sample set (and the project's own captures)
//! loads, and the parser's counts equal counts taken independently with Python's `json` module
//! (X events by category, `[memory]` / `[OutOfMemory]` instant events, memcpys with `Pageable`
//! in the name) when this test was written. Skips with a message when `../shared` is absent.

use std::path::PathBuf;
use tracehound_parsers::{GpuOpKind, HostKind, NONE, Trace, load};

/// (file, events, kernels, memcpys, memsets, runtime calls, driver calls, cpu ops,
///  [memory] events, [OutOfMemory] events, pageable memcpys)
type Row = (
    &'static str,
    u64,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
);

const EXPECTED: &[Row] = &[
    (
        "h200_gpt_decode_launch_bound.pt.trace.json.gz",
        232225,
        10824,
        72,
        840,
        11816,
        672,
        58005,
        0,
        0,
        0,
    ),
    (
        "h200_gpt_train_amp_clean.pt.trace.json.gz",
        37704,
        1780,
        76,
        188,
        1962,
        396,
        13424,
        4176,
        0,
        0,
    ),
    (
        "h200_gpt_train_big.pt.trace.json.gz",
        375281,
        17800,
        760,
        1880,
        19602,
        3960,
        134240,
        41760,
        0,
        0,
    ),
    (
        "h200_gpt_train_gpu_bound_clean.pt.trace.json.gz",
        72076,
        4280,
        185,
        905,
        5057,
        975,
        32440,
        9960,
        0,
        0,
    ),
    (
        "h200_resnet_pinned_amp_clean.pt.trace.json.gz",
        35189,
        1795,
        15,
        155,
        3366,
        15,
        7290,
        4410,
        0,
        0,
    ),
    (
        "h200_resnet_unpinned_sync.pt.trace.json.gz",
        52355,
        1915,
        15,
        110,
        4562,
        5,
        11183,
        7734,
        0,
        10,
    ),
    (
        "hta_a100_rank0of2_nccl.json.gz",
        40573,
        2700,
        960,
        114,
        8740,
        0,
        14346,
        0,
        0,
        0,
    ),
    (
        "hta_a100_rank3of8_async_cpu_to_gpu.json.gz",
        109123,
        8568,
        228,
        654,
        24692,
        0,
        40506,
        0,
        0,
        60,
    ),
    (
        "hta_a100sxm4_rank0of16_pageable_pinned.json.gz",
        108936,
        6080,
        1390,
        277,
        33924,
        0,
        25185,
        0,
        0,
        75,
    ),
    (
        "hta_alexnet_a100_pageable_memcpy.json.gz",
        1408,
        79,
        16,
        3,
        361,
        0,
        359,
        0,
        0,
        16,
    ),
    (
        "hta_amd_mi250_rocm62.json.gz",
        220,
        14,
        2,
        0,
        21,
        0,
        70,
        0,
        0,
        0,
    ),
    (
        "hta_cpu_only_rank34of300.pt.trace.json.gz",
        30,
        0,
        0,
        0,
        0,
        0,
        4,
        0,
        0,
        0,
    ),
    (
        "hta_cuda_event_sync_a100_tiny.json.gz",
        92,
        4,
        1,
        0,
        12,
        0,
        10,
        0,
        0,
        1,
    ),
    (
        "hta_cupti_profiler_range_a100_no_kernels.json.gz",
        4222,
        0,
        0,
        0,
        1862,
        0,
        375,
        0,
        0,
        0,
    ),
    (
        "hta_legacy_cats_inference_rank1.json.gz",
        54,
        4,
        0,
        0,
        8,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "hta_quadro_gp100_gpu_user_annotation.json.gz",
        1344,
        130,
        10,
        0,
        180,
        0,
        643,
        0,
        0,
        10,
    ),
    (
        "hta_sampled_rank0of128_no_devprops.json.gz",
        4855,
        1154,
        40,
        10,
        1204,
        0,
        2329,
        0,
        0,
        24,
    ),
    (
        "hta_sampled_rank1of128_no_devprops.json.gz",
        4720,
        1104,
        40,
        10,
        1154,
        0,
        2302,
        0,
        0,
        24,
    ),
    (
        "hta_triton_kernel_a100_tiny.json.gz",
        71,
        1,
        0,
        0,
        1,
        1,
        3,
        0,
        0,
        0,
    ),
    (
        "hta_v100_rank1of2_async_cpu_to_gpu.json.gz",
        105167,
        9876,
        4856,
        900,
        21167,
        0,
        31236,
        0,
        0,
        60,
    ),
    (
        "hta_v100_rank1of2_memory_nccl.json.gz",
        216092,
        19370,
        2040,
        880,
        42373,
        0,
        56680,
        28010,
        0,
        0,
    ),
    (
        "hta_v100_single_rank.pt.trace.json.gz",
        68692,
        4350,
        1600,
        145,
        15329,
        0,
        23910,
        0,
        0,
        0,
    ),
    (
        "kineto_docs_h100_after_fix.json",
        75,
        1,
        0,
        0,
        1,
        0,
        4,
        0,
        0,
        0,
    ),
    (
        "kineto_docs_h100_before_fix.json",
        75,
        1,
        0,
        0,
        1,
        0,
        4,
        0,
        0,
        0,
    ),
    (
        "kineto_plugin_resnet50_2021_toplevel_array.pt.trace.json.gz",
        82276,
        9538,
        12,
        377,
        10800,
        0,
        // 42438 `Operator` events, 6 of them the ProfilerStep# markers (annotations).
        42432,
        0,
        0,
        12,
    ),
    (
        "kineto_tbplugin_gpu_metrics_input.json",
        340,
        30,
        2,
        0,
        42,
        0,
        // 179 `Operator` events, one of them the ProfilerStep#2 marker (an annotation).
        178,
        0,
        0,
        2,
    ),
    (
        "kineto_tbplugin_resnet50_autograd_api_2021.pt.trace.json.gz",
        79711,
        9329,
        338,
        466,
        15754,
        0,
        33535,
        0,
        0,
        16,
    ),
    (
        "kineto_tbplugin_resnet50_v100_2021_memory.pt.trace.json.gz",
        75718,
        8772,
        12,
        312,
        11923,
        0,
        // 23646 `Operator` events; 24 of them carry no `Input Dims` in a trace recorded with
        // shapes: the `record_function` ranges (annotations), 6 each of ProfilerStep#,
        // enumerate(DataLoader)#..., Optimizer.zero_grad#... and Optimizer.step#....
        23622,
        12838,
        0,
        12,
    ),
    (
        "sidnb13_transformer_h100_run1.pt.trace.json",
        1520,
        48,
        0,
        0,
        109,
        0,
        267,
        126,
        0,
        0,
    ),
    (
        "sidnb13_transformer_h100_run2.pt.trace.json",
        1520,
        48,
        0,
        0,
        109,
        0,
        267,
        126,
        0,
        0,
    ),
    (
        "h200_alloc_expandable_segments.pt.trace.json.gz",
        123126,
        4686,
        228,
        604,
        6140,
        419,
        42351,
        12285,
        0,
        12,
    ),
    (
        "h200_alloc_fragmentation.pt.trace.json.gz",
        107914,
        4085,
        192,
        523,
        5428,
        356,
        36817,
        10833,
        2,
        12,
    ),
];

fn shared_dir() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../../shared/sample-traces/kineto")
}

fn own_dir() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../sample-traces/kineto")
}

fn locate(name: &str) -> Option<PathBuf> {
    [own_dir(), shared_dir()]
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.exists())
}

#[test]
fn kineto_corpus_counts() {
    if !shared_dir().exists() {
        eprintln!(
            "skipping: ../shared/sample-traces is absent (a user's clone); only the project's own traces are checked"
        );
    }
    let mut checked = 0;
    for &(
        name,
        events,
        kernels,
        memcpys,
        memsets,
        runtime,
        driver,
        cpu_ops,
        memory,
        ooms,
        pageable,
    ) in EXPECTED
    {
        let Some(path) = locate(name) else { continue };
        let t = load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let gpu = |k: GpuOpKind| t.gpu_ops.iter().filter(|o| o.kind == k).count();
        let host = |k: HostKind| t.host_spans.iter().filter(|s| s.kind == k).count();
        let got = (
            t.stats.events_total,
            gpu(GpuOpKind::Kernel),
            gpu(GpuOpKind::Memcpy),
            gpu(GpuOpKind::Memset),
            host(HostKind::Runtime),
            host(HostKind::Driver),
            host(HostKind::CpuOp),
            t.memory.iter().filter(|m| !m.oom).count(),
            t.memory.iter().filter(|m| m.oom).count(),
            t.gpu_ops.iter().filter(|o| o.is_pageable_copy()).count(),
        );
        assert_eq!(
            got,
            (
                events, kernels, memcpys, memsets, runtime, driver, cpu_ops, memory, ooms, pageable
            ),
            "{name}"
        );
        assert!(!t.stats.truncated, "{name} is complete");
        checked += 1;
    }
    assert!(checked >= 2, "the project's own traces are always present");
    if shared_dir().exists() {
        let on_disk = std::fs::read_dir(shared_dir()).unwrap().count();
        assert_eq!(
            checked,
            on_disk + 2,
            "every shared Kineto file is listed in EXPECTED"
        );
    }
}

/// GPU time in µs and kernel count per operator name, by one of the kernel -> operator links
/// of the index.
fn by_operator(t: &Trace, link: &[u32]) -> Vec<(String, i64, usize)> {
    let mut rows: Vec<(String, i64, usize)> = Vec::new();
    for (op, &cpu) in t.gpu_ops.iter().zip(link) {
        let name = match cpu {
            NONE => "(none)".to_string(),
            i => t.str(t.host_spans[i as usize].name).to_string(),
        };
        match rows.iter_mut().find(|r| r.0 == name) {
            Some(r) => (r.1, r.2) = (r.1 + op.dur() / 1000, r.2 + 1),
            None => rows.push((name, op.dur() / 1000, 1)),
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    rows
}

/// PyTorch 1.10's trace (`cpu_op` operators, `Runtime` calls, `Kernel`s; kernels and calls
/// spell `external id`, operators `External id`): every kernel reaches its launch call and
/// its operators, and the `record_function` range `model_inference` around the whole forward
/// is an annotation, not the outermost operator of every kernel. Expected values from
/// Python's `json` over the events: a kernel's call by `correlation`, its innermost operator
/// by `external id`, its outermost the outermost `cpu_op` with `Input Dims` enclosing the
/// call on its thread.
#[test]
fn old_kineto_links_kernels_to_their_operators() {
    let p = shared_dir().join("../field/kineto/cryptocnn_rtx2080ti_oldkineto.json");
    if !p.exists() {
        eprintln!("skipping: {} is absent", p.display());
        return;
    }
    let t = load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(t.gpu_ops.len(), 24);
    assert!(
        t.index.op_launch.iter().all(|&c| c != NONE),
        "every kernel's call"
    );
    let range = t
        .host_spans
        .iter()
        .find(|s| t.str(s.name) == "model_inference");
    assert_eq!(range.map(|s| s.kind), Some(HostKind::Annotation));
    let own = |v: &[(&str, i64, usize)]| -> Vec<(String, i64, usize)> {
        v.iter().map(|&(n, us, k)| (n.to_string(), us, k)).collect()
    };
    assert_eq!(
        by_operator(&t, &t.index.op_cpu_op),
        own(&[
            ("aten::cudnn_convolution", 6755, 5),
            ("aten::cudnn_batch_norm", 1077, 3),
            ("aten::max_pool2d_with_indices", 656, 3),
            ("aten::add_", 551, 3),
            ("aten::leaky_relu_", 543, 3),
            ("aten::addmm", 162, 3),
            ("aten::_fused_dropout", 109, 1),
            ("aten::add", 9, 3),
        ])
    );
    assert_eq!(
        by_operator(&t, &t.index.op_outer_cpu_op),
        own(&[
            ("aten::conv2d", 7306, 8),
            ("aten::batch_norm", 1077, 3),
            ("aten::max_pool2d", 656, 3),
            ("aten::leaky_relu_", 543, 3),
            ("aten::linear", 162, 3),
            ("aten::dropout", 109, 1),
            ("aten::add", 9, 3),
        ])
    );
}

/// A last `ProfilerStep` marker with no CUDA/HIP call inside, under a tenth of the other steps'
/// length, is the profiler stopping, not a step. Read with Python's `json`: HTA's MI250 capture
/// has `ProfilerStep#1` (9288 µs) and `ProfilerStep#2` (49 µs, no runtime call inside); the
/// field ResNet inference (held in `../shared/sample-traces/field/`) has `ProfilerStep#3`
/// (3.77 ms, 82 kernels) and a 30 µs `ProfilerStep#4`. Each is one step.
#[test]
fn the_profilers_stop_marker_is_not_a_step() {
    for (rel, number) in [
        ("hta_amd_mi250_rocm62.json.gz", 1),
        ("../field/kineto/cpugpuinfer_resnet_infer_rtx2080ti.json", 3),
    ] {
        let p = shared_dir().join(rel);
        if !p.exists() {
            eprintln!("skipping: {} is absent", p.display());
            continue;
        }
        let t = load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let numbers: Vec<i64> = t.steps.iter().map(|s| s.number).collect();
        assert_eq!(numbers, vec![number], "{rel}");
    }
}
