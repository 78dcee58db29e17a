//! rocmProfileData (RPD) captures: the SQLite database AMD's `rpd_tracer` writes
//! (`runTracer.sh -o trace.rpd python train.py`; <https://github.com/ROCm/rocmProfileData>),
//! the ROCm counterpart of an Nsight Systems export. Its tables: `rocpd_string` (every
//! name, interned), `rocpd_api` (HIP API calls, and `UserMarker` rows for roctx ranges and
//! PyTorch's autograd ranges, text in `args`), `rocpd_op` (GPU work: `gpuId`, `queueId`,
//! `start`, `end`, a description and an op type), `rocpd_api_ops` (which call asked for which
//! op), `rocpd_kernelapi` (launch geometry) and `rocpd_copyapi` (copy sizes), with
//! `rocpd_metadata` holding the schema version.
//!
//! What the tracer writes and what it means, from its source (`rpd_tracer/`):
//! - Timestamps are `CLOCK_MONOTONIC` nanoseconds (the tracer shifts roctracer's and CUPTI's
//!   clocks onto it): one timeline for calls and ops, with no epoch.
//! - Op types: `KernelExecution` and `Task` (a kernel, the latter run from a HIP graph),
//!   `CopyHostToDevice` / `CopyDeviceToHost` / `CopyDeviceToDevice` / ..., `FillBuffer` (a
//!   memset); from a CUDA capture `Kernel` / `ConcurrentKernel`, `Memcpy`, `Memset`. Markers
//!   are not logged.
//! - `rocpd_copyapi.pinned` is never set by the tracer (always 0): the host side of a copy is
//!   read as host memory of unknown pageability, not as pageable.
//! - Launch geometry: `hipLaunchKernel`-style calls record blocks and threads per block; the
//!   `hipExtModuleLaunchKernel` / `hipHccModuleLaunchKernel` calls record the global work size
//!   in work-items, turned into blocks here. Other calls' geometry is not read.
//! - The tracer logs its own work as API rows (`hcc_activity_callback`, `*::writeRows`,
//!   `rpdflush`, `run_to_completion`): kept out of the model, counted.
//! - `rocpd_monitor` (clock and power samples from rocm-smi) is not read: its rows are counted
//!   in a note.

use crate::error::LoadError;
use crate::model::*;
use rusqlite::{Connection, OpenFlags};
use rustc_hash::FxHashMap;
use std::path::Path;

/// The format.
pub static FORMAT: SourceFormat = SourceFormat {
    id: "rpd",
    name: "rocmProfileData (RPD) capture",
    input: "SQLite",
    records: "rows",
    records_gpu_work: true,
    clock_origin: None,
};

/// The reader: the database is opened in place, read-only.
pub static READER: super::Reader = super::Reader {
    format: &FORMAT,
    is_applicable: super::sqlite::is_sqlite,
    input: super::Input::Database {
        owns,
        wants: "a rocmProfileData capture (no rocpd_api, rocpd_op and rocpd_string tables)",
        open: read_named,
    },
};

/// Whether a database with these tables is an RPD capture.
pub fn owns(has: &dyn Fn(&str) -> bool) -> bool {
    ["rocpd_api", "rocpd_op", "rocpd_string"]
        .iter()
        .all(|t| has(t))
}

/// Reads an RPD capture at `path`, known to the user as `source`, into a finished trace.
pub fn parse(path: &Path) -> Result<Trace, LoadError> {
    read_named(path, path.display().to_string()).map(Parsed::finish)
}

/// API rows the tracer writes about its own work.
fn tracer_overhead(name: &str) -> bool {
    matches!(
        name,
        "hcc_activity_callback" | "rpdflush" | "run_to_completion"
    ) || name.ends_with("::writeRows")
}

/// A `UserMarker` range's kind: a framework operator when its text is an operator's name
/// (`aten::mm`, `c10d::allreduce_`: PyTorch's autograd ranges), else a user annotation.
fn marker_kind(text: &str) -> HostKind {
    let op = text.split_once("::").is_some_and(|(ns, rest)| {
        !ns.is_empty()
            && !rest.is_empty()
            && ns.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !text.contains(char::is_whitespace)
    });
    if op {
        HostKind::CpuOp
    } else {
        HostKind::Annotation
    }
}

