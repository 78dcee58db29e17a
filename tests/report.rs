//! `tracehound report` (Markdown, JSON, HTML, JUnit; written atomically) and `tracehound diff`
//! on real traces. The HTML report is rendered in headless Chromium when it is installed
//! (`.ci/run` installs it): the charts are there, the page logs no console errors, and a
//! screenshot comes out.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn report(args: &[&str]) -> (i32, String) {
    let out = run(&[&["report"], args].concat());
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const UNPINNED: &str = "h200_resnet_unpinned_sync.pt.trace.json.gz";
const PINNED: &str = "h200_resnet_pinned_amp_clean.pt.trace.json.gz";

#[test]
fn every_format_from_the_extension_with_stable_ids() {
    let tmp = tmpdir("report-formats");
    let d = tmp.path();
    let trace = own(UNPINNED);
    let t = trace.to_str().unwrap();
    for ext in ["md", "json", "html", "xml"] {
        let out = d.join(format!("review.{ext}"));
        let (code, err) = report(&[t, "-o", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(out.metadata().unwrap().len() > 1000, "{ext}");
    }
    // Nothing left behind but the four reports (the temporary files were renamed).
    let mut names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["review.html", "review.json", "review.md", "review.xml"]
    );
    // Stable ids: the same in two runs, and named after rule, device and subject.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("review.json")).unwrap()).unwrap();
    let ids: Vec<&str> = json["traces"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "idle_gaps/gpu0",
            // The NCHW convolutions' transforms and the NCHW BatchNorm beside them: one fix,
            // one finding.
            "hot_operator/gpu0/nchw convolutions at gen.py(157): step",
            "roofline/gpu0",
            "pageable_memcpy/gpu0/htod",
            "launch_bound/gpu0",
            "underfilled_kernels/gpu0"
        ]
    );
    // JUnit: a test case per rule (31); each finding fails its rule's case.
    let xml = std::fs::read_to_string(d.join("review.xml")).unwrap();
    assert!(xml.contains("<testsuites name=\"tracehound\""), "{xml}");
    let rules = run(&["analyze", "--help"]); // the binary runs; every rule is one test case
    assert!(rules.status.success());
    // capture_complete, then one per rule.
    assert_eq!(xml.matches("<testcase ").count(), 32, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), ids.len(), "{xml}");
    assert!(xml.contains("name=\"pageable_memcpy\""));
    // --fail-on high: only the high finding fails, and the exit code says so.
    let strict = d.join("strict.xml");
    let (code, _) = report(&[t, "-o", strict.to_str().unwrap(), "--fail-on", "high"]);
    assert_eq!(code, 1);
    let xml = std::fs::read_to_string(&strict).unwrap();
    assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
}

