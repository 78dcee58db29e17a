//! `tracehound-dev` as a developer runs it: `scale` takes the flags it documents (sizes in MB,
//! lateness in ms) and prints the files it wrote; bad usage exits 2. What the generated traces
//! hold is tested in the root crate's tests/scale_job.rs, on the library.

use std::path::PathBuf;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tracehound-dev"))
        .args(args)
        .output()
        .expect("tracehound-dev runs")
}

#[test]
fn scale_writes_a_job_and_names_its_files() {
    let src = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR at run time"),
    )
    .join("../sample-traces/kineto-jobs/h200_ddp_exposed/rank0.pt.trace.json.gz");
    let tmp = tempfile::Builder::new()
        .prefix("tracehound-dev-scale-")
        .tempdir()
        .expect("a temporary directory");
    // A directory the generator makes itself, inside the test's own.
    let dir = tmp.path().join("job");
    let o = run(&[
        "scale",
        src.to_str().unwrap(),
        dir.to_str().unwrap(),
        "--size-mb",
        "1",
        "--ranks",
        "2",
        "--gzip",
        "--late-rank",
        "1",
        "--late-ms",
        "0.5",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    for (r, line) in lines.iter().enumerate() {
        let path = dir.join(format!("rank{r}.pt.trace.json.gz"));
        assert!(
            line.starts_with(path.to_str().unwrap()) && line.ends_with(" MB)"),
            "{line}"
        );
        assert!(path.metadata().unwrap().len() > 0);
    }
    // --late-ms is in ms: rank 1's collectives start 0.5 ms later than rank 0's and end on
    // time (a tenth of each kernel kept).
    let collectives = |r: u32| -> Vec<i64> {
        let t = tracehound_parsers::load(&dir.join(format!("rank{r}.pt.trace.json.gz"))).unwrap();
        t.gpu_ops
            .iter()
            .filter(|o| t.str(o.name).starts_with("ncclDevKernel"))
            .map(|o| o.dur())
            .collect()
    };
    let (base, late) = (collectives(0), collectives(1));
    assert!(!base.is_empty() && base.len() == late.len());
    for (b, l) in base.iter().zip(&late) {
        assert_eq!(b - l, 500_000.min(b - b / 10));
    }
}

#[test]
fn bad_usage_exits_2() {
    assert_eq!(run(&["scale"]).status.code(), Some(2));
    assert_eq!(run(&["dev-scale"]).status.code(), Some(2));
    let o = run(&["scale", "/nonexistent/trace.json", "/tmp/never"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).starts_with("tracehound-dev: error: "),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
