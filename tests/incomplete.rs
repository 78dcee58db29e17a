//! Files cut short (a job killed while writing, a copy taken too early), as a user meets
//! them in every command: the share of the file read is said, the verdict says the capture
//! is incomplete instead of judging the part that is missing, and a gate (`--fail-on`,
//! `--fail-on-regression`, JUnit) fails on it with exit code 3. A cut SQLite export cannot be
//! read in part: it is refused (exit 2), saying how much of the database the file holds.

mod common;
use common::*;
use std::path::{Path, PathBuf};

const TRACE: &str = "h200_resnet_unpinned_sync.pt.trace.json.gz";

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The decompressed text of the shipped trace.
fn plain_text() -> Vec<u8> {
    let mut out = Vec::new();
    let gz = std::fs::File::open(own(TRACE)).expect("the shipped trace");
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut out).expect("gunzip");
    out
}

/// The first `pct` percent of `bytes`, written to `name` in `dir`.
fn cut(dir: &Path, name: &str, bytes: &[u8], pct: usize) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, &bytes[..bytes.len() * pct / 100]).expect("writing the cut copy");
    p
}

/// `analyze --format json` of a file, with its exit code and stderr.
fn analyze(path: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let mut args = vec!["analyze", "--format", "json", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = run(&args);
    let doc = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o.status.code(), doc, stderr(&o))
}

#[test]
fn a_cut_kineto_trace_says_what_was_read_and_fails_every_gate() {
    let tmp = tmpdir("incomplete-kineto");
    let dir = tmp.path();
    let text = plain_text();
    let gz = std::fs::read(own(TRACE)).expect("the shipped trace");
    // Events in the whole trace, counted by serde_json: a cut file reads fewer.
    let whole: serde_json::Value = serde_json::from_slice(&text).expect("the whole trace");
    let all_events = whole["traceEvents"].as_array().expect("traceEvents").len() as u64;
    let whole_doc = analyze_json(&own(TRACE), &[]);
    let whole_pageable = findings(&whole_doc, "pageable_memcpy");
    for pct in [10, 30, 90] {
        for (name, bytes, compressed) in [
            (format!("cut{pct}.pt.trace.json"), &text, false),
            (format!("cut{pct}.pt.trace.json.gz"), &gz, true),
        ] {
            let p = cut(dir, &name, bytes, pct);
            let size = std::fs::metadata(&p).unwrap().len();
            let what = name.clone();
            // Without a gate: read as far as it goes, exit 0, said on stderr and in JSON.
            let (code, doc, err) = analyze(&p, &[]);
            assert_eq!(code, Some(0), "{what}: {err}");
            assert!(
                err.contains(&format!("{name}: incomplete capture:")),
                "{what}: {err}"
            );
            let t = &doc["traces"][0];
            assert_eq!(t["truncated"], true, "{what}");
            let i = &t["incomplete"];
            assert_eq!(i["compressed"], compressed, "{what}");
            assert_eq!(i["file_bytes"].as_u64(), Some(size), "{what}: {i}");
            assert_eq!(i["file_bytes_read"].as_u64(), Some(size), "{what}: {i}");
            let events = i["events_read"].as_u64().expect("events_read");
            assert!(
                events > 0 && events < all_events,
                "{what}: {events} of {all_events}"
            );
            let complete = i["text_bytes_complete"].as_u64().expect("text bytes") as usize;
            // The last whole event ends with its closing brace, inside the cut text.
            assert_eq!(text[complete - 1], b'}', "{what}: byte {complete}");
            // In a plain file, inside the cut; in a gzip file, inside what it inflates to.
            let limit = if compressed {
                text.len()
            } else {
                size as usize
            };
            assert!(complete <= limit, "{what}: {complete} > {limit}");
            // The verdict draws nothing from the missing part.
            let s = &t["summary"];
            assert_eq!(s["bound"], "incomplete capture", "{what}");
            assert!(
                s["verdict"]
                    .as_str()
                    .unwrap()
                    .contains("No verdict is drawn on what bounds the run"),
                "{what}: {}",
                s["verdict"]
            );
            // Gaps could be records the cut took: no idle finding; what the records show
            // stands, never more than in the whole trace.
            assert!(findings(t, "idle_gaps").is_empty(), "{what}");
            assert!(findings(t, "pageable_memcpy").len() <= whole_pageable.len());
            // Every gate fails on it, with its own code.
            let (code, _, _) = analyze(&p, &["--fail-on", "high"]);
            assert_eq!(code, Some(3), "{what}: analyze --fail-on");
            let xml = dir.join(format!("{name}.xml"));
            let o = run(&[
                "report",
                p.to_str().unwrap(),
                "-o",
                xml.to_str().unwrap(),
                "--fail-on",
                "high",
            ]);
            assert_eq!(o.status.code(), Some(3), "{what}: report: {}", stderr(&o));
            let junit = std::fs::read_to_string(&xml).unwrap();
            assert!(
                junit.contains("<testcase classname=\"tracehound\" name=\"capture_complete\">")
                    && junit.contains("<failure type=\"incomplete capture\""),
                "{what}: {junit}"
            );
            let o = run(&[
                "diff",
                own(TRACE).to_str().unwrap(),
                p.to_str().unwrap(),
                "--fail-on-regression",
                "1000",
            ]);
            assert_eq!(o.status.code(), Some(3), "{what}: diff: {}", stderr(&o));
            assert!(
                stderr(&o).contains("incomplete capture"),
                "{what}: {}",
                stderr(&o)
            );
            // The commands without a gate say it too.
            for cmd in ["summary", "info"] {
                let o = run(&[cmd, p.to_str().unwrap()]);
                assert_eq!(o.status.code(), Some(0), "{what}: {cmd}");
                assert!(
                    stderr(&o).contains(&format!("{name}: incomplete capture:")),
                    "{what}: {cmd}: {}",
                    stderr(&o)
                );
            }
        }
    }
}

