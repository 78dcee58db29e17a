//! Nsight Systems exports and nvidia-smi logs through the binary: sessions of a trace with the
//! dmon log recorded beside it, logs and snapshots on their own, bad input.

mod common;
use common::*;
use std::io::Write;
use std::path::PathBuf;

fn shared_file(sub: &str) -> Option<PathBuf> {
    let p = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../shared/sample-traces")
    .join(sub);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipping: {} is absent", p.display());
        None
    }
}

/// Writes `bytes` to the file `name` in the test's own directory.
fn tmp(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
    p
}

#[test]
fn trace_and_dmon_analyse_as_one_session() {
    let Some(dmon) = shared_file("dmon/h200_dmon_s_pucvmet_o_DT.log") else {
        return;
    };
    let trace = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let doc = analyze_json(&trace, &[dmon.to_str().unwrap()]);
    assert_eq!(doc["format"], "kineto");
    assert!(
        doc["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("aligned by wall clock"))
    );
    // The trace ran 16:35:32.219-.683 UTC; dmon's sample stamped 16:35:32 reads SM 14%, 140 W.
    // A gap is shown with the second it fell in, said as that second; the window's own
    // utilisation is not drawn from a 1 s sample of which the 0.46 s window is under half.
    let idle = findings(&doc, "idle_gaps")[0];
    let worst = idle["instances"][0]["what"].as_str().unwrap();
    assert!(
        worst.contains("[nvidia-smi that second: SM 14%, 140 W]"),
        "{worst}"
    );
    let evidence = idle["evidence"].as_str().unwrap();
    assert!(
        !evidence.contains("SM utilisation over the window")
            && evidence.contains("1.00 s samples are coarser than the 463.4 ms window"),
        "{evidence}"
    );

    // A wrong time zone moves the log off the trace: refused with a warning, not misaligned.
    let out = run(&[
        "analyze",
        "--format",
        "json",
        trace.to_str().unwrap(),
        dmon.to_str().unwrap(),
        "--utc-offset",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not overlap"));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let worst = findings(&doc["traces"][0], "idle_gaps")[0]["instances"][0]["what"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!worst.contains("nvidia-smi"), "{worst}");
}

#[test]
fn nvidia_smi_logs_on_their_own() {
    let (Some(dmon), Some(xml)) = (
        shared_file("dmon/h200_dmon_s_pucvmet_o_DT.log"),
        shared_file("smi-xml/h200_nvidia_smi_q.xml"),
    ) else {
        return;
    };
    let doc = analyze_json(&dmon, &[xml.to_str().unwrap()]);
    assert_eq!(doc["format"], "dmon");
    assert_eq!(doc["summary"]["bound"], "underutilised");
    let low = findings(&doc, "low_sm_utilization");
    assert_eq!(low[0]["severity"], "high");
    // Python: SM % over the 63 active samples (first to last non-zero) averages about 6%.
    assert!(
        (metric(low[0], "mean_sm_pct") - 6.4).abs() < 0.5,
        "{}",
        low[0]["metrics"]
    );
    let power = findings(&doc, "power_headroom");
    assert_eq!(
        metric(power[0], "limit_w"),
        700.0,
        "the limit comes from the -q -x snapshot"
    );

    // The T4 snapshot was taken in P0 with an x8 link on an x16 card: reported. The A10G
    // has the same x8 link but idles in P8, where links train down to save power: quiet.
    let Some(t4) = shared_file("smi-xml/telegraf_tesla_t4_3a4e962c.xml") else {
        return;
    };
    let doc = analyze_json(&t4, &[]);
    let pcie = findings(&doc, "pcie_link");
    assert_eq!(pcie.len(), 1);
    assert!(pcie[0]["title"].as_str().unwrap().contains("x8/16"));
    let Some(a10g) = shared_file("smi-xml/telegraf_a10g.xml") else {
        return;
    };
    assert!(findings(&analyze_json(&a10g, &[]), "pcie_link").is_empty());
    assert_eq!(doc["summary"]["bound"], "snapshot");
}

#[test]
fn info_describes_each_source() {
    let Some(nsys) = shared_file("nsys/weatherbench2_rtx4060_nsys2025.5_no_kernels.sqlite") else {
        return;
    };
    let out = run(&["info", nsys.to_str().unwrap()]);
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(
        s.contains("format: Nsight Systems SQLite export, Nsight Systems 2025.5.1.121"),
        "{s}"
    );
    assert!(
        s.contains("note: no CUPTI_ACTIVITY_KIND_KERNEL table"),
        "{s}"
    );
    let Some(dmon) = shared_file("dmon/h200_dmon_default.log") else {
        return;
    };
    let out = run(&["info", dmon.to_str().unwrap()]);
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(
        s.contains("counter series: 11 on 1 GPU(s), 74 samples each"),
        "{s}"
    );
    assert!(s.contains("cannot be aligned"), "{s}");
}

#[test]
fn bad_logs_get_clear_messages() {
    let d = tmpdir("bad-logs");
    let log = tmp(
        &d,
        "dmon_garbage.log",
        b"# gpu    sm   mem\n# Idx     %     %\n    0    10     5\nGPU 0: Xid 79 fallen off the bus\n    0    20     5\n",
    );
    let out = run(&["analyze", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("dmon_garbage.log") && err.contains("line 4"),
        "{err}"
    );

    let header_only = tmp(
        &d,
        "dmon_empty.log",
        b"# gpu    sm   mem\n# Idx     %     %\n",
    );
    let out = run(&["analyze", header_only.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no sample lines"));

    let xml = tmp(
        &d,
        "pom.xml",
        b"<?xml version=\"1.0\"?><project><modelVersion>4.0.0</modelVersion></project>",
    );
    let out = run(&["analyze", xml.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pom.xml") && err.contains("nvidia_smi_log"),
        "{err}"
    );
}

#[test]
fn summary_csv_matches_nsys_stats_layout() {
    let Some(nsys) = shared_file("nsys/h200_resnet_unpinned_sync.sqlite") else {
        return;
    };
    let out = run(&["summary", "--csv", nsys.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let s = String::from_utf8(out.stdout).unwrap();
    let reference = std::fs::read_to_string(
        nsys.parent()
            .unwrap()
            .join("../reference/h200_resnet_unpinned_sync.stats_cuda_gpu_kern_sum.csv"),
    )
    .unwrap();
    // Same header and the same first (largest) row, byte for byte.
    let ours: Vec<&str> = s.lines().take(2).collect();
    let theirs: Vec<&str> = reference.lines().take(2).collect();
    assert_eq!(ours, theirs);
}

#[test]
fn info_as_json_says_what_the_text_says() {
    for p in [
        common::own("h200_resnet_unpinned_sync.pt.trace.json.gz"),
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("sample-traces/field/rocm/rpd_ROCm-rocmProfileData_matmul_result.rpd"),
    ] {
        let path = p.to_str().expect("UTF-8 path");
        let text = common::success(&common::run(&["info", path]));
        let doc: serde_json::Value = serde_json::from_str(&common::success(&common::run(&[
            "info", "--format", "json", path,
        ])))
        .expect("JSON");
        let f = &doc["files"][0];
        assert_eq!(f["source"], path);
        let ops = &f["gpu_ops"];
        let line = format!(
            "GPU ops: {} kernels, {} memcpys",
            ops["kernels"], ops["memcpys"]
        );
        assert!(text.contains(&line), "{line}\n{text}");
        assert!(
            text.contains(&format!(
                "{} runtime calls",
                f["host_spans"]["runtime_calls"]
            )),
            "{text}"
        );
        // The format's name in the text, its id in the JSON; what the capture recorded.
        assert!(
            f["format"].is_string() && f["meta"]["capture"]["kernels"] == true,
            "{f}"
        );
        assert!(f["stats"]["events_total"].as_u64().is_some_and(|n| n > 0));
    }
}
