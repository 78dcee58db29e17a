//! Lenient JSON leaf types: real traces mix ints, floats, strings and nulls in the same field
//! across versions, and one odd value must not reject a whole file.

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// A number that may arrive as int, float, numeric string, null or something else (-> None).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Num {
    /// Absent, null, or not a number.
    #[default]
    None,
    /// An integer that fits i64.
    Int(i64),
    /// Any other number.
    Float(f64),
}

impl Num {
    /// A float, or nothing.
    pub fn float(f: Option<f64>) -> Num {
        f.map_or(Num::None, Num::Float)
    }
    /// As i64 (floats truncated toward zero).
    pub fn i64(self) -> Option<i64> {
        match self {
            Num::None => None,
            Num::Int(i) => Some(i),
            Num::Float(f) => Some(f as i64),
        }
    }
    /// As u64 (negative -> None).
    pub fn u64(self) -> Option<u64> {
        self.i64().and_then(|v| u64::try_from(v).ok())
    }
    /// As f64.
    pub fn f64(self) -> Option<f64> {
        match self {
            Num::None => None,
            Num::Int(i) => Some(i as f64),
            Num::Float(f) => Some(f),
        }
    }
}

struct NumVisitor;

impl<'de> Visitor<'de> for NumVisitor {
    type Value = Num;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
        Ok(Num::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
        Ok(match i64::try_from(v) {
            Ok(i) => Num::Int(i),
            Err(_) => Num::Float(v as f64),
        })
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
        Ok(Num::Float(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Num, E> {
        Ok(Num::Int(v as i64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
        let v = v.trim();
        if let Ok(i) = v.parse::<i64>() {
            return Ok(Num::Int(i));
        }
        Ok(Num::float(v.parse::<f64>().ok()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Num, E> {
        Ok(Num::default())
    }
    fn visit_none<E: de::Error>(self) -> Result<Num, E> {
        Ok(Num::default())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Num, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Num::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Num, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Num::default())
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumVisitor)
    }
}

/// A string borrowed from the input when it has no escapes; anything that is not a string -> None.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LStr<'a>(pub Option<Cow<'a, str>>);

impl<'a> LStr<'a> {
    /// The string, or "".
    pub fn as_str(&self) -> &str {
        self.0.as_deref().unwrap_or("")
    }
}

struct LStrVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for LStrVisitor<'a> {
    type Value = LStr<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<LStr<'a>, E> {
        Ok(LStr(Some(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<LStr<'a>, E> {
        Ok(LStr(Some(Cow::Owned(v.to_owned()))))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<LStr<'a>, E> {
        Ok(LStr(Some(Cow::Owned(v))))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<LStr<'a>, E> {
        Ok(LStr(Some(Cow::Owned(v.to_string()))))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<LStr<'a>, E> {
        Ok(LStr(Some(Cow::Owned(v.to_string()))))
    }
    fn visit_f64<E: de::Error>(self, _v: f64) -> Result<LStr<'a>, E> {
        Ok(LStr(None))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<LStr<'a>, E> {
        Ok(LStr(Some(Cow::Owned(v.to_string()))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<LStr<'a>, E> {
        Ok(LStr(None))
    }
    fn visit_none<E: de::Error>(self) -> Result<LStr<'a>, E> {
        Ok(LStr(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LStr<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(LStr(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LStr<'a>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(LStr(None))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LStrVisitor(std::marker::PhantomData))
    }
}

/// The first three numbers of a list (`grid`, `block`), clamped to u32; a missing one reads as
/// 1, a non-number as 0, and anything that is not a list as `[1, 1, 1]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dims(pub [u32; 3]);

impl Default for Dims {
    fn default() -> Self {
        Dims([1; 3])
    }
}

impl Dims {
    /// Sets dimension `k` (ignored past the third).
    pub fn set(&mut self, k: usize, v: i64) {
        if let Some(d) = self.0.get_mut(k) {
            *d = v.clamp(0, u32::MAX as i64) as u32;
        }
    }
}

struct DimsVisitor;

impl<'de> Visitor<'de> for DimsVisitor {
    type Value = Dims;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of numbers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Dims, A::Error> {
        let mut d = Dims::default();
        let mut k = 0;
        while let Some(n) = seq.next_element::<Num>()? {
            d.set(k, n.i64().unwrap_or(0));
            k += 1;
        }
        Ok(d)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Dims, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Dims::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Dims, E> {
        Ok(Dims::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Dims, E> {
        Ok(Dims::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Dims, E> {
        Ok(Dims::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Dims, E> {
        Ok(Dims::default())
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Dims, E> {
        Ok(Dims::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Dims, E> {
        Ok(Dims::default())
    }
}

impl<'de> Deserialize<'de> for Dims {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DimsVisitor)
    }
}

/// The count of the ASCII digits that lead the eight bytes of `x` (the first byte is the
/// lowest) and their value (SWAR: the digits are found and combined in one 64-bit register,
/// pairs, then quads, then the halves).
#[inline(always)]
fn leading_digits(x: u64) -> (u64, usize) {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let t = x ^ 0x3030_3030_3030_3030;
    // A byte is a digit when it is 0..=9 after the xor: the high bit of each byte of `other`
    // is set where it is 10 or more (the low seven bits plus 0x76 cannot carry out of the
    // byte, and a byte of 0x80 or more has its high bit already).
    let other = (((t & LOW7) + 0x7676_7676_7676_7676) | t) & 0x8080_8080_8080_8080;
    let n = (other.trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // The digits to the top bytes, zeros below them: leading zeros of an eight-digit number.
    let d = t << (64 - 8 * n);
    let d = (d * 10 + (d >> 8)) & 0x00FF_00FF_00FF_00FF;
    let d = (d * 100 + (d >> 16)) & 0x0000_FFFF_0000_FFFF;
    ((d * 10000 + (d >> 32)) & 0xFFFF_FFFF, n)
}

/// Powers of ten up to eight digits' worth.
const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// [`us_text_to_ns`] of `123` or `123.456` (how torch writes them: at most 15 integer and 3
/// fractional digits), eight digits at a time; `None` for anything else.
#[inline(always)]
fn plain_us_to_ns(b: &[u8]) -> Option<i64> {
    let (mut v, mut k) = (0u64, 0usize);
    // Timestamps have 10 to 16 integer digits; at most 16 are read (v < 10^16 fits).
    while k <= 15 {
        let Some(w) = b.get(k..).and_then(|r| r.first_chunk::<8>()) else {
            while let Some(&c) = b.get(k)
                && c.is_ascii_digit()
                && k <= 15
            {
                v = v * 10 + u64::from(c - b'0');
                k += 1;
            }
            break;
        };
        let (d, n) = leading_digits(u64::from_le_bytes(*w));
        v = v * POW10[n] + d;
        k += n;
        if n < 8 {
            break;
        }
    }
    if k == 0 || k > 15 {
        return None;
    }
    let v = v as i64 * 1000;
    let digit = |c: u8| c.is_ascii_digit().then(|| i64::from(c - b'0'));
    match b.get(k..)? {
        [] => Some(v),
        [b'.', f @ ..] => match *f {
            [a] => Some(v + digit(a)? * 100),
            [a, c] => Some(v + digit(a)? * 100 + digit(c)? * 10),
            [a, c, d] => Some(v + digit(a)? * 100 + digit(c)? * 10 + digit(d)?),
            _ => None,
        },
        _ => None,
    }
}

/// Parses a JSON number of microseconds (`123`, `88437691101.729`, `1.6e3`, `"12"`) into
/// integer nanoseconds without going through f64 when the text is plain decimal, so that
/// epoch-scale timestamps keep their ns digits.
#[inline]
pub fn us_text_to_ns(text: &str) -> Option<i64> {
    match plain_us_to_ns(text.as_bytes()) {
        Some(ns) => Some(ns),
        None => any_us_to_ns(text),
    }
}

/// [`us_text_to_ns`] of any text: signs, exponents, quotes, more digits.
#[cold]
#[inline(never)]
fn any_us_to_ns(text: &str) -> Option<i64> {
    let t = text.trim().trim_matches('"');
    let (neg, digits) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let (int_part, frac_part) = match digits.split_once('.') {
        Some((i, f)) => (i, f),
        None => (digits, ""),
    };
    let plain = !int_part.is_empty()
        && int_part.bytes().all(|b| b.is_ascii_digit())
        && frac_part.bytes().all(|b| b.is_ascii_digit());
    if !plain {
        let f: f64 = t.parse().ok()?;
        if !f.is_finite() {
            return None;
        }
        return Some((f * 1000.0).round() as i64);
    }
    let mut v: i64 = 0;
    for b in int_part.bytes() {
        v = v.checked_mul(10)?.checked_add((b - b'0') as i64)?;
    }
    let mut frac: i64 = 0;
    let fb = frac_part.as_bytes();
    for k in 0..3 {
        frac = frac * 10 + fb.get(k).map_or(0, |b| (b - b'0') as i64);
    }
    // Round on the fourth fractional digit (sub-ns digits appear in float dumps).
    if fb.get(3).is_some_and(|&b| b >= b'5') {
        frac += 1;
    }
    let ns = v.checked_mul(1000)?.checked_add(frac)?;
    Some(if neg { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_digits_at_once_equal_one_at_a_time_and_the_general_reading() {
        let mut seed = 99u64;
        for n in 0..20_000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = match n % 4 {
                0 => seed >> 14,
                1 => seed % 100_000_000,
                2 => n,
                _ => seed >> 40,
            };
            let text = format!("{v}.{:03}", n % 1000);
            let slow: Option<i64> = text.split_once('.').and_then(|(i, f)| {
                i.parse::<i64>()
                    .ok()?
                    .checked_mul(1000)?
                    .checked_add(f.parse::<i64>().ok()?)
            });
            assert_eq!(us_text_to_ns(&text), slow, "{text}");
            // Every prefix (shorter integers, one or two fractional digits, a bare dot) and
            // the same with a byte changed, against the general reading.
            for cut in 1..=text.len() {
                let mut t = text[..cut].to_string();
                assert_eq!(us_text_to_ns(&t), general(&t), "{t}");
                let at = (seed as usize) % cut;
                let odd = [b'/', b':', b' ', b'-', b'e', b'.'][n as usize % 6] as char;
                t.replace_range(at..at + 1, &odd.to_string());
                assert_eq!(us_text_to_ns(&t), general(&t), "{t}");
            }
        }
        assert_eq!(
            leading_digits(u64::from_le_bytes(*b"12345678")),
            (12_345_678, 8)
        );
        assert_eq!(leading_digits(u64::from_le_bytes(*b"00000009")), (9, 8));
        assert_eq!(
            leading_digits(u64::from_le_bytes(*b"1234567/")),
            (1_234_567, 7)
        );
        assert_eq!(
            leading_digits(u64::from_le_bytes(*b"1234567:")),
            (1_234_567, 7)
        );
        assert_eq!(leading_digits(u64::from_le_bytes(*b"12 45678")), (12, 2));
        assert_eq!(leading_digits(u64::from_le_bytes(*b"-1234567")), (0, 0));
        assert_eq!(leading_digits(u64::from_le_bytes(*b"9\xb9234567")), (9, 1));
        // Seventeen and more integer digits are the general reading's.
        assert_eq!(
            us_text_to_ns("1234567890123456"),
            general("1234567890123456")
        );
        assert_eq!(
            us_text_to_ns("12345678901234567"),
            general("12345678901234567")
        );
    }

    /// [`us_text_to_ns`] without its fast path.
    fn general(text: &str) -> Option<i64> {
        us_text_to_ns(&format!(" {text}"))
    }

    #[test]
    fn us_to_ns_keeps_precision() {
        assert_eq!(us_text_to_ns("88437691101.729"), Some(88_437_691_101_729));
        assert_eq!(
            us_text_to_ns("1700000000123456"),
            Some(1_700_000_000_123_456_000)
        );
        assert_eq!(us_text_to_ns("0.01"), Some(10));
        assert_eq!(us_text_to_ns("5.0005"), Some(5001));
        assert_eq!(us_text_to_ns("-2.5"), Some(-2500));
        assert_eq!(us_text_to_ns("1.5e3"), Some(1_500_000));
        assert_eq!(us_text_to_ns("\"12\""), Some(12_000));
        assert_eq!(us_text_to_ns("abc"), None);
        assert_eq!(us_text_to_ns("null"), None);
    }

    #[test]
    fn lenient_values() {
        let n: Num = serde_json::from_str("\"42\"").unwrap();
        assert_eq!(n.i64(), Some(42));
        let n: Num = serde_json::from_str("[1,2]").unwrap();
        assert_eq!(n.i64(), None);
        let s: LStr = serde_json::from_str("{\"a\":1}").unwrap();
        assert_eq!(s.0, None);
        let d: Dims = serde_json::from_str("[1, 2.0, 3]").unwrap();
        assert_eq!(d.0, [1, 2, 3]);
    }
}
