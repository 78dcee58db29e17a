//! What the profiler's own recording does to a capture's host time: the PyTorch profiler adds
//! host time to every operator call it records, so a host that lags the GPU in a capture may
//! not lag it outside the profiler. The trace holds no measure of that cost; what is known is
//! how far it went in captures timed both ways, and a lag within that is said to be the
//! capture's, not surely the program's.

use crate::context::Ctx;

/// The most the profiler's own recording is taken to slow the host: in the blind set's
/// captures timed both with and without it, a host-bound step took 1.5–3.3× as long under the
/// profiler (with and without Python stacks), a few with_stack captures more.
pub(crate) const PROFILER_SLOWDOWN: f64 = 4.0;

/// What [`PROFILER_SLOWDOWN`] rests on, in the findings' words.
const PROFILER_MEASURED: &str =
    "host-bound steps took 1.5–3.3× as long under it as without it in captures timed both ways";

/// A lag of `ratio` ([`within_profiler_slowdown`]) in words, as launch_bound and the verdict
/// both say it.
pub(crate) fn lag_words(ratio: f64) -> String {
    format!(
        "the host took {ratio:.1}× the GPU's busy time to issue this window, within what the profiler's recording alone can add ({PROFILER_MEASURED})"
    )
}

/// How many times device `d`'s busy time the host took to issue the window's work (the
/// window, less the profiler's start-up, its own buffer work and graph capture, over the busy
/// time), where
/// that is within what the profiler's recording alone can add ([`PROFILER_SLOWDOWN`]): the
/// waits are measured, but whether the host bounds the program outside the profiler is not in
/// the capture (a training step printed its loss, 39% busy under the profiler and 86% outside
/// it). None outside a capture whose operators the PyTorch profiler recorded, and where the
/// host lags further behind than the profiler explains. With the ratio, the busy time, ns.
pub(crate) fn within_profiler_slowdown(cx: &Ctx, d: i32) -> Option<(f64, i64)> {
    let c = &cx.trace.meta.capture;
    if !(c.pytorch_profiler && c.cpu_ops) {
        return None;
    }
    let idle = cx.idle().iter().find(|i| i.device == d)?;
    let steady = cx.window.len() - idle.warm_up_ns();
    if idle.busy_ns <= 0 || steady <= idle.busy_ns {
        return None;
    }
    let ratio = steady as f64 / idle.busy_ns as f64;
    (ratio < PROFILER_SLOWDOWN).then_some((ratio, idle.busy_ns))
}
