//! The map and reduce of a job analysis, as a user runs them: `analyze TRACE --rank-summary`
//! per rank, then `merge`, gives the same job report, byte for byte, as `analyze DIR` on the
//! same traces; bad summaries are refused naming the file.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// The rank traces of a job directory, sorted.
fn traces(job: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(job)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".pt.trace.json"))
        .collect();
    v.sort();
    v
}

/// Writes one summary per rank (the map) into a fresh directory and returns it (removed when
/// dropped).
fn map(job: &Path, name: &str) -> tempfile::TempDir {
    let out = tmpdir(name);
    for (k, t) in traces(job).iter().enumerate() {
        let s = out.path().join(format!("rank{k}.summary.json"));
        success(&run(&[
            "analyze",
            t.to_str().unwrap(),
            "--rank-summary",
            s.to_str().unwrap(),
        ]));
    }
    out
}

/// `merge --format json` of the summaries, parsed.
fn merged_json(summaries: &Path) -> serde_json::Value {
    let text = success(&run(&[
        "merge",
        summaries.to_str().unwrap(),
        "--format",
        "json",
    ]));
    serde_json::from_str(&text).unwrap()
}

/// Every format of `merge` equals `analyze DIR`'s.
fn assert_merge_equals_dir(job: &Path, summaries: &Path) {
    for format in ["json", "table", "md"] {
        let merged = success(&run(&[
            "merge",
            summaries.to_str().unwrap(),
            "--format",
            format,
        ]));
        let direct = success(&run(&[
            "analyze",
            job.to_str().unwrap(),
            "--format",
            format,
        ]));
        assert_eq!(merged, direct, "{format} of {}", job.display());
    }
}

fn job_dir(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap())
        .join("sample-traces/kineto-jobs")
        .join(name)
}

#[test]
fn merged_straggler_job_equals_the_directory_analysis() {
    let job = job_dir("h200_ddp_straggler");
    let summaries = map(&job, "merge-straggler");
    assert_merge_equals_dir(&job, summaries.path());
    let doc = merged_json(summaries.path());
    // The truth file: rank 1 does ~30 ms of CPU preprocessing a step, rank 0 waits.
    let truth: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            job.join("../../reference/h200_ddp_straggler.truth.json")
                .canonicalize()
                .unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    let first = &doc["job"]["findings"][0];
    assert_eq!(first["rule"], "straggler_rank");
    assert_eq!(
        first["metrics"]["straggler_rank"],
        truth["expected"]["straggler_rank"].as_f64().unwrap()
    );
    // Step times travel in the summary: the rank's own step markers, one per step.
    let rank1 = &doc["job"]["ranks"][1];
    let steps = rank1["step_times_ns"].as_array().unwrap();
    assert_eq!(steps.len() as u64, rank1["steps"].as_u64().unwrap());
    assert!(steps.len() >= 3);
}

#[test]
fn merged_exposed_job_equals_the_directory_analysis() {
    let job = job_dir("h200_ddp_exposed");
    let summaries = map(&job, "merge-exposed");
    assert_merge_equals_dir(&job, summaries.path());
}

#[test]
fn merged_eight_rank_job_equals_the_directory_analysis() {
    let job = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap())
        .join("../shared/sample-traces/kineto-jobs/dlrm_v100_8ranks");
    if !job.exists() {
        eprintln!("skipping: {} is absent", job.display());
        return;
    }
    let summaries = map(&job, "merge-dlrm");
    assert_eq!(std::fs::read_dir(summaries.path()).unwrap().count(), 8);
    assert_merge_equals_dir(&job, summaries.path());
}

#[test]
fn ranks_the_traces_do_not_record_are_numbered_by_file_name() {
    // A job made with the scale generator records its ranks; strip that record from copies
    // so the summaries carry no rank, as with traces of a job without distributedInfo.
    let tmp = tmpdir("merge-norank");
    let dir = tmp.path();
    let job = dir.join("job");
    scale(
        &own("h200_resnet_pinned_amp_clean.pt.trace.json.gz"),
        &job,
        &scale_options(1.0, 3),
    );
    for t in traces(&job) {
        let text = std::fs::read_to_string(&t).unwrap();
        let i = text
            .find("\"distributedInfo\"")
            .expect("generator writes distributedInfo");
        let j = i + text[i..].find('}').unwrap() + 1;
        let stripped = format!("{}\"distributedInfoRemoved\": 0{}", &text[..i], &text[j..]);
        std::fs::write(&t, stripped).unwrap();
    }
    let summaries = map(&job, "merge-norank-summaries");
    assert_merge_equals_dir(&job, summaries.path());
    let doc = merged_json(summaries.path());
    let ranks: Vec<i64> = doc["job"]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rank"].as_i64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1, 2]);
    // `--rank` records a rank the trace lacks.
    let s = dir.join("given.json");
    let t = &traces(&job)[0];
    success(&run(&[
        "analyze",
        t.to_str().unwrap(),
        "--rank-summary",
        s.to_str().unwrap(),
        "--rank",
        "7",
    ]));
    assert_eq!(merged_json(&s)["job"]["ranks"][0]["rank"], 7);
}

#[test]
fn bad_summaries_are_refused_naming_the_file() {
    let tmp = tmpdir("merge-bad");
    let dir = tmp.path();
    let trace = own("h200_resnet_pinned_amp_clean.pt.trace.json.gz");
    let good = dir.join("good.json");
    success(&run(&[
        "analyze",
        trace.to_str().unwrap(),
        "--rank-summary",
        good.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&good).unwrap();
    let cases: [(&str, String, &str); 4] = [
        (
            "garbage.json",
            "not json".into(),
            "not a tracehound rank summary",
        ),
        (
            "report.json",
            success(&run(&[
                "analyze",
                trace.to_str().unwrap(),
                "--format",
                "json",
            ])),
            "kind is \"\"",
        ),
        (
            "future.json",
            text.replace("\"schema_version\":1", "\"schema_version\":9"),
            "rank summary format 9",
        ),
        (
            "cut.json",
            text[..text.len() / 2].to_string(),
            "not a tracehound rank summary",
        ),
    ];
    for (name, body, why) in cases {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        let o = run(&["merge", good.to_str().unwrap(), p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(p.to_str().unwrap()) && err.contains(why),
            "{name}: {err}"
        );
        assert!(o.stdout.is_empty(), "{name}: no partial report");
    }
    // The same rank's summary twice is a mistake in the file list, not a job of two ranks.
    let copy = dir.join("copy.json");
    std::fs::copy(&good, &copy).unwrap();
    let o = run(&["merge", good.to_str().unwrap(), copy.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("summarise the same trace"));
    // A summary is of one rank's trace: two traces, or a counter log, are refused.
    let o = run(&[
        "analyze",
        trace.to_str().unwrap(),
        own("h200_fp32_no_tf32.pt.trace.json.gz").to_str().unwrap(),
        "--rank-summary",
        dir.join("two.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!dir.join("two.json").exists());
    // A window in ms from each trace's start means nothing across ranks.
    let o = run(&[
        "analyze",
        job_dir("h200_ddp_straggler").to_str().unwrap(),
        "--window",
        "0",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--window applies to one trace"));
}
