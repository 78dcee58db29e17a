//! The Kineto parser reads events with a hand-written scanner and falls back to serde on
//! anything the scanner does not take. This test reads every Kineto file of the shared sample
//! set and the project's own traces both ways and requires the same model, field for field,
//! and requires that the scanner took every chunk of every well-formed file (so the
//! comparison is not serde against serde). It is one test in its own binary because it flips
//! a process-wide switch (the tests of this binary take a lock). A second test damages a real
//! trace at its structural bytes many times over and requires that whenever serde accepts the
//! damaged text, the scanner builds the same model from it. Skips the shared files with a
//! message when `../shared` is absent.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use tracehound_parsers::kineto::{FAST_SCAN, SCAN_FALLBACKS};
use tracehound_parsers::{LoadError, Trace, load};

/// The switch is process-wide: one test at a time.
static SWITCH: Mutex<()> = Mutex::new(());

/// Loads `f` with the scanner and with serde only; also returns the scanner's fallbacks.
fn both(f: &Path) -> (Result<Trace, LoadError>, Result<Trace, LoadError>, u64) {
    FAST_SCAN.store(true, Ordering::SeqCst);
    let before = SCAN_FALLBACKS.load(Ordering::SeqCst);
    let fast = load(f);
    let fallbacks = SCAN_FALLBACKS.load(Ordering::SeqCst) - before;
    FAST_SCAN.store(false, Ordering::SeqCst);
    let slow = load(f);
    FAST_SCAN.store(true, Ordering::SeqCst);
    (fast, slow, fallbacks)
}

fn assert_same(fast: &Trace, slow: &Trace, name: &str) {
    assert!(fast.gpu_ops == slow.gpu_ops, "{name}: GPU ops differ");
    assert!(
        fast.host_spans == slow.host_spans,
        "{name}: host spans differ"
    );
    assert!(fast.memory == slow.memory, "{name}: memory samples differ");
    assert_eq!(strings(fast), strings(slow), "{name}: strings differ");
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
}

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
    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("..");
    let mut files = kineto_files(&root.join("sample-traces/kineto"));
    let shared = root.join("../shared/sample-traces/kineto");
    if shared.is_dir() {
        files.extend(kineto_files(&shared));
    } else {
        eprintln!("skipping the shared traces: {} is absent", shared.display());
    }
    assert!(!files.is_empty(), "no Kineto traces found");
    let _one = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
    let mut events = 0u64;
    for f in &files {
        let (fast, slow, fallbacks) = both(f);
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
        assert_same(&fast, &slow, &name.to_string());
        events += fast.stats.events_total;
    }
    eprintln!(
        "{} files, {events} events read the same both ways",
        files.len()
    );
}

#[test]
fn damaged_text_that_serde_accepts_reads_the_same() {
    let src = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../sample-traces/kineto/kineto_docs_h100_before_fix.json");
    let data = std::fs::read(&src).expect("the project's own sample trace");
    let dir = tempfile::Builder::new()
        .prefix("tracehound-scan-")
        .tempdir()
        .expect("a temporary directory");
    let path = dir.path().join("damaged.json");
    let _one = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
    // Damage aimed at what the scanner decides on: structure, strings, escapes, numbers.
    let swaps: &[&[u8]] = &[
        b"\"",
        b"\\",
        b"\\u00e9",
        b"\\ud83d\\ude00",
        b"\\x",
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b" ",
        b"-",
        b".",
        b"e",
        b"0",
        b"01",
        b"null",
        b"true",
        b"1e999",
        b"\"ph\": \"X\"",
        b"\"args\": 7",
        b"\"args\": []",
        b"\"ts\": \"12\"",
        b"\"grid\": [1, \"2\", null]",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let (mut accepted, mut rejected) = (0, 0);
    for case in 0..400 {
        let mut d = data.clone();
        for _ in 0..1 + case % 3 {
            let at = next(d.len());
            let len = next(4);
            let end = (at + len).min(d.len());
            d.splice(at..end, swaps[next(swaps.len())].iter().copied());
        }
        std::fs::write(&path, &d).expect("writing the damaged copy");
        let (fast, slow, _) = both(&path);
        match (fast, slow) {
            (Ok(f), Ok(s)) => {
                assert_same(&f, &s, &format!("case {case}"));
                accepted += 1;
            }
            // serde rejects: the scanner must not panic; it may read past damage inside
            // values it skips, or reject as well.
            (_, Err(_)) => rejected += 1,
            (Err(e), Ok(_)) => panic!("case {case}: serde reads it, the scanner path fails: {e}"),
        }
    }
    eprintln!("{accepted} damaged copies read the same both ways, {rejected} rejected by serde");
    assert!(
        accepted > 50 && rejected > 50,
        "{accepted} accepted, {rejected} rejected"
    );
}
