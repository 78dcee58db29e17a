//! Order statistics shared by the rules and the job analysis.

/// The value at quantile `p` (0..1) of sorted values, by nearest rank; 0 when empty.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let k = ((sorted.len() - 1) as f64 * p.clamp(0.0, 1.0)).round() as usize;
    sorted[k.min(sorted.len() - 1)]
}

/// The median (the upper middle value for an even count); 0 when empty.
pub fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    if v.is_empty() { 0 } else { v[v.len() / 2] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_statistics() {
        assert_eq!(median(vec![3, 1, 2, 4]), 3);
        assert_eq!(median(Vec::new()), 0);
        let s: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&s, 0.5), 51);
        assert_eq!(percentile(&s, 0.99), 99);
        assert_eq!(percentile(&s, 1.0), 100);
        assert_eq!(percentile(&[], 0.9), 0);
    }
}
