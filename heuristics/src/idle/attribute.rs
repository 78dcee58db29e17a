//! Gap attribution: sweeping the launching thread over a gap and giving each instant to the
//! innermost span active then, measured, then merged into a gap's parts.

use super::calls::*;
use super::*;
use crate::names::{is_alloc_call, is_sync_call, short_name, span_name};
use rustc_hash::FxHashSet;
use std::sync::{Mutex, OnceLock};
use tracehound_parsers::{HostKind, NONE, Trace, activity::ThreadKey};

/// What a measured slice of a gap was, as a key: ids and borrowed names, so that a gap's
/// hundreds of slices merge without building a string each; the words come after merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Leaf {
    /// No span (untraced).
    Untraced,
    /// The outermost DataLoader span's name.
    Loader(u32),
    /// An autotuned convolution operator (span index).
    Conv(u32),
    /// A runtime call (name) inside an operator (name, 0 for none).
    CallIn(u32, u32),
    /// A millisecond-long launch or runtime call (name) inside an operator.
    FirstCallIn(u32, u32),
    /// An operator (name, 0 for none) and the synchronising call (name) under it.
    OpCall(u32, u32),
    /// A launch or runtime call (name).
    Call(u32),
    /// The first call of an operator (name).
    FirstOp(u32),
    /// The first call of an operator (name) whose later calls on the same thread are at
    /// least [`ONE_OFF_RATIO`] times faster: set-up paid once in the window.
    OneOff(u32),
    /// Milliseconds of host time in an operator that launches GPU work.
    HostWork(u32),
    /// An operator that launched no GPU work.
    OnCpu(u32),
    /// Operator dispatch.
    Dispatch,
    /// A Python frame (name).
    Frame(u32),
    /// A span named as it is (an OS call).
    Name(u32),
    /// A user annotation with no finer span inside.
    Inside(u32),
    /// An annotation whose name says it compiles (nvFuser's `compileFusionParallel`, NVRTC's
    /// `CompileProgram`), with no finer span inside: just-in-time compilation.
    JitInside(u32),
    /// From the launch call to the kernel's start.
    LaunchLatency,
    /// Launched, not started.
    Queued,
    /// Launched, not started, while the host blocked in a synchronising call (name) inside
    /// an operator (name, 0 for none).
    QueuedBehind(u32, u32),
    /// Launched after the thread made its stream wait on an event (the wait call's name), not
    /// started, and the host blocked meanwhile in a call (name) inside an operator (name; 0
    /// and 0 when the host did not block).
    QueuedBehindEvent(u32, u32, u32),
    /// Launch time after a sync that drained the queue: the sync's cost.
    Drained,
    /// Untraced time where CPU samples name a function (symbol, module).
    Sampled(u32, u32),
    /// Inside torch.compile's compilation: the outermost compile span (name).
    Compiling(u32),
    /// Inductor autotuning (span name).
    Tuning(u32),
    /// A garbage collection (frame name).
    Collecting(u32),
    /// Time the autograd engine thread spent outside any span while the caller waited.
    EngineIdle,
    /// Another thread (tid) ran Python (its innermost frame's name) meanwhile.
    GilHeld(i64, u32),
    /// CPython's GIL wait in the OS runtime trace, with the thread that ran meanwhile (tid,
    /// -1 when none stands out).
    GilWait(i64),
}

/// A measured slice before its words are spelled out.
struct Raw<'t> {
    kind: CauseKind,
    leaf: Leaf,
    frame: Option<&'t str>,
    ns: i64,
}

/// What slices of a gap are summed by: category, leaf, and the frame by where its text lies
/// (the same name is one interned text; equal texts from different places are summed by
/// `merge_parts` after).
type RawKey = (CauseKind, Leaf, Option<(usize, usize)>);

impl Raw<'_> {
    fn key(&self) -> RawKey {
        (
            self.kind,
            self.leaf,
            self.frame.map(|f| (f.as_ptr() as usize, f.len())),
        )
    }
}

/// Name flags: the DataLoader, a convolution, torch.compile compiling, Inductor autotuning, a
/// garbage collection (user frames are the trace's own table, `Trace::is_user_frame_name`).
const LOADER: u8 = 1;
const CONV: u8 = 2;
/// A stream's wait on an event (`cudaStreamWaitEvent`, `hipStreamWaitEvent`).
const STREAM_WAIT: u8 = 4;
const COMPILE: u8 = 8;
const INDUCTOR_TUNE: u8 = 16;
const GC: u8 = 32;
/// `run_backward`: the caller waiting for the autograd engine.
const RUN_BACKWARD: u8 = 64;
/// The name's flags have been worked out.
const KNOWN: u8 = 0x80;

/// What encloses a span.
#[derive(Debug, Clone, Copy)]
struct Around {
    /// The outermost DataLoader span.
    loader: u32,
    /// The outermost convolution operator.
    conv: u32,
    /// The outermost CPU operator.
    op: u32,
    /// The innermost user Python frame.
    frame: u32,
    /// The outermost torch.compile compilation span.
    compile: u32,
    /// The outermost Inductor autotuning span.
    tune: u32,
    /// The outermost garbage collection frame.
    gc: u32,
}

/// How long before queued time a stream-wait-on-event call still explains it: the launch
/// that follows the wait comes within microseconds, 1 ms leaves room for the host's work
/// between them.
const EVENT_WAIT_LEAD_NS: i64 = 1_000_000;

pub(super) struct Attributor<'t> {
    trace: &'t Trace,
    /// The thread standing in for a gap without a launcher, found on first need.
    main_thread: OnceLock<Option<ThreadKey>>,
    sync_corr: &'t FxHashSet<u64>,
    /// Per host span, one bit: it or a span inside it launched GPU work.
    launched: Vec<u64>,
    /// Whether the trace records CPU operators or Python frames.
    cpu_data: bool,
    /// What untraced time is called when the trace has no CPU-side data, in the words of the
    /// capture's reader.
    no_cpu_leaf: String,
    /// Whether the trace shows module loading anywhere (a module-load call, or a launch
    /// or runtime call that took milliseconds): only then is host time in the first call of
    /// an operator read as first-call cost. Without it, such time at the start of a Kineto
    /// capture is the profiler starting up.
    loads_modules: OnceLock<bool>,
    /// Convolution operator -> whether it synchronised (autotuned), computed on demand.
    conv_tuned: Mutex<FxHashMap<u32, bool>>,
    /// (thread, operator name) -> median duration of the operator's calls on that thread
    /// after the first (None with no later call), computed on demand.
    later_calls: Mutex<FxHashMap<(ThreadKey, u32), Option<i64>>>,
    /// Per string id: what a span of that name is ([`LOADER`], [`CONV`], …),
    /// decided once per name instead of once per span visited.
    flags: Vec<std::sync::atomic::AtomicU8>,
    /// Whether any span carries an old-style `Call stack` (the frame fallback).
    call_stacks: OnceLock<bool>,
    /// What each thread ran ([`ThreadFacts`]), found on first need.
    threads: OnceLock<ThreadFacts>,
    /// [`Attributor::os_call_ends`], found on first need.
    os_call_ends: OnceLock<FxHashMap<ThreadKey, Vec<i64>>>,
}

/// Spans per block of [`Attributor::os_call_ends`]: a block costs 8 bytes, and a search
/// reads at most a block of spans before the first that can overlap.
const OS_BLOCK: usize = 64;

/// What the threads ran, found in one pass over each thread's spans.
#[derive(Debug, Default)]
struct ThreadFacts {
    /// Per process: its autograd engine thread (the one that runs most backward
    /// operators), and the other threads that run Python frames.
    processes: FxHashMap<i64, ProcessThreads>,
    /// (thread, name) -> start of the first CPU operator of that name on that thread.
    first_op: FxHashMap<(ThreadKey, u32), i64>,
}

