//! The common event model every parser fills and every rule reads.
//!
//! One timeline in integer nanoseconds, strings interned once, events stored by kind in
//! compact structs. Joins that every analysis needs (runtime call <-> GPU op, GPU op ->
//! launching CPU operator, host span nesting) are built once by [`Trace::finish`] as indexes,
//! so rules never re-derive them.

pub mod activity;
pub mod session;
pub mod shapes;
mod sort;

use rustc_hash::FxHashMap;
use serde::Serialize;

/// Index of an interned string in [`Strings`].
pub type StrId = u32;

/// An entry of a side table keyed by span, sorted: (pid, tid, start, name) and the interned
/// text kept for it ([`Trace::concrete_inputs`], [`Trace::strides`]).
pub type SpanText = ((i64, i64, i64, StrId), StrId);
/// Marker for "no index" in the `u32` link fields.
pub const NONE: u32 = u32::MAX;

/// Interned strings: kernel and operator names repeat millions of times in real traces.
#[derive(Debug, Default, Clone)]
pub struct Strings {
    values: Vec<Box<str>>,
    ids: FxHashMap<Box<str>, StrId>,
}

impl Strings {
    /// Interns `s` and returns its id; the empty string is always id 0.
    pub fn intern(&mut self, s: &str) -> StrId {
        if self.values.is_empty() {
            self.values.push("".into());
            self.ids.insert("".into(), 0);
        }
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.values.len() as StrId;
        self.values.push(s.into());
        self.ids.insert(s.into(), id);
        id
    }

    /// The string behind `id` ("" for an unknown id).
    pub fn get(&self, id: StrId) -> &str {
        self.values.get(id as usize).map(|s| &**s).unwrap_or("")
    }

    /// The id of `s` when it was interned.
    pub fn lookup(&self, s: &str) -> Option<StrId> {
        self.ids.get(s).copied()
    }

    /// Which interned strings satisfy `pred`, indexed by string id: rules that test millions
    /// of spans by name test each distinct name once.
    pub fn matching(&self, pred: impl Fn(&str) -> bool) -> Vec<bool> {
        self.values.iter().map(|s| pred(s)).collect()
    }

    /// Number of distinct strings.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when nothing was interned.
    pub fn is_empty(&self) -> bool {
        self.values.len() <= 1
    }
}

/// What an operator recorded of its inputs and its Python stack, as interned strings (0 when
/// absent): `Input Dims` and `Input type` (raw JSON; read them through [`Trace::input_dims`],
/// [`Trace::input_shapes`] and [`Trace::input_types`]) and the `Call stack` of old traces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct OpArgs {
    /// `Input Dims` as recorded, 0 when absent.
    pub input_dims: StrId,
    /// `Input type` as recorded, 0 when absent.
    pub input_types: StrId,
    /// `Call stack` as recorded by old traces, 0 when absent.
    pub call_stack: StrId,
}

/// The distinct [`OpArgs`] of a trace, each stored once. A trace's million operators repeat
/// a few thousand input lists, so a span holds one id here instead of three string ids: the
/// span stays 64 bytes, a cache line. Id 0 is "nothing recorded".
#[derive(Debug, Default, Clone)]
pub struct ArgsTable {
    values: Vec<OpArgs>,
    ids: FxHashMap<OpArgs, u32>,
}

impl ArgsTable {
    /// Interns `a` and returns its id; nothing recorded is always id 0.
    pub fn intern(&mut self, a: OpArgs) -> u32 {
        if a == OpArgs::default() {
            return 0;
        }
        if self.values.is_empty() {
            self.values.push(OpArgs::default());
        }
        if let Some(&id) = self.ids.get(&a) {
            return id;
        }
        let id = self.values.len() as u32;
        self.values.push(a);
        self.ids.insert(a, id);
        id
    }

    /// The arguments behind `id` (nothing recorded for an unknown id).
    pub fn get(&self, id: u32) -> OpArgs {
        self.values.get(id as usize).copied().unwrap_or_default()
    }

    /// Number of distinct argument lists, "nothing recorded" included once any is interned.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no arguments were interned.
    pub fn is_empty(&self) -> bool {
        self.values.len() <= 1
    }

    /// Whether any argument list carries an old-style `Call stack`: a few thousand lists
    /// against millions of spans, so with none here no span has one.
    pub fn any_call_stack(&self) -> bool {
        self.values.iter().any(|a| a.call_stack != 0)
    }
}

/// What the rest of the tool knows about an input format. Each reader declares its own
/// (`formats::NAME::FORMAT`) beside its code, so a new format is its module and its line in
/// `formats::READERS`; nothing else lists the formats.
#[derive(Debug, PartialEq, Eq)]
pub struct SourceFormat {
    /// The id in JSON output (`kineto`, `nsys`, `dmon`, `smi_query`, `smi_xml`).
    pub id: &'static str,
    /// Its name for people (`Nsight Systems SQLite export`).
    pub name: &'static str,
    /// What its input is (`JSON`, `SQLite`, `text` ...).
    pub input: &'static str,
    /// What one of its input records is called (`events`, `rows`, `sample lines`, `GPUs`).
    pub records: &'static str,
    /// Whether it records a process's GPU work (a rank of a job), rather than counters or an
    /// inventory of GPUs beside such a trace.
    pub records_gpu_work: bool,
    /// Where the absolute time of timeline 0 comes from, when the format records it (the
    /// field or table `tracehound info` names beside the offset).
    pub clock_origin: Option<&'static str>,
}

impl SourceFormat {
    /// Its name for people and what its input is, as [`Self::name`] and [`Self::input`].
    pub fn describe(&self) -> (&'static str, &'static str) {
        (self.name, self.input)
    }
}

/// A format is written to JSON as its id.
impl Serialize for SourceFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id)
    }
}

/// A trace as a reader hands it over: the events in the order they were read, and what the
/// reader knows of the capture beyond them. [`Parsed::finish`] is the one place a read trace
/// is finished and its capture described, for every reader, so a new reader cannot leave a
/// trace unsorted or a capture undescribed.
pub struct Parsed {
    /// The trace as read, before [`Trace::finish`].
    pub trace: Trace,
    /// What the reader says about the capture beyond its events (the tables an export
    /// declares, the threads it names), given the finished trace and the capture its events
    /// show.
    pub declare: Declare,
}

/// A reader's part of describing a capture (see [`Parsed::declare`]).
pub type Declare = Box<dyn FnOnce(&mut Trace, &mut Capture) + Send>;

impl Parsed {
    /// A trace whose events say everything about its capture.
    pub fn events_only(trace: Trace) -> Parsed {
        Parsed {
            trace,
            declare: Box::new(|_, _| {}),
        }
    }

    /// Finishes the trace ([`Trace::finish`]), describes the capture from its events
    /// ([`Capture::from_events`]) and lets the reader add what it declares.
    pub fn finish(self) -> Trace {
        let Parsed { mut trace, declare } = self;
        trace.finish();
        let mut capture = Capture::from_events(&trace);
        declare(&mut trace, &mut capture);
        trace.meta.capture = capture;
        trace
    }
}

/// One GPU as the trace describes it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GpuInfo {
    /// Device index as used by the trace's events.
    pub id: i32,
    /// Product name, e.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability (major, minor) when known.
    pub compute_capability: Option<(u32, u32)>,
    /// Number of SMs (compute units on ROCm).
    pub sm_count: Option<u32>,
    /// Global memory in bytes.
    pub memory_bytes: Option<u64>,
}

/// What the trace says about itself.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TraceMeta {
    /// The format the trace was read from.
    pub format: Option<&'static SourceFormat>,
    /// Format details, e.g. `schemaVersion 1, CUPTI 28`.
    pub format_version: String,
    /// GPUs listed by the trace (every GPU visible to the process, not only the used ones).
    pub gpus: Vec<GpuInfo>,
    /// Distributed rank, when recorded.
    pub rank: Option<i64>,
    /// Distributed world size, when recorded.
    pub world_size: Option<i64>,
    /// Absolute time of timeline 0 in ns since the Unix epoch (UTC), when the source gives one.
    pub epoch_offset_ns: Option<i64>,
    /// Capture options recorded by the profiler (`record_shapes`, `profile_memory`, `with_stack`).
    pub capture_options: Vec<(String, String)>,
    /// The software stack the trace was captured on, as far as it says.
    pub stack: SoftwareStack,
    /// What the capture recorded, as its reader found it.
    pub capture: Capture,
    /// Runtime and driver calls that returned an error, by name and code, most calls first
    /// (Nsight Systems records each call's return value). Polling that reports work still
    /// running (`cudaErrorNotReady`, 600) and calls that read back an earlier error
    /// (`cudaGetLastError`, `cudaPeekAtLastError`) are not failures and are left out.
    pub failed_calls: Vec<FailedCalls>,
}

/// Calls of one runtime or driver function that returned one error code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailedCalls {
    /// The function (`cudaLaunchKernel_v7000`).
    pub name: String,
    /// The code it returned (`222`).
    pub code: i64,
    /// How many calls returned it.
    pub count: u64,
}

impl TraceMeta {
    /// The GPU the trace lists under device `id`, if it lists one.
    pub fn gpu(&self, id: i32) -> Option<&GpuInfo> {
        self.gpus.iter().find(|g| g.id == id)
    }
}

