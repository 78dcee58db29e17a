//! PyTorch profiler (Kineto) Chrome trace JSON, as written by `torch.profiler` /
//! `export_chrome_trace` / `tensorboard_trace_handler` (<https://github.com/pytorch/kineto>).
//!
//! Handles every generation seen in real files (`../docs/trace-formats.md` of the shared
//! docs): a `{"traceEvents": [...]}` object or a bare top-level array (Jan 2021), 2021 and
//! 2022+ category names, `[memory]` events with or without `cat`, int or string pid/tid,
//! int or float `ts`/`dur` (kept to the ns), `baseTimeNanoseconds`, ROCm memcpy names.
//! Events are deserialized straight into the model with borrowed strings; no JSON tree is built.
//! A file that ends early (a job killed mid-write) yields what was complete, with a warning.

pub mod json_arrays;
pub mod json_members;
pub mod json_scan;
pub mod json_split;
pub mod lenient;

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

/// Where [`parse_input`] reads the trace from.
enum Input<'d, R> {
    /// A stream, read (and inflated) as it goes.
    Stream(R),
    /// The whole input in memory, a counter raised to the end of each chunk handed out, and
    /// what to call with each chunk parsed where it lies.
    Slice(
        &'d [u8],
        Option<&'d std::sync::atomic::AtomicU64>,
        Option<Release<'d>>,
    ),
}

/// The text of a chunk of events handed to a worker.
enum ChunkText<'d> {
    /// Copied out of a stream into a buffer of its own (given back for reuse once parsed).
    Owned(Vec<u8>),
    /// Left in the input held in memory.
    Borrowed(&'d [u8]),
}

/// Bytes read from the input at a time.
const BLOCK: usize = 1 << 20;
/// Events text handed to a worker at a time.
const CHUNK: usize = 4 << 20;

/// A chunk of events parsed on a worker.
struct ChunkOut {
    index: usize,
    /// Offset of the chunk's first byte in the input.
    offset: u64,
    /// The chunk's length in bytes.
    len: usize,
    result: Result<Builder, LoadError>,
}

/// Parses one chunk and returns its buffer for reuse.
fn parse_chunk_keep(
    buf: Vec<u8>,
    line: usize,
    source: &str,
    spare: Spare,
) -> (Result<Builder, LoadError>, Vec<u8>) {
    let mut buf = buf;
    let r = parse_chunk_in(&mut buf, line, source, spare);
    (r, buf)
}

/// Parses a chunk left in the input: the scanner reads it where it lies, checking only the
/// text it keeps is UTF-8 (`json_scan::text_of`); anything else is left to
/// [`parse_chunk_in`] on a copy (the slow path needs the chunk made an array).
fn parse_chunk_borrowed(
    text: &[u8],
    line: usize,
    source: &str,
    spare: Spare,
) -> Result<Builder, LoadError> {
    let mut spare = spare;
    if FAST_SCAN.load(std::sync::atomic::Ordering::Relaxed) {
        let mut b = Builder::recycled(source, spare);
        if scan_events(text, &mut b, true).is_ok() {
            return Ok(b);
        }
        spare = b.into_spare();
    }
    let mut buf = Vec::with_capacity(text.len() + 1);
    buf.extend_from_slice(text);
    parse_chunk_in(&mut buf, line, source, spare)
}

