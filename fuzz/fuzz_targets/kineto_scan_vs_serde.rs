//! The Kineto reader's scanner against its serde fallback on arbitrary bytes: whenever both
//! readings succeed, they must build the same model (the scanner remembers the separators and
//! key order of the events it has read, so a shape that changes from one event to the next
//! must still read as serde reads it). The scan-equivalence test does the same on real
//! traces and damaged copies; this lets libFuzzer find the inputs.
#![no_main]
use std::sync::atomic::Ordering;
use tracehound_parsers::kineto::{FAST_SCAN, parse};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    FAST_SCAN.store(true, Ordering::SeqCst);
    let fast = parse(data, "fuzz.json");
    FAST_SCAN.store(false, Ordering::SeqCst);
    let slow = parse(data, "fuzz.json");
    FAST_SCAN.store(true, Ordering::SeqCst);
    if let (Ok(f), Ok(s)) = (&fast, &slow) {
        assert!(f.gpu_ops == s.gpu_ops, "GPU ops differ");
        assert!(f.host_spans == s.host_spans, "host spans differ");
        assert!(f.memory == s.memory, "memory samples differ");
        let strings = |t: &tracehound_parsers::Trace| -> Vec<String> {
            (0..t.strings.len() as u32).map(|i| t.str(i).to_string()).collect()
        };
        assert_eq!(strings(f), strings(s), "strings differ");
        assert_eq!(format!("{:?}", f.stats), format!("{:?}", s.stats));
    }
});
