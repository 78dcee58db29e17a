//! The nvidia-smi counter readers: `dmon` logs and `--query-gpu` CSV, both clock modes.
#![no_main]
use tracehound_parsers::formats::counter_log::ClockOptions;
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = tracehound_parsers::dmon::parse(data, "fuzz.log", ClockOptions::default());
    let utc = ClockOptions {
        utc_offset_s: Some(-5 * 3600),
    };
    let _ = tracehound_parsers::dmon::parse(data, "fuzz.log", utc);
    let _ = tracehound_parsers::smi_query::parse(data, "fuzz.csv", ClockOptions::default());
});
