//! Every Nsight Systems export of the shared set loads (schemas 2021-2025, the Windows export
//! with non-UTF-8 text, exports with extra third-party tables, one without kernels), with row
//! counts equal to SQL counts taken with Python's sqlite3 when the test was written. The file
//! is never modified (checksum before and after). Skips when `../shared` is absent.

use std::path::{Path, PathBuf};
use tracehound_parsers::{GpuOpKind, HostKind, LoadError, load};

/// (file, kernels, memcpys, memsets, syncs, runtime calls, NVTX ranges (eventType 59/60 with an
///  end), pageable memcpys (srcKind or dstKind 0), CUDA_GPU_MEMORY_USAGE_EVENTS rows)
type Row = (
    &'static str,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
);

const EXPECTED: &[Row] = &[
    (
        "extrap_a100_old_nsys_callchains.sqlite",
        6,
        0,
        0,
        7,
        36,
        0,
        0,
        0,
    ),
    (
        "extrap_gtx1060_windows_nsys2022.1.sqlite",
        9,
        11,
        1,
        6,
        71,
        0,
        0,
        20,
    ),
    (
        "fuser_h200_nsys2025.1.sqlite",
        18,
        3,
        3,
        3,
        990,
        13513,
        2,
        0,
    ),
    (
        "h200_gpt_decode_launch_bound.sqlite",
        14449,
        853,
        1120,
        850,
        28626,
        3,
        754,
        1747,
    ),
    (
        "h200_gpt_train_amp_clean.sqlite",
        3363,
        890,
        333,
        754,
        12366,
        25,
        754,
        1944,
    ),
    (
        "h200_gpt_train_gpu_bound_clean.sqlite",
        7312,
        1202,
        1452,
        903,
        22841,
        29,
        903,
        2012,
    ),
    (
        "h200_resnet_pinned_amp_clean.sqlite",
        2887,
        843,
        252,
        770,
        10119,
        5,
        754,
        1118,
    ),
    (
        "h200_resnet_unpinned_sync.sqlite",
        3079,
        843,
        180,
        778,
        10692,
        5,
        770,
        1075,
    ),
    (
        "h200_small_mlp_pageable_nvtx.sqlite",
        480,
        79,
        60,
        49,
        2197,
        30,
        34,
        804,
    ),
    (
        "pipit_cloverleaf_a100_nsys2024.5.sqlite",
        1312,
        279,
        0,
        1312,
        3048,
        0,
        279,
        0,
    ),
    (
        "weatherbench2_rtx4060_nsys2025.5_no_kernels.sqlite",
        0,
        0,
        1,
        0,
        23,
        0,
        0,
        0,
    ),
];

fn dir() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../../shared/sample-traces/nsys")
}

fn checksum(p: &Path) -> u64 {
    // FNV-1a over the bytes: enough to notice any write.
    std::fs::read(p)
        .unwrap()
        .iter()
        .fold(0xcbf29ce484222325u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x100000001b3)
        })
}

#[test]
fn nsys_corpus_counts() {
    if !dir().exists() {
        eprintln!("skipping: ../shared/sample-traces is absent");
        return;
    }
    for &(name, kernels, memcpys, memsets, syncs, runtime, nvtx, pageable, mem) in EXPECTED {
        let path = dir().join(name);
        let before = checksum(&path);
        let t = load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(checksum(&path), before, "{name} was modified");
        assert_eq!(t.meta.format.map(|f| f.id), Some("nsys"));
        let gpu = |k: GpuOpKind| t.gpu_ops.iter().filter(|o| o.kind == k).count();
        let host = |k: HostKind| t.host_spans.iter().filter(|s| s.kind == k).count();
        let got = (
            gpu(GpuOpKind::Kernel),
            gpu(GpuOpKind::Memcpy),
            gpu(GpuOpKind::Memset),
            gpu(GpuOpKind::Sync),
            host(HostKind::Runtime),
            host(HostKind::Annotation),
            t.gpu_ops.iter().filter(|o| o.is_pageable_copy()).count(),
            t.memory.len(),
        );
        assert_eq!(
            got,
            (
                kernels, memcpys, memsets, syncs, runtime, nvtx, pageable, mem
            ),
            "{name}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir()).unwrap().count(),
        EXPECTED.len(),
        "every export is listed"
    );
}

#[test]
fn h200_exports_have_steps_gpus_and_a_clock() {
    let p = dir().join("h200_resnet_unpinned_sync.sqlite");
    if !p.exists() {
        return;
    }
    let t = load(&p).unwrap();
    assert_eq!(t.steps.len(), 5);
    assert_eq!(t.meta.gpus[0].name, "NVIDIA H200");
    assert_eq!(t.meta.gpus[0].sm_count, Some(132));
    assert!(t.meta.epoch_offset_ns.unwrap() > 1_700_000_000_000_000_000);
    assert!(t.meta.format_version.starts_with("Nsight Systems 2025.3"));
    // The Windows export's metadata holds codepage bytes: decoded lossily, not rejected.
    let w = load(&dir().join("extrap_gtx1060_windows_nsys2022.1.sqlite")).unwrap();
    assert!(w.meta.format_version.contains("2022.1.1.61"));
    let nk = load(&dir().join("weatherbench2_rtx4060_nsys2025.5_no_kernels.sqlite")).unwrap();
    assert!(
        nk.stats
            .notes
            .iter()
            .any(|n| n.contains("no CUPTI_ACTIVITY_KIND_KERNEL"))
    );
}

#[test]
fn sqlite_that_is_not_nsys_is_rejected_clearly() {
    let dir = tempfile::Builder::new()
        .prefix("tracehound-notnsys-")
        .tempdir()
        .expect("a temporary directory");
    let p = dir.path().join("users.sqlite");
    {
        let c = rusqlite::Connection::open(&p).unwrap();
        c.execute_batch(
            "CREATE TABLE users(id INTEGER, name TEXT); INSERT INTO users VALUES (1, 'a');",
        )
        .unwrap();
    }
    match load(&p) {
        Err(LoadError::NotATrace { path, why }) => {
            assert!(path.ends_with("users.sqlite"), "{path}");
            assert!(why.contains("not an Nsight Systems export"), "{why}");
        }
        other => panic!("expected NotATrace, got {other:?}"),
    }
}