#[test]
fn a_whole_trace_passes_the_gates_it_passed_before() {
    // The shipped trace's findings are all below high: --fail-on high passes (exit 0), and
    // its JUnit report's capture_complete case passes.
    let tmp = tmpdir("incomplete-whole");
    let (code, doc, err) = analyze(&own(TRACE), &["--fail-on", "high"]);
    let high = doc["traces"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["severity"] == "high");
    assert_eq!(code, Some(if high { 1 } else { 0 }), "{err}");
    assert!(doc["traces"][0].get("incomplete").is_none());
    let xml = tmp.path().join("whole.xml");
    run(&[
        "report",
        own(TRACE).to_str().unwrap(),
        "-o",
        xml.to_str().unwrap(),
    ]);
    let junit = std::fs::read_to_string(&xml).unwrap();
    assert!(
        junit.contains("<testcase classname=\"tracehound\" name=\"capture_complete\"/>"),
        "{junit}"
    );
}

#[test]
fn a_cut_nsys_export_is_refused_with_the_share_it_holds() {
    let src = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR at run time"),
    )
    .join("sample-traces/nsys/h200_lazy_loading_cuda.sqlite");
    let db = std::fs::read(&src).expect("the shipped export");
    let tmp = tmpdir("incomplete-nsys");
    let dir = tmp.path();
    for pct in [10, 30, 90] {
        let p = cut(dir, &format!("cut{pct}.sqlite"), &db, pct);
        let held = std::fs::metadata(&p).unwrap().len();
        for cmd in [
            vec!["analyze", "--fail-on", "low"],
            vec!["summary"],
            vec!["info"],
        ] {
            let mut args = cmd.clone();
            args.push(p.to_str().unwrap());
            let o = run(&args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{cmd:?} {pct}%: {err}");
            assert!(
                err.contains(&format!(
                    "incomplete capture: the SQLite database is cut short: the file holds {held} of the {} bytes its header declares",
                    db.len()
                )),
                "{cmd:?} {pct}%: {err}"
            );
        }
        // Gzipped, then cut: the share of the database it inflates to.
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut enc, &db).unwrap();
        let gz = enc.finish().unwrap();
        let p = cut(dir, &format!("cut{pct}.sqlite.gz"), &gz, pct);
        let o = run(&["analyze", p.to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "gz {pct}%: {err}");
        assert!(
            err.contains("incomplete capture: the gzip stream stops without its end marker")
                && err.contains(&format!("of the {} its header declares", db.len())),
            "gz {pct}%: {err}"
        );
    }
}

#[test]
fn a_directory_of_unrelated_traces_is_refused_unless_forced() {
    // Two shipped traces of different programs, neither recording a rank, one on an H200 and
    // one on an H100: nothing says they are one job's ranks.
    let tmp = tmpdir("not-one-job");
    let dir = tmp.path();
    for name in [
        "h200_matmul_clean.pt.trace.json.gz",
        "kineto_docs_h100_before_fix.json",
    ] {
        std::fs::copy(own(name), dir.join(name)).unwrap();
    }
    let o = run(&["analyze", dir.to_str().unwrap(), "--fail-on", "low"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.is_empty(), "no job report");
    assert!(
        err.contains("record no rank and ran on different GPU models")
            && err.contains("h200_matmul_clean.pt.trace.json.gz")
            && err.contains("kineto_docs_h100_before_fix.json"),
        "{err}"
    );
    let o = run(&["analyze", dir.to_str().unwrap(), "--force-job"]);
    let out = success(&o);
    assert!(
        out.contains("not one job: traces compared as ranks with --force-job")
            && out.contains("(2 ranks)"),
        "{out}"
    );
    assert!(stderr(&o).contains("compared as ranks all the same (--force-job)"));
}