#[test]
fn an_unknown_extension_asks_for_a_format_and_writes_nothing() {
    let tmp = tmpdir("report-ext");
    let d = tmp.path();
    let out = d.join("review.txt");
    let (code, err) = report(&[own(UNPINNED).to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("--format"), "{err}");
    assert!(!out.exists());
}

#[test]
fn the_html_report_is_self_contained_and_renders() {
    let tmp = tmpdir("report-html");
    let d = tmp.path();
    let html = d.join("review.html");
    let (code, err) = report(&[
        own(UNPINNED).to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    for needle in [
        "aria-label=\"GPU timeline\"",
        "Where the GPU&#39;s idle time went: measured causes",
        "Top kernels by GPU time in the window",
        "memory reserved by the caching allocator",
        "pageable_memcpy/gpu0/htod",
        "name=\"viewport\"",
        "@media print",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
    // The verdict and the ranked findings come first, the charts behind them; the page says
    // how to see the findings on the timeline.
    let findings = page.find("<h2>Findings</h2>").expect("a findings table");
    let first_chart = page.find("<svg").expect("a chart");
    assert!(
        findings < first_chart,
        "findings at {findings}, first chart at {first_chart}"
    );
    assert!(page.find("Verdict:").is_some_and(|v| v < findings));
    assert!(page.contains("-o run.perfetto.json.gz") && page.contains("ui.perfetto.dev"));
    // Every chart's caption is above it.
    let figures: Vec<&str> = page.split("<figure>").skip(1).collect();
    assert!(figures.len() >= 4);
    for f in &figures {
        assert!(f.starts_with("<figcaption>"), "{}", &f[..80.min(f.len())]);
    }
    // The memory chart has a time axis over the window: 0 to its 463.4 ms (the
    // ProfilerStep span), the unit on the last tick.
    let memory = figures
        .iter()
        .find(|f| f.contains("memory reserved by the caching allocator"))
        .expect("a memory chart");
    let ticks: Vec<&str> = memory
        .split("text-anchor=\"")
        .skip(1)
        .filter_map(|t| t.split('>').nth(1)?.split('<').next())
        .collect();
    assert_eq!(ticks.len(), 5, "{ticks:?}");
    assert_eq!(ticks[0], "0.0");
    assert!(ticks[4].ends_with(" ms"), "{ticks:?}");
    let last: f64 = ticks[4].trim_end_matches(" ms").parse().unwrap();
    // The window: the ProfilerStep annotations' span, read from the trace here.
    let (start, end) = step_span_us(&trace_events(&own(UNPINNED)));
    assert!((last - (end - start) / 1e3).abs() < 0.06, "{ticks:?}");
    // Rule names stay whole, and no breakdown table has a column no row fills: the idle
    // breakdown moves no bytes, so it has no Bytes column.
    assert!(page.contains("<code class=\"rule\">idle_gaps</code>"));
    assert!(page.contains("code.rule{word-break:normal;white-space:nowrap}"));
    for table in page.split("<table><tr><th>Breakdown</th>").skip(1) {
        let table = &table[..table.find("</table>").expect("table ends")];
        let header = &table[..table.find("</tr>").expect("header")];
        if header.contains(">Bytes<") {
            assert!(
                table
                    .lines()
                    .skip(1)
                    .any(|r| !r.contains("<td class=\"num\"></td>")),
                "{table}"
            );
        }
        if !header.contains(">Bytes<") && !header.contains("Python frame") {
            // Breakdown (split off above), Count, Time.
            assert_eq!(header.matches("<th").count(), 2, "{header}");
        }
    }
    // Nothing from elsewhere: no scripts, no external styles, fonts or images.
    for banned in ["<script", "<link", "src=\"http", "@import", "url(http"] {
        assert!(!page.contains(banned), "{banned}");
    }
    let Some(chromium) = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
    else {
        eprintln!("skipping the browser check: chromium is not installed (.ci/run installs it)");
        return;
    };
    let shot = d.join("review.png");
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,1600",
            &format!("--screenshot={}", shot.display()),
            &format!("file://{}", html.display()),
        ])
        .output()
        .expect("chromium runs");
    let log = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(
        shot.metadata().map(|m| m.len()).unwrap_or(0) > 20_000,
        "{log}"
    );
}

fn diff(before: &Path, after: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["diff", before.to_str().unwrap(), after.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run(&args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn diff_shows_the_pageable_copies_resolved() {
    let (code, json) = diff(&own(UNPINNED), &own(PINNED), &["--format", "json"]);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let d = &doc["diffs"][0];
    let pageable = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "pageable_memcpy/gpu0/htod")
        .expect("the pageable finding is in the diff");
    assert_eq!(pageable["status"], "resolved");
    // Step time from the step markers: 87.3 ms median before, 19.3 ms after (the captures'
    // ProfilerStep annotations, measured with Python: medians 87.30 and 19.26 ms).
    let step = &d["step_ns"];
    assert!(
        (step["before"].as_f64().unwrap() / 1e6 - 87.3).abs() < 0.1,
        "{step}"
    );
    assert!(
        (step["after"].as_f64().unwrap() / 1e6 - 19.3).abs() < 0.1,
        "{step}"
    );
    // The DataLoader in the main process was the cause of most idle time; it shrinks.
    let loading = d["idle_causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "data loading")
        .unwrap();
    assert!(loading["delta_ns"].as_i64().unwrap() < 0);
    // Text and Markdown say the same, the text with a verdict line first (the medians above:
    // 19.26 / 87.30 - 1 = -77.9%) and signed deltas.
    let (_, text) = diff(&own(UNPINNED), &own(PINNED), &[]);
    assert!(
        text.lines().nth(2).is_some_and(
            |l| l.starts_with("verdict: better: median step 87.3 ms -> 19.3 ms (-77.9%)")
        ),
        "{text}"
    );
    let loading_row = text
        .lines()
        .find(|l| l.trim_start().starts_with("idle: data loading"))
        .expect("a data-loading row");
    assert!(
        loading_row
            .split_whitespace()
            .rev()
            .nth(1)
            .is_some_and(|d| d.starts_with('-')),
        "{loading_row}"
    );
    assert!(
        text.contains("resolved  pageable_memcpy/gpu0/htod"),
        "{text}"
    );
    let (_, md) = diff(&own(UNPINNED), &own(PINNED), &["--format", "md"]);
    assert!(
        md.contains("- **resolved** `pageable_memcpy/gpu0/htod`"),
        "{md}"
    );
}

/// A gzip Kineto trace's events, read here with serde_json.
fn trace_events(path: &Path) -> Vec<serde_json::Value> {
    let text = {
        use std::io::Read;
        let mut s = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
            .read_to_string(&mut s)
            .unwrap();
        s
    };
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    match doc["traceEvents"].take() {
        serde_json::Value::Array(events) => events,
        other => panic!("traceEvents is {other}"),
    }
}

/// The span of a trace's ProfilerStep annotations (among its `events`), µs.
fn step_span_us(events: &[serde_json::Value]) -> (f64, f64) {
    let steps: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("ProfilerStep#"))
        })
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            (ts, ts + e["dur"].as_f64().unwrap())
        })
        .collect();
    (
        steps.iter().map(|s| s.0).fold(f64::MAX, f64::min),
        steps.iter().map(|s| s.1).fold(f64::MIN, f64::max),
    )
}

