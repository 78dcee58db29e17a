//! Kernels that under-fill the GPU: launched with at most half as many thread blocks as the
//! GPU has SMs, so most SMs sit idle while they run; with blocks of fewer threads than a warp,
//! so most lanes of every warp sit idle; or (for kernels other than GEMMs, whose tiles are
//! register-heavy by design) with a low estimated occupancy.
//!
//! Kineto records grid, block, registers, shared memory and the estimated achieved occupancy
//! of every kernel (ROCm's carry no grid: the capture says so, and their block count is not
//! judged); the SM count comes from the trace's device properties. The impact of a
//! kernel with `b ≤ SMs/2` blocks is its duration × (1 − b/SMs): the share of the GPU it left
//! unused; with `t < 32` threads per block, its duration × (1 − t/32) more of it (Rodinia's
//! Gaussian elimination, 4×4-thread blocks on an RTX 3090: 1.40 s by this model, where the same
//! program with 16×16 blocks, captured beside it, runs the same kernel 2.03 s faster). Kernels under 10 µs on average are left to the launch-bound rule (their cost is the
//! launch, not the fill), collectives are left out (NCCL uses few blocks by design), and the
//! rule reports from 1% of the window.

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Finding, Row, fmt_ns, metrics};
use crate::names::{name_or, short_name, span_name_id};
use std::collections::BTreeMap;
use tracehound_parsers::NONE;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "underfilled_kernels";

/// The rule.
pub struct UnderfilledKernels;

/// Mean kernel duration below which a group is not reported, ns.
const MIN_MEAN_NS: i64 = 10_000;
/// Estimated occupancy below which a non-GEMM kernel is low-occupancy, %.
const LOW_OCCUPANCY_PCT: f32 = 25.0;

/// Threads of a warp (NVIDIA; an AMD wavefront has 64, so there the lanes a small block leaves
/// idle are understated, not overstated).
const WARP: u64 = 32;

