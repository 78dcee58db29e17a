//! The Perfetto overlay: the original trace's events with tracehound's own tracks added, in
//! Chrome's trace-event JSON, for ui.perfetto.dev and chrome://tracing (the timeline users
//! already read). Added, under a process named `tracehound`:
//! - one track per GPU, `idle gaps · GPU N`: each idle gap over the threshold as a slice named
//!   by its measured cause (the category holding most of it), its parts and the operator,
//!   frame and draining call in its args;
//! - a `findings` track: each finding's worst instances as slices named by the finding, with
//!   its id, severity, impact and fix in their args;
//! - flow arrows from the call that drained the GPU's queue before a gap (a synchronising call
//!   on the thread that launched the next kernel) to the kernel that ended the gap.
//!
//! A PyTorch profiler trace streams through: its events are copied chunk by chunk as the
//! splitter cuts them, never held whole. Other formats (Nsight Systems, RPD) have no events in
//! this format: their GPU operations and host calls are written from the model.
//!
//! Timestamps are the trace's own (µs, with the nanoseconds as decimals), so the added slices
//! line up with the original events. The added events carry the category `tracehound`, which
//! the Kineto reader skips: reading the overlay back gives the original's findings.

use std::io::Write;
use std::path::Path;
use tracehound_heuristics::Analysis;
use tracehound_parsers::kineto::json_split::{Piece, Splitter};
use tracehound_parsers::{GpuOpKind, HostKind, NONE, Trace};

/// The process id of the added tracks: far above real process ids, so it collides with none.
const PID: i64 = 2_000_000_000;

/// The findings track's thread id (GPU tracks are the device index).
const FINDINGS_TID: i64 = 1_000_000;

/// What was written, for the command's message and the tests.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Written {
    /// Events of the original trace (or of the model, for other formats).
    pub original: u64,
    /// Idle-gap slices added.
    pub gaps: u64,
    /// Finding-instance slices added.
    pub instances: u64,
    /// Flow arrows added.
    pub flows: u64,
}

/// A number of microseconds from nanoseconds, exact: `1234567` → `1234.567`.
fn us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// A JSON string literal.
fn js(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Writes the overlay of `trace` (analysed as `analysis`) to `out`, gzip-compressed when the
/// name ends in `.gz`. The file is written beside `out` and renamed over it when complete.
pub fn write(out: &Path, trace: &Trace, analysis: &Analysis) -> std::io::Result<Written> {
    let name = out
        .file_name()
        .map_or("overlay".into(), |n| n.to_string_lossy().into_owned());
    let tmp = out.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        let gz = name.to_ascii_lowercase().ends_with(".gz");
        let written = if gz {
            let mut w = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            let n = write_to(&mut w, trace, analysis)?;
            w.finish()?
                .into_inner()
                .map_err(|e| e.into_error())?
                .sync_all()?;
            n
        } else {
            let mut w = file;
            let n = write_to(&mut w, trace, analysis)?;
            w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            n
        };
        std::fs::rename(&tmp, out)?;
        Ok(written)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes the whole overlay document to `w`.
fn write_to(w: &mut impl Write, trace: &Trace, analysis: &Analysis) -> std::io::Result<Written> {
    let mut n = Written::default();
    w.write_all(b"{\"traceEvents\": [\n")?;
    let mut first = true;
    let outer = if trace.meta.format.is_some_and(|f| f.id == "kineto") {
        copy_events(w, &trace.source, &mut first, &mut n)?
    } else {
        model_events(w, trace, &mut first, &mut n)?;
        None
    };
    added_events(w, trace, analysis, &mut first, &mut n)?;
    w.write_all(b"\n]")?;
    // The original document's other members (metadata, device properties, base time).
    if let Some(serde_json::Value::Object(members)) = outer {
        for (k, v) in members.iter().filter(|(k, _)| k.as_str() != "traceEvents") {
            write!(w, ",\n{}: {}", js(k), v)?;
        }
    }
    w.write_all(b"}\n")?;
    Ok(n)
}

/// Writes one event, with the separator before it.
fn event(w: &mut impl Write, first: &mut bool, json: &str) -> std::io::Result<()> {
    if !*first {
        w.write_all(b",\n")?;
    }
    *first = false;
    w.write_all(json.as_bytes())
}

/// Copies the events of the PyTorch profiler trace at `path` to `w` as the splitter cuts
/// them, and returns the document around them (parsed: a few kilobytes).
fn copy_events(
    w: &mut impl Write,
    path: &str,
    first: &mut bool,
    n: &mut Written,
) -> std::io::Result<Option<serde_json::Value>> {
    use std::io::{Read, Seek};
    let mut file = std::fs::File::open(path)?;
    let mut head = [0u8; 2];
    let got = file.read(&mut head)?;
    file.rewind()?;
    let mut reader: Box<dyn std::io::Read> = if got == 2 && head == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(
            file,
        )))
    } else {
        Box::new(file)
    };
    let mut splitter = Splitter::new(4 << 20);
    let mut outer = Vec::new();
    let mut failed: Option<std::io::Error> = None;
    let mut emit = |p: Piece| match p {
        Piece::Events { text, .. } => {
            if failed.is_some() {
                return;
            }
            // A chunk opens with the array's `[` or the comma after the previous chunk.
            let body = text.trim_ascii_start();
            let body = body
                .strip_prefix(b"[")
                .or_else(|| body.strip_prefix(b","))
                .unwrap_or(body)
                .trim_ascii();
            if body.is_empty() {
                return;
            }
            n.original += count_events(body);
            let r = (|| {
                if !*first {
                    w.write_all(b",\n")?;
                }
                *first = false;
                w.write_all(body)
            })();
            if let Err(e) = r {
                failed = Some(e);
            }
        }
        Piece::Outer(o) => outer = o,
    };
    loop {
        match splitter.read_from(&mut reader, 1 << 20, &mut emit) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(e),
        }
    }
    splitter.finish(&mut emit);
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(serde_json::from_slice(&outer).ok())
}

