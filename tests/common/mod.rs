//! Helpers shared by the integration tests: run the real binary, find sample traces.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The project's own sample traces (always present).
pub fn own(name: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("sample-traces/kineto")
    .join(name)
}

/// A trace of the shared developer set, or None (with a message) when `../shared` is absent.
pub fn shared(name: &str) -> Option<PathBuf> {
    shared_at(&format!("kineto/{name}"))
}

/// A file under `../shared/sample-traces/` (`field/nsys/…`), or None (with a message) when
/// `../shared` is absent.
pub fn shared_at(rel: &str) -> Option<PathBuf> {
    let p = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../shared/sample-traces")
    .join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipping: {} is absent (../shared is not next to this clone)",
            p.display()
        );
        None
    }
}

/// A fresh, empty directory of one test's own, created for it under the system's temporary
/// directory with a name no other test or process has, and removed with all it holds when
/// dropped: a test writes only there and removes only what it made.
pub fn tmpdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tracehound-{name}-"))
        .tempdir()
        .expect("a temporary directory")
}

/// The standard output of a run that must succeed (exit code 0; else fails with its stderr).
pub fn success(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("UTF-8 output")
}

/// Runs `tracehound ARGS...`.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tracehound"))
        .args(args)
        .output()
        .expect("the tracehound binary runs")
}

/// Options of the benchmark generator (`tracehound-dev scale`): `size_mb` MB of JSON per file,
/// `ranks` files (1: one trace), plain JSON, every rank alike.
pub fn scale_options(size_mb: f64, ranks: u32) -> tracehound::scale::ScaleOptions {
    tracehound::scale::ScaleOptions {
        target_bytes: (size_mb * 1e6) as u64,
        gzip: false,
        ranks,
        slow_rank: None,
        late_rank: None,
    }
}

/// Generates a scaled trace or a job directory at `output` from `input`, in process with the
/// code of `tracehound-dev scale` (the developer tool is another package: its binary is not
/// built for these tests).
pub fn scale(input: &Path, output: &Path, opts: &tracehound::scale::ScaleOptions) {
    tracehound::scale::run(input, output, opts).expect("the scale generator writes its output");
}

/// Runs `tracehound analyze --format json FILE` and returns the first trace's document.
pub fn analyze_json(path: &Path, extra: &[&str]) -> serde_json::Value {
    let p = path.to_str().unwrap();
    let mut args = vec!["analyze", "--format", "json", p];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.code() == Some(0),
        "analyze {p} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(doc["schema_version"], 1);
    doc["traces"][0].clone()
}

/// The findings of a rule.
pub fn findings<'a>(doc: &'a serde_json::Value, rule: &str) -> Vec<&'a serde_json::Value> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == rule)
        .collect()
}

/// A metric of a finding.
pub fn metric(f: &serde_json::Value, key: &str) -> f64 {
    f["metrics"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("metric {key} in {f}"))
}
