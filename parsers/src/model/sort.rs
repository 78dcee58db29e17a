//! Sorting what the readers append in a few sorted runs.
//!
//! Readers append events in the order their source lists them, and sources list them in a
//! few long runs each in time order: an Nsight Systems export one table at a time (kernels,
//! then copies, memsets and synchronisations); a Kineto trace its operators, then its Python
//! functions, then its runtime calls, each category in time order. Sorting such a list from
//! scratch costs about log2(n) passes over it, and a stable sort allocates a buffer as large
//! as the list (270 MB for a 704 MB export). Merging the runs costs about log2(runs) passes,
//! fewer still where runs only touch at their ends, and a buffer bounded by a small share of
//! the list.

use std::cmp::Ordering;

/// The most runs [`stable_by_runs`] merges; more, and it leaves the sort to the caller.
const MAX_RUNS: usize = 1024;

/// The smallest buffer a merge may take, in elements: below this, splitting a merge costs
/// more than it saves.
const MIN_BUFFER: usize = 1 << 12;

/// Sorts `v` stably by `cmp` when it is at most [`MAX_RUNS`] sorted runs, by merging
/// neighbouring runs, the halves of the list on both cores. A merge copies the shorter of
/// its two sides aside; one whose shorter side is larger than a sixteenth of `v` (shared by
/// the threads) is split in two smaller merges by rotating the middle, so the buffers stay
/// small. A sorted `v` is left as it is. Returns false, leaving `v` as it was, when it has
/// more runs than that, or two runs many buffers long that overlap: their merge would be
/// split again and again, each split rotating half of them, and a sort from scratch costs
/// less (an export's runtime and OS calls: two runs of millions over the same time).
pub fn stable_by_runs<T, F>(v: &mut [T], cmp: F) -> bool
where
    T: Copy + Send + Sync,
    F: Fn(&T, &T) -> Ordering + Sync,
{
    let Some(starts) = run_starts(v, &cmp) else {
        return false;
    };
    let threads = rayon::current_num_threads().max(1);
    let limit = (v.len() / (16 * threads)).max(MIN_BUFFER);
    if long_runs_overlap(v, &starts, &cmp, LONG_RUN_BUFFERS * limit) {
        return false;
    }
    let scratch = Scratch {
        limit,
        pool: Default::default(),
    };
    merge_runs(v, &starts, &cmp, &scratch);
    true
}

/// A run longer than this many buffers is long: two long runs that overlap are left to a
/// sort from scratch.
const LONG_RUN_BUFFERS: usize = 4;

/// Whether two runs longer than `long` overlap (each starts before the other ends).
fn long_runs_overlap<T>(
    v: &[T],
    starts: &[usize],
    cmp: &impl Fn(&T, &T) -> Ordering,
    long: usize,
) -> bool {
    let ends = starts.iter().skip(1).copied().chain([v.len()]);
    let long_runs: Vec<(&T, &T)> = starts
        .iter()
        .zip(ends)
        .filter(|&(&s, e)| e - s > long)
        .map(|(&s, e)| (&v[s], &v[e - 1]))
        .collect();
    long_runs.iter().enumerate().any(|(k, a)| {
        long_runs[k + 1..]
            .iter()
            .any(|b| cmp(a.0, b.1) == Ordering::Less && cmp(b.0, a.1) == Ordering::Less)
    })
}

/// The buffers merges copy a side into, at most `limit` elements each, kept for the next
/// merge: a fresh buffer of megabytes is fresh pages, faulted in again for every merge.
struct Scratch<T> {
    limit: usize,
    pool: std::sync::Mutex<Vec<Vec<T>>>,
}

impl<T: Copy> Scratch<T> {
    /// A copy of `src` (at most `limit` long), in a kept buffer where there is one.
    fn copy_of(&self, src: &[T]) -> Vec<T> {
        let taken = self
            .pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        let mut buf = taken.unwrap_or_else(|| Vec::with_capacity(self.limit));
        buf.clear();
        buf.extend_from_slice(src);
        buf
    }

    /// Keeps `buf` for the next merge.
    fn keep(&self, buf: Vec<T>) {
        self.pool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(buf);
    }
}

/// Where each sorted run of `v` starts (the first is 0), or None when there are more than
/// [`MAX_RUNS`]. The list is read in pieces on all threads; each piece stops counting at
/// the limit.
fn run_starts<T: Sync>(v: &[T], cmp: &(impl Fn(&T, &T) -> Ordering + Sync)) -> Option<Vec<usize>> {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 16;
    let n = v.len();
    let pieces: Vec<Option<Vec<usize>>> = (0..n.div_ceil(PIECE))
        .into_par_iter()
        .map(|p| {
            let mut found = Vec::new();
            for i in (p * PIECE).max(1)..((p + 1) * PIECE).min(n) {
                if cmp(&v[i - 1], &v[i]) == Ordering::Greater {
                    if found.len() == MAX_RUNS {
                        return None;
                    }
                    found.push(i);
                }
            }
            Some(found)
        })
        .collect();
    let mut starts = vec![0];
    for p in pieces {
        starts.extend(p?);
        if starts.len() > MAX_RUNS {
            return None;
        }
    }
    Some(starts)
}

