//! The binary as a user meets it: tables, formats, exit codes, bad input.

mod common;
use common::*;
use std::io::Write;

/// Writes `bytes` to the file `name` in the test's own directory.
fn tmp(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
    p
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn table_output_reads_well() {
    let p = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let out = run(&["analyze", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("SEVERITY"), "{s}");
    assert!(
        s.contains("idle_gaps") && s.contains("pageable_memcpy"),
        "{s}"
    );
    assert!(
        s.contains("10 host-to-device copies from pageable memory"),
        "{s}"
    );
    assert!(s.contains("GPU 0 NVIDIA H200"), "{s}");
    assert!(s.contains("verdict:"), "{s}");
    assert!(s.contains("top kernel:"), "{s}");
}

#[test]
fn markdown_and_json_formats() {
    let p = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let out = run(&["analyze", "--format", "md", p.to_str().unwrap()]);
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.starts_with("# tracehound:"), "{s}");
    assert!(s.contains("| # | Severity | Rule |"), "{s}");
    assert!(s.contains("**Fix:**"), "{s}");
}

#[test]
fn output_is_deterministic() {
    let p = own("h200_resnet_pinned_amp_clean.pt.trace.json.gz");
    let a = run(&["analyze", "--format", "json", p.to_str().unwrap()]).stdout;
    let b = run(&["analyze", "--format", "json", p.to_str().unwrap()]).stdout;
    assert_eq!(a, b);
    let a = run(&["analyze", p.to_str().unwrap()]).stdout;
    let b = run(&["analyze", p.to_str().unwrap()]).stdout;
    assert_eq!(a, b);
}

#[test]
fn fail_on_sets_exit_code() {
    let p = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    assert_eq!(
        run(&["analyze", "--fail-on", "high", p.to_str().unwrap()])
            .status
            .code(),
        Some(1)
    );
    let clean = own("h200_gpt_train_gpu_bound_clean.pt.trace.json.gz");
    assert_eq!(
        run(&["analyze", "--fail-on", "high", clean.to_str().unwrap()])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        run(&["analyze", "--fail-on", "bogus", clean.to_str().unwrap()])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn bad_input_exits_2_with_a_named_error() {
    let missing = run(&["analyze", "/nonexistent/trace.json"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("/nonexistent/trace.json"),
        "{}",
        stderr(&missing)
    );

    let d = tmpdir("bad-input");
    let empty = tmp(&d, "empty.json", b"");
    let o = run(&["analyze", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("empty.json") && stderr(&o).contains("empty"),
        "{}",
        stderr(&o)
    );

    let text = tmp(&d, "notes.txt", b"hello, this is not a trace\n");
    let o = run(&["analyze", text.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a trace"), "{}", stderr(&o));

    let json = tmp(&d, "config.json", br#"{"lr": 0.1}"#);
    let o = run(&["info", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("traceEvents"), "{}", stderr(&o));

    let gz = tmp(
        &d,
        "corrupt.json.gz",
        &[
            0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3,
        ],
    );
    let o = run(&["analyze", gz.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("corrupt.json.gz") && stderr(&o).contains("gzip"),
        "{}",
        stderr(&o)
    );

    let o = run(&["analyze"]);
    assert_eq!(o.status.code(), Some(2), "usage error");
    assert!(!stderr(&missing).contains("panicked"));
}

#[test]
fn the_developer_tools_are_not_in_the_users_binary() {
    // They live in `tracehound-dev` (xtask/): here they are unknown subcommands.
    for cmd in ["dev-scale", "dev-tui-bench"] {
        let o = run(&[cmd, "in.json", "out.json"]);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        assert!(
            stderr(&o).contains("unrecognized subcommand"),
            "{cmd}: {}",
            stderr(&o)
        );
    }
    let help = success(&run(&["--help"]));
    assert!(!help.contains("dev-"), "{help}");
}

#[test]
fn truncated_trace_is_analysed_with_a_warning() {
    let full = std::fs::read(own("kineto_docs_h100_before_fix.json")).unwrap();
    let cut = &full[..full.len() * 6 / 10];
    let d = tmpdir("truncated");
    let p = tmp(&d, "killed_mid_write.json", cut);
    let o = run(&["analyze", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("incomplete capture"), "{}", stderr(&o));
    let info = run(&["info", p.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&info.stdout).contains("TRUNCATED"));

    // A gzip stream cut in the middle: decompressed as far as it goes.
    let gz = std::fs::read(own("h200_resnet_unpinned_sync.pt.trace.json.gz")).unwrap();
    let p = tmp(&d, "cut.json.gz", &gz[..gz.len() / 2]);
    let o = run(&["analyze", "--format", "json", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("gzip stream stops without its end marker"),
        "{}",
        stderr(&o)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["traces"][0]["truncated"], true);
    assert!(doc["traces"][0]["events"].as_u64().unwrap() > 1000);
}

#[test]
fn input_file_is_never_modified() {
    let p = own("hta_alexnet_a100_pageable_memcpy.json.gz");
    let before = std::fs::read(&p).unwrap();
    let meta = std::fs::metadata(&p).unwrap().modified().unwrap();
    assert_eq!(
        run(&["analyze", p.to_str().unwrap()]).status.code(),
        Some(0)
    );
    assert_eq!(run(&["info", p.to_str().unwrap()]).status.code(), Some(0));
    assert_eq!(std::fs::read(&p).unwrap(), before);
    assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), meta);
}

#[test]
fn info_reports_what_was_loaded() {
    let p = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let o = run(&["info", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let s = String::from_utf8(o.stdout).unwrap();
    // Python: 1915 kernels, 15 memcpys (10 pageable), 110 memsets, 4562 runtime calls.
    assert!(
        s.contains("1915 kernels, 15 memcpys (10 pageable), 110 memsets"),
        "{s}"
    );
    assert!(s.contains("4562 runtime calls"), "{s}");
    assert!(s.contains("steps: 5 (ProfilerStep#0..#4)"), "{s}");
}

#[test]
fn every_shared_kineto_trace_analyses() {
    let dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../shared/sample-traces/kineto");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipping: ../shared is absent");
        return;
    };
    let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    let args: Vec<&str> = std::iter::once("analyze")
        .chain(["--format", "json"])
        .chain(files.iter().map(|p| p.to_str().unwrap()))
        .collect();
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["traces"].as_array().unwrap().len(), files.len());
}

#[test]
fn window_flag_limits_the_analysis() {
    let p = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let doc = analyze_json(&p, &["--window", "100", "200"]);
    let w = &doc["summary"]["window"];
    assert_eq!(w["source"]["kind"], "user");
    assert_eq!(
        w["end"].as_i64().unwrap() - w["start"].as_i64().unwrap(),
        100_000_000
    );
    let full = analyze_json(&p, &[]);
    assert!(
        doc["summary"]["devices"][0]["kernels"].as_u64().unwrap()
            < full["summary"]["devices"][0]["kernels"].as_u64().unwrap()
    );
    let bad = run(&["analyze", "--window", "200", "100", p.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn absurd_timestamps_and_negative_durations_are_repaired_with_warnings() {
    // A kernel stamped near the i64 limit with a negative duration, beside two ordinary ones:
    // without the repair the window read "9223372036.85 s" and nothing was said.
    let tmp = tmpdir("absurd");
    let dir = tmp.path();
    let p = dir.join("absurd.json");
    std::fs::write(
        &p,
        r#"{"traceEvents":[
{"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":9223372036854775,"dur":-5,"args":{"device":0,"stream":7,"correlation":1}},
{"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":100,"dur":10,"args":{"device":0,"stream":7,"correlation":2}},
{"ph":"X","cat":"kernel","name":"k3","pid":0,"tid":7,"ts":200,"dur":10,"args":{"device":0,"stream":7,"correlation":3}}
]}"#,
    )
    .unwrap();
    let out = run(&["analyze", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 events have negative durations"), "{err}");
    assert!(err.contains("1 events lie more than"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("window 110 µs"), "{text}");
}

#[test]
fn a_fifo_is_refused_at_once_not_read_forever() {
    let tmp = tmpdir("fifo");
    let dir = tmp.path();
    let fifo = dir.join("trace.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipping: mkfifo is not available");
        return;
    }
    let out = run(&["analyze", fifo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a regular file"), "{err}");
}

#[test]
fn a_file_too_large_for_the_memory_limit_is_refused_before_it_is_read() {
    // A sparse 100 GiB "trace": the estimate (0.3 of the JSON) is about 30 GiB, over a
    // 16 GiB limit, so it is refused at once, before a byte of it is parsed.
    let tmp = tmpdir("huge");
    let dir = tmp.path();
    let huge = dir.join("huge.json");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&huge).unwrap();
        f.write_all(b"{\"traceEvents\":[").unwrap();
        f.set_len(100 << 30).unwrap();
    }
    let start = std::time::Instant::now();
    let out = run(&["analyze", "--max-memory", "16G", huge.to_str().unwrap()]);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("huge.json: too large for the memory available"),
        "{err}"
    );
    assert!(
        err.contains("100.0 GiB of JSON") && err.contains("16.0 GiB"),
        "{err}"
    );
    assert!(err.contains("--max-memory"), "{err}");
    assert!(took.as_secs() < 10, "refused without reading: {took:?}");

    // The same limit lets a real trace through; a tiny limit refuses it; 0 turns it off.
    let t = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let t = t.to_str().unwrap();
    assert_eq!(
        run(&["analyze", "--max-memory", "16G", t]).status.code(),
        Some(0)
    );
    let tiny = run(&["analyze", "--max-memory", "1M", t]);
    assert_eq!(tiny.status.code(), Some(2));
    // The gzip trailer says 15.6 MB of JSON inside the 0.9 MB file.
    let err = String::from_utf8_lossy(&tiny.stderr);
    assert!(err.contains("of JSON"), "{err}");
    assert_eq!(
        run(&["analyze", "--max-memory", "0", t]).status.code(),
        Some(0)
    );
    let bad = run(&["analyze", "--max-memory", "lots", t]);
    assert_eq!(bad.status.code(), Some(2));
}

/// A Kineto trace of `events` (kernel objects as JSON text) on an H100.
fn kineto_with(events: &[String]) -> String {
    format!(
        r#"{{"schemaVersion":1,"deviceProperties":[{{"id":0,"name":"NVIDIA H100","computeMajor":9,"computeMinor":0,"numSms":132,"totalGlobalMem":85899345920}}],"traceEvents":[{}]}}"#,
        events.join(",")
    )
}

fn kernel(name: &str, ts: u64, dur: &str, stream: u64, corr: u64) -> String {
    format!(
        r#"{{"ph":"X","cat":"kernel","name":"{name}","pid":0,"tid":{stream},"ts":{ts},"dur":{dur},"args":{{"device":0,"stream":{stream},"correlation":{corr},"grid":[1,1,1],"block":[32,1,1]}}}}"#
    )
}

#[test]
fn absurd_values_are_repaired_with_a_warning_or_refused_never_a_crash_or_an_absurd_window() {
    let tmp = tmpdir("values");
    let dir = tmp.path();
    let ordinary: Vec<String> = (0..100)
        .map(|i| kernel("k", 1000 + i * 100, "50", 7, i + 1))
        .collect();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let analyze = |p: &std::path::Path| {
        let out = run(&["analyze", p.to_str().unwrap()]);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // A duration of 11.6 days beside 10 ms of work: before, the window read 1000000 s.
    let mut ev = ordinary.clone();
    ev.push(kernel("huge", 2000, "1e12", 7, 999));
    let (code, out, err) = analyze(&write("longdur.json", &kineto_with(&ev)));
    assert_eq!(code, Some(0));
    assert!(err.contains("1 events last longer than the trace"), "{err}");
    assert!(out.contains("window 9.9 ms"), "{out}");
    // A duration that is no number: zero length, said.
    let mut ev = ordinary.clone();
    ev.push(kernel("inf", 5000, "1e400", 7, 998));
    let (code, _, err) = analyze(&write("inf.json", &kineto_with(&ev)));
    assert_eq!(code, Some(0));
    assert!(
        err.contains("1 events have a duration that is no readable number"),
        "{err}"
    );
    // NaN is not JSON: refused with line and column.
    let mut ev = ordinary.clone();
    ev.push(kernel("nan", 5000, "NaN", 7, 997));
    let (code, _, err) = analyze(&write("nan.json", &kineto_with(&ev)));
    assert_eq!(code, Some(2));
    assert!(err.contains("nan.json: invalid JSON at line 1"), "{err}");
    // A 10-million-character kernel name: analysed, the name shortened in the table.
    let mut ev = ordinary.clone();
    ev.push(kernel(&"n".repeat(10_000_000), 3000, "10", 7, 996));
    let (code, out, _) = analyze(&write("longname.json", &kineto_with(&ev)));
    assert_eq!(code, Some(0));
    assert!(
        out.lines().all(|l| l.chars().count() < 1000),
        "table lines stay short"
    );
    // 200,000 levels of nested arrays in an event: no stack overflow.
    let deep = format!(
        r#"{{"traceEvents":[{},{{"ph":"X","cat":"kernel","name":"d","pid":0,"tid":7,"ts":1,"dur":1,"deep":{}{}}}]}}"#,
        kernel("k", 10, "5", 7, 1),
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let (code, _, err) = analyze(&write("nested.json", &deep));
    assert!(code == Some(0) || code == Some(2), "{code:?} {err}");
    // 100,000 streams: a kernel on each.
    let ev: Vec<String> = (0..100_000)
        .map(|i| kernel("s", 1000 + i, "1", i, i + 1))
        .collect();
    let (code, out, _) = analyze(&write("streams.json", &kineto_with(&ev)));
    assert_eq!(code, Some(0));
    assert!(out.contains("100000 kernels"), "{out}");
    // Events out of order give the same analysis as in order.
    let mut shuffled = ordinary.clone();
    shuffled.reverse();
    shuffled.swap(3, 70);
    let a = run(&[
        "analyze",
        "--format",
        "json",
        write("a.json", &kineto_with(&ordinary)).to_str().unwrap(),
    ]);
    let b = run(&[
        "analyze",
        "--format",
        "json",
        write("b.json", &kineto_with(&shuffled)).to_str().unwrap(),
    ]);
    let strip =
        |o: &std::process::Output| String::from_utf8_lossy(&o.stdout).replace("b.json", "a.json");
    assert_eq!(strip(&a), strip(&b));
}

#[test]
fn a_gzipped_nsys_export_reads_as_its_database() {
    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR at run time"),
    );
    let gz = root.join("sample-traces/kineto-jobs/h200_ddp_straggler_nsys/rank0.sqlite.gz");
    let dir = common::tmpdir("sqlite-gz");
    let plain = dir.path().join("rank0.sqlite");
    let mut dec = flate2::read::GzDecoder::new(std::fs::File::open(&gz).expect("sample"));
    let mut f = std::fs::File::create(&plain).expect("temporary file");
    std::io::copy(&mut dec, &mut f).expect("inflate");
    let before = std::fs::read(&gz).expect("sample");
    let a = common::analyze_json(&gz, &[]);
    let b = common::analyze_json(&plain, &[]);
    assert_eq!(
        std::fs::read(&gz).expect("sample"),
        before,
        "the user's file is untouched"
    );
    // The same database, read in place or inflated into a temporary file: the same analysis.
    assert_eq!(a["findings"], b["findings"]);
    assert_eq!(a["summary"], b["summary"]);
    assert_eq!(a["format"], "nsys");
    assert!(
        a["findings"].as_array().is_some_and(|f| !f.is_empty()),
        "the straggler rank's export has findings"
    );
    assert!(
        a["source"]
            .as_str()
            .is_some_and(|s| s.ends_with("rank0.sqlite.gz")),
        "{}",
        a["source"]
    );
    // No temporary database is left behind: the binary, given a temporary directory of this
    // test's own, leaves it as empty as it found it.
    let scratch = common::tmpdir("sqlite-gz-scratch");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tracehound"))
        .args(["analyze", gz.to_str().unwrap()])
        .env("TMPDIR", scratch.path())
        .output()
        .expect("the tracehound binary runs");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let left: Vec<_> = std::fs::read_dir(scratch.path())
        .expect("the scratch directory")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
