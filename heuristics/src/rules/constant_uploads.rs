//! Python numbers made device tensors inside the step (`torch.tensor(c, device="cuda")`, a
//! scalar's `.to("cuda")`): each a copy of a few bytes from pageable memory, and a wait for the
//! stream after it. The copies are found by [`crate::uploads`]; the impact is the GPU idle they
//! cause: right before the copies where the GPU waited for a slow host (launch_bound's kind of
//! wait), and after their syncs drained the queue (sync_stalls' kind); both rules leave these
//! waits to this finding where it reports. Measured under the profiler, which slows every call
//! it records. Reported from 1% of the window and 8 copies a step.

use super::Rule;
use crate::context::{Ctx, new_finding, rows_with_frames};
use crate::finding::{Confidence, Finding, fmt_ns, metrics};
use crate::names::{name_or, span_name_id};
use std::collections::BTreeMap;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "constant_uploads";

/// The rule.
pub struct ConstantUploads;

impl Rule for ConstantUploads {
    fn needs_whole_timeline(&self) -> bool {
        true
    }

    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "Python numbers made GPU tensors inside the step (torch.tensor(c, device=\"cuda\"), a scalar's .to(\"cuda\")): copies of a few bytes, each followed by a wait for the stream, whose launches and syncs the GPU waits for"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let steps = cx.window.steps_in(t);
        // Launch waits that another finding prices stay its (a copy inside a single-tensor
        // optimizer's step is optimizer_overhead's).
        let handed = super::handed(cx);
        let mut out = Vec::new();
        for dev in cx.constant_uploads().devices.iter().filter(|d| d.reported) {
            let d = dev.device;
            let mut groups: BTreeMap<(String, Option<String>), (u64, i64)> = BTreeMap::new();
            // (idle, GPU ops) before the copies, and after the drains.
            let (mut launch, mut drained) = ((0i64, 0usize), (0i64, 0usize));
            let first_drained = dev.waits.len() - dev.drained;
            for (k, &(op, span, gap)) in dev.waits.iter().enumerate() {
                let before_copy = k < first_drained;
                // launch_bound hands a launch wait to these first, so they keep it (the waits
                // after a drain are sync_stalls', which hands them to this finding alone).
                if before_copy
                    && (handed.to_optimizer(op)
                        || handed.to_recomputation(d, op)
                        || handed.to_loop(d, op))
                {
                    continue;
                }
                let part = if before_copy {
                    &mut launch
                } else {
                    &mut drained
                };
                part.0 += gap;
                part.1 += 1;
                let g = groups
                    .entry((
                        name_or(t, span_name_id(t, span), "(no operator)").to_string(),
                        t.user_frame(span).map(str::to_string),
                    ))
                    .or_default();
                g.0 += 1;
                g.1 += gap;
            }
            let waits_ns = launch.0 + drained.0;
            if launch.1 + drained.1 == 0 {
                continue;
            }
            // The rows, largest first: the first names the operator and line in the title.
            let rows = rows_with_frames(cx, groups, waits_ns);
            let (op, frame) = rows.first().map_or(("(no operator)", String::new()), |r| {
                (
                    r.label.as_str(),
                    r.python_frame
                        .as_deref()
                        .map(|f| format!(" at {f}"))
                        .unwrap_or_default(),
                )
            });
            let a_step = dev
                .copies
                .checked_div(steps)
                .map(|n| {
                    format!(
                        " ({n} copies and {} a step)",
                        fmt_ns(waits_ns / steps as i64)
                    )
                })
                .unwrap_or_default();
            let mut f = new_finding(
                cx,
                ID,
                Some(d),
                format!(
                    "Python numbers copied to GPU {d} as tensors: {} copies of at most {} bytes from pageable memory, most by {op}{frame}; the GPU idled {} waiting on them{a_step}",
                    dev.copies,
                    crate::uploads::MAX_BYTES,
                    fmt_ns(waits_ns)
                ),
                waits_ns,
                Confidence::Medium,
                {
                    let mut parts = Vec::new();
                    if launch.1 > 0 {
                        parts.push(format!(
                            "{} before {} of the copies, which started with nothing queued",
                            fmt_ns(launch.0),
                            launch.1
                        ));
                    }
                    if drained.1 > 0 {
                        parts.push(format!(
                            "{} before {} operations launched after the copies' waits had drained the queue",
                            fmt_ns(drained.0),
                            drained.1
                        ));
                    }
                    format!(
                        "{} host-to-device copies of at most {} bytes launched by framework operators, each from pageable memory and, without non_blocking=True, followed by a wait for the stream (cudaStreamSynchronize); the GPU idled {}{}",
                        dev.copies,
                        crate::uploads::MAX_BYTES,
                        parts.join(", and "),
                        profiled_note(cx)
                    )
                },
            );
            f.breakdown = rows;
            f.advice = vec![
                "Pass a Python number as it is: x * c, torch.where(m, x, c) and a loss weight w * loss need no device tensor and no copy. Where a device tensor is needed, torch.full((), c, device=\"cuda\") fills it on the GPU with no copy from the host, or build such constants once, before the loop, and reuse them.".to_string(),
                "A value that changes every step (a learning rate, a schedule's weight) can live on the GPU and be updated in place there (t.fill_(c)), or be copied once a step for all of them together (one torch.tensor([...], pin_memory=True).to(device, non_blocking=True)).".to_string(),
            ];
            f.metrics = metrics([
                ("launch_waits_ns", launch.0 as f64),
                ("drained_ns", drained.0 as f64),
                ("copies", dev.copies as f64),
                ("waited_copies", launch.1 as f64),
                ("drained_waits", drained.1 as f64),
            ]);
            out.push(f);
        }
        out
    }
}

/// Under the PyTorch profiler, which slows the host: the waits may be shorter outside it or
/// longer. A faster host waits less for each copy's launch, but where the GPU then gets ahead,
/// each copy's sync throws away the work queued by then, which a capture whose host is the
/// bound does not show (the fifteenth blind set's decode loop lost 55 µs a token outside the
/// profiler, where its capture shows 15). Empty for other captures.
fn profiled_note(cx: &Ctx) -> String {
    if crate::starved::profiler_note(cx).is_empty() {
        return String::new();
    }
    "; measured under the profiler, which slows every call it records: outside it the host waits less for each copy's launch, but where the GPU then gets ahead each copy's sync throws away the work queued by then, which this capture cannot show, so time a step each way before sizing the gain".to_string()
}