fn parse_chunk_in(
    buf: &mut Vec<u8>,
    line: usize,
    source: &str,
    spare: Spare,
) -> Result<Builder, LoadError> {
    // Make the chunk a JSON array in place: `[` or `,` first, `]` last.
    if let Some(k) = buf.iter().position(|b| !b.is_ascii_whitespace())
        && buf[k] == b','
    {
        buf[k] = b'[';
    }
    buf.push(b']');
    let mut b = Builder::recycled(source, spare);
    // The scanner checks the text it keeps; anything it does not take is read again by
    // serde, which either reads it the slow way or says exactly where it is wrong (for serde,
    // one UTF-8 check over the chunk is much cheaper than one per string).
    let fast = FAST_SCAN.load(std::sync::atomic::Ordering::Relaxed);
    if fast && scan_events(buf, &mut b, false).is_ok() {
        return Ok(b);
    }
    let result = match simdutf8::basic::from_utf8(buf) {
        Ok(text) => {
            if fast {
                SCAN_FALLBACKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            b = Builder::new(source);
            let mut de = serde_json::Deserializer::from_str(text);
            EventsSeed { b: &mut b }
                .deserialize(&mut de)
                .and_then(|_| de.end())
        }
        Err(_) => {
            let mut de = serde_json::Deserializer::from_slice(buf);
            EventsSeed { b: &mut b }
                .deserialize(&mut de)
                .and_then(|_| de.end())
        }
    };
    result.map_err(|e| LoadError::Json {
        path: source.to_string(),
        line: line + e.line().saturating_sub(1),
        column: e.column(),
        msg: strip_position(&e.to_string()),
    })?;
    Ok(b)
}

/// The lists of a parsed chunk, emptied for the next chunk to fill. A chunk's lists are
/// larger than the allocator's mmap threshold: fresh ones would be fresh pages, faulted in
/// and given back again for every 4 MiB of input.
#[derive(Default)]
struct Spare {
    gpu_ops: Vec<GpuOp>,
    host_spans: Vec<HostSpan>,
    memory: Vec<MemorySample>,
    concrete_inputs: Vec<((i64, i64, i64, StrId), StrId)>,
}

/// Merges parsed chunks into one builder in chunk order as they come off the workers, so
/// that the copy runs while the next chunks are parsed and each chunk's lists are reused
/// (memory holds the model and the chunks in flight, never every chunk).
struct Merger {
    queue: std::sync::Mutex<MergeQueue>,
    /// Signalled when chunks have been merged (or the merge has failed), for the workers
    /// waiting for room in the queue.
    merged: std::sync::Condvar,
    /// Touched only by the worker holding [`MergeQueue::merging`].
    into: std::sync::Mutex<Builder>,
}

/// Parsed chunks that may wait for the one before them: a worker that finishes a chunk
/// while this many wait stops until the merge catches up, so that a worker the machine stops
/// for a moment does not let the other pile up parsed chunks (each holds its lists).
const MAX_WAITING: usize = 4;

/// Chunks parsed and waiting for their turn.
struct MergeQueue {
    /// Index of the next chunk to merge.
    next: usize,
    pending: std::collections::BTreeMap<usize, ChunkOut>,
    /// Whether a worker is merging (the others leave their chunks to it).
    merging: bool,
    /// The first chunk, in chunk order, that did not parse: nothing after it is merged.
    failed: Option<ChunkOut>,
    spares: Vec<Spare>,
}

impl Merger {
    fn new(source: &str) -> Self {
        Merger {
            queue: std::sync::Mutex::new(MergeQueue {
                next: 0,
                pending: Default::default(),
                merging: false,
                failed: None,
                spares: Vec::new(),
            }),
            merged: std::sync::Condvar::new(),
            into: std::sync::Mutex::new(Builder::new(source)),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, MergeQueue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Lists for the next chunk, from one merged already when there is one.
    fn spare(&self) -> Spare {
        self.queue().spares.pop().unwrap_or_default()
    }

    /// Takes a parsed chunk; merges it, and the chunks waiting after it, when it is next
    /// and no other worker is merging, calling `merged` with the offset and length of each
    /// (every chunk before it is merged too); returns when at most [`MAX_WAITING`] chunks
    /// wait.
    /// The wait cannot last: the chunk next in line was taken before every waiting one
    /// (chunks are handed out in order), and whoever took it merges it, or leaves it to the
    /// worker merging, on finishing it.
    fn done(&self, out: ChunkOut, mut merged: impl FnMut(u64, usize)) {
        let mut q = self.queue();
        if q.failed.is_some() {
            return;
        }
        q.pending.insert(out.index, out);
        if q.merging {
            self.wait_for_room(q);
            return;
        }
        q.merging = true;
        // The check for the next chunk and the end of merging happen under one lock, so a
        // chunk put in meanwhile is never left behind.
        while let Some(out) = {
            let next = q.next;
            q.pending.remove(&next)
        } {
            q.next += 1;
            match out.result {
                Ok(mut c) => {
                    drop(q);
                    merge_chunk(
                        &mut self
                            .into
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                        &mut c,
                    );
                    let spare = c.into_spare();
                    merged(out.offset, out.len);
                    q = self.queue();
                    q.spares.push(spare);
                    self.merged.notify_all();
                }
                Err(e) => {
                    q.failed = Some(ChunkOut {
                        result: Err(e),
                        ..out
                    });
                    q.pending.clear();
                    self.merged.notify_all();
                    break;
                }
            }
        }
        q.merging = false;
        self.wait_for_room(q);
    }

    /// Waits until at most [`MAX_WAITING`] parsed chunks wait for their turn.
    fn wait_for_room(&self, mut q: std::sync::MutexGuard<'_, MergeQueue>) {
        while q.pending.len() > MAX_WAITING && q.failed.is_none() {
            q = self
                .merged
                .wait(q)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// Appends the events of `c` to `into`, string and argument ids rewritten to `into`'s, and
/// adds its counters; `c`'s lists are left empty. Into an empty builder the lists are moved,
/// not copied (the ids are the same).
fn merge_chunk(into: &mut Builder, c: &mut Builder) {
    let t = &mut into.trace;
    if t.strings.len() <= 1
        && t.args.is_empty()
        && t.gpu_ops.is_empty()
        && t.host_spans.is_empty()
        && t.memory.is_empty()
        && t.concrete_inputs.is_empty()
    {
        std::mem::swap(&mut t.strings, &mut c.trace.strings);
        std::mem::swap(&mut t.args, &mut c.trace.args);
        std::mem::swap(&mut t.gpu_ops, &mut c.trace.gpu_ops);
        std::mem::swap(&mut t.host_spans, &mut c.trace.host_spans);
        std::mem::swap(&mut t.memory, &mut c.trace.memory);
        std::mem::swap(&mut t.concrete_inputs, &mut c.trace.concrete_inputs);
        if t.strings.is_empty() {
            t.strings.intern("");
        }
    } else {
        // String ids are assigned in chunk order, so they do not depend on which worker
        // finished first.
        let map: Vec<StrId> = (0..c.trace.strings.len() as u32)
            .map(|id| t.strings.intern(c.trace.strings.get(id)))
            .collect();
        let m = |id: StrId| map.get(id as usize).copied().unwrap_or(0);
        // The same for the operators' argument lists, their strings rewritten first.
        let args_map: Vec<u32> = (0..c.trace.args.len() as u32)
            .map(|id| {
                let a = c.trace.args.get(id);
                t.args.intern(OpArgs {
                    input_dims: m(a.input_dims),
                    input_types: m(a.input_types),
                    call_stack: m(a.call_stack),
                })
            })
            .collect();
        t.gpu_ops.extend(c.trace.gpu_ops.drain(..).map(|mut op| {
            op.name = m(op.name);
            op
        }));
        t.host_spans
            .extend(c.trace.host_spans.drain(..).map(|mut sp| {
                sp.name = m(sp.name);
                sp.args = args_map.get(sp.args as usize).copied().unwrap_or(0);
                sp
            }));
        t.memory.append(&mut c.trace.memory);
        t.concrete_inputs.extend(
            c.trace
                .concrete_inputs
                .drain(..)
                .map(|((pid, tid, start, name), v)| ((pid, tid, start, m(name)), m(v))),
        );
    }
    into.absorb(c);
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
/// events say which (TensorFlow's timeline: the `Op` category).
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
        "{tool}, not a PyTorch profiler trace: none of its {} events is of a category the PyTorch profiler writes (kernel, cpu_op, cuda_runtime, gpu_memcpy ...); what it holds: {}. tracehound reads PyTorch profiler (Kineto) traces, Nsight Systems SQLite exports and nvidia-smi logs",
        t.stats.events_total,
        cats.join(", ")
    ))
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

#[derive(Deserialize, Default)]
struct RawArgs<'a> {
    #[serde(default)]
    correlation: Num,
    #[serde(default, rename = "External id", alias = "external id")]
    external_id: Num,
    #[serde(default)]
    device: Num,
    #[serde(default)]
    stream: Num,
    #[serde(default)]
    bytes: Num,
    #[serde(default)]
    grid: Option<Dims>,
    #[serde(default)]
    block: Option<Dims>,
    #[serde(default, rename = "registers per thread")]
    registers: Num,
    #[serde(default, rename = "shared memory")]
    shared_mem: Num,
    #[serde(default, rename = "est. achieved occupancy %")]
    occupancy: Num,
    #[serde(default, rename = "Bytes")]
    mem_bytes: Num,
    #[serde(default, rename = "Total Allocated")]
    total_allocated: Num,
    #[serde(default, rename = "Total Reserved")]
    total_reserved: Num,
    #[serde(default, rename = "Device Type")]
    device_type: Num,
    #[serde(default, rename = "Device Id")]
    device_id: Num,
    #[serde(default, rename = "Addr")]
    addr: Num,
    #[serde(
        borrow,
        default,
        rename = "Input Dims",
        alias = "Input dims",
        deserialize_with = "raw_text"
    )]
    input_dims: Option<&'a str>,
    #[serde(borrow, default, rename = "Input type", deserialize_with = "raw_text")]
    input_type: Option<&'a str>,
    #[serde(
        borrow,
        default,
        rename = "Concrete Inputs",
        deserialize_with = "raw_text"
    )]
    concrete: Option<&'a str>,
    #[serde(borrow, default, rename = "Call stack")]
    call_stack: LStr<'a>,
    #[serde(borrow, default)]
    kind: LStr<'a>,
    /// The name a metadata event gives (`thread_name`: the thread's).
    #[serde(borrow, default)]
    name: LStr<'a>,
}