/// Sorts `v`, the sorted runs beginning at `starts` (relative to `v`, the first 0).
fn merge_runs<T, F>(v: &mut [T], starts: &[usize], cmp: &F, scratch: &Scratch<T>)
where
    T: Copy + Send + Sync,
    F: Fn(&T, &T) -> Ordering + Sync,
{
    if starts.len() <= 1 {
        return;
    }
    // Split at the run boundary nearest the middle of the elements, so both halves are
    // about as long whatever the runs' lengths.
    let half = v.len() / 2;
    let k = match starts.binary_search(&half) {
        Ok(k) => k,
        Err(k) => {
            // The boundary before or after the middle, whichever is nearer; never the first
            // (it would leave one side empty).
            let after = k.min(starts.len() - 1);
            let before = k.saturating_sub(1).max(1);
            if starts[after].abs_diff(half) < starts[before].abs_diff(half) {
                after
            } else {
                before
            }
        }
    }
    .max(1);
    let mid = starts[k];
    let (left, right) = v.split_at_mut(mid);
    let right_starts: Vec<usize> = starts[k..].iter().map(|s| s - mid).collect();
    rayon::join(
        || merge_runs(left, &starts[..k], cmp, scratch),
        || merge_runs(right, &right_starts, cmp, scratch),
    );
    merge(v, mid, cmp, scratch);
}

/// Merges the sorted `v[..mid]` and `v[mid..]` stably: on a tie the left element goes
/// first.
fn merge<T, F>(v: &mut [T], mid: usize, cmp: &F, scratch: &Scratch<T>)
where
    T: Copy + Send + Sync,
    F: Fn(&T, &T) -> Ordering + Sync,
{
    if mid == 0 || mid == v.len() || cmp(&v[mid - 1], &v[mid]) != Ordering::Greater {
        return;
    }
    // Only the overlap moves: the left elements not after the right's first, and the right
    // elements before the left's last, are in place.
    let lo = v[..mid].partition_point(|x| cmp(x, &v[mid]) != Ordering::Greater);
    let hi = mid + v[mid..].partition_point(|y| cmp(y, &v[mid - 1]) == Ordering::Less);
    let v = &mut v[lo..hi];
    let mid = mid - lo;
    let (a, b) = (mid, v.len() - mid);
    if a.min(b) <= scratch.limit {
        if a <= b {
            let left = scratch.copy_of(&v[..mid]);
            merge_forward(v, &left, cmp);
            scratch.keep(left);
        } else {
            let right = scratch.copy_of(&v[mid..]);
            merge_backward(v, &right, cmp);
            scratch.keep(right);
        }
        return;
    }
    // Split both sides around the middle element of the longer one, rotate the pieces
    // between the two cut points into order, and merge the two halves apart. The tie rules
    // keep a left element before an equal right one across the split.
    let (cut_left, cut_right) = if a >= b {
        let p = a / 2;
        let q = mid + v[mid..].partition_point(|y| cmp(y, &v[p]) == Ordering::Less);
        (p, q)
    } else {
        let q = mid + b / 2;
        let p = v[..mid].partition_point(|x| cmp(x, &v[q]) != Ordering::Greater);
        (p, q)
    };
    rotate_left(&mut v[cut_left..cut_right], mid - cut_left, scratch);
    let new_mid = cut_left + (cut_right - mid);
    let (first, second) = v.split_at_mut(new_mid);
    rayon::join(
        || merge(first, cut_left, cmp, scratch),
        || merge(second, mid - cut_left, cmp, scratch),
    );
}

/// Rotates `v` left by `k`. The standard library's rotation walks large elements in strides
/// (a cache miss each, for spans of 64 bytes); this one moves them in order: the shorter
/// piece through a buffer when it fits one, else by three reversals.
fn rotate_left<T: Copy>(v: &mut [T], k: usize, scratch: &Scratch<T>) {
    let n = v.len();
    if k == 0 || k == n {
        return;
    }
    if k <= scratch.limit && k <= n - k {
        let head = scratch.copy_of(&v[..k]);
        v.copy_within(k.., 0);
        v[n - k..].copy_from_slice(&head);
        scratch.keep(head);
    } else if n - k <= scratch.limit {
        let tail = scratch.copy_of(&v[k..]);
        v.copy_within(..k, n - k);
        v[..n - k].copy_from_slice(&tail);
        scratch.keep(tail);
    } else {
        v[..k].reverse();
        v[k..].reverse();
        v.reverse();
    }
}