/// Kernel time per name, ns, read here from a gzip Kineto trace's own kernel events: in the
/// window of its ProfilerStep annotations, or in the whole trace.
fn kernel_totals(path: &Path, window: bool) -> std::collections::BTreeMap<String, i64> {
    let events = trace_events(path);
    let (start, end) = if window {
        step_span_us(&events)
    } else {
        (f64::MIN, f64::MAX)
    };
    let mut m = std::collections::BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == "kernel") {
        let ts = e["ts"].as_f64().unwrap();
        if ts >= start && ts < end {
            *m.entry(e["name"].as_str().unwrap().to_string())
                .or_insert(0) += (e["dur"].as_f64().unwrap() * 1e3).round() as i64;
        }
    }
    m
}

#[test]
fn summary_json_holds_the_kernel_table_of_the_trace() {
    let trace = own(UNPINNED);
    let out = run(&["summary", "--format", "json", trace.to_str().unwrap()]);
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc.as_array().unwrap().len(), 1);
    assert_eq!(doc[0]["scope"], "whole trace");
    let kernels = doc[0]["kernels"].as_array().unwrap();
    let want = kernel_totals(&trace, false);
    assert_eq!(kernels.len(), want.len());
    for k in kernels {
        let name = k["name"].as_str().unwrap();
        // Names as recorded, mangled ones included.
        let total = want.get(name).unwrap_or_else(|| panic!("{name}"));
        assert!((k["total_ns"].as_i64().unwrap() - total).abs() <= 50, "{k}");
    }
    assert!(
        kernels
            .iter()
            .any(|k| k["name"].as_str().unwrap().starts_with("_ZN17cutlass"))
    );
    // The memory table too, and CSV (`--csv` is `--format csv`) has the same rows.
    assert!(!doc[0]["memory"].as_array().unwrap().is_empty());
    let csv = run(&["summary", "--csv", trace.to_str().unwrap()]);
    let same = run(&["summary", "--format", "csv", trace.to_str().unwrap()]);
    assert_eq!(csv.stdout, same.stdout);
    let text = String::from_utf8_lossy(&csv.stdout);
    let kernel_rows = text.split("\n\n").next().unwrap().lines().count() - 1;
    assert_eq!(kernel_rows, kernels.len());
}