/// The threads of one process that the launching thread's time can depend on.
#[derive(Debug, Default)]
struct ProcessThreads {
    /// The autograd engine thread: it runs backward while the caller waits in
    /// `run_backward`. Found by its `autograd::engine::evaluate_function` operators, since
    /// Kineto names it `pt_autograd_0` in some captures and after the process in others.
    engine: Option<ThreadKey>,
    /// Threads with Python frames (candidates for holding the GIL).
    python: Vec<ThreadKey>,
}

/// Whether an annotation's name says the code inside it compiles kernels (`compileFusionParallel`,
/// `Nvrtc::CompileProgram`, `jit_compile`), as opposed to running compiled code
/// (`Torch-Compiled Region`, `CompiledFunction`).
fn is_compiling(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("compile") && !n.contains("compiled")
}

/// The libc call inside nsys's OS-runtime wrapper `NSYS_OSRT_<call>_<n>`.
fn osrt_wrapped(sym: &str) -> Option<&str> {
    let rest = sym.strip_prefix("NSYS_OSRT_")?;
    let (call, n) = rest.rsplit_once('_')?;
    (!call.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(call)
}

/// An innermost Python frame that waits with the GIL released (sleep, a lock, a queue, I/O)
/// does not hold it, whatever its frame spans.
fn releases_gil(frame: &str) -> bool {
    const WAITS: &[&str] = &[
        "sleep",
        "acquire",
        "wait",
        "select",
        "poll",
        "recv",
        "accept",
        "read",
        "join",
        "get of",
        "queue.py",
        "selectors.py",
        "socket.py",
        "epoll",
        // Calls into C++ that release the GIL while they block on other threads or the GPU.
        "run_backward",
        "synchronize",
        "item of",
        "tolist",
        "cpu of",
    ];
    WAITS.iter().any(|w| frame.contains(w))
}

/// Another thread ran Python through at least this share of a stretch the launching thread
/// spent in host work: with one GIL, the launching thread waited for it.
const GIL_SHARE: f64 = 0.5;

/// What [`Attributor::around`] worked out, and its scratch list; one per worker, so its
/// tables are allocated once.
#[derive(Default)]
pub(super) struct Memo<'t> {
    /// The spans of the last chain [`Attributor::around`] worked out, outermost first, with
    /// what encloses each: a span's parent comes before it in span order, so the indices rise.
    around: Vec<(u32, Around)>,
    chain: Vec<u32>,
    /// A gap's slices by key ([`RawKey`]), to the position of their sum: cleared per gap.
    slices: FxHashMap<RawKey, usize>,
    /// The leaves and frames handed out, one copy of each text (kept across gaps).
    shared: rustc_hash::FxHashSet<SharedText>,
    /// Each leaf's words, spelled once (kept across gaps: a trace's gaps repeat a few
    /// hundred leaves). All but [`Leaf::Drained`], whose words are the gap's own.
    words: FxHashMap<Leaf, SharedText>,
    /// Where the last search of each thread's spans, and of the device's operations, ended
    /// (kept across gaps): a worker takes the gaps in time order, so the next answer lies a
    /// few spans on and is found by galloping from there ([`tracehound_parsers::activity::partition_near`]).
    hints: Vec<(ThreadKey, usize)>,
    op_hint: Option<(i32, usize)>,
    /// A gap's sweep, its slices and their sums, and the sweep's own lists: kept across
    /// gaps, so a long gap's lists (an export's gaps sweep up to millions of spans) are not
    /// fresh pages each time.
    spent: Vec<(u32, i64)>,
    sweep: tracehound_parsers::activity::Scratch,
    raws: Vec<Raw<'t>>,
    merged: Vec<Raw<'t>>,
}

impl Memo<'_> {
    /// `text`, shared with the gaps that already said it.
    fn share(&mut self, text: String) -> SharedText {
        match self.shared.get(text.as_str()) {
            Some(s) => s.clone(),
            None => {
                let s = SharedText::from(text);
                self.shared.insert(s.clone());
                s
            }
        }
    }

    /// Where the last search of `thread`'s spans ended (`usize::MAX`, no guess, at first).
    fn hint(&mut self, thread: ThreadKey) -> &mut usize {
        let k = match self.hints.iter().position(|h| h.0 == thread) {
            Some(k) => k,
            None => {
                self.hints.push((thread, usize::MAX));
                self.hints.len() - 1
            }
        };
        &mut self.hints[k].1
    }

    /// [`Memo::share`] of borrowed text.
    fn share_str(&mut self, text: &str) -> SharedText {
        match self.shared.get(text) {
            Some(s) => s.clone(),
            None => self.share(text.to_string()),
        }
    }
}

/// Per host span, one bit: it or a span inside it launched GPU work. The operators that
/// launched are marked, then one pass from the last span to the first carries each mark to
/// the span's parent, which comes before it in span order: the spans are read in order, where
/// walking up from each operator read its ancestors all over the list.
fn launched_marks(trace: &Trace) -> Vec<u64> {
    let n = trace.host_spans.len();
    let mut launched = vec![0u64; n.div_ceil(64)];
    for &c in trace.index.op_cpu_op.iter().filter(|&&c| (c as usize) < n) {
        launched[c as usize / 64] |= 1 << (c % 64);
    }
    for w in (0..launched.len()).rev() {
        let mut bits = launched[w];
        while bits != 0 {
            let b = 63 - bits.leading_zeros();
            bits &= !(1u64 << b);
            let i = w * 64 + b as usize;
            let p = trace.host_spans[i].parent;
            if p == NONE {
                continue;
            }
            debug_assert!((p as usize) < i, "a parent comes before its span");
            let (pw, pb) = (p as usize / 64, 1u64 << (p % 64));
            if let Some(x) = launched.get_mut(pw) {
                *x |= pb;
            }
            if pw == w {
                bits |= pb;
            }
        }
    }
    launched
}

impl<'t> Attributor<'t> {
    pub(super) fn new(trace: &'t Trace, sync_corr: &'t FxHashSet<u64>) -> Self {
        let launched = launched_marks(trace);
        // OS runtime calls alone say where the host waited, not what it computed.
        let cpu_data = trace
            .host_spans
            .iter()
            .any(|s| matches!(s.kind, HostKind::CpuOp | HostKind::Python));
        let missing = match trace.meta.capture.no_cpu_data.as_str() {
            "" => "the trace has no CPU-side data",
            m => m,
        };
        let no_cpu_leaf = format!("{NO_CPU_DATA} ({missing})");
        Attributor {
            trace,
            main_thread: OnceLock::new(),
            sync_corr,
            launched,
            cpu_data,
            no_cpu_leaf,
            loads_modules: OnceLock::new(),
            conv_tuned: Mutex::new(FxHashMap::default()),
            later_calls: Mutex::new(FxHashMap::default()),
            flags: (0..trace.strings.len())
                .map(|_| std::sync::atomic::AtomicU8::new(0))
                .collect(),
            call_stacks: OnceLock::new(),
            threads: OnceLock::new(),
            os_call_ends: OnceLock::new(),
        }
    }

    /// The engine and Python threads of every process.
    fn threads(&self) -> &FxHashMap<i64, ProcessThreads> {
        &self.thread_facts().processes
    }

