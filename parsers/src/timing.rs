//! Phase timings for finding where a load's time goes: with `TRACEHOUND_TIMINGS=1` in the
//! environment, each phase prints its wall time to standard error. Off by default, and then
//! costs one load of a cached flag per phase.

use std::sync::OnceLock;
use std::time::Instant;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("TRACEHOUND_TIMINGS").is_some_and(|v| v != "0"))
}

/// A running phase clock: [`Phases::mark`] prints the time since the previous mark.
pub struct Phases {
    last: Instant,
    on: bool,
}

impl Phases {
    /// Starts the clock.
    pub fn start() -> Self {
        Phases {
            last: Instant::now(),
            on: enabled(),
        }
    }

    /// Prints `what` with the wall time since the previous mark (or the start).
    pub fn mark(&mut self, what: &str) {
        if self.on {
            let now = Instant::now();
            eprintln!(
                "timing: {what:<28} {:>8.1} ms",
                (now - self.last).as_secs_f64() * 1e3
            );
            self.last = now;
        }
    }
}

/// Runs `f`, printing its wall time under `what` when timings are on.
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    if !enabled() {
        return f();
    }
    let t0 = Instant::now();
    let r = f();
    eprintln!(
        "timing:   {what:<26} {:>8.1} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    r
}
