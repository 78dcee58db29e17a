//! `tracehound-dev scale` (xtask/) and the tests' generated jobs: makes large inputs for
//! benchmarks from a real Kineto trace by repeating its steps with shifted timestamps and fresh
//! correlation / external / flow ids, and makes a multi-rank job from one rank trace. The event
//! text is rewritten in place (numbers after `"ts":`, `"dur":`, `"id":`, `"correlation":`,
//! `"External id":`, step names), so the event mix, field order and formatting stay those of
//! the real trace; no JSON tree is built.

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::Path;
use tracehound_parsers::kineto::json_split::{Piece, Splitter};
use tracehound_parsers::kineto::lenient::us_text_to_ns;

/// Options of one generation.
pub struct ScaleOptions {
    /// Target size of each output file's JSON, bytes.
    pub target_bytes: u64,
    /// Write gzip.
    pub gzip: bool,
    /// Number of ranks (1: a single trace).
    pub ranks: u32,
    /// A rank made slower, with its time stretch factor.
    pub slow_rank: Option<(u32, f64)>,
    /// A rank that arrives late at every collective, by this many ns: a straggler.
    pub late_rank: Option<(u32, i64)>,
}

/// The events of the input, split once.
struct Source {
    outer: Vec<u8>,
    events: Vec<Vec<u8>>,
    span_ns: i64,
    first_ns: i64,
    max_id: u64,
    steps: u64,
}

/// The keys whose numbers are ids: offset in every copy so repeated steps stay distinct.
const ID_KEYS: [&[u8]; 4] = [
    b"\"id\":",
    b"\"correlation\":",
    b"\"External id\":",
    b"\"external id\":",
];

/// Finds `"key":` at depth-insensitive positions and returns the number text range after it.
fn number_after(ev: &[u8], key: &[u8]) -> Option<(usize, usize)> {
    let pos = memchr::memmem::find(ev, key)?;
    let mut a = pos + key.len();
    while a < ev.len() && (ev[a] == b' ' || ev[a] == b'\t') {
        a += 1;
    }
    let mut b = a;
    while b < ev.len()
        && (ev[b].is_ascii_digit() || matches!(ev[b], b'.' | b'-' | b'e' | b'E' | b'+'))
    {
        b += 1;
    }
    (b > a).then_some((a, b))
}

fn load_source(path: &Path) -> Result<Source> {
    let (data, _) = tracehound_parsers::read_input(path)?;
    let mut sp = Splitter::new(1 << 20);
    let mut outer = Vec::new();
    let mut chunks = Vec::new();
    sp.feed(&data, &mut |p| match p {
        Piece::Events { text, .. } => chunks.push(text),
        Piece::Outer(o) => outer = o,
    });
    sp.finish(&mut |p| match p {
        Piece::Events { text, .. } => chunks.push(text),
        Piece::Outer(o) => outer = o,
    });
    // Split the chunks into single events with a second splitter pass per chunk.
    let mut events = Vec::new();
    for c in chunks {
        let body = c.trim_ascii_start();
        let body = body
            .strip_prefix(b"[")
            .or_else(|| body.strip_prefix(b","))
            .unwrap_or(body);
        let mut wrapped = Vec::with_capacity(body.len() + 2);
        wrapped.push(b'[');
        wrapped.extend_from_slice(body);
        wrapped.push(b']');
        let mut one = Splitter::new(1);
        let mut take = |p: Piece| {
            if let Piece::Events { text, .. } = p {
                let t = text.trim_ascii_start();
                let t = t
                    .strip_prefix(b"[")
                    .or_else(|| t.strip_prefix(b","))
                    .unwrap_or(t);
                let t = t.trim_ascii();
                if !t.is_empty() {
                    events.push(t.to_vec());
                }
            }
        };
        one.feed(&wrapped, &mut take);
        // The last events may come out only when the input ends.
        one.finish(&mut take);
    }
    if events.is_empty() {
        bail!("{}: no trace events to repeat", path.display());
    }
    let (mut first, mut last, mut max_id, mut steps) = (i64::MAX, i64::MIN, 0u64, 0u64);
    for ev in &events {
        if let Some((a, b)) = number_after(ev, b"\"ts\":") {
            let ts = us_text_to_ns(std::str::from_utf8(&ev[a..b]).unwrap_or("")).unwrap_or(0);
            let dur = number_after(ev, b"\"dur\":")
                .and_then(|(c, d)| us_text_to_ns(std::str::from_utf8(&ev[c..d]).unwrap_or("")))
                .unwrap_or(0);
            first = first.min(ts);
            last = last.max(ts + dur);
        }
        for key in ID_KEYS {
            if let Some((a, b)) = number_after(ev, key)
                && let Ok(v) = std::str::from_utf8(&ev[a..b]).unwrap_or("").parse::<u64>()
            {
                max_id = max_id.max(v);
            }
        }
        if memchr::memmem::find(ev, b"\"ProfilerStep#").is_some()
            && memchr::memmem::find(ev, b"\"user_annotation\"").is_some()
        {
            steps += 1;
        }
    }
    Ok(Source {
        outer,
        events,
        span_ns: (last - first).max(1),
        first_ns: first,
        max_id,
        steps: steps.max(1),
    })
}

