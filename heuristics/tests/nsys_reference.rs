//! NVIDIA's own tools are the reference for the Nsight Systems reader: for every H200 export,
//! tracehound's kernel and memory summaries equal the `nsys stats` CSVs
//! (`cuda_gpu_kern_sum`, `cuda_gpu_mem_time_sum`, `cuda_gpu_mem_size_sum`) row for row, and the
//! pageable copies issued by `cudaMemcpyAsync` match `nsys analyze`'s `cuda_memcpy_async`
//! section (which lists the 50 longest; the total was counted with SQL on the export:
//! memcpys with srcKind or dstKind 0 joined to runtime calls named `cudaMemcpyAsync%`).
//! Skips with a message when `../shared` is absent.

use std::collections::BTreeMap;
use std::path::PathBuf;
use tracehound_heuristics::tables::{kernel_summary, memory_summary};
use tracehound_parsers::{HostKind, NONE, load};

const EXPORTS: &[(&str, usize)] = &[
    ("h200_resnet_unpinned_sync", 770),
    ("h200_resnet_pinned_amp_clean", 754),
    ("h200_gpt_train_amp_clean", 754),
    ("h200_gpt_train_gpu_bound_clean", 903),
    ("h200_gpt_decode_launch_bound", 754),
];

fn shared() -> Option<PathBuf> {
    let p = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../../shared/sample-traces");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipping: ../shared/sample-traces is absent");
        None
    }
}

/// Minimal CSV reader: commas, double-quoted fields with "" escapes.
fn csv(text: &str) -> Vec<BTreeMap<String, String>> {
    let parse = |line: &str| {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut quoted = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '"' if quoted && chars.peek() == Some(&'"') => {
                    cur.push('"');
                    chars.next();
                }
                '"' => quoted = !quoted,
                ',' if !quoted => out.push(std::mem::take(&mut cur)),
                _ => cur.push(c),
            }
        }
        out.push(cur);
        out
    };
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = parse(lines.next().unwrap_or(""));
    lines
        .map(|l| header.iter().cloned().zip(parse(l)).collect())
        .collect()
}

fn int(s: &str) -> i64 {
    s.replace(',', "").parse::<f64>().unwrap() as i64
}

#[test]
fn kernel_and_memory_summaries_equal_nsys_stats() {
    let Some(dir) = shared() else { return };
    for (name, _) in EXPORTS {
        let t = load(&dir.join(format!("nsys/{name}.sqlite"))).unwrap();
        let ours: BTreeMap<String, _> = kernel_summary(&t, None)
            .into_iter()
            .map(|r| (r.name.clone(), r))
            .collect();
        let theirs = csv(&std::fs::read_to_string(
            dir.join(format!("reference/{name}.stats_cuda_gpu_kern_sum.csv")),
        )
        .unwrap());
        assert_eq!(ours.len(), theirs.len(), "{name}: kernel names");
        for row in &theirs {
            let k = &row["Name"];
            let r = ours
                .get(k)
                .unwrap_or_else(|| panic!("{name}: kernel {k} missing"));
            assert_eq!(r.instances as i64, int(&row["Instances"]), "{name}: {k}");
            assert_eq!(r.total_ns, int(&row["Total Time (ns)"]), "{name}: {k}");
            assert_eq!(r.min_ns, int(&row["Min (ns)"]), "{name}: {k}");
            assert_eq!(r.max_ns, int(&row["Max (ns)"]), "{name}: {k}");
            let med: f64 = row["Med (ns)"].parse().unwrap();
            assert!(
                (r.med_ns - med).abs() <= 0.5,
                "{name}: {k} median {} vs {med}",
                r.med_ns
            );
        }

        let mem: BTreeMap<String, _> = memory_summary(&t, None)
            .into_iter()
            .map(|r| (r.name.clone(), r))
            .collect();
        let time = csv(&std::fs::read_to_string(
            dir.join(format!("reference/{name}.stats_cuda_gpu_mem_time_sum.csv")),
        )
        .unwrap());
        let size = csv(&std::fs::read_to_string(
            dir.join(format!("reference/{name}.stats_cuda_gpu_mem_size_sum.csv")),
        )
        .unwrap());
        assert_eq!(mem.len(), time.len(), "{name}: memory operations");
        for row in &time {
            let op = &row["Operation"];
            let r = mem
                .get(op)
                .unwrap_or_else(|| panic!("{name}: {op} missing"));
            assert_eq!(r.instances as i64, int(&row["Count"]), "{name}: {op}");
            assert_eq!(r.total_ns, int(&row["Total Time (ns)"]), "{name}: {op}");
            assert_eq!(r.min_ns, int(&row["Min (ns)"]), "{name}: {op}");
            assert_eq!(r.max_ns, int(&row["Max (ns)"]), "{name}: {op}");
        }
        for row in &size {
            let op = &row["Operation"];
            let mb: f64 = row["Total (MB)"].parse().unwrap();
            let ours_mb = mem[op].bytes as f64 / 1e6;
            assert!(
                (ours_mb - mb).abs() < 0.0006,
                "{name}: {op} {ours_mb} MB vs {mb} MB"
            );
        }
    }
}

#[test]
fn pageable_async_copies_match_nsys_analyze() {
    let Some(dir) = shared() else { return };
    for (name, total) in EXPORTS {
        let t = load(&dir.join(format!("nsys/{name}.sqlite"))).unwrap();
        let mut durations: Vec<i64> = t
            .gpu_ops
            .iter()
            .enumerate()
            .filter(|(_, o)| o.is_pageable_copy())
            .filter(|(i, _)| {
                let l = t.index.op_launch[*i];
                l != NONE
                    && t.host_spans[l as usize].kind == HostKind::Runtime
                    && t.str(t.host_spans[l as usize].name)
                        .starts_with("cudaMemcpyAsync")
            })
            .map(|(_, o)| o.dur())
            .collect();
        assert_eq!(
            durations.len(),
            *total,
            "{name}: pageable cudaMemcpyAsync copies"
        );
        durations.sort_unstable_by(|a, b| b.cmp(a));
        let text = std::fs::read_to_string(dir.join(format!("reference/{name}.nsys-analyze.txt")))
            .unwrap();
        let section = text
            .split("(cuda_memcpy_async):")
            .nth(1)
            .and_then(|s| s.split("Processing [").next())
            .unwrap();
        let listed: Vec<i64> = section
            .lines()
            .filter(|l| l.contains("Pageable"))
            .map(|l| int(l.split_whitespace().next().unwrap()))
            .collect();
        assert_eq!(listed.len(), 50.min(*total), "{name}");
        assert_eq!(
            &durations[..listed.len()],
            &listed[..],
            "{name}: the 50 longest"
        );
    }
}