    /// [`ThreadFacts`], worked out on first need.
    fn thread_facts(&self) -> &ThreadFacts {
        let t = self.trace;
        self.threads.get_or_init(|| {
            let engine_op = t
                .strings
                .matching(|n| n.starts_with("autograd::engine::evaluate_function"));
            let mut out: FxHashMap<i64, ProcessThreads> = FxHashMap::default();
            let mut best: FxHashMap<i64, (usize, ThreadKey)> = FxHashMap::default();
            let mut first_op: FxHashMap<(ThreadKey, u32), i64> = FxHashMap::default();
            // The names met on the thread being read, one bit each: only a name's first
            // operator goes into the map (a probe per operator cost as much as the pass).
            let mut met = vec![0u64; t.strings.len().div_ceil(64)];
            for (k, spans) in &t.index.spans_by_thread {
                let mut backward = 0usize;
                let mut python = false;
                met.fill(0);
                for &i in spans.iter() {
                    let s = &t.host_spans[i as usize];
                    python |= s.kind == HostKind::Python;
                    if s.kind == HostKind::CpuOp {
                        if engine_op.get(s.name as usize).copied().unwrap_or(false) {
                            backward += 1;
                        }
                        let (w, b) = (s.name as usize / 64, 1u64 << (s.name % 64));
                        if let Some(m) = met.get_mut(w)
                            && *m & b == 0
                        {
                            *m |= b;
                            first_op.insert((*k, s.name), s.start);
                        }
                    }
                }
                let e = out.entry(k.0).or_default();
                if python {
                    e.python.push(*k);
                }
                if backward > 0 && best.get(&k.0).is_none_or(|b| backward > b.0) {
                    best.insert(k.0, (backward, *k));
                }
            }
            for (pid, (_, k)) in best {
                out.entry(pid).or_default().engine = Some(k);
            }
            ThreadFacts {
                processes: out,
                first_op,
            }
        })
    }

    /// How a thread is named in words: its name from the trace, else its id.
    fn thread_label(&self, k: ThreadKey) -> String {
        let names: Vec<&str> = self
            .trace
            .meta
            .capture
            .host_threads
            .iter()
            .filter(|h| (h.pid, h.tid) == k)
            .filter_map(|h| h.name.as_deref())
            .map(|n| {
                // Kineto writes `thread 1148 (metrics-writer)`.
                n.rfind('(')
                    .and_then(|p| n[p + 1..].strip_suffix(')'))
                    .unwrap_or(n)
            })
            .collect();
        // A thread named after the process says less than its own name.
        match names
            .iter()
            .find(|n| !n.starts_with("python"))
            .or(names.first())
        {
            Some(n) => format!("'{n}' (tid {})", k.1),
            None => format!("tid {}", k.1),
        }
    }

    /// [`Self::thread_label`] of the recorded thread with id `tid`, when the trace lists it.
    fn tid_label(&self, tid: i64) -> Option<String> {
        self.trace
            .meta
            .capture
            .host_threads
            .iter()
            .find(|h| h.tid == tid)
            .map(|h| self.thread_label((h.pid, h.tid)))
    }

    /// When span `i` of the launching thread is `run_backward` (the caller waiting for the
    /// autograd engine) for most of its stretch in `[a, b)`: the stretch and the engine
    /// thread, whose work it was.
    fn backward_wait(
        &self,
        i: u32,
        ns: i64,
        thread: ThreadKey,
        a: i64,
        b: i64,
    ) -> Option<(i64, i64, ThreadKey)> {
        if i == NONE {
            return None;
        }
        let t = self.trace;
        let s = &t.host_spans[i as usize];
        if !(s.kind == HostKind::Python || s.kind == HostKind::CpuOp)
            || !self.flag(s.name, RUN_BACKWARD)
        {
            return None;
        }
        let engine = self
            .threads()
            .get(&thread.0)?
            .engine
            .filter(|&e| e != thread)?;
        let (x, y) = (s.start.max(a), s.end.min(b));
        // Only when nothing else ran inside it on this thread: then the stretch is the wait.
        (y > x && ns * 10 >= (y - x) * 9).then_some((x, y, engine))
    }

    /// Whether a measured slice is CPython's GIL wait as the OS runtime trace records it.
    fn is_gil_wait(&self, r: &Raw) -> bool {
        r.kind == CauseKind::OsCall
            && matches!(r.leaf, Leaf::Name(n) if self.trace.str(n) == "pthread_cond_timedwait")
    }

    /// Whether process `pid` runs Python: its threads are named after it, or the trace has
    /// Python frames.
    fn python_process(&self, pid: i64) -> bool {
        let c = &self.trace.meta.capture;
        c.python_frames
            || c.host_threads.iter().any(|h| {
                h.pid == pid
                    && h.name
                        .as_deref()
                        .is_some_and(|n| n.contains("python") || n.contains("pt_autograd"))
            })
    }

    /// In a trace of OS calls: the other thread of the process that was active in the window
    /// and spent the least of `[a, b)` inside OS calls (under half), i.e. ran meanwhile.
    fn running_thread(&self, thread: ThreadKey, a: i64, b: i64) -> Option<ThreadKey> {
        let t = self.trace;
        let w = (b - a).max(1);
        let mut best: Option<(i64, ThreadKey)> = None;
        for (k, spans) in &t.index.spans_by_thread {
            if k.0 != thread.0 || *k == thread {
                continue;
            }
            // A thread with no OS call at all says nothing about whether it ran.
            let Some(ends) = self.os_call_ends().get(k) else {
                continue;
            };
            // The OS calls that overlap [a, b): none before the first block whose calls may
            // end after `a`, none from the first span starting at `b`.
            let from = ends.partition_point(|&e| e <= a) * OS_BLOCK;
            let (mut blocked, mut active) = (0i64, false);
            for &i in spans.get(from..).unwrap_or_default() {
                let s = &t.host_spans[i as usize];
                if s.start >= b {
                    break;
                }
                if s.kind == HostKind::OsCall {
                    blocked += (s.end.min(b) - s.start.max(a)).max(0);
                    active |= s.end > a;
                }
            }
            if active && 2 * blocked < w && best.is_none_or(|x| blocked < x.0) {
                best = Some((blocked, *k));
            }
        }
        best.map(|x| x.1)
    }

    /// Per thread with OS calls, per block of [`OS_BLOCK`] of its spans: the latest end of
    /// an OS call in that block or before it (so the list rises). Built on first need.
    fn os_call_ends(&self) -> &FxHashMap<ThreadKey, Vec<i64>> {
        let t = self.trace;
        self.os_call_ends.get_or_init(|| {
            let mut out = FxHashMap::default();
            for (k, spans) in &t.index.spans_by_thread {
                let mut latest: Option<i64> = None;
                let ends: Vec<i64> = spans
                    .chunks(OS_BLOCK)
                    .map(|block| {
                        for &i in block {
                            let s = &t.host_spans[i as usize];
                            if s.kind == HostKind::OsCall {
                                latest = Some(latest.map_or(s.end, |l| l.max(s.end)));
                            }
                        }
                        latest.unwrap_or(i64::MIN)
                    })
                    .collect();
                if latest.is_some() {
                    out.insert(*k, ends);
                }
            }
            out
        })
    }

    /// The thread (not `thread`, not the engine) that ran Python for the longest in
    /// `[a, b)`, with that time and its innermost frame, when it covers `GIL_SHARE`.
    fn gil_holder(
        &self,
        thread: ThreadKey,
        a: i64,
        b: i64,
        memo: &mut Memo<'t>,
    ) -> Option<(ThreadKey, i64, u32)> {
        let t = self.trace;
        let p = self.threads().get(&thread.0)?;
        let mut best: Option<(ThreadKey, i64, u32)> = None;
        for &k in p
            .python
            .iter()
            .filter(|&&k| k != thread && Some(k) != p.engine)
        {
            let mut ran = 0i64;
            let mut top: (i64, u32) = (0, 0);
            for (j, ns) in t.exclusive_time_near(k, a, b, memo.hint(k)) {
                if j == NONE {
                    continue;
                }
                let s = &t.host_spans[j as usize];
                if s.kind == HostKind::Python && !releases_gil(t.str(s.name)) {
                    ran += ns;
                    if ns > top.0 {
                        top = (ns, s.name);
                    }
                }
            }
            if best.is_none_or(|b| ran > b.1) {
                best = Some((k, ran, top.1));
            }
        }
        best.filter(|h| h.1 as f64 >= GIL_SHARE * (b - a) as f64 && h.1 > 0)
    }

