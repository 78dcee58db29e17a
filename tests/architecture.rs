//! The house's floors, checked from the source: no import circles between the top-level
//! modules of any crate, rules that read the core and never another rule, heuristics that
//! never ask which format a trace came from (what a capture recorded is data on the model,
//! `TraceMeta::capture`, filled by each reader), and a Python package that calls the
//! library's pipeline, not the command line.
//!
//! Module references are read from the code (`crate::x`, `use crate::{x, y}`), with comments
//! and `#[cfg(test)]` code left out: tests may reach across floors, the product may not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR at run time"),
    )
}

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

/// The top-level module a file belongs to (`rules/idle_gaps.rs` -> `rules`; `lib.rs` -> ``).
fn top_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("file under src");
    let first = rel
        .components()
        .next()
        .expect("a path")
        .as_os_str()
        .to_string_lossy();
    let first = first.trim_end_matches(".rs");
    match first {
        "lib" | "main" => String::new(),
        m => m.to_string(),
    }
}

/// Top-level modules named after `crate::` in `code`, including those in `use crate::{a, b}`.
fn referenced(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (k, _) in code.match_indices("crate::") {
        // `tracehound_heuristics::...` ends in "crate::"? No: require a non-identifier before.
        if code[..k]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &code[k + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let m = ident(item.trim());
                if !m.is_empty() {
                    out.insert(m);
                }
            }
        } else {
            let m = ident(rest);
            if !m.is_empty() {
                out.insert(m);
            }
        }
    }
    out
}

/// module -> the other top-level modules of the crate it refers to.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let name = f.file_name().expect("file name").to_string_lossy();
        if name == "tests.rs" || name == "testutil.rs" {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("source file");
        let top = top_module(src, f);
        graph
            .entry(top.clone())
            .or_default()
            .extend(referenced(&product_code(&text)));
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (m, refs) in graph.iter_mut() {
        refs.retain(|r| r != m && modules.contains(r));
    }
    graph
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for next in graph.get(m).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|p| p == next).unwrap_or(0);
                    let mut cycle = path[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(m, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn no_import_circles_in_any_crate() {
    for krate in ["src", "parsers/src", "heuristics/src", "python/src"] {
        let graph = module_graph(&root().join(krate));
        assert!(
            graph.len() > 1 || krate == "python/src",
            "{krate}: no modules read"
        );
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{krate}: import circle {}", cycle.join(" -> "));
        }
    }
}

/// The modules of one folder (`src/tui/`: `app`, `memory` ...) and which siblings each names
/// (`super::app`, `crate::tui::memory`).
fn folder_graph(krate: &Path, folder: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let entries: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    let module = |p: &Path| -> String {
        p.file_stem()
            .expect("a name")
            .to_string_lossy()
            .into_owned()
    };
    let siblings: BTreeSet<String> = entries
        .iter()
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
        .map(|p| module(p))
        .filter(|m| m != "mod" && m != "tests" && m != "testutil")
        .collect();
    let folder_path = folder
        .strip_prefix(krate)
        .expect("folder in the crate")
        .to_string_lossy()
        .replace('/', "::");
    for p in &entries {
        let m = module(p);
        if !siblings.contains(&m) {
            continue;
        }
        let mut files = Vec::new();
        if p.is_dir() {
            rust_files(p, &mut files);
        } else {
            files.push(p.clone());
        }
        let refs = graph.entry(m.clone()).or_default();
        for f in files {
            let code = product_code(&std::fs::read_to_string(&f).expect("source"));
            for other in siblings.iter().filter(|o| **o != m) {
                let direct = format!("super::{other}");
                let full = format!("crate::{folder_path}::{other}");
                let named = |pat: &str| {
                    code.match_indices(pat).any(|(k, _)| {
                        !code[k + pat.len()..]
                            .chars()
                            .next()
                            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    })
                };
                if (!p.is_dir() && named(&direct)) || named(&full) {
                    refs.insert(other.clone());
                }
            }
        }
    }
    graph
}

#[test]
fn no_import_circles_inside_any_folder_module() {
    // The top-level check sees `tui` as one module; its screens and its state must not
    // import each other in a circle either (the memory screen and the app state did).
    let mut folders = 0;
    for krate in ["src", "parsers/src", "heuristics/src"] {
        let root_dir = root().join(krate);
        let mut dirs = vec![root_dir.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("dir") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    dirs.push(p.clone());
                    folders += 1;
                    if let Some(cycle) = find_cycle(&folder_graph(&root_dir, &p)) {
                        panic!("{}: import circle {}", p.display(), cycle.join(" -> "));
                    }
                }
            }
        }
    }
    assert!(folders >= 6, "folders read: {folders}");
}

#[test]
fn the_circle_check_sees_a_circle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        g.entry(a.into()).or_default().insert(b.into());
        g.entry(b.into()).or_default();
    }
    assert_eq!(find_cycle(&g).map(|c| c.len()), Some(4));
    g.get_mut("c").expect("c").remove("a");
    assert_eq!(find_cycle(&g), None);
    assert_eq!(
        referenced(
            "use crate::{idle, window::Window};\nlet x = crate::names::short(y); my_crate::z"
        ),
        ["idle", "names", "window"].map(String::from).into()
    );
}

