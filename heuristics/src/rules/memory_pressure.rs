//! Memory: peak use close to the device's capacity (OOM risk, with the headroom), allocated
//! memory that grows step over step (a leak), `torch.cuda.empty_cache()` in the loop, and
//! out-of-memory events.
//!
//! Reads the caching allocator's samples (`[memory]` events of traces recorded with
//! `profile_memory=True`) and the device's memory size from the trace. The headroom is the
//! capacity less the peak *reserved* memory (what the allocator holds from the driver);
//! under 10% of the capacity is reported, because fragmentation, a longer sequence or a
//! larger batch then tips it into OOM. A leak is allocated memory at the end of each step
//! (the last sample of the step) that rises at every step but at most one, by at least
//! 64 MiB over the window (a steady loop returns to the same level every step; a leak of a
//! few MiB a step still reaches OOM, but is not told apart from caches warming up this early).
//! `empty_cache()` is found in the Python frames, with or without allocator samples. These
//! findings cost no GPU time now: their impact is 0 and their severity says how close the
//! failure is.

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Finding, Severity, fmt_bytes, metrics};
use crate::window::{device_memory, memory_devices};
use tracehound_parsers::HostKind;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "memory_pressure";

/// The rule.
pub struct MemoryPressure;

/// Headroom share of capacity below which peak use is reported.
const HEADROOM: f64 = 0.10;
/// Minimum growth over the window for a leak, bytes.
const LEAK_MIN_BYTES: i64 = 64 << 20;
/// Steps needed to call growth a trend.
const LEAK_STEPS: usize = 4;

impl Rule for MemoryPressure {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "peak memory close to capacity, allocated memory growing step over step, empty_cache in the loop, OOMs"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let mut out = Vec::new();
        // empty_cache() in the loop shows in the Python frames, with or without allocator
        // samples; the rest needs them (`profile_memory=True`).
        let devices = memory_devices(t);
        // Without a backward pass or an optimizer step the trace is inference, whose servers
        // hold memory on purpose.
        let training = cx.workload() == crate::phases::Workload::Training;
        for d in devices {
            // In time order: the model sorts the allocator events.
            let samples = device_memory(t, w, d);
            let capacity = t
                .meta
                .gpu(d)
                .and_then(|g| g.memory_bytes)
                .map(|b| b as i64);
            let peak_alloc = samples.iter().filter_map(|m| m.total_allocated.get()).max();
            let peak_res = samples.iter().filter_map(|m| m.total_reserved.get()).max();
            let ooms = samples.iter().filter(|m| m.oom).count();
            // Allocated at the end of each step in the window: the last sample inside it.
            let ends: Vec<(i64, i64)> = t
                .steps
                .iter()
                .filter(|s| s.start >= w.start && s.end <= w.end)
                .filter_map(|s| {
                    let k = samples.partition_point(|m| m.ts < s.end);
                    samples
                        .first(k)
                        .rev()
                        .take_while(|m| m.ts >= s.start)
                        .find_map(|m| m.total_allocated.get())
                        .map(|a| (s.number, a))
                })
                .collect();
            let headroom = match (capacity, peak_res.or(peak_alloc)) {
                (Some(c), Some(p)) if c > 0 => Some((c, p, c - p)),
                _ => None,
            };
            let growth = leak(&ends);
            if let Some((c, p, h)) = headroom
                && (h as f64) < HEADROOM * c as f64
            {
                let mut f = new_finding(
                    cx,
                    ID,
                    Some(d),
                    format!(
                        "GPU {d}: peak memory {} of {} ({:.1}%): {} headroom before out-of-memory",
                        fmt_bytes(p.max(0) as u64),
                        fmt_bytes(c as u64),
                        100.0 * p as f64 / c as f64,
                        fmt_bytes(h.max(0) as u64)
                    ),
                    0,
                    Confidence::High,
                    format!(
                        "peak reserved {}, peak allocated {}; the CUDA context and other processes need memory too; {} OOM events in the trace",
                        peak_res.map_or("?".into(), |b| fmt_bytes(b.max(0) as u64)),
                        peak_alloc.map_or("?".into(), |b| fmt_bytes(b.max(0) as u64)),
                        ooms
                    ),
                );
                f.subject = Some("headroom".into());
                f.severity = if (h as f64) < 0.05 * c as f64 || ooms > 0 {
                    Severity::High
                } else {
                    Severity::Medium
                };
                if training {
                    f.advice = vec![
                        "Cut activation memory: activation checkpointing (torch.utils.checkpoint) on the largest blocks, bf16 autocast, or a smaller micro-batch with gradient accumulation.".into(),
                        "Cut optimizer and weight memory: FSDP/ZeRO sharding, or a fused/8-bit optimizer; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces fragmentation near the limit.".into(),
                    ];
                } else {
                    // Inference servers reserve most of the memory on purpose (the KV cache):
                    // near the limit with no OOM is their design, not a problem to fix.
                    if ooms == 0 {
                        f.severity = Severity::Low;
                    }
                    f.advice = vec![
                        format!(
                            "No backward pass in the trace: this is inference. A server that preallocates its KV cache (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static, TensorRT-LLM's free_gpu_memory_fraction) holds most of the GPU's memory by design; {}",
                            if ooms == 0 {
                                "with no out-of-memory event here, lower that fraction only if other processes on this GPU need memory."
                            } else {
                                "out-of-memory events here mean the fraction leaves too little for activations: lower it, or the batch size or context length."
                            }
                        ),
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True reduces fragmentation near the limit.".into(),
                    ];
                }
                f.metrics = metrics([
                    ("capacity_bytes", c as f64),
                    ("peak_bytes", p as f64),
                    ("headroom_bytes", h as f64),
                    ("ooms", ooms as f64),
                ]);
                out.push(f);
            }
            if let Some((per_step, n)) = growth {
                let first = ends.first().map_or(0, |e| e.1);
                let last = ends.last().map_or(0, |e| e.1);
                let to_oom = headroom.map(|(_, _, h)| h.max(0) / per_step.max(1));
                let mut f = new_finding(
                    cx,
                    ID,
                    Some(d),
                    format!(
                        "GPU {d}: allocated memory grows {} per step ({} → {} over {n} steps): a leak",
                        fmt_bytes(per_step as u64),
                        fmt_bytes(first.max(0) as u64),
                        fmt_bytes(last.max(0) as u64)
                    ),
                    0,
                    Confidence::Medium,
                    format!(
                        "allocated at the end of each step rises at {} of {} step boundaries{}",
                        ends.windows(2).filter(|p| p[1].1 > p[0].1).count(),
                        n.saturating_sub(1),
                        to_oom.map_or(String::new(), |s| format!(
                            "; at this rate the headroom is gone in about {s} steps"
                        ))
                    ),
                );
                f.subject = Some("leak".into());
                f.severity = if to_oom.is_some_and(|s| s < 1000) {
                    Severity::High
                } else {
                    Severity::Medium
                };
                f.advice = vec![
                    "Something keeps tensors of every step alive: usually a loss or output appended to a list with its autograd graph. Keep loss.item() or loss.detach() instead, and check caches, hooks and metrics that hold GPU tensors.".into(),
                    "torch.cuda.memory._record_memory_history() plus a snapshot after a few steps names the allocation sites that grow.".into(),
                ];
                f.metrics = metrics([
                    ("growth_per_step_bytes", per_step as f64),
                    ("steps", n as f64),
                    ("first_bytes", first as f64),
                    ("last_bytes", last as f64),
                ]);
                out.push(f);
            }
        }
        if let Some(f) = empty_cache(cx) {
            out.push(f);
        }
        out
    }
}

