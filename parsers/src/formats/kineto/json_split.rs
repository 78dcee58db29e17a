//! Splits a JSON trace into the text around its events array and chunks of whole events, as
//! the bytes arrive, so events can be parsed in parallel and the input never has to be held in
//! memory at once.
//!
//! A small state machine tracks strings (jumping to the next quote or backslash with memchr),
//! nesting depth and the key of the array being entered. The events array is `traceEvents` of
//! the top-level object, or the top-level array itself (January 2021 traces). Chunks end right
//! after an event, so each parses on its own as `[chunk]`.

use memchr::memchr2;

/// How torch's writer separates two events: a raw newline never occurs inside a JSON string,
/// and the writer indents events by two spaces and everything nested deeper, so in its output
/// this sequence is an event boundary and nothing else.
const TORCH_SEP: &[u8] = b"\n  },\n  {";

/// Bytes the state machine must look at outside strings; everything else is skipped.
const STRUCTURAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'{' as usize] = true;
    t[b'}' as usize] = true;
    t[b'[' as usize] = true;
    t[b']' as usize] = true;
    t
};

/// What the splitter hands out.
#[derive(Debug, PartialEq)]
pub enum Piece {
    /// Text of the document outside the events array (prefix and suffix, in order), with the
    /// array replaced by `[]`. Emitted once, at the end.
    Outer(Vec<u8>),
    /// Whole events, comma-separated: the first chunk starts with `[`, later ones with the
    /// separator (`,`) that followed the previous chunk, and none has the closing bracket; a
    /// reader replaces the leading comma with `[` and appends `]`. `line` is the 1-based line
    /// of the chunk's first byte in the input.
    Events {
        /// The events' text.
        text: Vec<u8>,
        /// Line of the first byte.
        line: usize,
        /// Offset of the first byte in the input.
        offset: u64,
    },
}

/// What [`Splitter::split_slice`] hands out.
#[derive(Debug, PartialEq)]
pub enum SlicePiece {
    /// A piece as a stream's.
    Piece(Piece),
    /// Whole events as in [`Piece::Events`], left where they are in the input: its bytes
    /// `start..end`. Their line is not counted (a reader that needs it, to report bad JSON,
    /// counts the newlines before `start`).
    Borrowed {
        /// Offset of the first byte in the input.
        start: usize,
        /// Offset just after the last byte.
        end: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Before the events array.
    Before,
    /// Inside it.
    Inside,
    /// After it.
    After,
}

/// The incremental splitter.
pub struct Splitter {
    chunk_bytes: usize,
    phase: Phase,
    depth: u32,
    events_depth: u32,
    in_str: bool,
    escape: bool,
    /// Bytes of the string being read at depth 1 (only while it may be a key).
    key: Vec<u8>,
    collecting_key: bool,
    last_key: Vec<u8>,
    outer: Vec<u8>,
    pending: Vec<u8>,
    /// Length of `pending` up to the end of the last complete event.
    complete: usize,
    pending_line: usize,
    pending_offset: u64,
    offset: u64,
    /// Cutting at [`TORCH_SEP`] instead of scanning every byte (the file has torch's layout).
    fast: bool,
    /// In fast mode, where in `pending` the separator search resumes.
    fast_from: usize,
    /// `pending` still begins with the events array's opening bracket (no chunk cut yet).
    bracket_pending: bool,
    /// Emptied chunk buffers handed back for reuse (fresh pages cost a page fault each).
    spare: Vec<Vec<u8>>,
    /// Whether [`Piece::Events`] carry their line (off for an input held in memory, whose
    /// lines are counted only when an error is reported).
    count_lines: bool,
    /// Offset just after the last complete event (or the array), for truncation reports.
    pub last_complete_offset: u64,
    /// True once the events array was entered.
    pub saw_events: bool,
    /// Cut an input in another layout than torch's (held in memory, [`Splitter::split_slice`],
    /// or streamed) at the first `}`, `,`, `{`, `"` past the chunk size, without walking the
    /// text before it. Such a cut
    /// can be wrong (inside a string, or between objects nested in an event), and then the
    /// chunk before it does not parse: the caller must read the input again without
    /// speculating when parsing fails and [`Splitter::speculated`] is set.
    pub speculate: bool,
    /// A speculative cut was made.
    pub speculated: bool,
    /// Cutting speculatively in a stream (`fast` is then set too).
    speculating: bool,
    /// Inside [`Splitter::split_slice`], which speculates on its own.
    in_slice: bool,
}

impl Splitter {
    /// A splitter that cuts chunks of about `chunk_bytes`.
    pub fn new(chunk_bytes: usize) -> Self {
        Splitter {
            chunk_bytes,
            phase: Phase::Before,
            depth: 0,
            events_depth: 0,
            in_str: false,
            escape: false,
            key: Vec::new(),
            collecting_key: false,
            last_key: Vec::new(),
            outer: Vec::new(),
            pending: Vec::new(),
            fast: false,
            fast_from: 0,
            bracket_pending: false,
            spare: Vec::new(),
            count_lines: true,
            complete: 0,
            pending_line: 1,
            pending_offset: 0,
            offset: 0,
            last_complete_offset: 0,
            saw_events: false,
            speculate: false,
            speculated: false,
            speculating: false,
            in_slice: false,
        }
    }

