//! Nsight Systems SQLite exports (`nsys export --type sqlite`, `nsys profile --export=sqlite`;
//! <https://docs.nvidia.com/nsight-systems/UserGuide/index.html#exporter-sqlite-schema>).
//!
//! Schema versions from 2021 (no metadata table) to 2025 are read: every table is optional and
//! only the columns that exist are selected, so older exports and exports post-processed by
//! other tools (extra tables) load; what is missing is listed in the load notes. TEXT columns
//! are read as bytes and decoded lossily (Windows exports hold codepage text). The file is
//! opened read-only and immutable: SQLite neither writes nor locks it.
//!
//! Mapping: CUPTI kernels, memcpys (`copyKind`, `srcKind`/`dstKind`), memsets and sync records
//! become GPU ops; CUDA runtime calls and NVTX ranges become host spans (NVTX
//! `ProfilerStep#N` ranges mark the steps); `CUDA_GPU_MEMORY_USAGE_EVENTS` become allocator
//! samples with a running reserved total (nsys sees `cudaMalloc`/`cudaFree`, not the caching
//! allocator's own allocations).

use crate::error::LoadError;
use crate::model::*;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use rustc_hash::{FxHashMap, FxHashSet};
use std::borrow::Cow;
use std::path::Path;

/// The format.
pub static FORMAT: SourceFormat = SourceFormat {
    id: "nsys",
    name: "Nsight Systems SQLite export",
    input: "SQLite",
    records: "rows",
    records_gpu_work: true,
    clock_origin: Some("TARGET_INFO_SESSION_START_TIME"),
};

/// The reader: the database is opened in place, read-only.
pub static READER: super::Reader = super::Reader {
    format: &FORMAT,
    is_applicable: super::sqlite::is_sqlite,
    input: super::Input::Database {
        owns,
        wants: "an Nsight Systems export (no StringIds and CUPTI_ACTIVITY_KIND_* / NVTX_EVENTS tables)",
        open: read_named,
    },
};

/// The activity tables an export holds when it traced CUDA or NVTX.
const ACTIVITY: [&str; 6] = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS",
];

/// Whether a database with these tables is an Nsight Systems export: its string table and
/// an activity table, or, for a capture that traced no CUDA, NVTX or OS-runtime activity,
/// the export's own tables (metadata, session start): an export of nothing on the GPU, said
/// so rather than refused.
pub fn owns(has: &dyn Fn(&str) -> bool) -> bool {
    let is_export = [
        "META_DATA_EXPORT",
        "EXPORT_META_DATA",
        "TARGET_INFO_SESSION_START_TIME",
    ]
    .iter()
    .any(|t| has(t));
    has("StringIds") && (ACTIVITY.iter().any(|t| has(t)) || is_export)
}

/// `cudaErrorNotReady` / `CUDA_ERROR_NOT_READY`: what `cudaEventQuery` and `cudaStreamQuery`
/// return while work is still running, a poll's answer, not a failure.
const CUDA_ERROR_NOT_READY: i64 = 600;

struct Db {
    conn: Connection,
    tables: FxHashSet<String>,
    source: String,
    /// The URI the database was opened by, for the readers' own connections.
    uri: String,
}

fn open_flags() -> OpenFlags {
    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX
}

/// Rows per range of a parallel read: a few MB of events, so that many ranges keep every
/// connection busy to the end and the buffers of ranges waiting to be gathered stay small.
const RANGE_ROWS: i64 = 1 << 16;

/// The most ranges a parallel read makes of one table.
const MAX_RANGES: i64 = 1 << 14;

impl Db {
    fn err(&self, e: rusqlite::Error) -> LoadError {
        LoadError::NotATrace {
            path: self.source.clone(),
            why: format!("SQLite error: {e}"),
        }
    }

    fn has(&self, t: &str) -> bool {
        self.tables.contains(t)
    }

    fn columns(&self, table: &str) -> Result<FxHashSet<String>, LoadError> {
        let mut st = self
            .conn
            .prepare(&format!("PRAGMA table_info(\"{table}\")"))
            .map_err(|e| self.err(e))?;
        let cols = st
            .query_map([], |r| r.get::<_, String>(1))
            .map_err(|e| self.err(e))?
            .filter_map(Result::ok)
            .collect();
        Ok(cols)
    }

    /// `wanted...`, with NULL for the columns the table lacks.
    fn select_list(&self, table: &str, wanted: &[&str]) -> Result<String, LoadError> {
        let cols = self.columns(table)?;
        let list: Vec<String> = wanted
            .iter()
            .map(|w| {
                if cols.contains(*w) {
                    format!("\"{w}\"")
                } else {
                    "NULL".to_string()
                }
            })
            .collect();
        Ok(list.join(", "))
    }

    /// Runs `SELECT wanted... FROM table` with NULL for the columns the table lacks, and calls
    /// `f` with each row as optional integers / text.
    fn select(
        &self,
        table: &str,
        wanted: &[&str],
        mut f: impl FnMut(&Row) -> Result<(), LoadError>,
    ) -> Result<(), LoadError> {
        let sql = format!(
            "SELECT {} FROM \"{table}\"",
            self.select_list(table, wanted)?
        );
        let mut st = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        let mut rows = st.query([]).map_err(|e| self.err(e))?;
        while let Some(r) = rows.next().map_err(|e| self.err(e))? {
            f(&Row(r))?;
        }
        Ok(())
    }

