//! Damaged input never panics: real files of every format, truncated at many points, with
//! bytes flipped and garbage inserted, either load (with warnings) or fail with an error.

use std::path::{Path, PathBuf};

mod common;
use common::Lcg;

fn own(p: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../sample-traces")
    .join(p)
}

fn shared(p: &str) -> Option<PathBuf> {
    let p = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../../shared/sample-traces")
    .join(p);
    p.exists().then_some(p)
}

fn try_all(name: &str, data: &[u8], dir: &Path, rng: &mut Lcg) {
    let path = dir.join(name);
    let mut cases: Vec<Vec<u8>> = Vec::new();
    for k in 1..12 {
        cases.push(data[..data.len() * k / 12].to_vec());
    }
    for _ in 0..12 {
        let mut d = data.to_vec();
        for _ in 0..8 {
            let i = (rng.next() as usize) % d.len();
            d[i] = (rng.next() & 0xff) as u8;
        }
        cases.push(d);
    }
    for _ in 0..6 {
        let mut d = data.to_vec();
        let i = (rng.next() as usize) % d.len();
        let junk: Vec<u8> = (0..32).map(|_| (rng.next() & 0xff) as u8).collect();
        d.splice(i..i, junk);
        cases.push(d);
    }
    for d in cases {
        std::fs::write(&path, &d).unwrap();
        // Ok or Err both fine; a panic fails the test.
        let _ = tracehound_parsers::load(&path);
    }
}

#[test]
fn damaged_files_never_panic() {
    let tmp = tempfile::Builder::new()
        .prefix("tracehound-fuzz-")
        .tempdir()
        .expect("a temporary directory");
    let dir = tmp.path().to_path_buf();
    let mut rng = Lcg(7);
    let mut inputs: Vec<(String, Vec<u8>)> = vec![
        (
            "kineto.json".into(),
            std::fs::read(own("kineto/kineto_docs_h100_before_fix.json")).unwrap(),
        ),
        (
            "legacy.json.gz".into(),
            std::fs::read(own("kineto/hta_legacy_cats_inference_rank1.json.gz")).unwrap(),
        ),
    ];
    // Decompressed, so that damage hits the JSON itself.
    let (plain, _) =
        tracehound_parsers::read_input(&own("kineto/hta_alexnet_a100_pageable_memcpy.json.gz"))
            .unwrap();
    inputs.push(("alexnet.json".into(), plain));
    for (name, p) in [
        ("dmon.log", "dmon/h200_dmon_s_pucvmet_o_DT.log"),
        ("query.csv", "dmon/h200_smi_query_gpu.csv"),
        ("smi.xml", "smi-xml/telegraf_tesla_t4_3a4e962c.xml"),
        (
            "nsys.sqlite",
            "nsys/extrap_gtx1060_windows_nsys2022.1.sqlite",
        ),
    ] {
        if let Some(p) = shared(p) {
            inputs.push((name.into(), std::fs::read(p).unwrap()));
        }
    }
    for (name, data) in &inputs {
        try_all(name, data, &dir, &mut rng);
    }
}
