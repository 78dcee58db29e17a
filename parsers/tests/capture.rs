//! Each reader describes what its capture recorded ([`Capture`]): checked on the shipped
//! traces (and the shared set, skipped with a message when `../shared` is absent) against
//! facts taken from the files with other tools when this test was written: Python's json
//! module on the Kineto traces (event categories, `args` keys, `thread_name` metadata of the
//! threads that have host events), Python's sqlite3 on the Nsight Systems exports (the tables
//! present, `ThreadNames` of the `globalTid`s that have runtime, NVTX range or OS runtime
//! rows), and the timestamps of the nvidia-smi logs (median step between consecutive samples).

use std::path::{Path, PathBuf};
use tracehound_parsers::{Capture, CounterPeriod, HostThread, load};

fn root() -> PathBuf {
    PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR at run time"),
    )
    .join("..")
}

fn shared() -> Option<PathBuf> {
    let s = root().join("../shared/sample-traces");
    if s.exists() {
        Some(s)
    } else {
        eprintln!("skipping the shared samples: {} is absent", s.display());
        None
    }
}

fn capture(path: &Path) -> Capture {
    // A compressed export is read decompressed, as a user would after `gunzip`, from a
    // directory of this call's own (removed with what it holds when dropped).
    let scratch;
    let path = if path.extension().is_some_and(|e| e == "gz")
        && path.to_string_lossy().contains(".sqlite")
    {
        let mut gz = flate2::read::GzDecoder::new(std::fs::File::open(path).expect("gz"));
        scratch = tempfile::Builder::new()
            .prefix("tracehound-capture-")
            .tempdir()
            .expect("a temporary directory");
        let unpacked = scratch
            .path()
            .join(path.file_stem().expect("name").to_string_lossy().as_ref());
        let mut out = std::fs::File::create(&unpacked).expect("temp file");
        std::io::copy(&mut gz, &mut out).expect("gunzip");
        unpacked
    } else {
        path.to_path_buf()
    };
    load(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .meta
        .capture
}

/// What a capture holds, as flags in a fixed order, so that a table of files reads at a glance.
#[derive(Debug, PartialEq)]
struct Kinds {
    kernels: bool,
    launch_geometry: bool,
    occupancy: bool,
    api_calls: bool,
    cpu_ops: bool,
    python_frames: bool,
    call_stacks: bool,
    shapes: bool,
    memory_events: bool,
    allocated_totals: bool,
    annotations: bool,
    os_calls: bool,
    cpu_samples: bool,
}

fn kinds(c: &Capture) -> Kinds {
    Kinds {
        kernels: c.kernels,
        launch_geometry: c.launch_geometry,
        occupancy: c.occupancy,
        api_calls: c.api_calls,
        cpu_ops: c.cpu_ops,
        python_frames: c.python_frames,
        call_stacks: c.call_stacks,
        shapes: c.shapes,
        memory_events: c.memory_events,
        allocated_totals: c.allocated_totals,
        annotations: c.annotations,
        os_calls: c.os_calls,
        cpu_samples: c.cpu_samples,
    }
}

/// Flags from a string of 13 letters, one per field of [`Kinds`] in order: `y` or `n`.
fn flags(s: &str) -> Kinds {
    let b: Vec<bool> = s
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| c == 'y')
        .collect();
    assert_eq!(b.len(), 13, "{s}");
    Kinds {
        kernels: b[0],
        launch_geometry: b[1],
        occupancy: b[2],
        api_calls: b[3],
        cpu_ops: b[4],
        python_frames: b[5],
        call_stacks: b[6],
        shapes: b[7],
        memory_events: b[8],
        allocated_totals: b[9],
        annotations: b[10],
        os_calls: b[11],
        cpu_samples: b[12],
    }
}

fn threads(list: &[(i64, i64, Option<&str>)]) -> Vec<HostThread> {
    list.iter()
        .map(|&(pid, tid, name)| HostThread {
            pid,
            tid,
            name: name.map(str::to_string),
        })
        .collect()
}