/// Merges `left`, a copy of `v`'s shorter left side, with the rest of `v`, filling `v` from
/// the front.
fn merge_forward<T: Copy, F: Fn(&T, &T) -> Ordering>(v: &mut [T], left: &[T], cmp: &F) {
    let (mut i, mut j, mut out) = (0, left.len(), 0);
    // `out` stays behind `j` (it is `j` less the left elements still to place), so no
    // right element is written over before it is read.
    while i < left.len() && j < v.len() {
        if cmp(&v[j], &left[i]) == Ordering::Less {
            v[out] = v[j];
            j += 1;
        } else {
            v[out] = left[i];
            i += 1;
        }
        out += 1;
    }
    v[out..out + left.len() - i].copy_from_slice(&left[i..]);
}

/// Merges `right`, a copy of `v`'s shorter right side, with the rest of `v`, filling `v`
/// from the back.
fn merge_backward<T: Copy, F: Fn(&T, &T) -> Ordering>(v: &mut [T], right: &[T], cmp: &F) {
    let (mut i, mut j) = (v.len() - right.len(), right.len());
    while j > 0 {
        let w = i + j - 1;
        // On a tie the right element goes last: the order of a stable sort.
        if i > 0 && cmp(&v[i - 1], &right[j - 1]) == Ordering::Greater {
            v[w] = v[i - 1];
            i -= 1;
        } else {
            v[w] = right[j - 1];
            j -= 1;
        }
    }
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
    fn runs_merge_stably() {
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
        // A short first run, as in a Kineto trace whose annotations come first.
        assert!(check(tagged((0..10).chain(0..100))));
    }

    #[test]
    fn long_interleaved_runs_split_into_small_merges() {
        // Runs longer than the smallest buffer but not many buffers long, interleaved over
        // the same times with many ties, so the merges are split by rotation, repeatedly
        // and on both sides.
        let n = 3 * MIN_BUFFER as i64;
        let v = tagged(
            (0..n)
                .map(|x| x / 4)
                .chain((0..n + 2000).map(|x| x / 7))
                .chain((0..n / 3).map(|x| 2 * x))
                .chain((0..n - 1000).map(|x| x / 2 + 9)),
        );
        assert!(v.len() / 32 < MIN_BUFFER);
        assert!(check(v));
    }

    #[test]
    fn copies_in_sequence_need_no_move_across_them() {
        // Four copies of three interleaved runs, each copy after the one before.
        let v = tagged((0..4).flat_map(|c| {
            let base = c * 1_000_000;
            (0..3000)
                .map(move |x| base + 2 * x)
                .chain((0..2000).map(move |x| base + 3 * x + 1))
                .chain((0..500).map(move |x| base + 7 * x))
        }));
        assert!(check(v));
    }

    #[test]
    fn rotations_through_a_buffer_and_by_reversal_agree_with_the_standard_one() {
        let v: Vec<u32> = (0..100).collect();
        for k in [0, 1, 30, 50, 70, 99, 100] {
            for limit in [0, 10, 40, 100] {
                let mut want = v.clone();
                want.rotate_left(k);
                let mut got = v.clone();
                let scratch = Scratch {
                    limit,
                    pool: Default::default(),
                };
                rotate_left(&mut got, k, &scratch);
                assert_eq!(got, want, "k {k} limit {limit}");
            }
        }
    }

    #[test]
    fn random_runs_sort_as_a_stable_sort_does() {
        // Runs of random lengths and value ranges (a fixed generator, so the test is the
        // same every time), few distinct values so ties are common.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for case in 0..40 {
            let runs = 1 + next(60) as usize;
            let mut vals = Vec::new();
            for _ in 0..runs {
                let len = next(if case % 4 == 0 { 15_000 } else { 300 }) as usize;
                let (lo, step) = (next(1000) as i64, next(4) as i64);
                let mut v = lo;
                for _ in 0..len {
                    vals.push(v);
                    v += next(2) as i64 * step;
                }
            }
            let v = tagged(vals);
            assert!(check(v), "case {case}: {runs} runs not merged");
        }
    }

    #[test]
    fn long_overlapping_runs_are_left_to_a_sort_and_sequential_ones_merged() {
        // Two runs each far longer than the buffers, over the same values: left.
        let n = 40 * MIN_BUFFER as i64;
        let v = tagged((0..n).map(|x| 2 * x).chain((0..n).map(|x| 2 * x + 1)));
        let before = v.clone();
        let mut w = v;
        assert!(!stable_by_runs(&mut w, |a, b| a.0.cmp(&b.0)));
        assert_eq!(w, before);
        // The same runs one after the other in time, and a long run with short ones over
        // it: merged.
        assert!(check(tagged((n..2 * n).chain(0..n))));
        assert!(check(tagged((0..n).chain((0..n).step_by(1000)))));
    }

    #[test]
    fn too_many_runs_are_left_to_the_caller() {
        let many = tagged((0..1000).chain((0..MAX_RUNS as i64).flat_map(|k| [k, k - 1])));
        let before = many.clone();
        let mut w = many;
        assert!(!stable_by_runs(&mut w, |a, b| a.0.cmp(&b.0)));
        assert_eq!(w, before);
    }
}
