//! Properties that must hold on every trace we ship: busy plus idle time is the analysed
//! window, no impact exceeds the window, the measured causes of the idle time add up to it,
//! and the output is the same byte for byte across runs and thread counts.

mod common;
use common::*;
use std::path::PathBuf;
use std::process::Command;

fn samples() -> Vec<PathBuf> {
    let dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("sample-traces/kineto");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn accounting_adds_up_on_every_sample() {
    for p in samples() {
        let doc = analyze_json(&p, &[]);
        let w = &doc["summary"]["window"];
        let window = (w["end"].as_i64().unwrap() - w["start"].as_i64().unwrap()).max(1) as f64;
        for f in doc["findings"].as_array().unwrap() {
            let share = f["impact_share"].as_f64().unwrap();
            assert!(
                (0.0..=1.0 + 1e-9).contains(&share),
                "{}: {} impact share {share}",
                p.display(),
                f["rule"]
            );
            assert!(f["impact_ns"].as_f64().unwrap() <= window + 1.0);
        }
        for f in findings(&doc, "idle_gaps") {
            // busy + idle = window.
            let busy = metric(f, "busy_share");
            let idle = metric(f, "idle_share");
            assert!((busy + idle - 1.0).abs() < 1e-9, "{}", p.display());
            // The cause rows divide the finding's time: their shares never exceed the whole,
            // and with every row shown (under the row limit) they add up to it.
            let rows = f["breakdown"].as_array().unwrap();
            let shares: f64 = rows.iter().map(|r| r["share"].as_f64().unwrap()).sum();
            assert!(shares <= 1.0 + 1e-6, "{}: {shares}", p.display());
            if rows.len() < 6 {
                assert!((shares - 1.0).abs() < 1e-6, "{}: {shares}", p.display());
            }
        }
    }
}

#[test]
fn output_is_identical_across_runs_and_thread_counts() {
    for p in samples() {
        let run_with = |threads: Option<&str>| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_tracehound"));
            c.args(["analyze", "--format", "json", p.to_str().unwrap()]);
            if let Some(n) = threads {
                c.env("RAYON_NUM_THREADS", n);
            }
            c.output().unwrap().stdout
        };
        let a = run_with(None);
        assert_eq!(a, run_with(None), "{}: two runs differ", p.display());
        assert_eq!(
            a,
            run_with(Some("1")),
            "{}: one thread differs from the default",
            p.display()
        );
    }
}
