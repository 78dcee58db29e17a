//! Names read back from a saved rank summary. Findings carry their rule, metric keys and cause
//! categories as `&'static str` (every rule writes literals, and comparisons stay cheap); a
//! summary read from disk has them as text, so each distinct name is kept once for the life of
//! the process. The set of names is small and fixed by the rules (tens of them), so what is
//! kept does not grow with the number of summaries read.

use serde::{Deserialize, Deserializer};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, OnceLock};

/// A rule, metric or cause name. An alias, not `&'static str` written out, because serde's
/// derive treats every field spelled `&str` as borrowed from the input (which would tie a
/// deserialized finding to the text it was read from); these fields are read with the
/// interning functions below instead.
pub type Name = &'static str;

/// The `&'static str` for `s`, the same one for every call with equal text.
pub fn intern(s: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(&n) = names.get(s) {
        return n;
    }
    let n: &'static str = Box::leak(s.to_owned().into_boxed_str());
    names.insert(n);
    n
}

/// Deserializes a name into an interned `&'static str`.
pub(crate) fn de_str<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    let s = std::borrow::Cow::<str>::deserialize(d)?;
    Ok(intern(&s))
}

/// Deserializes an optional name into an interned `&'static str`.
pub(crate) fn de_opt_str<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<&'static str>, D::Error> {
    let s = Option::<std::borrow::Cow<str>>::deserialize(d)?;
    Ok(s.map(|s| intern(&s)))
}

/// Deserializes a map keyed by names (a finding's metrics). JSON has no NaN: serde writes it
/// as null, which reads back as NaN.
pub(crate) fn de_metrics<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<&'static str, f64>, D::Error> {
    let m = BTreeMap::<String, Option<f64>>::deserialize(d)?;
    Ok(m.into_iter()
        .map(|(k, v)| (intern(&k), v.unwrap_or(f64::NAN)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_text_gives_the_same_pointer() {
        let a = intern(&String::from("idle_gaps"));
        let b = intern(&String::from("idle_gaps"));
        assert_eq!(a, "idle_gaps");
        assert!(std::ptr::eq(a, b));
    }
}
