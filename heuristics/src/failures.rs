//! Runtime and driver calls that returned an error ([`tracehound_parsers::TraceMeta::failed_calls`]):
//! a kernel launch that fails runs nothing, so a capture whose launches failed holds no GPU
//! work to judge, whatever its idle time looks like. Shared by the `failed_calls` rule and
//! the verdict.

use tracehound_parsers::{FailedCalls, HostKind, Trace};

/// Whether a runtime or driver function launches GPU work (`cudaLaunchKernel`,
/// `cuLaunchKernel`, `cudaGraphLaunch`, `hipLaunchKernel`).
pub fn is_launch(name: &str) -> bool {
    name.contains("Launch") && (name.starts_with("cu") || name.starts_with("hip"))
}

/// The launch calls recorded, failed or not.
pub fn launch_calls(t: &Trace) -> u64 {
    let launch: Vec<bool> = t.strings.matching(is_launch);
    t.host_spans
        .iter()
        .filter(|s| matches!(s.kind, HostKind::Runtime | HostKind::Driver))
        .filter(|s| launch.get(s.name as usize).copied().unwrap_or(false))
        .count() as u64
}

/// The failed calls of a capture, launches apart.
pub struct Failures<'t> {
    /// Failed launch calls, most first.
    pub launches: Vec<&'t FailedCalls>,
    /// Other failed calls, most first.
    pub other: Vec<&'t FailedCalls>,
    /// Launch calls recorded, failed or not.
    pub launch_calls: u64,
}

impl Failures<'_> {
    /// Launch calls that failed.
    pub fn failed_launches(&self) -> u64 {
        self.launches.iter().map(|f| f.count).sum()
    }
}

/// The capture's failed calls; `None` when none failed.
pub fn failures(t: &Trace) -> Option<Failures<'_>> {
    if t.meta.failed_calls.is_empty() {
        return None;
    }
    let (launches, other): (Vec<_>, Vec<_>) =
        t.meta.failed_calls.iter().partition(|f| is_launch(&f.name));
    // A call made while the program tears CUDA down finds the runtime unloading or the
    // context gone: the work was done, nothing failed that mattered.
    let other = other
        .into_iter()
        .filter(|f| !TEARDOWN.contains(&f.code))
        .collect();
    Some(Failures {
        launches,
        other,
        launch_calls: launch_calls(t),
    })
}

/// `cudaErrorCudartUnloading` and `CUDA_ERROR_CONTEXT_IS_DESTROYED`: what calls made during
/// teardown return.
const TEARDOWN: [i64; 2] = [4, 709];

/// A function's name without the runtime's version suffix (`cudaLaunchKernel_v7000` →
/// `cudaLaunchKernel`).
pub fn call_name(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((head, v)) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => name,
    }
}

/// What an error code means: the runtime's name for it and what it says about the program.
/// The runtime (`cudaError_t`) and the driver (`CUresult`) share these numbers.
pub fn error_meaning(code: i64) -> Option<(&'static str, &'static str)> {
    Some(match code {
        1 => ("cudaErrorInvalidValue", "an argument was out of range"),
        2 => ("cudaErrorMemoryAllocation", "the device ran out of memory"),
        3 => ("cudaErrorInitializationError", "CUDA could not initialise"),
        4 => ("cudaErrorCudartUnloading", "the runtime was shutting down"),
        9 => (
            "cudaErrorInvalidConfiguration",
            "the launch asked for more threads or shared memory per block than the GPU allows",
        ),
        35 => (
            "cudaErrorInsufficientDriver",
            "the driver is older than the CUDA runtime",
        ),
        98 => (
            "cudaErrorInvalidDeviceFunction",
            "the kernel was not built for this GPU",
        ),
        100 => ("cudaErrorNoDevice", "no CUDA GPU was visible"),
        101 => ("cudaErrorInvalidDevice", "the device number does not exist"),
        200 => ("cudaErrorInvalidKernelImage", "the kernel image is invalid"),
        209 => (
            "cudaErrorNoKernelImageForDevice",
            "the binary holds no code for this GPU's architecture",
        ),
        222 => (
            "cudaErrorUnsupportedPtxVersion",
            "the PTX was compiled by a newer CUDA toolkit than the driver supports",
        ),
        400 => (
            "cudaErrorInvalidResourceHandle",
            "a stream or event handle was invalid",
        ),
        500 => ("cudaErrorSymbolNotFound", "a device symbol was not found"),
        700 => (
            "cudaErrorIllegalAddress",
            "a kernel accessed an invalid address; the context is lost",
        ),
        701 => (
            "cudaErrorLaunchOutOfResources",
            "the kernel needs more registers or resources per block than the GPU has",
        ),
        702 => (
            "cudaErrorLaunchTimeout",
            "a kernel ran past the watchdog's limit",
        ),
        709 => (
            "cudaErrorContextIsDestroyed",
            "the context was already destroyed",
        ),
        719 => (
            "cudaErrorLaunchFailure",
            "a kernel faulted; the context is lost",
        ),
        803 => (
            "cudaErrorSystemDriverMismatch",
            "the user-mode and kernel-mode drivers differ",
        ),
        _ => return None,
    })
}

/// `222 (cudaErrorUnsupportedPtxVersion: the PTX was compiled by …)`, or the bare code.
pub fn code_text(code: i64) -> String {
    match error_meaning(code) {
        Some((name, meaning)) => format!("{code} ({name}: {meaning})"),
        None => code.to_string(),
    }
}

/// The failed calls as a list: `cudaLaunchKernel ×21 returned 222 (…)`.
pub fn list(calls: &[&FailedCalls]) -> String {
    calls
        .iter()
        .map(|f| {
            format!(
                "{} ×{} returned {}",
                call_name(&f.name),
                f.count,
                code_text(f.code)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_the_version_suffix_only() {
        assert_eq!(call_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(call_name("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(call_name("cudaMemcpy_v3020"), "cudaMemcpy");
        assert_eq!(call_name("my_vector_v"), "my_vector_v");
    }

    #[test]
    fn launches_are_runtime_and_driver_calls_named_launch() {
        assert!(is_launch("cudaLaunchKernel_v7000"));
        assert!(is_launch("cuLaunchKernelEx"));
        assert!(is_launch("hipLaunchKernel"));
        assert!(is_launch("cudaGraphLaunch_v10000"));
        assert!(!is_launch("cudaMemcpy_v3020"));
        assert!(!is_launch("ncclLaunch"));
    }
}
