//! Arrays remembered by their bytes: the shapes, types and constant inputs of a trace's
//! operators (`"Input Dims": [[16, 256, 512], []]`, `"Input type": ["c10::BFloat16",
//! "Scalar"]`) repeat from event to event, since a model runs the same layers over and over.
//!
//! [`Arrays::take`] first compares the bytes at an array's `[` with arrays read before; a
//! match is that array, found by comparing at most four sixteen-byte words instead of
//! walking its brackets and strings ([`Scan::skip_value`]). Why that is exact: where an array
//! ends depends only on its bytes up to its closing bracket, so the same bytes end at the same
//! place, and bytes that were ASCII are text.

use super::json_scan::{Scan, Scanned, ascii_text};

/// Sets of remembered arrays, chosen by the first sixteen bytes.
const SETS: usize = 128;

/// Arrays remembered per set. A set's arrays often start alike (`["c10::BFloat16", ...`):
/// eight ways found nine in ten of the arrays of a torch training trace where four found
/// eight in ten.
const WAYS: usize = 8;

/// The longest array remembered: the arrays of a torch trace average 27 bytes, and 98% of
/// them are at most this long.
const LONGEST: usize = 64;

/// One set: the arrays' lengths (0: empty), the way to fill next, the arrays' bytes.
#[derive(Clone)]
struct Set {
    lens: [u8; WAYS],
    next: u8,
    bytes: [[u8; LONGEST]; WAYS],
}

/// Arrays read before, by their bytes (64 KiB, per scanner).
pub struct Arrays {
    sets: Box<[Set]>,
}

impl Default for Arrays {
    fn default() -> Self {
        let empty = Set {
            lens: [0; WAYS],
            next: 0,
            bytes: [[0; LONGEST]; WAYS],
        };
        Arrays {
            sets: vec![empty; SETS].into_boxed_slice(),
        }
    }
}

impl Arrays {
    /// The array whose `[` is at `p`: its text and the position after it, as
    /// [`Scan::skip_value`] gives them.
    #[inline]
    pub fn take<'a>(&mut self, text: &'a [u8], p: usize) -> Scanned<(&'a str, usize)> {
        let Some(head) = text.get(p..).and_then(|t| t.first_chunk::<16>()) else {
            return read(text, p);
        };
        let k = slot(head);
        if let Some(len) = self.find(k, text, p) {
            // SAFETY: the bytes in range equal an array's that was remembered only when
            // ASCII (below).
            return Ok((unsafe { ascii_text(text, p, p + len) }, p + len));
        }
        let (v, end) = read(text, p)?;
        if v.len() <= LONGEST && v.is_ascii() {
            let set = &mut self.sets[k];
            let w = usize::from(set.next);
            set.bytes[w][..v.len()].copy_from_slice(v.as_bytes());
            set.lens[w] = v.len() as u8;
            set.next = ((w + 1) % WAYS) as u8;
        }
        Ok((v, end))
    }

    /// The length of the array of set `k` that the bytes at `p` start with.
    #[inline(always)]
    fn find(&self, k: usize, text: &[u8], p: usize) -> Option<usize> {
        let set = &self.sets[k];
        #[cfg(target_arch = "x86_64")]
        if let Some(t) = text.get(p..).and_then(|t| t.first_chunk::<LONGEST>()) {
            return find_sse2(set, t);
        }
        (0..WAYS).find_map(|w| {
            let len = usize::from(set.lens[w]);
            (len != 0 && same(text, p, &set.bytes[w], len)).then_some(len)
        })
    }
}

/// [`Arrays::find`] where sixty-four bytes of text follow: the text is loaded once, and each
/// way compared with it in four wide compares, a bit per byte.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn find_sse2(set: &Set, t: &[u8; LONGEST]) -> Option<usize> {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86_64; every load reads 16 of the 64 bytes of `t` or of an
    // entry (unaligned loads).
    unsafe {
        let load = |b: &[u8; LONGEST], k: usize| _mm_loadu_si128(b.as_ptr().add(k).cast());
        let text = [load(t, 0), load(t, 16), load(t, 32), load(t, 48)];
        for w in 0..WAYS {
            let len = usize::from(set.lens[w]);
            if len == 0 {
                continue;
            }
            let e = &set.bytes[w];
            let mut eq = 0u64;
            for (i, word) in text.iter().enumerate() {
                let m = _mm_movemask_epi8(_mm_cmpeq_epi8(*word, load(e, 16 * i))) as u16;
                eq |= u64::from(m) << (16 * i);
            }
            let need = u64::MAX >> (LONGEST - len);
            if eq & need == need {
                return Some(len);
            }
        }
    }
    None
}

