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

/// `text` with every character outside ASCII written as a `\u` escape (surrogate pairs above
/// U+FFFF), as Python's `json.dump` does by default.
fn ascii_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

#[test]
fn every_layout_plain_and_gzip_gives_the_same_findings() {
    // The largest shipped trace, so that every layout is cut into several chunks (the cuts of
    // a layout other than torch's are made speculatively, and must come out the same).
    let original = own("h200_compile_recompile.pt.trace.json.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&original).expect("trace"))
        .read_to_string(&mut text)
        .expect("gzip");
    assert!(
        text.len() > 8 << 20,
        "{} bytes: not several chunks",
        text.len()
    );
    let doc: Value = serde_json::from_str(&text).expect("trace JSON");
    let events = doc["traceEvents"].as_array().expect("events");
    // serde_json's map sorts keys: every event's keys come in another order than torch's.
    let one_line = serde_json::to_string(&doc).expect("JSON");
    let pretty = serde_json::to_string_pretty(&doc).expect("JSON");
    let mut per_line = String::from("{\"traceEvents\": [\n");
    per_line.push_str(
        &events
            .iter()
            .map(|e| serde_json::to_string(e).expect("event"))
            .collect::<Vec<_>>()
            .join(",\n"),
    );
    per_line.push_str("\n]");
    for (k, v) in doc.as_object().expect("object") {
        if k != "traceEvents" {
            per_line.push_str(&format!(", {}: {}", Value::from(k.as_str()), v));
        }
    }
    per_line.push('}');
    let layouts = [
        ("one_line", one_line.clone()),
        ("pretty", pretty.clone()),
        ("crlf", pretty.replace('\n', "\r\n")),
        ("per_line", per_line),
        ("ascii", ascii_escaped(&one_line)),
    ];
    let expected = findings(&original);
    assert!(
        expected.as_array().is_some_and(|f| !f.is_empty()),
        "the trace has findings"
    );
    let dir = tmpdir("layouts");
    for (name, body) in &layouts {
        let plain = dir.path().join(format!("{name}.json"));
        std::fs::write(&plain, body).expect("write");
        assert_eq!(findings(&plain), expected, "{name}");
        let gz = dir.path().join(format!("{name}.json.gz"));
        let mut w = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz).expect("create"),
            flate2::Compression::fast(),
        );
        std::io::Write::write_all(&mut w, body.as_bytes()).expect("write");
        w.finish().expect("gzip");
        assert_eq!(findings(&gz), expected, "{name}.gz");
    }
}
