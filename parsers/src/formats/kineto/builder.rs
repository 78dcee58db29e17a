//! The builder: trace events, as either reader yields them, into the model (category by
//! category), with the names Kineto gives copies and memory kinds.

use super::*;

/// What a Kineto category means for the model.
#[derive(Clone, Copy)]
pub(super) enum Cat {
    Gpu(GpuOpKind),
    Host(HostKind),
    Memory,
    /// The profiler's own work on a host thread (CUPTI's activity buffers).
    ProfilerWork,
    Skip,
}

/// The `overhead` events that are the profiler's own work, as Kineto names CUPTI's overhead
/// kinds (requesting and flushing activity buffers, its instrumentation, resources and
/// unified-memory tracing set-up): the host thread is held by the profiler, which the program
/// outside it never pays. The category's other kinds (`Command Buffer Full`, `Lazy Function
/// Loading`, `Runtime Triggered Module Loading`, `Driver Compiler`) are the driver's, paid with
/// or without the profiler.
const PROFILER_WORK: &[&str] = &[
    "Activity Buffer Request",
    "Buffer Flush",
    "Instrumentation",
    "Resource",
    "UVM Activity Init",
];

pub(super) fn category(cat: &str, name: &str, ph: &str) -> Cat {
    match cat {
        "kernel" | "Kernel" => Cat::Gpu(GpuOpKind::Kernel),
        "gpu_memcpy" | "Memcpy" => Cat::Gpu(GpuOpKind::Memcpy),
        "gpu_memset" | "Memset" => Cat::Gpu(GpuOpKind::Memset),
        "cuda_sync" => Cat::Gpu(GpuOpKind::Sync),
        // Profilers of 2021 wrote the step markers as operators: a step is an annotation,
        // not the outermost operator of everything in it.
        "Operator" if name.starts_with("ProfilerStep#") => Cat::Host(HostKind::Annotation),
        "cpu_op" | "Operator" => Cat::Host(HostKind::CpuOp),
        "cuda_runtime" | "Runtime" => Cat::Host(HostKind::Runtime),
        "cuda_driver" => Cat::Host(HostKind::Driver),
        "python_function" => Cat::Host(HostKind::Python),
        "user_annotation" => Cat::Host(HostKind::Annotation),
        "gpu_user_annotation" => Cat::Host(HostKind::GpuAnnotation),
        _ if ph == "i" && (name == "[memory]" || name == "[OutOfMemory]") => Cat::Memory,
        "overhead" if ph == "X" && PROFILER_WORK.contains(&name) => Cat::ProfilerWork,
        _ => Cat::Skip,
    }
}

/// Parses Kineto's name for a copy, `Memcpy HtoD (Pageable -> Device)` (CUPTI's memory kinds;
/// ROCm writes `Host`), into (direction, source kind, destination kind).
pub fn parse_memcpy_name(name: &str) -> (CopyDirection, MemKind, MemKind) {
    let rest = name.strip_prefix("Memcpy ").unwrap_or(name);
    let (dir, kinds) = match rest.split_once(' ') {
        Some((d, k)) => (d, k),
        None => (rest, ""),
    };
    let direction = direction_from_label(dir);
    let kinds = kinds.trim().trim_start_matches('(').trim_end_matches(')');
    let (src, dst) = match kinds.split_once("->") {
        Some((s, d)) => (mem_kind(s.trim()), mem_kind(d.trim())),
        None => (MemKind::Unknown, MemKind::Unknown),
    };
    (direction, src, dst)
}

/// Direction from a label such as `HtoD` (in the copy's name, or ROCm's `args.kind`).
pub(super) fn direction_from_label(dir: &str) -> CopyDirection {
    match dir {
        "HtoD" => CopyDirection::HtoD,
        "DtoH" => CopyDirection::DtoH,
        "DtoD" => CopyDirection::DtoD,
        "HtoH" => CopyDirection::HtoH,
        "PtoP" => CopyDirection::PtoP,
        _ => CopyDirection::Unknown,
    }
}

