//! The Nsight Systems reader on mutated SQLite files, opened through the real reader
//! (read-only, immutable) from a file in memory-backed storage.
#![no_main]
use std::io::Write;
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir();
    let path = dir.join(format!(
        "tracehound-fuzz-nsys-{}.sqlite",
        std::process::id()
    ));
    if let Ok(mut f) = std::fs::File::create(&path) {
        if f.write_all(data).is_ok() {
            drop(f);
            let _ = tracehound_parsers::nsys::parse(&path);
        }
    }
});
