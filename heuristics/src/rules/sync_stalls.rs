//! Short GPU gaps after host synchronisations: the host blocked in a synchronising call
//! (`aten::nonzero` under a boolean-mask index, `.item()`, `.cpu()`, a pageable copy), the
//! GPU ran out of queued work while it waited, and every kernel after it then waited for its
//! own launch. Each such gap is below the idle-gap threshold (the idle_gaps rule names the
//! longer ones) and would read as launch overhead, but faster launches (CUDA graphs) cannot
//! remove it: the sync empties the queue, and a graph cannot capture a synchronisation.
//!
//! The starved kernels come from [`crate::starved`]; the gaps of those whose queue a sync
//! drained are grouped by the operator that synchronised (outermost and innermost) and the
//! user's Python frame around it. Reported from 3% of the window, like launch_bound.
//!
//! A loop that synchronises after each call (`p.grad.norm().item()` per parameter) has its
//! kernels wait for their launch while the host synchronises and comes back: those waits are
//! grouped by that sync with the operator before it ([`crate::starved::Starved::read_by`]).
//!
//! A sync that reads a true or false (`aten::is_nonzero` or `aten::item` of a bool: Python's
//! `if t.all():`, `assert`, torch.distributions' argument validation) is a host check: the
//! comparisons and all/any reductions just before it on the thread exist only to give the host
//! that answer, so their kernels are charged to the check with the gaps it causes.

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Finding, Instance, Row, fmt_ns, metrics};
use crate::names::span_name;
use std::collections::BTreeMap;
use tracehound_parsers::{HostKind, NONE};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "sync_stalls";

/// The rule.
pub struct SyncStalls;

/// Drained idle, as a share of the window, from which the rule reports (launch_bound's).
const MIN_SHARE: f64 = 0.03;

/// One synchronising place: the operators around the sync call and the Python frame.
#[derive(Debug, Default)]
struct Place {
    syncs: std::collections::BTreeSet<u32>,
    gaps: u64,
    idle_ns: i64,
    frame: Option<String>,
    worst: (i64, i64, i64),
    /// The operators of the host checks read here (the syncing operators too), for their
    /// kernel time.
    check_ops: std::collections::BTreeSet<u32>,
    /// The first check's operators, in order, for the text.
    check_chain: Option<String>,
    /// Kernel time of `check_ops` in the window, ns.
    check_ns: i64,
    /// The operators whose result this sync reads right after them, where the gaps are a
    /// read-back loop's ([`crate::starved::Starved::read_by`]), not a drain's.
    producers: std::collections::BTreeSet<String>,
}

impl Place {
    /// Counts starved kernel `s`'s gap here, keeping the longest as the worst.
    fn add_gap(&mut self, t: &tracehound_parsers::Trace, s: &crate::starved::Starved) {
        self.gaps += 1;
        self.idle_ns += s.gap_ns;
        if s.gap_ns > self.worst.1 {
            self.worst = (s.idle_from(t), s.gap_ns, i64::from(s.op));
        }
    }
}

/// Operators whose result is a predicate: a comparison, a test per element, or a reduction of
/// booleans (names without the `aten::` prefix).
const PREDICATES: &[&str] = &[
    "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
    "isclose", "signbit", "all", "any", "_is_all_true", "_is_any_true", "logical_not",
    "logical_and", "logical_or", "logical_xor",
];

/// Operators that pass booleans on when their input is one (a view, or a bitwise operator).
const ON_BOOLS: &[&str] = &[
    "reshape", "view", "flatten", "squeeze", "unsqueeze", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "__and__", "__or__", "__invert__",
];

/// Operators whose sync is the host reading a tensor's value.
const READS: &[&str] = &[
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::is_nonzero",
    "aten::tolist",
    "aten::to ",
    "aten::_to_copy",
    "aten::copy_",
    "aten::cpu",
];

/// How many operators before a sync are searched for its check: a check is a few operators.
const CHECK_LOOKBACK: usize = 16;

