//! GPU idle gaps: the rule that turns the idle engine's measured gaps ([`crate::idle`]) into
//! one finding per device, with the breakdown of causes, the worst gaps and the advice that
//! follows the largest measured leaf.

use super::Rule;
use crate::context::Ctx;
use crate::finding::{Confidence, Finding, Instance, Row, Severity, fmt_ns, metrics};
use crate::idle::{CauseKind, DeviceIdle, Gap, advice};
use crate::names::short_name;
use rustc_hash::FxHashMap;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "idle_gaps";

/// The rule.
pub struct IdleGaps;

/// `; cuDNN autotuning in steps 0, 1, 2`: the profiler steps whose gaps were mostly
/// autotuning, which paid for it (a new input shape each, with cudnn.benchmark).
fn tuning_steps(cx: &Ctx, idle: &DeviceIdle) -> String {
    let steps = &cx.trace.steps;
    let mut paid: Vec<i64> = idle
        .costly_gaps()
        .filter(|g| g.kind == CauseKind::Autotune)
        .filter_map(|g| {
            let k = steps.partition_point(|s| s.start <= g.start);
            k.checked_sub(1).map(|k| steps[k].number)
        })
        .collect();
    paid.sort_unstable();
    paid.dedup();
    if paid.is_empty() {
        return String::new();
    }
    let list: Vec<String> = paid.iter().map(|n| n.to_string()).collect();
    format!(
        "; cuDNN autotuning in step{} {} of {}",
        if paid.len() > 1 { "s" } else { "" },
        list.join(", "),
        steps.len()
    )
}

/// `; in annotated regions: BatchNorm 31%, GroupNorm 20%`: the user annotations the gaps fell
/// in, by share of the gap time, when annotations cover at least half of it (the names the
/// program gave its own phases say more than any operator).
fn regions(idle: &DeviceIdle) -> String {
    let total = idle.gap_ns().max(1);
    let mut by: FxHashMap<&str, i64> = FxHashMap::default();
    for g in idle.costly_gaps() {
        if let Some(r) = &g.region {
            *by.entry(r.as_str()).or_default() += g.end - g.start;
        }
    }
    let covered: i64 = by.values().sum();
    if covered * 2 < total {
        return String::new();
    }
    let mut by: Vec<(&str, i64)> = by.into_iter().collect();
    by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let list: Vec<String> = by
        .iter()
        .take(4)
        .map(|(r, ns)| format!("'{r}' {:.0}%", 100.0 * *ns as f64 / total as f64))
        .collect();
    format!(
        "; in annotated regions: {}{}",
        list.join(", "),
        if by.len() > 4 {
            format!(" and {} more", by.len() - 4)
        } else {
            String::new()
        }
    )
}

impl Rule for IdleGaps {
    fn needs_whole_timeline(&self) -> bool {
        true
    }

    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "GPU idle intervals over the gap threshold inside the analysed window, attributed to what the host was doing"
    }

    fn uses_idle(&self) -> bool {
        true
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let mut out = Vec::new();
        for idle in cx.idle() {
            if idle.costly_gaps().next().is_none() {
                continue;
            }
            out.push(finding(cx, idle));
        }
        out
    }
}