/// What an op type names: the kind of GPU work, and a copy's direction.
fn op_kind(op_type: &str) -> Option<(GpuOpKind, CopyDirection)> {
    let d = CopyDirection::Unknown;
    Some(match op_type {
        "KernelExecution" | "Task" | "Kernel" | "ConcurrentKernel" => (GpuOpKind::Kernel, d),
        "FillBuffer" | "Memset" => (GpuOpKind::Memset, d),
        "CopyHostToDevice" => (GpuOpKind::Memcpy, CopyDirection::HtoD),
        "CopyDeviceToHost" => (GpuOpKind::Memcpy, CopyDirection::DtoH),
        "CopyDeviceToDevice" => (GpuOpKind::Memcpy, CopyDirection::DtoD),
        "CopyHostToHost" => (GpuOpKind::Memcpy, CopyDirection::HtoH),
        "CopyPeerToPeer" | "CopyDeviceToDevicePeer" => (GpuOpKind::Memcpy, CopyDirection::PtoP),
        "Memcpy" => (GpuOpKind::Memcpy, d),
        _ => return None,
    })
}

/// A copy's memory on each side, as far as the capture says (see the module's notes on
/// `pinned`).
fn copy_kinds(d: CopyDirection) -> (MemKind, MemKind) {
    match d {
        CopyDirection::HtoD => (MemKind::Host, MemKind::Device),
        CopyDirection::DtoH => (MemKind::Device, MemKind::Host),
        CopyDirection::DtoD | CopyDirection::PtoP => (MemKind::Device, MemKind::Device),
        CopyDirection::HtoH => (MemKind::Host, MemKind::Host),
        CopyDirection::Unknown => (MemKind::Unknown, MemKind::Unknown),
    }
}

/// Blocks per grid dimension from what a launch call records: blocks for the
/// `hipLaunchKernel` family, work-items for the module launches that take a global size.
fn blocks(api: &str, grid: u32, block: u32) -> Option<u32> {
    match api {
        "hipExtModuleLaunchKernel" | "hipHccModuleLaunchKernel" => {
            (block > 0).then(|| grid.div_ceil(block))
        }
        a if a.contains("LaunchKernel") || a.starts_with("hipLaunchCooperativeKernel") => {
            Some(grid)
        }
        _ => None,
    }
}

fn sql_err(source: &str) -> impl Fn(rusqlite::Error) -> LoadError + '_ {
    move |e| LoadError::NotATrace {
        path: source.to_string(),
        why: format!("SQLite error: {e}"),
    }
}