pub(super) fn mem_kind(s: &str) -> MemKind {
    match s {
        "Pageable" => MemKind::Pageable,
        "Pinned" => MemKind::Pinned,
        "Device" => MemKind::Device,
        "Managed" => MemKind::Managed,
        "Host" => MemKind::Host,
        _ => MemKind::Unknown,
    }
}

pub(super) struct Builder {
    pub(super) trace: Trace,
    pub(super) events: u64,
    pub(super) with_ph: u64,
    pub(super) saw_events_container: bool,
    pub(super) skipped: FxHashMap<String, u64>,
    pub(super) base_time_ns: Option<i64>,
    pub(super) schema_version: Option<i64>,
    pub(super) cupti_version: Option<i64>,
    /// Events whose `dur` is no readable number, kept at zero length.
    pub(super) bad_dur: u64,
    pub(super) legacy_categories: bool,
    /// Kernels with a grid or block written.
    pub(super) with_geometry: u64,
    /// (pid, tid, name) of the `thread_name` metadata events, in file order.
    pub(super) thread_names: Vec<(i64, i64, String)>,
    /// Per string id of an operator name: whether its `Concrete Inputs` are kept (1), not
    /// (2), or not yet asked (0); asked once per name, not once per operator.
    pub(super) keeps_concrete: Vec<u8>,
    /// Per string id of an operator name: whether it is a matrix product whose unaligned
    /// strides are kept (1), not (2), or not yet asked (0).
    pub(super) matrix_op: Vec<u8>,
    /// Texts interned lately (names, shapes, types), looked up before the string table.
    pub(super) recent: RecentTexts,
    /// (start, end), ns, of the profiler's own work on host threads ([`PROFILER_WORK`]).
    pub(super) profiler_work: Vec<(i64, i64)>,
}

/// Slots of [`RecentTexts`] (a power of two).
pub(super) const RECENT_TEXTS: usize = 1 << 10;

/// A direct-mapped table of recently interned texts: the slot of a text is a hash of its
/// length and its first and last eight bytes, and holds the length and id of the last text
/// interned there. A hit is confirmed by comparing the text with the one behind the id, so a
/// table left from other strings can only miss; a miss interns as before and takes the slot.
/// An event's name, shapes and types come from a few hundred texts: this spares hashing each
/// of them in full and probing the table of all strings, every event.
pub(super) struct RecentTexts {
    pub(super) slots: Vec<(u32, StrId)>,
}

impl Default for RecentTexts {
    fn default() -> Self {
        RecentTexts {
            slots: vec![(u32::MAX, 0); RECENT_TEXTS],
        }
    }
}

impl RecentTexts {
    #[inline(always)]
    pub(super) fn slot(s: &[u8]) -> usize {
        let word = |b: &[u8]| b.iter().rev().fold(0u64, |w, &c| w << 8 | u64::from(c));
        let (head, tail) = match (s.first_chunk::<8>(), s.last_chunk::<8>()) {
            (Some(h), Some(t)) => (u64::from_le_bytes(*h), u64::from_le_bytes(*t)),
            _ => (word(s), 0),
        };
        let h = (head ^ tail.rotate_left(29) ^ s.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - RECENT_TEXTS.trailing_zeros())) as usize
    }

    /// The id of `s` in `strings`, interned if it is new.
    #[inline(always)]
    pub(super) fn intern(&mut self, strings: &mut Strings, s: &str) -> StrId {
        let k = Self::slot(s.as_bytes());
        // The id is checked to be in the table: `get` reads an unknown id as "".
        if let Some(&(n, id)) = self.slots.get(k)
            && n as usize == s.len()
            && (id as usize) < strings.len()
            && strings.get(id) == s
        {
            return id;
        }
        let id = strings.intern(s);
        if let Some(slot) = self.slots.get_mut(k) {
            *slot = (u32::try_from(s.len()).unwrap_or(u32::MAX), id);
        }
        id
    }
}