/// The events at depth 0 of a run of whole events (`{…}, {…}`): its top-level objects.
fn count_events(body: &[u8]) -> u64 {
    let (mut depth, mut in_str, mut esc, mut count) = (0u32, false, false, 0u64);
    for &b in body {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                if depth == 0 && b == b'{' {
                    count += 1;
                }
                depth += 1;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    count
}

/// For a format without Chrome events: the model's GPU operations (a process per device, a
/// thread per stream) and host spans, as a PyTorch profiler would have written them.
fn model_events(
    w: &mut impl Write,
    t: &Trace,
    first: &mut bool,
    n: &mut Written,
) -> std::io::Result<()> {
    for d in t.devices() {
        event(
            w,
            first,
            &format!(
                r#"{{"ph": "M", "name": "process_name", "pid": {d}, "tid": 0, "args": {{"name": "GPU {d}"}}}}"#
            ),
        )?;
    }
    // A complete event as a PyTorch profiler writes it, with its correlation id.
    let x = |cat: &str, name: &str, pid: i64, tid: i64, start: i64, dur: i64, corr: u64| {
        format!(
            r#"{{"ph": "X", "cat": "{cat}", "name": {}, "pid": {pid}, "tid": {tid}, "ts": {}, "dur": {}, "args": {{"correlation": {corr}}}}}"#,
            js(name),
            us(start),
            us(dur)
        )
    };
    for op in &t.gpu_ops {
        let cat = match op.kind {
            GpuOpKind::Kernel => "kernel",
            GpuOpKind::Memcpy => "gpu_memcpy",
            GpuOpKind::Memset => "gpu_memset",
            GpuOpKind::Sync => continue,
        };
        let e = x(
            cat,
            t.str(op.name),
            i64::from(op.device),
            op.stream,
            op.start,
            op.dur(),
            op.correlation,
        );
        event(w, first, &e)?;
        n.original += 1;
    }
    for s in &t.host_spans {
        let cat = match s.kind {
            HostKind::CpuOp => "cpu_op",
            HostKind::Runtime => "cuda_runtime",
            HostKind::Driver => "cuda_driver",
            HostKind::Annotation => "user_annotation",
            HostKind::Python => "python_function",
            _ => continue,
        };
        let e = x(
            cat,
            t.str(s.name),
            s.pid,
            s.tid,
            s.start,
            s.dur(),
            s.correlation(),
        );
        event(w, first, &e)?;
        n.original += 1;
    }
    Ok(())
}

/// Chrome's reserved colour names by cause, for chrome://tracing (Perfetto colours a slice by
/// its name, so each cause keeps one colour there too).
fn colour(kind: tracehound_heuristics::idle::CauseKind) -> &'static str {
    use tracehound_heuristics::idle::CauseKind as K;
    match kind {
        K::HostSync | K::Allocator => "terrible",
        K::DataLoading => "bad",
        K::LaunchOverhead => "yellow",
        K::GpuWait => "grey",
        _ => "olive",
    }
}

/// The call that drained the queue before a gap, on the thread that launched the kernel that
/// ended it: the last call of that name starting before the gap. `None` when the gap names no
/// such call or the thread's calls do not hold it.
fn drain_call(t: &Trace, drained_by: &str, next_op: u32, gap_start: i64) -> Option<u32> {
    // `aten::item (cudaStreamSynchronize)`: the call is in the parentheses, else the text is it.
    let call = drained_by
        .rsplit_once('(')
        .and_then(|(_, c)| c.strip_suffix(')'))
        .unwrap_or(drained_by);
    let launch = *t.index.op_launch.get(next_op as usize)?;
    if launch == NONE {
        return None;
    }
    let l = t.host_spans.get(launch as usize)?;
    let calls = t.thread_calls((l.pid, l.tid));
    let before = calls.partition_point(|&i| t.host_spans[i as usize].start < gap_start);
    calls[..before]
        .iter()
        .rev()
        .take(4096)
        .copied()
        .find(|&i| t.str(t.host_spans[i as usize].name) == call)
}