    /// What time no span covers is called: code the profiler did not trace, or, in a trace
    /// without CPU-side data, host code outside CUDA calls with how to capture it.
    fn untraced_leaf(&self) -> &str {
        if self.cpu_data {
            "no span recorded (code the profiler did not trace)"
        } else {
            &self.no_cpu_leaf
        }
    }

    fn is_blocking(&self, i: u32) -> bool {
        let s = &self.trace.host_spans[i as usize];
        matches!(s.kind, HostKind::Runtime | HostKind::Driver)
            && (is_sync_call(self.trace.api_name(s.name))
                || (s.correlation() != 0 && self.sync_corr.contains(&s.correlation())))
    }

    /// Whether span `op` (an operator) or a span inside it launched GPU work.
    fn launches(&self, op: u32) -> bool {
        op != NONE
            && self
                .launched
                .get(op as usize / 64)
                .is_some_and(|x| x & (1u64 << (op % 64)) != 0)
    }

    /// Whether name `name` has flag `f`; each name's flags are worked out on first use (a
    /// trace holds far more names than gaps ever touch).
    fn flag(&self, name: u32, f: u8) -> bool {
        self.flags_of(name) & f != 0
    }

    /// All the flags of name `name` ([`Self::flag`]), worked out on first use.
    fn flags_of(&self, name: u32) -> u8 {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(slot) = self.flags.get(name as usize) else {
            return 0;
        };
        let mut v = slot.load(Relaxed);
        if v & KNOWN == 0 {
            let n = self.trace.str(name);
            v = KNOWN
                | (if is_loader(n) { LOADER } else { 0 })
                | (if is_conv(n) { CONV } else { 0 })
                | (if n.contains("StreamWaitEvent") {
                    STREAM_WAIT
                } else {
                    0
                })
                | (if is_compile(n) { COMPILE } else { 0 })
                | (if is_inductor_tuning(n) {
                    INDUCTOR_TUNE
                } else {
                    0
                })
                | (if is_gc(n) { GC } else { 0 })
                | (if n.contains("run_backward") {
                    RUN_BACKWARD
                } else {
                    0
                });
            slot.store(v, Relaxed);
        }
        v
    }

    /// What encloses span `i`: its own contribution on top of its parent's. The chain worked
    /// out last is kept: a gap's spans come in span order, which visits a thread's nesting
    /// parent before child, so the next span's ancestors are on it, and what lies past the
    /// one it joins at (a finished subtree) encloses no later span either. A span asked out
    /// of that order (another thread's) only costs its chain's walk to the outermost span.
    /// Iterative: nesting depth comes from the input.
    fn around(&self, i: u32, memo: &mut Memo<'t>) -> Around {
        let t = self.trace;
        let mut chain = std::mem::take(&mut memo.chain);
        chain.clear();
        let mut k = i;
        let mut a = loop {
            // Parents have smaller indices than their children: what lies above `k` on the
            // kept chain is not its ancestor.
            while memo.around.last().is_some_and(|&(j, _)| j > k) {
                memo.around.pop();
            }
            if k == NONE {
                memo.around.clear();
                break Around {
                    loader: NONE,
                    conv: NONE,
                    op: NONE,
                    frame: NONE,
                    compile: NONE,
                    tune: NONE,
                    gc: NONE,
                };
            }
            match memo.around.last() {
                Some(&(j, a)) if j == k => break a,
                _ => {}
            }
            chain.push(k);
            k = t.host_spans[k as usize].parent;
        };
        // Outermost wins for the loader, convolution and operator (an ancestor's stays);
        // innermost wins for the frame.
        for &k in chain.iter().rev() {
            let s = &t.host_spans[k as usize];
            let f = self.flags_of(s.name);
            if a.loader == NONE && f & LOADER != 0 {
                a.loader = k;
            }
            if a.compile == NONE && f & COMPILE != 0 {
                a.compile = k;
            }
            if a.tune == NONE && f & INDUCTOR_TUNE != 0 {
                a.tune = k;
            }
            if a.gc == NONE && f & GC != 0 {
                a.gc = k;
            }
            match s.kind {
                HostKind::CpuOp => {
                    if a.op == NONE {
                        a.op = k;
                    }
                    if a.conv == NONE && f & CONV != 0 {
                        a.conv = k;
                    }
                }
                HostKind::Python if t.is_user_frame_name(s.name) => a.frame = k,
                _ => {}
            }
            memo.around.push((k, a));
        }
        memo.chain = chain;
        a
    }

    /// Whether convolution operator `conv` synchronised while it ran (cuDNN benchmark mode
    /// timing its candidates).
    fn is_tuned(&self, conv: u32) -> bool {
        let t = self.trace;
        let compute = || {
            let op = &t.host_spans[conv as usize];
            let spans = t.thread_spans((op.pid, op.tid));
            let from = spans.partition_point(|&k| t.host_spans[k as usize].start < op.start);
            spans[from..]
                .iter()
                .take_while(|&&k| t.host_spans[k as usize].start < op.end)
                .any(|&k| {
                    let s = &t.host_spans[k as usize];
                    matches!(s.kind, HostKind::Runtime | HostKind::Driver)
                        && is_timing_sync(t.api_name(s.name))
                })
        };
        match self.conv_tuned.lock() {
            Ok(mut m) => *m.entry(conv).or_insert_with(compute),
            Err(_) => compute(),
        }
    }

    /// The thread that drives the loop: among threads with Python frames when there are any,
    /// the one that launched the most GPU work (else ran the most CPU operators, else CUDA
    /// calls). It stands in when a gap has no launcher (the window's trailing gap). Python and
    /// launches come first because the autograd engine thread runs more operators, and often
    /// launches more kernels, than the thread that drives the loop.
    fn main_thread(&self) -> Option<ThreadKey> {
        let trace = self.trace;
        *self.main_thread.get_or_init(|| {
            let mut launched: FxHashMap<ThreadKey, usize> = FxHashMap::default();
            for &l in trace.index.op_launch.iter().filter(|&&l| l != NONE) {
                let s = &trace.host_spans[l as usize];
                *launched.entry((s.pid, s.tid)).or_default() += 1;
            }
            trace
                .index
                .spans_by_thread
                .iter()
                .map(|(k, v)| {
                    let count = |kinds: &[HostKind]| {
                        v.iter()
                            .filter(|&&i| kinds.contains(&trace.host_spans[i as usize].kind))
                            .count()
                    };
                    (
                        // The loop runs in Python when the trace records Python.
                        count(&[HostKind::Python]) > 0,
                        launched.get(k).copied().unwrap_or(0),
                        count(&[HostKind::CpuOp]),
                        count(&[HostKind::Runtime, HostKind::Driver]),
                        std::cmp::Reverse(*k),
                        *k,
                    )
                })
                .max()
                .filter(|(_, l, ops, calls, _, _)| l + ops + calls > 0)
                .map(|(_, _, _, _, _, k)| k)
        })
    }

    /// Whether the trace shows module loading anywhere (a module-load call, or a launch or
    /// runtime call that took milliseconds); found on first need.
    fn loads_modules(&self) -> bool {
        let trace = self.trace;
        *self.loads_modules.get_or_init(|| {
            trace.host_spans.iter().any(|s| {
                matches!(s.kind, HostKind::Runtime | HostKind::Driver) && {
                    let n = trace.api_name(s.name);
                    is_module_load_call(n)
                        || (s.dur() >= SLOW_CALL_NS
                            && !is_sync_call(n)
                            && !is_alloc_call(n)
                            && !n.contains("GraphLaunch"))
                }
            })
        })
    }

