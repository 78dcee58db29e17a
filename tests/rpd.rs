//! rocmProfileData (RPD) captures (`sample-traces/field/rocm/`, provenance in the field
//! corpus's PROVENANCE.md), read by the RPD reader. The expected values are read here from the
//! databases' own tables with SQL, and for `matmul_result` also from the Chrome trace AMD's
//! `rpd2tracing.py` converter wrote of the same capture, so the reader is checked against two
//! readings it shares no code with.

mod common;

use common::{run, tmpdir};
use serde_json::Value;
use std::path::PathBuf;

fn field(rel: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("sample-traces/field")
        .join(rel)
}

fn analyze_json(p: &std::path::Path) -> Value {
    let out = run(&[
        "analyze",
        "--format",
        "json",
        p.to_str().expect("UTF-8 path"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    doc["traces"][0].clone()
}

/// `SELECT count(*), sum(end - start)` of the ops whose type is one of `types`.
fn ops(db: &rusqlite::Connection, types: &[&str]) -> (i64, i64) {
    let list = types
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(",");
    db.query_row(
        &format!(
            "SELECT count(*), coalesce(sum(o.\"end\" - o.start), 0) FROM rocpd_op o \
             JOIN rocpd_string s ON s.id = o.opType_id WHERE s.string IN ({list})"
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .expect("query")
}

#[test]
fn an_rpd_capture_is_read_as_its_tables_and_amds_converter_say() {
    let p = field("rocm/rpd_ROCm-rocmProfileData_matmul_result.rpd");
    let db = rusqlite::Connection::open_with_flags(&p, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open");
    let (kernels, kernel_ns) = ops(&db, &["KernelExecution"]);
    let (copies, copy_ns) = ops(&db, &["CopyHostToDevice", "CopyDeviceToHost"]);
    let (fills, fill_ns) = ops(&db, &["FillBuffer"]);
    assert_eq!((kernels, copies, fills), (29, 55, 1));

    let t = analyze_json(&p);
    assert_eq!(t["format"], "rpd");
    assert_eq!(t["format_version"], "schema_version 2");
    let dev = &t["summary"]["devices"][0];
    assert_eq!(dev["device"], 2);
    assert_eq!(
        (&dev["kernels"], &dev["memcpys"], &dev["memsets"]),
        (
            &Value::from(kernels),
            &Value::from(copies),
            &Value::from(fills)
        )
    );
    // Busy time: the ops do not overlap (one queue), so it is the sum of their durations.
    let w = &t["summary"]["window"];
    let window_ns = w["end"].as_i64().expect("end") - w["start"].as_i64().expect("start");
    let busy_ns = dev["busy_share"].as_f64().expect("busy share") * window_ns as f64;
    let sum_ns = (kernel_ns + copy_ns + fill_ns) as f64;
    assert!((busy_ns - sum_ns).abs() < 1_000.0, "{busy_ns} vs {sum_ns}");

    // AMD's converter's Chrome trace of the same capture: GPU ops on pid "2", times in whole
    // microseconds (truncated), so the sums agree within a microsecond per op.
    let conv: Value = serde_json::from_slice(
        &std::fs::read(field(
            "foreign/rpd2tracing_ROCm-rocmProfileData_matmul_result.json",
        ))
        .expect("converted trace"),
    )
    .expect("JSON");
    let gpu: Vec<&Value> = conv
        .as_array()
        .expect("a list")
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == "2")
        .collect();
    assert_eq!(gpu.len() as i64, kernels + copies + fills);
    let us = |e: &Value, k: &str| -> i64 {
        e[k].as_str()
            .and_then(|s| s.parse().ok())
            .expect("a number as text")
    };
    let conv_sum_ns: i64 = gpu.iter().map(|e| us(e, "dur") * 1_000).sum();
    assert!(
        (busy_ns - conv_sum_ns as f64).abs() < gpu.len() as f64 * 1_000.0,
        "{busy_ns} vs the converter's {conv_sum_ns}"
    );
    let first_us = gpu.iter().map(|e| us(e, "ts")).min().expect("ops");
    assert_eq!(w["start"].as_i64().expect("start") / 1_000, first_us);
    // The top kernel is the converter's longest kernel (a kernel's `desc` is its op type).
    let longest = gpu
        .iter()
        .filter(|e| e["args"]["desc"] == "KernelExecution")
        .max_by_key(|e| us(e, "dur"))
        .expect("kernels");
    assert_eq!(t["summary"]["top_kernel"]["name"], longest["name"]);

    // The one long gap is named for what the capture shows: no host record in it.
    let out = run(&["analyze", p.to_str().expect("UTF-8 path")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("untraced host code"), "{text}");
    assert!(
        !text.contains("pageable"),
        "the tracer never records pinned memory: {text}"
    );
}

#[test]
fn autograd_ranges_in_an_rpd_capture_are_operators() {
    let p = field("rocm/rpd_ROCm-rocmProfileData_raptor_mytrace.rpd.gz");
    // The database inflated for SQL (tracehound inflates it itself, into its own temporary
    // file).
    let dir = tmpdir("rpd");
    let db_path = dir.path().join("mytrace.rpd");
    let mut gz = flate2::read::GzDecoder::new(std::fs::File::open(&p).expect("open"));
    let mut out = std::fs::File::create(&db_path).expect("create");
    std::io::copy(&mut gz, &mut out).expect("inflate");
    let db =
        rusqlite::Connection::open_with_flags(&db_path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open");
    let (kernels, _) = ops(&db, &["KernelExecution", "Task"]);
    let (copies, _) = ops(
        &db,
        &["CopyHostToDevice", "CopyDeviceToHost", "CopyDeviceToDevice"],
    );
    let operators: i64 = db
        .query_row(
            "SELECT count(*) FROM rocpd_api a JOIN rocpd_string n ON n.id = a.apiName_id \
             JOIN rocpd_string t ON t.id = a.args_id \
             WHERE n.string = 'UserMarker' AND t.string LIKE '%::%' AND t.string NOT LIKE '% %'",
            [],
            |r| r.get(0),
        )
        .expect("query");
    let scaled_mm: i64 = db
        .query_row(
            "SELECT count(*) FROM rocpd_api a JOIN rocpd_string n ON n.id = a.apiName_id \
             JOIN rocpd_string t ON t.id = a.args_id \
             WHERE n.string = 'UserMarker' AND t.string = 'aten::_scaled_mm'",
            [],
            |r| r.get(0),
        )
        .expect("query");
    drop(db);

    let out = run(&["info", p.to_str().expect("UTF-8 path")]);
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(info.contains("rocmProfileData (RPD) capture"), "{info}");
    assert!(
        info.contains(&format!("{kernels} kernels, {copies} memcpys")),
        "{info}"
    );
    assert!(info.contains(&format!("{operators} CPU ops")), "{info}");
    // Every op is linked to the call that asked for it.
    assert!(
        info.contains(&format!("{0} of {0} GPU ops matched", kernels + copies)),
        "{info}"
    );
    // The operator that holds the GPU's time is named, as a matrix operator.
    let t = analyze_json(&p);
    assert!(scaled_mm > 0);
    let text =
        String::from_utf8_lossy(&run(&["analyze", p.to_str().expect("UTF-8")]).stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("aten::_scaled_mm"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("matmul"), "{line}");
    assert_eq!(t["format"], "rpd");
}

#[test]
fn an_sqlite_database_no_reader_owns_is_refused_naming_what_was_looked_for() {
    let dir = tmpdir("rpd");
    let p = dir.path().join("other.sqlite");
    let db = rusqlite::Connection::open(&p).expect("create");
    db.execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
        .expect("fill");
    drop(db);
    let out = run(&["analyze", p.to_str().expect("UTF-8 path")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("other.sqlite"), "{err}");
    assert!(err.contains("not an Nsight Systems export"), "{err}");
    assert!(err.contains("not a rocmProfileData capture"), "{err}");
}