/// Reads the value at `p` the long way.
fn read(text: &[u8], p: usize) -> Scanned<(&str, usize)> {
    let mut s = Scan::at(text, p);
    let v = s.skip_value()?;
    Ok((v, s.pos()))
}

/// The set for an array starting with `head`.
#[inline(always)]
fn slot(head: &[u8; 16]) -> usize {
    let x = u128::from_le_bytes(*head);
    let v = (x as u64) ^ ((x >> 64) as u64).rotate_left(31);
    (v.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SETS.trailing_zeros())) as usize
}

/// Whether `text[p..p + len]` equals `entry[..len]` (`0 < len <= LONGEST`).
#[inline(always)]
fn same(text: &[u8], p: usize, entry: &[u8; LONGEST], len: usize) -> bool {
    let Some(t) = text.get(p..).and_then(|t| t.first_chunk::<LONGEST>()) else {
        return text.get(p..p + len) == entry.get(..len);
    };
    // Sixteen bytes at a time, the bytes past `len` of the last word masked off.
    let word = |b: &[u8; LONGEST], k: usize| {
        let mut w = [0u8; 16];
        w.copy_from_slice(&b[k..k + 16]);
        u128::from_le_bytes(w)
    };
    let mut k = 0;
    while k < len && k + 16 <= LONGEST {
        let d = word(t, k) ^ word(entry, k);
        let left = len - k;
        if left < 16 {
            return d & ((1u128 << (8 * left)) - 1) == 0;
        }
        if d != 0 {
            return false;
        }
        k += 16;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The long way's answer for the value at `p`, or `None` where it bails.
    fn long_way(text: &[u8], p: usize) -> Option<(String, usize)> {
        read(text, p).ok().map(|(v, e)| (v.to_string(), e))
    }

    #[test]
    fn remembered_arrays_read_as_the_long_way() {
        // Arrays that repeat, that start alike and differ later, longer than remembered,
        // with escapes, not ASCII, cut short at the end, and near the end of the text.
        let arrays: &[&str] = &[
            r#"[[16, 256, 512], []]"#,
            r#"[[16, 256, 512]]"#,
            r#"[[16, 256, 512], [512]]"#,
            r#"["c10::BFloat16", "Scalar", "Scalar"]"#,
            r#"["c10::BFloat16", "Scalar"]"#,
            r#"["c10::BFloat16", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"]"#,
            r#"["", "[4096, 512]"]"#,
            r#"["a\"]b", "c"]"#,
            r#"["é"]"#,
            r#"[]"#,
            r#"[[1, 2], [3, 4]], [5]"#,
            r#"["x]"]"#,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut text = String::new();
        let mut starts = Vec::new();
        for _ in 0..3000 {
            text.push_str(r#", "Input Dims": "#);
            starts.push(text.len());
            let a = arrays[(next() % arrays.len() as u64) as usize];
            // Now and then one byte changed, so a near miss must not match.
            let mut a = a.to_string();
            if next() % 5 == 0 {
                let k = (next() % a.len() as u64) as usize;
                if a.is_char_boundary(k) && a.is_char_boundary(k + 1) {
                    a.replace_range(k..k + 1, ["1", "]", "\"", "x", "["][(next() % 5) as usize]);
                }
            }
            text.push_str(&a);
        }
        // The last one cut short.
        text.push_str(r#", "Input Dims": [[16, 256"#);
        starts.push(text.len() - 10);
        let b = text.as_bytes();
        let mut cache = Arrays::default();
        let mut hits = 0;
        for &p in &starts {
            let want = long_way(b, p);
            let remembered = b
                .get(p..)
                .and_then(|t| t.first_chunk::<16>())
                .and_then(|h| cache.find(slot(h), b, p));
            let got = cache.take(b, p).ok().map(|(v, e)| (v.to_string(), e));
            assert_eq!(
                got,
                want,
                "at {p}: {:?}",
                &text[p..(p + 40).min(text.len())]
            );
            hits += usize::from(remembered.is_some());
        }
        // Most were found remembered (the test is not only of the long way).
        assert!(hits > starts.len() / 2, "{hits} of {}", starts.len());
    }

    #[test]
    fn comparison_stops_at_the_length() {
        let mut e = [0u8; LONGEST];
        e[..5].copy_from_slice(b"[1,2]");
        let mut text = b"[1,2]xxxx".to_vec();
        text.resize(100, b'y');
        for len in 1..=5 {
            assert!(same(&text, 0, &e, len));
        }
        text[4] = b'3';
        assert!(!same(&text, 0, &e, 5));
        // Near the end of the text, the short way.
        assert!(same(b"[1,2]", 0, &e, 5));
        assert!(!same(b"[1,2", 0, &e, 5));
    }
}
