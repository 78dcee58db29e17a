//! The rules beyond idle time (tensor cores, roofline, under-filled kernels, launch-bound
//! stretches, optimizer overhead, memory pressure, step outliers), each on a real H200
//! capture where its problem was planted and on a clean twin where it must stay quiet
//! (`sample-traces/generators/rules.py`). Expected values come from the truth files (torch's
//! own allocator statistics, perf_counter) or were computed with Python over the trace JSON,
//! as each comment says.

mod common;
use common::*;

fn reference(name: &str) -> serde_json::Value {
    let p = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("sample-traces/reference")
    .join(name);
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn close(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        (got - want).abs() <= rel * want.abs(),
        "{what}: got {got}, want {want} (±{:.1}%)",
        100.0 * rel
    );
}

#[test]
fn fp32_without_tf32_is_reported_and_its_estimate_matches_the_tf32_twin() {
    let doc = analyze_json(&own("h200_fp32_no_tf32.pt.trace.json.gz"), &[]);
    assert_eq!(doc["findings"][0]["rule"], "tensor_cores");
    let f = findings(&doc, "tensor_cores")[0];
    assert_eq!(f["id"], "tensor_cores/gpu0/fp32");
    // Python: every kernel with "gemm" in its name, 55 of them, is an FP32 CUDA-core kernel
    // (ffma/simt): 147145.634 µs.
    close(
        metric(f, "fp32_cuda_core_ns"),
        147_145_634.0,
        0.001,
        "CUDA-core time",
    );
    assert_eq!(metric(f, "kernels"), 55.0);
    assert_eq!(metric(f, "tensor_core_share"), 0.0);
    // By construction: the twin runs the same GEMMs with TF32 allowed, in 21855.888 µs
    // (Python, same filter). The saving the fix really brings is 125.29 ms; the estimate
    // from the datasheet peak ratio must be within 5% of it.
    let twin = analyze_json(&own("h200_fp32_tf32_clean.pt.trace.json.gz"), &[]);
    assert!(findings(&twin, "tensor_cores").is_empty());
    close(
        f["impact_ns"].as_f64().unwrap(),
        147_145_634.0 - 21_855_888.0,
        0.05,
        "estimated saving",
    );
    let advice = f["advice"].to_string();
    assert!(advice.contains("set_float32_matmul_precision"), "{advice}");
    assert!(advice.contains("sm_80 on an sm_90 GPU"), "{advice}");
    // The twin's GEMMs sit on the TF32 roof.
    let rows = twin["summary"]["roofline"][0]["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["math"] == "tf32"), "{rows:?}");
}

#[test]
fn misaligned_bf16_gemms_are_reported_with_their_shapes() {
    let doc = analyze_json(&own("h200_bf16_odd_dims.pt.trace.json.gz"), &[]);
    let f = findings(&doc, "tensor_cores");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["id"], "tensor_cores/gpu0/misaligned");
    // Python: all GEMM kernels of the capture come from the odd-sized Linear layers:
    // 23253.985 µs.
    close(
        metric(f[0], "misaligned_ns"),
        23_253_985.0,
        0.01,
        "misaligned time",
    );
    assert!(
        f[0]["breakdown"][0]["label"]
            .as_str()
            .unwrap()
            .contains("N=4093"),
        "{}",
        f[0]["breakdown"][0]
    );
    // The roofline rule leaves them to tensor_cores: no double count.
    assert!(findings(&doc, "roofline").is_empty());
    let rows = doc["summary"]["roofline"][0]["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["roof_share"].as_f64().unwrap() < 0.2));
}

#[test]
fn aligned_bf16_gemms_sit_near_the_roof_and_are_not_flagged() {
    let doc = analyze_json(&own("h200_matmul_clean.pt.trace.json.gz"), &[]);
    assert!(findings(&doc, "roofline").is_empty());
    assert!(findings(&doc, "tensor_cores").is_empty());
    let d = &doc["summary"]["roofline"][0];
    assert_eq!(d["peaks"]["model"], "H200 SXM");
    // Python over the trace: the 20 aten::addmm calls [4096, 8192] x [8192, 8192] launch
    // kernels (by External id) running 12.8 ms; 2·4096·8192·8192 FLOPs each.
    let r = d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["op"] == "aten::addmm")
        .unwrap();
    assert_eq!(r["count"], 20);
    let flops = 20.0 * 2.0 * 4096.0 * 8192.0 * 8192.0;
    close(r["flops"].as_f64().unwrap(), flops, 1e-9, "FLOPs");
    let achieved = flops / (r["time_ns"].as_f64().unwrap() / 1e9) / 1e12;
    close(r["tflops"].as_f64().unwrap(), achieved, 1e-6, "TFLOP/s");
    assert!(r["roof_share"].as_f64().unwrap() > 0.8, "{r}");
    assert_eq!(r["bound"], "compute");
}

