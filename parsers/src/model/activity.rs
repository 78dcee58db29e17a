//! What a host thread was doing over an interval: queries over the nesting index, shared by
//! the idle-gap attribution, job analysis and any view that needs the host's side of a moment.
//!
//! The central query is the exclusive-time sweep ([`Trace::exclusive_time`]): every instant of
//! an interval is given to the innermost span active on the thread then, and what no span
//! covers is untraced time. A span's share is its clipped duration minus that of its children,
//! so the shares always add up to the interval.

use crate::model::{HostKind, HostSpan, NONE, Trace};

/// A thread of the trace: (pid, tid).
pub type ThreadKey = (i64, i64);

impl Trace {
    /// Host spans of a thread, sorted by start (empty for an unknown thread).
    pub fn thread_spans(&self, thread: ThreadKey) -> &[u32] {
        let idx = &self.index.spans_by_thread;
        match idx.binary_search_by_key(&thread, |(k, _)| *k) {
            Ok(p) => &idx[p].1,
            Err(_) => &[],
        }
    }

    /// Runtime and driver calls of a thread, sorted by start (empty for an unknown thread).
    pub fn thread_calls(&self, thread: ThreadKey) -> &[u32] {
        let idx = &self.index.calls_by_thread;
        match idx.binary_search_by_key(&thread, |(k, _)| *k) {
            Ok(p) => &idx[p].1,
            Err(_) => &[],
        }
    }

    /// The spans of a thread (`spans`, sorted by start) around time `at`: the last one
    /// starting at or before it and its ancestors, innermost first, with the index in
    /// `spans` of the first span starting after `at`. Under proper nesting every span that
    /// covers `at` is in the chain.
    pub fn chain_at(&self, spans: &[u32], at: i64) -> (usize, Vec<u32>) {
        self.chain_near(spans, at, usize::MAX)
    }

    /// [`Trace::chain_at`], searching from `hint`, a position in `spans` near the answer (a
    /// previous answer for a nearby time): queries that move forward through a thread touch
    /// a few neighbouring spans instead of a binary search's scattered ones.
    pub fn chain_near(&self, spans: &[u32], at: i64, hint: usize) -> (usize, Vec<u32>) {
        let first_after = partition_near(spans, hint, |&i| self.host_spans[i as usize].start <= at);
        let mut chain = Vec::new();
        if first_after > 0 {
            let y = spans[first_after - 1];
            // One allocation: the chain is the span and its ancestors, `depth` of them when
            // nested by `finish`.
            chain.reserve(usize::from(self.host_spans[y as usize].depth) + 1);
            chain.push(y);
            chain.extend(self.ancestors(y));
        }
        (first_after, chain)
    }

    /// Exclusive time of the spans of `thread` over `[a, b)`: each span active in the interval
    /// with the time during which it was the innermost active span, and [`NONE`] with the time
    /// no span covered (untraced). Spans with no exclusive time are left out; the times add up
    /// to `b - a`. Order: by first appearance (span start), untraced last.
    pub fn exclusive_time(&self, thread: ThreadKey, a: i64, b: i64) -> Vec<(u32, i64)> {
        let mut no_guess = usize::MAX;
        self.exclusive_time_near(thread, a, b, &mut no_guess)
    }

    /// [`Trace::exclusive_time`], searching the thread's spans from `hint` (see
    /// [`Trace::chain_near`]) and leaving in it the position of the first span starting
    /// after `a`, the hint for a later interval; out of range, it is ignored.
    pub fn exclusive_time_near(
        &self,
        thread: ThreadKey,
        a: i64,
        b: i64,
        hint: &mut usize,
    ) -> Vec<(u32, i64)> {
        let mut out = Vec::new();
        self.exclusive_time_into(thread, a, b, hint, &mut Scratch::default(), &mut out);
        out
    }