//                 kernels, geometry, occupancy, API calls, CPU ops, Python frames, call stacks,
//                 shapes, allocator events, allocated totals, annotations, OS calls, CPU samples
const KINETO: &[(&str, &str)] = &[
    // record_shapes + profile_memory, no with_stack: no python_function events.
    (
        "h200_gpt_train_gpu_bound_clean.pt.trace.json.gz",
        "yyy yy nn y yy y nn",
    ),
    // with_stack + record_shapes, no profile_memory: no [memory] events.
    ("h200_lazy_loading.pt.trace.json.gz", "yyy yy yn y nn y nn"),
    (
        "h200_alloc_fragmentation.pt.trace.json.gz",
        "yyy yy yn y yy y nn",
    ),
    // No options written: no Input Dims, no Python, no memory.
    (
        "hta_alexnet_a100_pageable_memcpy.json.gz",
        "yyy yy nn n nn y nn",
    ),
    // Four kernels and their runtime calls, no operators or annotations at all.
    (
        "hta_legacy_cats_inference_rank1.json.gz",
        "yyy yn nn n nn n nn",
    ),
];

const KINETO_SHARED: &[(&str, &str)] = &[
    // ROCm: kernels carry neither grid nor block nor occupancy.
    ("hta_amd_mi250_rocm62.json.gz", "ynn yy nn y nn y nn"),
    // CUPTI range profiling: launches, no kernel records.
    (
        "hta_cupti_profiler_range_a100_no_kernels.json.gz",
        "nnn yy nn n nn y nn",
    ),
    // 2021: `Call stack` text, [memory] events with Bytes only (no Total Allocated); the step
    // markers, written as operators, are annotations.
    (
        "kineto_tbplugin_resnet50_v100_2021_memory.pt.trace.json.gz",
        "yyy yy ny y yn y nn",
    ),
    // 2021 top-level array: grid and block, no occupancy.
    (
        "kineto_plugin_resnet50_2021_toplevel_array.pt.trace.json.gz",
        "yyn yy nn y nn y nn",
    ),
];

#[test]
fn kineto_traces_say_what_they_recorded() {
    let mut files: Vec<(PathBuf, &str)> = KINETO
        .iter()
        .map(|(f, k)| (root().join("sample-traces/kineto").join(f), *k))
        .collect();
    if let Some(s) = shared() {
        files.extend(
            KINETO_SHARED
                .iter()
                .map(|(f, k)| (s.join("kineto").join(f), *k)),
        );
    }
    for (f, k) in files {
        let c = capture(&f);
        assert_eq!(kinds(&c), flags(k), "{}", f.display());
        assert!(
            c.startup_hole,
            "{}: Kineto starts inside the step",
            f.display()
        );
        assert!(c.no_cpu_data.contains("ProfilerActivity.CPU"));
        assert_eq!(c.counter_period, None);
    }
}

#[test]
fn kineto_threads_are_named_by_their_metadata() {
    let k = |f: &str| capture(&root().join("sample-traces/kineto").join(f)).host_threads;
    // Thread 900 is named twice (pt_autograd_1, then python3): the first name counts.
    assert_eq!(
        k("h200_lazy_loading.pt.trace.json.gz"),
        threads(&[
            (808, 808, Some("thread 808 (python3)")),
            (808, 900, Some("thread 900 (pt_autograd_1)")),
        ])
    );
    // The GPU annotation lane (pid 0, tid 7, `stream 7`) is no host thread.
    assert_eq!(
        k("h200_gpt_train_gpu_bound_clean.pt.trace.json.gz"),
        threads(&[
            (433, 433, Some("thread 433 (python3)")),
            (433, 474, Some("thread 474 (pt_autograd_0)")),
        ])
    );
    assert_eq!(
        k("hta_legacy_cats_inference_rank1.json.gz"),
        threads(&[(1010370, 1010370, Some("thread 1010370 (python)"))])
    );
}

//                 kernels, geometry, occupancy, API calls, CPU ops, Python frames, call stacks,
//                 shapes, allocator events, allocated totals, annotations, OS calls, CPU samples
const NSYS: &[(&str, &str)] = &[
    // -t cuda,nvtx,osrt with autograd NVTX ranges (1146 operators).
    ("h200_sleep_log_osrt.sqlite", "yyn yy nn n nn y yn"),
    // -t cuda,nvtx without autograd ranges: no operators, no OSRT_API table.
    ("h200_cpu_preprocess_cuda.sqlite", "yyn yn nn n nn y nn"),
    ("h200_lazy_loading_cuda.sqlite", "yyn yn nn n nn y nn"),
    // -t cuda,nvtx,osrt -s cpu: OSRT_API, COMPOSITE_EVENTS and SAMPLING_CALLCHAINS.
    ("h200_cpu_preprocess_host.sqlite.gz", "yyn yy nn n nn y yy"),
];