#[test]
fn few_wide_rows_underfill_the_gpu() {
    let doc = analyze_json(&own("h200_softmax_few_rows.pt.trace.json.gz"), &[]);
    assert_eq!(doc["findings"][0]["rule"], "underfilled_kernels");
    let f = findings(&doc, "underfilled_kernels")[0];
    // truth: 132 SMs. Python: Σ dur × (1 − blocks/132) over kernels with ≤ 66 blocks
    // (layer norm on 4 blocks, softmax on 8, a small GEMM): 352673.488 µs.
    let truth = reference("h200_softmax_few_rows.kineto.truth.json");
    assert_eq!(metric(f, "sm_count"), truth["sm_count"].as_f64().unwrap());
    close(
        metric(f, "idle_sm_ns"),
        352_673_488.0,
        0.001,
        "idle SM time",
    );
    let top = f["breakdown"][0]["label"].as_str().unwrap();
    assert!(
        top.contains("layer_norm") && top.contains("4 blocks"),
        "{top}"
    );
    // A GPU-bound capture with full grids stays quiet.
    let clean = analyze_json(&own("h200_matmul_clean.pt.trace.json.gz"), &[]);
    assert!(findings(&clean, "underfilled_kernels").is_empty());
}

#[test]
fn tiny_kernels_wait_for_their_launch_but_a_cuda_graph_does_not() {
    let doc = analyze_json(&own("h200_small_mlp_launch_bound.pt.trace.json.gz"), &[]);
    let f = findings(&doc, "launch_bound");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["severity"], "high");
    assert!(metric(f[0], "launch_latency_p50_ns") > 0.0);
    assert!(metric(f[0], "stretches") >= 1.0);
    // idle_gaps points to it rather than counting the same short gaps again.
    let idle = findings(&doc, "idle_gaps")[0];
    assert!(idle["title"].as_str().unwrap().contains("see launch_bound"));
    let total = idle["impact_ns"].as_f64().unwrap() + f[0]["impact_ns"].as_f64().unwrap();
    assert!(
        total
            <= doc["summary"]["window"]["end"].as_f64().unwrap()
                - doc["summary"]["window"]["start"].as_f64().unwrap()
    );
    let graph = analyze_json(&own("h200_cuda_graph_clean.pt.trace.json.gz"), &[]);
    assert!(findings(&graph, "launch_bound").is_empty());
}

#[test]
fn single_tensor_adam_is_a_kernel_storm_and_fused_adam_is_not() {
    let doc = analyze_json(&own("h200_adam_single_tensor.pt.trace.json.gz"), &[]);
    let f = findings(&doc, "optimizer_overhead");
    assert_eq!(f.len(), 1);
    // Python: kernels whose runtime call lies inside the 5 Optimizer.step#Adam.step ranges
    // (same thread): 6720, 1344 a step for 192 parameters (truth).
    assert_eq!(metric(f[0], "storm_kernels"), 6720.0);
    // zero_grad(set_to_none=False): one zeroing kernel per parameter per step.
    let truth = reference("h200_adam_single_tensor.kineto.truth.json");
    assert_eq!(
        metric(f[0], "zero_grad_kernels"),
        5.0 * truth["parameters"].as_f64().unwrap()
    );
    let advice = f[0]["advice"].to_string();
    assert!(advice.contains("fused=True") && advice.contains("set_to_none=True"));
    // The zeroing kernels' waits are counted there, so launch_bound neither counts them again
    // nor names zero_grad's aten::zero_ as a Python loop to replace with foreach operators;
    // without optimizer_overhead it counts them, to the nanosecond.
    let lb = findings(&doc, "launch_bound");
    assert_eq!(lb.len(), 1);
    assert!(!lb[0].to_string().contains("aten::zero_"), "{}", lb[0]);
    let handed = metric(lb[0], "optimizer_ns");
    assert!(handed > 0.0);
    let alone = analyze_json(
        &own("h200_adam_single_tensor.pt.trace.json.gz"),
        &["--skip-rules", "optimizer_overhead"],
    );
    let lb_alone = findings(&alone, "launch_bound");
    assert_eq!(metric(lb_alone[0], "optimizer_ns"), 0.0);
    assert_eq!(
        metric(lb_alone[0], "starved_ns"),
        metric(lb[0], "starved_ns") + handed
    );
    let clean = analyze_json(&own("h200_adam_fused_clean.pt.trace.json.gz"), &[]);
    assert!(findings(&clean, "optimizer_overhead").is_empty());
}