#[derive(Default)]
struct Group {
    count: u64,
    time: i64,
    lost: f64,
    blocks: (u64, u64),
    occupancy: Option<f32>,
    /// The fewest threads per block, when every call of the kernel launched blocks of fewer
    /// threads than a warp.
    threads: Option<u64>,
    /// The operator span of its first call, for the user's Python line.
    span: Option<u32>,
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
                .gpu(d)
                .and_then(|g| g.sm_count)
                .filter(|&s| s > 0)
            else {
                continue;
            };
            // Grouped by name and caller ids first: no string is built per kernel.
            let mut by_id: rustc_hash::FxHashMap<(u32, u32), Group> = Default::default();
            // Calls of each kernel, and those with blocks smaller than a warp: a kernel is said
            // to run small blocks only when every call did.
            let mut calls: rustc_hash::FxHashMap<u32, (u64, u64)> = Default::default();
            for (i, op) in w.kernels(t, d) {
                let Some(k) = &op.kernel else { continue };
                let c = calls.entry(op.name).or_default();
                c.0 += 1;
                let recorded = k.blocks();
                let blocks = recorded.unwrap_or(0);
                let low_occ = cx.kernel_class(op.name).unit.is_none()
                    && k.occupancy_pct
                        .is_some_and(|o| o > 0.0 && o < LOW_OCCUPANCY_PCT);
                // A kernel without a recorded grid (replayed from a graph, or ROCm's in Kineto)
                // is no one-block launch: only what the trace recorded is judged.
                let underfilled = recorded.is_some_and(|b| 2 * b <= u64::from(sms));
                // A block of fewer threads than a warp still occupies a whole warp: the rest of
                // its lanes run nothing.
                // A block the trace did not record reads as zeros: not judged.
                let threads: u64 = k.block.iter().map(|&b| u64::from(b)).product();
                let part_warp = k.geometry && threads > 0 && threads < WARP;
                c.1 += u64::from(part_warp);
                if !underfilled && !low_occ && !part_warp || is_comm(op.name) {
                    continue;
                }
                let caller = span_name_id(t, t.index.op_cpu_op[i]);
                let g = by_id.entry((op.name, caller)).or_default();
                g.span = g.span.or(Some(t.index.op_cpu_op[i]).filter(|&s| s != NONE));
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
                // The share of the GPU's lanes the kernel can use: SMs with a block, times the
                // lanes of each warp with a thread.
                let sm_used = if underfilled {
                    blocks as f64 / f64::from(sms)
                } else {
                    1.0
                };
                let lanes_used = if part_warp {
                    threads as f64 / WARP as f64
                } else {
                    1.0
                };
                g.lost += op.dur() as f64 * (1.0 - sm_used * lanes_used);
                if part_warp {
                    g.threads = Some(g.threads.map_or(threads, |t: u64| t.min(threads)));
                }
            }
            let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
            for ((name, caller), mut g) in by_id {
                if calls.get(&name).is_some_and(|c| c.1 < c.0) {
                    g.threads = None;
                }
                let caller = name_or(t, caller, "").to_string();
                let e = groups
                    .entry((short_name(t.str(name), 70), caller))
                    .or_default();
                let first = e.count == 0;
                e.blocks = if first {
                    g.blocks
                } else {
                    (e.blocks.0.min(g.blocks.0), e.blocks.1.max(g.blocks.1))
                };
                e.span = e.span.or(g.span);
                e.count += g.count;
                e.time += g.time;
                e.lost += g.lost;
                e.occupancy = match (e.occupancy, g.occupancy) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                // Small blocks only where every merged kernel ran them.
                e.threads = match (first, e.threads, g.threads) {
                    (true, _, b) => b,
                    (false, Some(a), Some(b)) => Some(a.min(b)),
                    _ => None,
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
                        "{kernel}{}: {}",
                        if caller.is_empty() {
                            String::new()
                        } else {
                            format!(" in {caller}")
                        },
                        row_what(g, sms)
                    ),
                    count: g.count,
                    time_ns: g.time,
                    bytes: None,
                    python_frame: g.span.and_then(|s| t.user_frame(s)).map(str::to_string),
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
            let part_warp = groups.values().any(|g| g.threads.is_some());
            let mut f = new_finding(
                cx,
                ID,
                Some(d),
                format!(
                    "Kernels that leave {} idle take {}: {}",
                    if part_warp && groups.values().all(|g| only_part_warp(g, sms)) {
                        "warp lanes"
                    } else if part_warp {
                        "SMs or warp lanes"
                    } else {
                        "most SMs"
                    },
                    fmt_ns(time),
                    top.label
                ),
                lost as i64,
                Confidence::Medium,
                format!(
                    "{} kernels in {} groups with at most half as many blocks as the {sms} SMs, blocks of fewer than {WARP} threads (a warp runs {WARP} lanes whatever the block holds), or est. occupancy < {LOW_OCCUPANCY_PCT:.0}% outside GEMMs; impact = each kernel's duration × the share of the GPU's lanes it left unused (SMs without a block, lanes of a warp without a thread)",
                    groups.values().map(|g| g.count).sum::<u64>(),
                    groups.len()
                ),
            );
            f.confidence = if part_warp {
                // Idle lanes cost their share of time only where the kernel is bound by its
                // instruction rate; the SM's limit on resident blocks can cost more.
                Confidence::Low
            } else {
                f.confidence
            };
            f.breakdown = rows;
            f.advice = Vec::new();
            // An order statistic along a dim runs one block per slice: over one long vector,
            // one block on the whole GPU. The top row names the operator ("… in aten::kthvalue").
            let selection = ["aten::kthvalue", "aten::median", "aten::nanmedian", "aten::mode"]
                .into_iter()
                .find(|op| f.breakdown[0].label.contains(&format!(" in {op}:")));
            if let Some(op) = selection
                && cx.pytorch()
            {
                f.advice.push(format!(
                    "{op} computes one order statistic per slice along its dim with one block per slice: over one long vector that is one block for the whole GPU. For one value of a large tensor, a device-wide sort (torch.sort, or torch.quantile, which sorts) or torch.topk for a k near either end runs across every SM; keep {op} for many short slices."
                ));
            }
            if part_warp {
                f.advice.push(format!("Launch blocks of at least 128 threads, a multiple of {WARP}: a block of 16 threads runs a warp with half its lanes idle, and the SM's limit on resident blocks (16-32) then caps it at a few hundred threads of its 1,536-2,048; make the tile per block larger (16×16 instead of 4×4) and keep the grid covering the same work."));
            }
            // Block-count advice only where some kernel has too few blocks; a softmax over a
            // non-last dim gets few blocks from its layout, not from a small batch, so its
            // advice is the layout.
            if crate::names::is_spatial_softmax(&f.breakdown[0].label) && cx.pytorch() {
                f.advice
                    .push(crate::names::SPATIAL_SOFTMAX_ADVICE.to_string());
            } else if groups.values().any(|g| !only_part_warp(g, sms)) {
                f.advice.extend([
                format!("Give each launch at least {sms} blocks of work: batch the calls over more rows (one launch for a stacked tensor instead of a loop over slices)."),
                if cx.pytorch() {
                    "A reduction over few very long rows (softmax, layer norm, sum over a huge last dim) gets one block per row: reshape to more, shorter rows, or let torch.compile generate a split reduction.".into()
                } else {
                    "A kernel launched with fewer blocks than SMs (one block, or one block per long row) leaves the rest idle: split the work over more blocks (a grid-stride loop, a two-pass reduction).".into()
                },
            ]);
            }
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

/// Whether a group is reported only for blocks smaller than a warp (it has blocks enough).
fn only_part_warp(g: &Group, sms: u32) -> bool {
    g.threads.is_some() && 2 * g.blocks.1 > u64::from(sms) && g.occupancy.is_none_or(|o| o >= LOW_OCCUPANCY_PCT)
}

/// What a group's row says: its blocks against the SMs (unless it has blocks enough and is
/// reported for its block size), its threads per block, its estimated occupancy.
fn row_what(g: &Group, sms: u32) -> String {
    let mut what = Vec::new();
    if g.threads.is_none() || 2 * g.blocks.1 <= u64::from(sms) {
        what.push(format!(
            "{} blocks on {sms} SMs",
            if g.blocks.0 == g.blocks.1 {
                g.blocks.0.to_string()
            } else {
                format!("{}–{}", g.blocks.0, g.blocks.1)
            }
        ));
    }
    if let Some(t) = g.threads {
        what.push(format!(
            "{t} thread{} per block ({:.0}% of each warp's lanes)",
            if t == 1 { "" } else { "s" },
            100.0 * t as f64 / WARP as f64
        ));
    }
    if let Some(o) = g.occupancy {
        what.push(format!("est. occupancy {o:.0}%"));
    }
    what.join(", ")
}