    /// Cuts `pending[..complete]` off as a chunk; `pending` keeps the rest.
    fn flush(&mut self, emit: &mut impl FnMut(Piece)) {
        if self.complete == 0 {
            return;
        }
        self.bracket_pending = false;
        let mut rest = self
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.chunk_bytes + (1 << 20)));
        rest.clear();
        rest.extend_from_slice(&self.pending[self.complete..]);
        let mut text = std::mem::replace(&mut self.pending, rest);
        text.truncate(self.complete);
        let line = self.pending_line;
        let offset = self.pending_offset;
        // The next chunk starts where this one ended.
        if self.count_lines {
            self.pending_line = line + memchr::memchr_iter(b'\n', &text).count();
        }
        self.pending_offset = offset + text.len() as u64;
        self.complete = 0;
        // Whitespace left between the last event and the closing bracket is no chunk.
        if text.iter().all(|b| b.is_ascii_whitespace()) {
            return;
        }
        emit(Piece::Events { text, line, offset });
    }

    /// Feeds the next bytes of the input.
    pub fn feed(&mut self, buf: &[u8], emit: &mut impl FnMut(Piece)) {
        let from = self.pending.len();
        self.pending.extend_from_slice(buf);
        self.offset += buf.len() as u64;
        self.scan(from, emit);
    }

    /// Reads up to `max` bytes from `r` straight into the chunk being built (no copy) and
    /// scans them. Returns the number of bytes read (0 at the end of the input).
    pub fn read_from<R: std::io::Read>(
        &mut self,
        r: &mut R,
        max: usize,
        emit: &mut impl FnMut(Piece),
    ) -> std::io::Result<usize> {
        let from = self.pending.len();
        let result = std::io::Read::read_to_end(
            &mut std::io::Read::take(&mut *r, max as u64),
            &mut self.pending,
        );
        // What arrived before an error (a gzip stream cut short) is input all the same.
        let n = self.pending.len() - from;
        self.offset += n as u64;
        self.scan(from, emit);
        result.map(|_| n)
    }

    /// Scans `pending[from..]`, which just arrived. Bytes stay where they are: outside the
    /// events array they move to `outer`, inside it the chunk is cut after whole events.
    fn scan(&mut self, from: usize, emit: &mut impl FnMut(Piece)) {
        // The offset of pending[0] in the input.
        let base = self.offset - self.pending.len() as u64;
        let mut buf = std::mem::take(&mut self.pending);
        let mut base = base;
        if self.phase == Phase::After {
            self.outer.extend_from_slice(&buf);
            buf.clear();
            self.pending = buf;
            return;
        }
        let mut i = from;
        loop {
            let n = buf.len();
            if self.fast {
                // Between events by construction: jump to the first separator past the chunk
                // size (torch's, or a speculative cut's).
                let start = i
                    .max(self.fast_from)
                    .max(self.chunk_bytes.saturating_sub(TORCH_SEP.len()));
                let found = if start >= n {
                    None
                } else if self.speculating {
                    match speculative_cut(&buf, start) {
                        Ok(c) => Some(c),
                        Err(resume) => {
                            self.fast_from = resume;
                            break;
                        }
                    }
                } else {
                    memchr::memmem::find(&buf[start..], TORCH_SEP).map(|k| start + k + 4)
                };
                match found {
                    Some(end) => {
                        self.speculated |= self.speculating;
                        self.complete = end;
                        self.last_complete_offset = base + end as u64;
                        self.pending = buf;
                        self.flush(emit);
                        buf = std::mem::take(&mut self.pending);
                        base += end as u64;
                        i = 0;
                        self.fast_from = 0;
                        continue;
                    }
                    None => {
                        self.fast_from = n.saturating_sub(TORCH_SEP.len() - 1).max(start.min(n));
                        break;
                    }
                }
            }
            if i >= n {
                break;
            }
            if self.escape {
                self.escape = false;
                if self.collecting_key {
                    self.key.push(buf[i]);
                }
                i += 1;
                continue;
            }
            if self.in_str {
                match memchr2(b'"', b'\\', &buf[i..]) {
                    Some(k) => {
                        if self.collecting_key {
                            self.key.extend_from_slice(&buf[i..i + k]);
                        }
                        i += k;
                        if buf[i] == b'\\' {
                            self.escape = true;
                            if self.collecting_key {
                                self.key.push(b'\\');
                            }
                        } else {
                            self.in_str = false;
                            if self.collecting_key {
                                self.collecting_key = false;
                                self.last_key = std::mem::take(&mut self.key);
                            }
                        }
                        i += 1;
                    }
                    None => {
                        if self.collecting_key {
                            self.key.extend_from_slice(&buf[i..]);
                        }
                        i = n;
                    }
                }
                continue;
            }
            while i < n && !STRUCTURAL[buf[i] as usize] {
                i += 1;
            }
            if i == n {
                break;
            }
            match buf[i] {
                b'"' => {
                    self.in_str = true;
                    if self.phase == Phase::Before && self.depth == 1 {
                        self.collecting_key = true;
                        self.key.clear();
                    }
                }
                b'[' if self.phase == Phase::Before
                    && (self.depth == 0
                        || (self.depth == 1 && self.last_key == b"traceEvents")) =>
                {
                    // Enter the events array: what came before is outer text; the chunk
                    // starts with this bracket.
                    self.outer.extend_from_slice(&buf[..=i]);
                    if self.count_lines {
                        self.pending_line = 1 + memchr::memchr_iter(b'\n', &self.outer).count();
                    }
                    self.pending_offset = base + i as u64;
                    buf.drain(..i);
                    base += i as u64;
                    i = 0;
                    self.phase = Phase::Inside;
                    self.saw_events = true;
                    self.depth += 1;
                    self.events_depth = self.depth;
                    self.last_complete_offset = base + 1;
                    self.bracket_pending = true;
                    // torch's writer: `[` then each event on `\n  {\n    "`.
                    self.fast = buf[1..].starts_with(b"\n  {\n    \"");
                    // Another layout read as a stream: cut speculatively when asked.
                    if !self.fast && self.speculate && !self.in_slice {
                        self.fast = true;
                        self.speculating = true;
                    }
                    if self.fast {
                        i = 1;
                        continue;
                    }
                }
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    if self.phase == Phase::Inside && self.depth == self.events_depth {
                        // The events array closes: the last chunk, then outer text.
                        self.complete = i;
                        self.pending = buf;
                        self.flush(emit);
                        buf = std::mem::take(&mut self.pending);
                        // After the flush `buf` starts at the closing bracket.
                        self.outer.extend_from_slice(&buf);
                        buf.clear();
                        self.phase = Phase::After;
                        self.last_complete_offset = base + i as u64 + 1;
                        self.depth = self.depth.saturating_sub(1);
                        break;
                    }
                    self.depth = self.depth.saturating_sub(1);
                    if self.phase == Phase::Inside && self.depth == self.events_depth {
                        // An event just ended.
                        self.complete = i + 1;
                        self.last_complete_offset = base + i as u64 + 1;
                        if self.complete >= self.chunk_bytes {
                            self.pending = buf;
                            self.flush(emit);
                            buf = std::mem::take(&mut self.pending);
                            base += (i + 1) as u64;
                            i = 0;
                            continue;
                        }
                    }
                }
                _ => {}
            }
            i += 1;
        }
        if self.phase == Phase::After {
            self.outer.extend_from_slice(&buf);
            buf.clear();
        }
        self.pending = buf;
    }

    /// Ends the input: emits the last complete events and the outer text. Returns true when
    /// the input ended inside the events array (a truncated trace).
    pub fn finish(&mut self, emit: &mut impl FnMut(Piece)) -> bool {
        if self.fast {
            // The tail after the last cut holds the array's end (or the truncation): scan it
            // byte by byte from the known state between events.
            self.fast = false;
            // The first chunk still begins with the array's own `[`: resume after it.
            let mut from = usize::from(self.bracket_pending);
            // Whole events up to the last separator are cut as they are, so that only the
            // last event and the text after the array are read byte by byte.
            let torch = !self.speculating;
            self.speculating = false;
            if torch && let Some(k) = memchr::memmem::rfind(&self.pending[from..], TORCH_SEP) {
                let end = from + k + 4;
                let base = self.offset - self.pending.len() as u64;
                self.complete = end;
                self.last_complete_offset = base + end as u64;
                self.flush(emit);
                from = 0;
            }
            self.scan(from, emit);
        }
        let truncated = self.phase == Phase::Inside;
        match self.phase {
            Phase::Inside => {
                self.flush(emit);
                self.pending.clear();
                // Close what was open so the outer text still parses.
                self.outer.push(b']');
                for _ in 1..self.events_depth {
                    self.outer.push(b'}');
                }
            }
            Phase::Before | Phase::After => {
                let rest = std::mem::take(&mut self.pending);
                self.outer.extend_from_slice(&rest);
            }
        }
        emit(Piece::Outer(std::mem::take(&mut self.outer)));
        truncated
    }

    /// Splits an input held in memory (a mapped file). Chunks are handed out as ranges of
    /// `data` ([`SlicePiece::Borrowed`]), so nothing is copied: in torch's layout cut where
    /// the streaming path cuts them (at the first event separator past the chunk size), in
    /// any other layout at the first event end past the chunk size, guessed
    /// ([`Splitter::speculate`]) or found by walking strings and brackets. The text before
    /// the events array and the last events go through the copying state machine as a
    /// stream would. No lines are counted: every
    /// [`Piece::Events`] says line 1, and a reader that reports an error counts the lines
    /// before the piece's offset. Returns true when the input ended inside the events array
    /// (as [`Splitter::finish`]).
    pub fn split_slice(&mut self, data: &[u8], emit: &mut impl FnMut(SlicePiece)) -> bool {
        // Small steps until the events array is entered, so that no chunk is cut before the
        // borrowed cutting can take over.
        const HEAD: usize = 1 << 16;
        const BLOCK: usize = 1 << 20;
        self.count_lines = false;
        self.in_slice = true;
        self.pending_line = 1;
        let step = HEAD.min(self.chunk_bytes / 2).max(1);
        let mut fed = 0;
        while fed < data.len() && self.phase == Phase::Before {
            let end = data.len().min(fed + step);
            self.feed(&data[fed..end], &mut |p| emit(SlicePiece::Piece(p)));
            fed = end;
        }
        if self.fast && self.phase == Phase::Inside && self.bracket_pending {
            // `pending` holds the input from the array's `[` on.
            let mut start = fed - self.pending.len();
            let mut first = true;
            loop {
                let from = start + self.chunk_bytes.saturating_sub(TORCH_SEP.len()).max(1);
                let Some(k) = data
                    .get(from..)
                    .and_then(|rest| memchr::memmem::find(rest, TORCH_SEP))
                else {
                    break;
                };
                let end = from + k + 4;
                emit(SlicePiece::Borrowed { start, end });
                start = end;
                first = false;
                self.last_complete_offset = end as u64;
            }
            // The rest, less than a chunk, is read by the state machine from the known state
            // between two events (or just after the array's `[`).
            self.pending.clear();
            self.pending.extend_from_slice(&data[start..]);
            self.offset = data.len() as u64;
            self.pending_offset = start as u64;
            self.bracket_pending = first;
            self.fast_from = 0;
            self.complete = 0;
        } else if self.phase == Phase::Inside && self.bracket_pending {
            // Any other layout (one line, any indent, one event per line): the events are
            // cut where they lie too, at the first event end past the chunk size, found by
            // walking strings and brackets from the array's `[`. Nothing is copied, and each
            // chunk's pages are given back once it is parsed, as in torch's layout.
            let open = fed - self.pending.len();
            let mut cut = |start, end| emit(SlicePiece::Borrowed { start, end });
            let (start, first) = if self.speculate {
                let (start, first) = speculate_events(data, open, self.chunk_bytes, &mut cut);
                self.speculated = !first;
                (start, first)
            } else {
                walk_events(data, open, self.chunk_bytes, &mut cut)
            };
            if !first {
                self.last_complete_offset = start as u64;
            }
            // The rest (the last events, the array's end, the text after it, or where the
            // input stops) is read by the state machine from the known state between two
            // events, or just after the array's `[`.
            self.in_str = false;
            self.escape = false;
            self.collecting_key = false;
            self.depth = self.events_depth;
            self.pending.clear();
            self.pending.extend_from_slice(&data[start..]);
            self.offset = data.len() as u64;
            self.pending_offset = start as u64;
            self.bracket_pending = first;
            self.complete = 0;
            let from = usize::from(first);
            self.scan(from, &mut |p| emit(SlicePiece::Piece(p)));
        } else {
            while fed < data.len() {
                let end = data.len().min(fed + BLOCK);
                self.feed(&data[fed..end], &mut |p| emit(SlicePiece::Piece(p)));
                fed = end;
            }
        }
        self.finish(&mut |p| emit(SlicePiece::Piece(p)))
    }

    /// Gives back a chunk buffer once its events are parsed, to be filled again.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < 8 && buf.capacity() >= self.chunk_bytes {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// Frees the chunk buffers kept for reuse (once the input is read).
    pub fn release_buffers(&mut self) {
        self.spare = Vec::new();
        self.pending = Vec::new();
    }

    /// Bytes seen so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// In a stream's buffer, the comma of the first `}` `,` `{` `"` at or after `from` (see
