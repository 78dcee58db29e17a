//! The lists Kineto records per operator with `record_shapes`: `Input Dims`
//! (`[[16, 1024], []]`), `Input type` (`["float", "Scalar"]`) and `Concrete Inputs`
//! (`["", "[3, 3]", "1"]`).

/// Top-level items of a recorded list as text: quotes dropped, whitespace normalised
/// (`[16384,32000]` reads `[16384, 32000]`); empty for text that is no list.
pub(crate) fn items(s: &str) -> Vec<String> {
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
pub(crate) fn numbers(s: &str) -> Vec<u64> {
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

/// Dims of a recorded `Input Dims` list: the dims of each input, by position.
pub(crate) fn dims(s: &str) -> Vec<Vec<u64>> {
    items(s).iter().map(|i| numbers(i)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            items(r#"["c10::BFloat16","float",""]"#),
            vec!["c10::BFloat16", "float", ""]
        );
    }
}
