//! tracehound: GPU performance triage for PyTorch profiler traces.
//!
//! Exit codes: 0 ok, 1 findings at or above `--fail-on`, 2 bad input or usage.

fn main() {
    std::process::exit(tracehound::cli::main());
}
