//! GPU idle gaps: intervals of at least `gap_threshold_ns` (100 µs) inside the analysed
//! window where a GPU runs nothing on any stream, each attributed to what the host thread
//! that launched the next GPU operation was doing, and aggregated by cause.
//!
//! Attribution, in order:
//! 1. the next operation was launched before the gap began: the GPU waited on something
//!    other than the host (a dependency, an event, launch latency);
//! 2. the host was blocked in a synchronising call when the GPU ran dry
//!    (`cudaStreamSynchronize` under `aten::item`, a pageable copy ...): the host could not
//!    queue work ahead;
//! 3. the host spent most of the gap in data loading (`DataLoader` `__next__`);
//! 4. the host spent most of the gap in one CPU operator;
//! 5. the host was dispatching many small operators: launch overhead;
//! 6. otherwise Python (or untraced) code between operators.

use super::{Ctx, Rule, most_common, outermost_cpu_op, short_name, span_name};
use crate::finding::{Confidence, Finding, Instance, Row, Severity, fmt_ns, metrics};
use crate::window::{WindowSource, busy_intervals, total};
use rustc_hash::{FxHashMap, FxHashSet};
use tracehound_parsers::{HostKind, NONE, Trace};

/// The rule.
pub struct IdleGaps;

/// Broad class of a gap's cause; the advice depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CauseKind {
    /// The host was blocked in a synchronising call.
    HostSync,
    /// The host was loading data.
    DataLoading,
    /// The host was busy in one CPU operator.
    CpuOp,
    /// The host was dispatching many small operators.
    LaunchOverhead,
    /// The host ran Python or untraced code.
    Python,
    /// The next GPU operation was already launched: the GPU waited on a dependency.
    GpuWait,
    /// No host activity is known (no launching thread in the trace).
    Unknown,
}

impl CauseKind {
    /// Short name for summaries.
    pub fn label(self) -> &'static str {
        match self {
            CauseKind::HostSync => "host synchronisation",
            CauseKind::DataLoading => "data loading",
            CauseKind::CpuOp => "CPU operators",
            CauseKind::LaunchOverhead => "launch overhead",
            CauseKind::Python => "Python between operators",
            CauseKind::GpuWait => "GPU-side waits",
            CauseKind::Unknown => "unknown host activity",
        }
    }
}

/// One gap with its attribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// Cause class.
    pub kind: CauseKind,
    /// Cause as a label for grouping (`host sync: aten::item (cudaStreamSynchronize)`).
    pub label: String,
    /// The CPU operator responsible, when one.
    pub cpu_op: Option<String>,
    /// The user's Python frame, when the trace has stacks.
    pub frame: Option<String>,
    /// Name of the GPU operation that ended the gap, when one.
    pub next_op: Option<String>,
    /// For a gap after a host sync: what the host did once the sync returned.
    pub then: Option<CauseKind>,
}

/// Idle accounting of one device over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceIdle {
    /// Device index.
    pub device: i32,
    /// Busy time (union of all streams), ns.
    pub busy_ns: i64,
    /// Gaps at or above the threshold, in time order.
    pub gaps: Vec<Gap>,
    /// Idle time in gaps below the threshold, ns.
    pub short_idle_ns: i64,
    /// Number of gaps below the threshold.
    pub short_count: u64,
    /// Median kernel duration in the window, ns (0 without kernels).
    pub median_kernel_ns: i64,
}

impl DeviceIdle {
    /// Idle time in gaps at or above the threshold.
    pub fn gap_ns(&self) -> i64 {
        self.gaps.iter().map(|g| g.end - g.start).sum()
    }

    /// A launch-bound run: kernels so short that the idle time between them, in gaps below
    /// the threshold, is itself a cost of at least 10% of the window.
    pub fn launch_bound(&self, window_ns: i64) -> bool {
        self.median_kernel_ns > 0
            && self.median_kernel_ns < 20_000
            && self.short_idle_ns * 10 >= window_ns
    }