const NSYS_SHARED: &[(&str, &str)] = &[
    // No CUPTI_ACTIVITY_KIND_KERNEL or NVTX_EVENTS table; OS runtime and CPU sampling.
    (
        "weatherbench2_rtx4060_nsys2025.5_no_kernels.sqlite",
        "nnn yn nn n nn n yy",
    ),
    // --cuda-memory-usage: CUDA_GPU_MEMORY_USAGE_EVENTS, reserved totals only; NVTX step
    // ranges, no per-operator ones.
    ("h200_gpt_train_amp_clean.sqlite", "yyn yn nn n yn y nn"),
];

#[test]
fn nsys_exports_say_what_they_traced() {
    let mut files: Vec<(PathBuf, &str)> = NSYS
        .iter()
        .map(|(f, k)| (root().join("sample-traces/nsys").join(f), *k))
        .collect();
    if let Some(s) = shared() {
        files.extend(
            NSYS_SHARED
                .iter()
                .map(|(f, k)| (s.join("nsys").join(f), *k)),
        );
    }
    for (f, k) in files {
        let c = capture(&f);
        assert_eq!(kinds(&c), flags(k), "{}", f.display());
        assert!(!c.startup_hole, "{}", f.display());
        assert!(c.no_cpu_data.contains("-s cpu"));
    }
}

#[test]
fn nsys_threads_are_named_by_thread_names() {
    let n = |f: &str| capture(&root().join("sample-traces/nsys").join(f)).host_threads;
    assert_eq!(
        n("h200_cpu_preprocess_cuda.sqlite"),
        threads(&[
            (1459, 1459, Some("python3")),
            (1459, 1574, Some("pt_autograd_0")),
        ])
    );
    // OS runtime calls on thread 0 of the process, which ThreadNames does not name.
    assert_eq!(
        n("h200_sleep_log_osrt.sqlite"),
        threads(&[
            (1735, 0, None),
            (1735, 1735, Some("python3")),
            (1735, 1828, Some("cuda0000280000b")),
            (1735, 1832, Some("python3")),
            (1735, 1836, Some("cuda-EvtHandlr")),
            (1735, 1841, Some("python3")),
            (1735, 1842, Some("python3")),
            (1735, 1843, Some("python3")),
            (1735, 1847, Some("pt_autograd_0")),
            (1735, 1848, Some("pt_autograd_1")),
        ])
    );
}

#[test]
fn counter_logs_give_their_sampling_period() {
    let Some(s) = shared() else { return };
    let measured = Some(CounterPeriod {
        ns: 1_000_000_000,
        measured: true,
    });
    for (f, period) in [
        // -o DT: whole seconds, one a second (two steps of 2 s where dmon slipped).
        ("h200_dmon_s_pucvmet_o_DT.log", measured),
        ("xuesongtap_dmon_mutc_TD_blankline.log", measured),
        // --query-gpu -l 1: 1.000-1.016 s apart, median 1.000 s.
        ("h200_smi_query_gpu.csv", measured),
        // No Date/Time columns: nothing to measure.
        ("h200_dmon_default.log", Some(CounterPeriod::assumed())),
    ] {
        let c = capture(&s.join("dmon").join(f));
        assert_eq!(c.counter_period, period, "{f}");
        assert!(c.host_threads.is_empty() && !c.kernels, "{f}");
    }
}

#[test]
fn attached_logs_bring_their_period() {
    let Some(s) = shared() else { return };
    let mut t =
        load(&s.join("kineto/h200_gpt_train_gpu_bound_clean.pt.trace.json.gz")).expect("trace");
    let log = load(&s.join("dmon/h200_dmon_s_pucvmet_o_DT_gpu_bound.log")).expect("log");
    assert_eq!(t.meta.capture.counter_period, None);
    tracehound_parsers::session::attach(&mut t, &log).expect("aligned");
    assert_eq!(
        t.meta.capture.counter_period,
        log.meta.capture.counter_period
    );
    assert!(
        t.meta.capture.startup_hole,
        "the trace's own description stays"
    );
}