fn finding(cx: &Ctx, idle: &DeviceIdle) -> Finding {
    let w = &cx.window;
    let gap_ns = idle.gap_ns();
    let idle_share = 1.0 - w.share(idle.busy_ns);
    // In a launch-bound run the short gaps between tiny kernels are a cost too; the
    // launch_bound rule reports them (with queue depth and launch latency), so they are
    // pointed to here, not counted twice.
    let launch_bound = idle.launch_bound(w.len());
    // Measured time by (category, leaf, frame) over all gaps, with the number of gaps it
    // appears in and the syncs that drained the queue before them.
    type Key<'g> = (CauseKind, &'g str, Option<&'g str>);
    type Group<'g> = (u64, i64, FxHashMap<&'g str, i64>);
    let mut groups: FxHashMap<Key, Group> = FxHashMap::default();
    for g in idle.costly_gaps() {
        for p in &g.parts {
            let e = groups
                .entry((p.kind, &*p.leaf, p.frame.as_deref()))
                .or_default();
            e.0 += 1;
            e.1 += p.ns;
            if let Some(d) = &g.drained_by {
                *e.2.entry(d.as_str()).or_default() += p.ns;
            }
        }
    }
    let denom = gap_ns.max(1) as f64;
    let leaf_totals: Vec<(Key, i64)> = groups.iter().map(|(k, g)| (*k, g.1)).collect();
    let mut rows: Vec<(CauseKind, Row)> = groups
        .into_iter()
        .map(|((kind, leaf, frame), (count, time_ns, drained))| {
            let drained = drained
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
                .filter(|(d, ns)| *ns * 2 >= time_ns && *d != leaf);
            let mut label = format!(
                "{:.0}% {}: {leaf}",
                100.0 * time_ns as f64 / denom,
                kind.label()
            );
            if let Some((d, _)) = drained {
                label.push_str(&format!(" — queue drained by {d} just before"));
            }
            (
                kind,
                Row {
                    cause: Some(kind.id()),
                    share: Some(time_ns as f64 / denom),
                    label,
                    count,
                    time_ns,
                    bytes: None,
                    python_frame: frame.map(str::to_string),
                },
            )
        })
        .collect();
    rows.sort_by(|a, b| {
        b.1.time_ns
            .cmp(&a.1.time_ns)
            .then(a.1.label.cmp(&b.1.label))
    });
    // The leaf holding most of each category's time, from the groups (not every part again).
    let mut leaves: FxHashMap<(CauseKind, &str), i64> = FxHashMap::default();
    for ((kind, leaf, _), ns) in &leaf_totals {
        *leaves.entry((*kind, leaf)).or_default() += ns;
    }
    let leaf_of = |k: CauseKind| -> String {
        leaves
            .iter()
            .filter(|((kind, _), _)| *kind == k)
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.1.cmp(a.0.1)))
            .map(|((_, l), _)| l.to_string())
            .unwrap_or_default()
    };
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|(_, r)| r)
        .take(cx.config.max_rows)
        .collect();
    let mut worst: Vec<&Gap> = idle.costly_gaps().collect();
    worst.sort_by(|a, b| {
        (b.end - b.start)
            .cmp(&(a.end - a.start))
            .then(a.start.cmp(&b.start))
    });
    // With an nvidia-smi log attached: the SM utilisation of the second each gap fell in.
    let sm = crate::counters::series(cx.trace, idle.device, "sm");
    let pwr = crate::counters::series(cx.trace, idle.device, "pwr");
    let cite = |t: i64| {
        let at = |s: Option<&tracehound_parsers::CounterSeries>| {
            s.and_then(|s| crate::counters::value_at(cx.trace, s, t))
        };
        match (at(sm), at(pwr)) {
            (Some(u), Some(p)) => format!(" [nvidia-smi that second: SM {u:.0}%, {p:.0} W]"),
            (Some(u), None) => format!(" [nvidia-smi that second: SM {u:.0}%]"),
            _ => String::new(),
        }
    };
    let instances = worst
        .iter()
        .take(cx.config.max_instances)
        .map(|g| Instance {
            start_ns: g.start,
            dur_ns: g.end - g.start,
            offset_ms: w.offset_ms(g.start),
            what: match g
                .next_op
                .map(|i| short_name(cx.trace.str(cx.trace.gpu_ops[i as usize].name), 60))
            {
                Some(n) => format!("{}; next on the GPU: {n}{}", g.label, cite(g.start)),
                None => format!("{} (to the end of the window){}", g.label, cite(g.start)),
            },
            cpu_op: g.cpu_op.clone(),
            python_frame: g.frame.clone(),
        })
        .collect();
    let kinds = idle.by_kind();
    let main = kinds.first().map(|k| k.0).unwrap_or(CauseKind::Unknown);
    let mut advice_list: Vec<String> = Vec::new();
    // Allocator calls in a single gap happened once (start-up buffers): the loop advice would
    // state a loop the trace does not show.
    let once = |k: CauseKind| {
        k == CauseKind::Allocator
            && idle
                .costly_gaps()
                .filter(|g| g.parts.iter().any(|p| p.kind == k))
                .count()
                == 1
    };
    for (k, ns) in kinds.iter().take(3) {
        let a = if once(*k) {
            crate::idle::allocator_once(&leaf_of(*k), cx.pytorch())
        } else if let Some(a) = (*k == CauseKind::CpuOp)
            .then(|| view_loop(cx, &leaf_of(*k)))
            .flatten()
        {
            a
        } else {
            advice(*k, &leaf_of(*k), cx.workload(), cx.pytorch())
        };
        if *ns * 5 >= gap_ns && !advice_list.contains(&a) {
            advice_list.push(a);
        }
    }
    if advice_list.is_empty() {
        advice_list.push(advice(main, &leaf_of(main), cx.workload(), cx.pytorch()));
    }
    // The sync that drained the queue before gaps is their second fact when what it cost
    // them (their host-synchronisation time: the wait itself and the relaunch it forced, up
    // to how long the host waited) is a third or more of the idle time: removing it lets the
    // GPU run ahead of the host. A 6 µs `.item()` before half a second of compilation is not.
    // Its advice is for a sync in a loop: one that drained the queue once (a program's single
    // cudaDeviceSynchronize before its results are read) is no loop to take it out of.
    let mut drains: FxHashMap<&str, (i64, u32)> = FxHashMap::default();
    for g in idle.costly_gaps() {
        if let Some(d) = &g.drained_by {
            let e = drains.entry(d.as_str()).or_default();
            e.0 += g
                .parts
                .iter()
                .filter(|p| p.kind == CauseKind::HostSync)
                .map(|p| p.ns)
                .sum::<i64>();
            e.1 += 1;
        }
    }
    if let Some((d, (ns, _))) = drains
        .into_iter()
        .filter(|(_, (_, n))| *n >= 2)
        .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.0.cmp(a.0)))
        && ns * 3 >= gap_ns
    {
        let a = advice(CauseKind::HostSync, d, cx.workload(), cx.pytorch());
        if !advice_list.contains(&a) {
            advice_list.push(a);
        }
    }
    let largest = idle
        .costly_gaps()
        .map(|g| g.end - g.start)
        .max()
        .unwrap_or(0);
    let n_gaps = idle.costly_gaps().count();
    let causes: Vec<String> = kinds
        .iter()
        .take(3)
        .map(|(k, ns)| {
            format!(
                "{} {:.0}%",
                k.label(),
                100.0 * *ns as f64 / gap_ns.max(1) as f64
            )
        })
        .collect();
    // What dominates the idle time, when one thing does: a single stall, or first calls.
    let stall = idle.one_off_stall(cx.window.len());
    let cold = idle.cold_start_ns();
    // A stall that opens the window and is paid once (a first call, a wait on work queued
    // before the capture, start-up the trace does not break down) is no step's cost: charging
    // it to the window's steps would price a fix at what the next step never pays. Its time
    // stays in the title and the rows.
    let once = stall
        .filter(|g| cold.is_none() && crate::idle::paid_once(w, g, w.steps_in(cx.trace)))
        .map(|g| g.end - g.start);
    let impact = gap_ns - once.unwrap_or(0);
    let share = w.share(impact);
    let cost = match once {
        Some(_) => format!("{} ({} of it after that stall)", fmt_ns(gap_ns), fmt_ns(impact)),
        None => fmt_ns(gap_ns),
    };
    let headline = match (stall, cold) {
        (_, Some(ns)) => format!(
            ", {:.0}% of it first calls (a cold start)",
            100.0 * ns as f64 / idle.idle_ns().max(1) as f64
        ),
        (Some(g), None) => format!(
            ", {:.0}% of it one {} stall {}",
            100.0 * (g.end - g.start) as f64 / idle.idle_ns().max(1) as f64,
            fmt_ns(g.end - g.start),
            crate::idle::gap_position(w, g)
        ),
        (None, None) => match kinds.first() {
            // A phase or another thread holding most of the idle time is the headline.
            Some(&(k, ns))
                if matches!(
                    k,
                    CauseKind::Compile | CauseKind::GarbageCollection | CauseKind::Gil
                ) && 2 * ns >= gap_ns =>
            {
                let what = match (k, idle.costly_gaps().find_map(|g| g.gil_holder.as_deref())) {
                    (CauseKind::Gil, Some(t)) => format!("the GIL held by thread {t}"),
                    _ => k.label().to_string(),
                };
                format!(", {:.0}% of it {what}", 100.0 * ns as f64 / gap_ns.max(1) as f64)
            }
            _ => String::new(),
        },
    };
    if let Some(ns) = cold {
        advice_list.insert(0, format!(
            "Cold start: {} of first calls (module loading, library and handle start-up, JIT) is paid once; it says nothing about the steady state. Warm up before measuring ({}) and profile again.",
            fmt_ns(ns),
            if cx.pytorch() {
                "torch.profiler.schedule(wait=1, warmup=2, active=3), or run a few iterations before the capture starts"
            } else {
                "run a few iterations first and capture only the ones after: cudaProfilerStart/Stop around them with nsys --capture-range=cudaProfilerApi"
            }
        ));
    } else if let Some(g) = stall {
        advice_list.insert(
            0,
            format!(
                "One stall of {} ({}) holds most of the idle time. {}.",
                fmt_ns(g.end - g.start),
                g.label,
                crate::idle::stall_meaning(w, g, cx.pytorch())
            ),
        );
    }
    Finding {
        rule: ID,
        subject: None,
        id: String::new(),
        title: if launch_bound {
            format!(
                "GPU {} idle {:.0}% of the window{headline}: {} gaps ≥ {} cost {}; {} more in gaps between tiny kernels (see launch_bound)",
                idle.device,
                100.0 * idle_share,
                n_gaps,
                fmt_ns(cx.config.gap_threshold_ns),
                cost,
                fmt_ns(idle.short_idle_ns)
            )
        } else {
            format!(
                "GPU {} idle {:.0}% of the window{headline}: {} gaps ≥ {} cost {}",
                idle.device,
                100.0 * idle_share,
                n_gaps,
                fmt_ns(cx.config.gap_threshold_ns),
                cost
            )
        },
        severity: Severity::from_share(share),
        impact_ns: impact,
        impact_share: share,
        confidence: if matches!(main, CauseKind::Unknown | CauseKind::Untraced) {
            Confidence::Low
        } else {
            Confidence::High
        },
        device: Some(idle.device),
        evidence: format!(
            "busy {:.1}% of {}; causes: {}; largest gap {}; plus {} in {} shorter gaps{}{}",
            100.0 * w.share(idle.busy_ns),
            fmt_ns(w.len()),
            causes.join(", "),
            fmt_ns(largest),
            fmt_ns(idle.short_idle_ns),
            idle.short_count,
            idle.warm_up_words()
                .map(|w| format!("; left out, not the program's steady state: {w}"))
                .unwrap_or_default()
                + &once
                    .map(|ns| format!("; the impact leaves out the stall that opens the window ({}): the later steps do not pay it again", fmt_ns(ns)))
                    .unwrap_or_default(),
            match sm.and_then(|s| crate::counters::mean(
                crate::counters::in_window(cx.trace, s, w)
                    .iter()
                    .map(|x| x.1)
            )) {
                Some(m) => format!("; nvidia-smi SM utilisation over the window {m:.0}%"),
                None if sm.is_some_and(|s| crate::counters::coarser_than(cx.trace, s, w)) => format!(
                    "; nvidia-smi's {} samples are coarser than the {} window (none lies half inside it), so no utilisation figure is drawn from them",
                    fmt_ns(crate::counters::period(cx.trace)),
                    fmt_ns(w.len())
                ),
                None => String::new(),
            }
        ) + &tuning_steps(cx, idle)
            + &regions(idle),
        breakdown: rows,
        instances,
        advice: advice_list,
        metrics: metrics([
            ("gaps", n_gaps as f64),
            ("gap_ns", gap_ns as f64),
            ("busy_share", w.share(idle.busy_ns)),
            ("idle_share", idle_share),
            ("short_gaps", idle.short_count as f64),
            ("short_idle_ns", idle.short_idle_ns as f64),
            ("largest_gap_ns", largest as f64),
            ("median_kernel_ns", idle.median_kernel_ns as f64),
            ("launch_bound", if launch_bound { 1.0 } else { 0.0 }),
            (
                "host_sync_ns",
                kinds
                    .iter()
                    .find(|k| k.0 == CauseKind::HostSync)
                    .map_or(0.0, |k| k.1 as f64),
            ),
            (
                "top_cause_share",
                kinds
                    .first()
                    .map_or(0.0, |k| k.1 as f64 / gap_ns.max(1) as f64),
            ),
            (
                "data_loading_ns",
                kinds
                    .iter()
                    .find(|k| k.0 == CauseKind::DataLoading)
                    .map_or(0.0, |k| k.1 as f64),
            ),
        ]),
    }
}