/// What a capture recorded: the kinds of data it holds and how they were sampled, as its
/// reader found them. Analyses ask this, never the source format. Where a format declares what
/// was traced (Nsight Systems writes a table per kind of data it traced), the reader says so
/// from the declaration; elsewhere from the events it read.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Capture {
    /// GPU kernels were traced. A capture can hold launch calls without kernel records (CUPTI
    /// range profiling, a filtered export).
    pub kernels: bool,
    /// Kernels carry their launch geometry (grid and block).
    pub launch_geometry: bool,
    /// Kernels carry an estimated achieved occupancy.
    pub occupancy: bool,
    /// CUDA / HIP runtime or driver calls were traced.
    pub api_calls: bool,
    /// Framework CPU operators (`aten::mm` ...), as profiler events or as the NVTX ranges
    /// PyTorch emits per operator.
    pub cpu_ops: bool,
    /// Python function frames (`with_stack=True`).
    pub python_frames: bool,
    /// Python call stacks written as text on operators (`Call stack`, older traces).
    pub call_stacks: bool,
    /// Operator input shapes and types (`record_shapes=True`).
    pub shapes: bool,
    /// Allocator events (`profile_memory=True`, CUDA memory-usage tracing).
    pub memory_events: bool,
    /// The allocator events carry the caching allocator's allocated total, not only what it
    /// reserved from the driver.
    pub allocated_totals: bool,
    /// User annotations: NVTX ranges, `record_function`, step markers.
    pub annotations: bool,
    /// OS runtime calls (`clock_nanosleep`, `futex` ...).
    pub os_calls: bool,
    /// Periodic CPU samples with call chains.
    pub cpu_samples: bool,
    /// The host threads that have spans, by (pid, tid), with the name the capture gives each.
    pub host_threads: Vec<HostThread>,
    /// How often counters were sampled, when the trace has counters.
    pub counter_period: Option<CounterPeriod>,
    /// Recording starts a moment into the first profiled step: a window of steps opens with a
    /// hole that the profiler, not the program, leaves.
    pub startup_hole: bool,
    /// Where the profiler's own work held a host thread, (start, end) in ns, in time order:
    /// CUPTI requesting or flushing its activity buffers (Kineto's `overhead` events), which
    /// the program outside the profiler never pays.
    #[serde(skip)]
    pub profiler_work: Vec<(i64, i64)>,
    /// For a capture without CPU-side data: what it lacks and how to record it, in the
    /// capturing tool's terms (`the trace has no CPU operators: profile with ...`). Empty when
    /// the reader has no words for it.
    pub no_cpu_data: String,
    /// For a capture without GPU-side data: why, when the capture says (nsys: whether CUDA
    /// tracing was asked for, and its diagnostics). Empty when it does not.
    pub no_gpu_data: String,
    /// Recorded by PyTorch's own profiler (Kineto): the program is a PyTorch program.
    pub pytorch_profiler: bool,
}

/// One host thread of a capture.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct HostThread {
    /// Process id.
    pub pid: i64,
    /// Thread id, as in the spans.
    pub tid: i64,
    /// The thread's name, when the capture records one (`thread 808 (python3)`, `pt_autograd_0`).
    pub name: Option<String>,
}

/// How often counters were sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CounterPeriod {
    /// The interval, ns: a sample stamped S stands for [S, S + interval).
    pub ns: i64,
    /// Read from the log's timestamps; false when assumed (a log without times).
    pub measured: bool,
}

impl CounterPeriod {
    /// nvidia-smi's default interval (`dmon`, `--query-gpu -l 1`): 1 s.
    pub const DEFAULT_NS: i64 = 1_000_000_000;

    /// The default interval, assumed.
    pub fn assumed() -> Self {
        CounterPeriod {
            ns: Self::DEFAULT_NS,
            measured: false,
        }
    }
}

impl Capture {
    /// What the events of a finished `trace` show: the part of the description every reader
    /// derives the same way. A reader calls it after [`Trace::finish`], then sets what only
    /// its format says (launch geometry, declared tables, thread names, the start-up hole).
    pub fn from_events(trace: &Trace) -> Capture {
        use rayon::prelude::*;
        // One pass over the spans, on every core, for the kinds present and whether any span
        // carries a call stack or input shapes (a kind that is absent costs a whole pass when
        // each question scans on its own).
        let (kinds, stacks, dims) = trace
            .host_spans
            .par_iter()
            .with_min_len(1 << 14)
            .fold(
                || (0u32, false, false),
                |(k, c, d), s| {
                    (
                        k | 1 << s.kind as u32,
                        c || trace.args.get(s.args).call_stack != 0,
                        d || trace.args.get(s.args).input_dims != 0,
                    )
                },
            )
            .reduce(
                || (0, false, false),
                |a, b| (a.0 | b.0, a.1 || b.1, a.2 || b.2),
            );
        let has_span = |of: &[HostKind]| of.iter().any(|&k| kinds & 1 << k as u32 != 0);
        Capture {
            kernels: trace.gpu_ops.iter().any(|o| o.kind == GpuOpKind::Kernel),
            launch_geometry: false,
            occupancy: trace
                .gpu_ops
                .iter()
                .any(|o| o.kernel.is_some_and(|k| k.occupancy_pct.is_some())),
            api_calls: has_span(&[HostKind::Runtime, HostKind::Driver]),
            cpu_ops: has_span(&[HostKind::CpuOp]),
            python_frames: has_span(&[HostKind::Python]),
            call_stacks: stacks,
            shapes: dims,
            memory_events: !trace.memory.is_empty(),
            allocated_totals: trace
                .memory
                .iter()
                .any(|m| m.total_allocated.get().is_some()),
            annotations: has_span(&[HostKind::Annotation, HostKind::GpuAnnotation]),
            os_calls: has_span(&[HostKind::OsCall]),
            cpu_samples: !trace.cpu_samples.is_empty(),
            // Annotations projected onto a GPU stream sit on the stream's lane, not a thread's.
            host_threads: trace
                .index
                .spans_by_thread
                .iter()
                .filter(|(_, spans)| {
                    spans
                        .iter()
                        .any(|&i| trace.host_spans[i as usize].kind != HostKind::GpuAnnotation)
                })
                .map(|((pid, tid), _)| HostThread {
                    pid: *pid,
                    tid: *tid,
                    name: None,
                })
                .collect(),
            counter_period: None,
            startup_hole: false,
            profiler_work: Vec::new(),
            no_cpu_data: String::new(),
            no_gpu_data: String::new(),
            pytorch_profiler: false,
        }
    }

    /// Names the host threads from `names` ((pid, tid, name) as the capture lists them; the
    /// first name of a thread wins).
    pub fn name_threads<'a>(&mut self, names: impl IntoIterator<Item = (i64, i64, &'a str)>) {
        let mut first: FxHashMap<(i64, i64), &str> = FxHashMap::default();
        for (pid, tid, name) in names {
            first.entry((pid, tid)).or_insert(name);
        }
        for t in &mut self.host_threads {
            if let Some(n) = first.get(&(t.pid, t.tid)) {
                t.name = Some(n.to_string());
            }
        }
    }

    /// The counters' sampling interval, ns: the recorded one, else nvidia-smi's default.
    pub fn counter_period_ns(&self) -> i64 {
        self.counter_period
            .map_or(CounterPeriod::DEFAULT_NS, |p| p.ns)
    }
}

/// The software the trace was captured with, as far as the source records it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SoftwareStack {
    /// Newest CUDA version the driver supports, as CUDA writes it (`13000` for 13.0).
    pub driver_cuda: Option<u32>,
    /// CUDA runtime version the program runs (`13000`).
    pub runtime_cuda: Option<u32>,
    /// NVIDIA driver release (`580.159.04`).
    pub driver: Option<String>,
    /// CUPTI version (`130001`).
    pub cupti: Option<i64>,
    /// Whether MIG was on for a GPU of the trace.
    pub mig: Option<bool>,
    /// Operating system (`Ubuntu 24.04.3 LTS`).
    pub os: Option<String>,
}

/// `13000` → `13.0`, CUDA's integer version as people write it.
pub fn cuda_version_text(v: u32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// The kind of a GPU operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuOpKind {
    /// A kernel.
    Kernel,
    /// A memory copy.
    Memcpy,
    /// A memset.
    Memset,
    /// A synchronisation record on the GPU timeline (waits, not work).
    Sync,
}

/// Direction of a memory copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum CopyDirection {
    /// Host to device.
    HtoD,
    /// Device to host.
    DtoH,
    /// Device to device (same GPU).
    DtoD,
    /// Host to host.
    HtoH,
    /// Peer to peer (between GPUs).
    PtoP,
    /// Not stated by the trace.
    Unknown,
}

impl CopyDirection {
    /// Short label as the profilers print it.
    pub fn label(self) -> &'static str {
        match self {
            CopyDirection::HtoD => "HtoD",
            CopyDirection::DtoH => "DtoH",
            CopyDirection::DtoD => "DtoD",
            CopyDirection::HtoH => "HtoH",
            CopyDirection::PtoP => "PtoP",
            CopyDirection::Unknown => "?",
        }
    }

    /// True when one side of the copy is host memory.
    pub fn crosses_host(self) -> bool {
        matches!(self, CopyDirection::HtoD | CopyDirection::DtoH)
    }
}