fn fmt_us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// Rewrites one event for repetition `k`: ids shifted by `k * id_step`, times by `shift_ns`,
/// stretched by `stretch` around `origin` (a slow rank), step numbers by `k * steps`.
fn rewrite(
    ev: &[u8],
    k: u64,
    id_step: u64,
    shift_ns: i64,
    stretch: f64,
    origin: i64,
    steps: u64,
) -> Vec<u8> {
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let time = |text: &[u8]| us_text_to_ns(std::str::from_utf8(text).unwrap_or(""));
    if let Some((a, b)) = number_after(ev, b"\"ts\":")
        && let Some(ts) = time(&ev[a..b])
    {
        let t = origin + ((ts - origin) as f64 * stretch) as i64 + shift_ns;
        edits.push((a, b, fmt_us(t)));
    }
    if stretch != 1.0
        && let Some((a, b)) = number_after(ev, b"\"dur\":")
        && let Some(d) = time(&ev[a..b])
    {
        edits.push((a, b, fmt_us((d as f64 * stretch) as i64)));
    }
    if k > 0 {
        for key in ID_KEYS {
            if let Some((a, b)) = number_after(ev, key)
                && let Ok(v) = std::str::from_utf8(&ev[a..b]).unwrap_or("").parse::<u64>()
            {
                edits.push((a, b, (v + k * id_step).to_string()));
            }
        }
        if let Some(p) = memchr::memmem::find(ev, b"\"ProfilerStep#") {
            let a = p + b"\"ProfilerStep#".len();
            let mut b = a;
            while b < ev.len() && ev[b].is_ascii_digit() {
                b += 1;
            }
            if let Ok(n) = std::str::from_utf8(&ev[a..b]).unwrap_or("").parse::<u64>() {
                edits.push((a, b, (n + k * steps).to_string()));
            }
        }
    }
    edits.sort_by_key(|e| e.0);
    let mut out = Vec::with_capacity(ev.len() + 16);
    let mut at = 0;
    for (a, b, text) in edits {
        if a < at {
            continue;
        }
        out.extend_from_slice(&ev[at..a]);
        out.extend_from_slice(text.as_bytes());
        at = b;
    }
    out.extend_from_slice(&ev[at..]);
    out
}

/// The outer document with `distributedInfo` set for rank `r` of `n`.
fn outer_for_rank(outer: &[u8], r: u32, n: u32) -> (Vec<u8>, Vec<u8>) {
    let text = String::from_utf8_lossy(outer).into_owned();
    let Some(open) = text.find("[]") else {
        return (b"[".to_vec(), b"]".to_vec());
    };
    let (mut head, tail) = (text[..open].to_string(), text[open + 2..].to_string());
    if n > 1 && head.trim_start().starts_with('{') {
        let info = format!(
            "\"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {r}, \"world_size\": {n}}}, "
        );
        if let Some(p) = head.find("\"distributedInfo\"") {
            // Replace the existing object, up to its own closing brace: torch nests the
            // process groups' configuration inside it.
            if let Some(end) = closing_brace(&head[p..]) {
                head.replace_range(p..p + end + 1, info.trim_end_matches([',', ' ']));
            }
        } else if let Some(p) = head.find('{') {
            head.insert_str(p + 1, &info);
        }
    }
    // torch's own layout: events indented by two spaces, `\n  },\n  {` between them.
    (
        format!("{head}[\n  ").into_bytes(),
        format!("\n  ]{tail}").into_bytes(),
    )
}

/// The byte offset of the brace closing the first object in `text`, skipping strings.
fn closing_brace(text: &str) -> Option<usize> {
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    for (i, c) in text.char_indices() {
        if in_str {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => depth += 1,
            '}' if depth == 1 => return Some(i),
            '}' => depth = depth.checked_sub(1)?,
            _ => {}
        }
    }
    None
}

/// Whether an event is a collective kernel (NCCL), by its text.
fn is_collective_event(ev: &[u8]) -> bool {
    let kernel = memchr::memmem::find(ev, b"\"cat\": \"kernel\"").is_some()
        || memchr::memmem::find(ev, b"\"cat\":\"kernel\"").is_some();
    kernel
        && number_after(ev, b"\"dur\":").is_some()
        && [
            "\"ncclKernel",
            "\"ncclDevKernel",
            "\"void ncclKernel",
            "\"void ncclDevKernel",
        ]
        .iter()
        .any(|n| memchr::memmem::find(ev, n.as_bytes()).is_some())
}

