//! `tracehound summary`: kernel and memory-operation tables, as text or CSV with the columns
//! of `nsys stats` (so the two can be diffed).

use std::fmt::Write;
use tracehound_heuristics::finding::fmt_ns;
use tracehound_heuristics::tables::TimeRow;

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Rows of the shared `nsys stats` time columns, then bytes (memory tables only), then the name.
fn time_csv(header: &str, rows: &[TimeRow], with_bytes: bool) -> String {
    let mut s = String::from(header);
    for r in rows {
        let _ = write!(
            s,
            "{:.1},{},{},{:.1},{:.1},{},{},{:.1},",
            100.0 * r.time_share,
            r.total_ns,
            r.instances,
            r.avg_ns,
            r.med_ns,
            r.min_ns,
            r.max_ns,
            r.stddev_ns
        );
        if with_bytes {
            let _ = write!(s, "{},", r.bytes);
        }
        let _ = writeln!(s, "{}", csv_field(&r.name));
    }
    s
}

/// The kernel table as CSV (`cuda_gpu_kern_sum` columns).
pub fn kernels_csv(rows: &[TimeRow]) -> String {
    time_csv(
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n",
        rows,
        false,
    )
}

/// The memory table as CSV (`cuda_gpu_mem_time_sum` columns plus total bytes).
pub fn memory_csv(rows: &[TimeRow]) -> String {
    time_csv(
        "Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Total (bytes),Operation\n",
        rows,
        true,
    )
}

/// Both tables for a terminal.
pub fn text(
    source: &str,
    scope: &str,
    kernels: &[TimeRow],
    memory: &[TimeRow],
    top: usize,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{source} ({scope})\n");
    let _ = writeln!(
        s,
        "  {:>6} {:>10} {:>8} {:>9} {:>9} {:>9}  KERNEL",
        "TIME%", "TOTAL", "CALLS", "AVG", "MIN", "MAX"
    );
    let shown: Vec<&str> = kernels.iter().take(top).map(|r| r.name.as_str()).collect();
    let names = tracehound_heuristics::names::distinct_short_names(&shown, 70);
    for (r, name) in kernels.iter().zip(&names) {
        let _ = writeln!(
            s,
            "  {:>5.1}% {:>10} {:>8} {:>9} {:>9} {:>9}  {}",
            100.0 * r.time_share,
            fmt_ns(r.total_ns),
            r.instances,
            fmt_ns(r.avg_ns as i64),
            fmt_ns(r.min_ns),
            fmt_ns(r.max_ns),
            name
        );
    }
    if kernels.len() > top {
        let _ = writeln!(
            s,
            "  ({} more kernels; --top N or --csv for all)",
            kernels.len() - top
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "  {:>6} {:>10} {:>8} {:>12}  OPERATION",
        "TIME%", "TOTAL", "COUNT", "BYTES"
    );
    for r in memory {
        let _ = writeln!(
            s,
            "  {:>5.1}% {:>10} {:>8} {:>12}  {}",
            100.0 * r.time_share,
            fmt_ns(r.total_ns),
            r.instances,
            tracehound_heuristics::finding::fmt_bytes(r.bytes),
            r.name
        );
    }
    s
}