/// The text of a value as written, `None` for `null` (timestamps and ids keep their digits).
fn raw_text<'de, D: de::Deserializer<'de>>(d: D) -> Result<Option<&'de str>, D::Error> {
    Option::<&'de RawValue>::deserialize(d).map(|v| v.map(RawValue::get))
}

#[derive(Deserialize, Default)]
struct RawEvent<'a> {
    #[serde(borrow, default)]
    ph: LStr<'a>,
    #[serde(borrow, default)]
    cat: LStr<'a>,
    #[serde(borrow, default)]
    name: LStr<'a>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    ts: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    dur: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pid: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    tid: Option<&'a str>,
    #[serde(borrow, default)]
    args: Option<RawArgs<'a>>,
}

#[derive(Deserialize, Default)]
struct RawDeviceProps<'a> {
    #[serde(default)]
    id: Num,
    #[serde(borrow, default)]
    name: LStr<'a>,
    #[serde(default, rename = "totalGlobalMem")]
    total_mem: Num,
    #[serde(default, rename = "computeMajor")]
    major: Num,
    #[serde(default, rename = "computeMinor")]
    minor: Num,
    #[serde(default, rename = "numSms")]
    sms: Num,
}

#[derive(Deserialize, Default)]
struct RawDistributed {
    #[serde(default)]
    rank: Num,
    #[serde(default)]
    world_size: Num,
}

/// What a Kineto category means for the model.
#[derive(Clone, Copy)]
enum Cat {
    Gpu(GpuOpKind),
    Host(HostKind),
    Memory,
    Skip,
}

fn category(cat: &str, name: &str, ph: &str) -> Cat {
    match cat {
        "kernel" | "Kernel" => Cat::Gpu(GpuOpKind::Kernel),
        "gpu_memcpy" | "Memcpy" => Cat::Gpu(GpuOpKind::Memcpy),
        "gpu_memset" | "Memset" => Cat::Gpu(GpuOpKind::Memset),
        "cuda_sync" => Cat::Gpu(GpuOpKind::Sync),
        "cpu_op" | "Operator" => Cat::Host(HostKind::CpuOp),
        "cuda_runtime" | "Runtime" => Cat::Host(HostKind::Runtime),
        "cuda_driver" => Cat::Host(HostKind::Driver),
        "python_function" => Cat::Host(HostKind::Python),
        "user_annotation" => Cat::Host(HostKind::Annotation),
        "gpu_user_annotation" => Cat::Host(HostKind::GpuAnnotation),
        _ if ph == "i" && (name == "[memory]" || name == "[OutOfMemory]") => Cat::Memory,
        _ => Cat::Skip,
    }
}

/// Parses Kineto's name for a copy, `Memcpy HtoD (Pageable -> Device)` (CUPTI's memory kinds;
/// ROCm writes `Host`), into (direction, source kind, destination kind).
pub fn parse_memcpy_name(name: &str) -> (CopyDirection, MemKind, MemKind) {
    let rest = name.strip_prefix("Memcpy ").unwrap_or(name);
    let (dir, kinds) = match rest.split_once(' ') {
        Some((d, k)) => (d, k),
        None => (rest, ""),
    };
    let direction = direction_from_label(dir);
    let kinds = kinds.trim().trim_start_matches('(').trim_end_matches(')');
    let (src, dst) = match kinds.split_once("->") {
        Some((s, d)) => (mem_kind(s.trim()), mem_kind(d.trim())),
        None => (MemKind::Unknown, MemKind::Unknown),
    };
    (direction, src, dst)
}

/// Direction from a label such as `HtoD` (in the copy's name, or ROCm's `args.kind`).
fn direction_from_label(dir: &str) -> CopyDirection {
    match dir {
        "HtoD" => CopyDirection::HtoD,
        "DtoH" => CopyDirection::DtoH,
        "DtoD" => CopyDirection::DtoD,
        "HtoH" => CopyDirection::HtoH,
        "PtoP" => CopyDirection::PtoP,
        _ => CopyDirection::Unknown,
    }
}

fn mem_kind(s: &str) -> MemKind {
    match s {
        "Pageable" => MemKind::Pageable,
        "Pinned" => MemKind::Pinned,
        "Device" => MemKind::Device,
        "Managed" => MemKind::Managed,
        "Host" => MemKind::Host,
        _ => MemKind::Unknown,
    }
}

struct Builder {
    trace: Trace,
    events: u64,
    with_ph: u64,
    saw_events_container: bool,
    skipped: FxHashMap<String, u64>,
    base_time_ns: Option<i64>,
    schema_version: Option<i64>,
    cupti_version: Option<i64>,
    /// Events whose `dur` is no readable number, kept at zero length.
    bad_dur: u64,
    legacy_categories: bool,
    /// Kernels with a grid or block written.
    with_geometry: u64,
    /// (pid, tid, name) of the `thread_name` metadata events, in file order.
    thread_names: Vec<(i64, i64, String)>,
    /// Per string id of an operator name: whether its `Concrete Inputs` are kept (1), not
    /// (2), or not yet asked (0); asked once per name, not once per operator.
    keeps_concrete: Vec<u8>,
    /// Texts interned lately (names, shapes, types), looked up before the string table.
    recent: RecentTexts,
}

/// Slots of [`RecentTexts`] (a power of two).
const RECENT_TEXTS: usize = 1 << 10;

/// A direct-mapped table of recently interned texts: the slot of a text is a hash of its
/// length and its first and last eight bytes, and holds the length and id of the last text
/// interned there. A hit is confirmed by comparing the text with the one behind the id, so a
/// table left from other strings can only miss; a miss interns as before and takes the slot.
/// An event's name, shapes and types come from a few hundred texts: this spares hashing each
/// of them in full and probing the table of all strings, every event.
struct RecentTexts {
    slots: Vec<(u32, StrId)>,
}

impl Default for RecentTexts {
    fn default() -> Self {
        RecentTexts {
            slots: vec![(u32::MAX, 0); RECENT_TEXTS],
        }
    }
}