/// Kind of memory on one side of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum MemKind {
    /// Pageable host memory: the driver stages it through a pinned buffer, synchronously.
    Pageable,
    /// Page-locked host memory.
    Pinned,
    /// Device memory.
    Device,
    /// Managed (unified) memory.
    Managed,
    /// Host memory whose pageability the trace does not state (ROCm).
    Host,
    /// Not stated.
    Unknown,
}

impl MemKind {
    /// Label as Kineto prints it.
    pub fn label(self) -> &'static str {
        match self {
            MemKind::Pageable => "Pageable",
            MemKind::Pinned => "Pinned",
            MemKind::Device => "Device",
            MemKind::Managed => "Managed",
            MemKind::Host => "Host",
            MemKind::Unknown => "Unknown",
        }
    }
}

/// Launch configuration of a kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct KernelInfo {
    /// Grid dimensions; zeros where the trace did not record them.
    pub grid: [u32; 3],
    /// Block dimensions; zeros where the trace did not record them.
    pub block: [u32; 3],
    /// Registers per thread.
    pub registers: u16,
    /// Shared memory per block in bytes.
    pub shared_mem: u32,
    /// Estimated achieved occupancy in percent, when recorded.
    pub occupancy_pct: Option<f32>,
    /// Whether the trace recorded this kernel's grid or block. Kernels replayed from a CUDA
    /// or HIP graph, and ROCm's in Kineto, carry none; what is not recorded reads as zeros
    /// and says nothing about the launch (Kineto's scan and serde readers alike; nsys
    /// records both).
    pub geometry: bool,
}

impl KernelInfo {
    /// The grid's block count, when the trace recorded a grid (a grid it did not record reads
    /// as zeros and is no one-block launch).
    pub fn blocks(&self) -> Option<u64> {
        let n: u64 = self.grid.iter().map(|&g| u64::from(g)).product();
        (self.geometry && n > 0).then_some(n)
    }
}

/// One operation on a GPU: kernel, memcpy, memset or sync.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GpuOp {
    /// What it is.
    pub kind: GpuOpKind,
    /// Device index.
    pub device: i32,
    /// Stream id.
    pub stream: i64,
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// CUDA correlation id (0 when absent).
    pub correlation: u64,
    /// Profiler external id linking to the CPU operator (0 when absent).
    pub external_id: u64,
    /// Name (kernel name, `Memcpy HtoD (Pageable -> Device)` ...).
    pub name: StrId,
    /// Bytes moved or set (memcpy, memset); for a collective kernel, its message where the
    /// profiler records it (Kineto's `In msg nelems`/`Out msg nelems` × `dtype`, the larger).
    pub bytes: u64,
    /// Copy direction (memcpy only).
    pub direction: CopyDirection,
    /// Source memory kind (memcpy only).
    pub src_kind: MemKind,
    /// Destination memory kind (memcpy only).
    pub dst_kind: MemKind,
    /// Launch configuration (kernels only).
    pub kernel: Option<KernelInfo>,
}

impl GpuOp {
    /// An operation with what places it set and nothing else recorded: no correlation or
    /// external id, no bytes, unknown copy direction and memory kinds, no launch
    /// configuration. Readers set the rest with struct update syntax.
    pub fn new(
        kind: GpuOpKind,
        device: i32,
        stream: i64,
        start: i64,
        end: i64,
        name: StrId,
    ) -> Self {
        GpuOp {
            kind,
            device,
            stream,
            start,
            end,
            correlation: 0,
            external_id: 0,
            name,
            bytes: 0,
            direction: CopyDirection::Unknown,
            src_kind: MemKind::Unknown,
            dst_kind: MemKind::Unknown,
            kernel: None,
        }
    }

    /// Duration in ns (never negative).
    pub fn dur(&self) -> i64 {
        (self.end - self.start).max(0)
    }

    /// True for operations that occupy the GPU (kernels, copies, memsets; not sync records).
    pub fn is_work(&self) -> bool {
        self.kind != GpuOpKind::Sync
    }

    /// Whether this is a unified-memory page migration (managed memory on both sides, as the
    /// nsys reader marks CUPTI's unified-memory copy kinds).
    pub fn is_migration(&self) -> bool {
        self.kind == GpuOpKind::Memcpy
            && self.src_kind == MemKind::Managed
            && self.dst_kind == MemKind::Managed
    }

    /// True when either side of the copy is pageable host memory.
    pub fn is_pageable_copy(&self) -> bool {
        self.kind == GpuOpKind::Memcpy
            && (self.src_kind == MemKind::Pageable || self.dst_kind == MemKind::Pageable)
    }
}

/// The kind of a span on a host thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostKind {
    /// A framework operator (`aten::copy_` ...).
    CpuOp,
    /// A CUDA / HIP runtime API call.
    Runtime,
    /// A CUDA driver API call (`cuLaunchKernel`).
    Driver,
    /// A Python function frame (traces recorded with stacks).
    Python,
    /// A user annotation: `record_function`, NVTX range, `ProfilerStep#N`.
    Annotation,
    /// A user annotation projected onto a GPU stream.
    GpuAnnotation,
    /// An OS runtime call (`clock_nanosleep`, `poll`, `futex`, `read`), from Nsight Systems'
    /// OS runtime trace.
    OsCall,
}

/// A span of time on a host thread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostSpan {
    /// What it is.
    pub kind: HostKind,
    /// Process id.
    pub pid: i64,
    /// Thread id (strings that are not numbers are interned and offset by 2^40).
    pub tid: i64,
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
    /// Name.
    pub name: StrId,
    /// What links the span to other records: a runtime or driver call's CUDA correlation id
    /// (its kernel's or copy's), a CPU operator's profiler external id (the id its GPU work
    /// carries); 0 when absent, and for every other kind. Read it through
    /// [`HostSpan::correlation`] and [`HostSpan::external_id`].
    pub link: u64,
    /// The operator's recorded inputs and stack, an id in [`Trace::args`] (0 when none); read
    /// them through [`Trace::op_args`].
    pub args: u32,
    /// Nesting depth on its thread (0 = outermost); set by [`Trace::finish`].
    pub depth: u16,
    /// Index of the enclosing span on the same thread, or [`NONE`]; set by [`Trace::finish`].
    pub parent: u32,
}

// 56 bytes: the spans are most of a trace's memory (2.2 million of them, 117 MiB, in the 1 GB
// benchmark trace), and a span is either a call with a correlation id or an operator with an
// external id, so one field holds the two (a runtime call's own external id, the same as its
// operator's, is not kept).
const _: () = assert!(std::mem::size_of::<HostSpan>() == 56);

impl HostSpan {
    /// A span with what places it set and nothing else recorded (no ids, shapes or stack),
    /// not yet nested. Readers set the rest with struct update syntax.
    pub fn new(kind: HostKind, pid: i64, tid: i64, start: i64, end: i64, name: StrId) -> Self {
        HostSpan {
            kind,
            pid,
            tid,
            start,
            end,
            name,
            link: 0,
            args: 0,
            depth: 0,
            parent: NONE,
        }
    }

    /// Duration in ns (never negative).
    pub fn dur(&self) -> i64 {
        (self.end - self.start).max(0)
    }

    /// The CUDA correlation id of a runtime or driver call (0 when absent or another kind).
    pub fn correlation(&self) -> u64 {
        match self.kind {
            HostKind::Runtime | HostKind::Driver => self.link,
            _ => 0,
        }
    }

    /// The profiler's external id of a CPU operator (0 when absent or another kind).
    pub fn external_id(&self) -> u64 {
        if self.kind == HostKind::CpuOp {
            self.link
        } else {
            0
        }
    }
}

/// An optional count in 8 bytes, where `Option<i64>` takes 16: a trace holds hundreds of
/// thousands of allocator events, each with two of them. `i64::MIN`, which no byte count is,
/// stands for none. Read it with [`ByteTotal::get`]; it serialises as an `Option`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteTotal(i64);

impl ByteTotal {
    /// Not recorded.
    pub const NONE: ByteTotal = ByteTotal(i64::MIN);

    /// The value, when recorded.
    pub fn get(self) -> Option<i64> {
        (self != Self::NONE).then_some(self.0)
    }
}

impl From<Option<i64>> for ByteTotal {
    /// `None`, and the one value taken to mean it, are none.
    fn from(v: Option<i64>) -> ByteTotal {
        ByteTotal(v.unwrap_or(i64::MIN))
    }
}

impl Serialize for ByteTotal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

/// One caching-allocator event (`[memory]` in Kineto).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemorySample {
    /// Time, ns.
    pub ts: i64,
    /// Device index, -1 for host memory.
    pub device: i32,
    /// Address of the block (0 when not recorded).
    pub addr: u64,
    /// Bytes allocated (positive) or freed (negative).
    pub bytes: i64,
    /// Total allocated on that device after the event, when recorded.
    pub total_allocated: ByteTotal,
    /// Total reserved by the allocator on that device after the event, when recorded.
    pub total_reserved: ByteTotal,
    /// True for an out-of-memory event (`[OutOfMemory]`): `bytes` is the failed request.
    pub oom: bool,
}

