//! The members of objects of one shape, read again and again: a trace's events, their
//! `args`.
//!
//! A writer prints every event with the same template, so the bytes between one member's
//! value and the next one's (`, "cat": `, `,\n    "ts": `) repeat from event to event, and
//! so does the order of the keys. [`Members`] remembers, for each key, what followed its
//! value the last time; the next object is first compared with that (two 16-byte compares)
//! and only read key by key — whitespace, comma, quotes, colon, the key's text matched
//! against the known ones — where it differs. What a remembered run of bytes stands for was
//! worked out by that reading from the same bytes, so both ways give the same key and the
//! same position of its value.

use super::json_scan::{Bail, Scan, Scanned, ascii_text, plain_string_end, skip_ws};

/// The longest run of bytes between two values that is remembered. Nearly every separator of
/// a torch trace fits (`,      "registers per thread": ` is 31 bytes); the one that does not,
/// `,      "est. achieved occupancy %": ` (36), is read key by key, once per kernel.
const SPAN: usize = 32;

/// Keys remembered per object shape (a torch trace's events and args have some 50 in all).
const KEYS: usize = 64;

/// The runs remembered after each key, most recently taken first: a torch trace's args
/// follow a key with at most three others (two leave a few in a hundred to read key by key).
const WAYS: usize = 3;

/// The node before an object's first key: its `{`.
const START: u8 = 0;

/// No node: the key before was not remembered, so nothing is predicted or recorded.
const NONE: u8 = u8::MAX;

/// One step through an object's members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A member.
    Member {
        /// The key's arm: the caller's number for it.
        arm: u8,
        /// The position of its value.
        value: usize,
    },
    /// The object closed: the position after its `}`.
    End(usize),
}

/// What followed a key's value the last time: the bytes up to the next value (or through
/// the `}`), and where they lead.
#[derive(Clone, Copy)]
struct Follow {
    bytes: [u8; SPAN],
    /// Bit `i` set for each byte `i` of the run (0: nothing remembered).
    need: u32,
    len: u8,
    /// The node of the next key, or [`NONE`] when the run closes the object.
    to: u8,
    /// The next key's arm.
    arm: u8,
}

const NO_FOLLOW: Follow = Follow {
    bytes: [0; SPAN],
    need: 0,
    len: 0,
    to: NONE,
    arm: 0,
};

/// The member separators and key order of one object shape, as last seen. Node 0 is the
/// object's start; the others are keys, in the order they were first met.
pub struct Members {
    follows: [[Follow; WAYS]; KEYS],
    keys: [([u8; SPAN], u8); KEYS],
    len: u8,
}

impl Default for Members {
    fn default() -> Self {
        Members {
            follows: [[NO_FOLLOW; WAYS]; KEYS],
            keys: [([0; SPAN], 0); KEYS],
            len: 1,
        }
    }
}

/// A cursor through one object's members: the node of the key read last.
#[derive(Debug, Clone, Copy)]
pub struct Cursor(u8);

impl Cursor {
    /// Before the object's first member, at its `{`.
    pub const fn start() -> Self {
        Cursor(START)
    }
}

impl Members {
    /// The next member of the object being read, from `p`: its `{` when `at` is
    /// [`Cursor::start`], else the position after the value of the member before. `arm_of`
    /// numbers a key; the numbers are the caller's, and a remembered key keeps the number it
    /// was given.
    #[inline(always)]
    pub fn next(
        &mut self,
        text: &[u8],
        p: usize,
        at: &mut Cursor,
        arm_of: impl Fn(&str) -> u8,
    ) -> Scanned<Step> {
        if let Some(ways) = self.follows.get_mut(at.0 as usize)
            && let Some(w) = text.get(p..).and_then(|r| r.first_chunk::<SPAN>())
        {
            for k in 0..WAYS {
                let f = &ways[k];
                if f.need == 0 {
                    break;
                }
                if equal_32(w, &f.bytes) & f.need != f.need {
                    continue;
                }
                let q = p + f.len as usize;
                // A value starts at the first byte that is not whitespace: reading key by
                // key would go on past more of it.
                if f.to != NONE && text.get(q).is_none_or(|&c| c <= b' ') {
                    break;
                }
                let (to, arm) = (f.to, f.arm);
                // The run taken moves to the front, so an object that alternates between
                // two shapes finds each at once or second.
                if k > 0 {
                    ways.swap(0, k);
                }
                if to == NONE {
                    return Ok(Step::End(q));
                }
                at.0 = to;
                return Ok(Step::Member { arm, value: q });
            }
        }
        self.read(text, p, at, &arm_of)
    }

