//! Caching-allocator fragmentation and churn, from the allocator's own events (Kineto
//! `[memory]` with `Total Allocated` / `Total Reserved`, `[OutOfMemory]`) and the
//! `cudaMalloc` / `cudaFree` calls in the steady state.
//!
//! Per device: reserved vs allocated over the window, the share of reserved memory that was
//! never allocated while reserved stood at its peak (memory held by the cache but unusable
//! for the requests that came), out-of-memory events with the free-but-reserved memory at that
//! moment, and `cudaMalloc`/`cudaFree` after the first profiled step: a warmed-up caching
//! allocator should not call them, and `cudaFree` synchronizes the device.
//!
//! Impact: host time in those calls, plus the whole step for each step that hit an OOM (its
//! work was lost).

use super::Rule;
use crate::context::Ctx;
use crate::finding::{Confidence, Finding, Instance, Row, Severity, fmt_bytes, fmt_ns, metrics};
use tracehound_parsers::{HostKind, HostSpan};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "allocator_fragmentation";

/// The rule.
pub struct AllocatorFragmentation;

impl Rule for AllocatorFragmentation {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "caching-allocator fragmentation (reserved but unallocated memory), OOMs and cudaMalloc/cudaFree churn in the steady state"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let devices = crate::window::devices_of(
            t.memory.iter().filter(|m| m.total_reserved.get().is_some()),
        );
        devices
            .into_iter()
            .filter_map(|d| device_finding(cx, d))
            .collect()
    }
}

