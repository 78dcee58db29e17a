//! Short GPU gaps after host synchronisations: the host blocked in a synchronising call
//! (`aten::nonzero` under a boolean-mask index, `.item()`, `.cpu()`, a pageable copy), the
//! GPU ran out of queued work while it waited, and every kernel after it then waited for its
//! own launch. Each such gap is below the idle-gap threshold (the idle_gaps rule names the
//! longer ones) and would read as launch overhead, but faster launches (CUDA graphs) cannot
//! remove it: the sync empties the queue, and a graph cannot capture a synchronisation.
//!
//! The starved kernels come from [`crate::starved`]; the gaps of those whose queue a sync
//! drained are grouped by the operator that synchronised (outermost and innermost) and the
//! user's Python frame around it. Reported from 3% of the window, like launch_bound.

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Finding, Instance, Row, fmt_ns, metrics};
use crate::names::span_name;
use std::collections::BTreeMap;
use tracehound_parsers::{HostKind, NONE};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "sync_stalls";

/// The rule.
pub struct SyncStalls;

/// Drained idle, as a share of the window, from which the rule reports (launch_bound's).
const MIN_SHARE: f64 = 0.03;

/// One synchronising place: the operators around the sync call and the Python frame.
#[derive(Debug, Default)]
struct Place {
    syncs: std::collections::BTreeSet<u32>,
    gaps: u64,
    idle_ns: i64,
    frame: Option<String>,
    worst: (i64, i64, i64),
}

impl Rule for SyncStalls {
    fn needs_whole_timeline(&self) -> bool {
        true
    }

    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "short GPU gaps after a host synchronisation drained the queue, by the operator and line that synchronised"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let mut out = Vec::new();
        for dev in cx.starved() {
            let d = dev.device;
            let mut places: BTreeMap<String, Place> = BTreeMap::new();
            let (mut total, mut n) = (0i64, 0u64);
            let mut syncs = std::collections::BTreeSet::new();
            for s in dev.drained() {
                let call = s.drained_by;
                let outer = t.outermost_cpu_op(call);
                let inner = t.enclosing(call, HostKind::CpuOp);
                let api = t.api_name(t.host_spans[call as usize].name);
                let ops = match (outer, inner) {
                    (NONE, _) => String::new(),
                    (o, i) if i == o || i == NONE => span_name(t, o, "").to_string(),
                    (o, i) => format!("{} › {}", span_name(t, o, ""), span_name(t, i, "")),
                };
                let label = if ops.is_empty() {
                    api.to_string()
                } else {
                    format!("{ops} ({api})")
                };
                let p = places.entry(label).or_default();
                if p.frame.is_none() {
                    p.frame = t.user_frame(call).map(str::to_string);
                }
                p.syncs.insert(call);
                syncs.insert(call);
                p.gaps += 1;
                p.idle_ns += s.gap_ns;
                if s.gap_ns > p.worst.1 {
                    p.worst = (s.idle_from(t), s.gap_ns, i64::from(s.op));
                }
                total += s.gap_ns;
                n += 1;
            }
            if w.share(total) < MIN_SHARE {
                continue;
            }
            let mut ranked: Vec<(String, Place)> = places.into_iter().collect();
            ranked.sort_by(|a, b| b.1.idle_ns.cmp(&a.1.idle_ns).then(a.0.cmp(&b.0)));
            let (top_label, top) = &ranked[0];
            let at = top
                .frame
                .as_deref()
                .map(|f| format!(" at {f}"))
                .unwrap_or_default();
            let steps = w.steps_in(t);
            // "Per step" only where the window has steps.
            let rate = if steps == 0 {
                format!("{} syncs", top.syncs.len())
            } else {
                format!(
                    "{} syncs per step",
                    fmt_count(top.syncs.len() as f64 / steps as f64)
                )
            };
            let mut f = new_finding(
                cx,
                ID,
                Some(d),
                format!(
                    "GPU {d} idles after host syncs: {} in {n} short gaps after {} syncs that drained the queue, most after {top_label}{at} ({rate})",
                    fmt_ns(total),
                    syncs.len()
                ),
                total,
                Confidence::High,
                format!(
                    "each gap follows a synchronising call on the launching thread that was still blocked when the GPU ran out of work (returned within {} of it): the host then had to launch the next kernels onto an empty queue; gaps ≥ {} are in idle_gaps; launch_bound leaves these out",
                    fmt_ns(crate::starved::DRAIN_SLACK_NS),
                    fmt_ns(cx.config.gap_threshold_ns)
                ),
            );
            f.breakdown = ranked
                .iter()
                .take(cx.config.max_rows)
                .map(|(label, p)| Row {
                    label: label.clone(),
                    count: p.syncs.len() as u64,
                    time_ns: p.idle_ns,
                    bytes: None,
                    python_frame: p.frame.clone(),
                    cause: None,
                    share: Some(p.idle_ns as f64 / total.max(1) as f64),
                })
                .collect();
            f.instances = ranked
                .iter()
                .take(cx.config.max_instances)
                .map(|(label, p)| Instance {
                    start_ns: p.worst.0,
                    dur_ns: p.worst.1,
                    offset_ms: w.offset_ms(p.worst.0),
                    what: format!(
                        "GPU idle {} after {label} drained the queue",
                        fmt_ns(p.worst.1)
                    ),
                    cpu_op: Some(label.clone()),
                    python_frame: p.frame.clone(),
                })
                .collect();
            f.advice = advice(top_label, cx.pytorch());
            f.metrics = metrics([
                ("drained_ns", total as f64),
                ("drained_kernels", n as f64),
                ("syncs", syncs.len() as f64),
            ]);
            out.push(f);
        }
        out
    }
}

