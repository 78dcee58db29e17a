//! Views of the analysed window that printers draw (the HTML report's charts, the TUI's
//! screens): computed here from the model, so that no printer does analysis of its own.

use crate::window::{Window, busy_intervals, device_memory, memory_devices};
use tracehound_parsers::{MemorySample, Trace};

/// The share of each of `columns` equal slices of the window during which `device` ran GPU
/// work (0..1), for a timeline drawn that many columns wide.
pub fn busy_columns(trace: &Trace, device: i32, window: &Window, columns: usize) -> Vec<f64> {
    let mut busy = vec![0f64; columns];
    if window.len() <= 0 || columns == 0 {
        return busy;
    }
    let width = columns as f64;
    let x = |t: i64| ((t - window.start) as f64 / window.len() as f64 * width).clamp(0.0, width);
    for iv in busy_intervals(trace, device, window) {
        let (a0, a1) = (x(iv.0), x(iv.1));
        let mut c = a0.floor() as usize;
        while (c as f64) < a1 && c < busy.len() {
            let ov = a1.min(c as f64 + 1.0) - a0.max(c as f64);
            busy[c] += ov.max(0.0);
            c += 1;
        }
    }
    busy
}

/// A device's caching-allocator memory over the window: points of (ms from the window's
/// start, GiB).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemorySeries {
    /// The device.
    pub device: i32,
    /// Memory reserved by the caching allocator.
    pub reserved: Vec<(f64, f64)>,
    /// Memory allocated to tensors.
    pub allocated: Vec<(f64, f64)>,
    /// Out-of-memory events: when, and what was reserved then.
    pub ooms: Vec<(f64, f64)>,
}

/// The memory series of every device with allocator events, ascending by device, each series
/// thinned to about `max_points` (every k-th event; None keeps them all).
pub fn memory_series(
    trace: &Trace,
    window: &Window,
    max_points: Option<usize>,
) -> Vec<MemorySeries> {
    let ms = |ts: i64| (ts - window.start) as f64 / 1e6;
    let gib = |b: i64| b as f64 / (1u64 << 30) as f64;
    memory_devices(trace)
        .into_iter()
        .map(|device| {
            let samples = device_memory(trace, window, device);
            let stride = max_points.map_or(1, |m| (samples.len() / m.max(1)).max(1));
            let pick = |f: &dyn Fn(&MemorySample) -> Option<i64>| {
                samples
                    .iter()
                    .step_by(stride)
                    .filter_map(|m| f(m).map(|v| (ms(m.ts), gib(v))))
                    .collect::<Vec<_>>()
            };
            MemorySeries {
                device,
                reserved: pick(&|m| m.total_reserved.get()),
                allocated: pick(&|m| m.total_allocated.get()),
                ooms: samples
                    .iter()
                    .filter(|m| m.oom)
                    .map(|m| (ms(m.ts), gib(m.total_reserved.get().unwrap_or(0))))
                    .collect(),
            }
        })
        .collect()
}