/// [`speculate_events`]); else where to resume the search once more bytes arrive (a match
/// may begin at a `}` near the end).
fn speculative_cut(buf: &[u8], from: usize) -> Result<usize, usize> {
    let n = buf.len();
    let skip_ws = |mut p: usize| {
        while p < n && buf[p].is_ascii_whitespace() {
            p += 1;
        }
        p
    };
    let mut i = from;
    while let Some(k) = buf.get(i..).and_then(|rest| memchr::memchr(b'}', rest)) {
        let at = i + k;
        let c = skip_ws(at + 1);
        let o = if c < n && buf[c] == b',' {
            skip_ws(c + 1)
        } else {
            c
        };
        let q = if o < n && buf[o] == b'{' {
            skip_ws(o + 1)
        } else {
            o
        };
        if q >= n {
            // The bytes after this `}` have not all arrived.
            return Err(at);
        }
        if buf[c] == b',' && buf[o] == b'{' && buf[q] == b'"' {
            return Ok(c);
        }
        i = at + 1;
    }
    Err(n)
}

/// Cuts the events array of `data`, whose `[` is at `open`, as [`walk_events`] does, but at
/// the first `}` past each chunk size that is followed by `,`, `{` and `"` (whitespace
/// between them allowed): between two events in any layout, found without reading the text
/// before it. Inside a string or between objects nested in an event the same bytes can
/// occur; such a cut leaves the chunk before it unbalanced, so it fails to parse (see
/// [`Splitter::speculate`]).
fn speculate_events(
    data: &[u8],
    open: usize,
    chunk_bytes: usize,
    cut: &mut impl FnMut(usize, usize),
) -> (usize, bool) {
    let mut start = open;
    let mut first = true;
    // The whole input is here: a search that runs off its end found nothing.
    while let Ok(c) = speculative_cut(data, start.saturating_add(chunk_bytes.max(1))) {
        cut(start, c);
        start = c;
        first = false;
    }
    (start, first)
}