    /// Appends to `out` the rows of `table` that `f` keeps, in the order of [`Db::select`]
    /// (rowid order), read by one connection per core, each taking ranges of rowids in turn:
    /// the activity tables of a large export hold millions of rows, and SQLite decodes them
    /// one at a time. A small table, or one without rowids, is read by this connection alone.
    fn select_par<T: Send>(
        &self,
        table: &str,
        wanted: &[&str],
        out: &mut Vec<T>,
        f: impl Fn(&Row) -> Option<T> + Sync,
    ) -> Result<(), LoadError> {
        let list = self.select_list(table, wanted)?;
        let bounds: Option<(i64, i64)> = self
            .conn
            .query_row(
                // Two subqueries: SQLite reads min and max of a rowid from the ends of the
                // table's tree only when each is alone in its query.
                &format!(
                    "SELECT (SELECT min(rowid) FROM \"{table}\"), (SELECT max(rowid) FROM \"{table}\")"
                ),
                [],
                |r| Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?)),
            )
            .ok()
            .and_then(|(lo, hi)| lo.zip(hi));
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        // Rowids are dense in an export; sparse ones (rows deleted by a post-processing tool)
        // make wider ranges rather than millions of empty ones.
        let span = bounds.map_or(0, |(lo, hi)| hi as i128 - lo as i128 + 1);
        let step = (span / MAX_RANGES as i128 + 1).max(RANGE_ROWS as i128);
        let ranges = (span + step - 1) / step;
        let (step, ranges) = (step.min(i64::MAX as i128) as i64, ranges as i64);
        let Some((lo, _)) = bounds.filter(|_| workers > 1 && ranges > 1) else {
            return self.select(table, wanted, |r| {
                out.extend(f(r));
                Ok(())
            });
        };
        let sql =
            format!("SELECT {list} FROM \"{table}\" WHERE rowid BETWEEN ?1 AND ?2 ORDER BY rowid");
        use std::sync::atomic::{AtomicI64, Ordering};
        let next = AtomicI64::new(0);
        let uri = self.uri.as_str();
        // A range's rows go to the gathering thread in a buffer that comes back emptied, so
        // the events are written twice into memory that is already there rather than into
        // fresh pages for every range.
        let pool: std::sync::Mutex<Vec<Vec<T>>> = Default::default();
        type Sent<T> = Result<(i64, Vec<T>), rusqlite::Error>;
        let (tx, rx) = std::sync::mpsc::channel::<Sent<T>>();
        let read = |tx: std::sync::mpsc::Sender<Sent<T>>| {
            let conn = match Connection::open_with_flags(uri, open_flags()) {
                Ok(c) => c,
                Err(e) => return drop(tx.send(Err(e))),
            };
            let mut st = match conn.prepare(&sql) {
                Ok(st) => st,
                Err(e) => return drop(tx.send(Err(e))),
            };
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= ranges {
                    return;
                }
                let from = lo.saturating_add(k.saturating_mul(step));
                let mut buf = pool
                    .lock()
                    .map(|mut p| p.pop())
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                let sent = (|| {
                    let mut rows = st.query([from, from.saturating_add(step - 1)])?;
                    while let Some(r) = rows.next()? {
                        buf.extend(f(&Row(r)));
                    }
                    Ok((k, buf))
                })();
                let failed = sent.is_err();
                if tx.send(sent).is_err() || failed {
                    return;
                }
            }
        };
        std::thread::scope(|s| {
            for _ in 0..workers.min(ranges as usize) {
                let tx = tx.clone();
                s.spawn(|| read(tx));
            }
            drop(tx);
            // In rowid order: a range that comes early waits for those before it.
            let mut waiting: std::collections::BTreeMap<i64, Vec<T>> = Default::default();
            let mut due = 0;
            for sent in &rx {
                let (k, buf) = match sent {
                    Ok(x) => x,
                    Err(e) => {
                        // The readers stop at their next range.
                        next.store(ranges, Ordering::Relaxed);
                        return Err(self.err(e));
                    }
                };
                waiting.insert(k, buf);
                while let Some(mut buf) = waiting.remove(&due) {
                    out.append(&mut buf);
                    if let Ok(mut p) = pool.lock() {
                        p.push(buf);
                    }
                    due += 1;
                }
            }
            Ok(())
        })
    }
}

/// One row of a [`Db::select`]: integers (REAL truncated) and text (TEXT or BLOB, decoded
/// lossily), None for NULL or a value of the other kind.
struct Row<'a, 'r>(&'a rusqlite::Row<'r>);

impl Row<'_, '_> {
    fn i(&self, k: usize) -> Option<i64> {
        match self.0.get_ref(k) {
            Ok(ValueRef::Integer(i)) => Some(i),
            Ok(ValueRef::Real(x)) => Some(x as i64),
            _ => None,
        }
    }
    fn t(&self, k: usize) -> Option<Cow<'_, str>> {
        match self.0.get_ref(k) {
            Ok(ValueRef::Text(b) | ValueRef::Blob(b)) => Some(String::from_utf8_lossy(b)),
            _ => None,
        }
    }
}

/// How the name of a unified-memory migration the program asked for
/// (`cudaMemPrefetchAsync`) ends: `Memcpy HtoD (Managed -> Managed, prefetch)`.
pub const PREFETCH_NAME_TAIL: &str = ", prefetch";

