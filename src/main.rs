//! tracehound: GPU performance triage for PyTorch profiler traces.
//!
//! Exit codes: 0 ok, 1 findings at or above `--fail-on`, 2 bad input or usage.

fn main() {
    fixed_mmap_threshold();
    std::process::exit(tracehound::cli::main());
}

/// Keeps glibc's mmap threshold at its 128 KiB default. Left dynamic, glibc raises it to the
/// size of each large block freed (up to 32 MiB), so the rules' per-worker tables and lists
/// come from the heaps instead, where freed space stays resident: a 1 GB trace's peak
/// was 15 MB higher (262 against 247 MB). Blocks above the threshold are mapped and go
/// back to the system when freed.
fn fixed_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}