// 48 bytes (with two `Option<i64>`, 64).
const _: () = assert!(std::mem::size_of::<MemorySample>() == 48);

/// A profiler step (`ProfilerStep#N`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Step number.
    pub number: i64,
    /// Start, ns.
    pub start: i64,
    /// End, ns.
    pub end: i64,
}

/// One metric of one GPU sampled over time (`nvidia-smi dmon` / `--query-gpu`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterSeries {
    /// GPU index.
    pub gpu: i32,
    /// Metric, dmon's column name (`sm`, `mem`, `pwr`, `pclk`, `pviol`, `rxpci` ...).
    pub metric: String,
    /// Unit from the header (`%`, `W`, `MHz`, `MB/s` ...).
    pub unit: String,
    /// (time ns on the trace timeline, value), sorted by time.
    pub samples: Vec<(i64, f64)>,
}

/// How counter timestamps relate to real time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CounterClock {
    /// Wall-clock time (`-o DT`, CSV timestamps) converted to Unix epoch ns with this UTC offset.
    Wall {
        /// Offset of the local time the log was written in, seconds east of UTC.
        utc_offset_s: i64,
    },
    /// No date in the log: times are sample number × interval from 0, not alignable.
    Relative {
        /// Assumed sampling interval, ns.
        interval_ns: i64,
    },
}

/// One GPU as `nvidia-smi -q -x` describes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuInventory {
    /// PCI bus id (`00000000:01:00.0`).
    pub bus_id: String,
    /// Product name.
    pub product: String,
    /// Architecture (`Hopper`), when listed.
    pub architecture: Option<String>,
    /// Driver version.
    pub driver: Option<String>,
    /// CUDA version.
    pub cuda: Option<String>,
    /// Performance state (`P0`).
    pub pstate: Option<String>,
    /// GPU utilisation %, at the moment of the snapshot.
    pub gpu_util_pct: Option<f64>,
    /// PCIe link generation now / max.
    pub pcie_gen: (Option<u32>, Option<u32>),
    /// PCIe link width now / max.
    pub pcie_width: (Option<u32>, Option<u32>),
    /// Graphics / SM clock now and max, MHz.
    pub sm_clock_mhz: (Option<f64>, Option<f64>),
    /// Memory clock now and max, MHz.
    pub mem_clock_mhz: (Option<f64>, Option<f64>),
    /// Power draw and the enforced limit, W.
    pub power_w: (Option<f64>, Option<f64>),
    /// Temperature, C.
    pub temp_c: Option<f64>,
    /// Active clocks-event (throttle) reasons, by their XML names without the prefix.
    pub throttle_reasons: Vec<String>,
    /// Volatile ECC errors (correctable, uncorrectable), when ECC is on.
    pub ecc_volatile: (Option<u64>, Option<u64>),
    /// Memory used / total, MiB.
    pub fb_mib: (Option<f64>, Option<f64>),
    /// MIG mode on (`mig_mode/current_mig` Enabled), when reported.
    pub mig: Option<bool>,
    /// Compute processes on the GPU at snapshot time (`processes/process_info`).
    pub processes: u32,
    /// Retired pages (single- plus double-bit ECC), when reported.
    pub retired_pages: Option<u64>,
}

/// Counts of what a parser read and skipped, for `tracehound info` and for tests.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadStats {
    /// Events in the file.
    pub events_total: u64,
    /// Events skipped by category (unknown categories, bookkeeping), sorted by name.
    pub skipped: Vec<(String, u64)>,
    /// Bytes of (decompressed) input parsed.
    pub bytes_parsed: u64,
    /// Bytes of (decompressed) input.
    pub bytes_total: u64,
    /// True when the input ended before the trace was complete ([`LoadStats::incomplete`]
    /// says how much was read).
    pub truncated: bool,
    /// How much of a file that ends before its trace does was read; None for a whole file.
    pub incomplete: Option<Incomplete>,
    /// What the source lacks and what that means (`no NVTX_EVENTS table: ...`).
    pub notes: Vec<String>,
    /// Tables read (SQLite sources).
    pub tables: Vec<String>,
}

/// A file that ends before its trace does (a job killed while writing, a copy taken too
/// early): what stopped the read and how much of the file it had read. The events before
/// that point are read; the trace's end, and whatever the format writes last (Kineto writes
/// its GPU records after the host's), is missing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Incomplete {
    /// What stopped the read, in words (`the JSON ends inside traceEvents`).
    pub why: String,
    /// Whether the file is gzip-compressed (the byte counts below are then compressed ones).
    pub compressed: bool,
    /// Bytes of the file as stored.
    pub file_bytes: u64,
    /// Bytes of the file read before it ended or turned unreadable.
    pub file_bytes_read: u64,
    /// Bytes of text (decompressed, for gzip) up to the end of the last complete event.
    pub text_bytes_complete: u64,
    /// Complete events read.
    pub events_read: u64,
}

impl Incomplete {
    /// Share of the file read, 0 to 1.
    pub fn share_read(&self) -> f64 {
        self.file_bytes_read as f64 / self.file_bytes.max(1) as f64
    }

    /// The loader's warning: what stopped the read, how much of the file was read, and
    /// that what followed is missing.
    pub fn describe(&self) -> String {
        let read = if self.file_bytes_read >= self.file_bytes {
            format!("all {} bytes of the file were read", self.file_bytes)
        } else {
            format!(
                "{} of the file's {} bytes were read ({:.1}%)",
                self.file_bytes_read,
                self.file_bytes,
                100.0 * self.share_read()
            )
        };
        let text = if self.compressed {
            format!(
                "{} bytes of decompressed text hold whole events",
                self.text_bytes_complete
            )
        } else {
            format!(
                "the last whole event ends at byte {}",
                self.text_bytes_complete
            )
        };
        format!(
            "incomplete capture: {}: the file ends before the trace does (cut short: a job killed while writing, or a copy taken too early); {read}, {text}; {} complete events read, and whatever the trace held after them is missing",
            self.why, self.events_read
        )
    }
}

/// Indexes built once after loading.
#[derive(Debug, Clone, Default)]
pub struct Indexes {
    /// For each GPU op, the runtime/driver call that launched it ([`NONE`] when unknown).
    pub op_launch: Vec<u32>,
    /// For each GPU op, the innermost CPU operator around its launch ([`NONE`] when unknown).
    pub op_cpu_op: Vec<u32>,
    /// For each GPU op, the outermost CPU operator around its launch call
    /// ([`Trace::outermost_cpu_op`] of [`Indexes::op_launch`]; [`NONE`] when unknown).
    pub op_outer_cpu_op: Vec<u32>,
    /// GPU op indices per device, sorted by start (devices in ascending order).
    pub ops_by_device: Vec<(i32, Vec<u32>)>,
    /// Host span indices per thread `(pid, tid)`, sorted by start.
    pub spans_by_thread: Vec<((i64, i64), Vec<u32>)>,
    /// The runtime and driver calls of each thread (a tenth of its spans, where the
    /// synchronising calls are), sorted by start; threads as in
    /// [`Indexes::spans_by_thread`].
    pub calls_by_thread: Vec<((i64, i64), Vec<u32>)>,
    /// Per string id, whether it names a user's Python frame ([`is_user_frame`]), for the
    /// names of Python spans: 0 not worked out, 1 no, 2 yes. Read by [`Trace::user_frame`],
    /// which rules ask for every kernel or copy they name: a trace repeats a few thousand
    /// frame names over millions of spans.
    pub user_frame_names: Vec<u8>,
}

/// A loaded trace: the model every rule reads.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Where the trace came from (a file name).
    pub source: String,
    /// Metadata.
    pub meta: TraceMeta,
    /// Interned strings.
    pub strings: Strings,
    /// The operators' distinct recorded inputs and stacks ([`HostSpan::args`]).
    pub args: ArgsTable,
    /// GPU operations, sorted by (start, device, stream) after [`Trace::finish`].
    pub gpu_ops: Vec<GpuOp>,
    /// Host spans, sorted by (start, longer first) after [`Trace::finish`].
    pub host_spans: Vec<HostSpan>,
    /// Allocator events, sorted by time.
    pub memory: Vec<MemorySample>,
    /// Profiler steps, sorted by start (a last marker that is only the profiler stopping is
    /// dropped: see `drop_stop_marker`).
    pub steps: Vec<Step>,
    /// What was read and skipped.
    pub stats: LoadStats,
    /// Counter series (`nvidia-smi dmon`, `--query-gpu`), on this trace's timeline.
    pub counters: Vec<CounterSeries>,
    /// How the counters' times were obtained, when there are counters.
    pub counter_clock: Option<CounterClock>,
    /// GPU inventory (`nvidia-smi -q -x`).
    pub inventory: Vec<GpuInventory>,
    /// Warnings for the user (truncation, oddities), in the order found.
    pub warnings: Vec<String>,
    /// `Concrete Inputs` (stride, padding, masks) of convolution and attention operators
    /// (Kineto), keyed by the span's (pid, tid, start, name): nested operators can start at
    /// the same instant. Sorted; read through [`Trace::concrete_inputs_of`].
    pub concrete_inputs: Vec<SpanText>,
    /// `Input Strides` (Kineto) of the operators whose strides change a model: those that
    /// recorded a stride of 0 (an expanded input), and matrix products with a stride not a
    /// multiple of 8 (an unaligned leading dimension); keyed as [`Trace::concrete_inputs`].
    /// Sorted; read through [`Trace::input_strides_of`].
    pub strides: Vec<SpanText>,
    /// CPU samples (Nsight Systems `-s cpu`), sorted by (pid, tid, time).
    pub cpu_samples: Vec<CpuSample>,
    /// The API entry point of each runtime or driver call name recorded with a version suffix
    /// (Nsight Systems tags every CUDA call with the version that introduced it,
    /// `cudaFree_v3020`; CUDA's versioned entry points read `cuMemAlloc_v2`): (recorded name,
    /// API name) string ids, sorted. Filled by the readers; read through [`Trace::api_name`].
    pub api_names: Vec<(StrId, StrId)>,
    /// Indexes; valid after [`Trace::finish`].
    pub index: Indexes,
}

