//! The Kineto parser reads events with a hand-written scanner and falls back to serde on
//! anything the scanner does not take. This test reads every Kineto file of the shared sample
//! set and the project's own traces both ways and requires the same model, field for field,
//! and requires that the scanner took every chunk of every well-formed file (so the
//! comparison is not serde against serde). It is one test in its own binary because it flips
//! a process-wide switch. Skips the shared files with a message when `../shared` is absent.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use tracehound_parsers::kineto::{FAST_SCAN, SCAN_FALLBACKS};
use tracehound_parsers::{Trace, load};

fn kineto_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let n = p
                        .file_name()
                        .map_or(String::new(), |n| n.to_string_lossy().into());
                    n.ends_with(".json") || n.ends_with(".json.gz")
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn strings(t: &Trace) -> Vec<&str> {
    (0..t.strings.len() as u32).map(|i| t.str(i)).collect()
}

#[test]
fn scanner_and_serde_build_the_same_model() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = kineto_files(&root.join("sample-traces/kineto"));
    let shared = root.join("../shared/sample-traces/kineto");
    if shared.is_dir() {
        files.extend(kineto_files(&shared));
    } else {
        eprintln!("skipping the shared traces: {} is absent", shared.display());
    }
    assert!(!files.is_empty(), "no Kineto traces found");
    let mut events = 0u64;
    for f in &files {
        FAST_SCAN.store(true, Ordering::SeqCst);
        let before = SCAN_FALLBACKS.load(Ordering::SeqCst);
        let fast = load(f);
        let fallbacks = SCAN_FALLBACKS.load(Ordering::SeqCst) - before;
        FAST_SCAN.store(false, Ordering::SeqCst);
        let slow = load(f);
        FAST_SCAN.store(true, Ordering::SeqCst);
        let name = f.display();
        let (fast, slow) = match (fast, slow) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "{name}: different errors");
                continue;
            }
            (a, b) => panic!("{name}: fast {:?} vs serde {:?}", a.err(), b.err()),
        };
        if !fast.stats.truncated {
            assert_eq!(
                fallbacks, 0,
                "{name}: the scanner gave up on a well-formed file"
            );
        }
        assert!(fast.gpu_ops == slow.gpu_ops, "{name}: GPU ops differ");
        assert!(
            fast.host_spans == slow.host_spans,
            "{name}: host spans differ"
        );
        assert!(fast.memory == slow.memory, "{name}: memory samples differ");
        assert_eq!(strings(&fast), strings(&slow), "{name}: strings differ");
        assert_eq!(
            format!("{:?}", fast.meta),
            format!("{:?}", slow.meta),
            "{name}"
        );
        assert_eq!(
            format!("{:?}", fast.stats),
            format!("{:?}", slow.stats),
            "{name}"
        );
        assert_eq!(fast.warnings, slow.warnings, "{name}");
        events += fast.stats.events_total;
    }
    eprintln!(
        "{} files, {events} events read the same both ways",
        files.len()
    );
}