impl RecentTexts {
    #[inline(always)]
    fn slot(s: &[u8]) -> usize {
        let word = |b: &[u8]| b.iter().rev().fold(0u64, |w, &c| w << 8 | u64::from(c));
        let (head, tail) = match (s.first_chunk::<8>(), s.last_chunk::<8>()) {
            (Some(h), Some(t)) => (u64::from_le_bytes(*h), u64::from_le_bytes(*t)),
            _ => (word(s), 0),
        };
        let h = (head ^ tail.rotate_left(29) ^ s.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - RECENT_TEXTS.trailing_zeros())) as usize
    }

    /// The id of `s` in `strings`, interned if it is new.
    #[inline(always)]
    fn intern(&mut self, strings: &mut Strings, s: &str) -> StrId {
        let k = Self::slot(s.as_bytes());
        // The id is checked to be in the table: `get` reads an unknown id as "".
        if let Some(&(n, id)) = self.slots.get(k)
            && n as usize == s.len()
            && (id as usize) < strings.len()
            && strings.get(id) == s
        {
            return id;
        }
        let id = strings.intern(s);
        if let Some(slot) = self.slots.get_mut(k) {
            *slot = (u32::try_from(s.len()).unwrap_or(u32::MAX), id);
        }
        id
    }
}

impl Builder {
    fn new(source: &str) -> Self {
        let mut trace = Trace {
            source: source.to_string(),
            ..Default::default()
        };
        trace.meta.format = Some(&FORMAT);
        trace.strings.intern("");
        Builder {
            trace,
            events: 0,
            with_ph: 0,
            saw_events_container: false,
            skipped: FxHashMap::default(),
            base_time_ns: None,
            schema_version: None,
            cupti_version: None,
            bad_dur: 0,
            legacy_categories: false,
            with_geometry: 0,
            thread_names: Vec::new(),
            keeps_concrete: Vec::new(),
            recent: RecentTexts::default(),
        }
    }

    /// Whether the operator named `name` (string id `id`) keeps its `Concrete Inputs`:
    /// stride, padding and masks of the operators whose work depends on them. Every
    /// operator records its scalars, most of them of no use here.
    fn keeps_concrete(&mut self, id: StrId, name: &str) -> bool {
        let i = id as usize;
        if self.keeps_concrete.len() <= i {
            self.keeps_concrete.resize(i + 1, 0);
        }
        if self.keeps_concrete[i] == 0 {
            let keep = name.contains("convolution") || name.contains("attention");
            self.keeps_concrete[i] = if keep { 1 } else { 2 };
        }
        self.keeps_concrete[i] == 1
    }

    fn skip(&mut self, what: &str) {
        // Most skipped events are flows: count without allocating a key each time.
        match self.skipped.get_mut(what) {
            Some(n) => *n += 1,
            None => {
                self.skipped.insert(what.to_string(), 1);
            }
        }
    }

    /// An id from a pid/tid value: ints as they are, numeric strings parsed, other strings
    /// interned above 2^40 so they never collide with OS ids.
    #[inline(always)]
    fn id_of(&mut self, v: Option<&str>) -> i64 {
        let Some(t) = v else { return 0 };
        // Ids are a few plain digits, every event twice: read without `parse`'s generality.
        match plain_id(t.as_bytes()) {
            Some(i) => i,
            None => Self::odd_id(t),
        }
    }

    /// [`Builder::id_of`] of a text that is not plain digits.
    #[cold]
    #[inline(never)]
    fn odd_id(t: &str) -> i64 {
        if let Ok(i) = t.parse::<i64>() {
            return i;
        }
        let s: String = serde_json::from_str::<String>(t).unwrap_or_else(|_| t.to_string());
        let s = s.trim();
        if let Ok(i) = s.parse::<i64>() {
            return i;
        }
        // Chunks are parsed apart: the id must depend on the text alone (FNV-1a, 39 bits).
        let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        (1i64 << 40) | (h & ((1 << 39) - 1)) as i64
    }

    /// Adds the counters and thread names of a chunk merged into this builder (its events
    /// are moved by [`merge_chunk`]).
    fn absorb(&mut self, c: &mut Builder) {
        self.events += c.events;
        self.bad_dur += c.bad_dur;
        self.with_ph += c.with_ph;
        self.legacy_categories |= c.legacy_categories;
        self.with_geometry += c.with_geometry;
        self.thread_names.append(&mut c.thread_names);
        for (k, v) in c.skipped.drain() {
            *self.skipped.entry(k).or_default() += v;
        }
    }

    /// A builder for the next chunk, filling the lists of one already merged.
    fn recycled(source: &str, spare: Spare) -> Self {
        let mut b = Builder::new(source);
        let t = &mut b.trace;
        (t.gpu_ops, t.host_spans, t.memory, t.concrete_inputs) = (
            spare.gpu_ops,
            spare.host_spans,
            spare.memory,
            spare.concrete_inputs,
        );
        t.gpu_ops.clear();
        t.host_spans.clear();
        t.memory.clear();
        t.concrete_inputs.clear();
        b
    }

    /// The lists of a builder whose events are merged, for another chunk.
    fn into_spare(self) -> Spare {
        let t = self.trace;
        Spare {
            gpu_ops: t.gpu_ops,
            host_spans: t.host_spans,
            memory: t.memory,
            concrete_inputs: t.concrete_inputs,
        }
    }

    fn add(&mut self, ev: &RawEvent<'_>) {
        self.events += 1;
        let ph = ev.ph.as_str();
        if ph.is_empty() {
            self.skip(SKIP_NO_PH);
            return;
        }
        self.with_ph += 1;
        let cat_s = ev.cat.as_str();
        let name = ev.name.as_str();
        let kind = category(cat_s, name, ph);
        if matches!(
            cat_s,
            "Kernel" | "Runtime" | "Operator" | "Memcpy" | "Memset"
        ) {
            self.legacy_categories = true;
        }
        match (kind, ph) {
            (Cat::Memory, _) => self.add_memory(ev),
            (Cat::Gpu(k), "X") => self.add_gpu(k, ev),
            (Cat::Host(k), "X") => self.add_host(k, ev),
            (_, "M") => {
                if name == "thread_name"
                    && let Some(a) = &ev.args
                {
                    let n = a.name.as_str().trim().to_string();
                    let (pid, tid) = (self.id_of(ev.pid), self.id_of(ev.tid));
                    self.thread_names.push((pid, tid, n));
                }
                self.skip(SKIP_METADATA);
            }
            _ => {
                let what = if ph == "X" || ph == "i" {
                    if cat_s.is_empty() { SKIP_NO_CAT } else { cat_s }
                } else {
                    match ph {
                        "s" | "f" | "t" => SKIP_FLOW,
                        _ => SKIP_OTHER_PH,
                    }
                };
                self.skip(what);
            }
        }
    }