impl Builder {
    pub(super) fn new(source: &str) -> Self {
        let mut trace = Trace {
            source: source.to_string(),
            ..Default::default()
        };
        trace.meta.format = Some(&FORMAT);
        trace.strings.intern("");
        Builder {
            trace,
            events: 0,
            with_ph: 0,
            saw_events_container: false,
            skipped: FxHashMap::default(),
            base_time_ns: None,
            schema_version: None,
            cupti_version: None,
            bad_dur: 0,
            legacy_categories: false,
            with_geometry: 0,
            thread_names: Vec::new(),
            keeps_concrete: Vec::new(),
            matrix_op: Vec::new(),
            recent: RecentTexts::default(),
            profiler_work: Vec::new(),
        }
    }

    /// Whether operator `name` (string id `id`) is a matrix product (`mm`, `addmm`, `bmm`,
    /// `baddbmm`, `_scaled_mm`), whose operands' leading dimensions its strides give.
    pub(super) fn is_matrix_op(&mut self, id: StrId, name: &str) -> bool {
        per_name(&mut self.matrix_op, id, || {
            matches!(
                name,
                "aten::mm" | "aten::addmm" | "aten::bmm" | "aten::baddbmm" | "aten::_scaled_mm"
            )
        })
    }

    /// Whether the operator named `name` (string id `id`) keeps its `Concrete Inputs`:
    /// stride, padding and masks of the operators whose work depends on them (convolution,
    /// attention), BatchNorm's training flag (a second pass over its input), topk's k,
    /// torch.unique's `return_inverse`/`return_counts` (what its sort is for), the dims and
    /// output length of an FFT (`aten::_fft_*`). Every operator records its scalars, most of
    /// them of no use here.
    pub(super) fn keeps_concrete(&mut self, id: StrId, name: &str) -> bool {
        per_name(&mut self.keeps_concrete, id, || {
            name.contains("convolution")
                || name.contains("attention")
                || name.contains("batch_norm")
                || name == "aten::topk"
                || name == "aten::_unique2"
                || name.starts_with("aten::_fft_")
        })
    }

    pub(super) fn skip(&mut self, what: &str) {
        // Most skipped events are flows: count without allocating a key each time.
        match self.skipped.get_mut(what) {
            Some(n) => *n += 1,
            None => {
                self.skipped.insert(what.to_string(), 1);
            }
        }
    }

    /// An id from a pid/tid value: ints as they are, numeric strings parsed, other strings
    /// interned above 2^40 so they never collide with OS ids.
    #[inline(always)]
    pub(super) fn id_of(&mut self, v: Option<&str>) -> i64 {
        let Some(t) = v else { return 0 };
        // Ids are a few plain digits, every event twice: read without `parse`'s generality.
        match plain_id(t.as_bytes()) {
            Some(i) => i,
            None => Self::odd_id(t),
        }
    }

    /// [`Builder::id_of`] of a text that is not plain digits.
    #[cold]
    #[inline(never)]
    pub(super) fn odd_id(t: &str) -> i64 {
        if let Ok(i) = t.parse::<i64>() {
            return i;
        }
        let s: String = serde_json::from_str::<String>(t).unwrap_or_else(|_| t.to_string());
        let s = s.trim();
        if let Ok(i) = s.parse::<i64>() {
            return i;
        }
        // Chunks are parsed apart: the id must depend on the text alone (FNV-1a, 39 bits).
        let h = s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        (1i64 << 40) | (h & ((1 << 39) - 1)) as i64
    }

    /// Adds the counters and thread names of a chunk merged into this builder (its events
    /// are moved by [`merge_chunk`]).
    pub(super) fn absorb(&mut self, c: &mut Builder) {
        self.events += c.events;
        self.bad_dur += c.bad_dur;
        self.with_ph += c.with_ph;
        self.legacy_categories |= c.legacy_categories;
        self.with_geometry += c.with_geometry;
        self.thread_names.append(&mut c.thread_names);
        self.profiler_work.append(&mut c.profiler_work);
        for (k, v) in c.skipped.drain() {
            *self.skipped.entry(k).or_default() += v;
        }
    }

