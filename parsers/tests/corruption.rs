//! The truncation and corruption corpus: every sample trace (the project's own, and the shared
//! developer set's when it is next to the clone) cut inside a string, inside a number, between
//! events, inside the gzip stream and inside an SQLite page, and with bytes flipped. Each case
//! must load what is complete with a warning saying so, or fail with an error naming the file;
//! none may panic or take more than a few seconds.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;
use common::Lcg;

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

/// Sample files under `dir`, recursively, up to `max` bytes each (larger ones only cost
/// time: the code paths are the same).
fn samples(dir: &Path, max: u64, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if !p.ends_with("generators") && !p.ends_with("reference") {
                samples(&p, max, out);
            }
        } else if p.metadata().is_ok_and(|m| m.len() <= max && m.len() > 0)
            && !p
                .extension()
                .is_some_and(|e| e == "md" || e == "py" || e == "sh")
        {
            out.push(p);
        }
    }
}

/// A byte position after `from` where `pred` holds, else `from`.
fn find(data: &[u8], from: usize, pred: impl Fn(&[u8], usize) -> bool) -> usize {
    (from..data.len().saturating_sub(2))
        .find(|&i| pred(data, i))
        .unwrap_or(from)
}

/// The damaged variants of one file: (what was done, bytes, cut short).
fn cases(data: &[u8], rng: &mut Lcg) -> Vec<(String, Vec<u8>, bool)> {
    let mut out = Vec::new();
    let n = data.len();
    let mid = n / 2;
    let gz = data.starts_with(&[0x1f, 0x8b]);
    let sqlite = data.starts_with(b"SQLite format 3\0");
    if sqlite {
        let page = u16::from_be_bytes([data[16], data[17]]) as usize;
        let page = if page == 1 { 65536 } else { page.max(512) };
        let boundary = (mid / page) * page;
        out.push((
            "cut at a page boundary".into(),
            data[..boundary.max(page)].to_vec(),
            true,
        ));
        out.push(("cut inside a page".into(), data[..mid + 100].to_vec(), true));
    } else if gz {
        out.push((
            "cut inside the gzip stream".into(),
            data[..mid].to_vec(),
            true,
        ));
        out.push(("gzip trailer cut off".into(), data[..n - 5].to_vec(), true));
    } else {
        let in_string = find(data, mid, |d, i| {
            d[i] == b'"' && d[i + 1].is_ascii_alphabetic()
        }) + 3;
        let in_number = find(data, mid, |d, i| {
            d[i].is_ascii_digit() && d[i + 1].is_ascii_digit()
        }) + 1;
        let between = find(data, mid, |d, i| d[i] == b'}' && d[i + 1] == b',') + 1;
        for (what, at) in [
            ("cut inside a string", in_string),
            ("cut inside a number", in_number),
            ("cut between events", between),
            ("cut at a quarter", n / 4),
        ] {
            out.push((what.into(), data[..at.min(n)].to_vec(), at < n));
        }
    }
    for k in 0..3 {
        let mut d = data.to_vec();
        for _ in 0..8 {
            let i = (rng.next() as usize) % n;
            d[i] ^= 1 << (rng.next() % 8);
        }
        out.push((format!("8 bits flipped ({k})"), d, false));
    }
    out
}

#[test]
fn every_sample_cut_short_or_damaged_loads_what_is_complete_or_fails_clearly() {
    let mut files = Vec::new();
    samples(&root().join("../sample-traces"), 3 << 20, &mut files);
    let shared = root().join("../../shared/sample-traces");
    if shared.exists() {
        samples(&shared, 3 << 20, &mut files);
    } else {
        eprintln!(
            "skipping the shared samples: {} is absent",
            shared.display()
        );
    }
    assert!(files.len() >= 20, "{} samples", files.len());
    let tmp = tempfile::Builder::new()
        .prefix("tracehound-corrupt-")
        .tempdir()
        .expect("a temporary directory");
    let dir = tmp.path().to_path_buf();
    let mut rng = Lcg(11);
    let (mut loaded, mut refused, mut total) = (0, 0, 0);
    let mut slowest = (Duration::ZERO, String::new());
    for f in &files {
        let data = std::fs::read(f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        for (what, bytes, cut) in cases(&data, &mut rng) {
            let path = dir.join(&name);
            std::fs::write(&path, &bytes).unwrap();
            let start = Instant::now();
            let result = std::panic::catch_unwind(|| tracehound_parsers::load(&path));
            let took = start.elapsed();
            total += 1;
            let case = format!("{} ({what})", f.display());
            if took > slowest.0 {
                slowest = (took, case.clone());
            }
            assert!(took < Duration::from_secs(20), "{case} took {took:?}");
            match result {
                Err(_) => panic!("{case}: the reader panicked"),
                Ok(Err(e)) => {
                    refused += 1;
                    let msg = e.to_string();
                    assert!(
                        msg.contains(&name),
                        "{case}: the error names the file: {msg}"
                    );
                }
                Ok(Ok(t)) => {
                    loaded += 1;
                    // A file cut short never passes for a complete one.
                    if cut {
                        assert!(
                            t.stats.truncated
                                || !t.warnings.is_empty()
                                || !t.stats.notes.is_empty(),
                            "{case}: loaded without saying it is incomplete"
                        );
                    }
                }
            }
        }
    }
    eprintln!(
        "{total} cases over {} files: {loaded} loaded, {refused} refused; slowest {:?} ({})",
        files.len(),
        slowest.0,
        slowest.1
    );
}