    fn times(&mut self, ev: &RawEvent<'_>) -> Option<(i64, i64)> {
        let ts = ev.ts.and_then(us_text_to_ns);
        let Some(ts) = ts else {
            self.skip("missing ts");
            return None;
        };
        // A negative duration is kept as written: `Trace::finish` reads it as zero length and
        // says how many there were. One that is no number (`1e400`, a string) is zero length,
        // counted here.
        let dur = match ev.dur {
            None => 0,
            Some(d) => us_text_to_ns(d).unwrap_or_else(|| {
                self.bad_dur += 1;
                0
            }),
        };
        Some((ts, ts.saturating_add(dur)))
    }

    fn add_gpu(&mut self, kind: GpuOpKind, ev: &RawEvent<'_>) {
        let Some((start, end)) = self.times(ev) else {
            return;
        };
        let empty = RawArgs::default();
        let a = ev.args.as_ref().unwrap_or(&empty);
        let pid = self.id_of(ev.pid);
        let device = a.device.i64().unwrap_or(pid) as i32;
        let stream = match a.stream.i64() {
            Some(s) => s,
            None => {
                let t = ev.tid.unwrap_or("0");
                let digits: String = t.chars().filter(|c| c.is_ascii_digit()).collect();
                digits.parse().unwrap_or(0)
            }
        };
        let name_s = ev.name.as_str();
        let name = self.recent.intern(&mut self.trace.strings, name_s);
        let (mut direction, mut src_kind, mut dst_kind) =
            (CopyDirection::Unknown, MemKind::Unknown, MemKind::Unknown);
        if kind == GpuOpKind::Memcpy {
            (direction, src_kind, dst_kind) = parse_memcpy_name(name_s);
            if direction == CopyDirection::Unknown {
                // ROCm puts the direction in args.kind.
                direction = direction_from_label(a.kind.as_str());
            }
        }
        let geometry = a.grid.is_some() || a.block.is_some();
        if kind == GpuOpKind::Kernel && geometry {
            self.with_geometry += 1;
        }
        let kernel = (kind == GpuOpKind::Kernel).then(|| KernelInfo {
            grid: a.grid.unwrap_or_default().0,
            block: a.block.unwrap_or_default().0,
            registers: a.registers.i64().unwrap_or(0).clamp(0, u16::MAX as i64) as u16,
            shared_mem: a.shared_mem.i64().unwrap_or(0).clamp(0, u32::MAX as i64) as u32,
            occupancy_pct: a.occupancy.f64().map(|v| v as f32),
            geometry,
        });
        self.trace.gpu_ops.push(GpuOp {
            kind,
            device,
            stream,
            start,
            end,
            correlation: a.correlation.u64().unwrap_or(0),
            external_id: a.external_id.u64().unwrap_or(0),
            name,
            bytes: a.bytes.u64().unwrap_or(0),
            direction,
            src_kind,
            dst_kind,
            kernel,
        });
    }

    fn add_host(&mut self, kind: HostKind, ev: &RawEvent<'_>) {
        let Some((start, end)) = self.times(ev) else {
            return;
        };
        let empty = RawArgs::default();
        let a = ev.args.as_ref().unwrap_or(&empty);
        let pid = self.id_of(ev.pid);
        let tid = self.id_of(ev.tid);
        let name = self
            .recent
            .intern(&mut self.trace.strings, ev.name.as_str());
        let args = OpArgs {
            input_dims: a
                .input_dims
                .map_or(0, |v| self.recent.intern(&mut self.trace.strings, v)),
            input_types: a
                .input_type
                .map_or(0, |v| self.recent.intern(&mut self.trace.strings, v)),
            call_stack: match &a.call_stack.0 {
                Some(s) if !s.is_empty() => self.trace.strings.intern(s),
                _ => 0,
            },
        };
        let args = self.trace.args.intern(args);
        if let Some(c) = a.concrete
            && kind == HostKind::CpuOp
            && self.keeps_concrete(name, ev.name.as_str())
        {
            let c = self.trace.strings.intern(c);
            self.trace
                .concrete_inputs
                .push(((pid, tid, start, name), c));
        }
        self.trace.host_spans.push(HostSpan {
            kind,
            pid,
            tid,
            start,
            end,
            name,
            correlation: a.correlation.u64().unwrap_or(0),
            external_id: a.external_id.u64().unwrap_or(0),
            args,
            depth: 0,
            parent: NONE,
        });
    }

    fn add_memory(&mut self, ev: &RawEvent<'_>) {
        let Some((ts, _)) = self.times(ev) else {
            return;
        };
        let empty = RawArgs::default();
        let a = ev.args.as_ref().unwrap_or(&empty);
        // Device Type 1 is CUDA (Device Id = GPU index); 0 is CPU memory.
        let device = match a.device_type.i64() {
            Some(0) => -1,
            _ => a.device_id.i64().unwrap_or(-1) as i32,
        };
        self.trace.memory.push(MemorySample {
            ts,
            device,
            addr: a.addr.u64().unwrap_or(0),
            bytes: a.mem_bytes.i64().unwrap_or(0),
            total_allocated: a.total_allocated.i64(),
            total_reserved: a.total_reserved.i64(),
            oom: ev.name.as_str() == "[OutOfMemory]",
        });
    }

    fn finish(mut self) -> Parsed {
        let mut skipped: Vec<(String, u64)> = self.skipped.into_iter().collect();
        skipped.sort();
        self.trace.stats.events_total = self.events;
        if self.bad_dur > 0 {
            self.trace.warnings.push(format!(
                "{} events have a duration that is no readable number: read as zero length",
                self.bad_dur
            ));
        }
        self.trace.stats.skipped = skipped;
        self.trace.meta.epoch_offset_ns = Some(self.base_time_ns.unwrap_or(0));
        let mut v = Vec::new();
        match self.schema_version {
            Some(s) => v.push(format!("schemaVersion {s}")),
            None => v.push("no schemaVersion".into()),
        }
        if let Some(c) = self.cupti_version {
            v.push(format!("CUPTI {c}"));
        }
        if self.legacy_categories {
            v.push("2021 category names".into());
        }
        if self.base_time_ns.is_some() {
            v.push("baseTimeNanoseconds".into());
        }
        self.trace.meta.format_version = v.join(", ");
        // CUDA's versioned entry points (`cudaGetDeviceProperties_v2`, `cuMemAlloc_v2`): the
        // model names the API they call.
        self.trace.name_api_calls();
        if self.events == 0 {
            self.trace
                .warnings
                .push("the trace holds no events".to_string());
        }
        let geometry = self.with_geometry > 0;
        let thread_names = self.thread_names;
        Parsed {
            trace: self.trace,
            declare: Box::new(move |trace, capture| {
                match_the_listed_gpu(trace);
                capture.launch_geometry = geometry;
                capture.name_threads(
                    thread_names
                        .iter()
                        .map(|(pid, tid, n)| (*pid, *tid, n.as_str())),
                );
                // Kineto starts its collectors as the first profiled step begins.
                capture.startup_hole = true;
                capture.no_cpu_data = "the trace has no CPU operators: profile with ProfilerActivity.CPU and with_stack=True".into();
                capture.pytorch_profiler = true;
            }),
        }
    }
}