    /// Whether any span carries an old-style `Call stack`.
    fn call_stacks(&self) -> bool {
        *self.call_stacks.get_or_init(|| {
            let t = self.trace;
            t.args.any_call_stack() && t.host_spans.iter().any(|s| t.op_args(s).call_stack != 0)
        })
    }

    /// Whether CPU operator `op` is the first of its name on its thread.
    fn is_first_op(&self, op: u32) -> bool {
        let t = self.trace;
        let map = &self.thread_facts().first_op;
        let s = &t.host_spans[op as usize];
        map.get(&((s.pid, s.tid), s.name)) == Some(&s.start)
    }

    /// Whether CPU operator `op` (the first of its name on its thread) took at least
    /// [`ONE_OFF_RATIO`] times the median of its later calls there: its extra time is set-up
    /// paid once, whatever it was (a library handle, lazy loading, the profiler starting on
    /// the thread). Without later calls (a one-step capture) nothing says so.
    fn is_one_off(&self, op: u32) -> bool {
        let t = self.trace;
        let s = &t.host_spans[op as usize];
        let key = ((s.pid, s.tid), s.name);
        let median = {
            let mut memo = self.later_calls.lock().unwrap_or_else(|e| e.into_inner());
            *memo.entry(key).or_insert_with(|| {
                let mut d: Vec<i64> = t
                    .thread_spans(key.0)
                    .iter()
                    .map(|&j| &t.host_spans[j as usize])
                    .filter(|o| o.name == s.name && o.kind == s.kind && o.start > s.start)
                    .map(|o| o.dur())
                    .collect();
                if d.is_empty() {
                    return None;
                }
                d.sort_unstable();
                Some(d[d.len() / 2])
            })
        };
        median.is_some_and(|m| m.saturating_mul(ONE_OFF_RATIO) <= s.dur())
    }