/// The host check a sync reads, outermost operators in order: the run of predicate operators
/// just before `outer` on its thread, when `outer` reads a boolean; empty otherwise.
fn check_chain(t: &tracehound_parsers::Trace, outer: u32) -> Vec<u32> {
    let Some(s) = t.host_spans.get(outer as usize) else {
        return Vec::new();
    };
    let reads_bool = matches!(
        t.str(s.name),
        "aten::is_nonzero" | "aten::item" | "aten::_local_scalar_dense"
    ) && t.input_types(outer).first().map(String::as_str) == Some("bool");
    if !reads_bool {
        return Vec::new();
    }
    let spans = t.thread_spans((s.pid, s.tid));
    let pos = spans.partition_point(|&i| t.host_spans[i as usize].start < s.start);
    let mut chain = Vec::new();
    let mut seen = 0;
    for &k in spans[..pos].iter().rev() {
        let h = &t.host_spans[k as usize];
        // Python frames and runtime calls between the operators, and operators inside others,
        // are passed over: the check is a run of outermost operators.
        if h.kind != HostKind::CpuOp || h.end > s.start || t.outermost_cpu_op(k) != k {
            continue;
        }
        seen += 1;
        let name = t.str(h.name);
        let bare = name.strip_prefix("aten::").unwrap_or(name);
        let on_bool = ON_BOOLS.contains(&bare)
            && t.input_types(k).first().map(String::as_str) == Some("bool");
        if !(PREDICATES.contains(&bare) || on_bool) || seen > CHECK_LOOKBACK {
            break;
        }
        chain.push(k);
    }
    chain.reverse();
    // A check computes something: a run of views alone is not one.
    if !chain.iter().any(|&k| {
        let n = t.str(t.host_spans[k as usize].name);
        PREDICATES.contains(&n.strip_prefix("aten::").unwrap_or(n))
    }) {
        return Vec::new();
    }
    chain
}