    /// Idle time by cause class, largest first.
    pub fn by_kind(&self) -> Vec<(CauseKind, i64)> {
        let mut m: FxHashMap<CauseKind, i64> = FxHashMap::default();
        for g in &self.gaps {
            *m.entry(g.kind).or_default() += g.end - g.start;
        }
        let mut v: Vec<(CauseKind, i64)> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }
}

/// Computes busy time, gaps and their causes for one device.
pub fn analyse_device(cx: &Ctx, device: i32) -> DeviceIdle {
    let trace = cx.trace;
    let w = &cx.window;
    let busy = busy_intervals(trace, device, w);
    let threshold = cx.config.gap_threshold_ns.max(1);
    let mut raw: Vec<(i64, i64)> = Vec::new();
    // Edge gaps count only when the window is not itself cut to the GPU activity.
    let edges = matches!(w.source, WindowSource::Steps { .. } | WindowSource::User);
    if let (Some(first), Some(last)) = (busy.first(), busy.last()) {
        if edges {
            raw.push((w.start, first.0));
        }
        raw.extend(busy.windows(2).map(|p| (p[0].1, p[1].0)));
        if edges {
            raw.push((last.1, w.end));
        }
    }
    let attr = Attributor::new(trace);
    let mut gaps = Vec::new();
    let (mut short_idle_ns, mut short_count) = (0, 0);
    for (s, e) in raw {
        let d = e - s;
        if d <= 0 {
            continue;
        }
        if d < threshold {
            short_idle_ns += d;
            short_count += 1;
            continue;
        }
        gaps.push(attr.classify(device, s, e));
    }
    let mut kernels: Vec<i64> = trace
        .device_ops(device)
        .iter()
        .map(|&i| &trace.gpu_ops[i as usize])
        .filter(|o| {
            o.kind == tracehound_parsers::GpuOpKind::Kernel && o.start >= w.start && o.start < w.end
        })
        .map(|o| o.dur())
        .collect();
    let median_kernel_ns = if kernels.is_empty() {
        0
    } else {
        let mid = kernels.len() / 2;
        *kernels.select_nth_unstable(mid).1
    };
    DeviceIdle {
        device,
        busy_ns: total(&busy),
        gaps,
        short_idle_ns,
        short_count,
        median_kernel_ns,
    }
}

struct Attributor<'t> {
    trace: &'t Trace,
    main_thread: Option<(i64, i64)>,
    sync_corr: FxHashSet<u64>,
}

impl<'t> Attributor<'t> {
    fn new(trace: &'t Trace) -> Self {
        // The thread that ran the most CPU operators stands in when a gap has no launcher.
        let main_thread = trace
            .index
            .spans_by_thread
            .iter()
            .map(|(k, v)| {
                let ops = v
                    .iter()
                    .filter(|&&i| trace.host_spans[i as usize].kind == HostKind::CpuOp)
                    .count();
                (ops, std::cmp::Reverse(*k), *k)
            })
            .max()
            .filter(|(n, _, _)| *n > 0)
            .map(|(_, _, k)| k);
        // Copies to or from pageable memory block the host like a synchronize.
        let sync_corr = trace
            .gpu_ops
            .iter()
            .filter(|o| o.is_pageable_copy())
            .map(|o| o.correlation)
            .filter(|&c| c != 0)
            .collect();
        Attributor {
            trace,
            main_thread,
            sync_corr,
        }
    }