/// A count per step for a title: whole numbers plain, others with one decimal.
fn fmt_count(x: f64) -> String {
    if (x - x.round()).abs() < 0.05 {
        format!("{}", x.round())
    } else {
        format!("{x:.1}")
    }
}

/// What to change, by what synchronised, in the program's terms.
fn advice(label: &str, pytorch: bool) -> Vec<String> {
    let has = |s: &str| label.contains(s);
    let mut out = Vec::new();
    if !pytorch && has("Memcpy") {
        out.push("A blocking cudaMemcpy waits for the GPU to finish the work before it: copy with cudaMemcpyAsync into pinned memory (cudaMallocHost) and wait on an event where the host reads the data, or keep the data on the GPU.".into());
    } else if !pytorch {
        out.push("A synchronising call after launches makes the host wait for the GPU each time, and the GPU then waits for the next launch: work on one stream already runs in order, so synchronise (cudaDeviceSynchronize, cudaStreamSynchronize) only where the host reads a result, and time kernels with events instead.".into());
    } else if has("nonzero") || has("aten::index") || has("masked_select") || has("unique") {
        out.push("A boolean-mask index (x[mask], x[mask] = y), masked_select, nonzero or unique makes the host wait for the GPU to learn the result's size. Keep shapes static: torch.where(mask, a, b) or a multiply by the mask, integer indices computed once, or sort once and split by counts (one wait per batch instead of one per mask).".into());
    } else if has("item") || has("_local_scalar_dense") {
        out.push("A .item(), .tolist() or print of a GPU tensor waits for the GPU: keep the value on the GPU and read it every N steps, or after the step's work is queued.".into());
    } else if has("aten::to") || has("aten::copy_") || has("Memcpy") {
        out.push("A copy to the host (.cpu(), .numpy(), .to('cpu')) waits for the GPU: copy with non_blocking=True into pinned memory and read it later, or keep the data on the GPU.".into());
    } else {
        out.push("A synchronising call after launches makes the host wait for the GPU each time, and the GPU then waits for the next launch: work on one stream already runs in order, so synchronise (torch.cuda.synchronize(), a stream or event sync) only where the host reads a result, and time kernels with events instead.".into());
    }
    out.push("CUDA graphs will not help here: a graph cannot capture a synchronisation, and the queue empties at every sync whatever the launch speed.".into());
    out
}
