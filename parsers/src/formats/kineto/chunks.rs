//! The chunk pipeline's pieces: a chunk's text (owned or left where it lies in a mapped
//! file), its parse into a builder of its own (the fast scanner, then serde), and the merger
//! that folds parsed chunks into the trace in chunk order as they come.

use super::*;

/// Where [`parse_input`] reads the trace from.
pub(super) enum Input<'d, R> {
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
pub(super) enum ChunkText<'d> {
    /// Copied out of a stream into a buffer of its own (given back for reuse once parsed).
    Owned(Vec<u8>),
    /// Left in the input held in memory.
    Borrowed(&'d [u8]),
}

/// Bytes read from the input at a time.
pub(super) const BLOCK: usize = 1 << 20;
/// Events text handed to a worker at a time.
pub(super) const CHUNK: usize = 4 << 20;

/// A chunk of events parsed on a worker.
pub(super) struct ChunkOut {
    pub(super) index: usize,
    /// Offset of the chunk's first byte in the input.
    pub(super) offset: u64,
    /// The chunk's length in bytes.
    pub(super) len: usize,
    pub(super) result: Result<Builder, LoadError>,
}

/// Parses one chunk and returns its buffer for reuse.
pub(super) fn parse_chunk_keep(
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
pub(super) fn parse_chunk_borrowed(
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

pub(super) fn parse_chunk_in(
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
    if fast {
        // The scanner may have read events before it stopped: serde reads the chunk from its
        // start into a fresh builder, or those events would be read twice (a key with bytes
        // that are not UTF-8, which serde skips and the scanner refuses, did that).
        b = Builder::new(source);
    }
    let result = match simdutf8::basic::from_utf8(buf) {
        Ok(text) => {
            if fast {
                SCAN_FALLBACKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
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
pub(super) struct Spare {
    pub(super) gpu_ops: Vec<GpuOp>,
    pub(super) host_spans: Vec<HostSpan>,
    pub(super) memory: Vec<MemorySample>,
    pub(super) concrete_inputs: Vec<((i64, i64, i64, StrId), StrId)>,
}

/// Merges parsed chunks into one builder in chunk order as they come off the workers, so
/// that the copy runs while the next chunks are parsed and each chunk's lists are reused
/// (memory holds the model and the chunks in flight, never every chunk).
pub(super) struct Merger {
    pub(super) queue: std::sync::Mutex<MergeQueue>,
    /// Signalled when chunks have been merged (or the merge has failed), for the workers
    /// waiting for room in the queue.
    pub(super) merged: std::sync::Condvar,
    /// Touched only by the worker holding [`MergeQueue::merging`].
    pub(super) into: std::sync::Mutex<Builder>,
}

/// Parsed chunks that may wait for the one before them: a worker that finishes a chunk
/// while this many wait stops until the merge catches up, so that a worker the machine stops
/// for a moment does not let the other pile up parsed chunks (each holds its lists).
pub(super) const MAX_WAITING: usize = 4;

/// Chunks parsed and waiting for their turn.
pub(super) struct MergeQueue {
    /// Index of the next chunk to merge.
    pub(super) next: usize,
    pub(super) pending: std::collections::BTreeMap<usize, ChunkOut>,
    /// Whether a worker is merging (the others leave their chunks to it).
    pub(super) merging: bool,
    /// The first chunk, in chunk order, that did not parse: nothing after it is merged.
    pub(super) failed: Option<ChunkOut>,
    pub(super) spares: Vec<Spare>,
}

impl Merger {
    pub(super) fn new(source: &str) -> Self {
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

    pub(super) fn queue(&self) -> std::sync::MutexGuard<'_, MergeQueue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Lists for the next chunk, from one merged already when there is one.
    pub(super) fn spare(&self) -> Spare {
        self.queue().spares.pop().unwrap_or_default()
    }

    /// Takes a parsed chunk; merges it, and the chunks waiting after it, when it is next
    /// and no other worker is merging, calling `merged` with the offset and length of each
    /// (every chunk before it is merged too); returns when at most [`MAX_WAITING`] chunks
    /// wait.
    /// The wait cannot last: the chunk next in line was taken before every waiting one
    /// (chunks are handed out in order), and whoever took it merges it, or leaves it to the
    /// worker merging, on finishing it.
    pub(super) fn done(&self, out: ChunkOut, mut merged: impl FnMut(u64, usize)) {
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
    pub(super) fn wait_for_room(&self, mut q: std::sync::MutexGuard<'_, MergeQueue>) {
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
pub(super) fn merge_chunk(into: &mut Builder, c: &mut Builder) {
    let t = &mut into.trace;
    if t.strings.len() <= 1
        && t.args.is_empty()
        && t.gpu_ops.is_empty()
        && t.host_spans.is_empty()
        && t.memory.is_empty()
        && t.concrete_inputs.is_empty()
        && t.strides.is_empty()
    {
        std::mem::swap(&mut t.strings, &mut c.trace.strings);
        std::mem::swap(&mut t.args, &mut c.trace.args);
        std::mem::swap(&mut t.gpu_ops, &mut c.trace.gpu_ops);
        std::mem::swap(&mut t.host_spans, &mut c.trace.host_spans);
        std::mem::swap(&mut t.memory, &mut c.trace.memory);
        std::mem::swap(&mut t.concrete_inputs, &mut c.trace.concrete_inputs);
        std::mem::swap(&mut t.strides, &mut c.trace.strides);
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
        // The side tables keyed by span, their names and values rewritten.
        for (into, from) in [
            (&mut t.concrete_inputs, &mut c.trace.concrete_inputs),
            (&mut t.strides, &mut c.trace.strides),
        ] {
            into.extend(
                from.drain(..)
                    .map(|((pid, tid, start, name), v)| ((pid, tid, start, m(name)), m(v))),
            );
        }
    }
    into.absorb(c);
}
