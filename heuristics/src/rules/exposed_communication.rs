//! Exposed communication: collective kernels (NCCL, RCCL) running while no other GPU work
//! overlaps them on the same device. Data-parallel training hides gradient all-reduces behind
//! the backward pass; time they do not hide is step time. Works on one rank's trace: it says
//! how much communication is exposed, and where the profiler records each collective's
//! message, which of the most exposed took longer than their bytes could on any link (a wait
//! for a late peer, not a transfer); `analyze DIR` on the job's ranks tells who was late.

use super::Rule;
use crate::context::Ctx;
use crate::finding::{Confidence, Finding, Instance, Row, Severity, fmt_bytes, fmt_ns, metrics};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "exposed_communication";

/// The rule.
pub struct ExposedCommunication;

/// From this share of the window, one collective is named in the title.
const SINGLE_SHARE: f64 = 0.1;

/// Below this share of the window, exposed communication is not reported: the last bucket's
/// all-reduce after backward is always exposed, typically well under 1% of a step.
const MIN_SHARE: f64 = 0.01;

impl Rule for ExposedCommunication {
    fn needs_whole_timeline(&self) -> bool {
        true
    }

    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "collective communication kernels that no compute overlaps"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let w = &cx.window;
        let steps = cx.trace.steps.len().max(1) as i64;
        let mut out = Vec::new();
        for e in cx.exposure() {
            let share = w.share(e.exposed_ns);
            if share < MIN_SHARE {
                continue;
            }
            let hidden = e.collective_ns - e.exposed_ns;
            let t = cx.trace;
            // One collective that holds a large share alone is a wait on its own (a peer that
            // arrived late, a transfer that stalled), not a pattern: the title names it.
            let waits = &e.waits;
            let waited = |i: u32| waits.iter().any(|x| x.op == i);
            let single = e
                .longest
                .first()
                .filter(|l| w.share(l.3) >= SINGLE_SHARE)
                .map(|l| {
                    let op = &t.gpu_ops[l.0 as usize];
                    format!(
                        "; one {} holds {} ({:.0}% of the window){}",
                        crate::collectives::collective_kind(t.str(op.name)),
                        fmt_ns(l.3),
                        100.0 * w.share(l.3),
                        if waited(l.0) {
                            format!(
                                " for a {} message: waiting for another rank",
                                fmt_bytes(op.bytes)
                            )
                        } else {
                            String::new()
                        }
                    )
                })
                .unwrap_or_default();
            let waiting_ns: i64 = waits.iter().map(|x| x.wait_ns).sum();
            let sized = e.longest.iter().any(|l| t.gpu_ops[l.0 as usize].bytes > 0);
            let why = match waits.first() {
                Some(top) => {
                    let op = &t.gpu_ops[top.op as usize];
                    let kind = crate::collectives::collective_kind(t.str(op.name));
                    let relative = waits.iter().filter(|x| x.reference.is_some()).count();
                    let mut how = Vec::new();
                    if let Some((rate, bytes)) = waits.iter().find_map(|x| x.reference) {
                        how.push(format!(
                            "{relative} ran at under half the rate the fastest of their kind of at least {} reached here ({:.1} GB/s over {}: what the link showed it carries)",
                            fmt_bytes(crate::collectives::RATE_BYTES),
                            rate,
                            fmt_bytes(bytes)
                        ));
                    }
                    if relative < waits.len() {
                        how.push(format!(
                            "{} took longer than moving their message could take on any link (1 ms plus twice the message at 1 GB/s)",
                            waits.len() - relative
                        ));
                    }
                    format!(
                        "; of the collectives, {}: {} of their time beyond that is waiting for another rank (a straggler, or work before the collective that differs across ranks; the fastest may have waited too, so this is a lower bound); the longest wait: {kind} of {} in {}; run tracehound analyze on the job's directory to see who was late",
                        how.join(", and "),
                        fmt_ns(waiting_ns),
                        fmt_bytes(op.bytes),
                        fmt_ns(op.dur())
                    )
                }
                None if sized => "; their recorded messages could take that long on a slow link, so their sizes do not show a wait, and with one rank's trace a late peer and slow transfers look alike: run tracehound analyze on the job's directory to see who waits".to_string(),
                None => "; with one rank's trace a late peer and slow transfers look alike: run tracehound analyze on the job's directory to see who waits".to_string(),
            };
            out.push(Finding {
                rule: ID,
        subject: None,
                id: String::new(),
                title: format!(
                    "GPU {}: {} of collective communication with no compute beside it ({}{:.0}% of the window){single}",
                    e.device,
                    fmt_ns(e.exposed_ns),
                    if cx.trace.steps.is_empty() {
                        String::new()
                    } else {
                        format!("{} per step, ", fmt_ns(e.exposed_ns / steps))
                    },
                    100.0 * share
                ),
                severity: Severity::from_share(share),
                impact_ns: e.exposed_ns,
                impact_share: share,
                confidence: Confidence::Medium,
                device: Some(e.device),
                evidence: format!(
                    "collective kernels {} in the window, {} of it overlapped by compute ({:.0}%){why}",
                    fmt_ns(e.collective_ns),
                    fmt_ns(hidden),
                    100.0 * hidden as f64 / e.collective_ns.max(1) as f64
                ),
                breakdown: e
                    .by_kind
                    .iter()
                    .map(|&(kind, ns, n)| Row {
                        cause: None,
                        share: Some(ns as f64 / e.exposed_ns.max(1) as f64),
                        label: format!("{kind} exposed"),
                        count: n,
                        time_ns: ns,
                        bytes: None,
                        python_frame: None,
                    })
                    .collect(),
                instances: e
                    .longest
                    .iter()
                    .take(cx.config.max_instances)
                    .map(|&(i, a, b, own)| {
                        let op = &t.gpu_ops[i as usize];
                        let outer = t.index.op_outer_cpu_op[i as usize];
                        Instance {
                            start_ns: a,
                            dur_ns: b - a,
                            offset_ms: w.offset_ms(a),
                            what: format!(
                                "{} exposed of {} in {}",
                                fmt_ns(own),
                                fmt_ns(b - a),
                                crate::names::short_name(t.str(op.name), 60)
                            ),
                            cpu_op: (outer != tracehound_parsers::NONE)
                                .then(|| crate::names::span_name(t, outer, "").to_string()),
                            python_frame: t.user_frame(t.index.op_launch[i as usize]).map(str::to_string),
                        }
                    })
                    .collect(),
                advice: vec![advice(cx.workload())],
                metrics: metrics([
                    ("collective_ns", e.collective_ns as f64),
                    ("exposed_ns", e.exposed_ns as f64),
                    ("exposed_per_step_ns", (e.exposed_ns / steps) as f64),
                    ("waiting_ns", waiting_ns as f64),
                ]),
            });
        }
        out
    }
}

/// What to do about exposed collectives: training overlaps gradient communication with
/// backward; inference's tensor-parallel collectives sit between the layers that need
/// their result, so there the collective itself must get cheaper.
fn advice(workload: crate::phases::Workload) -> String {
    if workload == crate::phases::Workload::Inference {
        "No backward pass in the trace: these are inference collectives (tensor- or expert-parallel), which the next layer waits for and which rarely overlap. Make each one cheaper: a lower tensor-parallel degree (or expert/data parallelism), a one-shot or symmetric-memory all-reduce for small messages (vLLM's custom all-reduce, NCCL NVLS), the all-reduce fused with the norm after it, or two micro-batches overlapping one's communication with the other's compute.".to_string()
    } else {
        "Overlap communication with compute: let DistributedDataParallel all-reduce gradient buckets during backward instead of all-reducing gradients after it (no manual dist.all_reduce loop over parameters; tune bucket_cap_mb so the first bucket starts early), use FSDP/ZeRO prefetching, and check that no synchronising call sits between backward and the optimizer step.".to_string()
    }
}
