//! A trace read in place (the mapped-file path: chunks of more than 4 MiB scanned without a
//! UTF-8 pass over them first) checks the text it keeps: bytes that are not UTF-8 in a name
//! fail the load with the line and column serde gives, as when each chunk was validated
//! first; the same bytes in a value nobody reads load as serde reads them, with the same
//! model as the intact trace.

use std::io::Read;
use tracehound_parsers::LoadError;

fn own_trace() -> Vec<u8> {
    let path = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../sample-traces/kineto/h200_autograd_backward_heavy.pt.trace.json.gz");
    let gz = std::fs::read(&path).expect("the project's own sample trace");
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut out)
        .expect("a whole gzip file");
    out
}

/// The position just after the first occurrence of `what` at or after `from`.
fn after(data: &[u8], what: &[u8], from: usize) -> usize {
    from + data[from..]
        .windows(what.len())
        .position(|w| w == what)
        .expect("the pattern is in the trace")
        + what.len()
}

#[test]
fn text_that_is_not_utf8_fails_where_kept_and_loads_where_only_passed_over() {
    let data = own_trace();
    // Past the first chunks, so that the byte lies in a chunk scanned in place.
    assert!(data.len() > 3 * (4 << 20), "the trace spans several chunks");
    let intact = tracehound_parsers::kineto::parse(&data, "t.json").expect("the intact trace");

    // In a name (past the operators, a Python frame's): the line is the one holding the
    // byte, counted independently.
    let mut bad = data.clone();
    let at = after(&data, b"\"name\": \"", 2 * (4 << 20)) + 1;
    assert!(data[at].is_ascii_graphic() && data[at] != b'"');
    bad[at] = 0xff;
    let line = 1 + data[..at].iter().filter(|&&c| c == b'\n').count();
    match tracehound_parsers::kineto::parse(&bad, "t.json") {
        Err(LoadError::Json { line: l, msg, .. }) => {
            assert_eq!(l, line, "{msg}");
            assert!(msg.contains("unicode"), "{msg}");
        }
        other => panic!("a name that is not UTF-8 must fail the load: {other:?}"),
    }

    // In a flow event's binding point (`"bp": "e"`), which no reader keeps.
    let mut passed_over = data.clone();
    let at = after(&data, b"\"bp\": \"", 2 * (4 << 20));
    assert_eq!(data[at], b'e');
    passed_over[at] = 0xff;
    let t = tracehound_parsers::kineto::parse(&passed_over, "t.json").expect("loads");
    assert_eq!(t.host_spans, intact.host_spans);
    assert_eq!(t.gpu_ops.len(), intact.gpu_ops.len());
    assert_eq!(t.strings.len(), intact.strings.len());
}
