//! tracehound: GPU performance triage for PyTorch profiler traces.
//!
//! Exit codes: 0 ok, 1 findings at or above `--fail-on`, 2 bad input or usage.

mod cli;
mod diff;
mod report;
mod scale;
#[cfg(feature = "sql")]
mod sql;
#[cfg(feature = "sql")]
mod tables;
mod tui;

fn main() {
    std::process::exit(cli::main());
}
