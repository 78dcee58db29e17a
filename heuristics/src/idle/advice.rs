//! What to do about each cause of idle time, following the measured leaf.

use super::CauseKind;
use crate::phases::Workload;

/// The advice for gaps of launch overhead in a PyTorch program (taken back by the analysis
/// where the launch_bound finding rules CUDA graphs out).
pub const LAUNCH_OVERHEAD: &str = "The GPU finishes each kernel faster than the host launches the next: batch more work per kernel (larger batch), fuse operators with torch.compile, or replay the step as a CUDA graph (torch.compile(mode=\"reduce-overhead\") or torch.cuda.CUDAGraph).";

/// The same, for a program that is not PyTorch.
pub const LAUNCH_OVERHEAD_CUDA: &str = "The GPU finishes each kernel faster than the host launches the next: give each kernel more work (fuse small kernels, process more elements per launch), or capture the launch sequence once as a CUDA graph (cudaStreamBeginCapture ... cudaGraphLaunch) and replay it.";

/// [`LAUNCH_OVERHEAD`] where the launch_bound finding rules CUDA graphs out.
pub const LAUNCH_OVERHEAD_NO_GRAPHS: &str = "The GPU finishes each kernel faster than the host launches the next: batch more work per kernel (larger batch) or fuse operators with torch.compile; the launch_bound finding says why a CUDA graph would not help here.";

/// [`LAUNCH_OVERHEAD_CUDA`] where the launch_bound finding rules CUDA graphs out.
pub const LAUNCH_OVERHEAD_CUDA_NO_GRAPHS: &str = "The GPU finishes each kernel faster than the host launches the next: give each kernel more work (fuse small kernels, process more elements per launch); the launch_bound finding says why a CUDA graph would not help here.";

