//! A small zero-copy JSON pull scanner for the hot path of the Kineto parser.
//!
//! Trace events are flat objects of a dozen known keys; reading them with serde's derived
//! visitors spends most of its time moving large field structs and dispatching through
//! generic visitors. This scanner walks the bytes once, hands out borrowed strings and the raw
//! text of values, and skips everything it is not asked for with memchr. It gives the same
//! values as the serde path for every input serde accepts; on anything unusual (a malformed
//! event, an escape it cannot decode, nesting deeper than serde allows, a number out of
//! range) it gives up with [`Bail`] and the caller re-reads the chunk with serde, which then
//! either succeeds the slow way or reports the error with its line and column. Values it skips
//! are checked for their extent only (strings and brackets), not validated in full.

use super::lenient::{Dims, LStr, Num};
use memchr::memchr2;
use std::borrow::Cow;

/// The fast path cannot read this input; re-read it with serde.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bail;

/// Result of a scanner step.
pub type Scanned<T> = Result<T, Bail>;

/// serde_json's recursion limit; deeper documents are left to serde to reject.
const MAX_DEPTH: u32 = 128;

/// Bytes that can continue a JSON number.
const NUMBER: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = b'0';
    while c <= b'9' {
        t[c as usize] = true;
        c += 1;
    }
    t[b'-' as usize] = true;
    t[b'+' as usize] = true;
    t[b'.' as usize] = true;
    t[b'e' as usize] = true;
    t[b'E' as usize] = true;
    t
};

/// Position of the first `"` or `\\` in `b` at or after `from`. Strings in traces are mostly
/// 2 to 60 bytes: sixteen bytes at a time with one wide compare per byte kind
/// ([`quote_or_backslash_16`]) beats both a byte loop and memchr's setup there. Most (keys,
/// names) end within the first sixteen bytes, which are tested inline; the rest go to
/// [`quote_or_backslash_far`].
#[inline(always)]
fn quote_or_backslash(b: &[u8], from: usize) -> Option<usize> {
    if let Some(w) = b.get(from..).and_then(|r| r.first_chunk::<16>()) {
        let hit = quote_or_backslash_16(w);
        if hit != 0 {
            return Some(from + hit.trailing_zeros() as usize);
        }
        return quote_or_backslash_far(b, from + 16);
    }
    quote_or_backslash_far(b, from)
}

/// [`quote_or_backslash`] past its first sixteen bytes: sixteen at a time for a few blocks,
/// then memchr for long strings, a byte loop for the last bytes of the text.
#[inline(never)]
fn quote_or_backslash_far(b: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    let limit = b.len().min(from + 48);
    while at + 16 <= limit {
        let hit = match b.get(at..).and_then(|r| r.first_chunk::<16>()) {
            Some(w) => quote_or_backslash_16(w),
            None => break,
        };
        if hit != 0 {
            return Some(at + hit.trailing_zeros() as usize);
        }
        at += 16;
    }
    if at + 16 <= b.len() {
        return memchr2(b'"', b'\\', &b[at..]).map(|k| at + k);
    }
    b.get(at..)?
        .iter()
        .position(|&c| c == b'"' || c == b'\\')
        .map(|k| at + k)
}

/// Position of the first `"`, `\\` or byte that is not ASCII in `b` at or after `from`: where a
/// string's text stops being plain ASCII text, or ends. [`quote_or_backslash`] with the high
/// bit of each byte folded into its test, sixteen bytes at a time to the end ([`run_end`] of
/// the plain ASCII bytes).
#[inline(always)]
fn string_stop(b: &[u8], from: usize) -> Option<usize> {
    let end = run_end(
        b,
        from,
        |w| !(quote_or_backslash_16(w) | high_bits_16(w)),
        |c| c != b'"' && c != b'\\' && c.is_ascii(),
    );
    (end < b.len()).then_some(end)
}

/// Bit `i` set where byte `i` of `w` is `"` or `\\`.
#[cfg(target_arch = "x86_64")]
#[inline]
fn quote_or_backslash_16(w: &[u8; 16]) -> u32 {
    use std::arch::x86_64::*;
    // SSE2 is part of the x86_64 baseline; the unaligned load reads the 16 bytes of `w`.
    unsafe {
        let v = _mm_loadu_si128(w.as_ptr().cast::<__m128i>());
        let q = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let s = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        _mm_movemask_epi8(_mm_or_si128(q, s)) as u32
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn quote_or_backslash_16(w: &[u8; 16]) -> u32 {
    quote_or_backslash_16_portable(w)
}

/// Portable [`quote_or_backslash_16`]: eight bytes at a time in a register (SWAR).
#[cfg(any(test, not(target_arch = "x86_64")))]
#[inline]
fn quote_or_backslash_16_portable(w: &[u8; 16]) -> u32 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // Exact per byte (no borrow between bytes): the high bit of a byte of `zero(x)` is set
    // iff that byte of x is zero.
    let zero = |x: u64| !(((x & LOW7) + LOW7) | x | LOW7);
    let mut out = 0u32;
    for (k, half) in w.chunks_exact(8).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(half);
        let x = u64::from_le_bytes(b);
        let hit = zero(x ^ (ONES * b'"' as u64)) | zero(x ^ (ONES * b'\\' as u64));
        for i in 0..8 {
            if hit >> (8 * i + 7) & 1 == 1 {
                out |= 1 << (8 * k + i);
            }
        }
    }
    out
}

