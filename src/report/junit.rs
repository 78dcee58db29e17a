//! JUnit XML, for CI test reporters (GitLab, Jenkins, GitHub): one test suite per trace, one
//! test case per rule, and a failure per finding at or above `--fail-on` (all findings with
//! severity low or higher when it is not given), so findings show up as failed checks. Each
//! suite opens with the test case `capture_complete`, which fails for a file cut short: its
//! findings cover only what the file kept, so a CI gate must not pass on it.

use super::TraceReport;
use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use tracehound_heuristics::{Severity, rules};

pub fn render(reports: &[TraceReport], fail_at: Severity) -> String {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    let all_rules: Vec<&'static str> = rules::all().iter().map(|r| r.id()).collect();
    let failing = |r: &TraceReport, rule: &str| {
        r.analysis
            .findings
            .iter()
            .filter(|f| f.rule == rule && f.severity >= fail_at)
            .count()
    };
    let cut = |r: &TraceReport| usize::from(r.trace.stats.truncated);
    let total_failures: usize = reports
        .iter()
        .map(|r| cut(r) + all_rules.iter().map(|rule| failing(r, rule)).sum::<usize>())
        .sum();
    let mut suites = BytesStart::new("testsuites");
    suites.push_attribute(("name", "tracehound"));
    suites.push_attribute((
        "tests",
        (reports.len() * (1 + all_rules.len())).to_string().as_str(),
    ));
    suites.push_attribute(("failures", total_failures.to_string().as_str()));
    let _ = w.write_event(Event::Start(suites));
    for r in reports {
        let mut suite = BytesStart::new("testsuite");
        suite.push_attribute(("name", r.trace.source.as_str()));
        suite.push_attribute(("tests", (1 + all_rules.len()).to_string().as_str()));
        let failures: usize = cut(r) + all_rules.iter().map(|rule| failing(r, rule)).sum::<usize>();
        suite.push_attribute(("failures", failures.to_string().as_str()));
        suite.push_attribute(("skipped", r.analysis.not_run.len().to_string().as_str()));
        let _ = w.write_event(Event::Start(suite));
        let mut case = BytesStart::new("testcase");
        case.push_attribute(("classname", "tracehound"));
        case.push_attribute(("name", "capture_complete"));
        if r.trace.stats.truncated {
            let _ = w.write_event(Event::Start(case));
            let mut fail = BytesStart::new("failure");
            fail.push_attribute(("type", "incomplete capture"));
            fail.push_attribute(("message", r.analysis.summary.verdict.as_str()));
            let _ = w.write_event(Event::Start(fail));
            let why = r
                .trace
                .stats
                .incomplete
                .as_ref()
                .map_or_else(|| "the file is cut short".to_string(), |i| i.describe());
            let _ = w.write_event(Event::Text(BytesText::new(&why)));
            let _ = w.write_event(Event::End(BytesEnd::new("failure")));
            let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
        } else {
            let _ = w.write_event(Event::Empty(case));
        }
        for rule in &all_rules {
            let mut case = BytesStart::new("testcase");
            case.push_attribute(("classname", "tracehound"));
            case.push_attribute(("name", *rule));
            let found: Vec<_> = r
                .analysis
                .findings
                .iter()
                .filter(|f| f.rule == *rule && f.severity >= fail_at)
                .collect();
            if let Some((_, why)) = r.analysis.not_run.iter().find(|(id, _)| id == rule) {
                // A rule that did not run has not passed.
                let _ = w.write_event(Event::Start(case));
                let mut skipped = BytesStart::new("skipped");
                skipped.push_attribute(("message", *why));
                let _ = w.write_event(Event::Empty(skipped));
                let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
                continue;
            }
            if found.is_empty() {
                let _ = w.write_event(Event::Empty(case));
                continue;
            }
            let _ = w.write_event(Event::Start(case));
            for f in found {
                let mut fail = BytesStart::new("failure");
                fail.push_attribute(("type", f.severity.label()));
                fail.push_attribute((
                    "message",
                    if f.unpriced() {
                        format!("{} [{}; not priced: no saving measured]", f.title, f.id)
                    } else {
                        format!(
                            "{} [{}; {} = {} of the window]",
                            f.title,
                            f.id,
                            f.impact_text(),
                            f.share_text()
                        )
                    }
                    .as_str(),
                ));
                let _ = w.write_event(Event::Start(fail));
                let mut body = format!("{}\n", f.evidence);
                for row in &f.breakdown {
                    body.push_str(&format!("  - {}\n", super::words::row_brief(row)));
                }
                for a in &f.advice {
                    body.push_str(&format!("fix: {a}\n"));
                }
                let _ = w.write_event(Event::Text(BytesText::new(&body)));
                let _ = w.write_event(Event::End(BytesEnd::new("failure")));
            }
            let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
        }
        let _ = w.write_event(Event::End(BytesEnd::new("testsuite")));
    }
    let _ = w.write_event(Event::End(BytesEnd::new("testsuites")));
    let mut s = String::from_utf8_lossy(&w.into_inner()).into_owned();
    s.push('\n');
    s
}
