//! Diagnosis accuracy on captures whose cause is known by construction
//! (`sample-traces/generators/diag.py`, `ddp.py`; what was planted is in
//! `sample-traces/reference/*.truth.json`). For each capture: the top finding, the measured
//! cause of its first breakdown row, and where the truth file has host time measured with
//! `perf_counter` around the planted code, that the time tracehound gives the cause agrees
//! with it. The clean negatives must have no high finding.

mod common;
use common::*;
use std::path::{Path, PathBuf};

fn reference(name: &str) -> serde_json::Value {
    let p = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("sample-traces/reference")
    .join(name);
    serde_json::from_slice(&std::fs::read(&p).expect("truth file")).expect("truth JSON")
}

/// Sum of the host milliseconds the capture measured around its planted code.
fn measured_ms(truth: &serde_json::Value, key: &str) -> f64 {
    truth["measured_host_ms"][key]
        .as_array()
        .unwrap_or_else(|| panic!("measured_host_ms.{key} in the truth file"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .sum()
}

/// The idle_gaps finding's rows of a cause whose label contains `leaf`: total ms.
fn cause_ms(doc: &serde_json::Value, cause: &str, leaf: &str) -> f64 {
    findings(doc, "idle_gaps")[0]["breakdown"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["cause"] == cause && r["label"].as_str().unwrap().contains(leaf))
        .map(|r| r["time_ns"].as_f64().unwrap() / 1e6)
        .sum()
}

/// Asserts the top finding is `rule` and, for idle_gaps, that its first row is `cause` with a
/// label containing `leaf`. Returns the document.
fn expect_top(path: &Path, rule: &str, cause: &str, leaf: &str) -> serde_json::Value {
    let doc = analyze_json(path, &[]);
    let top = &doc["findings"][0];
    assert_eq!(top["rule"], rule, "{}: top finding {}", path.display(), top);
    assert_eq!(top["severity"], "high", "{}", path.display());
    let idle = findings(&doc, "idle_gaps");
    let row = &idle[0]["breakdown"][0];
    assert_eq!(row["cause"], cause, "{}: {}", path.display(), row);
    let label = row["label"].as_str().unwrap();
    assert!(label.contains(leaf), "{}: {label}", path.display());
    // Every row carries its measured share, and the shares add up to at most the whole.
    let shares: f64 = idle[0]["breakdown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["share"].as_f64().expect("share on every cause row"))
        .sum();
    assert!(
        shares <= 1.0 + 1e-9,
        "{}: shares sum {shares}",
        path.display()
    );
    doc
}

#[test]
fn cpu_tensor_preprocessing_is_named_with_its_operators() {
    let doc = expect_top(
        &own("h200_cpu_preprocess.pt.trace.json.gz"),
        "idle_gaps",
        "cpu_op",
        "aten::upsample_bilinear2d on CPU",
    );
    // perf_counter around torch.rand + F.interpolate: the GPU is idle for all of it except
    // the few ms it still runs the previous step's work.
    let truth = reference("h200_cpu_preprocess.kineto.truth.json");
    let planted = measured_ms(&truth, "cpu_preprocess");
    let named = cause_ms(&doc, "cpu_op", "aten::upsample_bilinear2d")
        + cause_ms(&doc, "cpu_op", "aten::rand");
    agrees(named, planted, 0.75, 1.05, "CPU operators");
}

#[test]
fn python_built_inputs_are_python_not_a_sync() {
    let doc = expect_top(
        &own("h200_python_list_input.pt.trace.json.gz"),
        "idle_gaps",
        "python",
        "built-in method tensor",
    );
    let truth = reference("h200_python_list_input.kineto.truth.json");
    let planted = measured_ms(&truth, "build_batch");
    let named = cause_ms(&doc, "python", "tensor") + cause_ms(&doc, "python", "build_batch");
    agrees(named, planted, 0.9, 1.05, "Python in build_batch");
    assert!(metric(findings(&doc, "idle_gaps")[0], "host_sync_ns") < 0.02 * named * 1e6);
}

#[test]
fn sleep_in_the_loop_is_the_sleep() {
    let doc = expect_top(
        &own("h200_sleep_log.pt.trace.json.gz"),
        "idle_gaps",
        "python",
        "built-in function sleep",
    );
    let advice = findings(&doc, "idle_gaps")[0]["advice"][0]
        .as_str()
        .unwrap();
    assert!(advice.contains("sleep"), "{advice}");
}

#[test]
fn item_then_bookkeeping_names_the_python_and_the_drain() {
    let doc = expect_top(
        &own("h200_item_then_python.pt.trace.json.gz"),
        "idle_gaps",
        "python",
        "bookkeeping",
    );
    let row = &findings(&doc, "idle_gaps")[0]["breakdown"][0];
    assert!(
        row["label"]
            .as_str()
            .unwrap()
            .contains("queue drained by aten::item (cudaStreamSynchronize)"),
        "{row}"
    );
    // The last step's bookkeeping runs after the window's last GPU work: 4 of 5 are gaps.
    let truth = reference("h200_item_then_python.kineto.truth.json");
    let planted = measured_ms(&truth, "bookkeeping");
    let named = cause_ms(&doc, "python", "bookkeeping");
    agrees(named, planted, 0.7, 1.05, "bookkeeping");
}

#[test]
fn cpu_then_numpy_names_numpy_after_the_copy() {
    let doc = expect_top(
        &own("h200_cpu_sync_numpy.pt.trace.json.gz"),
        "idle_gaps",
        "python",
        "sort",
    );
    let label = findings(&doc, "idle_gaps")[0]["breakdown"][0]["label"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(label.contains("queue drained by aten::to"), "{label}");
}

#[test]
fn cudnn_benchmark_with_new_shapes_is_autotuning() {
    let doc = expect_top(
        &own("h200_cudnn_benchmark_shapes.pt.trace.json.gz"),
        "idle_gaps",
        "cudnn_autotune",
        "Convolution",
    );
    let idle = findings(&doc, "idle_gaps")[0];
    let rows = idle["breakdown"].as_array().unwrap();
    // The shapes are named where the operator recorded them (forward convolutions).
    assert!(
        rows.iter()
            .any(|r| r["label"].as_str().unwrap().contains("on input [32, ")),
        "{rows:?}"
    );
    assert!(
        idle["advice"][0]
            .as_str()
            .unwrap()
            .contains("cudnn.benchmark")
    );
}

#[test]
fn first_calls_inside_the_steps_are_module_loading() {
    expect_top(
        &own("h200_lazy_loading.pt.trace.json.gz"),
        "idle_gaps",
        "module_loading",
        "first call",
    );
}

#[test]
fn a_slow_dataloader_is_data_loading() {
    let doc = expect_top(
        &own("h200_dataloader_slow.pt.trace.json.gz"),
        "idle_gaps",
        "data_loading",
        "__next__",
    );
    let truth = reference("h200_dataloader_slow.kineto.truth.json");
    let planted = measured_ms(&truth, "next_batch");
    let named = cause_ms(&doc, "data_loading", "");
    agrees(named, planted, 0.8, 1.05, "next() of the DataLoader");
}

#[test]
fn empty_cache_in_the_loop_is_allocator_calls() {
    // The allocator rule ranks first (its cudaMalloc/cudaFree time); the gaps agree.
    let doc = analyze_json(&own("h200_empty_cache_per_step.pt.trace.json.gz"), &[]);
    assert_eq!(doc["findings"][0]["rule"], "allocator_fragmentation");
    let row = &findings(&doc, "idle_gaps")[0]["breakdown"][0];
    assert_eq!(row["cause"], "allocator", "{row}");
    assert!(
        row["label"].as_str().unwrap().contains("cudaMalloc"),
        "{row}"
    );
}

#[test]
fn clean_negatives_have_no_high_finding() {
    for name in [
        "h200_matmul_clean.pt.trace.json.gz",
        "h200_cuda_graph_clean.pt.trace.json.gz",
        "h200_gpt_train_gpu_bound_clean.pt.trace.json.gz",
    ] {
        let doc = analyze_json(&own(name), &[]);
        // The CUDA-graph capture replays an FP32 MLP at PyTorch's default matmul precision
        // (diag.py): its GEMMs run on CUDA cores, which the tensor_cores rule must say; it is
        // clean of host-side problems. The other two run in bf16.
        let fp32 = name.contains("cuda_graph");
        assert_eq!(!findings(&doc, "tensor_cores").is_empty(), fp32, "{name}");
        for f in doc["findings"].as_array().unwrap() {
            if f["rule"] != "tensor_cores" {
                assert_ne!(f["severity"], "high", "{name}: {f}");
            }
        }
        // A CUDA-graph replay is not launch-bound.
        for f in findings(&doc, "idle_gaps") {
            assert_eq!(metric(f, "launch_bound"), 0.0, "{name}");
        }
    }
}

/// A gzipped sample unpacked to the file `name` in a test's own directory.
fn unpack(gz: &Path, dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let mut dec = flate2::read::GzDecoder::new(std::fs::File::open(gz).unwrap());
    let mut f = std::fs::File::create(&out).unwrap();
    std::io::copy(&mut dec, &mut f).unwrap();
    out
}

/// Asserts that the time tracehound gives a cause agrees with the time measured around the
/// planted code: within [lo, hi] times it.
fn agrees(named: f64, planted: f64, lo: f64, hi: f64, what: &str) {
    assert!(
        named > lo * planted && named < hi * planted,
        "{what}: {named:.1} ms named vs {planted:.1} ms measured"
    );
}

fn nsys(name: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("sample-traces/nsys")
    .join(name)
}

#[test]
fn nsys_without_cpu_data_says_so_and_with_it_names_the_operators() {
    // Same planted stall; the export without CPU-side data cannot name it and says how to
    // capture what the host did.
    let bare = expect_top(
        &nsys("h200_cpu_preprocess_cuda.sqlite"),
        "idle_gaps",
        "untraced",
        "this export has no CPU-side data",
    );
    assert_eq!(bare["format"], "nsys");
    // With --pytorch=autograd-nvtx the operator ranges name it (the export is shipped
    // gzipped: unpack it next to the test's temporary files).
    let tmp = tmpdir("accuracy-host");
    let out = unpack(
        &nsys("h200_cpu_preprocess_host.sqlite.gz"),
        tmp.path(),
        "host.sqlite",
    );
    let doc = expect_top(
        &out,
        "idle_gaps",
        "cpu_op",
        "aten::upsample_bilinear2d on CPU",
    );
    assert!(cause_ms(&doc, "cpu_op", "aten::rand") > 0.0);
}

#[test]
fn nsys_os_runtime_trace_names_the_sleep() {
    expect_top(
        &nsys("h200_sleep_log_osrt.sqlite"),
        "idle_gaps",
        "os_call",
        "clock_nanosleep",
    );
}

fn job(name: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("sample-traces/kineto-jobs")
    .join(name)
}

fn analyze_job(dir: &Path) -> serde_json::Value {
    let out = run(&["analyze", "--format", "json", dir.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["job"].clone()
}

#[test]
fn the_straggler_rank_and_its_victims_wait() {
    let j = analyze_job(&job("h200_ddp_straggler"));
    let f = &j["findings"][0];
    assert_eq!(f["rule"], "straggler_rank", "{f}");
    assert_eq!(metric(f, "straggler_rank"), 1.0);
    // Independently (generators/ddp_truth.py, plain Python over the two traces, in the truth
    // file): 36 all-reduce kernels per rank; rank 0's kernels run 235.116 ms longer in all
    // than rank 1's, which is its wait; rank 1 starts last at all 36.
    let truth = reference("h200_ddp_straggler.truth.json");
    let m = &truth["measured_from_traces"];
    let ranks = j["ranks"].as_array().unwrap();
    let wait0 = ranks[0]["collective_wait_ns"].as_f64().unwrap() / 1e6;
    let expected = m["wait_ms_by_duration"][0].as_f64().unwrap();
    assert!(
        (wait0 - expected).abs() < 0.01,
        "rank 0 waits {wait0} ms, Python {expected}"
    );
    assert_eq!(ranks[1]["collective_wait_ns"], 0);
    assert_eq!(metric(f, "matched_collectives"), 36.0);
    assert_eq!(
        metric(f, "last_arrivals") as usize,
        m["last_to_arrive"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|&x| x == 1)
            .count()
    );
    // Rank 0's exposed collective time on its own: the Python measure of NCCL time no other
    // GPU work overlaps.
    let doc = analyze_json(
        &job("h200_ddp_straggler").join("rank0.pt.trace.json.gz"),
        &[],
    );
    let exposed = metric(findings(&doc, "exposed_communication")[0], "exposed_ns") / 1e6;
    let py = m["ranks"][0]["exposed_nccl_ms"].as_f64().unwrap();
    assert!((exposed - py).abs() < 0.01, "{exposed} vs {py}");
    // Busy is not compute: rank 0's GPU is busy nearly all its window, most of it in
    // all-reduces that wait for rank 1, so its verdict is communication-bound, with Python's
    // exposed time as its share of the window; rank 1, whose host is slow, is not.
    let s = &doc["summary"];
    assert_eq!(s["bound"], "communication-bound", "{}", s["verdict"]);
    let w = &s["window"];
    let (start_ns, end_ns) = (w["start"].as_f64().unwrap(), w["end"].as_f64().unwrap());
    // The verdict's shares leave out the profiler's start-up: the hole from the window's start
    // to the first GPU operation, from the trace's own events.
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(
            std::fs::File::open(job("h200_ddp_straggler").join("rank0.pt.trace.json.gz")).unwrap(),
        ),
        &mut text,
    )
    .unwrap();
    let events: serde_json::Value = serde_json::from_str(&text).unwrap();
    let first_gpu_ns = events["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            ["kernel", "gpu_memcpy", "gpu_memset"].contains(&e["cat"].as_str().unwrap_or(""))
        })
        .map(|e| e["ts"].as_f64().unwrap() * 1e3)
        .filter(|&t| t >= start_ns)
        .fold(f64::MAX, f64::min);
    let hole_ms = (first_gpu_ns - start_ns) / 1e6;
    assert!(hole_ms > 0.0 && hole_ms < 5.0, "{hole_ms} ms");
    let window_ms = (end_ns - start_ns) / 1e6 - hole_ms;
    let share = format!(
        "{:.0}% of the window is collective communication",
        100.0 * py / window_ms
    );
    assert!(
        s["verdict"].as_str().unwrap().contains(&share),
        "{share}: {}",
        s["verdict"]
    );
    let rank1 = analyze_json(
        &job("h200_ddp_straggler").join("rank1.pt.trace.json.gz"),
        &[],
    );
    assert_ne!(rank1["summary"]["bound"], "communication-bound");
    // Why it is late: its own gap attribution (CPU tensor ops only rank 1 runs).
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .contains("aten::upsample_bilinear2d on CPU"),
        "{f}"
    );
}

#[test]
fn sequential_all_reduces_are_exposed_communication_not_a_straggler() {
    let j = analyze_job(&job("h200_ddp_exposed"));
    assert!(
        j["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["rule"] != "straggler_rank"),
        "arrival order is jitter here: {}",
        j["findings"]
    );
    // Python (truth file): rank 0 waits 4.693 ms in all, rank 1 0.106 ms; rank 1 starts
    // last at 40 of 72 collectives, which is no fixed order.
    let m = &reference("h200_ddp_exposed.truth.json")["measured_from_traces"];
    for (r, rank) in j["ranks"].as_array().unwrap().iter().enumerate() {
        let got = rank["collective_wait_ns"].as_f64().unwrap() / 1e6;
        let py = m["wait_ms_by_duration"][r].as_f64().unwrap();
        assert!((got - py).abs() < 0.01, "rank {r}: {got} vs {py}");
    }
    let doc = analyze_json(&job("h200_ddp_exposed").join("rank0.pt.trace.json.gz"), &[]);
    let f = findings(&doc, "exposed_communication");
    assert_eq!(f.len(), 1);
    // Nothing overlaps the all-reduces: exposed equals all collective time (13.726 ms).
    assert_eq!(metric(f[0], "exposed_ns"), metric(f[0], "collective_ns"));
    let py = m["ranks"][0]["exposed_nccl_ms"].as_f64().unwrap();
    assert!((metric(f[0], "exposed_ns") / 1e6 - py).abs() < 0.01);
    // ddp.py trains an FP32 MLP at the default matmul precision: the CUDA-core GEMMs rank
    // first, the exposed communication next.
    assert_eq!(doc["findings"][0]["rule"], "tensor_cores");
    assert_eq!(doc["findings"][1]["rule"], "exposed_communication");
}

#[test]
fn the_balanced_ddp_job_has_no_straggler() {
    let Some(_) = shared("h200_resnet_unpinned_sync.pt.trace.json.gz") else {
        return;
    };
    let dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../shared/sample-traces/kineto-jobs/ddp2_h200_balanced");
    let j = analyze_job(&dir);
    assert!(
        j["findings"].as_array().unwrap().is_empty(),
        "{}",
        j["findings"]
    );
    // Rank 1 does wait at every collective (rank 0 arrives ~0.4 ms later), but backward
    // kernels hide it: the table shows the exposed part.
    let ranks = j["ranks"].as_array().unwrap();
    assert!(ranks[1]["collective_wait_ns"].as_f64().unwrap() > 40e6);
    assert!(ranks[1]["collective_exposed_wait_ns"].as_f64().unwrap() < 2e6);
    let text = run(&["analyze", dir.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("Balanced"));
}

#[test]
fn the_old_nccl_names_match_across_eight_ranks() {
    let Some(_) = shared("h200_resnet_unpinned_sync.pt.trace.json.gz") else {
        return;
    };
    let dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../shared/sample-traces/kineto-jobs/dlrm_v100_8ranks");
    let j = analyze_job(&dir);
    // ncclKernel_* (NCCL < 2.19): 8 SendRecv/AllReduce kernels on every rank, all matched.
    // With Python over the 8 files: the rank with the shortest kernel (the last to arrive) is
    // rank 7 for kernels 0-4, rank 5 for 5-6 and rank 4 for 7.
    let f = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "straggler_rank")
        .expect("a straggler on the DLRM job");
    assert_eq!(metric(f, "matched_collectives"), 8.0);
    assert_eq!(metric(f, "straggler_rank"), 7.0);
    assert_eq!(metric(f, "last_arrivals"), 5.0);
}

#[test]
fn the_straggler_is_found_in_per_rank_nsys_exports_too() {
    // The same job under Nsight Systems, one export per rank (shipped gzipped: unpack both
    // into a temporary job directory).
    let tmp = tmpdir("ddp-nsys");
    let dir = tmp.path();
    for r in 0..2 {
        let gz = job("h200_ddp_straggler_nsys").join(format!("rank{r}.sqlite.gz"));
        unpack(&gz, dir, &format!("rank{r}.sqlite"));
    }
    let j = analyze_job(dir);
    let f = &j["findings"][0];
    assert_eq!(f["rule"], "straggler_rank", "{f}");
    assert_eq!(metric(f, "straggler_rank"), 1.0);
    // Why: the autograd NVTX ranges name rank 1's CPU operators.
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .contains("aten::upsample_bilinear2d on CPU"),
        "{f}"
    );
}

#[test]
fn cpu_samples_name_untraced_time_in_nsys_exports() {
    // The host-side export with its operator NVTX ranges removed (a capture with `-s cpu`
    // but without --pytorch=autograd-nvtx): only the CPU samples can say what the host did,
    // and they name the two planted operators' kernels.
    let tmp = tmpdir("accuracy-samples");
    let out = unpack(
        &nsys("h200_cpu_preprocess_host.sqlite.gz"),
        tmp.path(),
        "samples.sqlite",
    );
    let db = rusqlite::Connection::open(&out).unwrap();
    let removed = db
        .execute(
            "DELETE FROM NVTX_EVENTS WHERE coalesce(text, (SELECT value FROM StringIds WHERE id = textId)) LIKE '%op_id =%'",
            [],
        )
        .unwrap();
    assert!(removed > 1000);
    drop(db);
    let doc = analyze_json(&out, &[]);
    let rows = findings(&doc, "idle_gaps")[0]["breakdown"]
        .as_array()
        .unwrap();
    assert_eq!(rows[0]["cause"], "sampled", "{}", rows[0]);
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert!(labels.iter().any(|l| l.contains("upsample")), "{labels:?}");
    assert!(
        labels
            .iter()
            .any(|l| l.contains("CPUGeneratorImpl::random")),
        "{labels:?}"
    );
}
