//! Reading counter series (nvidia-smi dmon / --query-gpu) against the analysed window.

use crate::finding::{Confidence, Finding, Severity};
use crate::scope::Scope;
use crate::window::Window;
use tracehound_parsers::{CounterSeries, Trace};

/// The counters' sampling interval, ns, as the capture's reader found it: a sample stamped S
/// covers the interval that starts at S. (dmon prints HH:MM:SS, truncated: on the H200
/// captures a 0.46 s trace starting at 16:35:32.219 shows in the sample stamped 16:35:32, and
/// the one stamped 16:35:33 reads 0%.)
pub fn period(trace: &Trace) -> i64 {
    trace.meta.capture.counter_period_ns()
}

/// The series of `metric` for `gpu`, if recorded.
pub fn series<'t>(trace: &'t Trace, gpu: i32, metric: &str) -> Option<&'t CounterSeries> {
    trace
        .counters
        .iter()
        .find(|c| c.gpu == gpu && c.metric == metric)
}

/// Samples of `s` (a series of `trace`) that describe the window: those whose interval lies at
/// least half inside it. A sample longer than most of the window it would describe (a 1 s
/// dmon sample over a 0.3 s capture) averages the window with whatever ran around it, so it
/// says nothing about the window: a statement drawn from counters needs samples at the
/// window's resolution.
pub fn in_window<'s>(trace: &Trace, s: &'s CounterSeries, w: &Window) -> &'s [(i64, f64)] {
    let period = period(trace);
    let inside = |x: &(i64, f64)| {
        let (a, b) = (x.0.max(w.start), (x.0 + period).min(w.end));
        2 * (b - a) >= period
    };
    let a = s.samples.partition_point(|x| x.0 + period <= w.start);
    let b = s.samples.partition_point(|x| x.0 < w.end).max(a);
    let mut a2 = a;
    while a2 < b && !inside(&s.samples[a2]) {
        a2 += 1;
    }
    let mut b2 = b;
    while b2 > a2 && !inside(&s.samples[b2 - 1]) {
        b2 -= 1;
    }
    &s.samples[a2..b2]
}

/// Whether `s` has samples over the window but none that describe it ([`in_window`]): its
/// samples are coarser than the window.
pub fn coarser_than(trace: &Trace, s: &CounterSeries, w: &Window) -> bool {
    let period = period(trace);
    in_window(trace, s, w).is_empty()
        && s.samples
            .iter()
            .any(|x| x.0 < w.end && x.0 + period > w.start)
}

/// The sample of `s` (a series of `trace`) whose interval contains time `t`.
pub fn value_at(trace: &Trace, s: &CounterSeries, t: i64) -> Option<f64> {
    let period = period(trace);
    let k = s.samples.partition_point(|x| x.0 <= t);
    k.checked_sub(1)
        .map(|k| s.samples[k])
        .filter(|x| t - x.0 < period)
        .map(|x| x.1)
}

/// GPUs that have counter series, ascending.
pub fn gpus(trace: &Trace) -> Vec<i32> {
    let mut g: Vec<i32> = trace.counters.iter().map(|c| c.gpu).collect();
    g.sort();
    g.dedup();
    g
}

/// GPUs with counter series or an inventory entry, ascending.
pub fn gpus_with_inventory(trace: &Trace) -> Vec<i32> {
    let mut g = gpus(trace);
    g.extend(0..trace.inventory.len() as i32);
    g.sort();
    g.dedup();
    g
}

/// Mean of values.
pub fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, s) = v.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| s / n as f64)
}

/// The window over which counters are judged: the analysed window when the trace has GPU
/// work, else the log's active period.
pub(crate) fn counter_window(cx: &Scope, gpu: i32) -> Option<Window> {
    if !cx.trace.gpu_ops.is_empty() {
        return Some(cx.window.clone());
    }
    let sm = series(cx.trace, gpu, "sm")?;
    let first = sm.samples.iter().find(|s| s.1 > 0.0)?.0;
    let last = sm.samples.iter().rev().find(|s| s.1 > 0.0)?.0;
    Some(Window {
        start: first,
        end: last + period(cx.trace),
        source: crate::window::WindowSource::WholeTrace,
    })
}

pub(crate) fn loaded(t: &Trace, gpu: i32, w: &Window) -> Vec<(i64, f64)> {
    series(t, gpu, "sm")
        .map(|s| in_window(t, s, w).to_vec())
        .unwrap_or_default()
}

pub(crate) fn at(t: &Trace, gpu: i32, metric: &str, ts: i64) -> Option<f64> {
    series(t, gpu, metric).and_then(|s| {
        s.samples
            .binary_search_by_key(&ts, |x| x.0)
            .ok()
            .map(|k| s.samples[k].1)
    })
}

pub(crate) fn base(
    rule: &'static str,
    gpu: i32,
    title: String,
    severity: Severity,
    evidence: String,
    advice: &str,
) -> Finding {
    Finding {
        id: String::new(),
        rule,
        subject: None,
        title,
        severity,
        impact_ns: 0,
        impact_share: 0.0,
        confidence: Confidence::Medium,
        device: Some(gpu),
        evidence,
        breakdown: Vec::new(),
        instances: Vec::new(),
        advice: vec![advice.to_string()],
        metrics: Default::default(),
    }
}

/// The board power limit: from a --query-gpu log, else the -q -x inventory.
pub(crate) fn power_limit(t: &Trace, gpu: i32) -> Option<f64> {
    series(t, gpu, "power_limit")
        .and_then(|s| s.samples.last().map(|x| x.1))
        .or_else(|| t.inventory.get(gpu as usize).and_then(|i| i.power_w.1))
}