    fn thread_spans(&self, key: (i64, i64)) -> &'t [u32] {
        let idx = &self.trace.index.spans_by_thread;
        match idx.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(p) => &idx[p].1,
            Err(_) => &[],
        }
    }

    fn is_blocking(&self, i: u32) -> bool {
        let s = &self.trace.host_spans[i as usize];
        matches!(s.kind, HostKind::Runtime | HostKind::Driver)
            && (super::is_sync_call(self.trace.str(s.name))
                || (s.correlation != 0 && self.sync_corr.contains(&s.correlation)))
    }

    fn classify(&self, device: i32, a: i64, b: i64) -> Gap {
        let t = self.trace;
        let ops = t.device_ops(device);
        let k = ops.partition_point(|&i| t.gpu_ops[i as usize].start < b);
        let next = ops[k..]
            .iter()
            .copied()
            .find(|&i| t.gpu_ops[i as usize].is_work());
        let next_op = next.map(|i| short_name(t.str(t.gpu_ops[i as usize].name), 60));
        let launch = next.map_or(NONE, |i| t.index.op_launch[i as usize]);
        let thread = if launch != NONE {
            let l = &t.host_spans[launch as usize];
            Some((l.pid, l.tid))
        } else {
            self.main_thread
        };
        let mut gap = Gap {
            start: a,
            end: b,
            kind: CauseKind::Unknown,
            label: "no host activity recorded".into(),
            cpu_op: None,
            frame: None,
            next_op,
            then: None,
        };
        let Some(thread) = thread else { return gap };
        let spans = self.thread_spans(thread);
        if launch != NONE && t.host_spans[launch as usize].end <= a {
            let op = outermost_cpu_op(t, launch);
            gap.kind = CauseKind::GpuWait;
            gap.label = "GPU waited: the next operation was launched before the gap".into();
            gap.cpu_op = (op != NONE).then(|| span_name(t, op, "").to_string());
            gap.frame = t.user_frame(launch).map(str::to_string);
            return gap;
        }
        // Spans around the moment the GPU ran dry: the chain containing `a`, and the few
        // that ended just before it (the host returns from a sync a moment after the GPU).
        let (first_after, mut around) = chain_at(t, spans, a);
        if first_after > 0 {
            around.extend(
                spans[first_after.saturating_sub(12)..first_after - 1]
                    .iter()
                    .copied(),
            );
        }
        const SLACK: i64 = 20_000;
        if let Some(&sync) = around.iter().find(|&&i| {
            let s = &t.host_spans[i as usize];
            self.is_blocking(i) && s.start <= a && s.end >= a - SLACK
        }) {
            let op = outermost_cpu_op(t, sync);
            let call = span_name(t, sync, "");
            gap.kind = CauseKind::HostSync;
            gap.label = if op != NONE {
                format!("host sync: {} ({})", span_name(t, op, ""), call)
            } else {
                format!("host sync: {call}")
            };
            gap.cpu_op = (op != NONE).then(|| span_name(t, op, "").to_string());
            gap.frame = t.user_frame(sync).map(str::to_string);
            let returned = t.host_spans[sync as usize].end.clamp(a, b);
            let host_end = self.host_end(launch, a, b);
            if host_end - returned > (b - a) / 4 {
                let mut after = gap.clone();
                self.host_activity(&mut after, spans, launch, returned, host_end);
                gap.then = Some(after.kind);
            }
            return gap;
        }
        self.host_activity(&mut gap, spans, launch, a, self.host_end(launch, a, b));
        gap
    }

    /// When the host launched the next work (the gap's end when unknown).
    fn host_end(&self, launch: u32, a: i64, b: i64) -> i64 {
        if launch != NONE {
            self.trace.host_spans[launch as usize].start.clamp(a, b)
        } else {
            b
        }
    }

    /// Classifies what the host thread did over [a, host_end).
    fn host_activity(&self, gap: &mut Gap, spans: &[u32], launch: u32, a: i64, host_end: i64) {
        let t = self.trace;
        let (first_after, around) = chain_at(t, spans, a);
        let span_len = (host_end - a).max(1);
        let overlap = |i: u32| {
            let s = &t.host_spans[i as usize];
            (s.end.min(host_end) - s.start.max(a)).max(0)
        };
        let mut candidates: Vec<u32> = around
            .iter()
            .copied()
            .filter(|&i| t.host_spans[i as usize].end > a)
            .collect();
        let end_idx = spans.partition_point(|&i| t.host_spans[i as usize].start < host_end);
        candidates.extend(spans[first_after..end_idx.max(first_after)].iter().copied());
        let mut loading = 0i64;
        let mut best_op: (i64, u32) = (0, NONE);
        let mut ops_time = 0i64;
        let mut launches = 0u32;
        let mut python: (i64, u32) = (0, NONE);
        for &i in &candidates {
            let s = &t.host_spans[i as usize];
            let ov = overlap(i);
            let name = t.str(s.name);
            let is_loader = name.contains("DataLoader") || name.contains("dataloader.py");
            let outer_loader = is_loader
                && !t.ancestors(i).any(|p| {
                    let n = t.str(t.host_spans[p as usize].name);
                    n.contains("DataLoader") || n.contains("dataloader.py")
                });
            if outer_loader {
                loading += ov;
            }
            match s.kind {
                HostKind::CpuOp if outermost_cpu_op(t, i) == i => {
                    ops_time += ov;
                    if ov > best_op.0 {
                        best_op = (ov, i);
                    }
                }
                HostKind::Runtime | HostKind::Driver => launches += 1,
                // The innermost user frame covering most of the gap.
                HostKind::Python
                    if ov * 2 >= span_len
                        && tracehound_parsers::is_user_frame(name)
                        && s.depth as i64
                            >= t.host_spans
                                .get(python.1 as usize)
                                .map_or(-1, |p| p.depth as i64) =>
                {
                    python = (ov, i);
                }
                _ => {}
            }
        }
        let frame_of = |i: u32| {
            if i == NONE {
                None
            } else {
                t.user_frame(i).map(str::to_string)
            }
        };
        if loading * 2 >= span_len {
            gap.kind = CauseKind::DataLoading;
            gap.label = "data loading (DataLoader __next__ on the training thread)".into();
            gap.frame = frame_of(launch).or_else(|| frame_of(python.1));
        } else if best_op.0 * 2 >= span_len {
            let name = span_name(t, best_op.1, "").to_string();
            gap.kind = CauseKind::CpuOp;
            gap.label = format!("host busy in {name}");
            gap.cpu_op = Some(name);
            gap.frame = frame_of(best_op.1);
        } else if ops_time * 2 >= span_len || launches >= 2 {
            gap.kind = CauseKind::LaunchOverhead;
            gap.label = "launch overhead: host dispatching small operators".into();
            gap.frame = frame_of(launch);
        } else {
            gap.kind = CauseKind::Python;
            gap.frame = frame_of(python.1).or_else(|| frame_of(launch));
            gap.label = match &gap.frame {
                Some(f) => format!("Python between operators: {f}"),
                None => "Python or untraced host code between operators".into(),
            };
        }
    }
}