    /// [`Members::next`] key by key, remembering what it read.
    #[inline(never)]
    fn read(
        &mut self,
        text: &[u8],
        p: usize,
        at: &mut Cursor,
        arm_of: &impl Fn(&str) -> u8,
    ) -> Scanned<Step> {
        let from = at.0;
        let key_at = if from == START {
            let q = skip_ws(text, p + 1);
            if text.get(q) == Some(&b'}') {
                self.remember(text, from, p, q + 1, (NONE, 0));
                return Ok(Step::End(q + 1));
            }
            q
        } else {
            match next_member(text, p)? {
                Ok(q) => q,
                Err(end) => {
                    self.remember(text, from, p, end, (NONE, 0));
                    return Ok(Step::End(end));
                }
            }
        };
        let mut spill = String::new();
        let (key, value, plain) = scan_key(text, key_at, &mut spill)?;
        let arm = arm_of(key);
        at.0 = match plain.then(|| self.node(key)).flatten() {
            Some(node) => {
                self.remember(text, from, p, value, (node, arm));
                node
            }
            None => NONE,
        };
        Ok(Step::Member { arm, value })
    }

    /// The node of `key`, added if it is new; `None` when the table is full or the key too
    /// long to keep.
    fn node(&mut self, key: &str) -> Option<u8> {
        let k = key.as_bytes();
        if k.len() > SPAN {
            return None;
        }
        let known = &self.keys[1..self.len as usize];
        if let Some(i) = known
            .iter()
            .position(|(b, n)| *n as usize == k.len() && &b[..k.len()] == k)
        {
            return Some(i as u8 + 1);
        }
        let i = self.len as usize;
        if i == KEYS {
            return None;
        }
        let mut b = [0; SPAN];
        b[..k.len()].copy_from_slice(k);
        self.keys[i] = (b, k.len() as u8);
        self.len += 1;
        Some(i as u8)
    }

    /// Remembers that `bytes[p..q]` followed node `from` and led to node `to`, whose key has
    /// arm `arm`, in front of the runs remembered before (the oldest is dropped).
    fn remember(&mut self, bytes: &[u8], from: u8, p: usize, q: usize, (to, arm): (u8, u8)) {
        let (Some(ways), Some(run)) = (
            self.follows.get_mut(from as usize),
            bytes.get(p..q).filter(|r| !r.is_empty() && r.len() <= SPAN),
        ) else {
            return;
        };
        let mut b = [0; SPAN];
        b[..run.len()].copy_from_slice(run);
        ways.rotate_right(1);
        ways[0] = Follow {
            bytes: b,
            need: u32::MAX >> (SPAN - run.len()),
            len: run.len() as u8,
            to,
            arm,
        };
    }
}

/// Bit `i` set where byte `i` of `a` equals byte `i` of `b`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn equal_32(a: &[u8; SPAN], b: &[u8; SPAN]) -> u32 {
    use std::arch::x86_64::*;
    // SSE2 is part of the x86_64 baseline; the unaligned loads read the 32 bytes of each.
    unsafe {
        let lo = _mm_cmpeq_epi8(
            _mm_loadu_si128(a.as_ptr().cast::<__m128i>()),
            _mm_loadu_si128(b.as_ptr().cast::<__m128i>()),
        );
        let hi = _mm_cmpeq_epi8(
            _mm_loadu_si128(a.as_ptr().add(16).cast::<__m128i>()),
            _mm_loadu_si128(b.as_ptr().add(16).cast::<__m128i>()),
        );
        (_mm_movemask_epi8(lo) as u32 & 0xffff) | ((_mm_movemask_epi8(hi) as u32) << 16)
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn equal_32(a: &[u8; SPAN], b: &[u8; SPAN]) -> u32 {
    equal_32_portable(a, b)
}

/// Portable [`equal_32`], and what its test checks it against.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn equal_32_portable(a: &[u8; SPAN], b: &[u8; SPAN]) -> u32 {
    a.iter()
        .zip(b)
        .enumerate()
        .fold(0, |m, (i, (x, y))| m | (u32::from(x == y) << i))
}

/// Reads the key at `p` (its opening quote) and the colon after it: returns the key's text
/// (decoded into `spill` when it has an escape), the position of the value, and whether the
/// key was taken as it lies (no escape).
#[inline(always)]
fn scan_key<'t>(
    text: &'t [u8],
    p: usize,
    spill: &'t mut String,
) -> Scanned<(&'t str, usize, bool)> {
    if text.get(p) != Some(&b'"') {
        return Err(Bail);
    }
    let (key, after, plain) = match plain_string_end(text, p) {
        // SAFETY: `plain_string_end` stops at the first byte that is not ASCII, so the key's
        // text before its closing quote at `end` is ASCII.
        Some(end) => (unsafe { ascii_text(text, p + 1, end) }, end + 1, true),
        None => {
            let mut s = Scan::at(text, p);
            *spill = s.string()?.into_owned();
            (spill.as_str(), s.pos(), false)
        }
    };
    // `"key": value` is by far the most common spacing: tested before the general skips.
    let q = if text.get(after) == Some(&b':') {
        after
    } else {
        skip_ws(text, after)
    };
    if text.get(q) != Some(&b':') {
        return Err(Bail);
    }
    Ok((key, skip_ws(text, q + 1), plain))
}

