//! `nvidia-smi --query-gpu=FIELDS --format=csv [-l N]` logs: a header of field names with
//! units in brackets (`utilization.gpu [%]`), values with unit suffixes (`79.77 W`,
//! `345 MHz`, `0 %`), `[N/A]` / `[Not Supported]` for missing values, and headers repeated
//! when several commands append to one file. Field names are mapped to dmon's metric names
//! where they mean the same thing, so rules read either source.

use super::counter_log::{ClockOptions, SeriesBuilder, counter_trace, epoch_ns, parse_hms};
use crate::error::LoadError;
use crate::model::*;

/// The format.
pub static FORMAT: SourceFormat = SourceFormat {
    id: "smi_query",
    name: "nvidia-smi --query-gpu CSV log",
    input: "CSV",
    records: "sample lines",
    records_gpu_work: false,
    clock_origin: None,
};

/// The reader: a small text file read whole.
pub static READER: super::Reader = super::Reader {
    format: &FORMAT,
    is_applicable,
    input: super::Input::Text(|data, source, o| read(data, source, o.into())),
};

/// Does `head` look like a `--query-gpu` CSV log?
pub fn is_applicable(head: &[u8]) -> Option<bool> {
    let text = String::from_utf8_lossy(head);
    let first = text.lines().next()?;
    Some(
        first.contains(',')
            && (first.starts_with("timestamp")
                || first.contains("utilization.gpu")
                || first.contains("power.draw")),
    )
}

fn metric(field: &str) -> (&str, &str) {
    let (name, unit) = match field.split_once('[') {
        Some((n, u)) => (n.trim(), u.trim_end_matches(']').trim()),
        None => (field.trim(), ""),
    };
    let canon = match name {
        "utilization.gpu" => "sm",
        "utilization.memory" => "mem",
        "power.draw" | "power.draw.instant" => "pwr",
        "power.limit" | "enforced.power.limit" => "power_limit",
        "temperature.gpu" => "gtemp",
        "temperature.memory" => "mtemp",
        "clocks.current.sm" | "clocks.sm" => "pclk",
        "clocks.current.memory" | "clocks.mem" => "mclk",
        "clocks.max.sm" | "clocks.max.graphics" => "pclk_max",
        "memory.used" => "fb",
        "pcie.link.gen.current" => "pcie_gen",
        "pcie.link.gen.max" => "pcie_gen_max",
        "pcie.link.width.current" => "pcie_width",
        "pcie.link.width.max" => "pcie_width_max",
        other => other,
    };
    (canon, unit)
}

/// A timestamp written as Unix time, in ns: seconds (10 digits before any decimal point, from
/// 2001 to 2262, the last year nanoseconds in an i64 reach) or milliseconds (13 digits); None
/// past that.
fn epoch_number_ns(t: &str) -> Option<i64> {
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = whole.parse().ok()?;
    // Integer arithmetic: nanoseconds of 2026 need 61 bits, more than an f64 keeps.
    let frac_ns = |unit_ns: i64| -> i64 {
        let digits = frac.len().min(9);
        let v: i64 = frac[..digits].parse().unwrap_or(0);
        v * unit_ns / 10i64.pow(digits as u32)
    };
    // Checked: ten or thirteen digits past year 2262 (a damaged file's) overflow i64 ns.
    match whole.len() {
        10 if n >= 1_000_000_000 => n
            .checked_mul(1_000_000_000)?
            .checked_add(frac_ns(1_000_000_000)),
        13 => n.checked_mul(1_000_000)?.checked_add(frac_ns(1_000_000)),
        _ => None,
    }
}

/// Parses a `--query-gpu` CSV log.
pub fn parse(data: &[u8], source: &str, clock: ClockOptions) -> Result<Trace, LoadError> {
    read(data, source, clock).map(Parsed::finish)
}

