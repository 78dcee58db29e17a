//! Several files of one run analysed together: a GPU trace (Kineto or nsys) and the
//! nvidia-smi logs captured beside it. Counter series are moved onto the trace's timeline by
//! absolute time: the trace's epoch offset (`baseTimeNanoseconds`, nsys session start, or
//! epoch-µs timestamps) against the logs' wall clock (UTC unless `--utc-offset` says otherwise).

use crate::model::*;

/// Attaches the counters and inventory of `aux` to `primary`. Returns a note describing the
/// alignment, or an error saying why the counters could not be aligned (the inventory, which
/// has no time, is attached regardless).
pub fn attach(primary: &mut Trace, aux: &Trace) -> Result<String, String> {
    primary.inventory.extend(aux.inventory.iter().cloned());
    let name = std::path::Path::new(&aux.source)
        .file_name()
        .map_or(aux.source.clone(), |n| n.to_string_lossy().into_owned());
    if aux.counters.is_empty() {
        return Ok(format!("{name}: GPU inventory attached"));
    }
    let offset = match aux.counter_clock {
        Some(CounterClock::Wall { utc_offset_s }) => utc_offset_s,
        _ => {
            return Err(format!(
                "{name}: its samples carry no date (record with `nvidia-smi dmon -o DT`), so they cannot be aligned with {}",
                primary.source
            ));
        }
    };
    let Some(epoch) = primary.meta.epoch_offset_ns else {
        return Err(format!(
            "{name}: {} has no absolute clock to align with",
            primary.source
        ));
    };
    let Some((t0, t1)) = primary.span() else {
        return Err(format!("{name}: {} is empty", primary.source));
    };
    let shifted: Vec<CounterSeries> = aux
        .counters
        .iter()
        .map(|c| CounterSeries {
            samples: c.samples.iter().map(|&(t, v)| (t - epoch, v)).collect(),
            ..c.clone()
        })
        .collect();
    // dmon stamps whole seconds: allow a sample of slack on both sides.
    const SLACK: i64 = 2_000_000_000;
    let overlaps = shifted
        .iter()
        .flat_map(|c| c.samples.iter())
        .any(|&(t, _)| t >= t0 - SLACK && t <= t1 + SLACK);
    if !overlaps {
        return Err(format!(
            "{name} does not overlap {} in time (assuming its wall clock is UTC{:+}): not attached; set --utc-offset to the zone the log was written in",
            primary.source,
            offset as f64 / 3600.0
        ));
    }
    primary.counters.extend(shifted);
    primary
        .counters
        .sort_by(|a, b| (a.gpu, &a.metric).cmp(&(b.gpu, &b.metric)));
    primary.counter_clock = aux.counter_clock;
    primary.meta.capture.counter_period = aux.meta.capture.counter_period;
    Ok(format!(
        "{name}: aligned by wall clock (log time taken as UTC{:+} h; a sample stamped S covers the second from S)",
        offset as f64 / 3600.0
    ))
}