/// Advice for a measured leaf of a category: the concrete change, not the class. Where the
/// work can go depends on the program: a training loop has DataLoader workers, a server or
/// a script does not; and a program that is not PyTorch gets it in CUDA's terms.
pub fn advice(kind: CauseKind, leaf: &str, workload: Workload, pytorch: bool) -> String {
    let l = leaf.to_ascii_lowercase();
    if !pytorch && let Some(a) = cuda_advice(kind, leaf, &l) {
        return a;
    }
    let training = workload == Workload::Training;
    let thread = if training {
        "the training thread"
    } else {
        "the thread that launches GPU work"
    };
    match kind {
        CauseKind::HostSync => {
            let what = if l.contains("aten::bincount") {
                "`torch.bincount` on the GPU reads the input's smallest and largest values on the host (to reject negatives and size its result): where the number of bins is known, count with `index_add_`/`scatter_add_` into `torch.zeros(n)`, which never waits"
            } else if l.contains("aten::is_nonzero") {
                "`if t:`, `bool(t)`, `assert t` or `while t` on a GPU tensor reads its value, which waits for the GPU: keep the decision on the GPU (`torch.where`, a multiply by the mask), check every N steps, or use `torch._assert_async`"
            } else if l.contains("aten::item") || l.contains("aten::_local_scalar_dense") {
                "`.item()` (and `float(t)`, `print(t)`) on a GPU tensor waits for the GPU: accumulate metrics on the GPU and read them every N steps"
            } else if l.contains("aten::nonzero") || l.contains("masked_select") || l.contains("aten::index") {
                "boolean-mask indexing and `nonzero()` must read the result size from the GPU: use `torch.where`/masked arithmetic with static shapes"
            } else if l.contains("aten::to") || l.contains("copy_") || l.contains("aten::cpu") || l.contains("memcpy") {
                "a device-to-host copy (`.cpu()`, `.numpy()`, `.tolist()`) or a copy from pageable memory blocks the host: copy into pinned memory with `non_blocking=True` and read it a step later, or keep the computation on the GPU"
            } else if l.contains("synchronize") {
                "an explicit `torch.cuda.synchronize()` / event or stream sync in the loop: keep it in timing code only"
            } else {
                "a synchronising call in the loop waits for the GPU: remove it or move it out of the step"
            };
            format!("Host sync at {leaf}: {what}.")
        }
        CauseKind::Allocator => {
            if l.contains("conv") {
                format!(
                    "{leaf}: cuDNN/MIOpen convolution workspaces are allocated and released per call; keep them cached (avoid `torch.cuda.empty_cache()`, set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`; on ROCm `MIOPEN_FIND_MODE=FAST` and a warmed-up workspace), and run a few warm-up steps before measuring."
                )
            } else {
                format!(
                    "{leaf}: the caching allocator goes to the driver in the loop (cudaFree synchronises the device). Remove `torch.cuda.empty_cache()` from the loop, keep tensor sizes stable, or set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`."
                )
            }
        }
        // A JIT's own annotation (nvFuser, NVRTC): it compiles again only for what its cache
        // has not seen.
        CauseKind::ModuleLoad if leaf.starts_with("JIT compilation") => format!(
            "{leaf}: kernels compiled just in time, once per new fusion and input shape or dtype. Warm up with the shapes the run uses before profiling or timing; if it recurs in the steady state, inputs keep arriving in new shapes or dtypes and miss the compiled-kernel cache: pad or bucket them."
        ),
        // A first call much slower than the operator's later calls: paid once, whatever
        // the set-up was.
        CauseKind::ModuleLoad if leaf.contains("later calls") => format!(
            "{leaf}: set-up paid once in the window (a library handle or workspace, lazy kernel loading, the profiler starting on that thread), not a per-step cost: leave it out when sizing the steady state, and profile past it (more warm-up steps) to confirm it does not recur."
        ),
        CauseKind::ModuleLoad => format!(
            "{leaf}: first-call cost (lazy module loading, library and handle start-up, JIT). Run warm-up steps before profiling or timing; if it recurs after warm-up, something recompiles (changing shapes under torch.compile, new kernels), and `CUDA_MODULE_LOADING=EAGER` moves loading to start-up."
        ),
        CauseKind::Autotune => format!(
            "{leaf}: cuDNN autotuning (`torch.backends.cudnn.benchmark=True`) runs again for every new input shape. Keep shapes fixed (pad or bucket sizes, `drop_last=True`) or set `cudnn.benchmark=False` when shapes vary."
        ),
        CauseKind::LaunchOverhead => LAUNCH_OVERHEAD.to_string(),
        // A tensor factory on the CPU (torch.randn(shape) before .to("cuda")): its own
        // device argument makes it on the GPU, with no host work and no copy.
        CauseKind::CpuOp if is_factory(leaf) => format!(
            "{leaf} makes a tensor on the CPU while the GPU waits: where it then goes to the GPU, make it there with the factory's device argument (torch.randn(shape, device=\"cuda\"), torch.randperm(n, device=\"cuda\")), or once outside the loop. A draw kept on the CPU to follow a CPU seed can use a CUDA generator seeded the same (torch.Generator(device=\"cuda\").manual_seed(seed))."
        ),
        CauseKind::CpuOp => {
            if training {
                format!(
                    "{leaf} runs on the training thread while the GPU waits: do it on the GPU (move the tensor first), in DataLoader workers (num_workers>0), or once outside the loop."
                )
            } else {
                format!(
                    "{leaf} runs on {thread} while the GPU waits: do it on the GPU (move the tensor first), ahead of time on another thread or process, or once outside the loop."
                )
            }
        }
        CauseKind::Python => {
            if l.contains("sleep") {
                format!("{leaf}: the loop sleeps while the GPU idles; remove the sleep (or move throttling and polling to another thread).")
            } else if l.contains("built-in method tensor") || l.contains("as_tensor") || l.contains("from_numpy") {
                if training {
                    format!("{leaf}: inputs are built from Python objects on the training thread; build them on the GPU (torch.arange/randn(device=...)), or in DataLoader workers from NumPy arrays into pinned memory.")
                } else {
                    format!("{leaf}: tensors are built from Python objects on {thread}; build them on the GPU (torch.arange/full(device=...)), reuse preallocated buffers, or copy from pinned NumPy arrays with non_blocking=True.")
                }
            } else if l.contains("_record_function_enter") || l.contains("_record_function_exit") {
                // torch.profiler.record_function's own entry and exit: instrumentation, not
                // work of the program's to move.
                format!("{leaf}: the profiler's record_function annotations (entered and left here while the GPU idles): instrumentation that costs this only while profiling, not work to move; the other causes here are what the run pays without it.")
            } else if l.contains("logging") || l.contains("print") || l.contains("write") {
                format!("{leaf}: logging in the loop; log every N steps, asynchronously, from values already on the host.")
            } else if tracehound_parsers::is_user_frame(leaf) {
                format!("{leaf}: your Python code runs while the GPU has nothing queued; move it out of the step, do it every N steps or on another thread, or express it as tensor operations on the GPU.")
            } else {
                if training {
                    format!("{leaf}: host-side Python work while the GPU idles; move it off the training thread (DataLoader workers, a background thread) or onto the GPU.")
                } else {
                    format!("{leaf}: host-side Python work while the GPU idles; move it off {thread} (a background thread or process), out of the loop, or onto the GPU.")
                }
            }
        }
        CauseKind::DataLoading => "Feed the GPU faster: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, prefetch_factor=4); move augmentation to the GPU (e.g. torchvision.transforms.v2 on CUDA tensors) or pre-process the dataset offline.".to_string(),
        CauseKind::Sampled => format!(
            "{leaf}: the host runs this between CUDA calls while the GPU idles (from CPU samples); move it off {thread}, out of the loop, or onto the GPU."
        ),
        CauseKind::OsCall => format!(
            "{} waits in {leaf}: a sleep, a lock or I/O on the critical path; move it off that thread.",
            upper_first(thread)
        ),
        CauseKind::Untraced => {
            if leaf.starts_with(super::NO_CPU_DATA) {
                format!("The trace cannot say what the host did: {leaf}.")
            } else {
                "Host time the profiler did not break down: record with `with_stack=True` (Kineto) to see the Python frames.".to_string()
            }
        }
        CauseKind::GpuWait => "Work was queued but the GPU still waited: with several streams or collectives, check cross-stream event waits, collectives on other streams, and whether a previous stream blocks this one; on one stream the wait is outside the trace (another process on the GPU, a Windows WDDM driver batching launches, work queued before the capture began).".to_string(),
        CauseKind::Unknown => "The launching thread is not in the trace: profile with ProfilerActivity.CPU so gaps can be attributed.".to_string(),
        CauseKind::ProfilerStartup => "Not a cost of the program: Kineto starts recording a moment into the first profiled step.".to_string(),
        CauseKind::ProfilerWork => "Not a cost of the program: the profiler held the launching thread while CUPTI requested or flushed its activity buffers; a capture of fewer steps, or of fewer events (no with_stack, no record_shapes), needs fewer buffers.".to_string(),
        CauseKind::Compile => {
            if l.contains("autotun") || l.contains("benchmark") {
                format!("{leaf}: Inductor benchmarks kernel configurations for every new shape it compiles. Fix the shapes (pad or bucket to a few sizes) so it tunes once, or keep the autotuning results between runs (TORCHINDUCTOR_FX_GRAPH_CACHE=1, the default cache dir kept).")
            } else {
                format!("{leaf}: torch.compile compiles while the GPU waits; once at start is expected (warm up before profiling), again in the loop means recompilation. See why with TORCH_LOGS=recompiles; for changing input sizes use torch.compile(dynamic=True) or torch._dynamo.mark_dynamic(x, dim) on the varying dimension, or pad/bucket inputs to a few fixed shapes.")
            }
        }
        CauseKind::GarbageCollection => format!(
            "{leaf}: a full garbage collection walks every tracked object while the GPU waits. Collect every N steps outside the step, call gc.freeze() once after start-up so long-lived objects (datasets, models) are not scanned again, and avoid building reference cycles per step."
        ),
        CauseKind::Gil => format!(
            "{leaf}: the launching thread needs the GIL to queue work, and another thread of the process kept it. Move that work to a separate process (multiprocessing, a logging/metrics service), make it release the GIL (C extensions, I/O), or run it between steps."
        ),
        CauseKind::GraphCapture => "Not a steady-state cost: capturing a CUDA/HIP graph records its launches once, at warm-up, and the GPU idles meanwhile. Profile the steps that replay the graph (torch.profiler.schedule(wait, warmup, active) with warm-up past the capture).".to_string(),
    }
}

