//! Kernel names as a reader sees them: mangled names demangled (checked against LLVM's
//! demangler), and names shortened only as far as they stay distinct, in the binary's output.

mod common;
use common::*;

/// The fixture's pairs: a mangled kernel name from a shipped trace, and what llvm-cxxfilt
/// printed for it (the name itself where it could not demangle it).
fn pairs() -> Vec<(String, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/kernel_names_demangled.tsv");
    std::fs::read_to_string(&path)
        .expect("the fixture is in the repository")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (m, d) = l.split_once('\t').expect("a tab between the two names");
            (m.to_string(), d.to_string())
        })
        .collect()
}

#[test]
fn mangled_kernel_names_demangle_as_llvm_does() {
    let pairs = pairs();
    assert_eq!(pairs.len(), 23);
    let mut checked = 0;
    for (mangled, llvm) in &pairs {
        let ours = tracehound_heuristics::names::demangle(mangled);
        if llvm == mangled {
            // LLVM 14 predates the `DF16b` (std::bfloat16_t) mangling these ROCm kernels use:
            // nothing to compare with, but the name must not be mangled any more, or kept whole.
            assert!(
                *ours == **mangled || !ours.starts_with("_Z"),
                "{mangled} -> {ours}"
            );
            continue;
        }
        // Kernels return void; the name is shown without it.
        let want = llvm.strip_prefix("void ").unwrap_or(llvm);
        assert_eq!(ours, want, "{mangled}");
        checked += 1;
    }
    assert_eq!(checked, 14);
    // Names that are not Itanium symbols pass through as they are.
    for plain in [
        "void at::native::elementwise_kernel<128, 4>(int)",
        "_Zfoo is no symbol",
        "Memcpy HtoD (Pageable -> Device)",
    ] {
        assert_eq!(tracehound_heuristics::names::demangle(plain), plain);
    }
}

#[test]
fn the_summary_shows_cudnn_kernels_demangled_and_distinct() {
    // Two CUTLASS convolution kernels of cuDNN's, recorded mangled: 1636 and 1675 characters
    // that differ first in their GemmShape (<64, 128, 16> and <64, 64, 32>).
    let trace = own("h200_resnet_unpinned_sync.pt.trace.json.gz");
    let out = run(&[
        "summary",
        "--top",
        "100",
        trace.to_str().expect("utf-8 path"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("_ZN"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("cutlass__5x_cudnn::Kernel<"))
        .collect();
    assert!(
        rows.iter().any(|l| l.contains("GemmShape<64, 128, 16>")),
        "{text}"
    );
    assert!(
        rows.iter().any(|l| l.contains("GemmShape<64, 64, 32>")),
        "{text}"
    );
    // Each row fits the summary's name column instead of carrying the whole name.
    assert!(rows.iter().all(|l| l.chars().count() < 160), "{text}");
}