    /// A builder for the next chunk, filling the lists of one already merged.
    pub(super) fn recycled(source: &str, spare: Spare) -> Self {
        let mut b = Builder::new(source);
        let t = &mut b.trace;
        (t.gpu_ops, t.host_spans, t.memory, t.concrete_inputs) = (
            spare.gpu_ops,
            spare.host_spans,
            spare.memory,
            spare.concrete_inputs,
        );
        t.gpu_ops.clear();
        t.host_spans.clear();
        t.memory.clear();
        t.concrete_inputs.clear();
        b
    }

    /// The lists of a builder whose events are merged, for another chunk.
    pub(super) fn into_spare(self) -> Spare {
        let t = self.trace;
        Spare {
            gpu_ops: t.gpu_ops,
            host_spans: t.host_spans,
            memory: t.memory,
            concrete_inputs: t.concrete_inputs,
        }
    }

    pub(super) fn add(&mut self, ev: &RawEvent<'_>) {
        self.events += 1;
        let ph = ev.ph.as_str();
        if ph.is_empty() {
            self.skip(SKIP_NO_PH);
            return;
        }
        self.with_ph += 1;
        let cat_s = ev.cat.as_str();
        let name = ev.name.as_str();
        let kind = category(cat_s, name, ph);
        if matches!(
            cat_s,
            "Kernel" | "Runtime" | "Operator" | "Memcpy" | "Memset"
        ) {
            self.legacy_categories = true;
        }
        match (kind, ph) {
            (Cat::Memory, _) => self.add_memory(ev),
            (Cat::Gpu(k), "X") => self.add_gpu(k, ev),
            (Cat::Host(k), "X") => self.add_host(k, ev),
            (Cat::ProfilerWork, _) => {
                if let Some(span) = self.times(ev) {
                    self.profiler_work.push(span);
                }
            }
            (_, "M") => {
                if name == "thread_name"
                    && let Some(a) = &ev.args
                {
                    let n = a.name.as_str().trim().to_string();
                    let (pid, tid) = (self.id_of(ev.pid), self.id_of(ev.tid));
                    self.thread_names.push((pid, tid, n));
                }
                self.skip(SKIP_METADATA);
            }
            _ => {
                let what = if ph == "X" || ph == "i" {
                    if cat_s.is_empty() { SKIP_NO_CAT } else { cat_s }
                } else {
                    match ph {
                        "s" | "f" | "t" => SKIP_FLOW,
                        // Begin/end pairs the profiler never writes: counted under their
                        // category, so that a file of only such events (torch.compile's own
                        // timings) is told apart from a capture with GPU tracing off.
                        "B" | "E" if !cat_s.is_empty() => cat_s,
                        _ => SKIP_OTHER_PH,
                    }
                };
                self.skip(what);
            }
        }
    }

    pub(super) fn times(&mut self, ev: &RawEvent<'_>) -> Option<(i64, i64)> {
        let ts = ev.ts.and_then(us_text_to_ns);
        let Some(ts) = ts else {
            self.skip("missing ts");
            return None;
        };
        // A negative duration is kept as written: `Trace::finish` reads it as zero length and
        // says how many there were. One that is no number (`1e400`, a string) is zero length,
        // counted here.
        let dur = match ev.dur {
            None => 0,
            Some(d) => us_text_to_ns(d).unwrap_or_else(|| {
                self.bad_dur += 1;
                0
            }),
        };
        Some((ts, ts.saturating_add(dur)))
    }

