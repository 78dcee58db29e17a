//! The Kineto reader on arbitrary bytes: the chunked scanner, its serde fallback and the
//! model's finishing pass (sorting, steps, indexes).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = tracehound_parsers::kineto::parse(data, "fuzz.json");
});