fn advice(kind: CauseKind) -> &'static str {
    match kind {
        CauseKind::HostSync => {
            "Remove host synchronisation from the loop: don't call .item(), .cpu(), .tolist() or print() on GPU tensors every step (accumulate on the GPU, read every N steps), use .to(device, non_blocking=True) from pinned memory, and avoid torch.cuda.synchronize() outside timing code."
        }
        CauseKind::DataLoading => {
            "Feed the GPU faster: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, prefetch_factor=4); move augmentation to the GPU (e.g. torchvision.transforms.v2 on CUDA tensors) or pre-process the dataset offline."
        }
        CauseKind::CpuOp => {
            "A CPU operator sits on the critical path between GPU launches: move it to the GPU, run it asynchronously, or do it less often."
        }
        CauseKind::LaunchOverhead => {
            "The GPU finishes each kernel faster than the host launches the next: batch more work per kernel (larger batch), fuse operators with torch.compile, or replay the step as a CUDA graph (torch.compile(mode=\"reduce-overhead\") or torch.cuda.CUDAGraph)."
        }
        CauseKind::Python => {
            "Python code between operators keeps the GPU waiting: move per-step bookkeeping (logging, metrics, list building) out of the hot loop, or capture the step with torch.compile / CUDA graphs."
        }
        CauseKind::GpuWait => {
            "Work was queued but the GPU still waited: check cross-stream event waits and collectives on other streams, and whether a previous stream blocks this one."
        }
        CauseKind::Unknown => {
            "The launching thread is not in the trace: profile with ProfilerActivity.CPU so gaps can be attributed."
        }
    }
}