/// A collective kernel of a rank that arrives `late_ns` late: it starts that much later and
/// ends when it did, since the transfer completes when the last rank arrives. Its duration
/// keeps at least a tenth of itself (the transfer), so a lateness longer than the kernel
/// shortens it to that. The other ranks' copies are left as they are: measured against this
/// rank, each of their collectives now waits `late_ns` longer.
fn arrive_late(ev: &[u8], late_ns: i64) -> Vec<u8> {
    let time = |text: &[u8]| us_text_to_ns(std::str::from_utf8(text).unwrap_or(""));
    let (Some((ta, tb)), Some((da, db))) =
        (number_after(ev, b"\"ts\":"), number_after(ev, b"\"dur\":"))
    else {
        return ev.to_vec();
    };
    let (Some(ts), Some(dur)) = (time(&ev[ta..tb]), time(&ev[da..db])) else {
        return ev.to_vec();
    };
    let shift = late_ns.min(dur - dur / 10).max(0);
    let mut edits = [(ta, tb, fmt_us(ts + shift)), (da, db, fmt_us(dur - shift))];
    edits.sort_by_key(|e| e.0);
    let mut out = Vec::with_capacity(ev.len() + 8);
    let mut at = 0;
    for (a, b, text) in edits {
        out.extend_from_slice(&ev[at..a]);
        out.extend_from_slice(text.as_bytes());
        at = b;
    }
    out.extend_from_slice(&ev[at..]);
    out
}

/// Generates the output file(s); returns their paths.
pub fn run(input: &Path, output: &Path, opts: &ScaleOptions) -> Result<Vec<std::path::PathBuf>> {
    let src = load_source(input).with_context(|| format!("reading {}", input.display()))?;
    let per_copy: u64 = src.events.iter().map(|e| e.len() as u64 + 2).sum();
    let copies = opts.target_bytes.div_ceil(per_copy.max(1)).max(1);
    // Repetitions follow each other with a 1 ms pause, ids never collide.
    let shift = src.span_ns + 1_000_000;
    let id_step = src.max_id + 1;
    let mut outputs = Vec::new();
    for r in 0..opts.ranks {
        let path = if opts.ranks == 1 {
            output.to_path_buf()
        } else {
            std::fs::create_dir_all(output)
                .with_context(|| format!("creating {}", output.display()))?;
            output.join(format!(
                "rank{r}.pt.trace.json{}",
                if opts.gzip { ".gz" } else { "" }
            ))
        };
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let buffered = std::io::BufWriter::with_capacity(1 << 20, file);
        let mut w: Box<dyn Write> = if opts.gzip {
            Box::new(flate2::write::GzEncoder::new(
                buffered,
                flate2::Compression::fast(),
            ))
        } else {
            Box::new(buffered)
        };
        let stretch = match opts.slow_rank {
            Some((slow, f)) if slow == r => f,
            _ => 1.0,
        };
        let late_ns = match opts.late_rank {
            Some((late, ns)) if late == r => ns,
            _ => 0,
        };
        let (head, tail) = outer_for_rank(&src.outer, r, opts.ranks);
        w.write_all(&head)?;
        let mut first = true;
        for k in 0..copies {
            let shift_ns = (k as f64 * shift as f64 * stretch) as i64;
            for ev in &src.events {
                if !first {
                    w.write_all(b",\n  ")?;
                }
                first = false;
                let mut out = rewrite(ev, k, id_step, shift_ns, stretch, src.first_ns, src.steps);
                if late_ns > 0 && is_collective_event(&out) {
                    out = arrive_late(&out, late_ns);
                }
                w.write_all(&out)?;
            }
        }
        w.write_all(&tail)?;
        w.flush()?;
        drop(w);
        outputs.push(path);
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_numbers_in_place() {
        let ev = br#"{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 5113160564470.376, "dur": 1.5, "args": {"External id": 7, "correlation": 9, "Python id": 4}}"#;
        let out = rewrite(ev, 2, 100, 1_000_000, 1.0, 0, 5);
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("\"ts\": 5113160565470.376"), "{s}");
        assert!(s.contains("ProfilerStep#13"), "{s}");
        assert!(
            s.contains("\"External id\": 207") && s.contains("\"correlation\": 209"),
            "{s}"
        );
        assert!(s.contains("\"Python id\": 4"), "{s}");
        assert_eq!(fmt_us(-1500), "-1.500");
    }

    #[test]
    fn a_late_rank_starts_its_collectives_later_and_ends_them_on_time() {
        let ev = br#"{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "ts": 100.000, "dur": 50.000}"#;
        assert!(is_collective_event(ev));
        let s = String::from_utf8(arrive_late(ev, 20_000)).unwrap();
        assert!(
            s.contains("\"ts\": 120.000") && s.contains("\"dur\": 30.000"),
            "{s}"
        );
        // Later than the kernel lasts: the transfer keeps a tenth.
        let s = String::from_utf8(arrive_late(ev, 90_000)).unwrap();
        assert!(
            s.contains("\"ts\": 145.000") && s.contains("\"dur\": 5.000"),
            "{s}"
        );
        let gemm = br#"{"ph": "X", "cat": "kernel", "name": "sm90_gemm", "ts": 1.0, "dur": 2.0}"#;
        assert!(!is_collective_event(gemm));
    }
}