    /// [`Trace::exclusive_time_near`] into `out` (cleared first), with its lists in `scratch`:
    /// a caller that sweeps many intervals keeps both, so a long interval's lists are not
    /// fresh pages each time.
    pub fn exclusive_time_into(
        &self,
        thread: ThreadKey,
        a: i64,
        b: i64,
        hint: &mut usize,
        scratch: &mut Scratch,
        out: &mut Vec<(u32, i64)>,
    ) {
        out.clear();
        if b <= a {
            return;
        }
        let spans = self.thread_spans(thread);
        let (first_after, chain) = self.chain_near(spans, a, *hint);
        *hint = first_after;
        self.exclusive_time_of_chain(spans, a, b, (first_after, &chain), scratch, out);
    }

    /// [`Trace::exclusive_time_into`] of the thread whose spans are `spans`, from what
    /// [`Trace::chain_near`] gave for `a` (a caller that has it walks the chain once).
    pub fn exclusive_time_of_chain(
        &self,
        spans: &[u32],
        a: i64,
        b: i64,
        (first_after, chain): (usize, &[u32]),
        scratch: &mut Scratch,
        out: &mut Vec<(u32, i64)>,
    ) {
        out.clear();
        if b <= a {
            return;
        }
        let clip = |i: u32| {
            let s = &self.host_spans[i as usize];
            (s.end.min(b) - s.start.max(a)).max(0)
        };
        let end = partition_near(spans, first_after, |&i| {
            self.host_spans[i as usize].start < b
        });
        let Scratch { set, excl, open } = scratch;
        set.clear();
        set.reserve(chain.len() + end.saturating_sub(first_after));
        set.extend(chain.iter().rev().copied().filter(|&i| clip(i) > 0));
        set.extend(
            spans[first_after..end.max(first_after)]
                .iter()
                .copied()
                .filter(|&i| clip(i) > 0),
        );
        // Spans are stored sorted by start (longer first), so a thread's span indices rise
        // with their start, `set` is sorted, and it visits the thread's nesting parent before
        // child: a span's parent, when in `set`, is on the stack of the spans before it that
        // are still open, found by popping what lies past it (a finished subtree, which no
        // later span is inside either).
        debug_assert!(set.windows(2).all(|w| w[0] < w[1]));
        excl.clear();
        excl.extend(set.iter().map(|&i| clip(i)));
        let mut covered = 0i64;
        open.clear();
        for (at, &i) in set.iter().enumerate() {
            let p = self.host_spans[i as usize].parent;
            while open.last().is_some_and(|&k| set[k] > p) {
                open.pop();
            }
            let parent = open.last().copied().filter(|&k| set[k] == p);
            open.push(at);
            match parent {
                Some(k) if p != NONE => {
                    // A child that outlasts its parent by a rounding error (Python frames
                    // and operators are timed separately) takes from it only what they share;
                    // the rest it covers itself.
                    let (c, q) = (&self.host_spans[i as usize], &self.host_spans[p as usize]);
                    let shared = (c.end.min(q.end).min(b) - c.start.max(q.start).max(a)).max(0);
                    excl[k] -= shared;
                    covered += clip(i) - shared;
                }
                _ => covered += clip(i),
            }
        }
        out.reserve(set.len() + 1);
        out.extend(
            set.iter()
                .copied()
                .zip(excl.iter().copied())
                .filter(|(_, ns)| *ns > 0),
        );
        let untraced = (b - a) - covered;
        if untraced > 0 {
            out.push((NONE, untraced));
        }
        // Siblings that overlap (spans the recorder did not nest) count their shared time
        // twice: scale back so the times still add up to the interval.
        let total: i64 = out.iter().map(|x| x.1).sum();
        if total > b - a {
            let mut left = b - a;
            let n = out.len();
            for (k, x) in out.iter_mut().enumerate() {
                x.1 = if k + 1 == n {
                    left
                } else {
                    ((x.1 as i128 * (b - a) as i128) / total as i128) as i64
                };
                left -= x.1;
            }
            out.retain(|x| x.1 > 0);
        }
    }