impl Rule for IdleGaps {
    fn id(&self) -> &'static str {
        "idle_gaps"
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
            if idle.gaps.is_empty() && !idle.launch_bound(cx.window.len()) {
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
    // In a launch-bound run the short gaps between tiny kernels are the cost, not noise.
    let launch_bound = idle.launch_bound(w.len());
    let short_cost = if launch_bound { idle.short_idle_ns } else { 0 };
    type Group = (u64, i64, Vec<Option<String>>, FxHashMap<CauseKind, i64>);
    let mut groups: FxHashMap<&str, Group> = FxHashMap::default();
    for g in &idle.gaps {
        let e = groups.entry(&g.label).or_default();
        e.0 += 1;
        e.1 += g.end - g.start;
        e.2.push(g.frame.clone());
        if let Some(k) = g.then {
            *e.3.entry(k).or_default() += g.end - g.start;
        }
    }
    let mut rows: Vec<Row> = groups
        .into_iter()
        .map(|(label, (count, time_ns, frames, then))| Row {
            label: match then.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))) {
                Some((k, _)) => format!("{label}, then {}", k.label()),
                None => label.to_string(),
            },
            count,
            time_ns,
            bytes: None,
            python_frame: most_common(&frames),
        })
        .collect();
    if launch_bound {
        rows.push(Row {
            label: format!(
                "launch latency: gaps < {} between kernels of median {}",
                fmt_ns(cx.config.gap_threshold_ns),
                fmt_ns(idle.median_kernel_ns)
            ),
            count: idle.short_count,
            time_ns: idle.short_idle_ns,
            bytes: None,
            python_frame: None,
        });
    }
    rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.label.cmp(&b.label)));
    rows.truncate(cx.config.max_rows);
    let mut worst: Vec<&Gap> = idle.gaps.iter().collect();
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
            s.and_then(|s| crate::counters::value_at(s, t))
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
            what: match &g.next_op {
                Some(n) => format!("{} before {n}{}", g.label, cite(g.start)),
                None => format!("{} (to the end of the window){}", g.label, cite(g.start)),
            },
            cpu_op: g.cpu_op.clone(),
            python_frame: g.frame.clone(),
        })
        .collect();
    let kinds = idle.by_kind();
    let main = kinds.first().map(|k| k.0).unwrap_or(CauseKind::Unknown);
    let mut advice_list: Vec<String> = Vec::new();
    if launch_bound && short_cost >= gap_ns {
        advice_list.push(advice(CauseKind::LaunchOverhead).to_string());
    }
    for (k, ns) in kinds.iter().take(2) {
        let a = advice(*k).to_string();
        if *ns * 5 >= gap_ns && !advice_list.contains(&a) {
            advice_list.push(a);
        }
    }
    if advice_list.is_empty() {
        advice_list.push(advice(main).to_string());
    }
    let largest = idle.gaps.iter().map(|g| g.end - g.start).max().unwrap_or(0);
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
    let impact = gap_ns + short_cost;
    let share = w.share(impact);
    Finding {
        rule: "idle_gaps",
        title: if launch_bound {
            format!(
                "GPU {} idle {:.0}% of the window: {} gaps ≥ {} cost {}, and {} more between tiny kernels (launch-bound)",
                idle.device,
                100.0 * idle_share,
                idle.gaps.len(),
                fmt_ns(cx.config.gap_threshold_ns),
                fmt_ns(gap_ns),
                fmt_ns(short_cost)
            )
        } else {
            format!(
                "GPU {} idle {:.0}% of the window: {} gaps ≥ {} cost {}",
                idle.device,
                100.0 * idle_share,
                idle.gaps.len(),
                fmt_ns(cx.config.gap_threshold_ns),
                fmt_ns(gap_ns)
            )
        },
        severity: Severity::from_share(share),
        impact_ns: impact,
        impact_share: share,
        confidence: if main == CauseKind::Unknown {
            Confidence::Low
        } else {
            Confidence::High
        },
        device: Some(idle.device),
        evidence: format!(
            "busy {:.1}% of {}; causes: {}; largest gap {}; plus {} in {} shorter gaps{}",
            100.0 * w.share(idle.busy_ns),
            fmt_ns(w.len()),
            causes.join(", "),
            fmt_ns(largest),
            fmt_ns(idle.short_idle_ns),
            idle.short_count,
            match sm.and_then(|s| crate::counters::mean(
                crate::counters::in_window(s, w).iter().map(|x| x.1)
            )) {
                Some(m) => format!("; nvidia-smi SM utilisation over the window {m:.0}%"),
                None => String::new(),
            }
        ),
        breakdown: rows,
        instances,
        advice: advice_list,
        metrics: metrics([
            ("gaps", idle.gaps.len() as f64),
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
                "data_loading_ns",
                kinds
                    .iter()
                    .find(|k| k.0 == CauseKind::DataLoading)
                    .map_or(0.0, |k| k.1 as f64),
            ),
        ]),
    }
}