#[cfg(test)]
mod tests;

/// View operators called at least this many times a step are a Python loop over items.
const VIEW_LOOP_CALLS: usize = 64;

/// Back-to-back calls of one view operator from which they are a loop over items.
const VIEW_RUN: usize = 32;

/// Advice for host time in a view operator (`aten::select on CPU`, the leaf of the CPU
/// operators' cause) that the program calls [`VIEW_LOOP_CALLS`] times a step or more, back to
/// back: a Python loop indexing one item at a time, which one indexing call with a tensor of
/// indices replaces. `None` for other operators, or fewer calls.
fn view_loop(cx: &Ctx, leaf: &str) -> Option<String> {
    let op = leaf.strip_suffix(" on CPU")?;
    if !cx.pytorch() || !crate::names::VIEW_OPS.contains(&op) {
        return None;
    }
    let t = cx.trace;
    let w = &cx.window;
    let id = t.strings.lookup(op)?;
    // Calls the program makes back to back, one view after another with no other operator
    // between (a loop that also computes per item, `acc = acc + x[:, t]`, is not one whose
    // remedy is one index), in runs of at least [`VIEW_RUN`].
    let mut calls = 0usize;
    for ops in w.outermost_ops(t) {
        let mut run = 0usize;
        for i in ops {
            let s = &t.host_spans[i as usize];
            if s.name == id {
                run += 1;
                continue;
            }
            if run >= VIEW_RUN {
                calls += run;
            }
            run = 0;
        }
        if run >= VIEW_RUN {
            calls += run;
        }
    }
    let per_step = calls / w.steps_in(t).max(1);
    (per_step >= VIEW_LOOP_CALLS).then(|| {
        format!(
            "{op} ran {per_step} times {}, each a view with no GPU work: a Python loop taking one element or row at a time (x[i] per item, then torch.stack or torch.cat). One indexing call with a tensor of indices (x[idx], torch.index_select, torch.gather) takes them all at once, on the GPU.",
            if w.steps_in(t) > 0 {
                "a step"
            } else {
                "in the window"
            }
        )
    })
}