/// One CPU sample of a thread: where it was, as the first frame of its call chain that is
/// not in the C library, the kernel or the Python interpreter (what the thread was working
/// on), else its innermost frame.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuSample {
    /// Process id.
    pub pid: i64,
    /// Thread id.
    pub tid: i64,
    /// Time, ns.
    pub ts: i64,
    /// The frame's function.
    pub symbol: StrId,
    /// The frame's module (shared library or executable).
    pub module: StrId,
}

/// A trace spanning more than this is not one profiling session: a day, where the longest
/// captures we know of last minutes.
const PLAUSIBLE_SPAN_NS: i64 = 86_400_000_000_000;

/// Events apart from the rest of the trace by more than this are a separate cluster.
const CLUSTER_GAP_NS: i64 = 3_600_000_000_000;

/// What [`Trace::nest`] gathers besides the nesting, from the spans it reads anyway.
struct Nested {
    /// Each thread's spans, by thread.
    threads: Vec<((i64, i64), Vec<u32>)>,
    /// Each thread's runtime and driver calls, threads as in `threads`.
    calls: Vec<((i64, i64), Vec<u32>)>,
    /// The runtime and driver calls with a correlation id, in span order: (correlation id,
    /// call, the innermost and the outermost CPU operator around it, or [`NONE`]).
    launches: Vec<(u64, u32, u32, u32)>,
    /// The step markers, in span order.
    steps: Vec<Step>,
    /// Per string id: whether a Python span has that name.
    python_names: Vec<bool>,
}

impl Trace {
    /// Repairs what no profiler writes on purpose, with a warning for each kind of repair:
    /// negative durations are read as zero length, and when the events span more than a day,
    /// a small cluster of events (at most 2, or under 10%) more than an hour from the rest
    /// (timestamps near the integer limits, a stray clock) is dropped, so the window is not
    /// absurd. Returns the latest start of what is kept and the latest end of any event
    /// (dropped ones included), for [`Trace::clamp_absurd_durations`].
    fn sanitize_times(&mut self) -> (Option<i64>, i64) {
        use rayon::prelude::*;
        // Passes over millions of events run on every core (counts and extremes do not
        // depend on the order they are taken in). One pass repairs and measures.
        type Seen = (u64, i64, i64, i64);
        let add = |a: Seen, b: Seen| (a.0 + b.0, a.1.min(b.1), a.2.max(b.2), a.3.max(b.3));
        let none: Seen = (0, i64::MAX, i64::MIN, i64::MIN);
        let repair = |start: i64, end: &mut i64| {
            let bad = *end < start;
            if bad {
                *end = start;
            }
            (u64::from(bad), start, start, *end)
        };
        let (negative, lo, hi, latest_end) = add(
            self.gpu_ops
                .par_iter_mut()
                .with_min_len(1 << 14)
                .map(|o| repair(o.start, &mut o.end))
                .reduce(|| none, add),
            self.host_spans
                .par_iter_mut()
                .with_min_len(1 << 14)
                .map(|h| repair(h.start, &mut h.end))
                .reduce(|| none, add),
        );
        if negative > 0 {
            self.warnings.push(format!(
                "{negative} events have negative durations: read as zero length"
            ));
        }
        let latest = (lo <= hi).then_some(hi);
        if lo > hi || hi.saturating_sub(lo) <= PLAUSIBLE_SPAN_NS {
            return (latest, latest_end);
        }
        // The largest jump between consecutive start times splits the events in two: keep
        // the larger side when the jump is over an hour and the other side is small.
        let mut all: Vec<i64> = self
            .gpu_ops
            .iter()
            .map(|o| o.start)
            .chain(self.host_spans.iter().map(|h| h.start))
            .collect();
        all.sort_unstable();
        let Some((k, jump)) = all
            .windows(2)
            .enumerate()
            .map(|(k, w)| (k, w[1].saturating_sub(w[0])))
            .max_by_key(|x| x.1)
        else {
            return (latest, latest_end);
        };
        let n = all.len();
        let below = k + 1;
        // A cluster of at most 2 events, or under 10% of them, is the stray one.
        let stray = |m: usize| m <= 2 || m * 10 < n;
        let (keep_lo, keep_hi) = if below < n - below && stray(below) {
            (all[k + 1], i64::MAX)
        } else if n - below < below && stray(n - below) {
            (i64::MIN, all[k])
        } else {
            return (latest, latest_end);
        };
        if jump <= CLUSTER_GAP_NS {
            return (latest, latest_end);
        }
        let before = self.gpu_ops.len() + self.host_spans.len();
        let keep = |t: i64| t >= keep_lo && t <= keep_hi;
        self.gpu_ops.retain(|o| keep(o.start));
        self.host_spans.retain(|h| keep(h.start));
        let dropped = before - self.gpu_ops.len() - self.host_spans.len();
        self.warnings.push(format!(
            "{dropped} events lie more than {} h from the other {} (absurd timestamps): dropped",
            jump / 3_600_000_000_000,
            n - dropped
        ));
        let latest = self
            .gpu_ops
            .iter()
            .map(|o| o.start)
            .chain(self.host_spans.iter().map(|h| h.start))
            .max();
        (latest, latest_end)
    }

    /// Events that last longer than a day and end more than a day after the last event of the
    /// trace starts (a duration written in the wrong unit, an overflow, a stray clock) are
    /// read as zero length with a warning, so that one bad number cannot stretch the window.
    /// `hi` is the latest start of any event, `latest_end` at least the latest end.
    fn clamp_absurd_durations(&mut self, hi: Option<i64>, latest_end: i64) {
        use rayon::prelude::*;
        let Some(hi) = hi else {
            return;
        };
        let limit = hi.saturating_add(PLAUSIBLE_SPAN_NS);
        // Nothing ends past the limit in almost every trace: then no pass over the events.
        if latest_end <= limit {
            return;
        }
        let absurd =
            |start: i64, end: i64| end > limit && end.saturating_sub(start) > PLAUSIBLE_SPAN_NS;
        // (count, longest) of the clamped events.
        let clamp = |start: i64, end: &mut i64| {
            if absurd(start, *end) {
                let d = end.saturating_sub(start);
                *end = start;
                (1u64, d)
            } else {
                (0, 0)
            }
        };
        let add = |a: (u64, i64), b: (u64, i64)| (a.0 + b.0, a.1.max(b.1));
        let (n, longest) = add(
            self.gpu_ops
                .par_iter_mut()
                .with_min_len(1 << 14)
                .map(|o| clamp(o.start, &mut o.end))
                .reduce(|| (0, 0), add),
            self.host_spans
                .par_iter_mut()
                .with_min_len(1 << 14)
                .map(|h| clamp(h.start, &mut h.end))
                .reduce(|| (0, 0), add),
        );
        if n > 0 {
            self.warnings.push(format!(
                "{n} events last longer than the trace (up to {:.1} days, ending over a day after the last event starts): read as zero length",
                longest as f64 / 86_400e9
            ));
        }
    }

    /// Name of a string id.
    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    /// What span `s` recorded of its inputs and stack (all 0 when nothing).
    pub fn op_args(&self, s: &HostSpan) -> OpArgs {
        self.args.get(s.args)
    }

    /// The API that a runtime or driver call recorded as `name` calls, without the version
    /// suffix of the recorded name: `cudaFree` for `cudaFree_v3020`, the name itself when it
    /// has none.
    pub fn api_name(&self, name: StrId) -> &str {
        match self.api_names.binary_search_by_key(&name, |e| e.0) {
            Ok(k) => self.str(self.api_names[k].1),
            Err(_) => self.str(name),
        }
    }

