//! `--rules` and `--skip-rules`: the rules left out do not run, the rest report what they
//! report without them, an unknown id is a usage error naming the ids, and a report that
//! lists rules (JUnit) shows the ones that did not run as skipped, not passed.

mod common;

use common::{own, run, success, tmpdir};
use serde_json::Value;

const TRACE: &str = "h200_resnet_unpinned_sync.pt.trace.json.gz";

fn rules_found(args: &[&str]) -> Vec<(String, String)> {
    let p = own(TRACE);
    let mut all = vec!["analyze", "--format", "json"];
    all.extend_from_slice(args);
    all.push(p.to_str().expect("UTF-8 path"));
    let doc: Value = serde_json::from_str(&success(&run(&all))).expect("JSON");
    doc["traces"][0]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().expect("rule").to_string(),
                f["id"].as_str().expect("id").to_string(),
            )
        })
        .collect()
}

#[test]
fn selected_rules_run_alone_and_skipped_ones_not_at_all() {
    let every = rules_found(&[]);
    let rules: std::collections::BTreeSet<&str> = every.iter().map(|(r, _)| r.as_str()).collect();
    // The trace has findings of several rules, idle_gaps and pageable_memcpy among them.
    assert!(rules.len() >= 3 && rules.contains("idle_gaps") && rules.contains("pageable_memcpy"));

    let two = rules_found(&["--rules", "idle_gaps,pageable_memcpy"]);
    let expected: Vec<(String, String)> = every
        .iter()
        .filter(|(r, _)| r == "idle_gaps" || r == "pageable_memcpy")
        .cloned()
        .collect();
    assert_eq!(two, expected);

    let without = rules_found(&["--skip-rules", "idle_gaps"]);
    let expected: Vec<(String, String)> = every
        .iter()
        .filter(|(r, _)| r != "idle_gaps")
        .cloned()
        .collect();
    assert_eq!(without, expected);
}

#[test]
fn an_unknown_rule_id_is_a_usage_error_naming_the_ids() {
    let p = own(TRACE);
    for flag in ["--rules", "--skip-rules"] {
        let out = run(&["analyze", flag, "idle_gap", p.to_str().expect("UTF-8 path")]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{flag}: there is no rule `idle_gap`")),
            "{err}"
        );
        assert!(err.contains("idle_gaps, pageable_memcpy"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn junit_shows_rules_that_did_not_run_as_skipped() {
    let dir = tmpdir("rules");
    let xml = dir.path().join("r.xml");
    let p = own(TRACE);
    let out = run(&[
        "report",
        "-o",
        xml.to_str().expect("UTF-8 path"),
        "--skip-rules",
        "idle_gaps,roofline",
        p.to_str().expect("UTF-8 path"),
    ]);
    success(&out);
    let text = std::fs::read_to_string(&xml).expect("report written");
    assert!(text.contains(r#"skipped="2""#), "{text}");
    for rule in ["idle_gaps", "roofline"] {
        let at = text
            .find(&format!(r#"name="{rule}">"#))
            .unwrap_or_else(|| panic!("{rule} has a test case with a body: {text}"));
        let case = &text[at..at + text[at..].find("</testcase>").expect("case ends")];
        assert!(
            case.contains("<skipped message=\"not run: left out by --rules / --skip-rules\""),
            "{case}"
        );
        assert!(!case.contains("<failure"), "{case}");
    }
}