/// tracehound's tracks: idle gaps per GPU, findings' worst instances, flows.
fn added_events(
    w: &mut impl Write,
    t: &Trace,
    a: &Analysis,
    first: &mut bool,
    n: &mut Written,
) -> std::io::Result<()> {
    let meta = |name: &str, tid: i64, args: String| {
        format!(
            r#"{{"ph": "M", "cat": "tracehound", "name": "{name}", "pid": {PID}, "tid": {tid}, "args": {args}}}"#
        )
    };
    event(
        w,
        first,
        &meta("process_name", 0, r#"{"name": "tracehound"}"#.into()),
    )?;
    event(
        w,
        first,
        &meta("process_sort_index", 0, r#"{"sort_index": -1}"#.into()),
    )?;
    event(
        w,
        first,
        &meta(
            "thread_name",
            FINDINGS_TID,
            r#"{"name": "findings"}"#.into(),
        ),
    )?;
    let mut flow_id = 0u64;
    for d in &a.idle {
        let tid = i64::from(d.device);
        event(
            w,
            first,
            &meta(
                "thread_name",
                tid,
                format!(
                    r#"{{"name": {}}}"#,
                    js(&format!("idle gaps · GPU {}", d.device))
                ),
            ),
        )?;
        for g in &d.gaps {
            let parts: Vec<String> = g
                .parts
                .iter()
                .map(|p| {
                    format!(
                        r#"{{"cause": {}, "what": {}, "us": {}}}"#,
                        js(p.kind.label()),
                        js(&p.leaf),
                        us(p.ns)
                    )
                })
                .collect();
            let opt = |k: &str, v: &Option<String>| {
                v.as_ref()
                    .map(|v| format!(", {}: {}", js(k), js(v)))
                    .unwrap_or_default()
            };
            event(
                w,
                first,
                &format!(
                    r#"{{"ph": "X", "cat": "tracehound", "name": {}, "pid": {PID}, "tid": {tid}, "ts": {}, "dur": {}, "cname": "{}", "args": {{"cause": {}{}{}{}{}, "parts": [{}]}}}}"#,
                    js(g.kind.label()),
                    us(g.start),
                    us(g.end - g.start),
                    colour(g.kind),
                    js(&g.label),
                    opt("operator", &g.cpu_op),
                    opt("frame", &g.frame),
                    opt("drained_by", &g.drained_by),
                    opt("region", &g.region),
                    parts.join(", ")
                ),
            )?;
            n.gaps += 1;
            let (Some(next), Some(by)) = (g.next_op, &g.drained_by) else {
                continue;
            };
            let (Some(call), Some(op)) = (
                drain_call(t, by, next, g.start),
                t.gpu_ops.get(next as usize),
            ) else {
                continue;
            };
            let c = &t.host_spans[call as usize];
            flow_id += 1;
            event(
                w,
                first,
                &format!(
                    r#"{{"ph": "s", "cat": "tracehound", "name": "drained the queue", "id": {flow_id}, "pid": {}, "tid": {}, "ts": {}}}"#,
                    c.pid,
                    c.tid,
                    us(c.start + c.dur() / 2)
                ),
            )?;
            event(
                w,
                first,
                &format!(
                    r#"{{"ph": "f", "bp": "e", "cat": "tracehound", "name": "drained the queue", "id": {flow_id}, "pid": {}, "tid": {}, "ts": {}}}"#,
                    op.device,
                    op.stream,
                    us(op.start)
                ),
            )?;
            n.flows += 1;
        }
    }
    for f in &a.findings {
        for i in &f.instances {
            event(
                w,
                first,
                &format!(
                    r#"{{"ph": "X", "cat": "tracehound", "name": {}, "pid": {PID}, "tid": {FINDINGS_TID}, "ts": {}, "dur": {}, "args": {{"id": {}, "rule": {}, "severity": {}, "impact_us": {}, "share_of_window": {}, "what": {}, "fix": {}}}}}"#,
                    js(&format!("{}: {}", f.severity.label(), f.title)),
                    us(i.start_ns),
                    us(i.dur_ns.max(0)),
                    js(&f.id),
                    js(f.rule),
                    js(f.severity.label()),
                    // null where the capture cannot price the finding (its 0 means unknown)
                    if f.unpriced() {
                        "null".to_string()
                    } else {
                        us(f.impact_ns)
                    },
                    if f.unpriced() {
                        "null".to_string()
                    } else {
                        format!("{:.4}", f.impact_share)
                    },
                    js(&i.what),
                    js(&f.advice.join(" "))
                ),
            )?;
            n.instances += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_keep_every_nanosecond() {
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(5), "0.005");
        assert_eq!(us(-1_500), "-1.500");
    }

    #[test]
    fn events_are_counted_at_the_top_level_only() {
        assert_eq!(count_events(br#"{"a": {"b": "}{"}}, {"c": [{"d": 1}]}"#), 2);
    }
}