    /// Fills [`Trace::api_names`] from the runtime and driver calls' names: a reader calls it
    /// once its spans are in.
    pub(crate) fn name_api_calls(&mut self) {
        use rayon::prelude::*;
        // The names in use, marked by pieces of the spans on all cores and then joined: a
        // pass over millions of spans on one thread took 25 ms of the 1 GB trace's load
        // while the other core waited.
        let n = self.strings.len();
        let seen = self
            .host_spans
            .par_chunks(1 << 16)
            .fold(
                || vec![false; n],
                |mut seen, piece| {
                    for s in piece {
                        if matches!(s.kind, HostKind::Runtime | HostKind::Driver)
                            && let Some(v) = seen.get_mut(s.name as usize)
                        {
                            *v = true;
                        }
                    }
                    seen
                },
            )
            .reduce(
                || vec![false; n],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x |= y);
                    a
                },
            );
        let mut names = Vec::new();
        for (id, _) in seen.iter().enumerate().filter(|(_, v)| **v) {
            let id = id as StrId;
            let recorded = self.strings.get(id);
            let api = without_api_version(recorded);
            if api.len() < recorded.len() {
                let api = api.to_string();
                names.push((id, self.strings.intern(&api)));
            }
        }
        self.api_names = names;
    }

    /// Sorts the event vectors, detects steps and builds the indexes: once, after the
    /// vectors are filled ([`Parsed::finish`] for a reader's trace).
    pub fn finish(&mut self) {
        use rayon::slice::ParallelSliceMut;
        let mut clock = crate::timing::Phases::start();
        let (latest, latest_end) = self.sanitize_times();
        self.clamp_absurd_durations(latest, latest_end);
        clock.mark("finish: sanitize");
        let op_order = |a: &GpuOp, b: &GpuOp| {
            (a.start, a.device, a.stream, a.end, a.correlation).cmp(&(
                b.start,
                b.device,
                b.stream,
                b.end,
                b.correlation,
            ))
        };
        // A stable sort allocates a buffer as large as the ops: skipped when they are in
        // order already or a few sorted runs (the tables of an export), merged instead.
        if !sort::stable_by_runs(&mut self.gpu_ops, op_order) {
            self.gpu_ops.par_sort_by(op_order);
        }
        let span_key = |s: &HostSpan| (s.start, std::cmp::Reverse(s.end), s.pid, s.tid, s.kind);
        let span_order = |a: &HostSpan, b: &HostSpan| span_key(a).cmp(&span_key(b));
        // The spans come in a few sorted runs (a trace lists its operators, its Python
        // functions and its runtime calls apart, each in time order): merged when they are,
        // stably, so tied spans keep their input order.
        if !sort::stable_by_runs(&mut self.host_spans, span_order) {
            // Sorted in place, with the input position as the last key so the order is the
            // one a stable sort would give: a stable parallel sort needs a buffer as large
            // as the spans, the biggest allocation of a load. `parent` holds the position
            // until nesting sets it.
            use rayon::prelude::*;
            self.host_spans
                .par_iter_mut()
                .with_min_len(1 << 14)
                .enumerate()
                .for_each(|(i, s)| s.parent = i as u32);
            self.host_spans
                .par_sort_unstable_by(|a, b| span_order(a, b).then(a.parent.cmp(&b.parent)));
        }
        // Allocator events come in time order, or in a few runs of it (a trace made of
        // several captures): merged on both cores, a stable sort of them only when they are
        // many runs. (A sort on one thread took 30 ms of the 1 GB trace's load while the
        // other core waited.)
        let by_ts = |a: &MemorySample, b: &MemorySample| a.ts.cmp(&b.ts);
        if !sort::stable_by_runs(&mut self.memory, by_ts) {
            self.memory.par_sort_by(by_ts);
        }
        self.concrete_inputs.par_sort_unstable();
        self.strides.par_sort_unstable();
        clock.mark("finish: sort");
        // Nesting writes the spans while the device index reads only the GPU ops. The
        // nesting pass also gathers the step markers, the launch calls and the Python
        // frames' names: each of them was a pass of its own over millions of spans, bound by
        // memory, where the nesting pass has the span at hand.
        let step_numbers = self.step_numbers();
        let (nested, by_device) = rayon::join(
            || Self::nest(&mut self.host_spans, &step_numbers),
            || Self::device_index(&self.gpu_ops),
        );
        let Nested {
            threads,
            calls,
            launches,
            steps,
            python_names,
        } = nested;
        self.index.spans_by_thread = threads;
        self.index.calls_by_thread = calls;
        self.index.ops_by_device = by_device;
        self.steps = Self::steps_of(steps);
        self.drop_stop_marker();
        clock.mark("finish: nesting");
        let ((op_launch, op_cpu_op, op_outer_cpu_op), frames) = rayon::join(
            || self.launch_links(launches),
            || Self::user_frame_names(&python_names, &self.strings),
        );
        self.index.op_launch = op_launch;
        self.index.op_cpu_op = op_cpu_op;
        self.index.op_outer_cpu_op = op_outer_cpu_op;
        self.index.user_frame_names = frames;
        clock.mark("finish: links");
    }

    /// The step number of each step marker's name (`ProfilerStep#N`), by string id: a trace
    /// has millions of spans but few names, so each name is read once, not once per span.
    fn step_numbers(&self) -> Vec<Option<i64>> {
        (0..self.strings.len() as StrId)
            .map(|id| {
                let n = self.strings.get(id).strip_prefix("ProfilerStep#")?;
                n.trim().parse::<i64>().ok()
            })
            .collect()
    }

    /// The steps from their markers in span order.
    fn steps_of(mut steps: Vec<Step>) -> Vec<Step> {
        steps.sort_by_key(|s| (s.start, s.number));
        // Nested or repeated markers of the same step (record_function inside prof.step()) count once.
        steps.dedup_by(|b, a| a.number == b.number);
        steps
    }

    /// Drops a last step marker that holds no CUDA or HIP call and lasts under a tenth of the
    /// other steps' median: the profiler opens a step at its last `step()` and closes it when
    /// it stops, so that marker is the stop, not a step (a field ResNet trace's 30 µs
    /// `ProfilerStep#4` after a 3.8 ms step halved every per-step rate).
    fn drop_stop_marker(&mut self) {
        let n = self.steps.len();
        if n < 2 {
            return;
        }
        let (last_start, last_end) = (self.steps[n - 1].start, self.steps[n - 1].end);
        let mut lens: Vec<i64> = self.steps[..n - 1]
            .iter()
            .map(|s| s.end - s.start)
            .collect();
        lens.sort_unstable();
        let median = lens[lens.len() / 2];
        if 10 * (last_end - last_start) >= median {
            return;
        }
        let calls_inside = self.index.calls_by_thread.iter().any(|(_, calls)| {
            let k = calls.partition_point(|&c| self.host_spans[c as usize].start < last_start);
            calls
                .get(k)
                .is_some_and(|&c| self.host_spans[c as usize].start < last_end)
        });
        if !calls_inside {
            self.steps.pop();
        }
    }

    /// Sets each span's parent and depth, and gathers what [`Nested`] holds; `step_numbers`
    /// is [`Trace::step_numbers`].
    fn nest(host_spans: &mut [HostSpan], step_numbers: &[Option<i64>]) -> Nested {
        // One pass in span order: a thread's spans come in it in their own order, so each
        // thread's stack of open spans is kept as the pass meets them, and each span is read
        // and written once. (Counting the threads' spans, placing them, then nesting each
        // thread read the whole list three times: 70-80 ms of the 1 GB trace's load on one
        // core, bound by memory.) Spans of one thread come in stretches: each stretch looks
        // its thread up once.
        struct Open {
            key: (i64, i64),
            spans: Vec<u32>,
            calls: Vec<u32>,
            stack: Vec<Opened>,
        }
        /// An open span: its end, and the innermost and outermost CPU operator at or below
        /// it (itself included), so that a call finds the operators around it at the top.
        #[derive(Clone, Copy)]
        struct Opened {
            at: u32,
            end: i64,
            inner_op: u32,
            outer_op: u32,
        }
        let mut slot: FxHashMap<(i64, i64), usize> = FxHashMap::default();
        let mut threads: Vec<Open> = Vec::new();
        let mut last: Option<((i64, i64), usize)> = None;
        let mut launches = Vec::new();
        let mut steps = Vec::new();
        let mut python_names = vec![false; step_numbers.len()];
        for (i, s) in host_spans.iter_mut().enumerate() {
            let (key, start, end) = ((s.pid, s.tid), s.start, s.end);
            let k = match last {
                Some((k, at)) if k == key => at,
                _ => {
                    let at = *slot.entry(key).or_insert_with(|| {
                        threads.push(Open {
                            key,
                            spans: Vec::new(),
                            calls: Vec::new(),
                            stack: Vec::new(),
                        });
                        threads.len() - 1
                    });
                    last = Some((key, at));
                    at
                }
            };
            let open = &mut threads[k];
            // Pop what ended before this span starts, and what it merely overlaps: a span is
            // a child only when it lies entirely inside its parent.
            while let Some(top) = open.stack.last() {
                if top.end <= start || top.end < end {
                    open.stack.pop();
                } else {
                    break;
                }
            }
            let top = open.stack.last().copied();
            s.parent = top.map_or(NONE, |t| t.at);
            s.depth = open.stack.len().min(u16::MAX as usize) as u16;
            let (kind, name, correlation) = (s.kind, s.name, s.correlation());
            // The stack holds the span's ancestors, innermost last.
            let (inner_op, outer_op) = top.map_or((NONE, NONE), |t| (t.inner_op, t.outer_op));
            let op = (kind == HostKind::CpuOp).then_some(i as u32);
            open.stack.push(Opened {
                at: i as u32,
                end,
                inner_op: op.unwrap_or(inner_op),
                outer_op: if outer_op == NONE {
                    op.unwrap_or(NONE)
                } else {
                    outer_op
                },
            });
            if matches!(kind, HostKind::Runtime | HostKind::Driver) {
                open.calls.push(i as u32);
            }
            match kind {
                HostKind::Runtime | HostKind::Driver if correlation != 0 => {
                    launches.push((correlation, i as u32, inner_op, outer_op));
                }
                // 2021 Kineto traces put the step markers in the `Operator` category, read as
                // CPU operators; later ones make them user annotations.
                HostKind::Annotation | HostKind::CpuOp => {
                    if let Some(&Some(number)) = step_numbers.get(name as usize) {
                        steps.push(Step { number, start, end });
                    }
                }
                HostKind::Python => {
                    if let Some(seen) = python_names.get_mut(name as usize) {
                        *seen = true;
                    }
                }
                _ => {}
            }
            open.spans.push(i as u32);
        }
        // Grown by doubling, the lists of a large trace would hold megabytes of spare
        // capacity for good.
        threads.sort_by_key(|o| o.key);
        let calls: Vec<((i64, i64), Vec<u32>)> = threads
            .iter_mut()
            .map(|o| {
                let mut c = std::mem::take(&mut o.calls);
                c.shrink_to_fit();
                (o.key, c)
            })
            .collect();
        let out: Vec<((i64, i64), Vec<u32>)> = threads
            .into_iter()
            .map(|mut o| {
                o.spans.shrink_to_fit();
                (o.key, o.spans)
            })
            .collect();
        Nested {
            threads: out,
            calls,
            launches,
            steps,
            python_names,
        }
    }

    /// Each GPU op's launch call and the innermost and outermost CPU operator around it, in
    /// op order, from the launch calls [`Trace::nest`] gathered.
    fn launch_links(&self, launches: Vec<(u64, u32, u32, u32)>) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        use rayon::prelude::*;
        let mut by_corr = launches;
        by_corr.par_sort_unstable();
        // Each op's launch call and the operator around it, in op order.
        let links: Vec<(u32, u32, u32)> = self
            .gpu_ops
            .par_iter()
            .with_min_len(1 << 12)
            .map(|op| {
                if op.correlation == 0 {
                    return (NONE, NONE, NONE);
                }
                match by_corr.binary_search_by_key(&op.correlation, |&(c, ..)| c) {
                    Ok(k) => (by_corr[k].1, by_corr[k].2, by_corr[k].3),
                    Err(_) => (NONE, NONE, NONE),
                }
            })
            .collect();
        let op_launch: Vec<u32> = links.iter().map(|l| l.0).collect();
        let mut op_cpu_op: Vec<u32> = links.iter().map(|l| l.1).collect();
        let op_outer_cpu_op: Vec<u32> = links.iter().map(|l| l.2).collect();
        drop(links);
        let unlinked = self
            .gpu_ops
            .iter()
            .zip(&op_cpu_op)
            .any(|(op, &cpu)| cpu == NONE && op.external_id != 0);
        // When the runtime call is missing (sampled or filtered traces), the profiler's
        // external id still names the CPU operator: the innermost one carrying it. The
        // index of millions of operators is built only when some op needs it.
        if unlinked {
            let mut by_ext: Vec<(u64, std::cmp::Reverse<u16>, u32)> = self
                .host_spans
                .par_iter()
                .with_min_len(1 << 14)
                .enumerate()
                .filter(|(_, s)| s.external_id() != 0)
                .map(|(i, s)| (s.external_id(), std::cmp::Reverse(s.depth), i as u32))
                .collect();
            by_ext.par_sort_unstable();
            for (op, cpu) in self.gpu_ops.iter().zip(op_cpu_op.iter_mut()) {
                if *cpu == NONE && op.external_id != 0 {
                    let k = by_ext.partition_point(|e| e.0 < op.external_id);
                    *cpu = by_ext
                        .get(k)
                        .filter(|e| e.0 == op.external_id)
                        .map_or(NONE, |e| e.2);
                }
            }
        }
        (op_launch, op_cpu_op, op_outer_cpu_op)
    }

    /// Each device's GPU ops, by device.
    fn device_index(gpu_ops: &[GpuOp]) -> Vec<(i32, Vec<u32>)> {
        let mut by_dev: FxHashMap<i32, Vec<u32>> = FxHashMap::default();
        for (i, op) in gpu_ops.iter().enumerate() {
            by_dev.entry(op.device).or_default().push(i as u32);
        }
        let mut v: Vec<(i32, Vec<u32>)> = by_dev.into_iter().collect();
        v.sort_by_key(|(d, _)| *d);
        v
    }

    /// Per string id: 2 for the name of a user's Python frame, 1 for another frame's, 0 for
    /// a name no Python span has.
    fn user_frame_names(python_names: &[bool], strings: &Strings) -> Vec<u8> {
        (0..strings.len() as StrId)
            .map(|id| match python_names.get(id as usize) {
                Some(true) if is_user_frame(strings.get(id)) => 2,
                Some(true) => 1,
                _ => 0,
            })
            .collect()
    }

    /// Whether the name `name` of a Python span is a user's frame ([`is_user_frame`]), from
    /// the table built at [`Trace::finish`] (worked out on the spot for other names).
    pub fn is_user_frame_name(&self, name: StrId) -> bool {
        match self.index.user_frame_names.get(name as usize) {
            Some(1) => false,
            Some(2) => true,
            _ => is_user_frame(self.str(name)),
        }
    }

    /// The innermost span of `kind` enclosing span `i` (not `i` itself), or [`NONE`].
    pub fn enclosing(&self, i: u32, kind: HostKind) -> u32 {
        let mut p = self.host_spans.get(i as usize).map_or(NONE, |s| s.parent);
        while p != NONE {
            let s = &self.host_spans[p as usize];
            if s.kind == kind {
                return p;
            }
            p = s.parent;
        }
        NONE
    }

    /// Ancestors of span `i`, innermost first (not including `i`).
    pub fn ancestors(&self, i: u32) -> impl Iterator<Item = u32> + '_ {
        let mut p = self.host_spans.get(i as usize).map_or(NONE, |s| s.parent);
        std::iter::from_fn(move || {
            if p == NONE {
                return None;
            }
            let cur = p;
            p = self.host_spans[p as usize].parent;
            Some(cur)
        })
    }

    /// The user's Python frame around span `i`: the innermost enclosing Python frame that is
    /// not inside torch or another installed package, e.g. `train.py(106): step`.
    /// Falls back to the recorded `Call stack` of an enclosing operator (older traces).
    pub fn user_frame(&self, i: u32) -> Option<&str> {
        let mut fallback: Option<&str> = None;
        // An index outside the trace has no frame (and must not be indexed below).
        self.host_spans.get(i as usize)?;
        for a in std::iter::once(i).chain(self.ancestors(i)) {
            let s = &self.host_spans[a as usize];
            if s.kind == HostKind::Python {
                if self.is_user_frame_name(s.name) {
                    return Some(self.str(s.name));
                }
            } else if fallback.is_none() && self.op_args(s).call_stack != 0 {
                let stack = self.str(self.op_args(s).call_stack);
                fallback = stack.split(';').map(str::trim).find(|f| is_user_frame(f));
            }
        }
        fallback
    }

    /// GPU op indices of `device`, sorted by start.
    pub fn device_ops(&self, device: i32) -> &[u32] {
        self.index
            .ops_by_device
            .iter()
            .find(|(d, _)| *d == device)
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[])
    }

    /// Devices that ran any GPU op, ascending.
    pub fn devices(&self) -> Vec<i32> {
        self.index.ops_by_device.iter().map(|(d, _)| *d).collect()
    }

    /// First and last timestamp of any event, or None for an empty trace.
    pub fn span(&self) -> Option<(i64, i64)> {
        let g = self.gpu_ops.iter().map(|o| (o.start, o.end));
        let h = self.host_spans.iter().map(|s| (s.start, s.end));
        let m = self.memory.iter().map(|m| (m.ts, m.ts));
        let c = self
            .counters
            .iter()
            .flat_map(|c| c.samples.iter().map(|s| (s.0, s.0)));
        g.chain(h)
            .chain(m)
            .chain(c)
            .fold(None, |acc: Option<(i64, i64)>, (s, e)| match acc {
                None => Some((s, e)),
                Some((a, b)) => Some((a.min(s), b.max(e))),
            })
    }
}

