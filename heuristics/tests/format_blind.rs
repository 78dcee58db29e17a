//! The analysis never asks which format a trace came from: what a capture recorded is data
//! on the model (`TraceMeta::capture`, filled by each reader), and the readers keep their
//! format's knowledge (names, text they write, what a capture lacks). Checked from the
//! source: no product code of the heuristics crate names `SourceFormat` or reads
//! `meta.format` (the format or its version text). Comments and `#[cfg(test)]` code are left
//! out: tests may build traces of any format.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The product code of a file: comments removed, cut at the first `#[cfg(test)]`.
fn product_code(text: &str) -> String {
    let cut = text.find("#[cfg(test)]").unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|l| match l.find("//") {
            Some(k) => &l[..k],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What product code must not name, in `code` (read without whitespace: a chain of calls
/// may break `meta` and `.format` over lines).
fn format_branches(code: &str) -> Vec<&'static str> {
    let squeezed: String = code.split_whitespace().collect();
    ["SourceFormat", "meta.format"]
        .into_iter()
        .filter(|p| squeezed.contains(p))
        .collect()
}

#[test]
fn heuristics_never_ask_the_format() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 30, "files read: {}", files.len());
    let mut found = Vec::new();
    for f in &files {
        let name = f.file_name().expect("file name").to_string_lossy();
        // Test-only files (declared under #[cfg(test)]).
        if name == "tests.rs" || name == "testutil.rs" {
            continue;
        }
        let code = product_code(&std::fs::read_to_string(f).expect("source file"));
        for p in format_branches(&code) {
            found.push(format!("{}: {p}", f.display()));
        }
    }
    assert!(
        found.is_empty(),
        "the heuristics ask the format; ask trace.meta.capture instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_a_format_branch() {
    let code = product_code(
        "let k = trace.meta.format == Some(tracehound_parsers::SourceFormat::Kineto);\n\
         // trace.meta.format in a comment\n\
         #[cfg(test)]\nmod tests { SourceFormat }",
    );
    assert_eq!(format_branches(&code), vec!["SourceFormat", "meta.format"]);
    let split = "let v = t\n    .meta\n    .format_version;";
    assert_eq!(format_branches(split), vec!["meta.format"]);
    assert!(format_branches("t.meta.capture.startup_hole").is_empty());
}
