//! Sorting what the readers append table by table.
//!
//! An Nsight Systems export's GPU activity is read one table at a time (kernels, then copies,
//! memsets and synchronisations), each in time order: the ops are a few sorted runs, one of
//! them most of the ops. A stable sort allocates a buffer as large as all of them (270 MB
//! for a 704 MB export); merging the runs needs one as large as the runs after the first.

use std::cmp::Ordering;

/// The most runs [`stable_by_runs`] merges; more, and it leaves the sort to the caller.
const MAX_RUNS: usize = 16;

/// Sorts `v` stably by `cmp` when it is a few sorted runs of which the first holds at least
/// three quarters of it, by merging the later runs into the first from the back (buffer:
/// the later runs); a sorted `v`, one run, is left as it is. Returns false, leaving `v` as
/// it was, when it is not of that shape.
pub fn stable_by_runs<T: Copy>(v: &mut [T], cmp: impl Fn(&T, &T) -> Ordering) -> bool {
    let n = v.len();
    let mut starts = vec![0usize];
    for i in 1..n {
        if cmp(&v[i - 1], &v[i]) == Ordering::Greater {
            if starts.len() == MAX_RUNS {
                return false;
            }
            starts.push(i);
        }
    }
    let first_end = starts.get(1).copied().unwrap_or(n);
    if 4 * (n - first_end) > n {
        return false;
    }
    // From the last run back: each merge joins run r with the (already merged) rest after it.
    for r in (1..starts.len()).rev() {
        let (lo, mid) = (starts[r - 1], starts[r]);
        let later: Vec<T> = v[mid..].to_vec();
        let (mut i, mut j) = (mid, later.len());
        while j > 0 {
            let w = i + j - 1;
            // On a tie the later run's element goes last: the order of a stable sort.
            if i > lo && cmp(&v[i - 1], &later[j - 1]) == Ordering::Greater {
                v[w] = v[i - 1];
                i -= 1;
            } else {
                v[w] = later[j - 1];
                j -= 1;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorted by the first value only, so that ties show whether the order is stable.
    fn check(v: Vec<(i64, u32)>) -> bool {
        let mut want = v.clone();
        want.sort_by_key(|x| x.0);
        let mut got = v;
        let merged = stable_by_runs(&mut got, |a, b| a.0.cmp(&b.0));
        if merged {
            assert_eq!(got, want);
        }
        merged
    }

    fn tagged(vals: impl IntoIterator<Item = i64>) -> Vec<(i64, u32)> {
        vals.into_iter().zip(0..).collect()
    }

    #[test]
    fn runs_merge_into_the_first_stably() {
        // A long table, then three short ones, with values equal across them.
        let v = tagged(
            (0..1000)
                .map(|x| x / 3)
                .chain(0..100)
                .chain(50..80)
                .chain([7, 7, 900]),
        );
        assert!(check(v));
        assert!(check(tagged(0..10)));
        assert!(check(Vec::new()));
        assert!(check(tagged([3, 3, 3, 1])));
    }

    #[test]
    fn other_shapes_are_left_to_the_caller() {
        // The first run too short, and too many runs.
        let v = tagged((0..10).chain(0..100));
        let before = v.clone();
        let mut w = v;
        assert!(!stable_by_runs(&mut w, |a, b| a.0.cmp(&b.0)));
        assert_eq!(w, before);
        let many = tagged((0..1000).chain((0..40).flat_map(|k| [k, k - 1])));
        assert!(!check(many));
    }
}