impl Rule for SyncStalls {
    fn needs_whole_timeline(&self) -> bool {
        true
    }

    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "short GPU gaps after a host synchronisation drained the queue, by the operator and line that synchronised"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let mut out = Vec::new();
        for dev in cx.starved() {
            let d = dev.device;
            let mut places: BTreeMap<String, Place> = BTreeMap::new();
            let (mut total, mut n) = (0i64, 0u64);
            let mut syncs = std::collections::BTreeSet::new();
            let handed = super::handed(cx);
            // The waits after the syncs of Python numbers copied to the device are
            // constant_uploads', whose remedy (pass the number) removes the copy and its sync.
            let mut uploads_ns = 0i64;
            for s in dev.drained() {
                if handed.to_uploads(d, s.op) {
                    uploads_ns += s.gap_ns;
                    continue;
                }
                let call = s.drained_by;
                let outer = t.outermost_cpu_op(call);
                let p = places.entry(sync_label(t, call)).or_default();
                if p.frame.is_none() {
                    p.frame = t.user_frame(call).map(str::to_string);
                }
                if p.syncs.insert(call) && outer != NONE {
                    let chain = check_chain(t, outer);
                    if !chain.is_empty() {
                        if p.check_chain.is_none() {
                            p.check_chain = Some(
                                chain
                                    .iter()
                                    .map(|&k| span_name(t, k, "").to_string())
                                    .collect::<Vec<_>>()
                                    .join(" → "),
                            );
                        }
                        p.check_ops.extend(chain);
                        p.check_ops.insert(outer);
                    }
                }
                syncs.insert(call);
                p.add_gap(t, s);
                total += s.gap_ns;
                n += 1;
            }
            // A loop that synchronises after each call: the waits before the kernels of the
            // operator just before each sync are that sync's cost, kept with the operator
            // (`read_by` is only set where one launched the kernel).
            for s in dev.read_back() {
                let call = s.read_by;
                let producer = t.index.op_outer_cpu_op[s.op as usize];
                let p = places
                    .entry(format!("read by {}", sync_label(t, call)))
                    .or_default();
                p.producers.insert(span_name(t, producer, "").to_string());
                if p.frame.is_none() {
                    p.frame = t
                        .user_frame(producer)
                        .or_else(|| t.user_frame(call))
                        .map(str::to_string);
                }
                p.syncs.insert(call);
                syncs.insert(call);
                p.add_gap(t, s);
                total += s.gap_ns;
                n += 1;
            }
            // The checks' kernels, in the window: one pass over the device's work, and only
            // when a check was found.
            let checked: std::collections::BTreeSet<u32> = places
                .values()
                .flat_map(|p| p.check_ops.iter().copied())
                .collect();
            if !checked.is_empty() {
                let mut by_op: BTreeMap<u32, i64> = BTreeMap::new();
                for &i in t.device_ops(d) {
                    let op = &t.gpu_ops[i as usize];
                    if op.start < w.start || op.start >= w.end || !op.is_work() {
                        continue;
                    }
                    let outer = t.index.op_outer_cpu_op.get(i as usize).copied().unwrap_or(NONE);
                    if checked.contains(&outer) {
                        *by_op.entry(outer).or_default() += op.dur();
                    }
                }
                for p in places.values_mut() {
                    p.check_ns = p.check_ops.iter().filter_map(|k| by_op.get(k)).sum();
                }
            }
            let checks: i64 = places.values().map(|p| p.check_ns).sum();
            let drained = total;
            let total = drained + checks;
            if w.share(total) < MIN_SHARE {
                continue;
            }
            let mut ranked: Vec<(String, Place)> = places.into_iter().collect();
            ranked.sort_by(|a, b| {
                (b.1.idle_ns + b.1.check_ns)
                    .cmp(&(a.1.idle_ns + a.1.check_ns))
                    .then(a.0.cmp(&b.0))
            });
            let (top_label, top) = &ranked[0];
            let at = top
                .frame
                .as_deref()
                .map(|f| format!(" at {f}"))
                .unwrap_or_default();
            let steps = w.steps_in(t);
            // "Per step" only where the window has steps.
            let rate = if steps == 0 {
                format!("{} syncs", top.syncs.len())
            } else {
                format!(
                    "{} syncs per step",
                    fmt_count(top.syncs.len() as f64 / steps as f64)
                )
            };
            let shown = |label: &str, p: &Place| match &p.check_chain {
                Some(chain) => format!("check {chain} read by {label}"),
                None if !p.producers.is_empty() => {
                    let sync = label.trim_start_matches("read by ");
                    // "read by" where the sync is a read (`.item()`, `.cpu()`, `if t:`);
                    // an operator that synchronises for its own reasons comes after.
                    let reads = READS.iter().any(|r| sync.starts_with(r));
                    format!(
                        "{} {} {sync}",
                        p.producers.iter().cloned().collect::<Vec<_>>().join(", "),
                        if reads { "read by" } else { "then a sync in" }
                    )
                }
                None => label.to_string(),
            };
            let read_back = top_label.starts_with("read by ")
                && !top.producers.is_empty()
                && READS
                    .iter()
                    .any(|r| top_label.trim_start_matches("read by ").starts_with(r));
            let title = match &top.check_chain {
                None if read_back => format!(
                    "GPU {d} idles in a loop that synchronises after each call: {}{at} ({}): {} in {n} short gaps",
                    shown(top_label, top),
                    rate,
                    fmt_ns(total)
                ),
                Some(chain) => format!(
                    "GPU {d} loses {} to host checks: {chain} read by {top_label}{at} ({rate}): {} in the checks' kernels, {} idle in {n} short gaps after the syncs drained the queue",
                    fmt_ns(total),
                    fmt_ns(checks),
                    fmt_ns(drained)
                ),
                None => format!(
                    "GPU {d} idles after host syncs: {} in {n} short gaps after {} syncs that drained the queue, most after {}{at} ({rate})",
                    fmt_ns(total),
                    syncs.len(),
                    shown(top_label, top)
                ),
            };
            let mut evidence = format!(
                "each gap follows a synchronising call on the launching thread that was still blocked when the GPU ran out of work (returned within {} of it): the host then had to launch the next kernels onto an empty queue; gaps ≥ {} are in idle_gaps; launch_bound leaves these out",
                fmt_ns(crate::starved::DRAIN_SLACK_NS),
                fmt_ns(cx.config.gap_threshold_ns)
            );
            let read_ns: i64 = dev.read_back().map(|s| s.gap_ns).sum();
            if read_ns > 0 {
                evidence.push_str(&format!(
                    "; {} of it in a loop that synchronises after each call (the kernels of the operator just before each sync, which waited for their launch while the host synchronised and came back): without the per-call syncs the host would queue the loop's work ahead",
                    fmt_ns(read_ns)
                ));
            }
            if uploads_ns > 0 {
                evidence.push_str(&format!(
                    "; {} more after the syncs of copies of Python numbers to the GPU (see constant_uploads)",
                    fmt_ns(uploads_ns)
                ));
            }
            if checks > 0 {
                evidence.push_str(&format!(
                    "; a host check is the run of comparisons and all/any reductions just before a sync that reads a boolean: their kernels ({}) only tell the host true or false, so they count with the wait",
                    fmt_ns(checks)
                ));
            }
            let mut f = new_finding(cx, ID, Some(d), title, total, Confidence::High, evidence);
            f.breakdown = ranked
                .iter()
                .take(cx.config.max_rows)
                .map(|(label, p)| Row {
                    label: shown(label, p),
                    count: p.syncs.len() as u64,
                    time_ns: p.idle_ns + p.check_ns,
                    bytes: None,
                    python_frame: p.frame.clone(),
                    cause: None,
                    share: Some((p.idle_ns + p.check_ns) as f64 / total.max(1) as f64),
                })
                .collect();
            f.instances = ranked
                .iter()
                .take(cx.config.max_instances)
                .map(|(label, p)| Instance {
                    start_ns: p.worst.0,
                    dur_ns: p.worst.1,
                    offset_ms: w.offset_ms(p.worst.0),
                    what: format!(
                        "GPU idle {} after {label} drained the queue",
                        fmt_ns(p.worst.1)
                    ),
                    cpu_op: Some(label.clone()),
                    python_frame: p.frame.clone(),
                })
                .collect();
            f.advice = if read_back {
                let mut a = read_back_advice(cx.pytorch());
                // What the reading operator itself needs, where it is more than a read.
                let own = advice(top_label.trim_start_matches("read by "), cx.pytorch(), false);
                if let Some(first) = own.first().filter(|x| !x.starts_with("A .item()")) {
                    a.insert(1, first.clone());
                }
                a
            } else {
                advice(
                    top_label.trim_start_matches("read by "),
                    cx.pytorch(),
                    top.check_chain.is_some(),
                )
            };
            f.metrics = metrics([
                ("drained_ns", drained as f64),
                ("check_kernel_ns", checks as f64),
                ("drained_kernels", n as f64),
                ("syncs", syncs.len() as f64),
                ("constant_uploads_ns", uploads_ns as f64),
            ]);
            out.push(f);
        }
        out
    }
}