fn device_finding(cx: &Ctx, device: i32) -> Option<Finding> {
    let t = cx.trace;
    let w = &cx.window;
    let samples = crate::window::device_memory(t, w, device);
    let peak_reserved = samples.iter().filter_map(|m| m.total_reserved.get()).max()?;
    if peak_reserved <= 0 {
        return None;
    }
    let peak_allocated = samples
        .iter()
        .filter_map(|m| m.total_allocated.get())
        .max()
        .unwrap_or(0);
    let alloc_at_peak = samples
        .iter()
        .filter(|m| m.total_reserved.get() == Some(peak_reserved))
        .filter_map(|m| m.total_allocated.get())
        .max()
        .unwrap_or(0);
    // Nsight Systems sees cudaMalloc/cudaFree (reserved) but not the caching allocator's own
    // allocations: without allocated totals there is no unallocated share to judge.
    let has_allocated = samples.iter().any(|m| m.total_allocated.get().is_some());
    let unalloc = if has_allocated {
        (peak_reserved - alloc_at_peak).max(0)
    } else {
        0
    };
    let unalloc_share = unalloc as f64 / peak_reserved as f64;
    let ooms: Vec<_> = samples.iter().filter(|m| m.oom).collect();
    // Steady state: after the first profiled step. Without two steps there is none: a
    // window of one pass (or no step markers) cannot tell the allocator's growth from churn,
    // so its cudaMalloc/cudaFree calls are left to the idle-gap attribution.
    let steady_from = match t.steps.first() {
        Some(s) if t.steps.len() > 1 => s.end,
        _ => i64::MAX,
    };
    let (mut mallocs, mut frees, mut call_ns) = (0u64, 0u64, 0i64);
    let mut calls: Vec<(i64, i64, String)> = Vec::new();
    // No steady state in the window (one step, none): no call counts, and no pass.
    let spans: &[HostSpan] = if steady_from <= w.end {
        &t.host_spans
    } else {
        &[]
    };
    // What each name's API is, by string id (1 an allocation, 2 a free): worked out once per
    // name, not once per runtime call of millions.
    let names = if spans.is_empty() { 0 } else { t.strings.len() };
    let api: Vec<u8> = (0..names as u32)
        .map(|id| match t.api_name(id) {
            "cudaMalloc" | "hipMalloc" => 1,
            "cudaFree" | "hipFree" => 2,
            _ => 0,
        })
        .collect();
    for s in spans {
        if !matches!(s.kind, HostKind::Runtime | HostKind::Driver)
            || s.start < steady_from
            || s.start > w.end
        {
            continue;
        }
        match api.get(s.name as usize) {
            Some(1) => mallocs += 1,
            Some(2) => frees += 1,
            _ => continue,
        }
        call_ns += s.dur();
        calls.push((s.dur(), s.start, t.api_name(s.name).to_string()));
    }
    let mut lost_steps: Vec<(i64, i64)> = Vec::new();
    for o in &ooms {
        if let Some(st) = t.steps.iter().find(|s| o.ts >= s.start && o.ts <= s.end)
            && !lost_steps.contains(&(st.start, st.end))
        {
            lost_steps.push((st.start, st.end));
        }
    }
    let lost_ns: i64 = lost_steps.iter().map(|(s, e)| e - s).sum();
    // Reserved-but-unused memory alone costs no time; report it (as info) only when it is large.
    let fragmented = unalloc_share >= cx.config.fragmentation_share && unalloc >= 1 << 30;
    if ooms.is_empty() && frees == 0 && mallocs == 0 && !fragmented {
        return None;
    }
    let impact = call_ns + lost_ns;
    let share = w.share(impact);
    let mut severity = Severity::from_share(share);
    if !ooms.is_empty() {
        severity = Severity::High;
    } else if frees > 0 {
        severity = severity.max(Severity::Medium);
    } else if mallocs > 0 {
        severity = severity.max(Severity::Low);
    }
    // Spread of allocation sizes: distinct sizes among allocations of 1 MiB and more.
    let mut sizes: Vec<i64> = samples
        .iter()
        .filter(|m| !m.oom && m.bytes >= 1 << 20)
        .map(|m| m.bytes)
        .collect();
    sizes.sort_unstable();
    let n_sizes = sizes.len();
    sizes.dedup();
    let mut instances: Vec<Instance> = ooms
        .iter()
        .map(|o| {
            let reserved = o.total_reserved.get().unwrap_or(0);
            let allocated = o.total_allocated.get().unwrap_or(0);
            Instance {
                start_ns: o.ts,
                dur_ns: 0,
                offset_ms: w.offset_ms(o.ts),
                what: format!(
                    "out of memory: a {} request failed with {} reserved but unallocated ({} reserved, {} allocated)",
                    fmt_bytes(o.bytes.max(0) as u64),
                    fmt_bytes((reserved - allocated).max(0) as u64),
                    fmt_bytes(reserved.max(0) as u64),
                    fmt_bytes(allocated.max(0) as u64)
                ),
                cpu_op: None,
                python_frame: None,
            }
        })
        .collect();
    calls.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (dur, start, name) in calls
        .iter()
        .take(cx.config.max_instances.saturating_sub(instances.len()))
    {
        instances.push(Instance {
            start_ns: *start,
            dur_ns: *dur,
            offset_ms: w.offset_ms(*start),
            what: format!("{name} in the steady state"),
            cpu_op: None,
            python_frame: None,
        });
    }
    instances.truncate(cx.config.max_instances);
    let mut breakdown = vec![Row {
        cause: None,
        share: None,
        label: if has_allocated {
            format!(
                "reserved peak {} / allocated peak {}",
                fmt_bytes(peak_reserved as u64),
                fmt_bytes(peak_allocated.max(0) as u64)
            )
        } else {
            format!(
                "reserved peak {} / allocated peak unknown",
                fmt_bytes(peak_reserved as u64)
            )
        },
        count: samples.len() as u64,
        time_ns: 0,
        bytes: Some(peak_reserved as u64),
        python_frame: None,
    }];
    if has_allocated {
        breakdown.push(Row {
            cause: None,
            share: None,
            label: format!(
                "reserved but unallocated at the reserved peak: {:.0}%",
                100.0 * unalloc_share
            ),
            count: 0,
            time_ns: 0,
            bytes: Some(unalloc as u64),
            python_frame: None,
        });
    }
    if mallocs + frees > 0 {
        breakdown.push(Row {
            cause: None,
            share: None,
            label: format!("cudaMalloc ×{mallocs}, cudaFree ×{frees} after the first step"),
            count: mallocs + frees,
            time_ns: call_ns,
            bytes: None,
            python_frame: None,
        });
    }
    if !ooms.is_empty() {
        breakdown.push(Row {
            cause: None,
            share: None,
            label: format!("steps lost to out-of-memory errors: {}", lost_steps.len()),
            count: ooms.len() as u64,
            time_ns: lost_ns,
            bytes: None,
            python_frame: None,
        });
    }
    let title = if !ooms.is_empty() {
        format!(
            "GPU {device}: {} out-of-memory error(s) with {:.0}% of reserved memory unallocated: fragmentation",
            ooms.len(),
            100.0 * unalloc_share
        )
    } else if frees > 0 || mallocs > 0 {
        format!(
            "GPU {device}: caching allocator churns in the steady state: {mallocs} cudaMalloc, {frees} cudaFree after the first step"
        )
    } else {
        format!(
            "GPU {device}: {:.0}% of reserved memory ({}) never allocated at the reserved peak",
            100.0 * unalloc_share,
            fmt_bytes(unalloc as u64)
        )
    };
    let mut advice = vec![
        "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: segments grow in place instead of splitting into blocks that variable-size requests cannot reuse.".to_string(),
    ];
    if n_sizes > 0 && sizes.len() * 4 > n_sizes {
        advice.push("Allocation sizes vary from step to step: pad or bucket batch and sequence lengths to a few fixed shapes so freed blocks fit the next requests.".to_string());
    }
    if frees > 0 {
        advice.push("cudaFree in the steady state means the allocator hit its limit and released cached blocks (which synchronizes the device): lower peak memory (activation checkpointing, smaller micro-batches) or raise the limit (torch.cuda.set_per_process_memory_fraction), and avoid torch.cuda.empty_cache() in the loop.".to_string());
    }
    // Nsight Systems sees only what the caching allocator reserves from the driver.
    let allocated_text = if has_allocated {
        format!(
            "allocated at that peak at most {} ({:.0}% unallocated)",
            fmt_bytes(alloc_at_peak.max(0) as u64),
            100.0 * unalloc_share
        )
    } else {
        "allocated memory unknown (the trace records only what the allocator reserved from the driver, not its own allocations)".to_string()
    };
    Some(Finding {
        rule: ID,
        subject: None,
        id: String::new(),
        title,
        severity,
        impact_ns: impact,
        impact_share: share,
        confidence: if ooms.is_empty() {
            Confidence::Medium
        } else {
            Confidence::High
        },
        device: Some(device),
        evidence: format!(
            "reserved peak {}, {}; {} OOM; cudaMalloc ×{mallocs} / cudaFree ×{frees} after step 1 ({}); {} distinct sizes among {} allocations ≥ 1 MiB",
            fmt_bytes(peak_reserved as u64),
            allocated_text,
            ooms.len(),
            fmt_ns(call_ns),
            sizes.len(),
            n_sizes
        ),
        breakdown,
        instances,
        advice,
        metrics: metrics([
            ("reserved_peak", peak_reserved as f64),
            ("allocated_peak", peak_allocated as f64),
            ("unallocated_at_peak_share", unalloc_share),
            ("ooms", ooms.len() as f64),
            ("steady_cuda_malloc", mallocs as f64),
            ("steady_cuda_free", frees as f64),
            ("steady_call_ns", call_ns as f64),
            ("lost_steps", lost_steps.len() as f64),
        ]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TB;
    use tracehound_parsers::{GpuOpKind, MemorySample, Trace};

    const GIB: i64 = 1 << 30;

    fn sample(ts: i64, alloc: i64, reserved: i64, oom: bool) -> MemorySample {
        MemorySample {
            ts,
            device: 0,
            addr: 0,
            bytes: if oom { GIB } else { 1 << 20 },
            total_allocated: Some(alloc).into(),
            total_reserved: Some(reserved).into(),
            oom,
        }
    }

    fn check(t: &Trace) -> Vec<Finding> {
        crate::testutil::check(&AllocatorFragmentation, t)
    }

    fn base() -> TB {
        let mut b = TB::new();
        b.span(HostKind::Annotation, "ProfilerStep#0", 0, 1_000_000)
            .span(HostKind::Annotation, "ProfilerStep#1", 1_000_000, 2_000_000)
            .op(GpuOpKind::Kernel, "k", 7, 0, 2_000_000, None);
        b
    }

    #[test]
    fn a_warm_cache_is_quiet() {
        let mut b = base();
        b.t.memory = vec![
            sample(10, 8 * GIB, 9 * GIB, false),
            sample(20, 2 * GIB, 9 * GIB, false),
        ];
        assert!(check(&b.build()).is_empty());
    }

    #[test]
    fn oom_with_free_reserved_memory_is_high() {
        let mut b = base();
        b.t.memory = vec![
            sample(10, 4 * GIB, 10 * GIB, false),
            sample(1_500_000, 6 * GIB, 10 * GIB, true),
        ];
        let f = check(&b.build());
        assert_eq!(f[0].severity, Severity::High);
        assert_eq!(f[0].metrics["ooms"], 1.0);
        assert_eq!(f[0].metrics["lost_steps"], 1.0);
        assert_eq!(
            f[0].impact_ns, 1_000_000,
            "the step that hit the OOM is lost"
        );
        assert!((f[0].metrics["unallocated_at_peak_share"] - 0.4).abs() < 1e-9);
    }

    #[test]
    fn cuda_free_after_the_first_step_is_churn() {
        let mut b = base();
        b.span(HostKind::Runtime, "cudaMalloc", 100, 200)
            .span(HostKind::Runtime, "cudaFree", 1_200_000, 1_300_000)
            .span(HostKind::Runtime, "cudaMalloc", 1_400_000, 1_450_000);
        b.t.memory = vec![sample(10, 4 * GIB, 5 * GIB, false)];
        let f = check(&b.build());
        assert_eq!(f[0].metrics["steady_cuda_free"], 1.0);
        assert_eq!(f[0].metrics["steady_cuda_malloc"], 1.0);
        assert_eq!(f[0].impact_ns, 150_000);
        assert_eq!(f[0].severity, Severity::Medium);
    }
}
