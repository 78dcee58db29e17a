//! The same events in another JSON layout give the same findings (issue 42): a trace written
//! by a script (`json.dump(d, indent=…)`, or any pretty-printer) holds its shapes as
//! `[\n  256,\n  16\n]`, and nothing printed may depend on that. The pretty layout is written
//! here, into a directory the test created, from a shipped trace.

mod common;

use common::{analyze_json, own, tmpdir};
use serde_json::Value;
use std::io::Read;

fn findings(path: &std::path::Path) -> Value {
    analyze_json(path, &[])["findings"].clone()
}

#[test]
fn a_pretty_printed_trace_gives_the_same_findings() {
    // Its copy findings print operator shapes.
    let original = own("h200_blind_sort_for_topk.pt.trace.json.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&original).expect("trace"))
        .read_to_string(&mut text)
        .expect("gzip");
    let doc: Value = serde_json::from_str(&text).expect("trace JSON");
    let dir = tmpdir("layouts");
    let pretty = dir.path().join("pretty.json");
    std::fs::write(&pretty, serde_json::to_string_pretty(&doc).expect("JSON")).expect("write");
    let (a, b) = (findings(&original), findings(&pretty));
    assert!(
        a.to_string().contains("[64, 128256]"),
        "the copy finding prints a shape"
    );
    assert_eq!(a, b);
}
