//! Kernels that under-fill the GPU: launched with at most half as many thread blocks as the
//! GPU has SMs, so most SMs sit idle while they run, or (for kernels other than GEMMs, whose tiles are
//! register-heavy by design) with a low estimated occupancy.
//!
//! Kineto records grid, block, registers, shared memory and the estimated achieved occupancy
//! of every kernel (ROCm's carry no grid: the capture says so, and their block count is not
//! judged); the SM count comes from the trace's device properties. The impact of a
//! kernel with `b ≤ SMs/2` blocks is its duration × (1 − b/SMs): the share of the GPU it left
//! unused. Kernels under 10 µs on average are left to the launch-bound rule (their cost is the
//! launch, not the fill), collectives are left out (NCCL uses few blocks by design), and the
//! rule reports from 1% of the window.

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Finding, Row, fmt_ns, metrics};
use crate::names::{name_or, short_name, span_name_id};
use std::collections::BTreeMap;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "underfilled_kernels";

/// The rule.
pub struct UnderfilledKernels;

/// Mean kernel duration below which a group is not reported, ns.
const MIN_MEAN_NS: i64 = 10_000;
/// Estimated occupancy below which a non-GEMM kernel is low-occupancy, %.
const LOW_OCCUPANCY_PCT: f32 = 25.0;

#[derive(Default)]
struct Group {
    count: u64,
    time: i64,
    lost: f64,
    blocks: (u64, u64),
    occupancy: Option<f32>,
}

impl Rule for UnderfilledKernels {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "kernels with fewer thread blocks than the GPU has SMs, or a low estimated occupancy"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let mut out = Vec::new();
        let comm = crate::collectives::communication_names(t);
        let is_comm = |name: u32| comm.get(name as usize).copied().unwrap_or(false);
        for d in t.devices() {
            let Some(sms) = t
                .meta
                .gpus
                .iter()
                .find(|g| g.id == d)
                .and_then(|g| g.sm_count)
                .filter(|&s| s > 0)
            else {
                continue;
            };
            // Grouped by name and caller ids first: no string is built per kernel.
            let mut by_id: rustc_hash::FxHashMap<(u32, u32), Group> = Default::default();
            for (i, op) in w.kernels(t, d) {
                let Some(k) = &op.kernel else { continue };
                let blocks: u64 = k.grid.iter().map(|&g| u64::from(g.max(1))).product();
                let low_occ = cx.kernel_class(op.name).unit.is_none()
                    && k.occupancy_pct
                        .is_some_and(|o| o > 0.0 && o < LOW_OCCUPANCY_PCT);
                // A kernel without a recorded grid (replayed from a graph, or ROCm's in Kineto)
                // is no one-block launch: only what the trace recorded is judged.
                let underfilled = k.geometry && 2 * blocks <= u64::from(sms);
                if !underfilled && !low_occ || is_comm(op.name) {
                    continue;
                }
                let caller = span_name_id(t, t.index.op_cpu_op[i]);
                let g = by_id.entry((op.name, caller)).or_default();
                g.count += 1;
                g.time += op.dur();
                g.blocks = if g.count == 1 {
                    (blocks, blocks)
                } else {
                    (g.blocks.0.min(blocks), g.blocks.1.max(blocks))
                };
                g.occupancy = match (g.occupancy, k.occupancy_pct) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if underfilled {
                    g.lost += op.dur() as f64 * (1.0 - blocks as f64 / f64::from(sms));
                }
            }
            let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
            for ((name, caller), g) in by_id {
                let caller = name_or(t, caller, "").to_string();
                let e = groups
                    .entry((short_name(t.str(name), 70), caller))
                    .or_default();
                e.blocks = if e.count == 0 {
                    g.blocks
                } else {
                    (e.blocks.0.min(g.blocks.0), e.blocks.1.max(g.blocks.1))
                };
                e.count += g.count;
                e.time += g.time;
                e.lost += g.lost;
                e.occupancy = match (e.occupancy, g.occupancy) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            groups.retain(|_, g| g.time / g.count.max(1) as i64 >= MIN_MEAN_NS);
            let lost: f64 = groups.values().map(|g| g.lost).sum();
            let time: i64 = groups.values().map(|g| g.time).sum();
            if cx.window.share(lost as i64) < 0.01 {
                continue;
            }
            let mut rows: Vec<Row> = groups
                .iter()
                .map(|((kernel, caller), g)| Row {
                    label: format!(
                        "{kernel}{}: {} blocks on {sms} SMs{}",
                        if caller.is_empty() {
                            String::new()
                        } else {
                            format!(" in {caller}")
                        },
                        if g.blocks.0 == g.blocks.1 {
                            g.blocks.0.to_string()
                        } else {
                            format!("{}–{}", g.blocks.0, g.blocks.1)
                        },
                        g.occupancy
                            .map(|o| format!(", est. occupancy {o:.0}%"))
                            .unwrap_or_default()
                    ),
                    count: g.count,
                    time_ns: g.time,
                    bytes: None,
                    python_frame: None,
                    cause: None,
                    share: Some(g.time as f64 / time.max(1) as f64),
                })
                .collect();
            // Kernels that leave SMs empty first (by the SM time they leave unused), then the
            // low-occupancy ones.
            let lost_of: BTreeMap<String, f64> = groups
                .iter()
                .zip(rows.iter())
                .map(|(g, r)| (r.label.clone(), g.1.lost))
                .collect();
            rows.sort_by(|a, b| {
                lost_of[&b.label]
                    .total_cmp(&lost_of[&a.label])
                    .then(b.time_ns.cmp(&a.time_ns))
                    .then(a.label.cmp(&b.label))
            });
            rows.truncate(cx.config.max_rows);
            let top = &rows[0];
            let mut f = new_finding(
                cx,
                ID,
                Some(d),
                format!(
                    "Kernels that leave most SMs idle take {}: {}",
                    fmt_ns(time),
                    top.label
                ),
                lost as i64,
                Confidence::Medium,
                format!(
                    "{} kernels in {} groups with at most half as many blocks as the {sms} SMs (or est. occupancy < {LOW_OCCUPANCY_PCT:.0}% outside GEMMs); impact = each kernel's duration × the share of SMs it left without a block",
                    groups.values().map(|g| g.count).sum::<u64>(),
                    groups.len()
                ),
            );
            f.breakdown = rows;
            f.advice = vec![
                format!("Give each launch at least {sms} blocks of work: batch the calls over more rows (one launch for a stacked tensor instead of a loop over slices)."),
                if cx.pytorch() {
                    "A reduction over few very long rows (softmax, layer norm, sum over a huge last dim) gets one block per row: reshape to more, shorter rows, or let torch.compile generate a split reduction.".into()
                } else {
                    "A kernel launched with fewer blocks than SMs (one block, or one block per long row) leaves the rest idle: split the work over more blocks (a grid-stride loop, a two-pass reduction).".into()
                },
            ];
            f.metrics = metrics([
                ("sm_count", f64::from(sms)),
                ("underfilled_ns", time as f64),
                ("idle_sm_ns", lost),
            ]);
            out.push(f);
        }
        out
    }
}