/// `copyKind` of ENUM_CUDA_MEMCPY_OPER.
fn copy_direction(kind: i64) -> CopyDirection {
    match kind {
        1 | 11 => CopyDirection::HtoD,
        2 | 12 => CopyDirection::DtoH,
        8 | 13 => CopyDirection::DtoD,
        9 => CopyDirection::HtoH,
        10 => CopyDirection::PtoP,
        _ => CopyDirection::Unknown,
    }
}

/// `srcKind`/`dstKind` of ENUM_CUDA_MEM_KIND.
fn mem_kind(kind: Option<i64>) -> MemKind {
    match kind {
        Some(0) => MemKind::Pageable,
        Some(1) => MemKind::Pinned,
        Some(2) | Some(3) | Some(5) => MemKind::Device,
        Some(4) | Some(6) => MemKind::Managed,
        _ => MemKind::Unknown,
    }
}

/// A frame that says nothing about the work: the C library, the kernel, the dynamic loader,
/// the Python interpreter, or an unresolved address.
fn plumbing(symbol: &str, module: &str) -> bool {
    let m = module.rsplit('/').next().unwrap_or(module);
    symbol.starts_with("0x")
        || symbol.is_empty()
        || symbol == "_init"
        || symbol.starts_with('[')
        || m.starts_with("libc.so")
        || m.starts_with("libc-")
        || m.starts_with("libpthread")
        || m.starts_with("ld-linux")
        || m.starts_with("libm.so")
        || m.starts_with("python")
        || m.starts_with("libpython")
        || m.contains("kernel")
        || module.is_empty()
}

/// CPU samples (`COMPOSITE_EVENTS`) with their call chains (`SAMPLING_CALLCHAINS`): one
/// frame each, the first that is not plumbing.
fn read_samples(db: &Db, trace: &mut Trace, ids: &FxHashMap<i64, StrId>) -> Result<(), LoadError> {
    let mut st = db
        .conn
        .prepare(
            "SELECT c.id, c.start, c.globalTid, s.stackDepth, s.symbol, s.module \
             FROM COMPOSITE_EVENTS c JOIN SAMPLING_CALLCHAINS s ON s.id = c.id \
             ORDER BY c.id, s.stackDepth",
        )
        .map_err(|e| db.err(e))?;
    let mut rows = st.query([]).map_err(|e| db.err(e))?;
    /// The sample being read: its id, time and thread, the frame chosen so far, and its
    /// innermost frame (the fallback).
    struct Open {
        id: i64,
        ts: i64,
        tid: i64,
        chosen: Option<(StrId, StrId)>,
        innermost: (StrId, StrId),
    }
    let close = |c: Open| {
        let (pid, tid) = split_global_tid(c.tid);
        let (symbol, module) = c.chosen.unwrap_or(c.innermost);
        CpuSample {
            pid,
            tid,
            ts: c.ts,
            symbol,
            module,
        }
    };
    let mut cur: Option<Open> = None;
    let mut out: Vec<CpuSample> = Vec::new();
    while let Some(r) = rows.next().map_err(|e| db.err(e))? {
        let get = |k: usize| r.get::<_, Option<i64>>(k).ok().flatten();
        let (Some(id), Some(ts)) = (get(0), get(1)) else {
            continue;
        };
        let tid = get(2).unwrap_or(0);
        let sym = get(4).and_then(|i| ids.get(&i).copied()).unwrap_or(0);
        let module = get(5).and_then(|i| ids.get(&i).copied()).unwrap_or(0);
        if cur.as_ref().is_some_and(|c| c.id != id)
            && let Some(c) = cur.take()
        {
            out.push(close(c));
        }
        let c = cur.get_or_insert(Open {
            id,
            ts,
            tid,
            chosen: None,
            innermost: (sym, module),
        });
        if c.chosen.is_none() && !plumbing(trace.strings.get(sym), trace.strings.get(module)) {
            c.chosen = Some((sym, module));
        }
    }
    if let Some(c) = cur.take() {
        out.push(close(c));
    }
    out.sort_by_key(|s| (s.pid, s.tid, s.ts));
    trace.cpu_samples = out;
    Ok(())
}

/// The operator an NVTX range stands for when PyTorch emitted it per operator:
/// `aten::linear, seq = 0, op_id = 104` (`--pytorch=autograd-nvtx`) or
/// `aten::addmm, seq = 3, sizes = [[64], [64, 32]]` (`torch.autograd.profiler.emit_nvtx`).
pub fn autograd_op_name(text: &str) -> Option<&str> {
    let (head, rest) = text.split_once(", ")?;
    let tagged =
        rest.starts_with("seq = ") || rest.starts_with("op_id = ") || rest.starts_with("sizes = ");
    (tagged && head.contains("::")).then_some(head)
}

/// Splits an nsys `globalTid` into (pid, tid).
pub fn split_global_tid(g: i64) -> (i64, i64) {
    ((g >> 24) & 0xFF_FFFF, g & 0xFF_FFFF)
}

/// Loads an Nsight Systems SQLite export.
pub fn parse(path: &Path) -> Result<Trace, LoadError> {
    parse_named(path, path.display().to_string())
}

/// [`parse`] of a database at `path` that the user knows as `source` (a `.sqlite.gz` they
/// gave, decompressed to a temporary file): messages and the trace name `source`.
pub fn parse_named(path: &Path, source: String) -> Result<Trace, LoadError> {
    read_named(path, source).map(Parsed::finish)
}

