//! Inputs are never modified: every sample file has the same bytes and modification time
//! after tracehound ran every command over it, and no SQLite side file (`-wal`, `-shm`,
//! `-journal`) appears beside an export.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// (length, modification time, content hash) of every file under `dir`.
fn fingerprint(dir: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime, u64)> {
    let mut all = Vec::new();
    files(dir, &mut all);
    all.into_iter()
        .map(|p| {
            let m = std::fs::metadata(&p).unwrap();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::fs::read(&p).unwrap().hash(&mut h);
            (p, (m.len(), m.modified().unwrap(), h.finish()))
        })
        .collect()
}

#[test]
fn no_command_changes_or_adds_a_file_beside_its_inputs() {
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("sample-traces");
    let before = fingerprint(&root);
    let tmp = tmpdir("untouched");
    let out = tmp.path();
    let traces: Vec<&PathBuf> = before
        .keys()
        .filter(|p| {
            let n = p.to_string_lossy();
            (n.contains("/kineto/") || n.contains("/nsys/") || n.contains("/smi-xml/"))
                && !n.ends_with(".sqlite.gz")
        })
        .collect();
    assert!(traces.len() >= 30, "{} traces", traces.len());
    for t in &traces {
        let t = t.to_str().unwrap();
        let r = run(&["analyze", "--format", "json", t]);
        assert!(r.status.code().is_some_and(|c| c <= 1), "{t}");
        run(&["info", t]);
    }
    let some: Vec<&str> = traces.iter().take(6).map(|p| p.to_str().unwrap()).collect();
    for (k, t) in some.iter().enumerate() {
        let html = out.join(format!("r{k}.html"));
        run(&["report", t, "-o", html.to_str().unwrap()]);
        run(&["summary", t]);
    }
    run(&["diff", some[0], some[1]]);
    for job in ["h200_ddp_straggler", "h200_ddp_straggler_nsys"] {
        run(&[
            "analyze",
            root.join("kineto-jobs").join(job).to_str().unwrap(),
        ]);
    }
    let after = fingerprint(&root);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "no file added or removed beside the inputs (no SQLite -wal/-shm/-journal)"
    );
    for (p, f) in &before {
        assert_eq!(Some(f), after.get(p), "{} changed", p.display());
    }
}
