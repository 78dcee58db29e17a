//! Operator inputs as the profiler recorded them: the lists Kineto writes per operator with
//! `record_shapes`, `Input Dims` (`[[16, 1024], []]`), `Input type` (`["float", "Scalar"]`)
//! and `Concrete Inputs` (`["", "[3, 3]", "1"]`), kept as text on the spans and read here into
//! positions, so that analyses ask the trace for an operator's shapes and never parse the
//! profiler's text themselves.

use crate::model::{SpanText, StrId, Trace};

impl Trace {
    /// The dims of each input of span `i` by position (`[[16, 1024], []]` gives
    /// `[[16, 1024], []]`); empty when the trace recorded no shapes for it.
    pub fn input_dims(&self, i: u32) -> Vec<Vec<u64>> {
        self.host_spans
            .get(i as usize)
            .map_or_else(Vec::new, |s| dims(self.str(self.op_args(s).input_dims)))
    }

    /// The shape of each input of span `i` as text, by position (`[16, 1024]`, `[]`), spaced
    /// the same however the trace wrote it; empty when not recorded.
    pub fn input_shapes(&self, i: u32) -> Vec<String> {
        self.host_spans.get(i as usize).map_or_else(Vec::new, |s| {
            items(self.str(self.op_args(s).input_dims))
                .iter()
                .map(|d| canonical_dims(d))
                .collect()
        })
    }

    /// The type of each input of span `i`, by position (`float`, `c10::BFloat16`, `Scalar`);
    /// empty when not recorded.
    pub fn input_types(&self, i: u32) -> Vec<String> {
        self.host_spans
            .get(i as usize)
            .map_or_else(Vec::new, |s| items(self.str(self.op_args(s).input_types)))
    }

    /// The recorded scalar inputs of span `i` by position (`Concrete Inputs` of convolution,
    /// attention, batch-norm, topk and unique operators recorded with shapes): `""` for a tensor,
    /// `[3, 3]`, `1`, `True`.
    /// `None` when not recorded; read numbers out of an item with [`numbers`].
    pub fn concrete_inputs_of(&self, i: u32) -> Option<Vec<String>> {
        self.side_entry(&self.concrete_inputs, i)
            .map(|v| items(self.str(v)))
    }

    /// The strides of each input of span `i` by position (`Input Strides`, Kineto), where the
    /// trace keeps them ([`Trace::strides`]: a stride of 0, an input expanded along that dim;
    /// a matrix product's stride not a multiple of 8, an unaligned leading dimension); `None`
    /// otherwise, and for traces without strides.
    pub fn input_strides_of(&self, i: u32) -> Option<Vec<Vec<u64>>> {
        self.side_entry(&self.strides, i).map(|v| dims(self.str(v)))
    }

    /// The id of the recorded strides text of span `i` where the trace keeps it
    /// ([`Trace::input_strides_of`]), else 0: a key for caches of per-shape models.
    pub fn strides_id(&self, i: u32) -> StrId {
        self.side_entry(&self.strides, i).unwrap_or(0)
    }

    /// The value span `i` has in a sorted side table keyed by (pid, tid, start, name)
    /// ([`Trace::concrete_inputs`], [`Trace::strides`]).
    fn side_entry(&self, table: &[SpanText], i: u32) -> Option<StrId> {
        if table.is_empty() {
            return None;
        }
        let s = self.host_spans.get(i as usize)?;
        let key = (s.pid, s.tid, s.start, s.name);
        let k = table.binary_search_by_key(&key, |e| e.0).ok()?;
        Some(table[k].1)
    }
}

/// Top-level items of a recorded list as text: quotes dropped, whitespace normalised
/// (`[16384,32000]` reads `[16384, 32000]`); empty for text that is no list.
pub fn items(s: &str) -> Vec<String> {
    let s = s.trim();
    let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let (mut depth, mut start, mut in_str) = (0i32, 0usize, false);
    for (k, &b) in inner.as_bytes().iter().enumerate() {
        match b {
            b'"' => in_str = !in_str,
            b'[' if !in_str => depth += 1,
            b']' if !in_str => depth -= 1,
            b',' if !in_str && depth == 0 => {
                out.push(item(&inner[start..k]));
                start = k + 1;
            }
            _ => {}
        }
    }
    if !inner.trim().is_empty() {
        out.push(item(&inner[start..]));
    }
    out
}