/// [`parse`] of a database at `path` that the user knows as `source`, before the trace is
/// finished.
pub fn read_named(path: &Path, source: String) -> Result<Parsed, LoadError> {
    if let Some(why) = super::sqlite::cut_short(path) {
        return Err(LoadError::Cut { path: source, why });
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(super::sqlite::uri_path(path), flags).map_err(|e| {
        LoadError::NotATrace {
            path: source.clone(),
            why: format!("cannot open as SQLite: {e}"),
        }
    })?;
    let err = sql_err(&source);
    let tables = super::sqlite::table_names(&conn).map_err(&err)?;
    let has = |t: &str| tables.iter().any(|x| x == t);
    if !owns(&has) {
        return Err(LoadError::NotATrace {
            path: source.clone(),
            why: "an SQLite database, but not a rocmProfileData capture (no rocpd_api, rocpd_op and rocpd_string tables)".into(),
        });
    }
    let mut trace = Trace {
        source: source.clone(),
        ..Default::default()
    };
    trace.strings.intern("");
    trace.meta.format = Some(&FORMAT);
    trace.stats.bytes_total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    trace.stats.bytes_parsed = trace.stats.bytes_total;
    trace.stats.tables = tables.clone();
    let mut rows = 0u64;

    let mut version = String::from("no schema_version");
    if has("rocpd_metadata") {
        let mut st = conn
            .prepare("SELECT value FROM rocpd_metadata WHERE tag = 'schema_version'")
            .map_err(&err)?;
        let mut q = st.query([]).map_err(&err)?;
        if let Some(r) = q.next().map_err(&err)? {
            let v: String = r.get(0).map_err(&err)?;
            version = format!("schema_version {v}");
        }
    }
    trace.meta.format_version = version;

    // Strings by id: names, kernel names, marker texts.
    let mut strings: FxHashMap<i64, String> = FxHashMap::default();
    {
        let mut st = conn
            .prepare("SELECT id, string FROM rocpd_string")
            .map_err(&err)?;
        let mut q = st.query([]).map_err(&err)?;
        while let Some(r) = q.next().map_err(&err)? {
            let id: i64 = r.get(0).map_err(&err)?;
            let text: Option<String> = r.get(1).map_err(&err)?;
            strings.insert(id, text.unwrap_or_default());
            rows += 1;
        }
    }
    let text = |id: i64| strings.get(&id).map(String::as_str).unwrap_or("");

    // API calls: HIP calls as runtime spans, markers as operators or annotations.
    let mut api_name: FxHashMap<i64, StrId> = FxHashMap::default();
    let mut overhead = 0u64;
    {
        let mut st = conn
            .prepare("SELECT id, pid, tid, start, \"end\", apiName_id, args_id FROM rocpd_api")
            .map_err(&err)?;
        let mut q = st.query([]).map_err(&err)?;
        while let Some(r) = q.next().map_err(&err)? {
            rows += 1;
            let id: i64 = r.get(0).map_err(&err)?;
            let (pid, tid): (i64, i64) = (r.get(1).map_err(&err)?, r.get(2).map_err(&err)?);
            let (start, end): (i64, i64) = (r.get(3).map_err(&err)?, r.get(4).map_err(&err)?);
            let name = text(r.get(5).map_err(&err)?);
            if tracer_overhead(name) {
                overhead += 1;
                continue;
            }
            let (kind, shown) = if name == "UserMarker" {
                let t = text(r.get(6).map_err(&err)?);
                (marker_kind(t), t)
            } else {
                (HostKind::Runtime, name)
            };
            let sid = trace.strings.intern(shown);
            api_name.insert(id, trace.strings.intern(name));
            trace.host_spans.push(HostSpan {
                link: if kind == HostKind::Runtime {
                    id.max(0) as u64
                } else {
                    0
                },
                ..HostSpan::new(kind, pid, tid, start, end, sid)
            });
        }
    }

    // Which call asked for which op.
    let mut api_of: FxHashMap<i64, i64> = FxHashMap::default();
    if has("rocpd_api_ops") {
        let mut st = conn
            .prepare("SELECT api_id, op_id FROM rocpd_api_ops")
            .map_err(&err)?;
        let mut q = st.query([]).map_err(&err)?;
        while let Some(r) = q.next().map_err(&err)? {
            rows += 1;
            api_of.insert(r.get(1).map_err(&err)?, r.get(0).map_err(&err)?);
        }
    }
    // Launch geometry and copy sizes, by the call that recorded them.
    let mut geometry: FxHashMap<i64, KernelInfo> = FxHashMap::default();
    if has("rocpd_kernelapi") {
        let mut st = conn
            .prepare("SELECT api_ptr_id, gridX, gridY, gridZ, workgroupX, workgroupY, workgroupZ, groupSegmentSize FROM rocpd_kernelapi")
            .map_err(&err)?;
        let mut q = st.query([]).map_err(&err)?;
        while let Some(r) = q.next().map_err(&err)? {
            rows += 1;
            let api: i64 = r.get(0).map_err(&err)?;
            let mut v = [0u32; 7];
            for (k, x) in v.iter_mut().enumerate() {
                let n: Option<i64> = r.get(k + 1).map_err(&err)?;
                *x = n.unwrap_or(0).clamp(0, u32::MAX as i64) as u32;
            }
            let call = api_name.get(&api).map_or("", |&s| trace.strings.get(s));
            let grid = [
                blocks(call, v[0], v[3]),
                blocks(call, v[1], v[4]),
                blocks(call, v[2], v[5]),
            ];
            if let [Some(x), Some(y), Some(z)] = grid {
                geometry.insert(
                    api,
                    KernelInfo {
                        grid: [x, y, z],
                        block: [v[3], v[4], v[5]],
                        shared_mem: v[6],
                        geometry: true,
                        ..KernelInfo::default()
                    },
                );
            }
        }
    }
    let mut copy_bytes: FxHashMap<i64, u64> = FxHashMap::default();
    if has("rocpd_copyapi") {
        let mut st = conn
            .prepare("SELECT api_ptr_id, size FROM rocpd_copyapi")
            .map_err(&err)?;
        let mut q = st.query([]).map_err(&err)?;
        while let Some(r) = q.next().map_err(&err)? {
            rows += 1;
            let size: Option<i64> = r.get(1).map_err(&err)?;
            copy_bytes.insert(r.get(0).map_err(&err)?, size.unwrap_or(0).max(0) as u64);
        }
    }

    // GPU work.
    let mut unknown: std::collections::BTreeMap<String, u64> = Default::default();
    let mut with_geometry = 0u64;
    {
        let mut st = conn
            .prepare("SELECT id, gpuId, queueId, start, \"end\", description_id, opType_id FROM rocpd_op")
            .map_err(&err)?;
        let mut q = st.query([]).map_err(&err)?;
        while let Some(r) = q.next().map_err(&err)? {
            rows += 1;
            let id: i64 = r.get(0).map_err(&err)?;
            let (gpu, queue): (i64, i64) = (r.get(1).map_err(&err)?, r.get(2).map_err(&err)?);
            let (start, end): (i64, i64) = (r.get(3).map_err(&err)?, r.get(4).map_err(&err)?);
            let description = text(r.get(5).map_err(&err)?);
            let op_type = text(r.get(6).map_err(&err)?);
            let Some((kind, direction)) = op_kind(op_type) else {
                *unknown.entry(op_type.to_string()).or_default() += 1;
                continue;
            };
            let api = api_of.get(&id).copied();
            let name = match kind {
                GpuOpKind::Kernel if !description.is_empty() => description.to_string(),
                GpuOpKind::Memcpy => {
                    let (s, d) = copy_kinds(direction);
                    format!(
                        "Memcpy {} ({} -> {})",
                        direction.label(),
                        s.label(),
                        d.label()
                    )
                }
                _ => op_type.to_string(),
            };
            let (src_kind, dst_kind) = copy_kinds(direction);
            let kernel = match kind {
                GpuOpKind::Kernel => {
                    let k = api.and_then(|a| geometry.get(&a)).copied();
                    with_geometry += u64::from(k.is_some());
                    Some(k.unwrap_or_default())
                }
                _ => None,
            };
            let op = GpuOp {
                correlation: api.unwrap_or(0).max(0) as u64,
                bytes: api.and_then(|a| copy_bytes.get(&a)).copied().unwrap_or(0),
                direction,
                src_kind,
                dst_kind,
                kernel,
                ..GpuOp::new(
                    kind,
                    gpu.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                    queue,
                    start,
                    end,
                    trace.strings.intern(&name),
                )
            };
            trace.gpu_ops.push(op);
        }
    }
    let mut monitor = 0i64;
    if has("rocpd_monitor") {
        monitor = conn
            .query_row("SELECT count(*) FROM rocpd_monitor", [], |r| r.get(0))
            .map_err(&err)?;
    }
    trace.stats.events_total = rows;
    if overhead > 0 {
        trace
            .stats
            .skipped
            .push(("the tracer's own calls".into(), overhead));
    }
    for (op_type, n) in &unknown {
        trace.warnings.push(format!(
            "{n} GPU ops of type {op_type:?} are not understood and were not read"
        ));
    }
    if monitor > 0 {
        trace.stats.notes.push(format!(
            "rocpd_monitor's {monitor} clock and power samples are not read"
        ));
    }
    trace.name_api_calls();
    let declare = move |_: &mut Trace, capture: &mut Capture| {
        capture.launch_geometry = with_geometry > 0;
        capture.api_calls = true;
        capture.no_cpu_data = "this RPD capture has no framework operators: for a PyTorch program, record with autograd ranges (the tracer's UserMarker rows) or use the PyTorch profiler".into();
    };
    Ok(Parsed {
        trace,
        declare: Box::new(declare),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_with_an_operator_name_are_operators() {
        assert_eq!(marker_kind("aten::mm"), HostKind::CpuOp);
        assert_eq!(marker_kind("c10d::allreduce_"), HostKind::CpuOp);
        assert_eq!(marker_kind("forward pass"), HostKind::Annotation);
        assert_eq!(marker_kind("::x"), HostKind::Annotation);
        assert_eq!(marker_kind("epoch 1 :: step"), HostKind::Annotation);
    }

    #[test]
    fn module_launches_record_work_items() {
        assert_eq!(blocks("hipLaunchKernel", 2, 128), Some(2));
        assert_eq!(blocks("hipExtModuleLaunchKernel", 1792, 256), Some(7));
        assert_eq!(blocks("hipExtModuleLaunchKernel", 1, 0), None);
        assert_eq!(blocks("hipMemcpyAsync", 1, 1), None);
    }
}
