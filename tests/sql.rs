//! `tracehound sql` and `tracehound export` (built with `--features sql`), against counts taken
//! from the trace with plain Python. Without the feature the commands say how to get it.

mod common;
use common::*;

#[cfg(feature = "sql")]
fn sql(files: &[&std::path::Path], query: &str, extra: &[&str]) -> String {
    let mut args: Vec<String> = vec!["sql".into()];
    args.extend(files.iter().map(|f| f.to_str().unwrap().to_string()));
    args.push(query.into());
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(feature = "sql")]
#[test]
fn queries_answer_what_python_counts() {
    let t = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    // Python over the file: 1915 kernel events, 15 memcpys; the kernel with the most time is
    // cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>, 6 139 981 ns.
    let rows: serde_json::Value = serde_json::from_str(&sql(
        &[&t],
        "SELECT count(*) AS n FROM kernels",
        &["--json"],
    ))
    .unwrap();
    assert_eq!(rows[0]["n"], 1915);
    let csv = sql(&[&t], "SELECT count(*) AS n FROM memcpys", &["--csv"]);
    assert_eq!(csv.trim(), "n\n15");
    // `--format csv` and `--format json` are the long forms of `--csv` and `--json`.
    assert_eq!(
        sql(
            &[&t],
            "SELECT count(*) AS n FROM memcpys",
            &["--format", "csv"]
        ),
        csv
    );
    let n: serde_json::Value = serde_json::from_str(&sql(
        &[&t],
        "SELECT count(*) AS n FROM kernels",
        &["--format", "json"],
    ))
    .unwrap();
    assert_eq!(n[0]["n"], 1915);
    let top: serde_json::Value = serde_json::from_str(&sql(
        &[&t],
        "SELECT name, sum(dur) AS total FROM kernels GROUP BY name ORDER BY total DESC LIMIT 1",
        &["--json"],
    ))
    .unwrap();
    assert!(
        top[0]["name"]
            .as_str()
            .unwrap()
            .starts_with("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>")
    );
    assert!((top[0]["total"].as_i64().unwrap() - 6_139_981).abs() <= 5);
    // The measured gap causes: data loading holds most of the idle time.
    let causes: serde_json::Value = serde_json::from_str(&sql(
        &[&t],
        "SELECT cause, sum(ns) AS ns FROM gap_causes GROUP BY cause ORDER BY ns DESC",
        &["--json"],
    ))
    .unwrap();
    assert_eq!(causes[0]["cause"], "data_loading");
    // The table printer shows the result.
    let table = sql(&[&t], "SELECT rule, severity FROM findings", &[]);
    assert!(
        table.contains("idle_gaps") && table.contains("pageable_memcpy"),
        "{table}"
    );
}

#[cfg(feature = "sql")]
#[test]
fn several_files_union_with_a_source_column() {
    let a = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let b = own("h200_resnet_pinned_amp_clean.pt.trace.json.gz");
    let rows: serde_json::Value = serde_json::from_str(&sql(
        &[&a, &b],
        "SELECT source, count(*) AS n FROM steps GROUP BY source ORDER BY source",
        &["--json"],
    ))
    .unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);
    assert!(rows.as_array().unwrap().iter().all(|r| r["n"] == 5));
}

#[cfg(feature = "sql")]
#[test]
fn an_unpriced_finding_has_no_impact_in_the_findings_table() {
    // GTLS (shipped): its first finding names the kernel of a GPU-bound CUDA C run, which a
    // capture without counters cannot price: NULL, so that sum(impact_ns) leaves it out.
    let t = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("sample-traces/field/nsys/gtls_cupy_transit_search_rtx3060_nsysunknown.sqlite");
    let rows: serde_json::Value = serde_json::from_str(&sql(
        &[&t],
        "SELECT rule, impact_ns, impact_share FROM findings",
        &["--json"],
    ))
    .unwrap();
    let rows = rows.as_array().unwrap();
    assert!(rows.len() >= 2, "{rows:?}");
    assert_eq!(rows[0]["rule"], "hot_operator", "{rows:?}");
    assert!(rows[0]["impact_ns"].is_null(), "{rows:?}");
    assert!(rows[0]["impact_share"].is_null(), "{rows:?}");
    assert!(
        rows[1]["impact_ns"].as_i64().is_some_and(|n| n > 0),
        "{rows:?}"
    );
}

#[cfg(feature = "sql")]
#[test]
fn export_writes_every_table_as_parquet() {
    let tmp = tmpdir("export");
    // A directory `export` makes itself, inside the test's own.
    let dir = tmp.path().join("tables");
    let t = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let out = run(&[
        "export",
        t.to_str().unwrap(),
        "--parquet",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in [
        "kernels",
        "memcpys",
        "memsets",
        "host_spans",
        "memory",
        "counters",
        "steps",
        "gaps",
        "gap_causes",
        "findings",
    ] {
        let bytes = std::fs::read(dir.join(format!("{n}.parquet"))).unwrap();
        assert_eq!(&bytes[..4], b"PAR1", "{n}");
    }
}

#[cfg(not(feature = "sql"))]
#[test]
fn without_the_feature_the_commands_say_how_to_get_it() {
    let t = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let out = run(&["sql", t.to_str().unwrap(), "SELECT 1 FROM kernels"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--features sql"));
}
