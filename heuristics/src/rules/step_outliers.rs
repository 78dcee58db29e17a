//! Steps much slower than the typical fast step, and what was different in them.
//!
//! Reads the step markers (`ProfilerStep#N`) in the window. The baseline is the typical fast
//! step: the median of the faster half of the steps, so that half the steps being slow (a
//! recompilation every other step) still leaves a baseline they are compared with; in a
//! steady loop it is within jitter of the median. A step is an outlier when it
//! takes at least 1.5× the baseline and at least 1 ms more, and the outliers stand apart (the
//! fastest of them at least 1.25× the slowest other step: a wide but continuous spread of step
//! times has no outlier) (a 50% jump is well outside
//! step-to-step jitter, which is a few percent in a steady loop; the floor keeps sub-ms
//! steps from reporting noise). What was different is measured, not guessed: the idle gaps
//! inside the step with their measured causes (a checkpoint's copies, `gc.collect`, a sync),
//! GPU copies the baseline step does not have, and torch.compile compilations. The
//! impact is each outlier's time beyond the baseline; it overlaps the `idle_gaps` finding when
//! the extra time is GPU idle (as it usually is). Needs 5 steps or more; the first step in the
//! window is not reported (profiler start-up and first calls land there).

use super::Rule;
use crate::context::{Ctx, new_finding, rows_by_time};
use crate::finding::{Confidence, Finding, Instance, fmt_bytes, fmt_ns, metrics};
use std::collections::BTreeMap;
use crate::idle::CauseKind;
use tracehound_parsers::GpuOpKind;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "step_outliers";

/// The rule.
pub struct StepOutliers;

/// An outlier takes at least this multiple of the median step.
const RATIO: f64 = 1.5;
/// ... and at least this much more, ns.
const MIN_EXTRA_NS: i64 = 1_000_000;
/// The fastest outlier takes at least this multiple of the slowest other step: outliers are
/// a separate group, not the tail of a wide distribution.
const SEPARATION: f64 = 1.25;
/// Outliers are rare spikes while fewer than one step in this many is one.
const RARE_SHARE_DEN: usize = 4;
/// Steps needed for a median worth comparing against.
const MIN_STEPS: usize = 5;