/// [`parse`], before the trace is finished.
pub fn read(data: &[u8], source: &str, clock: ClockOptions) -> Result<Parsed, LoadError> {
    let text = String::from_utf8_lossy(data);
    let offset = clock.utc_offset_s.unwrap_or(0);
    let mut header: Vec<(String, String)> = Vec::new();
    let mut builder = SeriesBuilder::default();
    let mut bad: Vec<usize> = Vec::new();
    let mut rows = 0u64;
    let mut has_time = false;
    let mut epoch_time = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields
            .iter()
            .any(|f| f.contains("utilization.") || *f == "timestamp" || *f == "index")
        {
            header = fields
                .iter()
                .map(|f| {
                    let (m, u) = metric(f);
                    (m.to_string(), u.to_string())
                })
                .collect();
            continue;
        }
        if header.is_empty() || fields.len() != header.len() {
            bad.push(n + 1);
            continue;
        }
        let col = |name: &str| header.iter().position(|h| h.0 == name).map(|i| fields[i]);
        let gpu = col("index")
            .and_then(|g| g.parse::<i32>().ok())
            .unwrap_or(0);
        let ts = col("timestamp").and_then(|t| {
            // A script's own clock beside nvidia-smi's values: Unix time in seconds (or
            // milliseconds), which is UTC.
            if let Some(ns) = epoch_number_ns(t) {
                epoch_time = true;
                return Some(ns);
            }
            // 2026/11/29 16:35:23.878
            let (d, tm) = t.split_once(' ')?;
            let mut it = d.split(['/', '-']);
            let (y, mo, day) = (
                it.next()?.parse().ok()?,
                it.next()?.parse().ok()?,
                it.next()?.parse().ok()?,
            );
            let (h, mi, s) = parse_hms(tm.trim())?;
            epoch_ns(y, mo, day, h, mi, s, offset)
        });
        let ts = match ts {
            Some(t) => {
                has_time = true;
                t
            }
            None => rows as i64 * 1_000_000_000,
        };
        rows += 1;
        for (i, (name, unit)) in header.iter().enumerate() {
            if matches!(
                name.as_str(),
                "timestamp" | "index" | "name" | "uuid" | "pci.bus_id"
            ) {
                continue;
            }
            let v = fields[i].split_whitespace().next().unwrap_or("");
            if let Ok(x) = v.parse::<f64>() {
                builder.push(gpu, name, unit, ts, x);
            }
        }
    }
    if header.is_empty() || rows == 0 {
        return Err(LoadError::NotATrace {
            path: source.to_string(),
            why: "a CSV without nvidia-smi --query-gpu header and rows".into(),
        });
    }
    let mut notes = Vec::new();
    let counter_clock = if has_time {
        if clock.utc_offset_s.is_none() && !epoch_time {
            notes.push("nvidia-smi timestamps are local wall time: assumed UTC (set --utc-offset otherwise)".to_string());
        }
        CounterClock::Wall {
            // Unix time is UTC whatever --utc-offset says.
            utc_offset_s: if epoch_time { 0 } else { offset },
        }
    } else {
        notes.push(
            "the log has no timestamps: one sample a second assumed (nvidia-smi's -l 1)"
                .to_string(),
        );
        CounterClock::Relative {
            interval_ns: 1_000_000_000,
        }
    };
    let mut parsed = counter_trace(
        source,
        &FORMAT,
        format!("{} fields", header.len()),
        rows,
        data.len(),
        &bad,
        counter_clock,
        builder,
    );
    parsed.trace.stats.notes = notes;
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_stripped_and_names_mapped() {
        let csv = "timestamp, index, utilization.gpu [%], power.draw [W], clocks.current.sm [MHz], pcie.link.gen.current\n2026/11/29 16:35:32.000, 0, 37 %, 79.77 W, 1980 MHz, 5\n2026/11/29 16:35:33.000, 0, [N/A], 80.00 W, 1980 MHz, 5\n";
        let t = parse(csv.as_bytes(), "q.csv", ClockOptions::default()).unwrap();
        let sm = t.counters.iter().find(|c| c.metric == "sm").unwrap();
        assert_eq!(sm.samples, vec![(1_795_970_132_000_000_000, 37.0)]);
        assert_eq!(sm.unit, "%");
        assert_eq!(
            t.counters
                .iter()
                .find(|c| c.metric == "pwr")
                .unwrap()
                .samples
                .len(),
            2
        );
        assert!(t.counters.iter().any(|c| c.metric == "pcie_gen"));
    }

    #[test]
    fn sampling_period_from_the_timestamps() {
        // -lms 500 on two GPUs: each GPU's rows are 0.5 s apart plus the query's milliseconds.
        let mut csv = String::from("timestamp, index, utilization.gpu [%]\n");
        for k in 0..6 {
            for gpu in 0..2 {
                let ms = 500 * k + 3 * (k % 2) + gpu;
                csv.push_str(&format!(
                    "2026/11/29 16:35:{:02}.{:03}, {gpu}, 5 %\n",
                    30 + ms / 1000,
                    ms % 1000
                ));
            }
        }
        let t = parse(csv.as_bytes(), "q.csv", ClockOptions::default()).unwrap();
        assert_eq!(
            t.meta.capture.counter_period,
            Some(CounterPeriod {
                ns: 500_000_000,
                measured: true
            })
        );
        let csv = "index, utilization.gpu [%]\n0, 5 %\n0, 7 %\n";
        let t = parse(csv.as_bytes(), "q.csv", ClockOptions::default()).unwrap();
        assert_eq!(
            t.meta.capture.counter_period,
            Some(CounterPeriod::assumed())
        );
    }

    #[test]
    fn unix_time_written_by_a_script_is_the_clock() {
        // The first rows of a field log (RCKola/Rectified-Point-Flow's gpu_usage.csv): the
        // script's `date +%s` beside nvidia-smi's values, one row a minute.
        let csv = "timestamp,memory.used,memory.total,utilization.gpu\n1764189075,1, 24576, 0\n1764189135,442, 24576, 0\n1764189195,4846, 24576, 0\n1764189255,10544, 24576, 93\n";
        let t = parse(csv.as_bytes(), "q.csv", ClockOptions::default()).unwrap();
        assert_eq!(
            t.meta.capture.counter_period,
            Some(CounterPeriod {
                ns: 60_000_000_000,
                measured: true
            })
        );
        // Unix time is UTC: no note about local wall time.
        assert!(t.stats.notes.is_empty(), "{:?}", t.stats.notes);
        assert_eq!(
            epoch_number_ns("1764189075123"),
            Some(1_764_189_075_123_000_000)
        );
        assert_eq!(epoch_number_ns("42"), None);
        // Past 2262 nanoseconds overflow an i64 (a bit flipped in a field log's timestamp
        // made one and panicked the reader).
        assert_eq!(epoch_number_ns("9999999999.5"), None);
        assert_eq!(epoch_number_ns("9999999999999"), None);
    }
}