/// After a member of an object: `Ok` with the position of the next key (`,` consumed), or
/// `Err` with the position after the `}` when the object closed.
#[inline(always)]
fn next_member(bytes: &[u8], p: usize) -> Scanned<Result<usize, usize>> {
    let p = skip_ws(bytes, p);
    match bytes.get(p) {
        Some(b',') => Ok(Ok(skip_ws(bytes, p + 1))),
        Some(b'}') => Ok(Err(p + 1)),
        _ => Err(Bail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every member of the object at `p` read with `m`, as (key arm, value text), and the
    /// position after the object; values are numbers or strings without escapes.
    fn read_all(m: &mut Members, text: &str, p: usize) -> Scanned<(Vec<(u8, String)>, usize)> {
        let arm_of = |k: &str| k.len() as u8 * 3 + k.as_bytes().first().map_or(0, |c| c % 3);
        let mut at = Cursor::start();
        let mut got = Vec::new();
        let mut p = p;
        loop {
            match m.next(text.as_bytes(), p, &mut at, arm_of)? {
                Step::End(q) => return Ok((got, q)),
                Step::Member { arm, value } => {
                    let mut s = Scan::at(text.as_bytes(), value);
                    let v = s.skip_value()?;
                    got.push((arm, v.to_string()));
                    p = s.pos();
                }
            }
        }
    }

    #[test]
    fn remembered_members_read_as_key_by_key() {
        // The same shape again and again, then its spacing, key order, escapes and length
        // changed, and objects cut short or malformed: each read with a table that has seen
        // all before it must give what a fresh table (which reads key by key) gives.
        let objects = [
            r#"{"ph": "X", "cat": "k", "ts": 1, "args": 2}"#,
            r#"{"ph": "X", "cat": "k", "ts": 1, "args": 2}"#,
            r#"{"ph": "X", "cat": "k", "ts": 17, "args": 22}"#,
            r#"{"ph": "X",  "cat": "k", "ts": 1, "args": 2}"#,
            r#"{"ph": "X", "cat":  "k", "ts": 1, "args": 2}"#,
            r#"{"ph": "X", "cat": "k", "ts":1, "args": 2}"#,
            r#"{"ph": "X", "ts": 1, "cat": "k", "args": 2}"#,
            r#"{"ph": "X", "c\u0061t": "k", "ts": 1}"#,
            r#"{"ph": "X", "cat": "k", "a very long key that is more than thirty-two bytes": 1}"#,
            "{\n  \"ph\": \"X\",\n  \"cat\": \"k\"\n}",
            "{\n  \"ph\": \"X\",\n  \"cat\": \"k\"\n}",
            "{\n  \"ph\": \"X\",\n  \"cat\": \"k\"\n }",
            r#"{}"#,
            r#"{ }"#,
            r#"{"ph": "X", "cat": "k" "ts": 1}"#,
            r#"{"ph": "X", "cat" "k"}"#,
            r#"{"ph": "X", "cat": "k", "ts": 1, "args": 2"#,
        ];
        let mut warm = Members::default();
        for (i, o) in objects.iter().enumerate() {
            // Padding after the object, so the 32-byte compares reach past its end.
            let text = format!("{o}{}", " ".repeat(40));
            let want = read_all(&mut Members::default(), &text, 0);
            for round in 0..2 {
                assert_eq!(
                    read_all(&mut warm, &text, 0),
                    want,
                    "object {i}, round {round}"
                );
            }
        }
        // A remembered run that ends where more whitespace follows is not taken.
        let mut m = Members::default();
        let a = r#"{"ts": 1}                                        "#;
        let b = r#"{"ts":  1}                                       "#;
        read_all(&mut m, a, 0).unwrap();
        assert_eq!(
            read_all(&mut m, b, 0),
            read_all(&mut Members::default(), b, 0)
        );
    }

    #[test]
    fn a_full_table_still_reads_every_key() {
        let keys: Vec<String> = (0..100).map(|k| format!("k{k}")).collect();
        let body: Vec<String> = keys.iter().map(|k| format!("\"{k}\": 1")).collect();
        let text = format!("{{{}}}{}", body.join(", "), " ".repeat(40));
        let mut m = Members::default();
        for _ in 0..3 {
            let (got, end) = read_all(&mut m, &text, 0).unwrap();
            assert_eq!(got.len(), 100);
            assert_eq!(&text[end - 1..end], "}");
        }
    }

    #[test]
    fn wide_compare_agrees_with_the_portable_one() {
        let a: [u8; SPAN] = std::array::from_fn(|i| (i * 7 % 5) as u8);
        for shift in 0..5u8 {
            let b: [u8; SPAN] = std::array::from_fn(|i| (i as u8 + shift) % 5);
            assert_eq!(equal_32(&a, &b), equal_32_portable(&a, &b));
        }
    }
}
