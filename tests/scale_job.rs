//! The benchmark generator (`tracehound-dev scale`, run in process) and job mode as a user runs
//! it: a scaled trace holds exactly N copies of the real one (every GPU op still linked to its
//! launch), and a generated job with one slowed rank names that rank.

mod common;
use common::*;

#[test]
fn scaled_trace_repeats_the_real_one() {
    let src = own("h200_resnet_pinned_amp_clean.pt.trace.json.gz");
    let tmp = tmpdir("scale");
    let dir = tmp.path();
    let out = dir.join("x3.json");
    // The source is 10.7 MB of JSON: 25 MB needs 3 copies.
    scale(&src, &out, &scale_options(25.0, 1));
    let a = tracehound_parsers::load(&src).unwrap();
    let b = tracehound_parsers::load(&out).unwrap();
    let kernels = |t: &tracehound_parsers::Trace| {
        t.gpu_ops
            .iter()
            .filter(|o| o.kind == tracehound_parsers::GpuOpKind::Kernel)
            .count()
    };
    assert_eq!(kernels(&b), 3 * kernels(&a));
    assert_eq!(b.host_spans.len(), 3 * a.host_spans.len());
    assert_eq!(
        b.steps.len(),
        3 * a.steps.len(),
        "step markers renumbered, not merged"
    );
    let linked = |t: &tracehound_parsers::Trace| {
        t.index
            .op_launch
            .iter()
            .filter(|&&l| l != tracehound_parsers::NONE)
            .count()
    };
    assert_eq!(
        linked(&b),
        3 * linked(&a),
        "fresh correlation ids keep every launch link"
    );
    // gzip output reads the same.
    let gz = dir.join("x3.json.gz");
    let opts = tracehound::scale::ScaleOptions {
        gzip: true,
        ..scale_options(25.0, 1)
    };
    scale(&src, &gz, &opts);
    assert_eq!(
        tracehound_parsers::load(&gz).unwrap().gpu_ops.len(),
        b.gpu_ops.len()
    );
}

#[test]
fn job_directory_names_the_slow_rank() {
    let src = own("h200_resnet_pinned_amp_clean.pt.trace.json.gz");
    let tmp = tmpdir("job");
    let dir = tmp.path();
    let job = dir.join("job");
    let opts = tracehound::scale::ScaleOptions {
        gzip: true,
        slow_rank: Some((2, 1.4)),
        ..scale_options(1.0, 4)
    };
    scale(&src, &job, &opts);
    let o = run(&["analyze", "--format", "json", job.to_str().unwrap()]);
    let doc: serde_json::Value = serde_json::from_str(&success(&o)).unwrap();
    let ranks = doc["job"]["ranks"].as_array().unwrap();
    assert_eq!(
        ranks
            .iter()
            .map(|r| r["rank"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    let f = &doc["job"]["findings"][0];
    assert_eq!(f["rule"], "slowest_rank");
    assert_eq!(f["metrics"]["slow_rank"], 2.0);
    let ratio = f["metrics"]["slow_step_ns"].as_f64().unwrap()
        / f["metrics"]["median_step_ns"].as_f64().unwrap();
    assert!((ratio - 1.4).abs() < 0.02, "step ratio {ratio}");
    let table = run(&["analyze", job.to_str().unwrap()]);
    let s = String::from_utf8(table.stdout).unwrap();
    assert!(s.contains("(4 ranks)") && s.contains("slowest_rank"), "{s}");
}

#[test]
fn job_directory_names_the_late_rank_at_collectives() {
    // A DDP rank copied to 8 ranks, rank 5 arriving 2 ms late at every all-reduce: its
    // collectives start later and end on time, so every other rank waits for it.
    let src = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap())
        .join("sample-traces/kineto-jobs/h200_ddp_exposed/rank0.pt.trace.json.gz");
    let tmp = tmpdir("late");
    let dir = tmp.path();
    let job = dir.join("job");
    let opts = tracehound::scale::ScaleOptions {
        late_rank: Some((5, 2_000_000)),
        ..scale_options(1.0, 8)
    };
    scale(&src, &job, &opts);
    // What was planted, read back from the files: rank 5's collectives are shorter than
    // rank 0's by the lateness (capped so that a tenth of each kernel remains).
    let collectives = |r: u32| -> Vec<i64> {
        let t = tracehound_parsers::load(&job.join(format!("rank{r}.pt.trace.json"))).unwrap();
        t.gpu_ops
            .iter()
            .filter(|o| t.str(o.name).starts_with("ncclDevKernel"))
            .map(|o| o.dur())
            .collect()
    };
    let (base, late) = (collectives(0), collectives(5));
    assert_eq!(base.len(), late.len());
    let planted: i64 = base
        .iter()
        .zip(&late)
        .map(|(b, l)| {
            assert_eq!(b - l, 2_000_000.min(b - b / 10), "one collective");
            b - l
        })
        .sum();
    let doc: serde_json::Value = serde_json::from_str(&success(&run(&[
        "analyze",
        "--format",
        "json",
        job.to_str().unwrap(),
    ])))
    .unwrap();
    let f = &doc["job"]["findings"][0];
    assert_eq!(f["rule"], "straggler_rank");
    assert_eq!(f["metrics"]["straggler_rank"], 5.0);
    assert_eq!(
        f["metrics"]["last_arrivals"],
        f["metrics"]["matched_collectives"]
    );
    for r in doc["job"]["ranks"].as_array().unwrap() {
        let wait = r["collective_wait_ns"].as_i64().unwrap();
        if r["rank"] == 5 {
            assert_eq!(wait, 0, "the straggler waits for nobody");
        } else {
            assert_eq!(wait, planted, "rank {} waits what was planted", r["rank"]);
        }
    }
}