/// The value of an id of 1 to 18 plain digits.
#[inline(always)]
fn plain_id(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 18 {
        return None;
    }
    let mut v = 0i64;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + i64::from(d);
    }
    Some(v)
}

/// ROCm's traces list the one visible GPU by its logical id (0) in `deviceProperties` but
/// tag its work with the physical id (9): one listed GPU and work on one other device are
/// the same GPU. Its allocator events, which carry the logical id, follow it.
fn match_the_listed_gpu(t: &mut Trace) {
    let used = t.devices();
    let ([g], [d]) = (t.meta.gpus.as_mut_slice(), used.as_slice()) else {
        return;
    };
    if g.id == *d {
        return;
    }
    let (listed, d) = (g.id, *d);
    g.id = d;
    for m in t.memory.iter_mut().filter(|m| m.device == listed) {
        m.device = d;
    }
    t.stats.notes.push(format!(
        "deviceProperties lists one GPU as {listed} and its work runs on device {d} (ROCm's logical and physical ids): read as one GPU, {d}"
    ));
}

/// Whether chunks are read with the [`json_scan`] fast path (the default) before
/// serde. Tests turn it off to compare both readings of the same files.
#[doc(hidden)]
pub static FAST_SCAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Chunks the scanner handed to serde (a test's window into the fast path's coverage).
#[doc(hidden)]
pub static SCAN_FALLBACKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Reads a chunk (`[event, ...]`) with the scanner into `b`. A `bare` chunk is one as the
/// splitter cuts it, read where it lies: it opens with `[` or with the `,` after the previous
/// chunk, and its end closes the array (it reads as the array the chunk would be made into).
///
/// The array, each event and its `args` are read by loops that keep the position in a
/// local (a register) rather than behind the scanner's `&mut`; strings without escapes and
/// plain numbers are taken in place, and only the uncommon values go through [`Scan`].
fn scan_events(text: &[u8], b: &mut Builder, bare: bool) -> Scanned<()> {
    // One event struct read into again and again: returned by value it was copied twice per
    // event (it is some 500 bytes, more than the event's text).
    let mut ev = RawEvent::default();
    let mut shapes = Shapes::default();
    let mut p = skip_ws(text, 0);
    match text.get(p) {
        Some(b'[') => {}
        Some(b',') if bare => {}
        _ => return Err(Bail),
    }
    p = skip_ws(text, p + 1);
    let empty = if bare {
        p == text.len()
    } else {
        text.get(p) == Some(&b']')
    };
    if empty {
        p += usize::from(!bare);
    } else {
        loop {
            if text.get(p) == Some(&b'{') {
                p = scan_event(text, p, &mut ev, &mut shapes)?;
                b.add(&ev);
            } else {
                let mut s = Scan::at(text, p);
                s.skip_value()?;
                p = s.pos();
                b.events += 1;
                b.skip("not an object");
            }
            p = skip_ws(text, p);
            match text.get(p) {
                Some(b',') => p = skip_ws(text, p + 1),
                Some(b']') if !bare => {
                    p += 1;
                    break;
                }
                None if bare => break,
                _ => return Err(Bail),
            }
        }
    }
    if skip_ws(text, p) == text.len() {
        Ok(())
    } else {
        Err(Bail)
    }
}

/// Marks a field as read; a second occurrence bails (serde rejects duplicate fields).
#[inline(always)]
fn once(seen: &mut u32, bit: u32) -> Scanned<()> {
    if *seen & bit != 0 {
        return Err(Bail);
    }
    *seen |= bit;
    Ok(())
}

/// A lenient string at `p`: one without escapes is borrowed in place.
#[inline(always)]
fn lstr_at<'a>(text: &'a [u8], p: usize) -> Scanned<(LStr<'a>, usize)> {
    if text.get(p) == Some(&b'"')
        && let Some(end) = plain_string_end(text, p)
    {
        // SAFETY: `plain_string_end` stops at the first byte that is not ASCII, so the
        // string's text before its closing quote at `end` is ASCII.
        let s = unsafe { ascii_text(text, p + 1, end) };
        return Ok((LStr(Some(std::borrow::Cow::Borrowed(s))), end + 1));
    }
    let mut s = Scan::at(text, p);
    let v = s.lstr()?;
    Ok((v, s.pos()))
}

/// The raw text of the value at `p`, `None` for `null`: numbers are taken in place.
#[inline(always)]
fn raw_at(text: &[u8], p: usize) -> Scanned<(Option<&str>, usize)> {
    if let Some(b'-' | b'0'..=b'9') = text.get(p) {
        let end = number_end(text, p);
        // SAFETY: a number's bytes are ASCII (`number_end`).
        return Ok((Some(unsafe { ascii_text(text, p, end) }), end));
    }
    let mut s = Scan::at(text, p);
    let v = s.raw()?;
    Ok((v, s.pos()))
}

/// [`raw_at`], arrays looked up in `arrays` first.
#[inline(always)]
fn array_or_raw_at<'a>(
    text: &'a [u8],
    p: usize,
    arrays: &mut Arrays,
) -> Scanned<(Option<&'a str>, usize)> {
    if text.get(p) == Some(&b'[') {
        let (v, end) = arrays.take(text, p)?;
        return Ok((Some(v), end));
    }
    raw_at(text, p)
}

/// [`skip_at`], arrays looked up in `arrays` first.
#[inline(always)]
fn array_or_skip_at(text: &[u8], p: usize, arrays: &mut Arrays) -> Scanned<usize> {
    if text.get(p) == Some(&b'[') {
        return Ok(arrays.take(text, p)?.1);
    }
    skip_at(text, p)
}

/// Skips the value at `p`.
#[inline(always)]
fn skip_at(text: &[u8], p: usize) -> Scanned<usize> {
    if let Some(b'-' | b'0'..=b'9') = text.get(p) {
        return Ok(number_end(text, p));
    }
    let mut s = Scan::at(text, p);
    s.skip_value()?;
    Ok(s.pos())
}

/// Runs a [`Scan`] reader on the value at `p`.
#[inline(always)]
fn with_scan<'a, T>(
    text: &'a [u8],
    p: usize,
    read: impl FnOnce(&mut Scan<'a>) -> Scanned<T>,
) -> Scanned<(T, usize)> {
    let mut s = Scan::at(text, p);
    let v = read(&mut s)?;
    Ok((v, s.pos()))
}