    /// For every span, the outermost of itself and its ancestors for which `pick` holds, or
    /// [`NONE`]: what walking each span's ancestry would give, for all spans in one pass
    /// (a span's parent comes before it, so its answer is known when the span is reached).
    /// `outermost` is called, in span order, with each span that is its own answer (picked,
    /// with no picked ancestor), while the pass has it at hand.
    pub fn outermost_where(
        &self,
        pick: impl Fn(&HostSpan) -> bool,
        mut outermost: impl FnMut(&HostSpan),
    ) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::with_capacity(self.host_spans.len());
        for (i, s) in self.host_spans.iter().enumerate() {
            let above = match out.get(s.parent as usize) {
                Some(&r) if (s.parent as usize) < i => r,
                // A parent after its child (a trace not nested by `finish`): walk.
                _ => self
                    .ancestors(i as u32)
                    .filter(|&a| pick(&self.host_spans[a as usize]))
                    .last()
                    .unwrap_or(NONE),
            };
            out.push(match above {
                NONE if pick(s) => {
                    outermost(s);
                    i as u32
                }
                r => r,
            });
        }
        out
    }

    /// The outermost CPU operator enclosing span `i` (or `i` itself when it is the outermost),
    /// or [`NONE`].
    pub fn outermost_cpu_op(&self, i: u32) -> u32 {
        let mut best = match self.host_spans.get(i as usize) {
            Some(s) if s.kind == HostKind::CpuOp => i,
            Some(_) => NONE,
            None => return NONE,
        };
        for a in self.ancestors(i) {
            if self.host_spans[a as usize].kind == HostKind::CpuOp {
                best = a;
            }
        }
        best
    }
}

/// The lists [`Trace::exclusive_time_into`] works in, kept by a caller for the next call.
#[derive(Debug, Default)]
pub struct Scratch {
    set: Vec<u32>,
    excl: Vec<i64>,
    open: Vec<usize>,
}

/// An answer per span remembered for recent spans: a direct-mapped table, `(span, answer)`
/// by span index modulo its size, each slot holding the last span that landed on it. For
/// passes that ask about spans that come together (an operator's kernels, a launch's
/// ancestry), where an answer forgotten is only worked out again. Answers are span indexes
/// unless said otherwise.
pub struct RecentSpans<T = u32> {
    slots: Vec<(u32, T)>,
}

impl RecentSpans {
    /// A table of `slots` entries (a power of two), empty.
    pub fn new(slots: usize) -> Self {
        Self::with_filler(slots, NONE)
    }
}

impl<T: Copy> RecentSpans<T> {
    /// A table of `slots` entries (a power of two), empty; `filler` stands in the answers of
    /// the empty slots, never handed out.
    pub fn with_filler(slots: usize, filler: T) -> Self {
        debug_assert!(slots.is_power_of_two());
        RecentSpans {
            slots: vec![(NONE, filler); slots],
        }
    }

    /// The answer remembered for span `i`, if it is still there.
    #[inline]
    pub fn get(&self, i: u32) -> Option<T> {
        let n = self.slots.len();
        match self.slots.get(i as usize & (n - 1)) {
            Some(&(k, v)) if k == i && i != NONE => Some(v),
            _ => None,
        }
    }

    /// Remembers `answer` for span `i`, in place of the span that held its slot.
    #[inline]
    pub fn set(&mut self, i: u32, answer: T) {
        let n = self.slots.len();
        if let Some(slot) = self.slots.get_mut(i as usize & (n - 1)) {
            *slot = (i, answer);
        }
    }
}

/// [`Trace::user_frame`] for many spans in a row, remembering the answer for recent spans
/// and their ancestors: spans that come together (the copies of one layer, the launches of
/// one operator) share most of their ancestry, a deep Python stack, so a walk stops at the
/// first ancestor already seen instead of reading every frame up to the nearest user one.
/// Exact where no span carries an old-style call stack (then a span's frame depends only
/// on its ancestry); with call stacks it walks as [`Trace::user_frame`] does.
pub struct UserFrames {
    /// The name of the span's user frame, or [`NONE`] for none.
    answers: RecentSpans,
    path: Vec<u32>,
    call_stacks: bool,
}

impl UserFrames {
    /// A memo for the spans of `t`.
    pub fn new(t: &Trace) -> Self {
        UserFrames {
            answers: RecentSpans::new(1 << 12),
            path: Vec::new(),
            call_stacks: t.args.any_call_stack(),
        }
    }

