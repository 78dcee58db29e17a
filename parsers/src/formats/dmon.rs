//! `nvidia-smi dmon` text logs (<https://docs.nvidia.com/deploy/nvidia-smi/>).
//!
//! Columns are taken from the header line (`# gpu pwr gtemp ...`), never from positions: the
//! set depends on `-s` flags and the driver. The units line follows it. Headers may repeat
//! mid-file (dmon reprints them), blank lines occur, several GPUs interleave one row per GPU
//! per sample, `-` marks an unsupported value. `-o D`/`T`/`DT` add `#Date` (YYYYMMDD) and
//! `Time` (HH:MM:SS, local wall time) columns: with both, samples get epoch times (converted
//! with the UTC offset given, default 0); without a date they are numbered at the assumed
//! interval (1 s, dmon's default) and cannot be aligned with a trace.
//! Lines that do not fit the header are skipped with a warning naming the line.

use super::counter_log::{ClockOptions, SeriesBuilder, counter_trace, epoch_ns, parse_hms};
use crate::error::LoadError;
use crate::model::*;

/// The format.
pub static FORMAT: SourceFormat = SourceFormat {
    id: "dmon",
    name: "nvidia-smi dmon log",
    input: "text",
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

/// Does `head` look like a dmon log (a `#` header line naming the `gpu` column)?
pub fn is_applicable(head: &[u8]) -> Option<bool> {
    let text = String::from_utf8_lossy(head);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(
        first.starts_with('#')
            && first
                .trim_start_matches('#')
                .split_whitespace()
                .any(|w| w == "gpu"),
    )
}

/// Parses a dmon log.
pub fn parse(data: &[u8], source: &str, clock: ClockOptions) -> Result<Trace, LoadError> {
    read(data, source, clock).map(Parsed::finish)
}

/// [`parse`], before the trace is finished.
pub fn read(data: &[u8], source: &str, clock: ClockOptions) -> Result<Parsed, LoadError> {
    let text = String::from_utf8_lossy(data);
    let offset = clock.utc_offset_s.unwrap_or(0);
    let mut names: Vec<String> = Vec::new();
    let mut units: Vec<String> = Vec::new();
    let mut expect_units = false;
    let mut builder = SeriesBuilder::default();
    let mut bad: Vec<usize> = Vec::new();
    let mut rows = 0u64;
    let mut wall = false;
    let mut relative = false;
    let mut sample_no: i64 = -1;
    let mut seen_in_sample: Vec<i32> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix('#') {
            let words: Vec<String> = h.split_whitespace().map(str::to_string).collect();
            if expect_units {
                units = words;
                expect_units = false;
            } else if words.iter().any(|w| w == "gpu") {
                names = words;
                expect_units = true;
            }
            continue;
        }
        expect_units = false;
        if names.is_empty() {
            bad.push(n + 1);
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() != names.len() {
            bad.push(n + 1);
            continue;
        }
        let col = |name: &str| names.iter().position(|c| c == name).map(|i| fields[i]);
        let Some(gpu) = col("gpu").and_then(|g| g.parse::<i32>().ok()) else {
            bad.push(n + 1);
            continue;
        };
        let ts = match (col("Date"), col("Time")) {
            (Some(d), Some(t)) if d.len() == 8 && d.bytes().all(|b| b.is_ascii_digit()) => {
                let (y, mo, day) = (
                    d[..4].parse().ok(),
                    d[4..6].parse().ok(),
                    d[6..].parse().ok(),
                );
                match (y, mo, day, parse_hms(t)) {
                    (Some(y), Some(mo), Some(day), Some((h, mi, s))) => {
                        epoch_ns(y, mo, day, h, mi, s, offset)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let ts = match ts {
            Some(t) => {
                wall = true;
                t
            }
            // Both columns present but unreadable: a damaged line.
            None if col("Date").is_some() && col("Time").is_some() => {
                bad.push(n + 1);
                continue;
            }
            None => {
                relative = true;
                // A new sample starts when a GPU index repeats.
                if sample_no < 0 || seen_in_sample.contains(&gpu) {
                    sample_no += 1;
                    seen_in_sample.clear();
                }
                seen_in_sample.push(gpu);
                sample_no * 1_000_000_000
            }
        };
        rows += 1;
        for (i, name) in names.iter().enumerate() {
            if matches!(name.as_str(), "gpu" | "Date" | "Time") {
                continue;
            }
            if let Ok(v) = fields[i].parse::<f64>() {
                let unit = units.get(i).map(String::as_str).unwrap_or("");
                builder.push(gpu, name, unit, ts, v);
            }
        }
    }
    if names.is_empty() {
        return Err(LoadError::NotATrace {
            path: source.to_string(),
            why: "no dmon header line (`# gpu ...`) found".into(),
        });
    }
    if rows == 0 {
        return Err(LoadError::NotATrace {
            path: source.to_string(),
            why: "a dmon header but no sample lines".into(),
        });
    }
    let mut notes = Vec::new();
    let counter_clock = if wall {
        if clock.utc_offset_s.is_none() {
            notes.push("dmon -o DT prints local wall time at 1 s resolution: assumed UTC (set --utc-offset if the machine ran in another zone)".to_string());
        }
        CounterClock::Wall {
            utc_offset_s: offset,
        }
    } else {
        notes.push("no Date/Time columns (dmon -o DT): samples are numbered at 1 s and cannot be aligned with a trace".to_string());
        CounterClock::Relative {
            interval_ns: 1_000_000_000,
        }
    };
    let mut parsed = counter_trace(
        source,
        &FORMAT,
        format!("columns: {}", names.join(" ")),
        rows,
        data.len(),
        &bad,
        counter_clock,
        builder,
    );
    parsed.trace.stats.notes = notes;
    if wall && relative {
        parsed
            .trace
            .warnings
            .push("some lines have dates and some do not: only dated lines are aligned".into());
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_driven_with_repeats_dashes_and_garbage() {
        let log = "\
# gpu    pwr  gtemp  mtemp     sm
# Idx      W      C      C      %
    0     79     40      -      5
    1     70     35      -      0

    0     80     41      -     15
    1     71     35      -      2
garbage here
# gpu    pwr  gtemp  mtemp     sm
# Idx      W      C      C      %
    0     81     41      -     25
";
        let t = parse(log.as_bytes(), "x.log", ClockOptions::default()).unwrap();
        let sm0 = t
            .counters
            .iter()
            .find(|c| c.gpu == 0 && c.metric == "sm")
            .unwrap();
        assert_eq!(
            sm0.samples,
            vec![(0, 5.0), (1_000_000_000, 15.0), (2_000_000_000, 25.0)]
        );
        assert_eq!(sm0.unit, "%");
        assert!(
            !t.counters.iter().any(|c| c.metric == "mtemp"),
            "`-` is missing, not zero"
        );
        assert!(t.warnings[0].contains("line 8"), "{:?}", t.warnings);
        assert!(matches!(
            t.counter_clock,
            Some(CounterClock::Relative { .. })
        ));
    }

    #[test]
    fn date_time_columns_give_epoch_times() {
        let log = "#Date       Time        gpu     sm\n#YYYYMMDD   HH:MM:SS    Idx      %\n 20261129   16:35:32      0     50\n";
        let t = parse(
            log.as_bytes(),
            "x.log",
            ClockOptions {
                utc_offset_s: Some(3600),
            },
        )
        .unwrap();
        assert_eq!(
            t.counters[0].samples[0].0,
            1_795_970_132_000_000_000 - 3_600_000_000_000
        );
    }

    #[test]
    fn date_only_or_time_only_are_numbered() {
        for log in [
            "#Date       gpu     sm\n#YYYYMMDD   Idx      %\n 20261129     0     50\n 20261129     0     60\n",
            "#Time       gpu     sm\n#HH:MM:SS   Idx      %\n 16:35:32     0     50\n 16:35:33     0     60\n",
        ] {
            let t = parse(log.as_bytes(), "x.log", ClockOptions::default()).unwrap();
            assert!(t.warnings.is_empty(), "{:?}", t.warnings);
            assert_eq!(
                t.counters[0].samples,
                vec![(0, 50.0), (1_000_000_000, 60.0)]
            );
        }
    }

    #[test]
    fn old_headers_and_multi_gpu_mem_columns() {
        // Older drivers: `pwr temp`; `-s m` adds fb/bar1; two GPUs interleaved.
        let log = "# gpu   pwr  temp    sm   mem    fb  bar1\n# Idx     W     C     %     %    MB    MB\n    0    60    40    10     5   100     2\n    1    61    41     0     0     0     2\n    0    62    40    12     6   120     2\n    1    63    41     0     0     0     2\n";
        let t = parse(log.as_bytes(), "x.log", ClockOptions::default()).unwrap();
        let temp1 = t
            .counters
            .iter()
            .find(|c| c.gpu == 1 && c.metric == "temp")
            .unwrap();
        assert_eq!(temp1.samples, vec![(0, 41.0), (1_000_000_000, 41.0)]);
        assert_eq!(
            t.counters
                .iter()
                .find(|c| c.gpu == 0 && c.metric == "fb")
                .unwrap()
                .unit,
            "MB"
        );
    }

    #[test]
    fn sampling_period_from_the_timestamps_else_the_default() {
        // dmon -d 2 -o DT: one GPU, a sample every 2 s (one late by a second).
        let log = "#Date       Time        gpu     sm\n#YYYYMMDD   HH:MM:SS    Idx      %\n 20261129   16:35:32      0     50\n 20261129   16:35:34      0     60\n 20261129   16:35:37      0     60\n 20261129   16:35:39      0     60\n";
        let t = parse(log.as_bytes(), "x.log", ClockOptions::default()).unwrap();
        assert_eq!(
            t.meta.capture.counter_period,
            Some(CounterPeriod {
                ns: 2_000_000_000,
                measured: true
            })
        );
        let log = "# gpu sm\n# Idx %\n 0 5\n 0 6\n";
        let t = parse(log.as_bytes(), "x.log", ClockOptions::default()).unwrap();
        assert_eq!(
            t.meta.capture.counter_period,
            Some(CounterPeriod::assumed())
        );
        assert_eq!(t.meta.capture.counter_period_ns(), 1_000_000_000);
        assert!(t.meta.capture.host_threads.is_empty() && !t.meta.capture.kernels);
    }

    #[test]
    fn not_dmon() {
        assert!(parse(b"hello\nworld\n", "x", ClockOptions::default()).is_err());
        assert!(parse(b"# gpu sm\n# Idx %\n", "x", ClockOptions::default()).is_err());
    }
}
