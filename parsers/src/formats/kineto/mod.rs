//! PyTorch profiler (Kineto) Chrome trace JSON, as written by `torch.profiler` /
//! `export_chrome_trace` / `tensorboard_trace_handler` (<https://github.com/pytorch/kineto>).
//!
//! Handles every generation seen in real files (`../docs/trace-formats.md` of the shared
//! docs): a `{"traceEvents": [...]}` object or a bare top-level array (Jan 2021), 2021 and
//! 2022+ category names (and PyTorch 1.10's mix of the two, whose `record_function` ranges are
//! CPU operators), `[memory]` events with or without `cat`, int or string pid/tid,
//! int or float `ts`/`dur` (kept to the ns), `baseTimeNanoseconds`, ROCm memcpy names.
//! Events are deserialized straight into the model with borrowed strings; no JSON tree is built.
//! A file that ends early (a job killed mid-write) yields what was complete, with a warning.
//!
//! The folder, by job: [`json_split`] cuts the events array into chunks of whole events;
//! `chunks` parses a chunk into a builder of its own and merges parsed chunks in order;
//! `scan` (over [`json_scan`], [`json_members`], [`json_arrays`] and [`lenient`]) is the fast
//! event scanner, `fallback` the serde reading of what it does not take and of the document
//! around the events; `builder` puts events into the model. This file drives them
//! (`parse_input`) and tells a file from another tool from a profiler trace (`foreign`).

mod builder;
mod chunks;
mod fallback;
pub mod json_arrays;
pub mod json_members;
pub mod json_scan;
pub mod json_split;
pub mod lenient;
mod scan;

pub use self::builder::parse_memcpy_name;
use self::builder::*;
use self::chunks::*;
use self::fallback::*;
use self::scan::*;
pub use self::scan::{FAST_SCAN, SCAN_FALLBACKS};

use self::json_arrays::Arrays;
use self::json_members::{Cursor, Members, Step};
use self::json_scan::{Bail, Scan, Scanned, ascii_text, number_end, plain_string_end, skip_ws};
use self::json_split::{Piece, SlicePiece};
use self::lenient::{Dims, LStr, Num, us_text_to_ns};
use crate::error::LoadError;
use crate::model::*;
use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// Does `head` (the first bytes of a decompressed file) look like a Kineto / Chrome trace?
/// `Some(true)`: yes; `Some(false)`: no; `None`: cannot tell from this much.
pub fn is_applicable(head: &[u8]) -> Option<bool> {
    let first = head
        .iter()
        .find(|b| !b.is_ascii_whitespace() && **b != 0xEF && **b != 0xBB && **b != 0xBF);
    match first {
        None => None,
        Some(b'{') | Some(b'[') => Some(true),
        Some(_) => Some(false),
    }
}

/// Parses a whole Kineto trace held in memory.
pub fn parse(data: &[u8], source: &str) -> Result<Trace, LoadError> {
    parse_slice(data, source, None, None)
}

/// [`read_slice`], finished.
pub fn parse_slice<'d>(
    data: &'d [u8],
    source: &str,
    progress: Option<&'d std::sync::atomic::AtomicU64>,
    release: Option<Release<'d>>,
) -> Result<Trace, LoadError> {
    read_slice(data, source, progress, release).map(Parsed::finish)
}

pub use super::Release;

/// The format.
pub static FORMAT: SourceFormat = SourceFormat {
    id: "kineto",
    name: "PyTorch profiler (Kineto) trace",
    input: "JSON",
    records: "events",
    records_gpu_work: true,
    clock_origin: Some("baseTimeNanoseconds"),
};

/// The reader: streamed, mapped where it lies when the file is plain.
pub static READER: super::Reader = super::Reader {
    format: &FORMAT,
    is_applicable,
    input: super::Input::Stream {
        slice: read_slice,
        stream: |r, source, speculate| parse_input(Input::Stream(r), source, Vec::new(), speculate),
    },
};

/// Parses a whole Kineto trace held in memory (a mapped file): chunks of events are parsed
/// where they lie instead of being copied, and lines are counted only to report bad JSON.
/// `progress` is raised to the end of each chunk handed to the parsers; `release` is given
/// each chunk parsed where it lies.
pub fn read_slice<'d>(
    data: &'d [u8],
    source: &str,
    progress: Option<&'d std::sync::atomic::AtomicU64>,
    release: Option<Release<'d>>,
) -> Result<Parsed, LoadError> {
    // A file in another layout than torch's is first cut where its events probably end
    // (`Splitter::speculate`); when that fails to parse, the cuts may be what is wrong, and
    // the file is read again with every cut found by walking the text.
    let speculated = std::cell::Cell::new(false);
    let first = parse_input(
        Input::<&[u8]>::Slice(data, progress, release),
        source,
        Vec::new(),
        Some(&speculated),
    );
    match first {
        Err(_) if speculated.get() => parse_input(
            Input::<&[u8]>::Slice(data, progress, release),
            source,
            Vec::new(),
            None,
        ),
        result => result,
    }
}

/// Parses a Kineto trace from a reader, streaming: this thread reads (and, for gzip,
/// decompresses) straight into chunk buffers, the splitter cuts the events array into chunks
/// of whole events, and worker threads parse the chunks in parallel while the next bytes are
/// read. Memory holds the model plus a few chunks, never the whole input. `warnings` are
/// carried into the trace (e.g. from sniffing).
pub fn parse_reader<R: std::io::Read>(
    reader: R,
    source: &str,
    warnings: Vec<String>,
) -> Result<Trace, LoadError> {
    parse_input(Input::Stream(reader), source, warnings, None).map(Parsed::finish)
}