/// Advice for allocator calls that held the GPU idle in one gap of the window only (gaps from
/// the threshold up): most likely a one-time allocation (start-up buffers, a first batch of a
/// new size), said with the condition under which it is a loop's churn after all.
pub fn allocator_once(leaf: &str, pytorch: bool) -> String {
    if pytorch {
        format!(
            "{leaf}: allocator calls in one gap of this window: paid once where they are start-up or a new size; if they recur step after step, remove `torch.cuda.empty_cache()` from the loop, keep tensor sizes stable, or set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`."
        )
    } else {
        format!(
            "{leaf}: allocator calls in one gap of this window: paid once where they set up buffers at start-up; if they recur in the loop, allocate once outside it and reuse the buffers, or use stream-ordered allocation (cudaMallocAsync / cudaFreeAsync) with a memory pool."
        )
    }
}

/// The causes whose PyTorch advice would not apply to a CUDA C/C++ (or other) program, in
/// the runtime's terms; `None` where the advice is the same.
fn cuda_advice(kind: CauseKind, leaf: &str, l: &str) -> Option<String> {
    Some(match kind {
        CauseKind::HostSync => {
            let what = if l.contains("memcpy") {
                "a blocking cudaMemcpy waits for the GPU and, from pageable memory, stages the copy: copy with cudaMemcpyAsync from pinned memory (cudaMallocHost / cudaHostRegister) on a stream, and wait on an event only where the host reads the data"
            } else {
                "a device or stream synchronisation in the loop drains the GPU's queue before the next launch: work on one stream already runs in order, so synchronise only where the host reads results, and order streams with events (cudaEventRecord, cudaStreamWaitEvent)"
            };
            format!("Host sync at {leaf}: {what}.")
        }
        CauseKind::Allocator => format!(
            "{leaf}: device memory is allocated and freed in the loop (cudaFree synchronises the device): allocate once outside the loop and reuse the buffers, or use stream-ordered allocation (cudaMallocAsync / cudaFreeAsync) with a memory pool."
        ),
        CauseKind::ModuleLoad => format!(
            "{leaf}: first-call cost (context creation, lazy module loading, library handles, JIT): run a warm-up iteration before the measured region (and capture only that region: cudaProfilerStart/Stop with nsys --capture-range=cudaProfilerApi); `CUDA_MODULE_LOADING=EAGER` moves module loading to start-up."
        ),
        CauseKind::LaunchOverhead => LAUNCH_OVERHEAD_CUDA.to_string(),
        CauseKind::Untraced if !leaf.starts_with(super::NO_CPU_DATA) => {
            "Host time the profiler did not break down: capture with CPU sampling and OS runtime tracing (nsys -s cpu -t cuda,nvtx,osrt) or NVTX ranges around the host's phases.".to_string()
        }
        CauseKind::Unknown => "The launching thread is not in the trace: capture the CUDA runtime calls (nsys -t cuda) so gaps can be attributed.".to_string(),
        CauseKind::GraphCapture => "Not a steady-state cost: capturing a CUDA/HIP graph records its launches once, at warm-up, and the GPU idles meanwhile. Profile the iterations that replay the graph.".to_string(),
        _ => return None,
    })
}

/// `the training thread` -> `The training thread`.
fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Whether `leaf` (`aten::randn on CPU`) is a tensor factory run on the CPU: an operator that
/// makes a tensor from nothing but its arguments, so its `device=` makes it on the GPU instead.
fn is_factory(leaf: &str) -> bool {
    const FACTORIES: &[&str] = &[
        "aten::randn",
        "aten::rand",
        "aten::randint",
        "aten::randperm",
        "aten::normal",
        "aten::zeros",
        "aten::ones",
        "aten::full",
        "aten::arange",
        "aten::linspace",
        "aten::eye",
    ];
    leaf.strip_suffix(" on CPU")
        .is_some_and(|op| FACTORIES.contains(&op))
}
