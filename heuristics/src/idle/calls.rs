//! What a host call or span is, by its name: module loading, the DataLoader, convolutions,
//! timing syncs; and names shortened for a gap's breakdown (allocator calls: `crate::names`).

use crate::names::short_name;

/// Module loading and JIT compilation.
pub(super) fn is_module_load_call(n: &str) -> bool {
    n.starts_with("cuModuleLoad")
        || n.starts_with("cuLibraryLoad")
        || n.starts_with("nvrtc")
        || n.starts_with("hipModuleLoad")
        || n.starts_with("hiprtc")
        || n == "cuModuleGetFunction"
        || n == "cuLibraryGetKernel"
        || n == "cudaGetFuncBySymbol"
}

/// The DataLoader, as `record_function` names it or as a Python frame.
pub(super) fn is_loader(name: &str) -> bool {
    name.contains("DataLoader") || name.contains("dataloader.py")
}

/// torch.compile's own work, as its `dynamo_timed` spans name it: Dynamo tracing a frame,
/// AOTAutograd and Inductor compiling it (`entire_frame_compile`), and the lazy backward
/// compilation inside `CompiledFunctionBackward` (`entire_backward_compile`).
pub(super) fn is_compile(name: &str) -> bool {
    crate::phases::is_compile_span(name)
}

/// Inductor benchmarking kernel configurations for a new shape (`CachingAutotuner`,
/// max-autotune's `AlgorithmSelectorCache`).
pub(super) fn is_inductor_tuning(name: &str) -> bool {
    crate::phases::is_inductor_tuning(name)
}

/// A garbage collection the program asked for: `gc.collect()`'s frame.
pub(super) fn is_gc(name: &str) -> bool {
    name == "<built-in function collect>"
}

/// Convolution operators (cuDNN / MIOpen autotune inside them).
pub(super) fn is_conv(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("conv") && !n.contains("convert")
}

/// Event, stream and device synchronisation: what cuDNN's benchmark mode does between
/// trial kernels, and never inside a tuned convolution.
pub(super) fn is_timing_sync(n: &str) -> bool {
    n.ends_with("EventSynchronize")
        || n.ends_with("StreamSynchronize")
        || n.ends_with("DeviceSynchronize")
}

/// A sampled C++ symbol as a reader wants it: the ATen kernel a `function_ref` callback or a
/// TensorIterator loop runs (`at::native::cpu_upsample_linear`), else the name without its
/// template and argument lists.
pub(super) fn sampled_symbol(sym: &str) -> String {
    if sym.is_empty() {
        return "(unnamed function)".into();
    }
    if let Some(k) = sym.find("at::native::") {
        let rest = sym[k..].replace("(anonymous namespace)::", "");
        let end = rest.find(['<', '(', ' ', ',']).unwrap_or(rest.len());
        return rest[..end].to_string();
    }
    short_name(sym, 80)
}

/// `<built-in method tensor of type object at 0x7f..>` -> `built-in method tensor`.
pub(super) fn clean_frame(name: &str) -> String {
    let n = name.trim();
    if let Some(inner) = n.strip_prefix('<').and_then(|x| x.strip_suffix('>')) {
        let cut = inner.find(" of ").unwrap_or(inner.len());
        return inner[..cut].to_string();
    }
    n.to_string()
}
