//! The Perfetto overlay (`report --format perfetto`), read back with an independent reader
//! (flate2 and serde_json, against Chrome's trace-event format: every event an object with
//! `ph`, complete events with numeric `ts` and `dur`, metadata naming processes and threads)
//! and with tracehound itself.

mod common;

use common::{own, run, success, tmpdir};
use serde_json::Value;
use std::io::Read;

fn read_json(path: &std::path::Path) -> Value {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .expect("file")
        .read_to_end(&mut bytes)
        .expect("read");
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut text = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut text)
            .expect("gzip");
        bytes = text;
    }
    serde_json::from_slice(&bytes).expect("JSON")
}

fn analyze(path: &std::path::Path) -> Value {
    let out = success(&run(&[
        "analyze",
        "--format",
        "json",
        path.to_str().expect("UTF-8 path"),
    ]));
    serde_json::from_str::<Value>(&out).expect("report")["traces"][0].clone()
}

/// `report --format perfetto` of `trace`, written inside a directory of the test's own and
/// read back.
fn perfetto_overlay(trace: &std::path::Path) -> Value {
    let dir = tmpdir("overlay");
    let out = dir.path().join("overlay.perfetto.json");
    success(&run(&[
        "report",
        "--format",
        "perfetto",
        trace.to_str().expect("UTF-8 path"),
        "-o",
        out.to_str().expect("UTF-8 path"),
    ]));
    read_json(&out)
}

#[test]
fn the_overlay_holds_the_trace_and_one_slice_per_gap_and_reads_back_the_same() {
    let original = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let dir = tmpdir("overlay");
    let out = dir.path().join("run.perfetto.json.gz");
    let o = run(&[
        "report",
        original.to_str().expect("UTF-8 path"),
        "-o",
        out.to_str().expect("UTF-8 path"),
    ]);
    success(&o);
    let doc = read_json(&out);
    let src = read_json(&original);
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let original_events = src["traceEvents"].as_array().expect("traceEvents");
    // The original's events, unchanged and in order, then tracehound's.
    assert!(events[..original_events.len()] == original_events[..]);
    // And its other members (device properties, base time ...).
    for (k, v) in src.as_object().expect("object") {
        if k != "traceEvents" {
            assert!(&doc[k.as_str()] == v, "{k}");
        }
    }
    let added: Vec<&Value> = events[original_events.len()..].iter().collect();
    for e in &added {
        assert_eq!(e["cat"], "tracehound");
        let ph = e["ph"].as_str().expect("ph");
        assert!(matches!(ph, "X" | "M" | "s" | "f"), "{e}");
        if ph == "X" {
            assert!(
                e["ts"].is_number() && e["dur"].as_f64().is_some_and(|d| d >= 0.0),
                "{e}"
            );
            assert!(e["pid"].is_i64() && e["tid"].is_i64(), "{e}");
        }
    }
    let pid = added
        .iter()
        .find(|e| {
            e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "tracehound"
        })
        .expect("a process named tracehound")["pid"]
        .clone();
    let track = added
        .iter()
        .find(|e| {
            e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "idle gaps · GPU 0"
        })
        .expect("a gap track for GPU 0")["tid"]
        .clone();
    // One slice per idle gap over the threshold, named by its cause, as the report counts them.
    let report = analyze(&original);
    let idle = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["rule"] == "idle_gaps")
        .expect("an idle_gaps finding");
    let title = idle["title"].as_str().expect("title");
    let gaps: usize = title
        .split(": ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("gap count in {title:?}"));
    let slices: Vec<&&Value> = added
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] == track)
        .collect();
    // The track also shows the gaps that are not the program's and that the title does not
    // count: here the profiler's own work, each over a CUPTI buffer request of the original.
    let requests: Vec<(f64, f64)> = original_events
        .iter()
        .filter(|e| e["cat"] == "overhead" && e["name"] == "Activity Buffer Request")
        .map(|e| {
            let ts = e["ts"].as_f64().expect("ts");
            (ts, ts + e["dur"].as_f64().expect("dur"))
        })
        .collect();
    let profiler: Vec<&&&Value> = slices
        .iter()
        .filter(|s| s["name"] == "the profiler's own work")
        .collect();
    for s in &profiler {
        let (a, d) = (
            s["ts"].as_f64().expect("ts"),
            s["dur"].as_f64().expect("dur"),
        );
        let covered: f64 = requests
            .iter()
            .map(|&(x, y)| (y.min(a + d) - x.max(a)).max(0.0))
            .sum();
        assert!(2.0 * covered >= d, "{s}");
    }
    assert_eq!(slices.len(), gaps + profiler.len(), "{title}");
    let causes = [
        "the profiler's own work",
        "data loading",
        "host synchronisation",
        "Python",
        "launch overhead",
        "module loading / first calls",
        "untraced host code",
        "CPU operators",
        "GPU-side waits",
    ];
    for s in &slices {
        let name = s["name"].as_str().expect("name");
        assert!(
            s["args"]["cause"]
                .as_str()
                .is_some_and(|c| c.starts_with(name))
                || causes.contains(&name),
            "{s}"
        );
    }
    // The report's worst gap is the longest slice, at the same place (µs to the nanosecond).
    let worst = &idle["instances"][0];
    let longest = slices
        .iter()
        .max_by(|a, b| {
            a["dur"]
                .as_f64()
                .partial_cmp(&b["dur"].as_f64())
                .expect("numbers")
        })
        .expect("slices");
    let ts_ns = (longest["ts"].as_f64().expect("ts") * 1000.0).round() as i64;
    assert!(
        (ts_ns - worst["start_ns"].as_i64().expect("start")).abs() <= 1,
        "{longest} vs {worst}"
    );
    // Every finding's worst instances are on the findings track, with the finding's id.
    let ids: Vec<&str> = added
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid && e["tid"] != track)
        .filter_map(|e| e["args"]["id"].as_str())
        .collect();
    for f in report["findings"].as_array().expect("findings") {
        if f["instances"].as_array().is_some_and(|i| !i.is_empty()) {
            assert!(ids.contains(&f["id"].as_str().expect("id")), "{}", f["id"]);
        }
    }
    // Flows start and finish in pairs.
    let starts = added.iter().filter(|e| e["ph"] == "s").count();
    assert_eq!(starts, added.iter().filter(|e| e["ph"] == "f").count());
    assert!(starts > 0);
    // tracehound reads the overlay back to the same findings and summary.
    let back = analyze(&out);
    assert_eq!(back["findings"], report["findings"]);
    assert_eq!(back["summary"], report["summary"]);
}

