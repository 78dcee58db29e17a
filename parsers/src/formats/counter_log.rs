//! What the counter logs (`nvidia-smi dmon`, `--query-gpu`) share: their wall clock, read
//! once here for both, and the trace a log of samples becomes. A helper of those readers,
//! not a reader itself.

use crate::model::*;
use std::collections::BTreeMap;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix epoch ns of a local date and time written at `utc_offset_s` east of UTC.
pub fn epoch_ns(
    y: i64,
    mo: i64,
    d: i64,
    h: i64,
    mi: i64,
    s: f64,
    utc_offset_s: i64,
) -> Option<i64> {
    if !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || !(0..24).contains(&h)
        || !(0..60).contains(&mi)
        || !(0.0..61.0).contains(&s)
    {
        return None;
    }
    // A damaged file can hold any year: one off the ns timeline (it ends in 2262) is no time.
    if !(0..=9999).contains(&y) {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3_600 + mi * 60 - utc_offset_s.clamp(-86_400, 86_400);
    secs.checked_mul(1_000_000_000)?
        .checked_add((s * 1e9).round() as i64)
}

/// Parses `HH:MM:SS[.fff]` into (h, m, s).
pub fn parse_hms(t: &str) -> Option<(i64, i64, f64)> {
    let mut it = t.split(':');
    let h = it.next()?.parse().ok()?;
    let m = it.next()?.parse().ok()?;
    let s = it.next()?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Some((h, m, s))
}

/// Options for reading wall-clock logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClockOptions {
    /// UTC offset of the machine that wrote the log, seconds east of UTC (None: assume UTC).
    pub utc_offset_s: Option<i64>,
}

impl From<&crate::LoadOptions> for ClockOptions {
    fn from(o: &crate::LoadOptions) -> Self {
        ClockOptions {
            utc_offset_s: o.utc_offset_s,
        }
    }
}

/// (unit, samples) of one (GPU, metric).
type Samples = (String, Vec<(i64, f64)>);

/// Accumulates samples into series; one series per (GPU, metric).
#[derive(Default)]
pub(crate) struct SeriesBuilder {
    series: BTreeMap<(i32, String), Samples>,
}

impl SeriesBuilder {
    pub(crate) fn push(&mut self, gpu: i32, metric: &str, unit: &str, ts: i64, v: f64) {
        let e = self
            .series
            .entry((gpu, metric.to_string()))
            .or_insert_with(|| (unit.to_string(), Vec::new()));
        e.1.push((ts, v));
    }

    pub(crate) fn finish(self) -> Vec<CounterSeries> {
        self.series
            .into_iter()
            .map(|((gpu, metric), (unit, mut samples))| {
                samples.sort_by_key(|s| s.0);
                CounterSeries {
                    gpu,
                    metric,
                    unit,
                    samples,
                }
            })
            .collect()
    }
}

/// Builds the trace of a counter log (shared by the dmon and `--query-gpu` readers).
#[allow(clippy::too_many_arguments)]
pub(crate) fn counter_trace(
    source: &str,
    format: &'static SourceFormat,
    format_version: String,
    rows: u64,
    bytes: usize,
    bad: &[usize],
    clock: CounterClock,
    builder: SeriesBuilder,
) -> Parsed {
    let mut trace = Trace {
        source: source.to_string(),
        ..Default::default()
    };
    trace.strings.intern("");
    trace.meta.format = Some(format);
    trace.meta.format_version = format_version;
    trace.stats.events_total = rows;
    trace.stats.bytes_total = bytes as u64;
    trace.stats.bytes_parsed = bytes as u64;
    if !bad.is_empty() {
        let shown: Vec<String> = bad.iter().take(5).map(|l| l.to_string()).collect();
        trace.warnings.push(format!(
            "skipped {} line(s) that do not match the header (line {}{})",
            bad.len(),
            shown.join(", "),
            if bad.len() > 5 { ", ..." } else { "" }
        ));
    }
    trace.counter_clock = Some(clock);
    trace.counters = builder.finish();
    Parsed {
        trace,
        declare: Box::new(move |trace, capture| {
            capture.counter_period = Some(
                match clock {
                    CounterClock::Wall { .. } => measured_period(&trace.counters),
                    CounterClock::Relative { .. } => None,
                }
                .unwrap_or_else(CounterPeriod::assumed),
            );
        }),
    }
}

/// The sampling interval the timestamps show: the median step between consecutive samples of
/// a series, to 10 ms (nvidia-smi's loop adds the query's few milliseconds to the interval it
/// was asked for; dmon stamps whole seconds). None without two samples in a series.
fn measured_period(series: &[CounterSeries]) -> Option<CounterPeriod> {
    let mut steps: Vec<i64> = series
        .iter()
        .flat_map(|c| c.samples.windows(2).map(|w| w[1].0 - w[0].0))
        .filter(|&d| d > 0)
        .collect();
    if steps.is_empty() {
        return None;
    }
    let mid = steps.len() / 2;
    let median = *steps.select_nth_unstable(mid).1;
    const TO: i64 = 10_000_000;
    Some(CounterPeriod {
        ns: ((median + TO / 2) / TO).max(1) * TO,
        measured: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_year_off_the_timeline_is_no_time() {
        // Nanoseconds since 1970 in an i64 end in April 2262: a later year (a flipped digit
        // in a damaged log) is no time, not an overflow.
        assert!(epoch_ns(2262, 1, 1, 0, 0, 0.0, 0).is_some());
        assert!(epoch_ns(9999, 12, 31, 23, 59, 59.0, 0).is_none());
        assert_eq!(epoch_ns(99_999, 1, 1, 0, 0, 0.0, 0), None);
        assert_eq!(epoch_ns(-5, 1, 1, 0, 0, 0.0, 0), None);
    }

    #[test]
    fn epoch() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        // 2026-11-29 16:35:32 UTC
        assert_eq!(
            epoch_ns(2026, 11, 29, 16, 35, 32.0, 0),
            Some(1_795_970_132_000_000_000)
        );
        assert_eq!(
            epoch_ns(2026, 11, 29, 18, 35, 32.0, 7200),
            Some(1_795_970_132_000_000_000)
        );
        assert_eq!(epoch_ns(2026, 13, 1, 0, 0, 0.0, 0), None);
        assert_eq!(parse_hms("16:35:23.878"), Some((16, 35, 23.878)));
    }
}
