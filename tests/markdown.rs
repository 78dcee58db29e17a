//! The Markdown report through a CommonMark renderer (pulldown-cmark, as GitHub's and
//! GitLab's renderers read CommonMark): every finding's heading, and every line of its
//! advice, renders to exactly the text the JSON report holds, so no name is lost to emphasis
//! (`__next__` read as bold), HTML (`<…>`) or escapes; and the report has no inline HTML.

mod common;

use common::{analyze_json, own, run, success};
use pulldown_cmark::{Event, Parser, Tag, TagEnd};

/// The plain text of each heading and each list item of `md`, in order, and whether any
/// HTML was read.
fn rendered(md: &str) -> (Vec<String>, Vec<String>, bool) {
    let (mut headings, mut items) = (Vec::new(), Vec::new());
    let mut current: Option<(bool, String)> = None;
    let mut html = false;
    for ev in Parser::new_ext(md, pulldown_cmark::Options::ENABLE_TABLES) {
        match ev {
            Event::Start(Tag::Heading { .. }) => current = Some((true, String::new())),
            Event::Start(Tag::Item) => current = Some((false, String::new())),
            Event::End(TagEnd::Heading(_)) | Event::End(TagEnd::Item) => {
                if let Some((h, text)) = current.take() {
                    if h {
                        headings.push(text)
                    } else {
                        items.push(text)
                    }
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, text)) = &mut current {
                    text.push_str(&t);
                }
            }
            Event::SoftBreak => {
                if let Some((_, text)) = &mut current {
                    text.push(' ');
                }
            }
            Event::Html(_) | Event::InlineHtml(_) => html = true,
            _ => {}
        }
    }
    (headings, items, html)
}

#[test]
fn headings_and_advice_render_as_the_json_says() {
    for name in [
        "h200_resnet_unpinned_sync.pt.trace.json.gz",
        "h200_compile_recompile.pt.trace.json.gz",
        "h200_blind_sort_for_topk.pt.trace.json.gz",
    ] {
        let p = own(name);
        let path = p.to_str().expect("UTF-8 path");
        let md = success(&run(&["analyze", "--format", "md", path]));
        let json = analyze_json(&p, &[]);
        let findings = json["findings"].as_array().expect("findings");
        assert!(!findings.is_empty(), "{name}");
        let (headings, items, html) = rendered(&md);
        assert!(!html, "{name}: the report has HTML in it:\n{md}");
        for (i, f) in findings.iter().enumerate() {
            let title = f["title"].as_str().expect("title");
            let want = format!("{}. {title}", i + 1);
            assert!(
                headings.contains(&want),
                "{name}: no heading renders as {want:?}; headings: {headings:#?}"
            );
            for advice in f["advice"].as_array().expect("advice") {
                let advice = advice.as_str().expect("text");
                // The advice's own code spans render as their text.
                let want = advice.replace('`', "");
                assert!(
                    items.contains(&want),
                    "{name}: no list item renders as {want:?}"
                );
            }
        }
    }
    // The quick start's trace names dunder methods; they render as written.
    let md = success(&run(&[
        "analyze",
        "--format",
        "md",
        own("h200_resnet_unpinned_sync.pt.trace.json.gz")
            .to_str()
            .expect("UTF-8"),
    ]));
    assert!(md.contains("__next__"));
    let (_, items, _) = rendered(&md);
    assert!(
        items
            .iter()
            .any(|it| it.contains("dataloader.py(736): __next__")),
        "{items:#?}"
    );
}