/// Walks the events array of `data`, whose `[` is at `open`, and calls `cut(start, end)` for
/// each run of whole events of at least `chunk_bytes` (the first run starting at the `[`, the
/// others at the `,` after the previous run's last event, each ending before that comma).
/// Stops before the last run, which holds the array's end, or where the input stops; returns
/// where the uncut rest starts and whether no run was cut (the rest still starts at `[`).
fn walk_events(
    data: &[u8],
    open: usize,
    chunk_bytes: usize,
    cut: &mut impl FnMut(usize, usize),
) -> (usize, bool) {
    let n = data.len();
    let mut start = open;
    let mut first = true;
    // Depth below the array: 0 between events.
    let mut depth = 0u32;
    let mut i = open + 1;
    while i < n {
        let b = data[i];
        if !STRUCTURAL[b as usize] {
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                // To the closing quote, over escapes.
                let mut j = i + 1;
                loop {
                    match memchr2(b'"', b'\\', &data[j.min(n)..]) {
                        Some(k) if data[j + k] == b'\\' => j += k + 2,
                        Some(k) => {
                            j += k;
                            break;
                        }
                        None => return (start, first),
                    }
                }
                i = j + 1;
                continue;
            }
            b'{' | b'[' => depth += 1,
            _ => {
                if depth == 0 {
                    // The array closes: its end goes with the last run.
                    break;
                }
                depth -= 1;
                if depth == 0 && i + 1 - start >= chunk_bytes {
                    // An event ended past the chunk size: cut before the comma after it.
                    let mut k = i + 1;
                    while k < n && data[k].is_ascii_whitespace() {
                        k += 1;
                    }
                    if k < n && data[k] == b',' {
                        cut(start, k);
                        start = k;
                        first = false;
                        i = k + 1;
                        continue;
                    }
                }
            }
        }
        i += 1;
    }
    (start, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(input: &[u8], chunk: usize, block: usize) -> (Vec<Piece>, bool) {
        let mut s = Splitter::new(chunk);
        let mut out = Vec::new();
        for b in input.chunks(block.max(1)) {
            s.feed(b, &mut |p| out.push(p));
        }
        let t = s.finish(&mut |p| out.push(p));
        (out, t)
    }

    fn events(p: &[Piece]) -> String {
        p.iter()
            .filter_map(|p| match p {
                Piece::Events { text, .. } => Some(
                    String::from_utf8_lossy(text)
                        .trim()
                        .trim_start_matches(['[', ','])
                        .trim()
                        .to_string(),
                ),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("|")
    }

    #[test]
    fn splits_at_event_boundaries_whatever_the_block_size() {
        let doc = br#"{"deviceProperties":[{"id":0}],"x":"traceEvents","traceEvents":[{"a":"}]\"{"},{"b":[1,{"c":2}]},{"d":3}],"traceName":"t"}"#;
        for block in [1, 2, 3, 7, 1000] {
            let (p, t) = split(doc, 1, block);
            assert!(!t);
            assert_eq!(
                events(&p),
                r#"{"a":"}]\"{"}|{"b":[1,{"c":2}]}|{"d":3}"#,
                "block {block}"
            );
            match p.last().unwrap() {
                Piece::Outer(o) => assert_eq!(
                    String::from_utf8_lossy(o),
                    r#"{"deviceProperties":[{"id":0}],"x":"traceEvents","traceEvents":[],"traceName":"t"}"#
                ),
                _ => panic!(),
            }
        }
    }

    #[test]
    fn top_level_array_and_large_chunks() {
        let doc = b"[\n{\"a\":1},\n{\"b\":2}\n]";
        let (p, _) = split(doc, 1 << 20, 4);
        assert_eq!(events(&p), "{\"a\":1},\n{\"b\":2}");
        match &p[0] {
            Piece::Events { line, offset, .. } => assert_eq!((*line, *offset), (1, 0)),
            _ => panic!(),
        }
    }

    /// A document in torch's own layout with `n` events, each holding a string that looks
    /// like the event separator (`},\n  {`), which the splitter must not cut at.
    fn torch_layout(n: usize) -> Vec<u8> {
        let mut doc = b"{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n".to_vec();
        for k in 0..n {
            if k > 0 {
                doc.extend_from_slice(b",\n");
            }
            doc.extend_from_slice(format!("  {{\n    \"ph\": \"X\", \"name\": \"a}},\\n  {{{k}\",\n    \"args\": {{\n      \"x\": {k}\n    }}\n  }}").as_bytes());
        }
        doc.extend_from_slice(b"\n  ],\n  \"traceName\": \"t\"\n}");
        doc
    }

    #[test]
    fn torch_layout_takes_the_fast_path_and_agrees() {
        let doc = torch_layout(50);
        for block in [1, 7, 64, 100_000] {
            for chunk in [1, 100, 1 << 20] {
                let (p, t) = split(&doc, chunk, block);
                assert!(!t);
                let n: usize = p
                    .iter()
                    .map(|p| match p {
                        Piece::Events { text, .. } => {
                            memchr::memmem::find_iter(text, b"\"ph\"").count()
                        }
                        _ => 0,
                    })
                    .sum();
                assert_eq!(n, 50, "block {block} chunk {chunk}");
                match p.last().unwrap() {
                    Piece::Outer(o) => assert!(
                        String::from_utf8_lossy(o).ends_with("[],\n  \"traceName\": \"t\"\n}"),
                        "{}",
                        String::from_utf8_lossy(o)
                    ),
                    _ => panic!(),
                }
            }
        }
        // Cut mid-event: whole events only, and flagged.
        let (p, t) = split(&doc[..doc.len() / 2], 100, 64);
        assert!(t);
        assert!(p.iter().all(|p| match p {
            Piece::Events { text, .. } => text.trim_ascii_end().ends_with(b"}"),
            _ => true,
        }));
    }

    /// [`Splitter::split_slice`]'s pieces as text, in order, and its truncation flag.
    fn split_in_memory(input: &[u8], chunk: usize) -> (Vec<String>, String, bool, u64, usize) {
        let mut s = Splitter::new(chunk);
        let mut texts = Vec::new();
        let mut outer = String::new();
        let mut borrowed = 0;
        let t = s.split_slice(input, &mut |p| match p {
            SlicePiece::Borrowed { start, end } => {
                borrowed += 1;
                texts.push(String::from_utf8_lossy(&input[start..end]).into_owned());
            }
            SlicePiece::Piece(Piece::Events { text, .. }) => {
                texts.push(String::from_utf8_lossy(&text).into_owned())
            }
            SlicePiece::Piece(Piece::Outer(o)) => outer = String::from_utf8_lossy(&o).into(),
        });
        (texts, outer, t, s.last_complete_offset, borrowed)
    }

    #[test]
    fn in_memory_split_leaves_torch_chunks_in_place_and_agrees() {
        let doc = torch_layout(400);
        let plain = br#"{"traceEvents":[{"a":"}]\"{"},{"b":[1,{"c":2}]},{"d":3}],"traceName":"t"}"#;
        for input in [
            &doc[..],
            &doc[..doc.len() / 2],
            &doc[..doc.len() - 3],
            &plain[..],
        ] {
            for chunk in [100, 1000, 1 << 20] {
                let (p, t) = split(input, chunk, 1 << 20);
                let (texts, outer, t2, done, borrowed) = split_in_memory(input, chunk);
                assert_eq!(t, t2, "chunk {chunk}");
                // The same events in the same order, however the chunks were cut.
                let strip = |x: &str| x.trim().trim_start_matches(['[', ',']).trim().to_string();
                let streamed: Vec<String> = p
                    .iter()
                    .filter_map(|p| match p {
                        Piece::Events { text, .. } => Some(strip(&String::from_utf8_lossy(text))),
                        _ => None,
                    })
                    .collect();
                let in_memory: Vec<String> = texts.iter().map(|t| strip(t)).collect();
                let squeeze = |v: Vec<String>| v.join(",").replace(|c: char| c.is_whitespace(), "");
                assert!(squeeze(streamed) == squeeze(in_memory), "chunk {chunk}");
                match p.last() {
                    Some(Piece::Outer(o)) => assert_eq!(String::from_utf8_lossy(o), outer),
                    _ => panic!(),
                }
                let mut s = Splitter::new(chunk);
                for b in input.chunks(1 << 20) {
                    s.feed(b, &mut |_| {});
                }
                s.finish(&mut |_| {});
                assert_eq!(s.last_complete_offset, done, "chunk {chunk}");
                if input.len() == doc.len() && chunk == 1000 {
                    assert!(borrowed > 10, "torch chunks are left in place");
                }
            }
        }
    }

    #[test]
    fn no_whitespace_chunk_after_the_last_event() {
        // The last event fills a chunk exactly; what follows it is only whitespace.
        let doc = b"{\"traceEvents\":[{\"a\":1}\n  \n]}";
        let (p, _) = split(doc, 1, 3);
        let n = p
            .iter()
            .filter(|p| matches!(p, Piece::Events { .. }))
            .count();
        assert_eq!(n, 1, "{p:?}");
    }

    #[test]
    fn truncated_input_keeps_whole_events() {
        let doc = br#"{"traceEvents":[{"a":1},{"b":2},{"c":"#;
        let (p, t) = split(doc, 1, 5);
        assert!(t);
        assert_eq!(events(&p), r#"{"a":1}|{"b":2}"#);
        match p.last().unwrap() {
            Piece::Outer(o) => assert_eq!(String::from_utf8_lossy(o), r#"{"traceEvents":[]}"#),
            _ => panic!(),
        }
    }
}