/// A CUDA API name without its version suffixes, `_v` and digits at the end
/// (`cudaStreamGetCaptureInfo_v2_v11030` -> `cudaStreamGetCaptureInfo`).
pub(crate) fn without_api_version(name: &str) -> &str {
    let mut n = name;
    while let Some(k) = n.rfind("_v") {
        let digits = &n[k + 2..];
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            break;
        }
        n = &n[..k];
    }
    n
}

/// True for a Python frame that belongs to the user's code rather than torch or a library.
pub fn is_user_frame(name: &str) -> bool {
    let n = name.trim();
    if n.is_empty() || n.starts_with('<') || n.starts_with("built-in") {
        return false;
    }
    const LIB: &[&str] = &[
        "torch/",
        "torchvision/",
        "numpy/",
        "scipy/",
        "pandas/",
        "PIL/",
        "transformers/",
        "triton/",
        "logging/",
        "multiprocessing/",
        "concurrent/",
        "queue.py",
        "selectors.py",
        "socket.py",
        "site-packages/",
        "dist-packages/",
        "/lib/python",
        "threading.py",
        "contextlib.py",
        "runpy.py",
        "<frozen",
    ];
    !LIB.iter().any(|l| n.contains(l))
        && !n.starts_with("nn.Module:")
        && !n.starts_with("torch::")
        && !n.starts_with("<built-in")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions() {
        assert_eq!(without_api_version("cudaFree_v3020"), "cudaFree");
        assert_eq!(without_api_version("cuMemAlloc_v2"), "cuMemAlloc");
        assert_eq!(
            without_api_version("cudaStreamGetCaptureInfo_v2_v11030"),
            "cudaStreamGetCaptureInfo"
        );
        assert_eq!(without_api_version("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(without_api_version("cudaFoo_vx"), "cudaFoo_vx");
        assert_eq!(without_api_version("_v2"), "");
        let mut t = Trace::default();
        let free = t.strings.intern("cudaFree_v3020");
        let op = t.strings.intern("aten::mm_v2");
        t.host_spans
            .push(HostSpan::new(HostKind::Runtime, 1, 1, 0, 5, free));
        t.host_spans
            .push(HostSpan::new(HostKind::CpuOp, 1, 1, 0, 9, op));
        t.name_api_calls();
        assert_eq!(t.api_name(free), "cudaFree");
        assert_eq!(t.api_name(op), "aten::mm_v2", "only calls are API names");
    }

    #[test]
    fn user_frames() {
        assert!(is_user_frame("gen.py(106): step"));
        assert!(!is_user_frame(
            "torch/nn/modules/module.py(1751): _call_impl"
        ));
        assert!(!is_user_frame(
            "<built-in method to of Tensor object at 0x7f>"
        ));
        assert!(!is_user_frame("nn.Module: ResNet_0"));
    }

    #[test]
    fn absurd_times_are_repaired_with_a_warning() {
        let mut t = Trace::default();
        let k = t.strings.intern("k");
        for (s, e) in [
            (100, 90),
            (200, 300),
            (400, 500),
            (i64::MAX / 1000, i64::MAX / 1000 + 5),
        ] {
            t.gpu_ops.push(GpuOp::new(GpuOpKind::Kernel, 0, 7, s, e, k));
        }
        for s in 0..200 {
            t.gpu_ops.push(GpuOp::new(
                GpuOpKind::Kernel,
                0,
                7,
                1000 + s * 10,
                1005 + s * 10,
                k,
            ));
        }
        t.finish();
        assert_eq!(t.gpu_ops.len(), 203);
        assert!(t.gpu_ops.iter().all(|o| o.end >= o.start));
        assert_eq!(t.warnings.len(), 2, "{:?}", t.warnings);
        assert!(t.warnings[0].contains("1 events have negative durations"));
        assert!(
            t.warnings[1].contains("1 events lie more than"),
            "{:?}",
            t.warnings
        );
        assert!(t.span().unwrap().1 < 10_000);
    }

    #[test]
    fn one_pass_nesting_equals_nesting_each_thread_apart() {
        // Spans of three threads of two processes, interleaved in start order, nested,
        // touching, overlapping without nesting, and of equal starts; operators, runtime
        // calls, annotations and Python frames, so that what the pass gathers is checked too.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let threads = [(1, 10), (1, 11), (2, 10)];
        let kinds = [
            HostKind::CpuOp,
            HostKind::Runtime,
            HostKind::Annotation,
            HostKind::Python,
        ];
        // Names 0-3; name 1 is a step marker (number 7).
        let step_numbers = [None, Some(7), None, None];
        let mut spans: Vec<HostSpan> = (0..3000)
            .map(|k| {
                let (pid, tid) = threads[next(3) as usize];
                let start = next(5000) as i64;
                let end = start + next(400) as i64;
                let kind = kinds[next(4) as usize];
                HostSpan {
                    link: if kind == HostKind::Runtime && k % 5 != 0 {
                        k + 1
                    } else {
                        0
                    },
                    ..HostSpan::new(kind, pid, tid, start, end, next(4) as StrId)
                }
            })
            .collect();
        spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
        let got = Trace::nest(&mut spans, &step_numbers);
        // Each thread's spans apart, each nested with a stack of its own.
        let mut launches = Vec::new();
        for (key, list) in &got.threads {
            let want: Vec<u32> = (0..spans.len() as u32)
                .filter(|&i| (spans[i as usize].pid, spans[i as usize].tid) == *key)
                .collect();
            assert_eq!(list, &want, "spans of {key:?}");
            let calls: Vec<u32> = want
                .iter()
                .copied()
                .filter(|&i| matches!(spans[i as usize].kind, HostKind::Runtime | HostKind::Driver))
                .collect();
            assert!(
                got.calls.contains(&(*key, calls)),
                "calls of {key:?}: {:?}",
                got.calls
            );
            let mut stack: Vec<u32> = Vec::new();
            for &i in &want {
                let s = spans[i as usize];
                while let Some(&top) = stack.last() {
                    let t = &spans[top as usize];
                    if t.end <= s.start || t.end < s.end {
                        stack.pop();
                    } else {
                        break;
                    }
                }
                assert_eq!(s.parent, stack.last().copied().unwrap_or(NONE), "span {i}");
                assert_eq!(s.depth as usize, stack.len(), "span {i}");
                stack.push(i);
                if s.kind == HostKind::Runtime && s.correlation() != 0 {
                    // The operators around a call, walked up from it as `enclosing` and
                    // `outermost_cpu_op` do.
                    let (mut inner, mut outer, mut up) = (NONE, NONE, s.parent);
                    while up != NONE {
                        if spans[up as usize].kind == HostKind::CpuOp {
                            inner = if inner == NONE { up } else { inner };
                            outer = up;
                        }
                        up = spans[up as usize].parent;
                    }
                    launches.push((s.correlation(), i, inner, outer));
                }
            }
        }
        let keys: Vec<(i64, i64)> = got.threads.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, vec![(1, 10), (1, 11), (2, 10)]);
        assert!(spans.iter().any(|s| s.depth >= 2), "the test nests");
        // The launch calls in span order, each with its operator.
        launches.sort_by_key(|l| l.1);
        assert_eq!(got.launches, launches);
        assert!(
            launches.iter().any(|l| l.2 != NONE && l.3 != l.2),
            "some calls are inside nested operators"
        );
        let markers: Vec<Step> = spans
            .iter()
            .filter(|s| matches!(s.kind, HostKind::Annotation | HostKind::CpuOp) && s.name == 1)
            .map(|s| Step {
                number: 7,
                start: s.start,
                end: s.end,
            })
            .collect();
        assert!(!markers.is_empty());
        assert_eq!(got.steps, markers);
        let python: Vec<bool> = (0..4)
            .map(|n| {
                spans
                    .iter()
                    .any(|s| s.kind == HostKind::Python && s.name == n)
            })
            .collect();
        assert_eq!(got.python_names, python);
    }

    #[test]
    fn nesting_and_links() {
        let mut t = Trace::default();
        let op = t.strings.intern("aten::copy_");
        let rt = t.strings.intern("cudaMemcpyAsync");
        let span = |kind, start, end, name, corr| HostSpan {
            link: corr,
            ..HostSpan::new(kind, 1, 1, start, end, name)
        };
        t.host_spans.push(span(HostKind::Runtime, 20, 30, rt, 7));
        t.host_spans.push(span(HostKind::CpuOp, 10, 100, op, 0));
        t.gpu_ops.push(GpuOp {
            correlation: 7,
            bytes: 8,
            direction: CopyDirection::HtoD,
            src_kind: MemKind::Pageable,
            dst_kind: MemKind::Device,
            ..GpuOp::new(GpuOpKind::Memcpy, 0, 7, 40, 50, 0)
        });
        t.finish();
        assert_eq!(t.host_spans[0].kind, HostKind::CpuOp);
        assert_eq!(t.host_spans[1].parent, 0);
        assert_eq!(t.host_spans[1].depth, 1);
        assert_eq!(t.index.op_launch, vec![1]);
        assert_eq!(t.index.op_cpu_op, vec![0]);
        assert_eq!(t.index.op_outer_cpu_op, vec![0]);
    }

    #[test]
    fn external_id_links_when_the_runtime_call_is_missing() {
        let mut t = Trace::default();
        let op = t.strings.intern("aten::mm");
        t.host_spans.push(HostSpan {
            link: 42,
            ..HostSpan::new(HostKind::CpuOp, 1, 1, 0, 100, op)
        });
        t.gpu_ops.push(GpuOp {
            correlation: 99,
            external_id: 42,
            ..GpuOp::new(GpuOpKind::Kernel, 0, 7, 150, 160, 0)
        });
        t.finish();
        assert_eq!(t.index.op_launch, vec![NONE]);
        assert_eq!(t.index.op_cpu_op, vec![0]);
    }
}