    pub(super) fn add_gpu(&mut self, kind: GpuOpKind, ev: &RawEvent<'_>) {
        let Some((start, end)) = self.times(ev) else {
            return;
        };
        let empty = RawArgs::default();
        let a = ev.args.as_ref().unwrap_or(&empty);
        let pid = self.id_of(ev.pid);
        let device = a.device.i64().unwrap_or(pid) as i32;
        let stream = match a.stream.i64() {
            Some(s) => s,
            None => {
                let t = ev.tid.unwrap_or("0");
                let digits: String = t.chars().filter(|c| c.is_ascii_digit()).collect();
                digits.parse().unwrap_or(0)
            }
        };
        let name_s = ev.name.as_str();
        let name = self.recent.intern(&mut self.trace.strings, name_s);
        let (mut direction, mut src_kind, mut dst_kind) =
            (CopyDirection::Unknown, MemKind::Unknown, MemKind::Unknown);
        if kind == GpuOpKind::Memcpy {
            (direction, src_kind, dst_kind) = parse_memcpy_name(name_s);
            if direction == CopyDirection::Unknown {
                // ROCm puts the direction in args.kind.
                direction = direction_from_label(a.kind.as_str());
            }
        }
        let geometry = a.grid.is_some() || a.block.is_some();
        if kind == GpuOpKind::Kernel && geometry {
            self.with_geometry += 1;
        }
        let kernel = (kind == GpuOpKind::Kernel).then(|| KernelInfo {
            // What the event did not record reads as zeros, never as one block or one thread.
            grid: a.grid.map_or([0; 3], |d| d.0),
            block: a.block.map_or([0; 3], |d| d.0),
            registers: a.registers.i64().unwrap_or(0).clamp(0, u16::MAX as i64) as u16,
            shared_mem: a.shared_mem.i64().unwrap_or(0).clamp(0, u32::MAX as i64) as u32,
            occupancy_pct: a.occupancy.f64().map(|v| v as f32),
            geometry,
        });
        self.trace.gpu_ops.push(GpuOp {
            kind,
            device,
            stream,
            start,
            end,
            correlation: a.correlation.u64().unwrap_or(0),
            external_id: a.external_id.u64().unwrap_or(0),
            name,
            bytes: a
                .bytes
                .u64()
                .or_else(|| message_bytes(kind, a))
                .unwrap_or(0),
            direction,
            src_kind,
            dst_kind,
            kernel,
        });
    }

    pub(super) fn add_host(&mut self, kind: HostKind, ev: &RawEvent<'_>) {
        let Some((start, end)) = self.times(ev) else {
            return;
        };
        let empty = RawArgs::default();
        let a = ev.args.as_ref().unwrap_or(&empty);
        let pid = self.id_of(ev.pid);
        let tid = self.id_of(ev.tid);
        let name = self
            .recent
            .intern(&mut self.trace.strings, ev.name.as_str());
        let args = OpArgs {
            input_dims: a
                .input_dims
                .map_or(0, |v| self.recent.intern(&mut self.trace.strings, v)),
            input_types: a
                .input_type
                .map_or(0, |v| self.recent.intern(&mut self.trace.strings, v)),
            call_stack: match &a.call_stack.0 {
                Some(s) if !s.is_empty() => self.trace.strings.intern(s),
                _ => 0,
            },
        };
        let args = self.trace.args.intern(args);
        if let Some(c) = a.concrete
            && kind == HostKind::CpuOp
            && self.keeps_concrete(name, ev.name.as_str())
        {
            let c = self.trace.strings.intern(c);
            self.trace
                .concrete_inputs
                .push(((pid, tid, start, name), c));
        }
        // Strides are kept where they change a model: with a 0, an expanded input read once
        // however many times its dims repeat it; in a matrix product, a stride not a multiple
        // of 8, a leading dimension the tensor-core kernels cannot load aligned (a transposed
        // [50257, 8192] operand has strides [1, 50257]). The rest are left out.
        if let Some(s) = a.input_strides
            && kind == HostKind::CpuOp
            && (has_zero(s) || (self.is_matrix_op(name, ev.name.as_str()) && has_unaligned(s)))
        {
            let s = self.trace.strings.intern(s);
            self.trace.strides.push(((pid, tid, start, name), s));
        }
        self.trace.host_spans.push(HostSpan {
            // A call keeps its correlation id, an operator its external id
            // ([`HostSpan::link`]).
            link: match kind {
                HostKind::Runtime | HostKind::Driver => a.correlation.u64().unwrap_or(0),
                HostKind::CpuOp => a.external_id.u64().unwrap_or(0),
                _ => 0,
            },
            args,
            ..HostSpan::new(kind, pid, tid, start, end, name)
        });
    }

