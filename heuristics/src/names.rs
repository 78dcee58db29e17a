//! Names as the analysis reads them: spans, CUDA/HIP API calls, kernels and operators
//! shortened for a table cell.

use tracehound_parsers::{NONE, Trace};

/// Name of span `i`, or `fallback` for NONE.
pub(crate) fn span_name<'t>(trace: &'t Trace, i: u32, fallback: &'t str) -> &'t str {
    name_or(trace, span_name_id(trace, i), fallback)
}

/// The name's string id of span `i`, or NONE for NONE: a key to group spans by, spelled once
/// per group with [`name_or`] rather than once per span.
pub(crate) fn span_name_id(trace: &Trace, i: u32) -> u32 {
    if i == NONE {
        NONE
    } else {
        trace.host_spans[i as usize].name
    }
}

/// The text of string id `id` ([`span_name_id`]), or `fallback` for NONE.
pub(crate) fn name_or<'t>(trace: &'t Trace, id: u32, fallback: &'t str) -> &'t str {
    if id == NONE { fallback } else { trace.str(id) }
}

/// Operators that make a view of a tensor and launch nothing: a host loop taking elements or
/// rows one at a time calls them once per item.
pub const VIEW_OPS: &[&str] = &[
    "aten::select",
    "aten::slice",
    "aten::narrow",
    "aten::as_strided",
    "aten::view",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::expand",
];

/// Whether `kernel` is PyTorch's softmax over a dim that is not the last
/// (`cunn_SpatialSoftMaxForward` / `Backward`: inner size above one, as in `cross_entropy` on
/// `(N, C, d…)` logits or `softmax(x, dim=1)` with dims after it). Its blocks tile the dims
/// before and after the one reduced, 1,024 inner positions to a block, so a long reduced dim
/// between few of them gets few blocks: [8, 32000, 1024] ran on 8 of an H100's 132 SMs.
pub(crate) fn is_spatial_softmax(kernel: &str) -> bool {
    kernel.contains("SpatialSoftMax")
}

/// What replaces a slow softmax over a non-last dim ([`is_spatial_softmax`]).
pub(crate) const SPATIAL_SOFTMAX_ADVICE: &str = "cunn_SpatialSoftMax is PyTorch's softmax over a dim that is not the last: cross_entropy given (N, C, d…) logits (logits.transpose(1, 2) of a (N, T, C) tensor), or softmax/log_softmax(dim=1) with dims after it. Its blocks tile the dims around the one reduced, so a long class dim between few of them runs on a few SMs. Keep the classes last where the producer puts them there: F.cross_entropy(logits.reshape(-1, C), target.reshape(-1)), softmax(dim=-1); a map with few classes in the middle (segmentation) runs well in this form.";

/// CUDA / HIP calls that block the host until the GPU has drained, by the API's name
/// ([`Trace::api_name`](tracehound_parsers::Trace::api_name): no version suffix).
pub fn is_sync_call(n: &str) -> bool {
    n.ends_with("Synchronize")
        || matches!(
            n,
            "cudaMemcpy"
                | "cudaMemcpy2D"
                | "cudaFree"
                | "cudaFreeHost"
                | "hipMemcpy"
                | "hipMemcpyWithStream"
                | "hipMemcpyDtoH"
                | "hipFree"
                | "cudaMemset"
                | "cuMemcpyDtoH"
                | "cuMemFree"
        )
}

/// Allocator entry points of CUDA, the driver and HIP (host and device memory, the
/// stream-ordered pool, virtual memory management), by the API's name: idle_gaps' attribution
/// and launch_bound's host calls read it.
pub fn is_alloc_call(n: &str) -> bool {
    matches!(
        n,
        "cudaMalloc"
            | "cudaFree"
            | "cudaMallocAsync"
            | "cudaFreeAsync"
            | "cudaMallocHost"
            | "cudaFreeHost"
            | "cudaHostAlloc"
            | "cudaMallocManaged"
            | "cudaMallocPitch"
            | "cuMemAlloc"
            | "cuMemFree"
            | "cuMemAllocAsync"
            | "cuMemFreeAsync"
            | "cuMemAllocPitch"
            | "cuMemCreate"
            | "cuMemRelease"
            | "cuMemMap"
            | "cuMemUnmap"
            | "cuMemAddressReserve"
            | "cuMemAddressFree"
            | "hipMalloc"
            | "hipFree"
            | "hipMallocAsync"
            | "hipFreeAsync"
            | "hipHostMalloc"
            | "hipHostFree"
            | "hipExtMallocWithFlags"
    )
}

/// `name` demangled when it is an Itanium C++ ABI symbol (`_Z…`), as CUPTI leaves some
/// library kernels (cuDNN's CUTLASS convolutions: `_ZN17cutlass__5x_cudnn6KernelI…`); any
/// other name, or a symbol that does not parse, as it is.
pub fn demangle(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.starts_with("_Z") {
        return std::borrow::Cow::Borrowed(name);
    }
    cpp_demangle::Symbol::new(name.as_bytes())
        .ok()
        .and_then(|s| s.demangle().ok())
        // Without the return type: a kernel's is `void`.
        .map(|d| match d.strip_prefix("void ") {
            Some(rest) => rest.to_string(),
            None => d,
        })
        .map_or(std::borrow::Cow::Borrowed(name), std::borrow::Cow::Owned)
}