    /// What [`Trace::user_frame`] gives for span `i` of `t` (the trace given to
    /// [`UserFrames::new`]).
    pub fn get<'t>(&mut self, t: &'t Trace, i: u32) -> Option<&'t str> {
        if self.call_stacks || t.host_spans.get(i as usize).is_none() {
            return t.user_frame(i);
        }
        self.path.clear();
        let mut k = i;
        let frame = loop {
            if k == NONE {
                break NONE;
            }
            if let Some(a) = self.answers.get(k) {
                break a;
            }
            let s = &t.host_spans[k as usize];
            self.path.push(k);
            if s.kind == HostKind::Python && t.is_user_frame_name(s.name) {
                break s.name;
            }
            k = s.parent;
        };
        for &k in &self.path {
            self.answers.set(k, frame);
        }
        (frame != NONE).then(|| t.str(frame))
    }
}

/// `v.partition_point(pred)`, found by galloping from `hint` (a guess at the answer) and
/// then a binary search in the last step's range: for a guess `d` places off it reads
/// about `2 log2 d` elements near the guess. A `hint` past the end is no guess: a plain
/// binary search. Like `partition_point`, it expects `pred` true on a prefix of `v`.
pub fn partition_near<T>(v: &[T], hint: usize, pred: impl Fn(&T) -> bool) -> usize {
    if hint > v.len() {
        return v.partition_point(pred);
    }
    // The answer lies in [lo, hi]: widen from the hint until an element on each side says so.
    let (lo, hi) = if hint < v.len() && pred(&v[hint]) {
        // At or after hint + 1: step forward while the predicate still holds.
        let (mut lo, mut step) = (hint + 1, 1usize);
        loop {
            let probe = lo + step - 1;
            if probe >= v.len() {
                break (lo, v.len());
            }
            if !pred(&v[probe]) {
                break (lo, probe);
            }
            lo = probe + 1;
            step *= 2;
        }
    } else {
        // At or before hint: step back while the predicate fails.
        let (mut hi, mut step) = (hint, 1usize);
        loop {
            if hi < step {
                break (0, hi);
            }
            let probe = hi - step;
            if pred(&v[probe]) {
                break (probe + 1, hi);
            }
            hi = probe;
            step *= 2;
        }
    };
    lo + v[lo..hi].partition_point(pred)
}

#[cfg(test)]
mod tests {
    use crate::model::*;

    #[test]
    fn the_launch_index_holds_the_operators_around_each_launch() {
        // Operators inside operators inside a frame, twice, and a call outside any operator;
        // each call launched a kernel (correlation id = its position + 1).
        let mut t = Trace::default();
        let spans = [
            (HostKind::Python, 0, 100, "train.py(1): step"),
            (HostKind::CpuOp, 10, 60, "aten::linear"),
            (HostKind::CpuOp, 12, 50, "aten::addmm"),
            (HostKind::Runtime, 14, 16, "cudaLaunchKernel"),
            (HostKind::Runtime, 20, 22, "cudaLaunchKernel"),
            (HostKind::CpuOp, 70, 90, "aten::relu"),
            (HostKind::Runtime, 72, 74, "cudaLaunchKernel"),
            (HostKind::Runtime, 95, 97, "cudaMemcpyAsync"),
        ];
        for (k, &(kind, s, e, name)) in spans.iter().enumerate() {
            let id = t.strings.intern(name);
            let correlation = if kind == HostKind::Runtime {
                k as u64 + 1
            } else {
                0
            };
            t.host_spans.push(HostSpan {
                link: correlation,
                ..HostSpan::new(kind, 1, 1, s, e, id)
            });
            if correlation != 0 {
                t.gpu_ops.push(GpuOp {
                    correlation,
                    ..GpuOp::new(GpuOpKind::Kernel, 0, 7, 200 + s, 210 + s, 0)
                });
            }
        }
        t.finish();
        assert_eq!(t.index.op_launch.len(), 4);
        for (k, &l) in t.index.op_launch.iter().enumerate() {
            assert_ne!(l, NONE);
            assert_eq!(
                t.index.op_cpu_op[k],
                t.enclosing(l, HostKind::CpuOp),
                "op {k}"
            );
            assert_eq!(t.index.op_outer_cpu_op[k], t.outermost_cpu_op(l), "op {k}");
        }
        let linear = t.strings.intern("aten::linear");
        assert_eq!(
            t.host_spans[t.index.op_outer_cpu_op[0] as usize].name,
            linear
        );
        assert_eq!(t.index.op_outer_cpu_op[3], NONE);
    }

