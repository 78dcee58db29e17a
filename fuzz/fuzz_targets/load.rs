//! The whole loading path from a file: format sniffing, gzip, every reader.
#![no_main]
use std::io::Write;
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("tracehound-fuzz-load-{}", std::process::id()));
    if let Ok(mut f) = std::fs::File::create(&path) {
        if f.write_all(data).is_ok() {
            drop(f);
            let _ = tracehound_parsers::load(&path);
        }
    }
});