/// The member loop of the object whose `{` is at `$p`, returning from the enclosing
/// function with the position after its `}`: for each member, `$arm` is its key's number
/// (`$arm_of`) and `$p` the position of its value, and `$read` (a `match` on the number)
/// leaves `$p` after the value. The separators and key order are remembered in `$members`
/// ([`Members`]). A macro, not a function taking a closure: on the hot path the closure cost
/// 2% more instructions (the 121 MB trace's `info`: 1.673 G against 1.702 G).
macro_rules! members {
    ($text:ident, $p:ident, $members:expr, $arm_of:path, $arm:ident => $read:block) => {{
        let members: &mut Members = $members;
        let mut at = Cursor::start();
        let mut $p = $p;
        loop {
            let $arm = match members.next($text, $p, &mut at, $arm_of)? {
                Step::Member { arm, value } => {
                    $p = value;
                    arm
                }
                Step::End(end) => return Ok(end),
            };
            $read
        }
    }};
}

/// Numbers keys for the scanner's `match`es: a module of constants, 1 up in the order given
/// (0, `OTHER`, for any other key), and the function from a key's text to its number, from
/// one list, so the two cannot drift apart.
macro_rules! key_numbers {
    ($(#[$doc:meta])* mod $module:ident; $(#[$fdoc:meta])* fn $func:ident;
     $($name:ident = $($key:literal)|+,)*) => {
        $(#[$doc])*
        mod $module {
            pub const OTHER: u8 = 0;
            key_numbers!(@count 1u8; $($name)*);
        }
        $(#[$fdoc])*
        fn $func(key: &str) -> u8 {
            match key {
                $($($key)|+ => $module::$name,)*
                _ => $module::OTHER,
            }
        }
    };
    (@count $n:expr; $first:ident $($rest:ident)*) => {
        pub const $first: u8 = $n;
        key_numbers!(@count $n + 1; $($rest)*);
    };
    (@count $n:expr;) => {};
}

key_numbers! {
    /// The number of each event key the scanner reads ([`scan_event`]'s arms).
    mod ev_arm;
    /// [`ev_arm`]'s number of an event key.
    fn event_arm;
    PH = "ph",
    CAT = "cat",
    NAME = "name",
    TS = "ts",
    DUR = "dur",
    PID = "pid",
    TID = "tid",
    ARGS = "args",
}

key_numbers! {
    /// The number of each `args` key the scanner reads ([`scan_args`]' arms).
    mod args_arm;
    /// [`args_arm`]'s number of an `args` key.
    fn args_arm;
    CORRELATION = "correlation",
    EXTERNAL_ID = "External id" | "external id",
    DEVICE = "device",
    STREAM = "stream",
    BYTES = "bytes",
    GRID = "grid",
    BLOCK = "block",
    REGISTERS_PER_THREAD = "registers per thread",
    SHARED_MEMORY = "shared memory",
    EST_ACHIEVED_OCCUPANCY = "est. achieved occupancy %",
    MEM_BYTES = "Bytes",
    TOTAL_ALLOCATED = "Total Allocated",
    TOTAL_RESERVED = "Total Reserved",
    DEVICE_TYPE = "Device Type",
    DEVICE_ID = "Device Id",
    ADDR = "Addr",
    INPUT_DIMS = "Input Dims" | "Input dims",
    INPUT_TYPE = "Input type",
    CALL_STACK = "Call stack",
    KIND = "kind",
    CONCRETE_INPUTS = "Concrete Inputs",
    NAME = "name",
}

/// What the scanner remembers of the events' and their args' shapes ([`Members`]).
#[derive(Default)]
struct Shapes {
    event: Members,
    args: Members,
    /// The arrays of args read before ([`Arrays`]).
    arrays: Arrays,
}

/// Reads one event object, as [`RawEvent`]'s serde derive reads it, from `p` (its `{`);
/// returns the position after its `}`.
fn scan_event<'a>(
    text: &'a [u8],
    p: usize,
    ev: &mut RawEvent<'a>,
    shapes: &mut Shapes,
) -> Scanned<usize> {
    // Every field cleared (the pattern names them all, so a new field cannot be missed);
    // `args` is filled in place when the event has them.
    let RawEvent {
        ph,
        cat,
        name,
        ts,
        dur,
        pid,
        tid,
        args,
    } = ev;
    (*ph, *cat, *name) = (LStr::default(), LStr::default(), LStr::default());
    (*ts, *dur, *pid, *tid) = (None, None, None, None);
    *args = None;
    let mut seen = 0u32;
    members!(text, p, &mut shapes.event, event_arm, arm => {
        match arm {
            ev_arm::PH => {
                once(&mut seen, 1)?;
                (ev.ph, p) = lstr_at(text, p)?;
                // Flows are skipped whatever else they hold (see Builder::add): a fifth of a
                // torch trace's events need no more reading. Metadata is read for the
                // threads' names.
                if matches!(ev.ph.as_str(), "s" | "f" | "t") {
                    let mut s = Scan::at(text, p);
                    s.skip_rest_of_object()?;
                    return Ok(s.pos());
                }
            }
            ev_arm::CAT => {
                once(&mut seen, 2)?;
                (ev.cat, p) = lstr_at(text, p)?;
            }
            ev_arm::NAME => {
                once(&mut seen, 4)?;
                (ev.name, p) = lstr_at(text, p)?;
            }
            ev_arm::TS => {
                once(&mut seen, 8)?;
                (ev.ts, p) = raw_at(text, p)?;
            }
            ev_arm::DUR => {
                once(&mut seen, 16)?;
                (ev.dur, p) = raw_at(text, p)?;
            }
            ev_arm::PID => {
                once(&mut seen, 32)?;
                (ev.pid, p) = raw_at(text, p)?;
            }
            ev_arm::TID => {
                once(&mut seen, 64)?;
                (ev.tid, p) = raw_at(text, p)?;
            }
            ev_arm::ARGS => {
                once(&mut seen, 128)?;
                match text.get(p) {
                    Some(b'{') => {
                        let a = ev.args.insert(RawArgs::default());
                        p = scan_args(text, p, a, &mut shapes.args, &mut shapes.arrays)?;
                    }
                    Some(b'n') => p = skip_at(text, p)?,
                    // Metadata is read only for the names it gives: odd args are skipped.
                    _ if ev.ph.as_str() == "M" => p = skip_at(text, p)?,
                    _ => return Err(Bail),
                }
            }
            _ => p = skip_at(text, p)?,
        }
    })
}

/// An event's `args` from `p` (its `{`), as [`RawArgs`]' serde derive reads them; returns
/// the position after the closing `}`.
fn scan_args<'a>(
    text: &'a [u8],
    p: usize,
    a: &mut RawArgs<'a>,
    members: &mut Members,
    arrays: &mut Arrays,
) -> Scanned<usize> {
    let mut seen = 0u32;
    members!(text, p, members, args_arm, arm => {
        match arm {
            args_arm::CORRELATION => {
                once(&mut seen, 1)?;
                (a.correlation, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::EXTERNAL_ID => {
                once(&mut seen, 1 << 1)?;
                (a.external_id, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::DEVICE => {
                once(&mut seen, 1 << 2)?;
                (a.device, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::STREAM => {
                once(&mut seen, 1 << 3)?;
                (a.stream, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::BYTES => {
                once(&mut seen, 1 << 4)?;
                (a.bytes, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::GRID => {
                once(&mut seen, 1 << 5)?;
                let (d, at) = with_scan(text, p, Scan::dims)?;
                (a.grid, p) = (Some(d), at);
            }
            args_arm::BLOCK => {
                once(&mut seen, 1 << 6)?;
                let (d, at) = with_scan(text, p, Scan::dims)?;
                (a.block, p) = (Some(d), at);
            }
            args_arm::REGISTERS_PER_THREAD => {
                once(&mut seen, 1 << 7)?;
                (a.registers, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::SHARED_MEMORY => {
                once(&mut seen, 1 << 8)?;
                (a.shared_mem, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::EST_ACHIEVED_OCCUPANCY => {
                once(&mut seen, 1 << 9)?;
                (a.occupancy, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::MEM_BYTES => {
                once(&mut seen, 1 << 10)?;
                (a.mem_bytes, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::TOTAL_ALLOCATED => {
                once(&mut seen, 1 << 11)?;
                (a.total_allocated, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::TOTAL_RESERVED => {
                once(&mut seen, 1 << 12)?;
                (a.total_reserved, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::DEVICE_TYPE => {
                once(&mut seen, 1 << 13)?;
                (a.device_type, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::DEVICE_ID => {
                once(&mut seen, 1 << 14)?;
                (a.device_id, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::ADDR => {
                once(&mut seen, 1 << 15)?;
                (a.addr, p) = with_scan(text, p, Scan::num)?;
            }
            args_arm::INPUT_DIMS => {
                once(&mut seen, 1 << 16)?;
                (a.input_dims, p) = array_or_raw_at(text, p, arrays)?;
            }
            args_arm::INPUT_TYPE => {
                once(&mut seen, 1 << 17)?;
                (a.input_type, p) = array_or_raw_at(text, p, arrays)?;
            }
            args_arm::CALL_STACK => {
                once(&mut seen, 1 << 18)?;
                (a.call_stack, p) = lstr_at(text, p)?;
            }
            args_arm::KIND => {
                once(&mut seen, 1 << 19)?;
                (a.kind, p) = lstr_at(text, p)?;
            }
            args_arm::CONCRETE_INPUTS => {
                once(&mut seen, 1 << 20)?;
                (a.concrete, p) = array_or_raw_at(text, p, arrays)?;
            }
            args_arm::NAME => {
                once(&mut seen, 1 << 21)?;
                (a.name, p) = lstr_at(text, p)?;
            }
            _ => p = array_or_skip_at(text, p, arrays)?,
        }
    })
}

struct TopSeed<'b> {
    b: &'b mut Builder,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace object with traceEvents, or an array of events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.b.saw_events_container = true;
        EventsSeed { b: self.b }.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<LStr<'de>>()? {
            match key.as_str() {
                "traceEvents" => {
                    self.b.saw_events_container = true;
                    map.next_value_seed(EventsSeed { b: self.b })?;
                }
                "deviceProperties" => {
                    let props: Vec<RawDeviceProps<'de>> = map
                        .next_value::<Option<Vec<RawDeviceProps<'de>>>>()?
                        .unwrap_or_default();
                    self.b.trace.meta.gpus = props
                        .iter()
                        .enumerate()
                        .map(|(k, p)| GpuInfo {
                            id: p.id.i64().unwrap_or(k as i64) as i32,
                            name: p.name.as_str().to_string(),
                            compute_capability: match (p.major.u64(), p.minor.u64()) {
                                (Some(a), Some(b)) => Some((a as u32, b as u32)),
                                _ => None,
                            },
                            sm_count: p.sms.u64().map(|v| v as u32),
                            memory_bytes: p.total_mem.u64(),
                        })
                        .collect();
                }
                "distributedInfo" => {
                    let d: Option<RawDistributed> = map.next_value()?;
                    if let Some(d) = d {
                        self.b.trace.meta.rank = d.rank.i64();
                        self.b.trace.meta.world_size = d.world_size.i64();
                    }
                }
                "baseTimeNanoseconds" => {
                    let n: Num = map.next_value()?;
                    self.b.base_time_ns = n.i64();
                }
                "schemaVersion" => {
                    let n: Num = map.next_value()?;
                    self.b.schema_version = n.i64();
                }
                "cupti_version" => {
                    let n: Num = map.next_value()?;
                    self.b.cupti_version = n.i64();
                    self.b.trace.meta.stack.cupti = n.i64();
                }
                k @ ("cuda_driver_version" | "cuda_runtime_version") => {
                    let driver = k == "cuda_driver_version";
                    let n: Num = map.next_value()?;
                    let v = n
                        .u64()
                        .and_then(|v| u32::try_from(v).ok())
                        .filter(|&v| v > 0);
                    let stack = &mut self.b.trace.meta.stack;
                    if driver {
                        stack.driver_cuda = v;
                    } else {
                        stack.runtime_cuda = v;
                    }
                }
                k @ ("record_shapes" | "profile_memory" | "with_stack" | "with_flops"
                | "with_modules") => {
                    let k = k.to_string();
                    let v: &RawValue = map.next_value()?;
                    self.b
                        .trace
                        .meta
                        .capture_options
                        .push((k, v.get().to_string()));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct EventsSeed<'b> {
    b: &'b mut Builder,
}

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(el) = seq.next_element::<Element<'de>>()? {
            match el.0 {
                Some(ev) => self.b.add(&ev),
                None => {
                    self.b.events += 1;
                    self.b.skip("not an object");
                }
            }
        }
        Ok(())
    }
}

/// One element of the events array: an event object, or anything else (counted, skipped).
struct Element<'a>(Option<RawEvent<'a>>);

struct ElementVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ElementVisitor<'a> {
    type Value = Element<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace event")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Element<'a>, A::Error> {
        RawEvent::deserialize(de::value::MapAccessDeserializer::new(map)).map(|e| Element(Some(e)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Element<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Element(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Element<'a>, E> {
        Ok(Element(None))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Element<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ElementVisitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(t.memory[0].total_reserved, None);
        assert_eq!(
            t.str(t.host_spans[t.index.op_cpu_op[0] as usize].name),
            "aten::add"
        );
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