    #[test]
    fn remembered_user_frames_equal_the_walk() {
        // User frames above library frames above operators, twice, and a span outside any.
        let t = trace(&[
            (HostKind::Python, 0, 100, "train.py(10): step"),
            (
                HostKind::Python,
                1,
                60,
                "torch/nn/modules/module.py(1): _call_impl",
            ),
            (HostKind::CpuOp, 10, 50, "aten::linear"),
            (HostKind::CpuOp, 12, 40, "aten::to"),
            (HostKind::CpuOp, 14, 30, "aten::copy_"),
            (HostKind::Python, 61, 99, "model.py(5): forward"),
            (HostKind::CpuOp, 70, 90, "aten::to"),
            (HostKind::CpuOp, 101, 110, "aten::to"),
        ]);
        let mut memo = super::UserFrames::new(&t);
        assert!(t.user_frame(4).is_some() && t.user_frame(7).is_none());
        // Twice over, so the second pass reads only remembered answers.
        for _ in 0..2 {
            for i in (0..t.host_spans.len() as u32).chain([NONE, 99]) {
                assert_eq!(memo.get(&t, i), t.user_frame(i), "span {i}");
            }
        }
    }

    #[test]
    fn partition_near_equals_partition_point_from_any_hint() {
        // Runs of equal values, so that the answer sits inside a run as often as at its edge.
        let v: Vec<i64> = (0..300).map(|x| x / 7).collect();
        for len in [0, 1, 2, 5, 64, 300] {
            let v = &v[..len];
            for cut in -1..45 {
                let want = v.partition_point(|&x| x <= cut);
                for hint in (0..=len + 2).chain([usize::MAX]) {
                    assert_eq!(
                        super::partition_near(v, hint, |&x| x <= cut),
                        want,
                        "len {len}, cut {cut}, hint {hint}"
                    );
                }
            }
        }
    }

    fn trace(spans: &[(HostKind, i64, i64, &str)]) -> Trace {
        let mut t = Trace::default();
        for &(kind, s, e, name) in spans {
            let id = t.strings.intern(name);
            t.host_spans.push(HostSpan::new(kind, 1, 1, s, e, id));
        }
        t.finish();
        t
    }

    #[test]
    fn exclusive_time_adds_up_and_goes_to_the_innermost_span() {
        // step [0,100) > op [10,60) > call [20,30); op2 [70,80); nothing after 100.
        let t = trace(&[
            (HostKind::Annotation, 0, 100, "ProfilerStep#0"),
            (HostKind::CpuOp, 10, 60, "aten::op"),
            (HostKind::Runtime, 20, 30, "cudaLaunchKernel"),
            (HostKind::CpuOp, 70, 80, "aten::op2"),
        ]);
        let name = |i: u32| {
            if i == NONE {
                "-"
            } else {
                t.str(t.host_spans[i as usize].name)
            }
        };
        let got: Vec<(&str, i64)> = t
            .exclusive_time((1, 1), 25, 120)
            .into_iter()
            .map(|(i, ns)| (name(i), ns))
            .collect();
        assert_eq!(
            got,
            vec![
                ("ProfilerStep#0", 30),
                ("aten::op", 30),
                ("cudaLaunchKernel", 5),
                ("aten::op2", 10),
                ("-", 20)
            ]
        );
        assert_eq!(got.iter().map(|g| g.1).sum::<i64>(), 95);
        assert!(t.exclusive_time((1, 1), 50, 50).is_empty());
        assert_eq!(t.exclusive_time((9, 9), 0, 10), vec![(NONE, 10)]);
    }
}