/// Where the string whose text starts at `at` (just after its opening quote) ends: the
/// position after its closing quote. A backslash escapes the byte after it.
#[inline]
fn string_end(b: &[u8], mut at: usize) -> Scanned<usize> {
    loop {
        at = quote_or_backslash(b, at).ok_or(Bail)?;
        if b[at] == b'"' {
            return Ok(at + 1);
        }
        at += 2;
        if at > b.len() {
            return Err(Bail);
        }
    }
}

/// Where the quotes, backslashes and brackets of a 64-byte block are: bit `i` of each mask is
/// byte `i` of the block.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Marks {
    quote: u64,
    backslash: u64,
    /// `[` and `{`.
    open: u64,
    /// `]` and `}`.
    close: u64,
    /// Bytes above `@` (letters, `_`, brackets and braces, UTF-8): with `close` taken out,
    /// what valid JSON never has right after a string's closing quote.
    word: u64,
}

/// Marks the structural bytes of `block` (64 bytes; more are ignored, fewer are a bug the
/// callers never make). `[`/`{` and `]`/`}` differ in one bit (0x20), so one compare of the
/// byte with that bit set finds both of a pair.
#[inline]
fn classify(block: &[u8]) -> Marks {
    let block: &[u8; 64] = match block.first_chunk() {
        Some(b) => b,
        None => return classify_short(block),
    };
    classify_64(block)
}