/// Shortens a kernel or operator name for a table cell: demangles it and drops template and
/// argument lists.
pub fn short_name(name: &str, max: usize) -> String {
    if name.starts_with("Memcpy") || name.starts_with("Memset") {
        return name.to_string();
    }
    let name = demangle(name);
    let mut out = String::new();
    let mut depth = 0i32;
    for c in name.chars() {
        match c {
            '<' | '(' => {
                if depth == 0 {
                    out.push(if c == '<' { '<' } else { '(' });
                    out.push('…');
                    out.push(if c == '<' { '>' } else { ')' });
                }
                depth += 1;
            }
            '>' | ')' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    clip(out.trim().trim_start_matches("void "), max)
}

/// `name` (demangled) with its template arguments kept and its parameter list elided:
/// `cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, 1, 1>(…)`.
fn with_templates(name: &str) -> String {
    let mut out = String::new();
    let (mut angle, mut paren) = (0i32, 0i32);
    for c in name.chars() {
        match c {
            '(' if angle == 0 => {
                if paren == 0 {
                    out.push_str("(…)");
                }
                paren += 1;
            }
            ')' if angle == 0 => paren -= 1,
            _ if paren > 0 => {}
            '<' => {
                angle += 1;
                out.push(c);
            }
            '>' => {
                angle -= 1;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out.trim().trim_start_matches("void ").to_string()
}

/// Short names for the kernels of one table or chart, shortened only as far as they stay
/// distinct: each as [`short_name`] gives it; where two different names would read the same
/// (two instantiations of one template), with their template arguments, or, when those run
/// past `max` (CUTLASS kernels carry thousands of characters of them), with the stretch of
/// arguments where the name first parts from the others; where even those are the same, whole
/// (demangled).
pub fn distinct_short_names(names: &[&str], max: usize) -> Vec<String> {
    // Demangled once: a table redraws every frame in the TUI, and a CUTLASS symbol is
    // thousands of characters.
    let demangled: Vec<std::borrow::Cow<str>> = names.iter().map(|n| demangle(n)).collect();
    let short: Vec<String> = demangled.iter().map(|n| short_name(n, max)).collect();
    let clash = |forms: &[String], i: usize| {
        forms
            .iter()
            .enumerate()
            .any(|(j, f)| j != i && *f == forms[i] && names[j] != names[i])
    };
    let short_clashes: Vec<bool> = (0..names.len()).map(|i| clash(&short, i)).collect();
    let full: Vec<String> = (0..names.len())
        .map(|i| {
            if short_clashes[i] {
                with_templates(&demangled[i])
            } else {
                String::new()
            }
        })
        .collect();
    let templated: Vec<String> = (0..names.len())
        .map(|i| {
            if !short_clashes[i] {
                short[i].clone()
            } else if full[i].chars().count() <= max {
                full[i].clone()
            } else {
                let rivals = (0..names.len())
                    .filter(|&j| j != i && short[j] == short[i] && names[j] != names[i])
                    .map(|j| full[j].as_str());
                parting(&short[i], &full[i], rivals, max)
            }
        })
        .collect();
    (0..names.len())
        .map(|i| {
            if clash(&templated, i) {
                demangle(names[i].trim()).into_owned()
            } else {
                templated[i].clone()
            }
        })
        .collect()
}

/// `short` (`ns::Kernel<…>(…)`) with the stretch of `full`'s template arguments where it parts
/// from the rival that stays alike longest: `ns::Kernel<…GemmShape<64, 128, 32>, ns::…>(…)`,
/// at most about `max` characters.
fn parting<'a>(
    short: &str,
    full: &str,
    rivals: impl Iterator<Item = &'a str>,
    max: usize,
) -> String {
    let chars: Vec<char> = full.chars().collect();
    let at = rivals
        .map(|r| {
            chars
                .iter()
                .zip(r.chars())
                .take_while(|(a, b)| *a == b)
                .count()
        })
        .max()
        .unwrap_or(0)
        .min(chars.len());
    let head_open = chars.iter().position(|&c| c == '<');
    let Some(head_open) = head_open else {
        // No template: the name's start, and the stretch from the word that differs
        // (`sm90_xmma_dgrad_…tilesize128x128x32_warpgroupsize1x1x1…`).
        let mut from = at;
        while from > 0 && !matches!(chars[from - 1], '_' | ' ' | ':') {
            from -= 1;
        }
        let room = max.saturating_sub(2) / 2;
        if from <= room {
            return clip(full, max);
        }
        let start: String = chars[..room].iter().collect();
        return format!(
            "{start}…{}",
            clip(&chars[from..].iter().collect::<String>(), room)
        );
    };
    // The kernel's own template arguments end where its list closes.
    let mut depth = 0i32;
    let end = chars[head_open..]
        .iter()
        .position(|&c| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            depth == 0
        })
        .map_or(chars.len(), |k| head_open + k);
    let at = at.min(end);
    // Back to the start of the template argument list the difference lies in, and of the
    // template's name: `GemmShape<64, 128, 32>` rather than `128, 32>`. Inside the kernel's own
    // list (its head), back to the start of the argument only.
    let mut depth = 0i32;
    let mut open = None;
    for k in (head_open..at).rev() {
        match chars[k] {
            '>' => depth += 1,
            '<' if depth == 0 => {
                open = Some(k);
                break;
            }
            '<' => depth -= 1,
            _ => {}
        }
    }
    let mut from = at;
    match open {
        Some(o) if o != head_open => {
            from = o;
            while from > 0 && !matches!(chars[from - 1], '<' | ',' | ' ' | ':') {
                from -= 1;
            }
        }
        _ => {
            while from > head_open + 1 && !matches!(chars[from - 1], '<' | ',' | ' ') {
                from -= 1;
            }
        }
    }
    let head = short.split('<').next().unwrap_or(short);
    let room = max.saturating_sub(head.chars().count() + 6).max(12);
    // The stretch must reach the difference: `…(cudnnKernelDataType_t)0` and `…)2` clipped
    // before their last character would read the same.
    from = from.max((at + 4).min(end).saturating_sub(room));
    let stretch: String = chars[from..end].iter().take(room).collect();
    let skipped = from > head_open + 1;
    let more = end - from > room;
    format!(
        "{head}<{}{stretch}{}>(…)",
        if skipped { "…" } else { "" },
        if more { "…" } else { "" }
    )
}

/// `text` cut to `max` characters, the last an ellipsis when it was longer.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        text.to_string()
    }
}

/// Most frequent value of a list of optional strings (ties: first in sort order).
pub(crate) fn most_common<S: AsRef<str>>(items: &[Option<S>]) -> Option<String> {
    let mut v: Vec<&str> = items.iter().flatten().map(AsRef::as_ref).collect();
    v.sort_unstable();
    let mut best: Option<(&str, usize)> = None;
    let mut k = 0;
    while k < v.len() {
        let mut j = k;
        while j < v.len() && v[j] == v[k] {
            j += 1;
        }
        if best.is_none_or(|(_, n)| j - k > n) {
            best = Some((v[k], j - k));
        }
        k = j;
    }
    best.map(|(s, _)| s.to_string())
}

/// The name Nsight Compute's `--kernel-name` matches by default (`--kernel-name-base
/// function`): the function's own name, without namespaces, template arguments, parameters or
/// return type; None when nothing is left (an unnamed function).
pub fn ncu_function_name(kernel: &str) -> Option<String> {
    let name = demangle(kernel);
    // Drop what is inside brackets, at any depth: the parameter list, template arguments and
    // `(anonymous namespace)`.
    let mut plain = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '(' | '<' => depth += 1,
            ')' | '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    // A function template's demangled name starts with its return type (`void f<…>(…)`).
    let last = plain.trim().rsplit(' ').next().unwrap_or("");
    let base = last.rsplit("::").next().unwrap_or(last).trim();
    (!base.is_empty()).then(|| base.to_string())
}

/// " (ncu --kernel-name render --launch-count 1)", or nothing for an unnamed function.
pub fn ncu_command(kernel: &str) -> String {
    ncu_function_name(kernel)
        .map(|n| format!(" (ncu --kernel-name {n} --launch-count 1)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {

    #[test]
    fn kernel_names_stay_distinct() {
        let a =
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, 1, 1>(float, float, int)";
        let b =
            "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, 1, 1>(float, float, int)";
        let c = "void at::native::elementwise_kernel<128, 4>(int)";
        let names = super::distinct_short_names(&[a, b, c, a], 70);
        assert_eq!(
            names[0],
            "cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, 1, 1>(…)"
        );
        assert_eq!(
            names[1],
            "cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, 1, 1>(…)"
        );
        assert_eq!(names[2], "at::native::elementwise_kernel<…>(…)");
        assert_eq!(names[3], names[0]);
        // Same templates, different parameters: whole.
        let d = "k<int>(float)";
        let e = "k<int>(double)";
        assert_eq!(super::distinct_short_names(&[d, e], 70), [d, e]);
    }

    use super::*;

    #[test]
    fn names() {
        assert_eq!(
            short_name(
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)",
                80
            ),
            "at::native::vectorized_elementwise_kernel<…>(…)"
        );
        assert!(is_sync_call("cudaStreamSynchronize"));
        assert!(is_sync_call("cudaDeviceSynchronize"));
        assert!(!is_sync_call("cudaMemcpyAsync"));
        assert_eq!(
            most_common(&[Some("b"), None, Some("a"), Some("b")]),
            Some("b".into())
        );
    }
}
