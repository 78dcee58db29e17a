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

/// CPU time (user and system) of the whole process so far, in seconds; 0 where unknown.
fn cpu_seconds() -> f64 {
    #[cfg(unix)]
    {
        // SAFETY: getrusage writes the struct it is given and nothing else.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } == 0 {
            let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
            return t(u.ru_utime) + t(u.ru_stime);
        }
    }
    0.0
}

/// A running phase clock: [`Phases::mark`] prints the time since the previous mark.
pub struct Phases {
    last: Instant,
    last_cpu: f64,
    on: bool,
}

impl Phases {
    /// Starts the clock.
    pub fn start() -> Self {
        let on = enabled();
        Phases {
            last: Instant::now(),
            last_cpu: if on { cpu_seconds() } else { 0.0 },
            on,
        }
    }

    /// Prints `what` with the wall time since the previous mark (or the start), and the CPU
    /// time of all threads in that while (twice the wall time: both cores busy).
    pub fn mark(&mut self, what: &str) {
        if self.on {
            let (now, cpu) = (Instant::now(), cpu_seconds());
            eprintln!(
                "timing: {what:<28} {:>8.1} ms  cpu {:>7.1} ms  rss {}",
                (now - self.last).as_secs_f64() * 1e3,
                (cpu - self.last_cpu) * 1e3,
                memory()
            );
            (self.last, self.last_cpu) = (now, cpu);
        }
    }
}

/// Runs `f`, printing its wall time under `what` when timings are on, and the process's CPU
/// time meanwhile: all threads, so for a task run beside others (the rules, in parallel) it is
/// theirs too; `RAYON_NUM_THREADS=1` gives each task's own.
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    if !enabled() {
        return f();
    }
    let (t0, cpu0) = (Instant::now(), cpu_seconds());
    let r = f();
    eprintln!(
        "timing:   {what:<26} {:>8.1} ms  cpu {:>7.1} ms  rss {}",
        t0.elapsed().as_secs_f64() * 1e3,
        (cpu_seconds() - cpu0) * 1e3,
        memory()
    );
    r
}
