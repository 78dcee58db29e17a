//! Phase timings for finding where a load's time goes: with `TRACEHOUND_TIMINGS=1` in the
//! environment, each phase prints its wall time to standard error. Off by default, and then
//! costs one load of a cached flag per phase.

use std::sync::OnceLock;
use std::time::Instant;

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("TRACEHOUND_TIMINGS").is_some_and(|v| v != "0"))
}

/// Resident and peak memory of this process (Linux), as `now/peak MB`.
fn memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|k| k.parse::<u64>().ok())
            .map_or("?".to_string(), |kb| (kb / 1024).to_string())
    };
    format!("{}/{} MB", field("VmRSS:"), field("VmHWM:"))
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
                "timing: {what:<28} {:>8.1} ms  rss {}",
                (now - self.last).as_secs_f64() * 1e3,
                memory()
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
        "timing:   {what:<26} {:>8.1} ms  rss {}",
        t0.elapsed().as_secs_f64() * 1e3,
        memory()
    );
    r
}