#[test]
fn rules_read_the_core_never_another_rule() {
    let dir = root().join("heuristics/src/rules");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let rules: Vec<String> = files
        .iter()
        .filter(|f| f.parent() == Some(dir.as_path()))
        .filter_map(|f| f.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .filter(|s| s != "mod")
        .collect();
    assert!(rules.len() >= 19, "rules read: {rules:?}");
    for f in files.iter().filter(|f| !f.ends_with("mod.rs")) {
        let name = f.file_name().expect("name").to_string_lossy();
        if name == "tests.rs" {
            continue;
        }
        let code = product_code(&std::fs::read_to_string(f).expect("source"));
        for other in &rules {
            if f.file_stem().is_some_and(|s| s.to_string_lossy() == *other) {
                continue;
            }
            for pattern in [format!("rules::{other}"), format!("super::{other}")] {
                assert!(
                    !code.contains(&pattern),
                    "{} reads another rule: {pattern}",
                    f.display()
                );
            }
        }
    }
}

/// The readers registered in `parsers/src/formats/mod.rs`'s `READERS` (`&nsys::READER` ...).
fn registered_readers() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("parsers/src/formats/mod.rs"))
        .expect("parsers/src/formats/mod.rs");
    let code = product_code(&text);
    let list = code
        .split_once("READERS")
        .and_then(|(_, rest)| rest.split_once("= &["))
        .and_then(|(_, rest)| rest.split_once("];"))
        .map(|(list, _)| list)
        .expect("a READERS list in formats/mod.rs");
    list.split(',')
        .filter_map(|item| item.trim().strip_prefix('&'))
        .filter_map(|item| item.strip_suffix("::READER"))
        .map(str::to_string)
        .collect()
}

/// The source files of reader `name`: `formats/NAME.rs`, or every file of `formats/NAME/`.
fn reader_files(name: &str) -> Vec<PathBuf> {
    let formats = root().join("parsers/src/formats");
    let dir = formats.join(name);
    let mut files = Vec::new();
    if dir.is_dir() {
        rust_files(&dir, &mut files);
    } else {
        files.push(formats.join(format!("{name}.rs")));
    }
    files
}

#[test]
fn the_model_imports_no_format_and_no_reader_imports_another() {
    let readers = registered_readers();
    assert!(
        readers.len() >= 5 && readers.iter().any(|r| r == "kineto"),
        "readers read from READERS: {readers:?}"
    );
    // The model is the floor every reader stands on: it names no format.
    let mut model = Vec::new();
    rust_files(&root().join("parsers/src/model"), &mut model);
    assert!(model.len() >= 4, "model files read: {model:?}");
    for f in &model {
        let code = product_code(&std::fs::read_to_string(f).expect("source"));
        assert!(
            !code.contains("formats::")
                && readers
                    .iter()
                    .all(|r| !code.contains(&format!("crate::{r}"))),
            "{} (the model) imports a format",
            f.display()
        );
    }
    for reader in &readers {
        let files = reader_files(reader);
        for f in &files {
            let code = product_code(
                &std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())),
            );
            for other in readers.iter().filter(|o| *o != reader) {
                for pattern in [
                    format!("super::{other}::"),
                    format!("formats::{other}"),
                    format!("crate::{other}::"),
                ] {
                    assert!(
                        !code.contains(&pattern),
                        "{} (the {reader} reader) imports another reader: {pattern}",
                        f.display()
                    );
                }
            }
        }
        // Its descriptor and reader sit beside its code.
        let all: String = files
            .iter()
            .map(|f| std::fs::read_to_string(f).expect("source"))
            .collect();
        for item in [
            "pub static FORMAT: SourceFormat",
            "pub static READER: super::Reader",
        ] {
            assert!(
                all.contains(item),
                "the {reader} reader declares no `{item}`"
            );
        }
    }
}

#[test]
fn a_read_trace_is_finished_in_one_place() {
    // Every reader hands over a `Parsed` trace; `Parsed::finish` in the model is the one
    // place a trace is finished and its capture described, so no reader can forget either.
    let mut files = Vec::new();
    rust_files(&root().join("parsers/src"), &mut files);
    let mut callers = Vec::new();
    for f in &files {
        let code = product_code(&std::fs::read_to_string(f).expect("source"));
        if code.contains("Capture::from_events(") || code.contains("trace.finish()") {
            callers.push(
                f.strip_prefix(root())
                    .expect("under the root")
                    .display()
                    .to_string(),
            );
        }
    }
    assert_eq!(callers, ["parsers/src/model/mod.rs"]);
}

#[test]
fn every_source_file_the_architecture_doc_names_exists() {
    // docs/architecture.md names files as `NAME.rs`, `dir/NAME.rs` or a full path: each must
    // be a file of the project, so a moved or renamed module cannot leave the doc behind.
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("the doc");
    let mut files = Vec::new();
    for dir in [
        "src",
        "parsers/src",
        "heuristics/src",
        "python/src",
        "xtask/src",
        "tests",
    ] {
        let d = root().join(dir);
        if d.is_dir() {
            rust_files(&d, &mut files);
        }
    }
    let known: Vec<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(root())
                .expect("under the root")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let named: BTreeSet<&str> = doc
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            t.ends_with(".rs") && !t.contains(' ') && !t.contains('*') && !t.contains("NAME")
        })
        .collect();
    assert!(named.len() >= 30, "file names read from the doc: {named:?}");
    let missing: Vec<&&str> = named
        .iter()
        .filter(|n| {
            !known
                .iter()
                .any(|k| k == **n || k.ends_with(&format!("/{n}")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names files that do not exist: {missing:?}"
    );
}

#[test]
fn the_python_package_calls_the_pipeline_not_the_command_line() {
    let mut files = Vec::new();
    rust_files(&root().join("python/src"), &mut files);
    assert!(!files.is_empty(), "python/src read");
    for f in files {
        let code = product_code(&std::fs::read_to_string(&f).expect("source"));
        assert!(
            !code.contains("tracehound::cli"),
            "{} calls the command line's module",
            f.display()
        );
        assert!(
            code.contains("tracehound::pipeline") || !f.ends_with("lib.rs"),
            "{} does not use the pipeline",
            f.display()
        );
    }
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
    let src = root().join("heuristics/src");
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
