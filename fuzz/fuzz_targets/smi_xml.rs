//! The `nvidia-smi -q -x` reader on arbitrary bytes.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = tracehound_parsers::smi_xml::parse(data, "fuzz.xml");
});
