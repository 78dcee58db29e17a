//! Chrome trace-event files written by other tools (`sample-traces/field/foreign/`, provenance
//! in the field corpus's PROVENANCE.md): a TensorFlow 1.x timeline and a rocmProfileData trace
//! converted to Chrome's format. Neither is a PyTorch profiler trace; tracehound must say what
//! they are and refuse them (exit 2) rather than judge them as a capture with GPU tracing off.
//! The counts asserted are read from the files here.

mod common;

use common::run;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn foreign(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("sample-traces/field/foreign")
        .join(name)
}

/// The file's events (a `traceEvents` object or a bare list).
fn events(p: &Path) -> Vec<Value> {
    let doc: Value = serde_json::from_slice(&std::fs::read(p).expect("trace")).expect("JSON");
    match doc {
        Value::Array(v) => v,
        d => d["traceEvents"].as_array().expect("traceEvents").clone(),
    }
}

fn refused(p: &Path) -> String {
    let out = run(&["analyze", p.to_str().expect("UTF-8 path")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "no report for a file it cannot read");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_tensorflow_timeline_is_named_and_refused() {
    let p = foreign("tftimeline_ikhlestov-tensorflow_profiling_gpu-timeline_01.json");
    let ev = events(&p);
    // TensorFlow's ops, some on the GPU's streams; no category the PyTorch profiler writes.
    assert!(ev.iter().any(|e| e["cat"] == "Op"));
    assert!(!ev.iter().any(|e| matches!(
        e["cat"].as_str(),
        Some("kernel" | "cpu_op" | "cuda_runtime")
    )));
    let err = refused(&p);
    assert!(err.contains("tftimeline_ikhlestov"), "{err}");
    assert!(err.contains("a TensorFlow timeline"), "{err}");
    assert!(
        err.contains(&format!("none of its {} events", ev.len())),
        "{err}"
    );
    assert!(!err.contains("GPU tracing was off"), "{err}");
}

#[test]
fn a_rocm_profile_data_trace_is_refused_as_another_tool() {
    let p = foreign("rpd2tracing_ROCm-rocmProfileData_matmul_result.json");
    let ev = events(&p);
    // Kernels and copies as uncategorised complete events on a "GPU2" process.
    let complete = ev.iter().filter(|e| e["ph"] == "X").count();
    assert!(complete > 100, "{complete}");
    assert!(
        !ev.iter()
            .any(|e| e.get("cat").is_some_and(|c| c == "kernel"))
    );
    let err = refused(&p);
    assert!(err.contains("from another tool"), "{err}");
    assert!(
        err.contains(&format!("none of its {} events", ev.len())),
        "{err}"
    );
    // What it does read, the .rpd database this was converted from among them.
    assert!(err.contains("tracehound reads: "), "{err}");
    assert!(err.contains("PyTorch profiler (Kineto) trace"), "{err}");
    assert!(err.contains("rocmProfileData (RPD) capture"), "{err}");
}

#[test]
fn torch_compile_chromium_events_are_named_and_refused() {
    // Written here from the format torch/_dynamo/utils.py gives each chromium event it logs
    // to TORCH_TRACE (name, ts in µs, args, ph B/E, cat "dynamo_timed", pid 0, tid 0), as
    // users gather them from the logs into one JSON list for chrome://tracing.
    let p = foreign("torch_trace_dynamo_chromium_events_sample.json");
    let ev = events(&p);
    assert!(
        ev.iter()
            .all(|e| e["cat"] == "dynamo_timed" && matches!(e["ph"].as_str(), Some("B" | "E")))
    );
    let err = refused(&p);
    assert!(err.contains("torch.compile's own timings"), "{err}");
    assert!(
        err.contains(&format!("`dynamo_timed` {}", ev.len())),
        "{err}"
    );
    assert!(!err.contains("GPU tracing was off"), "{err}");
    // What it does read, from the list of readers.
    assert!(err.contains("rocmProfileData (RPD) capture"), "{err}");
}

#[test]
fn a_triton_server_trace_is_named_and_refused() {
    // Written here from the schema in Triton's docs/user_guide/trace.md: per traced request a
    // record naming its model, then one `timestamps` record per point; no `ph`, no GPU work.
    let p = foreign("triton_trace_documented_schema_sample.json");
    let ev = events(&p);
    let models = ev.iter().filter(|e| e.get("model_name").is_some()).count();
    assert_eq!(models, 2);
    assert!(ev.iter().all(|e| e.get("ph").is_none()));
    let err = refused(&p);
    assert!(
        err.contains("triton_trace_documented_schema_sample.json"),
        "{err}"
    );
    assert!(err.contains("a Triton Inference Server trace"), "{err}");
    assert!(err.contains("no GPU records"), "{err}");
    assert!(
        err.contains(&format!("a JSON array of {} items", ev.len())),
        "{err}"
    );
}

#[test]
fn a_rocprof_v1_trace_is_named_and_refused() {
    // Written here in the layout rocprofiler v1's bin/sqlitedb.py writes `results.json`: an
    // empty first event, `process_name` metadata for `CPU HIP API`, `CPU HSA API`, `COPY` and
    // `GPU0`, complete events whose times are strings, flow events and `otherData`. One
    // kernel and three copies.
    let p = foreign("rocprof_v1_results_layout_sample.json");
    let ev = events(&p);
    let on = |pid: &str| {
        ev.iter()
            .filter(|e| e["ph"] == "X" && e["pid"] == pid)
            .count()
    };
    assert_eq!(
        (on("6"), on("5")),
        (1, 3),
        "one kernel on GPU0, three copies"
    );
    assert!(
        ev.iter()
            .all(|e| e.get("cat").is_none() || e["cat"] == "DataFlow")
    );
    let err = refused(&p);
    assert!(err.contains("a rocprof (ROCm profiler v1) trace"), "{err}");
    assert!(
        err.contains(&format!("none of its {} events", ev.len())),
        "{err}"
    );
    assert!(err.contains("rocmProfileData (RPD) capture"), "{err}");
    assert!(!err.contains("GPU tracing was off"), "{err}");
}

#[test]
fn a_bpftrace_log_of_driver_calls_is_named_and_refused() {
    // bpftrace's banner, then the lines of a script's printf on libcuda uprobes.
    let p = foreign("bpftrace_cuda_driver_uprobes_sample.log");
    let text = std::fs::read_to_string(&p).expect("sample");
    assert!(text.starts_with("Attaching 3 probes..."));
    assert_eq!(text.matches("cuLaunchKernel").count(), 4);
    let err = refused(&p);
    assert!(err.contains("a bpftrace log"), "{err}");
    assert!(err.contains("text that is not JSON"), "{err}");
}

#[test]
fn a_custom_cupti_tools_trace_is_named_and_refused() {
    // Written here as a tool built on CUPTI's activity API might write its records: complete
    // events whose categories are the activity kinds, 100 kernels and 200 copies. Whatever a
    // custom tool's fields mean is its own, so none of it is read as a profiler trace.
    let p = foreign("custom_cupti_tool_activity_kinds_sample.json");
    let ev = events(&p);
    let of = |cat: &str| ev.iter().filter(|e| e["cat"] == cat).count();
    assert_eq!(of("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL"), 100);
    assert_eq!(of("CUPTI_ACTIVITY_KIND_MEMCPY"), 200);
    let err = refused(&p);
    assert!(
        err.contains("a trace written by a CUPTI-based tool"),
        "{err}"
    );
    assert!(err.contains("`CUPTI_ACTIVITY_KIND_MEMCPY` 200"), "{err}");
    assert!(
        err.contains("`CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL` 100"),
        "{err}"
    );
    assert!(!err.contains("GPU tracing was off"), "{err}");
}