/// Growth per step and the number of steps, when allocated-at-step-end rises at every step
/// boundary but at most one by a total of at least the leak minimum.
fn leak(ends: &[(i64, i64)]) -> Option<(i64, usize)> {
    if ends.len() < LEAK_STEPS {
        return None;
    }
    let rises = ends.windows(2).filter(|p| p[1].1 > p[0].1).count();
    let total = ends.last()?.1 - ends.first()?.1;
    (rises + 1 >= ends.len() - 1 && total >= LEAK_MIN_BYTES)
        .then(|| (total / (ends.len() as i64 - 1), ends.len()))
}

/// `torch.cuda.empty_cache()` called inside the steps (Python frames of traces with stacks):
/// it returns cached blocks to the driver, so the next step pays cudaMalloc again.
fn empty_cache(cx: &Ctx) -> Option<Finding> {
    let t = cx.trace;
    let w = &cx.window;
    let steps: Vec<_> = t
        .steps
        .iter()
        .filter(|s| s.start >= w.start && s.end <= w.end)
        .collect();
    // The frame's names, found in the string table (far smaller than the spans).
    let names = t
        .strings
        .matching(|n| n.ends_with(": empty_cache") && n.contains("torch/cuda/memory.py"));
    if !names.contains(&true) {
        return None;
    }
    let calls: Vec<_> = t
        .host_spans
        .iter()
        .filter(|h| {
            names.get(h.name as usize).copied().unwrap_or(false)
                && h.kind == HostKind::Python
                && h.start >= w.start
                && h.start < w.end
        })
        .collect();
    let in_steps = calls
        .iter()
        .filter(|h| steps.iter().any(|s| h.start >= s.start && h.start < s.end))
        .count();
    if steps.len() < 2 || in_steps < steps.len() / 2 {
        return None;
    }
    let time: i64 = calls.iter().map(|h| h.dur()).sum();
    let mut f = new_finding(
        cx,
        ID,
        None,
        format!(
            "torch.cuda.empty_cache() runs in the loop: {in_steps} calls in {} steps",
            steps.len()
        ),
        0,
        Confidence::High,
        format!(
            "{} host time inside the calls; every step then allocates from the driver again (cudaMalloc), which synchronises the device",
            crate::finding::fmt_ns(time)
        ),
    );
    f.subject = Some("empty_cache".into());
    f.severity = Severity::Low;
    f.advice = vec!["Remove empty_cache() from the loop: the caching allocator reuses freed blocks; if fragmentation is the worry, set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.".into()];
    f.metrics = metrics([("calls", in_steps as f64), ("host_ns", time as f64)]);
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::leak;

    #[test]
    fn growth_is_a_leak_only_when_steady_and_large() {
        let mb = 1 << 20;
        let rising: Vec<(i64, i64)> = (0..8).map(|k| (k, 1000 * mb + k * 128 * mb)).collect();
        assert_eq!(leak(&rising), Some((128 * mb, 8)));
        let flat: Vec<(i64, i64)> = (0..8).map(|k| (k, 1000 * mb + (k % 2) * mb)).collect();
        assert_eq!(leak(&flat), None);
        let small: Vec<(i64, i64)> = (0..8).map(|k| (k, 1000 * mb + k * mb)).collect();
        assert_eq!(leak(&small), None);
        assert_eq!(leak(&rising[..3]), None);
    }
}