/// The host spans of a thread (`spans`, sorted by start) around time `at`: the last one
/// starting at or before it and its ancestors, innermost first, with the index of the first
/// span starting after `at`.
fn chain_at(t: &Trace, spans: &[u32], at: i64) -> (usize, Vec<u32>) {
    let first_after = spans.partition_point(|&i| t.host_spans[i as usize].start <= at);
    let mut chain = Vec::new();
    if first_after > 0 {
        let y = spans[first_after - 1];
        chain.push(y);
        chain.extend(t.ancestors(y));
    }
    (first_after, chain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::testutil::TB;
    use tracehound_parsers::GpuOpKind::{self, Kernel};

    fn run(t: &Trace, config: &Config) -> (Vec<Finding>, DeviceIdle) {
        let cx = Ctx::new(t, config);
        (IdleGaps.check(&cx), analyse_device(&cx, 0))
    }

    #[test]
    fn empty_trace_has_no_gaps() {
        let t = TB::new().build();
        assert!(run(&t, &Config::default()).0.is_empty());
    }

    #[test]
    fn overlapping_streams_hide_each_others_gaps() {
        // Stream 7 idles 200-700 µs, but stream 8 runs through it: no gap.
        let t = TB::new()
            .op(Kernel, "a", 7, 0, 200_000, Some(0))
            .op(Kernel, "b", 8, 150_000, 750_000, Some(1_000))
            .op(Kernel, "c", 7, 700_000, 900_000, Some(2_000))
            .build();
        let (f, idle) = run(&t, &Config::default());
        assert!(f.is_empty());
        assert_eq!(idle.busy_ns, 900_000);
    }

    #[test]
    fn gaps_at_window_edges_count_with_step_markers() {
        // Step 0..1000 µs; the GPU works 300-400 µs only: 300 µs idle at each edge.
        let mut b = TB::new();
        b.span(HostKind::Annotation, "ProfilerStep#0", 0, 1_000_000)
            .span(HostKind::CpuOp, "aten::slow_cpu_op", 10_000, 290_000)
            .op(Kernel, "k", 7, 300_000, 400_000, Some(295_000))
            .span(HostKind::CpuOp, "aten::tail_op", 410_000, 990_000);
        let t = b.build();
        let (f, idle) = run(&t, &Config::default());
        assert_eq!(idle.gaps.len(), 2);
        assert_eq!((idle.gaps[0].start, idle.gaps[0].end), (0, 300_000));
        assert_eq!(idle.gaps[0].kind, CauseKind::CpuOp);
        assert_eq!(idle.gaps[0].label, "host busy in aten::slow_cpu_op");
        assert_eq!((idle.gaps[1].start, idle.gaps[1].end), (400_000, 1_000_000));
        assert!(idle.gaps[1].next_op.is_none());
        assert_eq!(f[0].impact_ns, 900_000);
        assert_eq!(f[0].severity, Severity::High);
    }

    #[test]
    fn without_steps_the_window_starts_at_the_first_op() {
        let t = TB::new()
            .op(Kernel, "a", 7, 1_000_000, 1_100_000, None)
            .op(Kernel, "b", 7, 1_150_000, 1_200_000, None)
            .build();
        let (f, idle) = run(&t, &Config::default());
        assert!(f.is_empty(), "a 50 µs gap is under the threshold");
        assert_eq!((idle.short_count, idle.short_idle_ns), (1, 50_000));
        let (f, _) = run(
            &t,
            &Config {
                gap_threshold_ns: 10_000,
                ..Config::default()
            },
        );
        assert_eq!(f[0].impact_ns, 50_000);
        assert_eq!(f[0].instances[0].offset_ms, 0.1);
    }

    #[test]
    fn sync_then_late_launch_is_a_host_sync_gap() {
        let mut b = TB::new();
        b.op(Kernel, "a", 7, 0, 100_000, Some(0))
            .span(HostKind::CpuOp, "aten::item", 5_000, 106_000)
            .span(HostKind::Runtime, "cudaStreamSynchronize", 6_000, 105_000)
            .op(Kernel, "b", 7, 600_000, 700_000, Some(590_000));
        let t = b.build();
        let (f, idle) = run(&t, &Config::default());
        assert_eq!(idle.gaps.len(), 1);
        assert_eq!(idle.gaps[0].kind, CauseKind::HostSync);
        assert_eq!(
            idle.gaps[0].label,
            "host sync: aten::item (cudaStreamSynchronize)"
        );
        assert_eq!(f[0].breakdown[0].count, 1);
    }

    #[test]
    fn op_launched_before_the_gap_is_a_gpu_wait() {
        let t = TB::new()
            .op(Kernel, "a", 7, 0, 100_000, Some(0))
            .op(Kernel, "b", 8, 500_000, 600_000, Some(2_000))
            .build();
        let (_, idle) = run(&t, &Config::default());
        assert_eq!(idle.gaps[0].kind, CauseKind::GpuWait);
    }

    #[test]
    fn short_gaps_between_tiny_kernels_count_when_launch_bound() {
        // 100 kernels of 5 µs, 20 µs apart: no gap reaches 100 µs, yet the GPU idles 80%.
        let mut b = TB::new();
        for k in 0..100 {
            let t = k * 25_000;
            b.op(Kernel, "tiny", 7, t, t + 5_000, Some(t - 1_000));
        }
        let t = b.build();
        let (f, idle) = run(&t, &Config::default());
        assert!(idle.gaps.is_empty());
        assert_eq!(idle.median_kernel_ns, 5_000);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].impact_ns, 99 * 20_000);
        assert_eq!(f[0].metrics["launch_bound"], 1.0);
        assert_eq!(f[0].severity, Severity::High);
        assert!(f[0].title.contains("launch-bound"), "{}", f[0].title);
    }

    #[test]
    fn sync_records_are_not_busy_time() {
        let t = TB::new()
            .op(Kernel, "a", 7, 0, 100_000, None)
            .op(GpuOpKind::Sync, "Stream Sync", 7, 100_000, 900_000, None)
            .op(Kernel, "b", 7, 900_000, 1_000_000, None)
            .build();
        let (f, _) = run(&t, &Config::default());
        assert_eq!(f[0].impact_ns, 800_000);
    }
}