#[test]
fn diff_top_picks_the_largest_kernel_changes() {
    let totals = |p: &Path| kernel_totals(p, true);
    let (before, after) = (totals(&own(UNPINNED)), totals(&own(PINNED)));
    let mut changes: Vec<(i64, String)> = before
        .keys()
        .chain(after.keys())
        .map(|n| {
            let d = after.get(n).unwrap_or(&0) - before.get(n).unwrap_or(&0);
            (d, n.clone())
        })
        .filter(|(d, _)| *d != 0)
        .collect();
    changes.sort_by(|a, b| b.0.abs().cmp(&a.0.abs()).then(a.1.cmp(&b.1)));
    changes.dedup();
    let (code, json) = diff(
        &own(UNPINNED),
        &own(PINNED),
        &["--format", "json", "--top", "4"],
    );
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let kernels = doc["diffs"][0]["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 4);
    for (k, (delta, name)) in kernels.iter().zip(&changes) {
        assert_eq!(k["name"].as_str().unwrap(), name);
        // Each kernel's duration rounded to the nanosecond here, summed there.
        assert!(
            (k["delta_ns"].as_i64().unwrap() - delta).abs() <= 50,
            "{k} against {delta}"
        );
    }
    assert_eq!(doc["diffs"][0]["operators"].as_array().unwrap().len(), 4);
    // The text lists as many, and 10 when not told.
    let (_, text) = diff(&own(UNPINNED), &own(PINNED), &["--top", "2"]);
    let section = |t: &str| {
        t.split("Kernels by change")
            .nth(1)
            .unwrap()
            .split("Operators by change")
            .next()
            .unwrap()
            .lines()
            .filter(|l| l.contains(" -> "))
            .count()
    };
    assert_eq!(section(&text), 2, "{text}");
    let (_, text) = diff(&own(UNPINNED), &own(PINNED), &[]);
    assert_eq!(section(&text), 10, "{text}");
}

#[test]
fn diff_fails_a_regression_gate() {
    // The other way round, step time grows 4.5x: over any sensible limit.
    let (code, _) = diff(
        &own(PINNED),
        &own(UNPINNED),
        &["--fail-on-regression", "10"],
    );
    assert_eq!(code, 1);
    let (code, _) = diff(
        &own(UNPINNED),
        &own(PINNED),
        &["--fail-on-regression", "10"],
    );
    assert_eq!(code, 0);
}

#[test]
fn diff_of_the_kineto_docs_pair_and_of_job_directories() {
    let Some(before) = shared("kineto_docs_h100_before_fix.json") else {
        return;
    };
    let after = before.with_file_name("kineto_docs_h100_after_fix.json");
    let (code, text) = diff(&before, &after, &[]);
    assert_eq!(code, 0);
    assert!(text.contains("Kernels by change"), "{text}");
    // A job directory against itself: rank by rank, nothing changes.
    let job = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("sample-traces/kineto-jobs/h200_ddp_straggler");
    let (code, json) = diff(&job, &job, &["--format", "json"]);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let diffs = doc["diffs"].as_array().unwrap();
    assert_eq!(diffs.len(), 2, "rank0 and rank1");
    for d in diffs {
        assert!(
            d["findings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["status"] == "changed")
        );
        assert_eq!(d["idle_gap_ns"]["change_pct"], 0.0);
    }
}

#[test]
fn report_takes_top_as_analyze_does() {
    let tmp = tmpdir("report-top");
    let md = tmp.path().join("review.md");
    let (code, err) = report(&[
        own(UNPINNED).to_str().unwrap(),
        "-o",
        md.to_str().unwrap(),
        "--top",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(
        text.contains("\n## 1. ") && text.contains("\n## 2. "),
        "{text}"
    );
    assert!(!text.contains("\n## 3. "), "{text}");
}
