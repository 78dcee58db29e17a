//! What the Memory screen draws, computed once when a trace is opened: per device, the
//! allocated and reserved series, out-of-memory events and allocator calls. Kept apart from
//! the screen (`memory.rs`), which reads the app's state, so that the state holding these
//! views does not import the screen that draws them.

use tracehound_parsers::HostKind;

/// Series of one device, in (ms from the window start, GiB): allocated, reserved, OOMs,
/// cudaMalloc/cudaFree calls (on the x axis).
pub struct MemoryView {
    pub device: i32,
    pub allocated: Vec<(f64, f64)>,
    pub reserved: Vec<(f64, f64)>,
    pub ooms: Vec<(f64, f64)>,
    pub calls: Vec<(f64, f64)>,
    pub peak: (f64, f64),
}

/// At most this many points per series: the chart has fewer columns than that anyway.
const MAX_POINTS: usize = 4000;

/// The views of every device with allocator events, computed once at load.
pub fn build(t: &tracehound_parsers::Trace, w: &tracehound_heuristics::Window) -> Vec<MemoryView> {
    let ms = |ts: i64| (ts - w.start) as f64 / 1e6;
    tracehound_heuristics::views::memory_series(t, w, Some(MAX_POINTS))
        .into_iter()
        .map(|m| {
            // The first time the peak is reached.
            let peak = m
                .reserved
                .iter()
                .copied()
                .fold(None::<(f64, f64)>, |best, p| match best {
                    Some(b) if b.1 >= p.1 => Some(b),
                    _ => Some(p),
                })
                .unwrap_or((0.0, 0.0));
            let calls = t
                .host_spans
                .iter()
                .filter(|s| {
                    matches!(s.kind, HostKind::Runtime | HostKind::Driver)
                        && s.start >= w.start
                        && s.start <= w.end
                        && {
                            let n = t.str(s.name);
                            n.starts_with("cudaMalloc")
                                || n.starts_with("cudaFree")
                                || n.starts_with("hipMalloc")
                                || n.starts_with("hipFree")
                        }
                })
                .map(|s| (ms(s.start), 0.0))
                .collect();
            MemoryView {
                device: m.device,
                allocated: m.allocated,
                ooms: m.ooms,
                reserved: m.reserved,
                calls,
                peak,
            }
        })
        .collect()
}