/// [`parse_reader`] and [`parse_slice`]: the splitter hands chunks to worker threads (scoped,
/// so that they can read chunks left in an input held in memory), and the workers merge the
/// parsed chunks in chunk order as they go ([`Merger`]).
fn parse_input<'d, R: std::io::Read>(
    input: Input<'d, R>,
    source: &str,
    warnings: Vec<String>,
    speculate: Option<&std::cell::Cell<bool>>,
) -> Result<Parsed, LoadError> {
    use std::sync::Mutex;
    use std::sync::mpsc::{channel, sync_channel};
    let mut clock = crate::timing::Phases::start();
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 16);
    // An input held in memory: its bytes, the progress counter and the pages' release.
    let (data, progress, release) = match &input {
        Input::Slice(d, p, r) => (Some(*d), *p, *r),
        Input::Stream(_) => (None, None, None),
    };
    let mut splitter = self::json_split::Splitter::new(CHUNK);
    splitter.speculate = speculate.is_some();
    let mut outer: Vec<u8> = Vec::new();
    let mut read_error: Option<std::io::Error> = None;
    let mut bytes_total = 0u64;
    // Why a stream ended early (a gzip stream without its end), for the incomplete capture.
    let mut stream_end: Option<String> = None;
    // Worker threads: chunks in, parsed builders out. The bounded queue keeps memory flat
    // when parsing is slower than reading. An input held in memory of at most one chunk is
    // parsed on this thread as it is split: starting threads costs more than such a parse.
    let inline = matches!(&input, Input::Slice(d, ..) if d.len() <= CHUNK);
    type Job<'d> = (usize, ChunkText<'d>, usize, u64);
    let (chunk_tx, chunk_rx) = sync_channel::<Job<'d>>(workers);
    let chunk_rx = Mutex::new(chunk_rx);
    let (free_chunk_tx, free_chunk_rx) = channel::<Vec<u8>>();
    let merger = Merger::new(source);
    let parse_one = |(index, text, line, offset): Job<'d>,
                     free: &std::sync::mpsc::Sender<Vec<u8>>| {
        let spare = merger.spare();
        let len = match &text {
            ChunkText::Owned(t) => t.len(),
            ChunkText::Borrowed(t) => t.len(),
        };
        let result = match text {
            ChunkText::Owned(text) => {
                let (result, buf) = parse_chunk_keep(text, line, source, spare);
                let _ = free.send(buf);
                result
            }
            ChunkText::Borrowed(text) => {
                debug_assert!(data.is_none_or(|d| {
                    (text.as_ptr() as usize).wrapping_sub(d.as_ptr() as usize) == offset as usize
                }));
                let result = parse_chunk_borrowed(text, line, source, spare);
                if let Some(release) = release {
                    release(text);
                }
                result
            }
        };
        // The pages around a chunk's start, once the chunks on both sides of it are parsed
        // (it is merged after all before it). Each chunk gives back only the pages wholly
        // inside it, and a fault in a neighbour can map a large folio of the page cache (up
        // to 2 MiB) across the boundary: without this, such pages stayed mapped, some 5% of
        // the file (53-86 MB of a 1 GB trace).
        let boundaries = |at: u64, len: usize| {
            if let (Some(release), Some(d)) = (release, data) {
                const AROUND: usize = 2 << 20;
                let at = (at as usize).min(d.len());
                let (from, to) = (
                    at.saturating_sub(AROUND),
                    (at + len.min(AROUND)).min(d.len()),
                );
                release(&d[from..to]);
            }
        };
        merger.done(
            ChunkOut {
                index,
                offset,
                len,
                result,
            },
            boundaries,
        );
    };
    // Parses chunks until the queue is closed and empty: on the workers, and on this thread
    // once the input is split.
    let work = |free: std::sync::mpsc::Sender<Vec<u8>>| {
        loop {
            let job = match chunk_rx.lock() {
                Ok(guard) => guard.recv(),
                Err(_) => return,
            };
            let Ok(job) = job else {
                return;
            };
            parse_one(job, &free);
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..if inline { 0 } else { workers } {
            let free = free_chunk_tx.clone();
            let work = &work;
            scope.spawn(move || work(free));
        }
        let free_here = free_chunk_tx.clone();
        drop(free_chunk_tx);
        let mut n_chunks = 0usize;
        let mut send = |text: ChunkText<'d>, line: usize, offset: u64| {
            if let Some(c) = progress {
                let n = match &text {
                    ChunkText::Owned(t) => t.len(),
                    ChunkText::Borrowed(t) => t.len(),
                };
                c.fetch_max(offset + n as u64, std::sync::atomic::Ordering::Relaxed);
            }
            let job = (n_chunks, text, line, offset);
            if inline {
                parse_one(job, &free_here);
            } else {
                let _ = chunk_tx.send(job);
            }
            n_chunks += 1;
        };
        let cut = match input {
            Input::Stream(mut reader) => {
                let mut emit = |p: Piece| match p {
                    Piece::Events { text, line, offset } => {
                        send(ChunkText::Owned(text), line, offset)
                    }
                    Piece::Outer(o) => outer = o,
                };
                loop {
                    while let Ok(buf) = free_chunk_rx.try_recv() {
                        splitter.recycle(buf);
                    }
                    match splitter.read_from(&mut reader, BLOCK, &mut emit) {
                        Ok(0) => break,
                        Ok(n) => bytes_total += n as u64,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            bytes_total = splitter.offset();
                            read_error = Some(e);
                            break;
                        }
                    }
                }
                splitter.finish(&mut emit)
            }
            Input::Slice(d, ..) => {
                bytes_total = d.len() as u64;
                splitter.split_slice(d, &mut |p| match p {
                    SlicePiece::Piece(Piece::Events { text, line, offset }) => {
                        send(ChunkText::Owned(text), line, offset)
                    }
                    SlicePiece::Piece(Piece::Outer(o)) => outer = o,
                    SlicePiece::Borrowed { start, end } => {
                        if let Some(text) = d.get(start..end) {
                            send(ChunkText::Borrowed(text), 1, start as u64);
                        }
                    }
                })
            }
        };
        if cut && read_error.is_none() {
            read_error = Some(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the JSON ends inside traceEvents",
            ));
        } else if let Some(e) = &read_error
            && e.kind() == std::io::ErrorKind::UnexpectedEof
        {
            stream_end = Some(format!(
                "the gzip stream stops without its end marker after {bytes_total} bytes of decompressed JSON"
            ));
        }
        drop(chunk_tx);
        // The input is read: chunk buffers handed back from now on are freed, not kept for
        // reuse, so they do not sit beside the model while it is merged and indexed.
        drop(free_chunk_rx);
        splitter.release_buffers();
        if let Some(c) = speculate {
            c.set(splitter.speculated);
        }
        work(free_here);
    });
    let queue = merger
        .queue
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut merged = merger
        .into
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut failed = queue.failed;
    // Each chunk gave back the pages wholly inside it; the pages where two chunks meet
    // (a sixteenth of a 4 MiB chunk on average) go now, with the rest of the input.
    if let (Some(d), Some(release)) = (data, release) {
        release(d);
    }
    if let Some(d) = data {
        // Chunks of an input held in memory were parsed as if each began on line 1: the
        // line of bad JSON is the newlines before the chunk plus its line in the chunk.
        if let Some(o) = &mut failed
            && let Err(LoadError::Json { line, .. }) = &mut o.result
        {
            let before = d.get(..o.offset as usize).unwrap_or(d);
            *line += memchr::memchr_iter(b'\n', before).count();
        }
    }
    clock.mark("kineto: read and parse");

    let mut b = Builder::new(source);
    b.trace.warnings = warnings;
    b.trace.stats.bytes_total = bytes_total;
    let truncated = matches!(&read_error, Some(e) if e.kind() == std::io::ErrorKind::UnexpectedEof);
    if let Some(e) = &read_error
        && !truncated
    {
        return Err(LoadError::Gzip {
            path: source.to_string(),
            msg: e.to_string(),
        });
    }
    // The document around the events: metadata, or the reason this is not a trace.
    let mut de = serde_json::Deserializer::from_slice(&outer);
    let outer_result = TopSeed { b: &mut b }
        .deserialize(&mut de)
        .and_then(|_| de.end());
    if let Err(e) = outer_result {
        // Text outside the array cut short by truncation is expected; anything else is not JSON.
        if !(truncated && e.is_eof()) {
            return Err(LoadError::Json {
                path: source.to_string(),
                line: e.line(),
                column: e.column(),
                msg: strip_position(&e.to_string()),
            });
        }
    }
    b.saw_events_container |= splitter.saw_events;
    if let Some(ChunkOut { result: Err(e), .. }) = failed {
        return Err(e);
    }
    merge_chunk(&mut b, &mut merged);
    clock.mark("kineto: merge");
    if truncated {
        if b.events == 0 {
            return Err(LoadError::NotATrace {
                path: source.to_string(),
                why: format!(
                    "the file ends after {} bytes, before the first complete trace event",
                    splitter.offset()
                ),
            });
        }
        let done = splitter.last_complete_offset;
        b.trace.stats.truncated = true;
        b.trace.stats.bytes_parsed = done;
        // The file's own sizes are the loader's to fill in (it knows whether the text was
        // decompressed); here, the text is the file.
        b.trace.stats.incomplete = Some(crate::Incomplete {
            why: stream_end.unwrap_or_else(|| "the JSON ends inside traceEvents".into()),
            compressed: false,
            file_bytes: bytes_total,
            file_bytes_read: bytes_total,
            text_bytes_complete: done,
            events_read: b.events,
        });
    } else {
        b.trace.stats.bytes_parsed = bytes_total;
    }
    if !b.saw_events_container {
        return Err(LoadError::NotATrace {
            path: source.to_string(),
            why: "JSON without a `traceEvents` array or a top-level array of events".into(),
        });
    }
    if b.events > 0 && b.with_ph == 0 {
        return Err(LoadError::NotATrace {
            path: source.to_string(),
            why: format!(
                "a JSON array of {} items, none of them a trace event (no `ph` field)",
                b.events
            ),
        });
    }
    let t = b.finish();
    clock.mark("kineto: finish");
    if let Some(why) = foreign(&t.trace) {
        return Err(LoadError::NotATrace {
            path: source.to_string(),
            why,
        });
    }
    Ok(t)
}