    /// Category, leaf and user frame of the time span `i` was innermost for `ns`.
    fn categorize(&self, i: u32, ns: i64, memo: &mut Memo<'t>) -> Raw<'t> {
        let t = self.trace;
        let raw = |kind, leaf, frame| Raw {
            kind,
            leaf,
            frame,
            ns,
        };
        if i == NONE {
            return raw(CauseKind::Untraced, Leaf::Untraced, None);
        }
        let s = &t.host_spans[i as usize];
        // An OS call made inside a CUDA call on the same thread (the driver's ioctl or mmap
        // under cudaMallocAsync or a launch) is that call's time: the program asked for the
        // CUDA call, not the OS call (a field T4 trace's pool allocator showed as "OS calls:
        // ioctl").
        if s.kind == HostKind::OsCall
            && let Some(p) = t.host_spans.get(s.parent as usize)
            && matches!(p.kind, HostKind::Runtime | HostKind::Driver)
        {
            return self.categorize(s.parent, ns, memo);
        }
        let around = self.around(i, memo);
        let frame = if around.frame != NONE {
            Some(t.str(t.host_spans[around.frame as usize].name))
        } else if self.call_stacks() {
            t.user_frame(i)
        } else {
            None
        };
        if around.loader != NONE {
            let n = t.host_spans[around.loader as usize].name;
            return raw(CauseKind::DataLoading, Leaf::Loader(n), frame);
        }
        if around.conv != NONE && self.is_tuned(around.conv) {
            return raw(CauseKind::Autotune, Leaf::Conv(around.conv), frame);
        }
        // Framework phases before the operator they run: a compile launches benchmark
        // kernels and runs Python, and all of it is the compile's cost.
        let name_of = |k: u32| t.host_spans[k as usize].name;
        if around.tune != NONE {
            return raw(
                CauseKind::Compile,
                Leaf::Tuning(name_of(around.tune)),
                frame,
            );
        }
        if around.compile != NONE {
            return raw(
                CauseKind::Compile,
                Leaf::Compiling(name_of(around.compile)),
                frame,
            );
        }
        if around.gc != NONE {
            return raw(
                CauseKind::GarbageCollection,
                Leaf::Collecting(name_of(around.gc)),
                frame,
            );
        }
        let op = around.op;
        let op_name = if op == NONE {
            0
        } else {
            t.host_spans[op as usize].name
        };
        match s.kind {
            HostKind::Runtime | HostKind::Driver => {
                let call = t.api_name(s.name);
                if is_alloc_call(call)
                    && s.dur() >= SLOW_CALL_NS
                    && op != NONE
                    && self.loads_modules()
                    && self.is_first_op(op)
                {
                    // A millisecond-long cudaFree or cudaMalloc in an operator's first call, in
                    // a trace that shows start-up (module loading, slow first launches), is
                    // start-up (context creation behind cudaFree, a library's handle and
                    // workspace in the first convolution or GEMM), paid once: not allocator
                    // churn. (A one-step capture makes every operator a first call.)
                    raw(
                        CauseKind::ModuleLoad,
                        Leaf::FirstCallIn(s.name, op_name),
                        frame,
                    )
                } else if is_alloc_call(call) {
                    raw(CauseKind::Allocator, Leaf::CallIn(s.name, op_name), frame)
                } else if is_module_load_call(call) {
                    raw(CauseKind::ModuleLoad, Leaf::CallIn(s.name, op_name), frame)
                } else if self.is_blocking(i) {
                    raw(CauseKind::HostSync, Leaf::OpCall(op_name, s.name), frame)
                } else if s.dur() >= SLOW_CALL_NS && !call.contains("GraphLaunch") {
                    raw(
                        CauseKind::ModuleLoad,
                        Leaf::FirstCallIn(s.name, op_name),
                        frame,
                    )
                } else {
                    raw(CauseKind::LaunchOverhead, Leaf::Call(s.name), frame)
                }
            }
            HostKind::CpuOp => {
                if self.launches(op) {
                    // Dispatch costs µs; milliseconds of host time in an operator that
                    // launches GPU work is set-up on a first call, or CPU work it does.
                    // A first call far slower than the operator's later calls is set-up
                    // paid once, wherever in the window it falls; a slow first call in a
                    // trace that shows module loading is first-call cost too.
                    let first = ns >= SLOW_CALL_NS && self.is_first_op(op);
                    if first && self.is_one_off(op) {
                        raw(CauseKind::ModuleLoad, Leaf::OneOff(op_name), frame)
                    } else if first && self.loads_modules() {
                        raw(CauseKind::ModuleLoad, Leaf::FirstOp(op_name), frame)
                    } else if ns >= SLOW_CALL_NS {
                        raw(CauseKind::CpuOp, Leaf::HostWork(op_name), frame)
                    } else {
                        raw(CauseKind::LaunchOverhead, Leaf::Dispatch, frame)
                    }
                } else {
                    raw(CauseKind::CpuOp, Leaf::OnCpu(op_name), frame)
                }
            }
            HostKind::Python => raw(CauseKind::Python, Leaf::Frame(s.name), frame),
            HostKind::OsCall => raw(CauseKind::OsCall, Leaf::Name(s.name), frame),
            HostKind::Annotation | HostKind::GpuAnnotation => {
                if t.str(s.name).starts_with("ProfilerStep#") {
                    raw(CauseKind::Untraced, Leaf::Untraced, frame)
                } else if is_compiling(t.str(s.name)) {
                    // A first call's cost like module loading: paid once per new kernel.
                    raw(CauseKind::ModuleLoad, Leaf::JitInside(s.name), frame)
                } else {
                    raw(CauseKind::Untraced, Leaf::Inside(s.name), frame)
                }
            }
        }
    }

    /// The innermost user annotation on `thread` at `at`, step markers left out.
    fn region(&self, thread: ThreadKey, at: i64, hint: usize) -> Option<String> {
        let t = self.trace;
        let (_, chain) = t.chain_near(t.thread_spans(thread), at, hint);
        chain.into_iter().find_map(|i| {
            let s = &t.host_spans[i as usize];
            let n = t.str(s.name);
            (s.kind == HostKind::Annotation && s.end > at && !n.starts_with("ProfilerStep#"))
                .then(|| short_name(n, 60))
        })
    }

    /// The user frame around span `i`, as [`Self::categorize`] names it.
    fn frame_of(&self, i: u32, memo: &mut Memo<'t>) -> Option<&'t str> {
        let t = self.trace;
        let f = self.around(i, memo).frame;
        if f != NONE {
            Some(t.str(t.host_spans[f as usize].name))
        } else if self.call_stacks() {
            t.user_frame(i)
        } else {
            None
        }
    }

    /// What queued-but-not-started time in `[a, b)` is called: when the launching thread
    /// sat in a synchronising call through most of it, the host was waiting on the same
    /// GPU, so both waited on work the trace does not show.
    fn queued_leaf(&self, thread: ThreadKey, a: i64, b: i64) -> Leaf {
        let t = self.trace;
        let spans = t.thread_spans(thread);
        let (_, chain) = t.chain_at(spans, a + (b - a) / 2);
        let blocked = chain.into_iter().find(|&i| {
            let s = &t.host_spans[i as usize];
            self.is_blocking(i) && 2 * (s.end.min(b) - s.start.max(a)) >= b - a
        });
        let wait = self.event_wait_before(thread, a, b);
        match (blocked, wait) {
            (Some(i), w) => {
                let op = t.outermost_cpu_op(i);
                let op_name = if op == NONE {
                    0
                } else {
                    t.host_spans[op as usize].name
                };
                match w {
                    Some(w) => Leaf::QueuedBehindEvent(w, t.host_spans[i as usize].name, op_name),
                    None => Leaf::QueuedBehind(t.host_spans[i as usize].name, op_name),
                }
            }
            (None, Some(w)) => Leaf::QueuedBehindEvent(w, 0, 0),
            (None, None) => Leaf::Queued,
        }
    }

    /// The name of a stream-wait-on-event call (`cudaStreamWaitEvent`, `hipStreamWaitEvent`)
    /// the thread made within [`EVENT_WAIT_LEAD_NS`] before queued time `[a, b)` began, or in
    /// its first half: the work it launched next waits on that event.
    fn event_wait_before(&self, thread: ThreadKey, a: i64, b: i64) -> Option<u32> {
        let t = self.trace;
        let calls = t.thread_calls(thread);
        let from =
            calls.partition_point(|&i| t.host_spans[i as usize].start < a - EVENT_WAIT_LEAD_NS);
        calls[from..]
            .iter()
            .map(|&i| &t.host_spans[i as usize])
            .take_while(|s| s.start <= a + (b - a) / 2)
            .filter(|s| self.flags_of(s.name) & STREAM_WAIT != 0)
            .last()
            .map(|s| s.name)
    }

    /// Splits untraced time by the CPU samples taken on the thread in `[a, b)` outside every
    /// span, in proportion to how many name each function.
    fn name_untraced_by_samples(&self, raws: &mut Vec<Raw<'t>>, thread: ThreadKey, a: i64, b: i64) {
        let t = self.trace;
        let Some(k) = raws
            .iter()
            .position(|r| r.kind == CauseKind::Untraced && r.leaf == Leaf::Untraced)
        else {
            return;
        };
        let samples = &t.cpu_samples;
        let from = samples.partition_point(|s| (s.pid, s.tid, s.ts) < (thread.0, thread.1, a));
        let spans = t.thread_spans(thread);
        let mut counts: FxHashMap<(u32, u32), u64> = FxHashMap::default();
        for s in samples[from..]
            .iter()
            .take_while(|s| (s.pid, s.tid) == thread && s.ts < b)
        {
            let (_, chain) = t.chain_at(spans, s.ts);
            // Step annotations cover everything and name nothing: they do not count.
            let covered = chain.iter().any(|&i| {
                let sp = &t.host_spans[i as usize];
                sp.end > s.ts && !matches!(sp.kind, HostKind::Annotation | HostKind::GpuAnnotation)
            });
            if !covered {
                *counts.entry((s.symbol, s.module)).or_default() += 1;
            }
        }
        let n: u64 = counts.values().sum();
        if n == 0 {
            return;
        }
        let untraced = raws.swap_remove(k);
        let mut counts: Vec<((u32, u32), u64)> = counts.into_iter().collect();
        counts.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        let mut left = untraced.ns;
        for (j, ((sym, module), c)) in counts.iter().enumerate() {
            let ns = if j + 1 == counts.len() {
                left
            } else {
                untraced.ns * *c as i64 / n as i64
            };
            left -= ns;
            raws.push(Raw {
                // A sample inside nsys's wrapper of a libc call is that OS call.
                kind: if osrt_wrapped(t.str(*sym)).is_some() {
                    CauseKind::OsCall
                } else {
                    CauseKind::Sampled
                },
                leaf: Leaf::Sampled(*sym, *module),
                frame: untraced.frame,
                ns,
            });
        }
    }

    /// The words for a leaf.
    fn leaf_text(&self, leaf: Leaf, drained: Option<&str>) -> String {
        let t = self.trace;
        let in_op = |what: &str, op: u32| {
            if op == 0 {
                what.to_string()
            } else {
                format!("{what} in {}", t.str(op))
            }
        };
        match leaf {
            Leaf::Untraced => self.untraced_leaf().to_string(),
            Leaf::Loader(n) => t.str(n).chars().take(90).collect(),
            Leaf::Conv(c) => {
                let shape = t
                    .input_dims(c)
                    .first()
                    .filter(|d| !d.is_empty())
                    .map(|d| {
                        let d: Vec<String> = d.iter().map(u64::to_string).collect();
                        format!(" on input [{}]", d.join(", "))
                    })
                    .unwrap_or_default();
                format!("{}{shape}", t.str(t.host_spans[c as usize].name))
            }
            Leaf::CallIn(call, op) => in_op(t.api_name(call), op),
            Leaf::FirstCallIn(call, op) => in_op(&format!("first call ({})", t.api_name(call)), op),
            Leaf::OpCall(0, call) => t.api_name(call).to_string(),
            Leaf::OpCall(op, call) => format!("{} ({})", t.str(op), t.api_name(call)),
            Leaf::Call(call) => t.api_name(call).to_string(),
            Leaf::FirstOp(op) => format!("first call of {}", t.str(op)),
            Leaf::OneOff(op) => format!(
                "first call of {} (its later calls {ONE_OFF_RATIO}x faster or more)",
                t.str(op)
            ),
            Leaf::HostWork(op) => format!("{} (host work)", t.str(op)),
            Leaf::OnCpu(op) => format!("{} on CPU", t.str(op)),
            Leaf::Dispatch => "dispatch in operators that launch GPU work".into(),
            Leaf::Frame(n) => clean_frame(t.str(n)),
            Leaf::Name(n) => t.str(n).to_string(),
            Leaf::Inside(n) => format!("inside {} (no finer span)", short_name(t.str(n), 60)),
            Leaf::JitInside(n) => format!("JIT compilation: inside {}", short_name(t.str(n), 60)),
            Leaf::LaunchLatency => "launch latency (call to kernel start)".into(),
            Leaf::Queued => {
                "launched but not started (a dependency, an event or another stream held it)".into()
            }
            Leaf::QueuedBehind(call, op) => format!(
                "launched but not started while the host blocked in {}: the GPU waited on work the trace does not show running (an event, another stream, or work queued before the capture began)",
                if op == 0 {
                    t.api_name(call).to_string()
                } else {
                    format!("{} ({})", t.str(op), t.api_name(call))
                }
            ),
            Leaf::QueuedBehindEvent(wait, 0, _) => format!(
                "launched behind {} and not started: the stream waited on an event that work the trace does not show running had to record (another stream, another process, or work queued before the capture began)",
                t.api_name(wait)
            ),
            Leaf::QueuedBehindEvent(wait, call, op) => format!(
                "launched behind {} and not started while the host blocked in {}: the stream waited on an event that work the trace does not show running had to record (another stream, another process, or work queued before the capture began)",
                t.api_name(wait),
                if op == 0 {
                    t.api_name(call).to_string()
                } else {
                    format!("{} ({})", t.str(op), t.api_name(call))
                }
            ),
            Leaf::Drained => drained
                .unwrap_or("the sync that drained the queue")
                .to_string(),
            Leaf::Compiling(n) => {
                let n = t.str(n);
                let what = match n {
                    "entire_backward_compile" => {
                        "compiling the backward graph (lazily, at the first backward of a new graph)"
                    }
                    "dynamo" | "entire_frame_compile" => {
                        "compiling a frame (Dynamo, AOTAutograd, Inductor)"
                    }
                    _ => "compiling",
                };
                format!("{what}: {}", n.trim_end_matches(" (dynamo_timed)"))
            }
            Leaf::Tuning(n) => format!(
                "Inductor autotuning: {}",
                t.str(n).trim_end_matches(" (dynamo_timed)")
            ),
            Leaf::Collecting(n) => format!("gc.collect() ({})", clean_frame(t.str(n))),
            Leaf::GilWait(tid) => {
                let who = self
                    .tid_label(tid)
                    .map(|l| format!(" while thread {l} ran"))
                    .unwrap_or_default();
                format!(
                    "pthread_cond_timedwait: waiting for the GIL (CPython waits on a condition with the 5 ms switch interval as timeout){who}"
                )
            }
            Leaf::EngineIdle => {
                "the autograd engine thread between backward operators (no span)".into()
            }
            Leaf::GilHeld(tid, frame) => {
                let who = self.tid_label(tid).unwrap_or_else(|| format!("tid {tid}"));
                format!(
                    "thread {who} ran Python ({}) while the launching thread waited (inferred from its frames: Kineto does not record GIL waits)",
                    clean_frame(t.str(frame))
                )
            }
            Leaf::Sampled(sym, module) => {
                let m = t.str(module);
                // nsys's OS-runtime tracing wraps each traced libc call in its own function
                // (`NSYS_OSRT_fwrite_1` in libToolsInjection64.so): the program's call is the
                // libc function inside.
                if let Some(call) = osrt_wrapped(t.str(sym)) {
                    return format!("{call} (sampled inside nsys's wrapper of it)");
                }
                format!(
                    "{} in {}",
                    sampled_symbol(t.str(sym)),
                    m.rsplit('/').next().unwrap_or(m)
                )
            }
        }
    }

    pub(super) fn classify(&self, device: i32, a: i64, b: i64, memo: &mut Memo<'t>) -> Gap {
        let t = self.trace;
        let ops = t.device_ops(device);
        let op_hint = match memo.op_hint {
            Some((d, k)) if d == device => k,
            _ => usize::MAX,
        };
        let k = tracehound_parsers::activity::partition_near(ops, op_hint, |&i| {
            t.gpu_ops[i as usize].start < b
        });
        memo.op_hint = Some((device, k));
        let next = ops[k..]
            .iter()
            .copied()
            .find(|&i| t.gpu_ops[i as usize].is_work());
        let next_op = next;
        let launch = next.map_or(NONE, |i| t.index.op_launch[i as usize]);
        // The outermost operator around the launch, as the nesting pass found it.
        let launch_op = next.map_or(NONE, |i| t.index.op_outer_cpu_op[i as usize]);
        let thread = if launch != NONE {
            let l = &t.host_spans[launch as usize];
            Some((l.pid, l.tid))
        } else {
            self.main_thread()
        };
        let whole = |kind: CauseKind, leaf: String, frame: Option<String>| Part {
            kind,
            leaf: leaf.into(),
            frame: frame.map(Into::into),
            ns: b - a,
        };
        let mut gap = Gap {
            start: a,
            end: b,
            kind: CauseKind::Unknown,
            mixed: false,
            label: String::new(),
            cpu_op: None,
            frame: None,
            next_op,
            drained_by: None,
            region: None,
            gil_holder: None,
            parts: Vec::new(),
        };
        let Some(thread) = thread else {
            gap.parts = vec![whole(
                CauseKind::Unknown,
                "no host thread recorded".into(),
                None,
            )];
            return finish_gap(gap);
        };
        if launch != NONE && t.host_spans[launch as usize].end <= a {
            let op = launch_op;
            gap.cpu_op = (op != NONE).then(|| span_name(t, op, "").to_string());
            gap.parts = vec![whole(
                CauseKind::GpuWait,
                "the next operation was launched before the gap (a dependency, an event or another stream held it)".into(),
                t.user_frame(launch).map(str::to_string),
            )];
            return finish_gap(gap);
        }
        // A synchronising call around the moment the GPU ran dry: the chain containing `a`,
        // and the few spans that ended just before it (the host returns a moment after).
        let spans = t.thread_spans(thread);
        let (first_after, mut around) = t.chain_near(spans, a, *memo.hint(thread));
        *memo.hint(thread) = first_after;
        let chain_len = around.len();
        gap.region = self.region(thread, a + (b - a) / 2, first_after);
        if first_after > 0 {
            around.extend(
                spans[first_after.saturating_sub(12)..first_after - 1]
                    .iter()
                    .copied(),
            );
        }
        let drain = around.iter().copied().find(|&i| {
            let s = &t.host_spans[i as usize];
            self.is_blocking(i) && s.start <= a && s.end >= a - DRAIN_SLACK_NS
        });
        // How long the host waited in that sync: all it can have cost the gap (starved.rs
        // budgets the short gaps after a sync the same way).
        let drain_budget = drain.map_or(0, |i| {
            let s = &t.host_spans[i as usize];
            s.end - s.start
        });
        if let Some(sync) = drain {
            let op = t.outermost_cpu_op(sync);
            let call = t.api_name(t.host_spans[sync as usize].name);
            gap.drained_by = Some(if op != NONE {
                format!("{} ({call})", span_name(t, op, ""))
            } else {
                call.to_string()
            });
        }
        let host_end = if launch != NONE {
            t.host_spans[launch as usize].start.clamp(a, b)
        } else {
            b
        };
        let (mut spent, mut sweep) = (
            std::mem::take(&mut memo.spent),
            std::mem::take(&mut memo.sweep),
        );
        // The sweep starts from the chain found above: walking it again cost a second
        // climb of the thread's ancestry per gap.
        t.exclusive_time_of_chain(
            spans,
            a,
            host_end,
            (first_after, &around[..chain_len]),
            &mut sweep,
            &mut spent,
        );
        memo.sweep = sweep;
        let mut raws = std::mem::take(&mut memo.raws);
        raws.clear();
        // Room for the gap's own parts (latency, queue, first call) too.
        raws.reserve(spent.len() + 4);
        for &(i, ns) in &spent {
            // Waiting in run_backward: the autograd engine thread did the work meanwhile.
            if let Some((x, y, engine)) = self.backward_wait(i, ns, thread, a, host_end) {
                // The engine's parts cover [x, y); scaled to the caller's own time there
                // (at least 90% of it), they add up to the gap.
                let parts = t.exclusive_time_near(engine, x, y, memo.hint(engine));
                let mut left = ns;
                let n_parts = parts.len();
                for (k, (j, n)) in parts.into_iter().enumerate() {
                    let n = if k + 1 == n_parts {
                        left
                    } else {
                        ((n as i128 * ns as i128) / (y - x).max(1) as i128) as i64
                    };
                    left -= n;
                    let mut r = self.categorize(j, n, memo);
                    if r.kind == CauseKind::Untraced {
                        r.leaf = Leaf::EngineIdle;
                    }
                    raws.push(r);
                }
                continue;
            }
            raws.push(self.categorize(i, ns, memo));
        }
        memo.spent = spent;
        // Nsight Systems' OS runtime trace shows CPython's GIL wait itself: a condition wait
        // with the switch interval (5 ms) as timeout, on a thread of a Python process.
        if raws.iter().any(|r| self.is_gil_wait(r)) && self.python_process(thread.0) {
            let holder = self.running_thread(thread, a, host_end);
            for r in raws.iter_mut().filter(|r| self.is_gil_wait(r)) {
                r.kind = CauseKind::Gil;
                r.leaf = Leaf::GilWait(holder.map_or(-1, |h| h.1));
            }
            if let Some(h) = holder {
                gap.gil_holder = Some(self.thread_label(h));
            }
        }
        // Another thread of the process running Python through the host work: the GIL.
        if host_end > a
            && let Some((holder, ran, frame)) = self.gil_holder(thread, a, host_end, memo)
        {
            let share = ran as f64 / (host_end - a) as f64;
            let mut moved = 0i64;
            for r in raws.iter_mut().filter(|r| {
                matches!(
                    r.kind,
                    CauseKind::Python
                        | CauseKind::CpuOp
                        | CauseKind::Untraced
                        | CauseKind::LaunchOverhead
                )
            }) {
                let m = (r.ns as f64 * share) as i64;
                r.ns -= m;
                moved += m;
            }
            if moved > 0 {
                raws.push(Raw {
                    kind: CauseKind::Gil,
                    leaf: Leaf::GilHeld(holder.1, frame),
                    frame: None,
                    ns: moved,
                });
                gap.gil_holder = Some(self.thread_label(holder));
            }
            raws.retain(|r| r.ns > 0);
        }
        // A launch call of milliseconds is the first call of its kernel loading the module
        // (or JIT): the GPU waits for the call itself, not for anything queued.
        let mut queued_from = host_end;
        if launch != NONE {
            let l = &t.host_spans[launch as usize];
            let slow_until = l.end.min(b);
            // A graph launch queues every node of the graph: milliseconds are its work.
            if l.dur() >= SLOW_CALL_NS
                && slow_until > host_end
                && !t.api_name(l.name).contains("GraphLaunch")
            {
                let op = launch_op;
                let op_name = if op == NONE {
                    0
                } else {
                    t.host_spans[op as usize].name
                };
                raws.push(Raw {
                    kind: CauseKind::ModuleLoad,
                    leaf: Leaf::FirstCallIn(l.name, op_name),
                    frame: self.frame_of(launch, memo),
                    ns: slow_until - host_end,
                });
                queued_from = slow_until;
            }
        }
        if b > queued_from {
            let latency = (b - queued_from).min(LAUNCH_LATENCY_NS);
            raws.push(Raw {
                kind: CauseKind::LaunchOverhead,
                leaf: Leaf::LaunchLatency,
                frame: None,
                ns: latency,
            });
            if b - queued_from > latency {
                let from = queued_from + latency;
                raws.push(Raw {
                    kind: CauseKind::GpuWait,
                    leaf: self.queued_leaf(thread, from, b),
                    frame: None,
                    ns: b - from,
                });
            }
        }
        if !t.cpu_samples.is_empty() {
            self.name_untraced_by_samples(&mut raws, thread, a, host_end);
        }
        // With the queue drained by a sync, launching again is the sync's cost, up to how
        // long the host waited in it: without the wait the host reaches these launches that
        // much sooner, no more (a 6 µs wait before 230 µs of dispatch on a cold convolution
        // is a 6 µs cost; the dispatch stays launch overhead).
        if gap.drained_by.is_some() {
            let mut left = drain_budget;
            let mut rest = Vec::new();
            for r in raws
                .iter_mut()
                .filter(|r| r.kind == CauseKind::LaunchOverhead)
            {
                if left <= 0 {
                    break;
                }
                let take = r.ns.min(left);
                if take < r.ns {
                    rest.push(Raw {
                        ns: r.ns - take,
                        ..*r
                    });
                    r.ns = take;
                }
                r.kind = CauseKind::HostSync;
                r.leaf = Leaf::Drained;
                left -= take;
            }
            raws.extend(rest);
        }
        // Merge by key (integers and borrowed names), then spell out only what is left: in
        // a hash table, since their order does not show (`merge_parts` orders the parts).
        let mut merged = std::mem::take(&mut memo.merged);
        merged.clear();
        memo.slices.clear();
        for r in raws.drain(..) {
            match memo.slices.entry(r.key()) {
                std::collections::hash_map::Entry::Occupied(e) => merged[*e.get()].ns += r.ns,
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(merged.len());
                    merged.push(r);
                }
            }
        }
        memo.raws = raws;
        let parts: Vec<Part> = merged
            .drain(..)
            .map(|r| Part {
                kind: r.kind,
                leaf: match r.leaf {
                    Leaf::Drained => memo.share(self.leaf_text(r.leaf, gap.drained_by.as_deref())),
                    leaf => match memo.words.get(&leaf) {
                        Some(w) => w.clone(),
                        None => {
                            let w = memo.share(self.leaf_text(leaf, None));
                            memo.words.insert(leaf, w.clone());
                            w
                        }
                    },
                },
                frame: r.frame.map(|f| memo.share_str(f)),
                ns: r.ns,
            })
            .collect();
        memo.merged = merged;
        gap.parts = merge_parts(parts);
        if launch != NONE && gap.frame.is_none() {
            let f = self.around(launch, memo).frame;
            gap.frame = if f != NONE {
                Some(t.str(t.host_spans[f as usize].name).to_string())
            } else if self.call_stacks() {
                t.user_frame(launch).map(str::to_string)
            } else {
                None
            };
        }
        finish_gap(gap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracehound_parsers::HostSpan;

    #[test]
    fn launched_marks_are_the_launching_operators_and_their_ancestors() {
        // A random forest: each span's parent is an earlier span or none, as nesting leaves
        // them; some spans launched.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut t = Trace::default();
        for i in 0..5000u64 {
            let parent = if i == 0 || next(4) == 0 {
                NONE
            } else {
                (i - 1 - next(i.min(40))) as u32
            };
            t.host_spans.push(HostSpan {
                parent,
                ..HostSpan::new(HostKind::CpuOp, 1, 1, 0, 0, 0)
            });
        }
        t.index.op_cpu_op = (0..700)
            .map(|_| {
                if next(5) == 0 {
                    NONE
                } else {
                    next(5000) as u32
                }
            })
            .collect();
        let got = launched_marks(&t);
        let mut want = vec![false; 5000];
        for &c in t.index.op_cpu_op.iter().filter(|&&c| c != NONE) {
            want[c as usize] = true;
            for a in t.ancestors(c) {
                want[a as usize] = true;
            }
        }
        let got: Vec<bool> = (0..5000)
            .map(|i| got[i / 64] >> (i % 64) & 1 == 1)
            .collect();
        assert_eq!(got, want);
        assert!(
            want.iter().filter(|&&m| m).count() > 1000,
            "the test marks ancestors"
        );
    }
}