impl Rule for StepOutliers {
    fn needs_whole_timeline(&self) -> bool {
        true
    }

    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "steps much slower than the typical fast step, with what was different in them"
    }

    fn uses_idle(&self) -> bool {
        true
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let steps: Vec<_> = t
            .steps
            .iter()
            .filter(|s| s.start >= w.start && s.end <= w.end && s.end > s.start)
            .collect();
        if steps.len() < MIN_STEPS {
            return Vec::new();
        }
        let mut durs: Vec<i64> = steps.iter().map(|s| s.end - s.start).collect();
        durs.sort_unstable();
        // The typical fast step: the median of the faster half.
        let median = crate::stats::median(durs.clone());
        let baseline = crate::stats::median(durs[..durs.len().div_ceil(2)].to_vec());
        let p90 = crate::stats::percentile(&durs, 0.9);
        // The first step of a capture carries the profiler's start-up (and often first-call
        // costs): it counts in the baseline but is not reported.
        let outliers: Vec<_> = steps
            .iter()
            .skip(1)
            .filter(|s| {
                let d = s.end - s.start;
                d as f64 >= RATIO * baseline as f64 && d - baseline >= MIN_EXTRA_NS
            })
            .collect();
        if outliers.is_empty() {
            return Vec::new();
        }
        // Outliers stand apart from the rest: the fastest slow step is at least SEPARATION
        // times the slowest other step. A loop whose step times spread continuously (a
        // launch-bound loop jittering from 23 to 40 ms) has no outlier, however wide.
        let slow = |d: i64| d as f64 >= RATIO * baseline as f64 && d - baseline >= MIN_EXTRA_NS;
        let fastest_slow = durs.iter().copied().filter(|&d| slow(d)).min();
        let slowest_fast = durs.iter().copied().filter(|&d| !slow(d)).max();
        if let (Some(a), Some(b)) = (fastest_slow, slowest_fast)
            && (a as f64) < SEPARATION * b as f64
        {
            return Vec::new();
        }
        let impact: i64 = outliers.iter().map(|s| s.end - s.start - baseline).sum();
        let slowest = outliers
            .iter()
            .max_by(|a, b| {
                (a.end - a.start)
                    .cmp(&(b.end - b.start))
                    .then(b.start.cmp(&a.start))
            })
            .copied()
            .copied();
        let Some(slowest) = slowest else {
            return Vec::new();
        };
        // What the outliers had: idle gaps by measured cause, copies, recompilation.
        let mut diff: BTreeMap<String, (u64, i64)> = BTreeMap::new();
        for s in &outliers {
            for idle in cx.idle() {
                for g in idle.costly_gaps() {
                    let (a, b) = (g.start.max(s.start), g.end.min(s.end));
                    if b <= a {
                        continue;
                    }
                    let frac = (b - a) as f64 / (g.end - g.start).max(1) as f64;
                    for p in &g.parts {
                        let e = diff
                            .entry(format!("GPU idle, {}: {}", p.kind.label(), p.leaf))
                            .or_default();
                        e.0 += 1;
                        e.1 += (p.ns as f64 * frac) as i64;
                    }
                }
            }
        }
        // Copies and compilation in the slowest step that the baseline step lacks.
        let in_step = |a: i64, st: &tracehound_parsers::Step| a >= st.start && a < st.end;
        let median_step = steps
            .iter()
            .min_by_key(|s| ((s.end - s.start) - baseline).abs())
            .copied();
        let copies = |st: &tracehound_parsers::Step| -> (u64, u64, i64) {
            let mut c = (0u64, 0u64, 0i64);
            // GPU ops are sorted by start: only the step's own are read.
            let first = t.gpu_ops.partition_point(|o| o.start < st.start);
            for op in t.gpu_ops[first..].iter().take_while(|o| o.start < st.end) {
                if op.kind == GpuOpKind::Memcpy {
                    c.0 += 1;
                    c.1 += op.bytes;
                    c.2 += op.dur();
                }
            }
            c
        };
        let (sc, sb, sns) = copies(slowest);
        let (mc, mb, _) = median_step.map(copies).unwrap_or_default();
        let mut notes = Vec::new();
        if sb > 2 * mb + (1 << 20) {
            notes.push(format!(
                "{sc} copies moving {} ({} on the GPU) against {mc} moving {} in a typical step",
                fmt_bytes(sb),
                fmt_ns(sns),
                fmt_bytes(mb)
            ));
        }
        // torch.compile's compilations in each outlier step.
        let compiled_in = |st: &tracehound_parsers::Step| -> Vec<&crate::phases::Compilation> {
            cx.compilations()
                .iter()
                .filter(|c| in_step(c.start, st))
                .collect()
        };
        let compiles: usize = outliers.iter().map(|s| compiled_in(s).len()).sum();
        let recompiled: Vec<i64> = outliers
            .iter()
            .filter(|s| !compiled_in(s).is_empty())
            .map(|s| s.number)
            .collect();
        if !recompiled.is_empty() {
            let list: Vec<String> = recompiled.iter().map(i64::to_string).collect();
            notes.push(format!(
                "torch.compile compiled in step{} {} ({compiles} compilations)",
                if recompiled.len() > 1 { "s" } else { "" },
                list.join(", ")
            ));
        }
        let diff_total: i64 = diff.values().map(|g| g.1).sum();
        // What the outliers had in common, in the title: the steps that compiled, or the
        // measured cause holding most of their idle time.
        let mut by_kind: BTreeMap<&'static str, i64> = BTreeMap::new();
        for s in &outliers {
            for idle in cx.idle() {
                for g in idle.costly_gaps() {
                    let (a, b) = (g.start.max(s.start), g.end.min(s.end));
                    if b > a {
                        let frac = (b - a) as f64 / (g.end - g.start).max(1) as f64;
                        for p in &g.parts {
                            *by_kind.entry(p.kind.label()).or_default() += (p.ns as f64 * frac) as i64;
                        }
                    }
                }
            }
        }
        let why = if !recompiled.is_empty() {
            let list: Vec<String> = recompiled.iter().map(i64::to_string).collect();
            format!(
                "; torch.compile compiled in step{} {}",
                if recompiled.len() > 1 { "s" } else { "" },
                list.join(", ")
            )
        } else {
            by_kind
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .filter(|(_, ns)| **ns * 2 >= impact)
                .map(|(k, ns)| format!("; mostly {k} ({:.0}%)", 100.0 * *ns as f64 / impact.max(1) as f64))
                .unwrap_or_default()
        };
        let number = |s: &tracehound_parsers::Step| s.number;
        // Rare spikes (a checkpoint every N steps) are the finding: where they are is what the
        // engineer needs, so their whole extra time counts. When a quarter or more of the
        // steps are slow it is a pattern whose GPU idle idle_gaps already reports by cause:
        // this finding then counts only the extra time that is not that idle, and ranks by
        // what it adds.
        let rare = outliers.len() * RARE_SHARE_DEN < steps.len();
        // Time the GPU was busy beyond the typical step is more work (larger inputs, an
        // evaluation), not a stall: it is said, and not counted as the outliers' cost.
        let gap_in = |st: &tracehound_parsers::Step| -> i64 {
            cx.idle()
                .iter()
                .map(|d| {
                    d.costly_gaps()
                        .map(|g| (g.end.min(st.end) - g.start.max(st.start)).max(0))
                        .sum::<i64>()
                })
                .max()
                .unwrap_or(0)
        };
        let busy_of = |st: &tracehound_parsers::Step| (st.end - st.start) - gap_in(st);
        let typical_busy = median_step.map(busy_of).unwrap_or(0);
        let more_work: i64 = outliers
            .iter()
            .map(|s| (busy_of(s) - typical_busy).max(0))
            .sum();
        if more_work * 2 >= impact {
            // Mostly more GPU work: steps of different sizes, not outliers of the loop.
            return Vec::new();
        }
        let own_impact = if rare {
            impact
        } else {
            (impact - diff_total).max(0)
        };
        let mut f = new_finding(
            cx,
            ID,
            None,
            format!(
                "{} of {} steps take over {RATIO}× the typical step {}: step {} takes {}{why}",
                outliers.len(),
                steps.len(),
                fmt_ns(baseline),
                number(slowest),
                fmt_ns(slowest.end - slowest.start)
            ),
            own_impact,
            Confidence::High,
            format!(
                "typical step {} (median of the faster half), median {}, p90/typical {:.2}, slowest/typical {:.1}; in the outliers, {} of GPU idle by measured cause (overlaps idle_gaps){}",
                fmt_ns(baseline),
                fmt_ns(median),
                p90 as f64 / baseline.max(1) as f64,
                (slowest.end - slowest.start) as f64 / baseline.max(1) as f64,
                fmt_ns(diff_total),
                if notes.is_empty() {
                    String::new()
                } else {
                    format!("; slowest step: {}", notes.join("; "))
                }
            ),
        );
        f.breakdown = rows_by_time(cx, diff, impact);
        f.instances = outliers
            .iter()
            .take(cx.config.max_instances)
            .map(|s| Instance {
                start_ns: s.start,
                dur_ns: s.end - s.start,
                offset_ms: w.offset_ms(s.start),
                what: {
                    let c = compiled_in(s);
                    let shapes: Vec<&str> = c
                        .iter()
                        .flat_map(|c| c.new_shapes.iter().map(String::as_str))
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    let why = match (c.len(), shapes.is_empty()) {
                        (0, _) => String::new(),
                        (n, true) => format!("; torch.compile compiled {n}×"),
                        (n, false) => format!(
                            "; torch.compile compiled {n}× for new input {}",
                            shapes.join(", ")
                        ),
                    };
                    format!(
                        "step {}: {} ({} over the typical step){why}",
                        s.number,
                        fmt_ns(s.end - s.start),
                        fmt_ns(s.end - s.start - baseline)
                    )
                },
                cpu_op: None,
                python_frame: None,
            })
            .collect();
        // Advice for what the outliers measured, largest first; the periodic-work advice
        // when nothing specific stands out.
        let mut kinds: Vec<(CauseKind, i64)> = Vec::new();
        for s in &outliers {
            for idle in cx.idle() {
                for g in idle.costly_gaps().filter(|g| g.start < s.end && g.end > s.start) {
                    for p in &g.parts {
                        match kinds.iter_mut().find(|k| k.0 == p.kind) {
                            Some(k) => k.1 += p.ns,
                            None => kinds.push((p.kind, p.ns)),
                        }
                    }
                }
            }
        }
        kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let top = kinds.first().map(|k| k.0);
        if compiles > 0 || top == Some(CauseKind::Compile) {
            f.advice.push("Recompilation: the slow steps compiled again. Mark the varying dimension dynamic (torch._dynamo.mark_dynamic(x, dim), or torch.compile(dynamic=True)) or pad/bucket inputs to a few fixed shapes; TORCH_LOGS=recompiles says which guard failed.".into());
        }
        if matches!(top, Some(CauseKind::ModuleLoad | CauseKind::Autotune)) {
            // A step that runs something for the first time (a new operator, a library's
            // first call, a new shape's tuning) is slow once; it is not periodic work.
            f.advice.push("First calls in the middle of the run: a step that runs something for the first time (a new operator or library, such as cuFFT's first plan or cuDNN's first convolution of a shape) pays its start-up once. Run every path once before the measured loop (a warm-up step that takes each branch), and it will not recur; if it recurs, the shapes keep changing.".into());
        }
        if top == Some(CauseKind::GarbageCollection) {
            f.advice.push("Garbage collection pauses: gc.freeze() after start-up, or gc.disable() in the loop with gc.collect() at chosen points.".into());
        }
        if f.advice.is_empty() {
            f.advice = vec![
                "Move periodic work off the step: checkpoint from a background thread (torch.distributed.checkpoint.async_save, or copy the state_dict to pinned CPU memory and write it in a thread).".into(),
                "Garbage collection pauses: gc.freeze() after start-up, or gc.disable() in the loop with gc.collect() at chosen points.".into(),
            ];
        }
        f.metrics = metrics([
            ("steps", steps.len() as f64),
            ("outliers", outliers.len() as f64),
            ("median_step_ns", median as f64),
            ("baseline_step_ns", baseline as f64),
            ("p90_over_median", p90 as f64 / median.max(1) as f64),
            ("slowest_step", slowest.number as f64),
            ("slowest_step_ns", (slowest.end - slowest.start) as f64),
        ]);
        vec![f]
    }
}