#[test]
fn kept_losses_are_a_leak_with_the_growth_torch_measured() {
    let doc = analyze_json(&own("h200_leak_losses.pt.trace.json.gz"), &[]);
    let f = findings(&doc, "memory_pressure");
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0]["id"], "memory_pressure/gpu0/leak");
    // truth: torch.cuda.memory_allocated() after each profiled step grows 134218752 B a step.
    let truth = reference("h200_leak_losses.kineto.truth.json");
    assert_eq!(
        metric(f[0], "growth_per_step_bytes"),
        truth["growth_per_step_bytes"].as_f64().unwrap()
    );
    assert_eq!(metric(f[0], "steps"), 8.0);
    // A steady loop does not leak.
    let clean = analyze_json(&own("h200_alloc_expandable_segments.pt.trace.json.gz"), &[]);
    assert!(
        findings(&clean, "memory_pressure")
            .iter()
            .all(|f| f["id"] != "memory_pressure/gpu0/leak")
    );
}

#[test]
fn peak_memory_near_capacity_reports_the_headroom() {
    let doc = analyze_json(&own("h200_near_oom.pt.trace.json.gz"), &[]);
    let f = findings(&doc, "memory_pressure");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["severity"], "high");
    // truth: torch.cuda.max_memory_reserved() and the device's total memory.
    let truth = reference("h200_near_oom.kineto.truth.json");
    assert_eq!(
        metric(f[0], "peak_bytes"),
        truth["max_memory_reserved_bytes"].as_f64().unwrap()
    );
    assert_eq!(
        metric(f[0], "capacity_bytes"),
        truth["total_memory_bytes"].as_f64().unwrap()
    );
    // The other captures use a few GiB of 140: no headroom finding.
    let clean = analyze_json(&own("h200_leak_losses.pt.trace.json.gz"), &[]);
    assert!(
        findings(&clean, "memory_pressure")
            .iter()
            .all(|f| f["id"] != "memory_pressure/gpu0/headroom")
    );
}

#[test]
fn empty_cache_in_the_loop_is_named() {
    let doc = analyze_json(&own("h200_empty_cache_per_step.pt.trace.json.gz"), &[]);
    let f = findings(&doc, "memory_pressure");
    assert!(
        f.iter()
            .any(|f| f["id"] == "memory_pressure/empty_cache" && metric(f, "calls") == 5.0),
        "{f:?}"
    );
}

#[test]
fn the_checkpoint_step_is_the_outlier_and_its_causes_are_named() {
    let doc = analyze_json(&own("h200_checkpoint_step.pt.trace.json.gz"), &[]);
    assert_eq!(doc["findings"][0]["rule"], "step_outliers");
    let f = findings(&doc, "step_outliers")[0];
    // truth: profiled step 6 saves the checkpoint and runs gc.collect(); perf_counter
    // measured it at 379.06 ms of host time.
    let truth = reference("h200_checkpoint_step.kineto.truth.json");
    assert_eq!(
        metric(f, "slowest_step"),
        truth["expected_top_cause"]["step_index"].as_f64().unwrap()
    );
    assert_eq!(metric(f, "outliers"), 1.0);
    let wall = truth["step_wall_ms"][6].as_f64().unwrap() * 1e6;
    close(metric(f, "slowest_step_ns"), wall, 0.01, "slowest step");
    let rows = f["breakdown"].to_string();
    assert!(
        rows.contains("collect") && rows.contains("write_record"),
        "{rows}"
    );
    assert!(f["evidence"].as_str().unwrap().contains("160.0 MiB"));
    // A steady loop has no outlier.
    let steady = analyze_json(&own("h200_matmul_clean.pt.trace.json.gz"), &[]);
    assert!(findings(&steady, "step_outliers").is_empty());
}
