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

use crate::lenient::{Dims, LStr, Num};
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
/// 2 to 60 bytes: eight bytes at a time in a register (SWAR) beats both a byte loop and
/// memchr's setup there; long ones go to memchr.
#[inline]
fn quote_or_backslash(b: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut at = from;
    let limit = b.len().min(from + 64);
    while at + 8 <= limit {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        let w = u64::from_le_bytes(w);
        let q = w ^ (ONES * b'"' as u64);
        let s = w ^ (ONES * b'\\' as u64);
        // A zero byte in q or s marks a match; the lowest marked byte is exact.
        let hit = ((q.wrapping_sub(ONES) & !q) | (s.wrapping_sub(ONES) & !s)) & HIGH;
        if hit != 0 {
            return Some(at + (hit.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    if at + 8 <= b.len() {
        return memchr2(b'"', b'\\', &b[at..]).map(|k| at + k);
    }
    b[at.min(b.len())..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\')
        .map(|k| at + k)
}

/// A cursor over JSON text.
pub struct Scan<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Scan<'a> {
    /// A scanner at the start of `text`.
    pub fn new(text: &'a str) -> Self {
        Scan { text, pos: 0 }
    }

    #[inline]
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips whitespace and returns the next byte, if any.
    #[inline]
    pub fn peek(&mut self) -> Option<u8> {
        let b = self.bytes();
        while let Some(&c) = b.get(self.pos) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(c);
            }
            self.pos += 1;
        }
        None
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
    pub fn string(&mut self) -> Scanned<Cow<'a, str>> {
        self.eat(b'"')?;
        let b = self.bytes();
        let start = self.pos;
        let k = quote_or_backslash(b, start).ok_or(Bail)? - start;
        if b[start + k] == b'"' {
            self.pos = start + k + 1;
            // Both ends are ASCII quotes, so the slice is on char boundaries.
            return Ok(Cow::Borrowed(&self.text[start..start + k]));
        }
        let mut out = String::with_capacity(k + 16);
        let mut at = start;
        loop {
            let k = memchr2(b'"', b'\\', &b[at..]).ok_or(Bail)?;
            out.push_str(&self.text[at..at + k]);
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
        let b = self.bytes();
        let mut at = self.pos + 1;
        loop {
            at = quote_or_backslash(b, at).ok_or(Bail)?;
            if b[at] == b'"' {
                self.pos = at + 1;
                return Ok(());
            }
            at += 2;
            if at > b.len() {
                return Err(Bail);
            }
        }
    }

    fn skip_number(&mut self) -> Scanned<()> {
        let b = self.bytes();
        let start = self.pos;
        while b.get(self.pos).is_some_and(|&c| NUMBER[c as usize]) {
            self.pos += 1;
        }
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
        Ok(&self.text[start..self.pos])
    }

    /// Skips an object or array, tracking only strings and nesting: the values inside are
    /// not needed, only where the container ends.
    fn skip_container(&mut self) -> Scanned<()> {
        self.skip_nested(0)
    }

    /// Skips to the end of the container `depth` levels up (0: the one starting here).
    fn skip_nested(&mut self, mut depth: u32) -> Scanned<()> {
        let b = self.bytes();
        loop {
            let c = *b.get(self.pos).ok_or(Bail)?;
            match c {
                b'{' | b'[' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(Bail);
                    }
                    self.pos += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1).ok_or(Bail)?;
                    self.pos += 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                b'"' => self.skip_string()?,
                _ => self.pos += 1,
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
                number(&self.text[start..self.pos])
            }
            b'-' => {
                let start = self.pos;
                self.skip_number()?;
                number(&self.text[start..self.pos])
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
                let t = &self.text[start..self.pos];
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
            let n_scan = Scan::new(c).num().unwrap();
            assert_eq!(format!("{n_serde:?}"), format!("{n_scan:?}"), "num of {c}");
            let s_serde: LStr = serde_json::from_str(c).unwrap();
            assert_eq!(s_serde, Scan::new(c).lstr().unwrap(), "lstr of {c}");
            let d_serde: Dims = serde_json::from_str(c).unwrap();
            assert_eq!(d_serde, Scan::new(c).dims().unwrap(), "dims of {c}");
            let r_serde: Option<&serde_json::value::RawValue> = serde_json::from_str(c).unwrap();
            assert_eq!(
                r_serde.map(|r| r.get()),
                Scan::new(c).raw().unwrap(),
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
            assert_eq!(Scan::new(c).num(), Err(Bail), "scanner accepts {c}");
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

    #[test]
    fn objects_and_skipping() {
        let text = r#" {"a": {"x": [1, "}", {"y": null}]}, "b\n": "v", "c": -3.5e1} tail"#;
        let mut s = Scan::new(text);
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
        let mut s = Scan::new(text);
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