// How the reader counts skipped events that have no category of their own to be counted
// under (`LoadStats::skipped`).
const SKIP_NO_PH: &str = "no ph";
const SKIP_METADATA: &str = "metadata";
const SKIP_NO_CAT: &str = "(no cat)";
const SKIP_FLOW: &str = "flow";
const SKIP_OTHER_PH: &str = "other ph";

/// What a PyTorch profiler trace holds that the model keeps nothing of (bookkeeping), as the
/// reader counts it skipped; [`SKIP_NO_CAT`] apart (a few uncategorised events are normal in
/// a profiler trace, all of them are not).
const BOOKKEEPING: &[&str] = &[
    SKIP_METADATA,
    SKIP_FLOW,
    SKIP_OTHER_PH,
    "Trace",
    "overhead",
    "ac2g",
    "fwdbwd",
];

/// Why a Chrome trace-event file is not a PyTorch profiler trace, when it is not: nothing in
/// it was read, and its events are of categories the profiler never writes, or carry no
/// category at all in a file without the profiler's own marks (`schemaVersion`,
/// `deviceProperties`). Such a file would otherwise be judged as a capture with GPU tracing
/// off, a statement about a format tracehound does not read. The tool is named where its
/// events say which (TensorFlow's timeline: the `Op` category; a CUPTI-based tool's own: its
/// activity kinds as categories).
fn foreign(t: &Trace) -> Option<String> {
    if !(t.gpu_ops.is_empty() && t.host_spans.is_empty() && t.memory.is_empty()) {
        return None;
    }
    let count = |c: &str| t.stats.skipped.iter().find(|x| x.0 == c).map_or(0, |x| x.1);
    let mut other: Vec<&(String, u64)> = t
        .stats
        .skipped
        .iter()
        .filter(|(c, _)| !BOOKKEEPING.contains(&c.as_str()) && c != SKIP_NO_CAT && c != SKIP_NO_PH)
        .collect();
    let marked = t.meta.format_version.starts_with("schemaVersion") || !t.meta.gpus.is_empty();
    let uncategorised = count(SKIP_NO_CAT);
    if other.is_empty() && (marked || uncategorised == 0) {
        return None;
    }
    other.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let tool = if other.iter().any(|x| x.0 == "Op") {
        "a TensorFlow timeline (its ops are of category `Op`)"
    } else if other
        .iter()
        .any(|x| x.0.starts_with("dynamo") || x.0.starts_with("inductor"))
    {
        "torch.compile's own timings (TORCH_TRACE chromium events: compile phases, no GPU work)"
    } else if other
        .iter()
        .any(|x| x.0.starts_with("CUPTI_ACTIVITY_KIND_"))
    {
        "a trace written by a CUPTI-based tool of its own (categories named after CUPTI's activity kinds, in no layout tracehound knows)"
    } else {
        "a Chrome trace-event file from another tool"
    };
    let mut cats: Vec<String> = other
        .iter()
        .take(5)
        .map(|(c, n)| format!("`{c}` {n}"))
        .collect();
    if uncategorised > 0 {
        cats.push(format!("no category {uncategorised}"));
    }
    Some(format!(
        "{tool}, not a PyTorch profiler trace: none of its {} events is of a category the PyTorch profiler writes (kernel, cpu_op, cuda_runtime, gpu_memcpy ...); what it holds: {}. tracehound reads: {}",
        t.stats.events_total,
        cats.join(", "),
        super::READERS
            .iter()
            .map(|r| r.format.name)
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_that_is_not_utf8_is_read_once_not_twice() {
        // The scanner refuses a key with bytes that are not UTF-8 in an object nested in the
        // args, and serde skips it; serde
        // then read the chunk into the builder the scanner had filled up to that event, and
        // every event before it was counted twice (found by the kineto_scan_vs_serde target).
        let mut doc = br#"{"traceEvents": ["#.to_vec();
        for k in 0..20 {
            doc.extend_from_slice(
                format!(
                    r#"{{"ph": "X", "cat": "cpu_op", "name": "op{k}", "pid": 1, "tid": 1, "ts": {}, "dur": 1}},"#,
                    10 * k
                )
                .as_bytes(),
            );
        }
        doc.extend_from_slice(b"{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"last\", \"pid\": 1, \"tid\": 1, \"ts\": 500, \"dur\": 1, \"args\": {\"limits\": {\"allo\x99\x9eted\": 1}}}]}");
        let t = parse(&doc, "t.json").expect("serde reads it");
        assert_eq!(t.host_spans.len(), 21);
        assert_eq!(t.stats.events_total, 21);
    }

    #[test]
    fn an_unescaped_quote_in_a_skipped_value_is_an_error_not_lost_events() {
        // Every event's args hold a string with a quote left unescaped (`"x},{"y"`): read with
        // strings and structure swapped, half the events vanished without a word.
        let mut s = String::from(r#"{"traceEvents": ["#);
        for i in 0..50_000 {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": {}, "dur": 1, "args": {{"list": [{{"b": "x}},{{"y"}}]}}}}"#,
                10 * i
            ));
        }
        s.push_str("]}");
        match parse(s.as_bytes(), "t") {
            Err(LoadError::Json { line, column, .. }) => assert!(line == 1 && column > 0),
            other => panic!("{:?}", other.map(|t| t.host_spans.len())),
        }
    }

    /// A trace in one line (json.dump's layout) of more than two chunks, each event mostly
    /// `trap`: text where a speculative cut finds `}`, `,`, `{`, `"` and no cut may be.
    fn trapped_trace(events: usize, trap: &str) -> Vec<u8> {
        let mut s = String::from(r#"{"schemaVersion": 1, "traceEvents": ["#);
        for i in 0..events {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&format!(
                r#"{{"ph": "X", "cat": "cpu_op", {trap}, "pid": 1, "tid": 1, "ts": {}, "dur": 1, "args": {{"External id": {i}}}}}"#,
                10 * i
            ));
        }
        s.push_str(r#"], "traceName": "t"}"#);
        s.into_bytes()
    }

    /// Reads `doc` speculatively (which must fail: its cuts land inside events), then as the
    /// loader does, and checks that the loader's reading is the walking one.
    fn read_past_wrong_cuts(doc: &[u8], events: usize) -> Trace {
        assert!(doc.len() > 2 * CHUNK, "{} bytes", doc.len());
        let speculated = std::cell::Cell::new(false);
        let first = parse_input(
            Input::<&[u8]>::Slice(doc, None, None),
            "t",
            Vec::new(),
            Some(&speculated),
        );
        assert!(speculated.get() && first.is_err());
        let walked = parse_input(
            Input::<&[u8]>::Slice(doc, None, None),
            "t",
            Vec::new(),
            None,
        )
        .expect("walked")
        .finish();
        let read = parse(doc, "t").expect("read");
        assert_eq!(read.host_spans.len(), events);
        assert_eq!(read.host_spans, walked.host_spans);
        read
    }

    /// [`read_past_wrong_cuts`] for a stream: the speculative reading fails and sets its flag,
    /// and the loader, given the file gzip-compressed, reads it again to the walking result.
    fn stream_past_wrong_cuts(doc: &[u8], events: usize) {
        use std::io::Write;
        let speculated = std::cell::Cell::new(false);
        let first = parse_input(
            Input::Stream(std::io::Cursor::new(doc)),
            "t",
            Vec::new(),
            Some(&speculated),
        );
        assert!(speculated.get() && first.is_err());
        let walked = parse_reader(std::io::Cursor::new(doc), "t", Vec::new()).expect("walked");
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("t.json.gz");
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).expect("create"),
            flate2::Compression::fast(),
        );
        gz.write_all(doc).expect("write");
        gz.finish().expect("finish");
        let read = crate::load(&path).expect("loaded");
        assert_eq!(read.host_spans.len(), events);
        assert_eq!(read.host_spans, walked.host_spans);
    }

    #[test]
    fn speculative_cuts_in_a_stream_are_read_again_from_the_start() {
        let name = format!(r#""name": "{}""#, "a},{".repeat(500));
        stream_past_wrong_cuts(&trapped_trace(5_000, &name), 5_000);
        let list = format!(
            r#""name": "op", "list": [{}{{"b": 2}}]"#,
            r#"{"a": 1}, "#.repeat(800)
        );
        stream_past_wrong_cuts(&trapped_trace(1_500, &list), 1_500);
    }

    #[test]
    fn speculative_cuts_inside_a_string_are_read_again_by_walking() {
        // Long names made of `a},{`, ending `},{` just before the closing quote.
        let name = format!(r#""name": "{}""#, "a},{".repeat(500));
        let read = read_past_wrong_cuts(&trapped_trace(5_000, &name), 5_000);
        assert!(read.str(read.host_spans[7].name).ends_with("a},{"));
    }

    #[test]
    fn speculative_cuts_between_nested_objects_are_read_again_by_walking() {
        // Events whose args hold long lists of objects.
        let list = format!(
            r#""name": "op", "list": [{}{{"b": 2}}]"#,
            r#"{"a": 1}, "#.repeat(800)
        );
        read_past_wrong_cuts(&trapped_trace(1_500, &list), 1_500);
    }

    #[test]
    fn speculative_cuts_between_events_read_a_layout_the_same_as_walking() {
        // Without traps every cut is right: the speculative reading succeeds and equals the
        // walking one.
        let mut s = String::from(r#"{"traceEvents": ["#);
        for i in 0..120_000 {
            if i > 0 {
                s.push_str(",\n");
            }
            s.push_str(&format!(
                r#"{{"name": "op{}", "ph": "X", "cat": "cpu_op", "ts": {}, "dur": 2, "pid": 1, "tid": 1, "args": {{"External id": {i}}}}}"#,
                i % 5,
                10 * i
            ));
        }
        s.push_str("]}");
        let doc = s.into_bytes();
        assert!(doc.len() > 2 * CHUNK);
        let speculated = std::cell::Cell::new(false);
        let fast = parse_input(
            Input::<&[u8]>::Slice(&doc, None, None),
            "t",
            Vec::new(),
            Some(&speculated),
        )
        .expect("speculative")
        .finish();
        assert!(speculated.get());
        let walked = parse_input(
            Input::<&[u8]>::Slice(&doc, None, None),
            "t",
            Vec::new(),
            None,
        )
        .expect("walked")
        .finish();
        assert_eq!(fast.host_spans.len(), 120_000);
        assert_eq!(fast.host_spans, walked.host_spans);
        let streamed = std::cell::Cell::new(false);
        let stream = parse_input(
            Input::Stream(std::io::Cursor::new(&doc)),
            "t",
            Vec::new(),
            Some(&streamed),
        )
        .expect("speculative stream")
        .finish();
        assert!(streamed.get());
        assert_eq!(stream.host_spans, walked.host_spans);
    }

    #[test]
    fn parsed_chunks_wait_for_the_one_before_them_in_a_bounded_queue() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let merger = Merger::new("t.json");
        let returned = AtomicUsize::new(0);
        // The chunks merged, as the merger reports them (offset, length): in order, each once.
        let merged = std::sync::Mutex::new(Vec::new());
        let report = |offset: u64, len: usize| merged.lock().unwrap().push((offset, len));
        let chunk = |index: usize| ChunkOut {
            index,
            offset: 100 * index as u64,
            len: 100,
            result: Ok(Builder::new("t.json")),
        };
        std::thread::scope(|scope| {
            // A worker that parses chunks 1..=8 while chunk 0 is still being parsed.
            let worker = scope.spawn(|| {
                for i in 1..=8 {
                    merger.done(chunk(i), report);
                    returned.fetch_add(1, Ordering::SeqCst);
                }
            });
            std::thread::sleep(std::time::Duration::from_millis(200));
            // Without chunk 0 no more than MAX_WAITING of them may have been let go, and
            // none merged.
            assert!(returned.load(Ordering::SeqCst) <= MAX_WAITING);
            assert!(merger.queue().pending.len() <= MAX_WAITING + 1);
            assert!(merged.lock().unwrap().is_empty());
            merger.done(chunk(0), report);
            worker.join().unwrap();
        });
        assert_eq!(returned.load(Ordering::SeqCst), 8);
        let q = merger.queue();
        assert_eq!((q.next, q.pending.len()), (9, 0));
        let want: Vec<(u64, usize)> = (0..9).map(|i| (100 * i, 100)).collect();
        assert_eq!(*merged.lock().unwrap(), want);
    }

    fn parse_str(s: &str) -> Result<Trace, LoadError> {
        parse(s.as_bytes(), "test.json")
    }

    #[test]
    fn legacy_array_with_string_tids() {
        let t = parse_str(
            r#"[
            {"ph":"X","cat":"Operator","name":"aten::add","pid":1,"tid":"25738","ts":10,"dur":5,"args":{"external id":3}},
            {"ph":"X","cat":"Runtime","name":"cudaLaunchKernel","pid":1,"tid":"25738","ts":11,"dur":1,"args":{"correlation":9,"external id":3}},
            {"ph":"X","cat":"Kernel","name":"k","pid":0,"tid":"stream 7","ts":20.5,"dur":0.25,"args":{"device":0,"stream":7,"correlation":9}},
            {"ph":"i","name":"[memory]","pid":1,"tid":"25738","ts":12,"args":{"Device Type":1,"Device Id":0,"Bytes":-512}}
        ]"#,
        )
        .unwrap();
        assert_eq!(t.gpu_ops.len(), 1);
        assert_eq!(t.gpu_ops[0].start, 20_500);
        assert_eq!(t.gpu_ops[0].end, 20_750);
        assert_eq!(t.host_spans.len(), 2);
        assert_eq!(t.host_spans[0].tid, 25738);
        assert_eq!(t.memory.len(), 1);
        assert_eq!(t.memory[0].bytes, -512);
        assert_eq!(t.memory[0].total_reserved.get(), None);
        assert_eq!(
            t.str(t.host_spans[t.index.op_cpu_op[0] as usize].name),
            "aten::add"
        );
    }

    /// PyTorch 1.10's mix (`cpu_op` operators, `Runtime` calls, `Kernel`s, ids spelled
    /// `External id` and `external id`): the `record_function` range is a `cpu_op` without
    /// `Input Dims`, and the kernel's outermost operator is the one inside it.
    fn old_kineto(range_cat: &str, call_cat: &str, kernel_cat: &str, dims: &str) -> Trace {
        parse_str(&format!(
            r#"{{"traceEvents":[
            {{"ph":"X","cat":"{range_cat}","name":"model_inference","pid":1,"tid":1,"ts":1,"dur":50,"args":{{"External id":4}}}},
            {{"ph":"X","cat":"cpu_op","name":"aten::conv2d","pid":1,"tid":1,"ts":2,"dur":20,"args":{{"External id":8{dims}}}}},
            {{"ph":"X","cat":"cpu_op","name":"aten::cudnn_convolution","pid":1,"tid":1,"ts":3,"dur":10,"args":{{"External id":11{dims}}}}},
            {{"ph":"X","cat":"{call_cat}","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":4,"dur":1,"args":{{"correlation":10,"external id":11}}}},
            {{"ph":"X","cat":"{kernel_cat}","name":"volta_scudnn_128x128_relu_small_nn_v1","pid":0,"tid":7,"ts":30,"dur":5,"args":{{"device":0,"stream":7,"correlation":10,"external id":11}}}}
        ]}}"#
        ))
        .unwrap()
    }

    #[test]
    fn old_kineto_record_function_ranges_are_annotations() {
        let name = |t: &Trace, i: u32| t.str(t.host_spans[i as usize].name).to_string();
        let kind = |t: &Trace, n: &str| {
            let s = t.host_spans.iter().find(|s| t.str(s.name) == n);
            s.map(|s| s.kind)
        };
        let dims = r#","Input Dims":[[128, 1, 64, 60], [64, 1, 5, 3]]"#;
        let t = old_kineto("cpu_op", "Runtime", "Kernel", dims);
        assert_eq!(kind(&t, "model_inference"), Some(HostKind::Annotation));
        assert_eq!(name(&t, t.index.op_cpu_op[0]), "aten::cudnn_convolution");
        assert_eq!(name(&t, t.index.op_outer_cpu_op[0]), "aten::conv2d");
        // Recorded without shapes, a range and an operator look alike: left as operators.
        let t = old_kineto("cpu_op", "Runtime", "Kernel", "");
        assert_eq!(kind(&t, "model_inference"), Some(HostKind::CpuOp));
        assert_eq!(name(&t, t.index.op_outer_cpu_op[0]), "model_inference");
        // Newer profilers name the range's category themselves: a `cpu_op` stays one.
        let t = old_kineto("cpu_op", "cuda_runtime", "kernel", dims);
        assert_eq!(kind(&t, "model_inference"), Some(HostKind::CpuOp));
        let t = old_kineto("user_annotation", "cuda_runtime", "kernel", dims);
        assert_eq!(kind(&t, "model_inference"), Some(HostKind::Annotation));
        assert_eq!(name(&t, t.index.op_outer_cpu_op[0]), "aten::conv2d");
    }

    #[test]
    fn memcpy_names() {
        assert_eq!(
            parse_memcpy_name("Memcpy HtoD (Pageable -> Device)"),
            (CopyDirection::HtoD, MemKind::Pageable, MemKind::Device)
        );
        assert_eq!(
            parse_memcpy_name("Memcpy DtoH (Device -> Pinned)"),
            (CopyDirection::DtoH, MemKind::Device, MemKind::Pinned)
        );
        assert_eq!(
            parse_memcpy_name("Memcpy HtoD (Host -> Device)"),
            (CopyDirection::HtoD, MemKind::Host, MemKind::Device)
        );
        assert_eq!(
            parse_memcpy_name("Memcpy"),
            (CopyDirection::Unknown, MemKind::Unknown, MemKind::Unknown)
        );
    }

    #[test]
    fn capture_names_threads_and_sees_launch_geometry() {
        let t = parse_str(
            r#"{"traceEvents":[
            {"ph":"M","name":"thread_name","pid":5,"tid":6,"args":{"name":"thread 6 (python3) "}},
            {"ph":"M","name":"thread_name","pid":5,"tid":6,"args":{"name":"thread 6 (renamed)"}},
            {"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7"}},
            {"ph":"M","name":"process_labels","pid":5,"tid":0,"args":"odd"},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":5,"tid":6,"ts":1,"dur":9,"args":{"Input Dims":[[2, 3], [3, 4]]}},
            {"ph":"X","cat":"cpu_op","name":"aten::add","pid":5,"tid":8,"ts":1,"dur":9},
            {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":2,"dur":1,"args":{"device":0}},
            {"ph":"X","cat":"gpu_user_annotation","name":"step","pid":0,"tid":7,"ts":2,"dur":1}
        ]}"#,
        )
        .unwrap();
        let c = &t.meta.capture;
        assert!(c.kernels && !c.launch_geometry && !c.occupancy);
        assert!(c.cpu_ops && c.shapes && !c.python_frames && !c.api_calls);
        assert!(c.startup_hole && c.annotations && !c.no_cpu_data.is_empty());
        assert_eq!(
            c.host_threads,
            vec![
                HostThread {
                    pid: 5,
                    tid: 6,
                    name: Some("thread 6 (python3)".into())
                },
                HostThread {
                    pid: 5,
                    tid: 8,
                    name: None
                }
            ],
            "the first name wins; GPU streams are no host threads"
        );
        assert_eq!(t.stats.skipped, vec![("metadata".to_string(), 4)]);
        let t = parse_str(
            r#"[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":2,"dur":1,"args":{"grid":[1,1,1],"block":[128,1,1],"est. achieved occupancy %":50}}]"#,
        )
        .unwrap();
        assert!(t.meta.capture.launch_geometry && t.meta.capture.occupancy);
    }

    #[test]
    fn a_collective_kernel_keeps_its_message_size() {
        // The scanner's layout and the serde one (string tids) read the same message: the
        // larger of input and output elements times the element size; other kernels none.
        for tid in ["7", r#""7""#] {
            let t = parse_str(&format!(
                r#"[
            {{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllGather_RING_LL","pid":0,"tid":{tid},"ts":2,"dur":1,"args":{{"In msg nelems":100,"Out msg nelems":200,"dtype":"BFloat16","Group size":2}}}},
            {{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32","pid":0,"tid":{tid},"ts":4,"dur":1,"args":{{"In msg nelems":100,"Out msg nelems":100,"dtype":"Float"}}}},
            {{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":{tid},"ts":6,"dur":1,"args":{{"dtype":"Float"}}}},
            {{"ph":"X","cat":"kernel","name":"odd","pid":0,"tid":{tid},"ts":8,"dur":1,"args":{{"In msg nelems":100,"dtype":"Strange"}}}}
        ]"#
            ))
            .unwrap();
            let bytes: Vec<u64> = t.gpu_ops.iter().map(|o| o.bytes).collect();
            assert_eq!(bytes, [400, 400, 0, 0], "tid {tid}");
        }
    }

    #[test]
    fn strides_with_a_zero_are_kept_for_the_bytes_model() {
        // The scanner's layout and the serde one (string tids) keep the same strides.
        for tid in ["6", r#""6""#] {
            let t = parse_str(&format!(
                r#"[
            {{"ph":"X","cat":"cpu_op","name":"aten::gather","pid":5,"tid":{tid},"ts":1,"dur":9,"args":{{"Input Dims":[[512, 1024], [], [16116, 1024]],"Input type":["c10::BFloat16", "Scalar", "long int"],"Input Strides":[[1024, 1], [], [1, 0]]}}}},
            {{"ph":"X","cat":"cpu_op","name":"aten::add","pid":5,"tid":{tid},"ts":20,"dur":9,"args":{{"Input Dims":[[4, 10]],"Input type":["float"],"Input Strides":[[10, 1]]}}}},
            {{"ph":"X","cat":"cpu_op","name":"aten::mul","pid":5,"tid":{tid},"ts":40,"dur":9,"args":{{"Input Dims":[[4, 100]],"Input type":["float"]}}}}
        ]"#
            ))
            .unwrap();
            let by_name = |n: &str| {
                (0..t.host_spans.len() as u32)
                    .find(|&i| t.str(t.host_spans[i as usize].name) == n)
                    .unwrap()
            };
            assert_eq!(
                t.input_strides_of(by_name("aten::gather")),
                Some(vec![vec![1024, 1], vec![], vec![1, 0]])
            );
            // A stride of 10 holds a 0 digit, not a 0 stride; `mul` recorded no strides.
            assert_eq!(t.input_strides_of(by_name("aten::add")), None);
            assert_eq!(t.input_strides_of(by_name("aten::mul")), None);
            assert_eq!(t.strides.len(), 1, "tid {tid}");
        }
    }

    #[test]
    fn a_matrix_products_unaligned_strides_are_kept_and_aligned_ones_not() {
        for tid in ["6", r#""6""#] {
            let t = parse_str(&format!(
                r#"[
            {{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":5,"tid":{tid},"ts":1,"dur":9,"args":{{"Input Dims":[[50257, 8192], [8192, 1024]],"Input type":["c10::BFloat16", "c10::BFloat16"],"Input Strides":[[1, 50257], [1024, 1]]}}}},
            {{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":5,"tid":{tid},"ts":20,"dur":9,"args":{{"Input Dims":[[8192, 1024], [1024, 1024]],"Input type":["c10::BFloat16", "c10::BFloat16"],"Input Strides":[[1024, 1], [1, 1024]]}}}},
            {{"ph":"X","cat":"cpu_op","name":"aten::add","pid":5,"tid":{tid},"ts":40,"dur":9,"args":{{"Input Dims":[[4, 10]],"Input type":["float"],"Input Strides":[[10, 1]]}}}}
        ]"#
            ))
            .unwrap();
            let at = |ts: i64| {
                (0..t.host_spans.len() as u32)
                    .find(|&i| t.host_spans[i as usize].start == ts * 1000)
                    .unwrap()
            };
            // The weight gradient's transposed operand: leading dimension 50257.
            assert_eq!(
                t.input_strides_of(at(1)),
                Some(vec![vec![1, 50257], vec![1024, 1]])
            );
            // Aligned strides, and an elementwise operator's odd ones, are not kept.
            assert_eq!(t.input_strides_of(at(20)), None);
            assert_eq!(t.input_strides_of(at(40)), None);
        }
        assert!(builder::has_unaligned("[[1, 50257], [1024, 1]]"));
        assert!(!builder::has_unaligned("[[1, 1024], [0, 8], []]"));
        assert!(builder::has_unaligned("[[100, 1]]"));
    }

    #[test]
    fn truncated_is_partial_with_warning() {
        let full = r#"{"traceEvents":[
{"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":1,"dur":1,"args":{"device":0}},
{"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"ts":3,"dur":1,"args":{"device":0}},
{"ph":"X","cat":"kernel","name":"c","pid":0,"tid":7,"ts":5,"du"#;
        let t = parse_str(full).unwrap();
        assert_eq!(t.gpu_ops.len(), 2);
        assert!(t.stats.truncated);
        // The loader words the warning; the parser says what it read.
        let i = t.stats.incomplete.as_ref().expect("incomplete");
        assert_eq!(i.events_read, 2);
        assert_eq!(i.file_bytes, full.len() as u64);
        assert_eq!(
            &full[..i.text_bytes_complete as usize].chars().last(),
            &Some('}')
        );
        assert!(
            i.describe()
                .starts_with("incomplete capture: the JSON ends inside traceEvents")
        );
    }

    #[test]
    fn not_a_trace() {
        assert!(matches!(
            parse_str(r#"{"a":1}"#),
            Err(LoadError::NotATrace { .. })
        ));
        assert!(matches!(
            parse_str(r#"[1,2,3]"#),
            Err(LoadError::NotATrace { .. })
        ));
        assert!(matches!(
            parse_str(r#"{"traceEvents":[}"#),
            Err(LoadError::Json { .. })
        ));
    }

    #[test]
    fn unknown_categories_and_odd_values_are_tolerated() {
        let t = parse_str(
            r#"{"schemaVersion":1,"traceEvents":[
            {"ph":"X","cat":"mtia_thing","name":"x","pid":1,"tid":1,"ts":1,"dur":1},
            {"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Host -> Device)","pid":2,"tid":3,"ts":"7","dur":2,"args":{"device":2,"bytes":"64","kind":"HtoD"}},
            {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"grid":"odd","block":[128,1,1]}}
        ],"baseTimeNanoseconds":1000}"#,
        )
        .unwrap();
        assert_eq!(t.gpu_ops.len(), 2);
        let m = t
            .gpu_ops
            .iter()
            .find(|o| o.kind == GpuOpKind::Memcpy)
            .unwrap();
        assert_eq!(
            (m.device, m.bytes, m.direction),
            (2, 64, CopyDirection::HtoD)
        );
        assert_eq!(m.src_kind, MemKind::Host);
        assert_eq!(t.meta.epoch_offset_ns, Some(1000));
        assert_eq!(t.stats.skipped, vec![("mtia_thing".to_string(), 1)]);
    }
}