    pub(super) fn add_memory(&mut self, ev: &RawEvent<'_>) {
        let Some((ts, _)) = self.times(ev) else {
            return;
        };
        let empty = RawArgs::default();
        let a = ev.args.as_ref().unwrap_or(&empty);
        // Device Type 1 is CUDA (Device Id = GPU index); 0 is CPU memory.
        let device = match a.device_type.i64() {
            Some(0) => -1,
            _ => a.device_id.i64().unwrap_or(-1) as i32,
        };
        self.trace.memory.push(MemorySample {
            ts,
            device,
            addr: a.addr.u64().unwrap_or(0),
            bytes: a.mem_bytes.i64().unwrap_or(0),
            total_allocated: a.total_allocated.i64().into(),
            total_reserved: a.total_reserved.i64().into(),
            oom: ev.name.as_str() == "[OutOfMemory]",
        });
    }

    pub(super) fn finish(mut self) -> Parsed {
        let mut skipped: Vec<(String, u64)> = self.skipped.into_iter().collect();
        skipped.sort();
        self.trace.stats.events_total = self.events;
        if self.bad_dur > 0 {
            self.trace.warnings.push(format!(
                "{} events have a duration that is no readable number: read as zero length",
                self.bad_dur
            ));
        }
        self.trace.stats.skipped = skipped;
        self.trace.meta.epoch_offset_ns = Some(self.base_time_ns.unwrap_or(0));
        let mut v = Vec::new();
        match self.schema_version {
            Some(s) => v.push(format!("schemaVersion {s}")),
            None => v.push("no schemaVersion".into()),
        }
        if let Some(c) = self.cupti_version {
            v.push(format!("CUPTI {c}"));
        }
        if self.legacy_categories {
            v.push("2021 category names".into());
        }
        if self.base_time_ns.is_some() {
            v.push("baseTimeNanoseconds".into());
        }
        self.trace.meta.format_version = v.join(", ");
        if self.legacy_categories {
            read_user_ranges_as_annotations(&mut self.trace);
        }
        // CUDA's versioned entry points (`cudaGetDeviceProperties_v2`, `cuMemAlloc_v2`): the
        // model names the API they call.
        self.trace.name_api_calls();
        if self.events == 0 {
            self.trace
                .warnings
                .push("the trace holds no events".to_string());
        }
        let geometry = self.with_geometry > 0;
        let thread_names = self.thread_names;
        let mut profiler_work = self.profiler_work;
        profiler_work.sort_unstable();
        Parsed {
            trace: self.trace,
            declare: Box::new(move |trace, capture| {
                match_the_listed_gpu(trace);
                capture.launch_geometry = geometry;
                capture.name_threads(
                    thread_names
                        .iter()
                        .map(|(pid, tid, n)| (*pid, *tid, n.as_str())),
                );
                // Kineto starts its collectors as the first profiled step begins.
                capture.startup_hole = true;
                capture.no_cpu_data = "the trace has no CPU operators: profile with ProfilerActivity.CPU and with_stack=True".into();
                capture.pytorch_profiler = true;
                capture.profiler_work = profiler_work;
            }),
        }
    }
}