/// [`classify`] of fewer than 64 bytes (the missing ones mark nothing).
#[cold]
fn classify_short(block: &[u8]) -> Marks {
    let mut b = [b' '; 64];
    b[..block.len()].copy_from_slice(block);
    classify_64(&b)
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn classify_64(block: &[u8; 64]) -> Marks {
    use std::arch::x86_64::*;
    let mut m = Marks::default();
    // SSE2 is part of the x86_64 baseline, so these intrinsics exist on every x86_64 CPU; the
    // four unaligned 16-byte loads read inside `block` (offsets 0, 16, 32, 48 of 64 bytes).
    unsafe {
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        let fold = _mm_set1_epi8(0x20);
        let open = _mm_set1_epi8(b'{' as i8);
        let close = _mm_set1_epi8(b'}' as i8);
        let at = _mm_set1_epi8(b'@' as i8);
        for k in 0..4 {
            let v = _mm_loadu_si128(block.as_ptr().add(16 * k).cast::<__m128i>());
            let f = _mm_or_si128(v, fold);
            let mask = |x: __m128i| (_mm_movemask_epi8(x) as u16 as u64) << (16 * k);
            m.quote |= mask(_mm_cmpeq_epi8(v, quote));
            m.backslash |= mask(_mm_cmpeq_epi8(v, backslash));
            m.open |= mask(_mm_cmpeq_epi8(f, open));
            m.close |= mask(_mm_cmpeq_epi8(f, close));
            // Signed: bytes 0x80 and up (UTF-8) are negative, so not above `@`.
            m.word |= mask(_mm_cmpgt_epi8(v, at));
        }
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn classify_64(block: &[u8; 64]) -> Marks {
    classify_64_portable(block)
}

/// Portable [`classify_64`]: 16 bytes at a time into 16-bit masks, a shape compilers turn
/// into wide compares.
#[cfg(any(test, not(target_arch = "x86_64")))]
#[inline]
fn classify_64_portable(block: &[u8; 64]) -> Marks {
    let mut m = Marks::default();
    for k in 0..4 {
        let (mut q, mut s, mut o, mut c, mut w) = (0u16, 0u16, 0u16, 0u16, 0u16);
        for i in 0..16 {
            let x = block[16 * k + i];
            let f = x | 0x20;
            q |= u16::from(x == b'"') << i;
            s |= u16::from(x == b'\\') << i;
            o |= u16::from(f == b'{') << i;
            c |= u16::from(f == b'}') << i;
            w |= u16::from((x as i8) > b'@' as i8) << i;
        }
        m.quote |= u64::from(q) << (16 * k);
        m.backslash |= u64::from(s) << (16 * k);
        m.open |= u64::from(o) << (16 * k);
        m.close |= u64::from(c) << (16 * k);
        m.word |= u64::from(w) << (16 * k);
    }
    m
}

/// Whether the byte at `at`, just after a string's closing quote, may follow a string in
/// JSON: anything but a letter, `_`, `{`, `[` or another byte from `A` (0x41) to 0x7F other
/// than `]` and `}` (the bytes [`Marks::word`] marks, less [`Marks::close`]).
#[inline]
fn after_string_ok(b: &[u8], at: usize) -> bool {
    b.get(at)
        .is_none_or(|&c| !(c > b'@' && c < 0x80 && c != b']' && c != b'}'))
}

/// Bit `i` of the result is the XOR of bits `0..=i` of `x`: over quote marks, the bytes from
/// an opening quote up to (not including) its closing quote.
#[inline]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// The first position at or after `p` that is not JSON whitespace. Most calls find a token
/// at once or after one space (after `:` and `,`), so those two are tested inline; runs of
/// whitespace (torch indents every field on its own line) go to `skip_ws_run`.
#[inline(always)]
pub fn skip_ws(b: &[u8], p: usize) -> usize {
    match b.get(p) {
        Some(&c) if c > b' ' => p,
        Some(b' ') if b.get(p + 1).is_some_and(|&n| n > b' ') => p + 1,
        _ => skip_ws_run(b, p),
    }
}

/// [`skip_ws`] past a run, sixteen bytes at a time ([`whitespace_16`]), the last few of the
/// text one by one.
#[inline(never)]
fn skip_ws_run(b: &[u8], p: usize) -> usize {
    run_end(b, p, whitespace_16, is_whitespace)
}

/// JSON whitespace: space, `\n`, `\r`, `\t` (no other control byte, which is no JSON
/// outside a string).
fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\n' | b'\r' | b'\t')
}

/// The first position at or after `p` whose byte is not in a class: sixteen bytes at a time
/// with `wide` (bit `i` set where byte `i` is in it), the last few of the text one by one
/// with `byte`.
#[inline(always)]
fn run_end(
    b: &[u8],
    mut p: usize,
    wide: impl Fn(&[u8; 16]) -> u32,
    byte: impl Fn(u8) -> bool,
) -> usize {
    while let Some(w) = b.get(p..).and_then(|r| r.first_chunk::<16>()) {
        let other = !wide(w) & 0xffff;
        if other != 0 {
            return p + other.trailing_zeros() as usize;
        }
        p += 16;
    }
    while b.get(p).is_some_and(|&c| byte(c)) {
        p += 1;
    }
    p
}

/// Bit `i` set where `byte` holds for byte `i` of `w`: the portable form of the wide
/// compares, and what their tests check them against.
#[cfg(any(test, not(target_arch = "x86_64")))]
#[inline]
fn class_16_portable(w: &[u8; 16], byte: impl Fn(u8) -> bool) -> u32 {
    w.iter()
        .enumerate()
        .fold(0, |m, (i, &c)| m | u32::from(byte(c)) << i)
}

/// Bit `i` set where byte `i` of `w` is JSON whitespace ([`is_whitespace`]).
#[cfg(target_arch = "x86_64")]
#[inline]
fn whitespace_16(w: &[u8; 16]) -> u32 {
    use std::arch::x86_64::*;
    // SSE2 is part of the x86_64 baseline; the unaligned load reads the 16 bytes of `w`.
    unsafe {
        let v = _mm_loadu_si128(w.as_ptr().cast::<__m128i>());
        let eq = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
        let m = _mm_or_si128(
            _mm_or_si128(eq(b' '), eq(b'\n')),
            _mm_or_si128(eq(b'\r'), eq(b'\t')),
        );
        _mm_movemask_epi8(m) as u32
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn whitespace_16(w: &[u8; 16]) -> u32 {
    class_16_portable(w, is_whitespace)
}

/// Where the text of the string whose opening quote is at `p` ends (its closing quote), if
/// the string has no escape and is ASCII (so its text may be taken with [`ascii_text`]);
/// `None` for an escape, a byte that is not ASCII, or an unclosed string.
#[inline(always)]
pub fn plain_string_end(b: &[u8], p: usize) -> Option<usize> {
    let end = string_stop(b, p + 1)?;
    (b[end] == b'"').then_some(end)
}

/// The position after the number-like bytes starting at `p` (digits, signs, `.`, `e`):
/// sixteen bytes at a time (`number_bytes_16`), the last few of the text one by one.
#[inline(always)]
pub fn number_end(b: &[u8], p: usize) -> usize {
    run_end(b, p, number_bytes_16, |c| NUMBER[c as usize])
}

/// Bit `i` set where byte `i` of `w` can continue a JSON number (see [`NUMBER`]).
#[cfg(target_arch = "x86_64")]
#[inline]
fn number_bytes_16(w: &[u8; 16]) -> u32 {
    use std::arch::x86_64::*;
    // SSE2 is part of the x86_64 baseline; the unaligned load reads the 16 bytes of `w`.
    unsafe {
        let v = _mm_loadu_si128(w.as_ptr().cast::<__m128i>());
        // A digit is a byte whose distance above `0` is at most 9 (unsigned).
        let d = _mm_sub_epi8(v, _mm_set1_epi8(b'0' as i8));
        let digit = _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d);
        let eq = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
        // `e` and `E` differ in one bit (0x20).
        let e = _mm_cmpeq_epi8(
            _mm_or_si128(v, _mm_set1_epi8(0x20)),
            _mm_set1_epi8(b'e' as i8),
        );
        let m = _mm_or_si128(
            _mm_or_si128(digit, e),
            _mm_or_si128(eq(b'.'), _mm_or_si128(eq(b'-'), eq(b'+'))),
        );
        _mm_movemask_epi8(m) as u32
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn number_bytes_16(w: &[u8; 16]) -> u32 {
    class_16_portable(w, |c| NUMBER[c as usize])
}

/// A cursor over JSON text, given as bytes not yet checked to be UTF-8: what it hands out as
/// text is checked, what it only passes over is not (see [`text_of`]).
pub struct Scan<'a> {
    text: &'a [u8],
    pos: usize,
}

/// `text[from..to]` as a string, or [`Bail`] when it is out of range or not UTF-8.
///
/// The scanner reads a chunk of a mapped file without validating it first: a pass over the
/// whole chunk reads it from memory once more, where the scan's own reading overlaps with its
/// work. What it keeps is checked instead: strings are searched for their closing quote with
/// a test for bytes that are not ASCII folded in ([`string_stop`]), so a plain ASCII string
/// costs nothing more ([`ascii_text`]); numbers are ASCII by how they are found; anything
/// else (a raw array, an escaped string) goes through this test. Bytes only passed over (an
/// argument it does not read) are never made text, so they need no check. Text that is not
/// UTF-8 bails, and the caller's slow path validates the chunk and reports where it is
/// wrong, as before.
#[inline(always)]
pub(crate) fn text_of(text: &[u8], from: usize, to: usize) -> Scanned<&str> {
    let bytes = text.get(from..to).ok_or(Bail)?;
    if ascii_at(text, from, to) {
        // SAFETY: ASCII bytes are UTF-8.
        Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).map_err(|_| Bail)
    }
}

/// `text[from..to]` as a string, without a test.
///
/// # Safety
/// `from <= to <= text.len()`, and every byte in the range is ASCII: a string's text before
/// the stop [`string_stop`] found at its closing quote, or a number's bytes.
#[inline(always)]
pub(crate) unsafe fn ascii_text(text: &[u8], from: usize, to: usize) -> &str {
    debug_assert!(from <= to && to <= text.len() && text[from..to].is_ascii());
    // SAFETY: in range and ASCII (so UTF-8), by the caller's promise.
    unsafe { std::str::from_utf8_unchecked(text.get_unchecked(from..to)) }
}

/// Whether `text[from..to]` (in range) is ASCII, sixteen bytes at a time: the last block is
/// read whole where the text goes on past `to`, its bytes beyond `to` masked off, so a short
/// value costs one load and one test.
#[inline(always)]
fn ascii_at(text: &[u8], from: usize, to: usize) -> bool {
    let mut at = from;
    while at + 16 <= to {
        match text.get(at..).and_then(|r| r.first_chunk::<16>()) {
            Some(w) if high_bits_16(w) == 0 => at += 16,
            _ => return false,
        }
    }
    let rest = to - at;
    if rest == 0 {
        return true;
    }
    match text.get(at..).and_then(|r| r.first_chunk::<16>()) {
        Some(w) => high_bits_16(w) & ((1u32 << rest) - 1) == 0,
        None => text.get(at..to).is_some_and(<[u8]>::is_ascii),
    }
}

/// Bit `i` set where byte `i` of `w` has its high bit set (is not ASCII).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn high_bits_16(w: &[u8; 16]) -> u32 {
    use std::arch::x86_64::*;
    // SSE2 is part of the x86_64 baseline; the unaligned load reads the 16 bytes of `w`.
    unsafe { _mm_movemask_epi8(_mm_loadu_si128(w.as_ptr().cast::<__m128i>())) as u32 }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn high_bits_16(w: &[u8; 16]) -> u32 {
    high_bits_16_portable(w)
}

/// Portable [`high_bits_16`].
#[cfg(any(test, not(target_arch = "x86_64")))]
fn high_bits_16_portable(w: &[u8; 16]) -> u32 {
    (0..16).fold(0, |m, i| m | (u32::from(w[i] >> 7) << i))
}

impl<'a> Scan<'a> {
    /// A scanner at the start of `text`.
    pub fn new(text: &'a [u8]) -> Self {
        Scan { text, pos: 0 }
    }

    /// A scanner at byte `pos` of `text` (for a reader that keeps its own position and hands
    /// the uncommon values to the scanner).
    #[inline(always)]
    pub fn at(text: &'a [u8], pos: usize) -> Self {
        Scan { text, pos }
    }

    /// The byte position in the text.
    #[inline(always)]
    pub fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    fn bytes(&self) -> &'a [u8] {
        self.text
    }

    /// Skips whitespace and returns the next byte, if any.
    #[inline]
    pub fn peek(&mut self) -> Option<u8> {
        let b = self.bytes();
        self.pos = skip_ws(b, self.pos);
        b.get(self.pos).copied()
    }

    /// Consumes `c` (after whitespace) or bails.
    #[inline]
    pub fn eat(&mut self, c: u8) -> Scanned<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// True when only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Reads a string (the scanner is at its opening quote, after whitespace): borrowed when
    /// it has no escapes.
    #[inline]
    pub fn string(&mut self) -> Scanned<Cow<'a, str>> {
        self.eat(b'"')?;
        let b = self.bytes();
        let start = self.pos;
        let end = string_stop(b, start).ok_or(Bail)?;
        if b[end] == b'"' {
            self.pos = end + 1;
            // SAFETY: the stop is the closing quote, so every byte before it is ASCII.
            return Ok(Cow::Borrowed(unsafe { ascii_text(self.text, start, end) }));
        }
        if b[end] != b'\\' {
            // Text that is not ASCII: borrowed too when it has no escape, once checked.
            let close = quote_or_backslash(b, end).ok_or(Bail)?;
            if b[close] == b'"' {
                self.pos = close + 1;
                return Ok(Cow::Borrowed(text_of(self.text, start, close)?));
            }
        }
        self.escaped_string(start, end - start)
    }

    /// The rest of [`Scan::string`] for a string with an escape: `start` is where its text
    /// begins, the first `k` bytes of which hold no quote or backslash.
    #[inline(never)]
    fn escaped_string(&mut self, start: usize, k: usize) -> Scanned<Cow<'a, str>> {
        let b = self.bytes();
        let mut out = String::with_capacity(k + 16);
        let mut at = start;
        loop {
            let k = memchr2(b'"', b'\\', &b[at..]).ok_or(Bail)?;
            out.push_str(text_of(self.text, at, at + k)?);
            at += k;
            if b[at] == b'"' {
                self.pos = at + 1;
                return Ok(Cow::Owned(out));
            }
            let esc = *b.get(at + 1).ok_or(Bail)?;
            at += 2;
            match esc {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let hi = self.hex4(at)?;
                    at += 4;
                    let c = if (0xD800..0xDC00).contains(&hi) {
                        // A high surrogate must be followed by an escaped low one.
                        if b.get(at) != Some(&b'\\') || b.get(at + 1) != Some(&b'u') {
                            return Err(Bail);
                        }
                        let lo = self.hex4(at + 2)?;
                        if !(0xDC00..0xE000).contains(&lo) {
                            return Err(Bail);
                        }
                        at += 6;
                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                    } else {
                        hi
                    };
                    out.push(char::from_u32(c).ok_or(Bail)?);
                }
                _ => return Err(Bail),
            }
        }
    }

    fn hex4(&self, at: usize) -> Scanned<u32> {
        let h = self.bytes().get(at..at + 4).ok_or(Bail)?;
        let mut v = 0u32;
        for &c in h {
            v = v * 16 + (c as char).to_digit(16).ok_or(Bail)?;
        }
        Ok(v)
    }

    /// Skips a string without decoding it.
    fn skip_string(&mut self) -> Scanned<()> {
        self.pos = string_end(self.bytes(), self.pos + 1)?;
        Ok(())
    }

    fn skip_number(&mut self) -> Scanned<()> {
        let start = self.pos;
        self.pos = number_end(self.bytes(), start);
        if self.pos == start { Err(Bail) } else { Ok(()) }
    }

    fn literal(&mut self, word: &[u8]) -> Scanned<()> {
        if self.bytes()[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// Skips one value of any kind and returns its text, exactly as written.
    pub fn skip_value(&mut self) -> Scanned<&'a str> {
        let c = self.peek().ok_or(Bail)?;
        let start = self.pos;
        match c {
            b'"' => self.skip_string()?,
            b'{' | b'[' => self.skip_container()?,
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => self.skip_number()?,
            _ => return Err(Bail),
        }
        text_of(self.text, start, self.pos)
    }

    /// Skips the rest of the object the scanner is in (after one of its values), up to and
    /// including its closing brace.
    pub fn skip_rest_of_object(&mut self) -> Scanned<()> {
        self.skip_nested(1)
    }

    /// Skips an object or array, tracking only strings and nesting: the values inside are
    /// not needed, only where the container ends.
    fn skip_container(&mut self) -> Scanned<()> {
        self.skip_nested(0)
    }

    /// Skips to the end of the container `depth` levels up (0: the one starting here).
    ///
    /// Sixty-four bytes at a time: [`classify`] marks the quotes, backslashes and brackets of
    /// a block with wide compares, a prefix XOR of the quote bits marks what lies inside
    /// strings, and a block whose closing brackets cannot bring the depth to zero is passed
    /// over with two popcounts. Only the block where the container ends is walked bracket by
    /// bracket. A block holding a backslash (an escape) is read the scalar way, as are strings
    /// that run into one, and the last bytes of the text; the result is the same as reading
    /// every byte: strings skipped with their escapes, nesting deeper than [`MAX_DEPTH`] or an
    /// unclosed container bail.
    fn skip_nested(&mut self, mut depth: u32) -> Scanned<()> {
        let b = self.bytes();
        let mut at = self.pos;
        // Where the scalar reading of a block with a backslash ends.
        let mut scalar_until = 0;
        loop {
            if at >= scalar_until
                && let Some(block) = b.get(at..at + 64)
            {
                let m = classify(block);
                if m.backslash == 0 {
                    let in_str = prefix_xor(m.quote);
                    // A letter right after a closing quote is no JSON: a quote inside a
                    // string that was not escaped. Skipping on would read the rest of the
                    // text with strings and structure swapped and lose events in silence;
                    // serde then says where the text is wrong.
                    // (Only bytes inside the container count: it may end in this block.)
                    let closing = m.quote & !in_str;
                    let bad = (closing << 1) & m.word & !m.close;
                    let bad_next = closing >> 63 == 1 && !after_string_ok(b, at + 64);
                    let open = m.open & !in_str;
                    let close = m.close & !in_str;
                    if depth > close.count_ones() && depth + open.count_ones() <= MAX_DEPTH {
                        if bad != 0 || bad_next {
                            return Err(Bail);
                        }
                        depth = depth + open.count_ones() - close.count_ones();
                    } else {
                        let mut bits = open | close;
                        while bits != 0 {
                            let i = bits.trailing_zeros();
                            bits &= bits - 1;
                            if open >> i & 1 == 1 {
                                depth += 1;
                                if depth > MAX_DEPTH {
                                    return Err(Bail);
                                }
                            } else {
                                depth = depth.checked_sub(1).ok_or(Bail)?;
                                if depth == 0 {
                                    if bad & ((1u64 << i) - 1) != 0 {
                                        return Err(Bail);
                                    }
                                    self.pos = at + i as usize + 1;
                                    return Ok(());
                                }
                            }
                        }
                        if bad != 0 || bad_next {
                            return Err(Bail);
                        }
                    }
                    at += 64;
                    if in_str >> 63 == 1 {
                        // A string runs on past the block: find its end (escapes and all).
                        at = string_end(b, at)?;
                        if !after_string_ok(b, at) {
                            return Err(Bail);
                        }
                    }
                    continue;
                }
                scalar_until = at + 64;
            }
            let c = *b.get(at).ok_or(Bail)?;
            match c {
                b'{' | b'[' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(Bail);
                    }
                    at += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1).ok_or(Bail)?;
                    at += 1;
                    if depth == 0 {
                        self.pos = at;
                        return Ok(());
                    }
                }
                b'"' => {
                    at = string_end(b, at + 1)?;
                    if !after_string_ok(b, at) {
                        return Err(Bail);
                    }
                }
                _ => at += 1,
            }
        }
    }

    /// The raw text of a value, `None` for `null` (as serde gives `Option<&RawValue>`).
    pub fn raw(&mut self) -> Scanned<Option<&'a str>> {
        let v = self.skip_value()?;
        Ok((v != "null").then_some(v))
    }

    /// A lenient number (see [`Num`]).
    pub fn num(&mut self) -> Scanned<Num> {
        match self.peek().ok_or(Bail)? {
            b'"' => {
                let s = self.string()?;
                let s = s.trim();
                if let Ok(i) = s.parse::<i64>() {
                    return Ok(Num::Int(i));
                }
                Ok(Num::float(s.parse::<f64>().ok()))
            }
            b't' => self.literal(b"true").map(|_| Num::Int(1)),
            b'f' => self.literal(b"false").map(|_| Num::Int(0)),
            b'0'..=b'9' => {
                // Ids and sizes are plain non-negative integers: read them while scanning.
                let b = self.bytes();
                let start = self.pos;
                let mut v: u64 = 0;
                let mut at = start;
                while let Some(&c) = b.get(at)
                    && c.is_ascii_digit()
                    && at - start < 18
                {
                    v = v * 10 + (c - b'0') as u64;
                    at += 1;
                }
                let plain = b.get(at).is_none_or(|&c| !NUMBER[c as usize])
                    && (b[start] != b'0' || at - start == 1);
                if plain {
                    self.pos = at;
                    return Ok(Num::Int(v as i64));
                }
                self.skip_number()?;
                // SAFETY: a number's bytes are ASCII (`number_end`).
                number(unsafe { ascii_text(self.text, start, self.pos) })
            }
            b'-' => {
                let start = self.pos;
                self.skip_number()?;
                // SAFETY: a number's bytes are ASCII (`number_end`).
                number(unsafe { ascii_text(self.text, start, self.pos) })
            }
            _ => self.skip_value().map(|_| Num::default()),
        }
    }

    /// A lenient string (see [`LStr`]).
    pub fn lstr(&mut self) -> Scanned<LStr<'a>> {
        match self.peek().ok_or(Bail)? {
            b'"' => Ok(LStr(Some(self.string()?))),
            b't' => self
                .literal(b"true")
                .map(|_| LStr(Some(Cow::Borrowed("true")))),
            b'f' => self
                .literal(b"false")
                .map(|_| LStr(Some(Cow::Borrowed("false")))),
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                self.skip_number()?;
                // SAFETY: a number's bytes are ASCII (`number_end`).
                let t = unsafe { ascii_text(self.text, start, self.pos) };
                // Integers read as their decimal text, floats as nothing (as serde visits them).
                Ok(LStr(match number(t)? {
                    Num::Int(i) => Some(Cow::Owned(i.to_string())),
                    Num::Float(_) => t.parse::<u64>().ok().map(|u| Cow::Owned(u.to_string())),
                    _ => None,
                }))
            }
            _ => self.skip_value().map(|_| LStr(None)),
        }
    }

    /// A lenient list of up to three dimensions (see [`Dims`]).
    pub fn dims(&mut self) -> Scanned<Dims> {
        if self.peek() != Some(b'[') {
            self.skip_value()?;
            return Ok(Dims::default());
        }
        let mut d = Dims::default();
        let mut k = 0;
        self.array(|s| {
            d.set(k, s.num()?.i64().unwrap_or(0));
            k += 1;
            Ok(())
        })?;
        Ok(d)
    }

    /// Reads an array: calls `item(self)` for each element, which must consume it. The
    /// scanner is at the opening bracket (after whitespace).
    pub fn array(&mut self, mut item: impl FnMut(&mut Self) -> Scanned<()>) -> Scanned<()> {
        self.eat(b'[')?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            item(self)?;
            if self.closes(b']')? {
                return Ok(());
            }
        }
    }

    /// After a member of a container: consumes `,` (false: more follow) or `close` (true).
    #[inline]
    fn closes(&mut self, close: u8) -> Scanned<bool> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(false)
            }
            Some(c) if c == close => {
                self.pos += 1;
                Ok(true)
            }
            _ => Err(Bail),
        }
    }

    /// Reads an object: calls `field(self, key)` for each key, which must consume the value
    /// and says whether the rest of the object is wanted; when not, the rest is skipped. The
    /// scanner is at the opening brace (after whitespace).
    pub fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &str) -> Scanned<bool>,
    ) -> Scanned<()> {
        self.eat(b'{')?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            self.peek();
            if !field(self, &key)? {
                return self.skip_nested(1);
            }
            if self.closes(b'}')? {
                return Ok(());
            }
        }
    }
}