/// A place's label: the operators around sync `call`, outermost › innermost (one name where
/// they are the same), and its runtime call
/// (`aten::index › aten::nonzero (cudaStreamSynchronize)`); the call alone outside operators.
fn sync_label(t: &tracehound_parsers::Trace, call: u32) -> String {
    let api = t.api_name(t.host_spans[call as usize].name);
    let outer = t.outermost_cpu_op(call);
    let inner = t.enclosing(call, HostKind::CpuOp);
    match (outer, inner) {
        (NONE, _) => api.to_string(),
        (o, i) if i == o || i == NONE => format!("{} ({api})", span_name(t, o, "")),
        (o, i) => format!("{} › {} ({api})", span_name(t, o, ""), span_name(t, i, "")),
    }
}

/// What replaces a host check, where the top sync reads one.
const CHECK_ADVICE: &str = "A check of a GPU tensor in Python (if t.all():, assert, bool(t)) runs its kernels and waits for the GPU on every call. torch.distributions checks its arguments this way by default: pass validate_args=False, or call torch.distributions.Distribution.set_default_validate_args(False) once the code is tested; for your own checks, check every N steps, or use torch._assert_async(cond), which fails on the GPU without a host wait.";

/// What to change where the host reads each result before launching the next call.
fn read_back_advice(pytorch: bool) -> Vec<String> {
    vec![
        if pytorch {
            "Each call's result is read on the host (.item(), .cpu(), .tolist(), a Python if) before the next call is launched, so every iteration pays a launch, a copy and a wait while the GPU idles. Compute all the values in one call and read them once: torch._foreach_norm(tensors) or torch.stack of the results, then one .tolist(); or keep the running value on the GPU (a tensor sum) and read it at the end.".into()
        } else {
            "Each kernel's result is copied back and waited for before the next launch, so every iteration pays a launch, a copy and a wait while the GPU idles: compute all the values in one kernel (or several kernels queued back to back) and copy the results once.".into()
        },
        "CUDA graphs will not help here: a graph cannot capture a read on the host.".into(),
    ]
}