fn item(s: &str) -> String {
    let t: String = s
        .trim()
        .trim_matches('"')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    t.replace(",", ", ").replace(",  ", ", ")
}

/// The non-negative integers written in an item (`[4096, 8192]`, `3`).
pub fn numbers(s: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut num: Option<u64> = None;
    for c in s.chars() {
        if let Some(d) = c.to_digit(10) {
            num = Some(
                num.unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(u64::from(d)),
            );
        } else if let Some(n) = num.take() {
            out.push(n);
        }
    }
    out.extend(num);
    out
}

/// Dims of a recorded `Input Dims` list: the dims of each input, by position. The same as
/// [`numbers`] of each of [`items`], read in one pass without building the items' text
/// (matrix and memory models read the dims of every operator they price).
pub fn dims(s: &str) -> Vec<Vec<u64>> {
    let s = s.trim();
    let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) else {
        return Vec::new();
    };
    if inner.trim().is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur: Vec<u64> = Vec::new();
    let mut num: Option<u64> = None;
    let (mut depth, mut in_str) = (0i32, false);
    for &b in inner.as_bytes() {
        if b.is_ascii_digit() {
            num = Some(
                num.unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(u64::from(b - b'0')),
            );
            continue;
        }
        cur.extend(num.take());
        match b {
            b'"' => in_str = !in_str,
            b'[' if !in_str => depth += 1,
            b']' if !in_str => depth -= 1,
            b',' if !in_str && depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => {}
        }
    }
    cur.extend(num);
    out.push(cur);
    out
}

/// A dims item as the profiler's own layout writes it (`[256, 16, 512]`, `[[2, 3], [4]]`),
/// whatever whitespace the file used: a trace that passed through `json.dump(indent=1)` holds
/// `[\n 256,\n 16\n]`, and what is printed must not depend on it.
pub fn canonical_dims(d: &str) -> String {
    let mut out = String::with_capacity(d.len());
    for c in d.chars().filter(|c| !c.is_whitespace()) {
        out.push(c);
        if c == ',' {
            out.push(' ');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_print_the_same_whatever_the_layout() {
        assert_eq!(canonical_dims("[ 256, 16, 512 ]"), "[256, 16, 512]");
        assert_eq!(canonical_dims("[\n  256,\n  16\n ]"), "[256, 16]");
        assert_eq!(canonical_dims("[256,16]"), "[256, 16]");
        assert_eq!(canonical_dims("[[2, 3], []]"), "[[2, 3], []]");
    }

    #[test]
    fn lists() {
        let v = items("[[16384, 32000], [16384,32000], []]");
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], "[16384, 32000]");
        assert_eq!(v[1], "[16384, 32000]");
        let v = items(r#"["c10::BFloat16", "float", "Scalar"]"#);
        assert_eq!(v[1], "float");
        assert!(items("").is_empty());
        assert_eq!(
            dims("[[1024], [16384, 1024], [1024, 1024], [], []]"),
            vec![
                vec![1024],
                vec![16384, 1024],
                vec![1024, 1024],
                vec![],
                vec![]
            ]
        );
        assert_eq!(numbers("[3, 3]"), vec![3, 3]);
        // One pass gives what the items' numbers give, on every shape of list.
        for text in [
            "[[16384, 32000], [16384,32000], []]",
            "[[], []]",
            "[]",
            " [ ] ",
            "[[1]]",
            "[[2, 3], \"a1,2\", [[4, 5], [6]], 7]",
            "[[1,2],,[3]]",
            "not a list",
            "[[18446744073709551616999]]",
        ] {
            let slow: Vec<Vec<u64>> = items(text).iter().map(|i| numbers(i)).collect();
            assert_eq!(dims(text), slow, "{text}");
        }
        assert_eq!(
            items(r#"["c10::BFloat16","float",""]"#),
            vec!["c10::BFloat16", "float", ""]
        );
    }
}