#[test]
fn an_nsys_export_gets_its_gpu_work_written_from_the_model() {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("sample-traces/nsys/h200_cpu_preprocess_cuda.sqlite");
    let doc = perfetto_overlay(&p);
    let events = doc["traceEvents"].as_array().expect("events");
    let kernels = events.iter().filter(|e| e["cat"] == "kernel").count();
    let info = success(&run(&["info", p.to_str().expect("UTF-8 path")]));
    assert!(
        info.contains(&format!("GPU ops: {kernels} kernels")),
        "{kernels}: {info}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["cat"] == "tracehound" && e["ph"] == "X")
    );
}

#[test]
fn several_traces_are_refused_for_one_overlay() {
    let a = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let b = own("h200_fp32_no_tf32.pt.trace.json.gz");
    let dir = tmpdir("overlay");
    let out = dir.path().join("x.perfetto.json");
    let o = run(&[
        "report",
        a.to_str().expect("UTF-8"),
        b.to_str().expect("UTF-8"),
        "-o",
        out.to_str().expect("UTF-8"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(!out.exists());
}

/// GTLS (CUDA C through CuPy; shipped): the kernel that holds the GPU-bound run is a finding the
/// capture cannot price. Its slice says so with a null impact, where a 0 would read "free".
#[test]
fn an_unpriced_finding_has_a_null_impact_in_the_overlay() {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("sample-traces/field/nsys/gtls_cupy_transit_search_rtx3060_nsysunknown.sqlite");
    let doc = perfetto_overlay(&p);
    let report = analyze(&p);
    let first = &report["findings"][0];
    assert!(
        first["metrics"]["unpriced_share"].as_f64().is_some(),
        "{first}"
    );
    let slices: Vec<&Value> = doc["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["cat"] == "tracehound" && e["args"]["rule"].is_string())
        .collect();
    let own: Vec<&&Value> = slices
        .iter()
        .filter(|e| e["args"]["id"] == first["id"])
        .collect();
    assert!(!own.is_empty(), "no slice for {}", first["id"]);
    for e in own {
        assert!(e["args"]["impact_us"].is_null(), "{e}");
        assert!(e["args"]["share_of_window"].is_null(), "{e}");
    }
    // The priced findings keep their numbers.
    let priced = slices
        .iter()
        .find(|e| e["args"]["id"] != first["id"])
        .expect("a priced finding's slice");
    assert!(priced["args"]["impact_us"].as_f64().is_some(), "{priced}");
}