/// A count per step for a title: whole numbers plain, others with one decimal.
fn fmt_count(x: f64) -> String {
    if (x - x.round()).abs() < 0.05 {
        format!("{}", x.round())
    } else {
        format!("{x:.1}")
    }
}

/// What to change, by what synchronised, in the program's terms.
fn advice(label: &str, pytorch: bool, check: bool) -> Vec<String> {
    let has = |s: &str| label.contains(s);
    let mut out = Vec::new();
    if pytorch && check {
        out.push(CHECK_ADVICE.into());
    } else if !pytorch && has("Memcpy") {
        out.push("A blocking cudaMemcpy waits for the GPU to finish the work before it: copy with cudaMemcpyAsync into pinned memory (cudaMallocHost) and wait on an event where the host reads the data, or keep the data on the GPU.".into());
    } else if !pytorch {
        out.push("A synchronising call after launches makes the host wait for the GPU each time, and the GPU then waits for the next launch: work on one stream already runs in order, so synchronise (cudaDeviceSynchronize, cudaStreamSynchronize) only where the host reads a result, and time kernels with events instead.".into());
    } else if has("aten::_unique2") || has("aten::unique_dim") {
        out.push(format!("torch.unique sorts its input (a radix pass per key byte: eight for int64 labels) and waits for the GPU to size its result. {} Where unique's result really is data-dependent, call it once per batch, not per step.", crate::accounting::UNIQUE_COUNT_ADVICE));
    } else if has("aten::repeat_interleave") {
        out.push(crate::starved::REPEAT_INTERLEAVE_ADVICE.into());
    } else if has("aten::nonzero")
        || has("aten::index")
        || has("masked_select")
        || has("unique")
    {
        out.push("A boolean-mask index (x[mask], x[mask] = y), masked_select, nonzero or unique makes the host wait for the GPU to learn the result's size. Keep shapes static: torch.where(mask, a, b) or a multiply by the mask, integer indices computed once, or sort once and split by counts (one wait per batch instead of one per mask).".into());
    } else if has("aten::bincount") {
        out.push("torch.bincount on the GPU reads the input's smallest and largest values on the host (to reject negatives and size its result), two waits a call whatever minlength says: where the number of bins is known, count with torch.zeros(n, dtype=torch.long, device=x.device).index_add_(0, x, torch.ones_like(x)) (or scatter_add_), which never waits; its increments collide when many values share a few bins (slower there than bincount's per-block histograms), so keep bincount for a few dozen classes and weigh its wait against that.".into());
    } else if has("aten::is_nonzero") {
        out.push("if t:, bool(t), assert t or while t on a GPU tensor reads its value, which waits for the GPU: keep the decision on the GPU (torch.where, a multiply by the mask), check every N steps, or use torch._assert_async(t), which fails on the GPU without a host wait.".into());
    } else if has("item") || has("_local_scalar_dense") {
        out.push("A .item(), .tolist() or print of a GPU tensor waits for the GPU: keep the value on the GPU and read it every N steps, or after the step's work is queued.".into());
    } else if has("aten::to") || has("aten::copy_") || has("Memcpy") {
        out.push("A copy to the host (.cpu(), .numpy(), .to('cpu')) waits for the GPU: copy with non_blocking=True into pinned memory and read it later, or keep the data on the GPU.".into());
    } else {
        out.push("A synchronising call after launches makes the host wait for the GPU each time, and the GPU then waits for the next launch: work on one stream already runs in order, so synchronise (torch.cuda.synchronize(), a stream or event sync) only where the host reads a result, and time kernels with events instead.".into());
    }
    out.push("CUDA graphs will not help here: a graph cannot capture a synchronisation, and the queue empties at every sync whatever the launch speed.".into());
    out
}