/// No trace of a profiler that names runtime calls and kernels `Runtime` and `Kernel` (2021's,
/// PyTorch 1.10's) has a `user_annotation`: a `record_function` range (`model_inference`,
/// `Optimizer.step#SGD.step`) is written as a CPU operator, `Operator` or `cpu_op`. Read so,
/// the range is the outermost operator of everything in it and is charged all their GPU time.
/// Recorded with shapes, every operator has its `Input Dims`, empty lists included
/// (`aten::empty`: `[[], [], [], [], [], []]`), and a range none: that tells them apart.
/// Without shapes they look alike, and the operators are left as they are. Whether shapes
/// were recorded is known once every event is read: hence one pass over the spans here.
fn read_user_ranges_as_annotations(t: &mut Trace) {
    let args = &t.args;
    let has_dims = |s: &HostSpan| args.get(s.args).input_dims != 0;
    let is_op = |s: &HostSpan| s.kind == HostKind::CpuOp;
    if !t.host_spans.iter().any(|s| is_op(s) && has_dims(s)) {
        return;
    }
    for s in t.host_spans.iter_mut().filter(|s| is_op(s) && !has_dims(s)) {
        s.kind = HostKind::Annotation;
        // An annotation links nothing (`add_host` gives it no id).
        s.link = 0;
    }
}

/// Whether a recorded list of numbers (`[[1, 0], [], [1024, 1]]`) holds the number 0.
pub(super) fn has_zero(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().any(|(k, &c)| {
        c == b'0'
            && (k == 0 || !b[k - 1].is_ascii_digit())
            && b.get(k + 1).is_none_or(|n| !n.is_ascii_digit())
    })
}

/// Whether a recorded list of numbers holds one other than 0 and 1 that is not a multiple of 8
/// (`[[1, 50257], [1024, 1]]`).
pub(super) fn has_unaligned(s: &str) -> bool {
    crate::model::shapes::numbers(s)
        .into_iter()
        .any(|n| n > 1 && n % 8 != 0)
}

/// A per-name answer kept in `cache` by string id (1 yes, 2 no, 0 not yet asked): `keep` is
/// asked once per name, not once per operator.
fn per_name(cache: &mut Vec<u8>, id: StrId, keep: impl FnOnce() -> bool) -> bool {
    let i = id as usize;
    if cache.len() <= i {
        cache.resize(i + 1, 0);
    }
    if cache[i] == 0 {
        cache[i] = if keep() { 1 } else { 2 };
    }
    cache[i] == 1
}

/// The value of an id of 1 to 18 plain digits.
#[inline(always)]
pub(super) fn plain_id(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 18 {
        return None;
    }
    let mut v = 0i64;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + i64::from(d);
    }
    Some(v)
}

/// ROCm's traces list the one visible GPU by its logical id (0) in `deviceProperties` but
/// tag its work with the physical id (9): one listed GPU and work on one other device are
/// the same GPU. Its allocator events, which carry the logical id, follow it.
pub(super) fn match_the_listed_gpu(t: &mut Trace) {
    let used = t.devices();
    let ([g], [d]) = (t.meta.gpus.as_mut_slice(), used.as_slice()) else {
        return;
    };
    if g.id == *d {
        return;
    }
    let (listed, d) = (g.id, *d);
    g.id = d;
    for m in t.memory.iter_mut().filter(|m| m.device == listed) {
        m.device = d;
    }
    t.stats.notes.push(format!(
        "deviceProperties lists one GPU as {listed} and its work runs on device {d} (ROCm's logical and physical ids): read as one GPU, {d}"
    ));
}

/// A collective kernel's message in bytes, where the profiler records its element count and
/// type on the kernel (`In msg nelems`, `Out msg nelems`, `dtype`: PyTorch 2.1 and later): the
/// larger of input and output (an all-gather's output, a reduce-scatter's input). `None` for
/// other kernels and unknown types.
fn message_bytes(kind: GpuOpKind, a: &RawArgs<'_>) -> Option<u64> {
    if kind != GpuOpKind::Kernel {
        return None;
    }
    let n = a.in_nelems.u64().max(a.out_nelems.u64())?;
    let elem: u64 = match a.dtype.as_str() {
        "Float" | "Int" | "UInt32" => 4,
        "BFloat16" | "Half" | "Short" | "UInt16" => 2,
        "Double" | "Long" | "ComplexFloat" | "UInt64" => 8,
        "Byte" | "Char" | "Bool" => 1,
        t if t.starts_with("Float8") => 1,
        _ => return None,
    };
    n.checked_mul(elem)
}