/// A JSON number's text as serde_json classifies it: i64 when it is an integer that fits,
/// f64 otherwise; out of range is an error there, so it bails here.
fn number(t: &str) -> Scanned<Num> {
    let b = t.as_bytes();
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    // serde_json rejects leading zeros, a bare `-`, and `1.`/`.5`-style numbers.
    if digits.is_empty()
        || !digits[0].is_ascii_digit()
        || (digits[0] == b'0' && digits.len() > 1 && digits[1].is_ascii_digit())
    {
        return Err(Bail);
    }
    if digits.iter().all(u8::is_ascii_digit) {
        if let Ok(i) = t.parse::<i64>() {
            // serde_json reads `-0` as the float -0.0.
            if i == 0 && b[0] == b'-' {
                return Ok(Num::Float(-0.0));
            }
            return Ok(Num::Int(i));
        }
        let f: f64 = t.parse().map_err(|_| Bail)?;
        return Ok(Num::Float(f));
    }
    let f: f64 = t.parse().map_err(|_| Bail)?;
    if !f.is_finite() || t.ends_with('.') || t.contains(".e") || t.contains(".E") {
        return Err(Bail);
    }
    Ok(Num::Float(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_test_of_a_range_masks_the_bytes_past_it() {
        let text = "abc\u{e9}defghijklmnopqrstuvwxyz0123456789\u{e9}".as_bytes();
        let n = text.len();
        for from in 0..n {
            for to in from..=n {
                let want = text[from..to].is_ascii();
                assert_eq!(ascii_at(text, from, to), want, "{from}..{to}");
            }
        }
        let w: [u8; 16] =
            std::array::from_fn(|i| if i % 5 == 0 { 0x80 | i as u8 } else { i as u8 });
        assert_eq!(high_bits_16(&w), high_bits_16_portable(&w));
        assert_eq!(text_of(text, 0, 3), Ok("abc"));
        assert_eq!(text_of(text, 0, 5), Ok("abc\u{e9}"));
        assert_eq!(text_of(text, 0, 4), Err(Bail), "a character cut in two");
        assert_eq!(text_of(text, 3, n + 1), Err(Bail), "past the end");
    }

    #[test]
    fn strings_stop_at_the_first_byte_that_is_not_ascii() {
        let text = "\"ab\u{e9}cd\" \"plain\" \"0123456789abcdefghij\u{e9}\"".as_bytes();
        assert_eq!(string_stop(text, 1), Some(3));
        assert_eq!(plain_string_end(text, 0), None);
        assert_eq!(plain_string_end(text, 9), Some(15));
        assert_eq!(string_stop(text, 18), Some(38));
        let mut s = Scan::new(text);
        assert_eq!(s.string(), Ok(Cow::Borrowed("ab\u{e9}cd")));
        assert_eq!(s.peek(), Some(b'"'));
        assert_eq!(s.string(), Ok(Cow::Borrowed("plain")));
        assert_eq!(
            s.string().map(|t| t.into_owned()),
            Ok("0123456789abcdefghij\u{e9}".to_string())
        );
        // Bytes that are not UTF-8 in a string read as text bail.
        let bad = b"\"ab\xffcd\"";
        assert_eq!(Scan::new(bad).string(), Err(Bail));
        assert_eq!(Scan::new(bad).lstr().map(|_| ()), Err(Bail));
    }

    /// Every value the scanner reads must equal serde's reading of the same text.
    #[test]
    fn agrees_with_serde_on_leaf_values() {
        let cases = [
            "12",
            "-7",
            "0",
            "-0",
            "1.5",
            "1e3",
            "-2.5E-2",
            "18446744073709551615",
            "18446744073709551616",
            "9223372036854775808",
            "\"42\"",
            "\" 17 \"",
            "\"1.25\"",
            "\"x\"",
            "\"a\\\"b\\u00e9\\ud83d\\ude00\"",
            "true",
            "false",
            "null",
            "[1, 2.0, \"3\", 4]",
            "[]",
            "{\"a\": [1, {\"b\": \"]\"}]}",
            "[[1,2],[3]]",
        ];
        for c in cases {
            let n_serde: Num = serde_json::from_str(c).unwrap();
            let n_scan = Scan::new(c.as_bytes()).num().unwrap();
            assert_eq!(format!("{n_serde:?}"), format!("{n_scan:?}"), "num of {c}");
            let s_serde: LStr = serde_json::from_str(c).unwrap();
            assert_eq!(
                s_serde,
                Scan::new(c.as_bytes()).lstr().unwrap(),
                "lstr of {c}"
            );
            let d_serde: Dims = serde_json::from_str(c).unwrap();
            assert_eq!(
                d_serde,
                Scan::new(c.as_bytes()).dims().unwrap(),
                "dims of {c}"
            );
            let r_serde: Option<&serde_json::value::RawValue> = serde_json::from_str(c).unwrap();
            assert_eq!(
                r_serde.map(|r| r.get()),
                Scan::new(c.as_bytes()).raw().unwrap(),
                "raw of {c}"
            );
        }
    }

    #[test]
    fn bails_where_serde_fails() {
        for c in [
            "01",
            "-",
            "1.",
            ".5",
            "1e999",
            "\"\\x\"",
            "\"\\ud800\"",
            "\"open",
            "[1,",
            "tru",
        ] {
            assert!(serde_json::from_str::<Num>(c).is_err(), "serde accepts {c}");
            assert_eq!(
                Scan::new(c.as_bytes()).num(),
                Err(Bail),
                "scanner accepts {c}"
            );
        }
    }

    #[test]
    fn finds_the_first_quote_or_backslash() {
        let text = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789\"x";
        let b = text.as_bytes();
        for from in 0..b.len() {
            let want = b[from..]
                .iter()
                .position(|&c| c == b'"' || c == b'\\')
                .map(|k| from + k);
            assert_eq!(quote_or_backslash(b, from), want, "from {from}");
        }
        // Bytes above 0x7f (UTF-8) next to the target must not fake or hide a match.
        let t = "é\u{80}\u{ff}a\"";
        let b = t.as_bytes();
        assert_eq!(quote_or_backslash(b, 0), Some(b.len() - 1));
        assert_eq!(quote_or_backslash(b"\\\"", 0), Some(0));
        assert_eq!(quote_or_backslash(b"", 0), None);
    }

    /// The byte-at-a-time reading that [`Scan::skip_nested`] must agree with.
    fn skip_nested_bytewise(b: &[u8], mut pos: usize, mut depth: u32) -> Scanned<usize> {
        loop {
            match *b.get(pos).ok_or(Bail)? {
                b'{' | b'[' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(Bail);
                    }
                    pos += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1).ok_or(Bail)?;
                    pos += 1;
                    if depth == 0 {
                        return Ok(pos);
                    }
                }
                b'"' => {
                    let mut at = pos + 1;
                    loop {
                        match b.get(at) {
                            None => return Err(Bail),
                            Some(b'"') => break,
                            Some(b'\\') => at += 2,
                            Some(_) => at += 1,
                        }
                    }
                    pos = at + 1;
                    // A letter right after a closing quote is no JSON.
                    if b.get(pos)
                        .is_some_and(|&c| c > b'@' && c < 0x80 && c != b']' && c != b'}')
                    {
                        return Err(Bail);
                    }
                }
                _ => pos += 1,
            }
        }
    }

    #[test]
    fn block_skipping_agrees_with_reading_every_byte() {
        // A small xorshift generator: the same cases on every run.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabet = b"[]{}\"\\a ,1\xc3\xa9";
        for case in 0..20_000 {
            let len = (next() % 400) as usize;
            // Mostly plain bytes, so containers span blocks; deep nests now and then.
            let deep = case % 50 == 0;
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if deep && r % 3 == 0 {
                        b'['
                    } else if r % 4 == 0 {
                        // Half the cases without escapes, so most blocks take the wide path.
                        match alphabet[(r >> 8) as usize % alphabet.len()] {
                            b'\\' if case % 2 == 0 => b'y',
                            c => c,
                        }
                    } else {
                        b'x'
                    }
                })
                .collect();
            // Keep the text valid UTF-8 (the scanner reads &str): drop stray bytes.
            let text = String::from_utf8_lossy(&text).into_owned();
            let b = text.as_bytes();
            for start in [0, 1, 7] {
                if start > b.len() {
                    continue;
                }
                for depth in [0, 1, 2] {
                    let want = skip_nested_bytewise(b, start, depth);
                    let mut s = Scan::new(text.as_bytes());
                    s.pos = start;
                    let got = s.skip_nested(depth).map(|_| s.pos);
                    assert_eq!(
                        got, want,
                        "case {case} start {start} depth {depth}: {text:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn classify_marks_every_structural_byte() {
        let text: Vec<u8> = (0..64u8)
            .map(|i| b"\"\\[]{}x\x7b"[i as usize % 8])
            .collect();
        let m = classify(&text);
        for (i, &c) in text.iter().enumerate() {
            let bit = |mask: u64| mask >> i & 1 == 1;
            assert_eq!(bit(m.quote), c == b'"', "{i}");
            assert_eq!(bit(m.backslash), c == b'\\', "{i}");
            assert_eq!(bit(m.open), c == b'[' || c == b'{', "{i}");
            assert_eq!(bit(m.close), c == b']' || c == b'}', "{i}");
            assert_eq!(bit(m.word), c > b'@' && c < 0x80, "{i}");
        }
        assert_eq!(prefix_xor(0b1001_0010), 0b1110 | (!0u64 << 7));
    }

    #[test]
    fn wide_compares_agree_with_the_portable_ones() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5_000 {
            let mut block = [0u8; 64];
            for c in block.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *c = b"\"\\[]{}a \x80\xff\x7b\x5b\x020123456789.-+eE/:\n\r\t\x0b"
                    [(x >> 20) as usize % 33];
            }
            assert_eq!(classify_64(&block), classify_64_portable(&block));
            let w: &[u8; 16] = block.first_chunk().unwrap();
            assert_eq!(quote_or_backslash_16(w), quote_or_backslash_16_portable(w));
            assert_eq!(
                number_bytes_16(w),
                class_16_portable(w, |c| NUMBER[c as usize])
            );
            assert_eq!(whitespace_16(w), class_16_portable(w, is_whitespace));
        }
    }

    #[test]
    fn whitespace_and_number_ends_agree_with_reading_every_byte() {
        let mut x = 0x0123_4567_89ab_cdefu64;
        let alphabet = b"  \n\r\t0123456789.-+eE\"x,:\x01";
        for _ in 0..20_000 {
            let len = 1 + (x % 40) as usize;
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x >> 24) as usize % alphabet.len()]
                })
                .collect();
            for p in 0..text.len() {
                let ws = text[p..]
                    .iter()
                    .position(|c| !matches!(c, b' ' | b'\n' | b'\r' | b'\t'))
                    .map_or(text.len(), |k| p + k);
                assert_eq!(skip_ws(&text, p), ws, "{text:?} at {p}");
                let num = text[p..]
                    .iter()
                    .position(|&c| !NUMBER[c as usize])
                    .map_or(text.len(), |k| p + k);
                assert_eq!(number_end(&text, p), num, "{text:?} at {p}");
            }
        }
    }

    #[test]
    fn objects_and_skipping() {
        let text = r#" {"a": {"x": [1, "}", {"y": null}]}, "b\n": "v", "c": -3.5e1} tail"#;
        let mut s = Scan::new(text.as_bytes());
        let mut seen = Vec::new();
        s.object(|s, k| {
            seen.push((k.to_string(), s.skip_value()?.to_string()));
            Ok(true)
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                ("a".into(), r#"{"x": [1, "}", {"y": null}]}"#.into()),
                ("b\n".into(), "\"v\"".into()),
                ("c".into(), "-3.5e1".into()),
            ]
        );
        assert_eq!(s.peek(), Some(b't'));
        // A field can stop the object: the rest is skipped, strings and nesting included.
        let mut s = Scan::new(text.as_bytes());
        let mut keys = Vec::new();
        s.object(|s, k| {
            keys.push(k.to_string());
            s.skip_value()?;
            Ok(false)
        })
        .unwrap();
        assert_eq!(keys, vec!["a".to_string()]);
        assert_eq!(s.peek(), Some(b't'));
    }
}