/// [`parse_named`], before the trace is finished.
pub fn read_named(path: &Path, source: String) -> Result<Parsed, LoadError> {
    if let Some(why) = super::sqlite::cut_short(path) {
        return Err(LoadError::Cut { path: source, why });
    }
    let uri = super::sqlite::uri_path(path);
    let conn =
        Connection::open_with_flags(&uri, open_flags()).map_err(|e| LoadError::NotATrace {
            path: source.clone(),
            why: format!("cannot open as SQLite: {e}"),
        })?;
    let mut db = Db {
        conn,
        tables: FxHashSet::default(),
        source: source.clone(),
        uri,
    };
    let tables: Vec<String> = {
        let mut st = db
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .map_err(|e| LoadError::NotATrace {
                path: source.clone(),
                why: format!("not a readable SQLite database: {e}"),
            })?;
        st.query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| db.err(e))?
            .filter_map(Result::ok)
            .collect()
    };
    db.tables = tables.into_iter().collect();
    if !owns(&|t| db.has(t)) {
        return Err(LoadError::NotATrace {
            path: source,
            why: "an SQLite database, but not an Nsight Systems export (no StringIds and CUPTI_ACTIVITY_KIND_* / NVTX_EVENTS tables)".into(),
        });
    }
    let has_activity = ACTIVITY.iter().any(|t| db.has(t));
    let mut clock = crate::timing::Phases::start();
    let mut trace = Trace {
        source: source.clone(),
        ..Default::default()
    };
    trace.meta.format = Some(&FORMAT);
    // Whether the capture asked for CUDA events, and what nsys said about them: an export
    // without CUDA tables from a capture that traced CUDA saw no CUDA call, which is not the
    // same as tracing being off.
    let mut cuda_requested = false;
    if db.has("META_DATA_CAPTURE") {
        db.select("META_DATA_CAPTURE", &["name", "value"], |r| {
            if r.t(0).as_deref() == Some("CAPTURE_EVENT_TYPE") && r.t(1).as_deref() == Some("Cuda")
            {
                cuda_requested = true;
            }
            Ok(())
        })?;
    }
    let mut cuda_said: Vec<String> = Vec::new();
    if db.has("DIAGNOSTIC_EVENT") {
        db.select("DIAGNOSTIC_EVENT", &["text"], |r| {
            if let Some(t) = r.t(0)
                && t.contains("CUDA")
                && !cuda_said.iter().any(|s| s == t.as_ref())
            {
                cuda_said.push(t.trim().to_string());
            }
            Ok(())
        })?;
    }
    let has_cuda = [
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
    ]
    .iter()
    .any(|t| db.has(t));
    let mut no_gpu_data = String::new();
    if !has_cuda && cuda_requested {
        no_gpu_data = format!(
            "the capture traced CUDA (CAPTURE_EVENT_TYPE Cuda) and nsys collected no CUDA event{}: the traced process made no CUDA call nsys saw (the GPU work ran in a process it did not follow, never ran, or CUDA injection failed), so tracing was on and the program is not shown to be CPU-only",
            if cuda_said.is_empty() {
                String::new()
            } else {
                format!(
                    " (its diagnostics: {})",
                    cuda_said
                        .iter()
                        .map(|s| format!("'{s}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    } else if !has_cuda {
        no_gpu_data =
            "the capture did not trace CUDA (record with nsys profile -t cuda,nvtx)".into();
    }
    if !has_activity {
        // Say what the export holds: OS-runtime calls alone are activity too.
        let held = if db.has("OSRT_API") {
            "the export holds no CUDA or NVTX activity, only OS-runtime calls"
        } else {
            "the export holds no CUDA, NVTX or OS-runtime activity"
        };
        trace.warnings.push(if cuda_requested {
            format!("{held}: {no_gpu_data}")
        } else {
            format!(
                "{held}: the capture traced no GPU work (record with nsys profile -t cuda,nvtx)"
            )
        });
    }
    trace.strings.intern("");
    trace.stats.bytes_total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    trace.stats.bytes_parsed = trace.stats.bytes_total;

    // Strings.
    let mut ids: FxHashMap<i64, StrId> = FxHashMap::default();
    db.select("StringIds", &["id", "value"], |r| {
        if let Some(id) = r.i(0) {
            ids.insert(id, trace.strings.intern(r.t(1).as_deref().unwrap_or("")));
        }
        Ok(())
    })?;
    let name_of = |id: Option<i64>| id.and_then(|i| ids.get(&i).copied()).unwrap_or(0);

    // Version.
    let mut version: FxHashMap<String, String> = FxHashMap::default();
    for t in ["META_DATA_EXPORT", "EXPORT_META_DATA"] {
        if db.has(t) {
            db.select(t, &["name", "value"], |r| {
                if let (Some(n), Some(v)) = (r.t(0), r.t(1)) {
                    version.insert(n.into_owned(), v.into_owned());
                }
                Ok(())
            })?;
        }
    }
    trace.meta.format_version = match (
        version.get("EXPORT_PRODUCT_VERSION"),
        version.get("EXPORT_SCHEMA_VERSION"),
    ) {
        (Some(p), Some(s)) => format!("Nsight Systems {p}, schema {s}"),
        (Some(p), None) => format!("Nsight Systems {p}"),
        _ => "old export without a metadata table".into(),
    };
    if db.has("TARGET_INFO_SESSION_START_TIME") {
        db.select("TARGET_INFO_SESSION_START_TIME", &["utcEpochNs"], |r| {
            trace.meta.epoch_offset_ns = r.i(0);
            Ok(())
        })?;
    }

    // The software stack: driver, the CUDA version it supports, the OS, MIG.
    if db.has("TARGET_INFO_SYSTEM_ENV") {
        let stack = &mut trace.meta.stack;
        db.select("TARGET_INFO_SYSTEM_ENV", &["name", "value"], |r| {
            let v = r.t(1).map(Cow::into_owned).filter(|v| !v.is_empty());
            match r.t(0).as_deref().unwrap_or("") {
                "NvDriverVersion" => stack.driver = v.map(|v| driver_version(&v)),
                "CudaDriverVersion" => {
                    stack.driver_cuda = v.and_then(|v| v.parse().ok()).filter(|&v| v > 0)
                }
                "OsDescription" => stack.os = v,
                "GpuInfo" => {
                    if let Some(v) = v {
                        let compact: String = v.split_whitespace().collect();
                        if compact.contains("\"MigEnabled\":true") {
                            stack.mig = Some(true);
                        } else if compact.contains("\"MigEnabled\":false") {
                            stack.mig = Some(false);
                        }
                    }
                }
                _ => {}
            }
            Ok(())
        })?;
    }

    // GPUs: TARGET_INFO_GPU (2022+), TARGET_INFO_CUDA_GPU details in the 2021 schema.
    if db.has("TARGET_INFO_GPU") {
        db.select(
            "TARGET_INFO_GPU",
            &[
                "id",
                "deviceId",
                "name",
                "smCount",
                "totalMemory",
                "computeMajor",
                "computeMinor",
                "cuDevice",
            ],
            |r| {
                let id = r.i(7).or(r.i(0)).or(r.i(1)).unwrap_or(0) as i32;
                trace.meta.gpus.push(GpuInfo {
                    id,
                    name: r.t(2).unwrap_or_default().into_owned(),
                    compute_capability: match (r.i(5), r.i(6)) {
                        (Some(a), Some(b)) => Some((a as u32, b as u32)),
                        _ => None,
                    },
                    sm_count: r.i(3).map(|v| v as u32),
                    memory_bytes: r.i(4).map(|v| v as u64),
                });
                Ok(())
            },
        )?;
    }
    if trace.meta.gpus.iter().all(|g| g.sm_count.is_none()) && db.has("TARGET_INFO_CUDA_GPU") {
        let mut k = 0;
        db.select(
            "TARGET_INFO_CUDA_GPU",
            &[
                "name",
                "numMultiprocessors",
                "globalMemorySize",
                "computeCapabilityMajor",
                "computeCapabilityMinor",
            ],
            |r| {
                let name = r.t(0).unwrap_or_default().into_owned();
                if let Some(g) = trace
                    .meta
                    .gpus
                    .iter_mut()
                    .find(|g| g.name == name && g.sm_count.is_none())
                {
                    g.sm_count = r.i(1).map(|v| v as u32);
                    g.memory_bytes = r.i(2).map(|v| v as u64);
                } else {
                    trace.meta.gpus.push(GpuInfo {
                        id: k,
                        name,
                        compute_capability: None,
                        sm_count: r.i(1).map(|v| v as u32),
                        memory_bytes: r.i(2).map(|v| v as u64),
                    });
                }
                k += 1;
                Ok(())
            },
        )?;
    }

    clock.mark("nsys: strings and metadata");
    let mut notes: Vec<String> = Vec::new();
    let gpu_op = |kind,
                  device: Option<i64>,
                  stream: Option<i64>,
                  start: i64,
                  end: i64,
                  corr: Option<i64>,
                  name| GpuOp {
        correlation: corr.unwrap_or(0).max(0) as u64,
        ..GpuOp::new(
            kind,
            device.unwrap_or(0) as i32,
            stream.unwrap_or(0),
            start,
            end,
            name,
        )
    };

    let mut kernel_geometry = false;
    if db.has("CUPTI_ACTIVITY_KIND_KERNEL") {
        let cols = db.columns("CUPTI_ACTIVITY_KIND_KERNEL")?;
        kernel_geometry = ["gridX", "blockX"].iter().all(|c| cols.contains(*c));
        db.select_par(
            "CUPTI_ACTIVITY_KIND_KERNEL",
            &[
                "start",
                "end",
                "deviceId",
                "streamId",
                "correlationId",
                "demangledName",
                "shortName",
                "gridX",
                "gridY",
                "gridZ",
                "blockX",
                "blockY",
                "blockZ",
                "registersPerThread",
                "staticSharedMemory",
                "dynamicSharedMemory",
            ],
            &mut trace.gpu_ops,
            |r| {
                let (Some(s), Some(e)) = (r.i(0), r.i(1)) else {
                    return None;
                };
                let name = match name_of(r.i(5)) {
                    0 => name_of(r.i(6)),
                    n => n,
                };
                let mut op = gpu_op(GpuOpKind::Kernel, r.i(2), r.i(3), s, e, r.i(4), name);
                let u = |k: usize| r.i(k).unwrap_or(0).clamp(0, u32::MAX as i64) as u32;
                op.kernel = Some(KernelInfo {
                    grid: [u(7), u(8), u(9)],
                    block: [u(10), u(11), u(12)],
                    registers: r.i(13).unwrap_or(0).clamp(0, u16::MAX as i64) as u16,
                    shared_mem: u(14).saturating_add(u(15)),
                    occupancy_pct: None,
                    geometry: u(7) > 0 && u(10) > 0,
                });
                Some(op)
            },
        )?;
    } else {
        notes.push("no CUPTI_ACTIVITY_KIND_KERNEL table: the capture has no kernels".into());
    }
    if db.has("CUPTI_ACTIVITY_KIND_MEMCPY") {
        let first = trace.gpu_ops.len();
        // Whether a copy is a unified-memory migration the program asked for
        // (cudaMemPrefetchAsync: migrationCause 1, CUPTI's ..._MIGRATION_CAUSE_USER) rather than
        // one a page fault or the driver's speculation made is said in its name; until the
        // copies are named, their name field carries that flag (no second list of millions).
        const PREFETCH_MARK: StrId = 1;
        db.select_par(
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            &[
                "start",
                "end",
                "deviceId",
                "streamId",
                "correlationId",
                "bytes",
                "copyKind",
                "srcKind",
                "dstKind",
                "migrationCause",
            ],
            &mut trace.gpu_ops,
            |r| {
                let (Some(s), Some(e)) = (r.i(0), r.i(1)) else {
                    return None;
                };
                let kind = r.i(6).unwrap_or(0);
                let dir = copy_direction(kind);
                // Unified-memory migrations (page faults served, prefetches) state no memory
                // kinds: both sides are managed memory.
                let (src, dst) = if (11..=13).contains(&kind) {
                    (MemKind::Managed, MemKind::Managed)
                } else {
                    (mem_kind(r.i(7)), mem_kind(r.i(8)))
                };
                let mut op = gpu_op(GpuOpKind::Memcpy, r.i(2), r.i(3), s, e, r.i(4), 0);
                op.bytes = r.i(5).unwrap_or(0).max(0) as u64;
                op.direction = dir;
                op.src_kind = src;
                op.dst_kind = dst;
                if (11..=13).contains(&kind) && r.i(9) == Some(1) {
                    op.name = PREFETCH_MARK;
                }
                Some(op)
            },
        )?;
        // Named in the order the copies come, as they were when read one row at a time, so
        // that string ids do not depend on how the table was split between connections.
        let mut names: FxHashMap<(CopyDirection, MemKind, MemKind, bool), StrId> =
            FxHashMap::default();
        for op in &mut trace.gpu_ops[first..] {
            let prefetch = op.name == PREFETCH_MARK;
            let (dir, src, dst) = (op.direction, op.src_kind, op.dst_kind);
            op.name = *names.entry((dir, src, dst, prefetch)).or_insert_with(|| {
                trace.strings.intern(&format!(
                    "Memcpy {} ({} -> {}{})",
                    dir.label(),
                    src.label(),
                    dst.label(),
                    if prefetch { PREFETCH_NAME_TAIL } else { "" }
                ))
            });
        }
    } else {
        notes.push("no CUPTI_ACTIVITY_KIND_MEMCPY table: no memory copies captured".into());
    }
    if db.has("CUPTI_ACTIVITY_KIND_MEMSET") {
        let name = trace.strings.intern("Memset (Device)");
        db.select_par(
            "CUPTI_ACTIVITY_KIND_MEMSET",
            &[
                "start",
                "end",
                "deviceId",
                "streamId",
                "correlationId",
                "bytes",
            ],
            &mut trace.gpu_ops,
            |r| {
                let (Some(s), Some(e)) = (r.i(0), r.i(1)) else {
                    return None;
                };
                let mut op = gpu_op(GpuOpKind::Memset, r.i(2), r.i(3), s, e, r.i(4), name);
                op.bytes = r.i(5).unwrap_or(0).max(0) as u64;
                Some(op)
            },
        )?;
    }
    if db.has("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION") {
        let labels = [
            "Sync (unknown)",
            "Event sync",
            "Stream wait event",
            "Stream sync",
            "Context sync",
        ];
        let ids: Vec<StrId> = labels.iter().map(|l| trace.strings.intern(l)).collect();
        db.select_par(
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            &[
                "start",
                "end",
                "deviceId",
                "streamId",
                "correlationId",
                "syncType",
            ],
            &mut trace.gpu_ops,
            |r| {
                let (Some(s), Some(e)) = (r.i(0), r.i(1)) else {
                    return None;
                };
                let name = ids
                    .get(r.i(5).unwrap_or(0).clamp(0, 4) as usize)
                    .copied()
                    .unwrap_or(0);
                Some(gpu_op(GpuOpKind::Sync, r.i(2), r.i(3), s, e, r.i(4), name))
            },
        )?;
    }
    clock.mark("nsys: GPU activity");
    let span = |kind, g: Option<i64>, start: i64, end: i64, name, corr: Option<i64>| {
        let (pid, tid) = split_global_tid(g.unwrap_or(0));
        HostSpan {
            link: corr.unwrap_or(0).max(0) as u64,
            ..HostSpan::new(kind, pid, tid, start, end, name)
        }
    };
    if db.has("CUPTI_ACTIVITY_KIND_RUNTIME") {
        // Calls that returned an error, by (name, code): rare, so a lock costs nothing.
        let failed: std::sync::Mutex<FxHashMap<(i64, i64), u64>> = Default::default();
        db.select_par(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            &[
                "start",
                "end",
                "globalTid",
                "correlationId",
                "nameId",
                "returnValue",
            ],
            &mut trace.host_spans,
            |r| {
                let (Some(s), Some(e)) = (r.i(0), r.i(1)) else {
                    return None;
                };
                if let (Some(code), Some(id)) = (r.i(5), r.i(4))
                    && code != 0
                    && code != CUDA_ERROR_NOT_READY
                    && let Ok(mut m) = failed.lock()
                {
                    *m.entry((id, code)).or_default() += 1;
                }
                Some(span(
                    HostKind::Runtime,
                    r.i(2),
                    s,
                    e,
                    name_of(r.i(4)),
                    r.i(3),
                ))
            },
        )?;
        let failed = failed.into_inner().unwrap_or_default();
        let mut calls: Vec<FailedCalls> = failed
            .into_iter()
            .map(|((id, code), count)| FailedCalls {
                name: trace.str(name_of(Some(id))).to_string(),
                code,
                count,
            })
            // These read back an error an earlier call left; they did not fail themselves.
            .filter(|f| !f.name.contains("GetLastError") && !f.name.contains("PeekAtLastError"))
            .collect();
        calls.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.name.cmp(&b.name))
                .then(a.code.cmp(&b.code))
        });
        trace.meta.failed_calls = calls;
    } else {
        notes.push(
            "no CUPTI_ACTIVITY_KIND_RUNTIME table: GPU work cannot be linked to host calls".into(),
        );
    }
    if db.has("NVTX_EVENTS") {
        // eventType 59: push/pop range, 60: start/end range; marks (no end) are skipped.
        // Ranges that PyTorch emits per operator (`--pytorch=autograd-nvtx`, `emit_nvtx`) are
        // operators: `aten::linear, seq = 0, op_id = 104` becomes the CPU operator `aten::linear`.
        let mut op_names: FxHashMap<StrId, Option<StrId>> = FxHashMap::default();
        let mut ops = 0u64;
        db.select(
            "NVTX_EVENTS",
            &["start", "end", "eventType", "text", "textId", "globalTid"],
            |r| {
                let (Some(s), Some(e)) = (r.i(0), r.i(1)) else {
                    return Ok(());
                };
                if !matches!(r.i(2), Some(59) | Some(60)) {
                    return Ok(());
                }
                let name = match r.t(3) {
                    Some(t) => trace.strings.intern(&t),
                    None => name_of(r.i(4)),
                };
                let op = *op_names.entry(name).or_insert_with(|| {
                    autograd_op_name(trace.strings.get(name))
                        .map(str::to_string)
                        .map(|n| trace.strings.intern(&n))
                });
                let (kind, name) = match op {
                    Some(op) => {
                        ops += 1;
                        (HostKind::CpuOp, op)
                    }
                    None => (HostKind::Annotation, name),
                };
                trace.host_spans.push(span(kind, r.i(5), s, e, name, None));
                Ok(())
            },
        )?;
        if ops > 0 {
            notes.push(format!(
                "{ops} NVTX ranges are PyTorch operators (--pytorch=autograd-nvtx / emit_nvtx): read as CPU operators"
            ));
        }
    } else {
        notes.push(
            "no NVTX_EVENTS table: no step markers, the window is first to last GPU operation"
                .into(),
        );
    }
    if db.has("OSRT_API") {
        db.select_par(
            "OSRT_API",
            &["start", "end", "globalTid", "nameId"],
            &mut trace.host_spans,
            |r| {
                let (Some(s), Some(e)) = (r.i(0), r.i(1)) else {
                    return None;
                };
                Some(span(HostKind::OsCall, r.i(2), s, e, name_of(r.i(3)), None))
            },
        )?;
    }
    clock.mark("nsys: host activity");
    if db.has("COMPOSITE_EVENTS") && db.has("SAMPLING_CALLCHAINS") {
        read_samples(&db, &mut trace, &ids)?;
    }
    if db.has("CUDA_GPU_MEMORY_USAGE_EVENTS") {
        let mut rows: Vec<(i64, i32, u64, i64, i64)> = Vec::new();
        db.select(
            "CUDA_GPU_MEMORY_USAGE_EVENTS",
            &[
                "start",
                "deviceId",
                "address",
                "bytes",
                "memoryOperationType",
            ],
            |r| {
                if let Some(s) = r.i(0) {
                    rows.push((
                        s,
                        r.i(1).unwrap_or(0) as i32,
                        r.i(2).unwrap_or(0) as u64,
                        r.i(3).unwrap_or(0),
                        r.i(4).unwrap_or(0),
                    ));
                }
                Ok(())
            },
        )?;
        rows.sort_by_key(|r| (r.0, r.1));
        let mut reserved: FxHashMap<i32, i64> = FxHashMap::default();
        for (ts, device, addr, bytes, op) in rows {
            // memoryOperationType 0: allocation, 1: free.
            let delta = if op == 1 { -bytes } else { bytes };
            let total = reserved.entry(device).or_default();
            *total += delta;
            trace.memory.push(MemorySample {
                ts,
                device,
                addr,
                bytes: delta,
                total_allocated: ByteTotal::NONE,
                total_reserved: Some(*total).into(),
                oom: false,
            });
        }
    }
    let mut present: Vec<&String> = db.tables.iter().collect();
    present.sort();
    trace.stats.events_total =
        (trace.gpu_ops.len() + trace.host_spans.len() + trace.memory.len()) as u64;
    trace.stats.notes = notes;
    trace.stats.tables = present
        .into_iter()
        .filter(|t| ACTIVITY.contains(&t.as_str()) || t.as_str() == "CUDA_GPU_MEMORY_USAGE_EVENTS")
        .cloned()
        .collect();
    // Every runtime call is tagged with the CUDA version that introduced it
    // (`cudaFree_v3020`): the model names the API it calls.
    trace.name_api_calls();
    let mut thread_names: Vec<(i64, i64, String)> = Vec::new();
    if db.has("ThreadNames") {
        db.select("ThreadNames", &["globalTid", "nameId"], |r| {
            let (pid, tid) = split_global_tid(r.i(0).unwrap_or(0));
            let name = trace.strings.get(name_of(r.i(1))).trim();
            if !name.is_empty() {
                thread_names.push((pid, tid, name.to_string()));
            }
            Ok(())
        })?;
    }
    clock.mark("nsys: samples, memory, threads");
    // What was traced is declared by the tables the export holds.
    let kernels = db.has("CUPTI_ACTIVITY_KIND_KERNEL");
    let api_calls = db.has("CUPTI_ACTIVITY_KIND_RUNTIME");
    let annotations = db.has("NVTX_EVENTS");
    let os_calls = db.has("OSRT_API");
    let cpu_samples = db.has("COMPOSITE_EVENTS") && db.has("SAMPLING_CALLCHAINS");
    let memory_events = db.has("CUDA_GPU_MEMORY_USAGE_EVENTS");
    let declare = move |trace: &mut Trace, capture: &mut Capture| {
        clock.mark("nsys: finish");
        capture.kernels = kernels;
        capture.launch_geometry =
            kernel_geometry && trace.gpu_ops.iter().any(|o| o.kind == GpuOpKind::Kernel);
        capture.api_calls = api_calls;
        capture.annotations = annotations;
        capture.os_calls = os_calls;
        capture.cpu_samples = cpu_samples;
        capture.memory_events = memory_events;
        capture.name_threads(
            thread_names
                .iter()
                .map(|(pid, tid, n)| (*pid, *tid, n.as_str())),
        );
        capture.no_cpu_data = "this export has no CPU-side data; capture with `-t cuda,nvtx,osrt -s cpu`, and `--pytorch=autograd-nvtx` for a PyTorch program".into();
        if no_gpu_data.is_empty() && capture.api_calls && trace.gpu_ops.is_empty() {
            let calls = trace
                .host_spans
                .iter()
                .filter(|s| matches!(s.kind, HostKind::Runtime | HostKind::Driver))
                .count();
            no_gpu_data = format!(
                "CUDA tracing was on and recorded {calls} runtime calls, none of which ran a kernel or a copy: the program did no GPU work while the capture ran"
            );
        }
        capture.no_gpu_data = no_gpu_data;
    };
    Ok(Parsed {
        trace,
        declare: Box::new(declare),
    })
}

/// A driver version as NVIDIA writes it: some exports keep it dotted (`535.104.05`), others
/// as digits alone, the major version's three then the rest (`5303002` is 530.30.02,
/// `52510517` 525.105.17, `42600` the Windows 426.00). Anything else as it is.
fn driver_version(v: &str) -> String {
    if v.len() < 5 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return v.to_string();
    }
    let (major, rest) = v.split_at(3);
    match rest.len() {
        2 => format!("{major}.{rest}"),
        4 => format!("{major}.{}.{}", &rest[..2], &rest[2..]),
        5 => format!("{major}.{}.{}", &rest[..3], &rest[3..]),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn driver_versions_written_as_digits_read_dotted() {
        assert_eq!(super::driver_version("5303002"), "530.30.02");
        assert_eq!(super::driver_version("52510517"), "525.105.17");
        assert_eq!(super::driver_version("42600"), "426.00");
        assert_eq!(super::driver_version("535.104.05"), "535.104.05");
        assert_eq!(super::driver_version("560.94"), "560.94");
    }

    use super::*;

    #[test]
    fn global_tid() {
        // 281487979053831 from an H200 export: pid 775, tid 775 + thread bits.
        let (pid, tid) = split_global_tid(281_487_979_053_831);
        assert_eq!(pid, (281_487_979_053_831 >> 24) & 0xFF_FFFF);
        assert_eq!(tid, 281_487_979_053_831 & 0xFF_FFFF);
    }

    #[test]
    fn autograd_nvtx_ranges_are_operators() {
        assert_eq!(
            autograd_op_name("aten::linear, seq = 0, op_id = 104"),
            Some("aten::linear")
        );
        assert_eq!(
            autograd_op_name("aten::uniform_, op_id = 7"),
            Some("aten::uniform_")
        );
        assert_eq!(
            autograd_op_name("aten::addmm, seq = 3, sizes = [[64], [64, 32]]"),
            Some("aten::addmm")
        );
        assert_eq!(autograd_op_name("ProfilerStep#3"), None);
        assert_eq!(autograd_op_name("forward, seq = 1"), None);
        assert_eq!(autograd_op_name("my range, with a comma"), None);
    }
}
