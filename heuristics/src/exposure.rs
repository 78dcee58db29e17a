//! How much of a GPU operation's time the run would get back if it ran faster.
//!
//! A kernel shortened by `s` pulls the operations after it earlier only as far as each was
//! ready: an operation launched after its predecessor ended (the host was the bottleneck
//! there) starts when its launch lands, whatever ran before it. So what shortening operation
//! `i` gives back is `s` capped by the least slack of the operations after it, where an
//! operation's slack is how long before its start it had been launched (the end of its launch
//! call). The cap stops where the host waited for the GPU (a sync that drained the queue: a
//! faster GPU returns it sooner, and every launch after it comes sooner too) and at a step's
//! end, and operations running beside their predecessor (another stream) or launched by no
//! recorded call (a graph replay) do not limit it. Under a profiler the host launches more
//! slowly than without it, so the slack it shows is smaller than the run's.
//!
//! Efficiency findings price GPU time; this turns that price into time the run gets back, so a
//! host-bound window does not promise a GPU speed-up that would only move idle time around. On
//! a CIFAR-size FP32 network at batch 32 (H200, `generators/fp32_small_conv.py`), FP16 saved
//! 0.97 ms of kernel time a forward but 0.15 ms of its wall time: the host held it.

use crate::context::Ctx;
use tracehound_parsers::NONE;

/// Per GPU operation of one device in the window (by index in `trace.gpu_ops`), the most that
/// shortening it gives back.
pub struct Exposure {
    cap: rustc_hash::FxHashMap<u32, i64>,
}

impl Exposure {
    /// Computed over `device`'s operations that start in the analysed window.
    pub fn of(cx: &Ctx, device: i32) -> Self {
        let t = cx.trace;
        let w = &cx.window;
        let ops = t.device_ops(device);
        let first = ops.partition_point(|&i| t.gpu_ops[i as usize].start < w.start);
        let last = ops.partition_point(|&i| t.gpu_ops[i as usize].start < w.end);
        let ops = &ops[first..last];
        // Operations the host launched after waiting for the GPU in a sync: short gaps from
        // the starved pass, long ones from the idle attribution (a gap ends where its next
        // operation starts).
        let mut after_sync: rustc_hash::FxHashSet<u32> = cx
            .starved()
            .iter()
            .filter(|s| s.device == device)
            .flat_map(|s| s.drained().map(|k| k.op))
            .collect();
        let drained_ends: rustc_hash::FxHashSet<i64> = cx
            .idle()
            .iter()
            .filter(|d| d.device == device)
            .flat_map(|d| d.costly_gaps())
            .filter(|g| g.drained_by.is_some())
            .map(|g| g.end)
            .collect();
        for &i in ops {
            if drained_ends.contains(&t.gpu_ops[i as usize].start) {
                after_sync.insert(i);
            }
        }
        let mut step_ends: Vec<i64> = w.steps_overlapping(t).map(|s| s.end).collect();
        step_ends.sort_unstable();
        let mut cap = rustc_hash::FxHashMap::default();
        let mut least = i64::MAX;
        for k in (0..ops.len()).rev() {
            let i = ops[k];
            let op = &t.gpu_ops[i as usize];
            cap.insert(i, least.min(op.dur()).max(0));
            let Some(&p) = k.checked_sub(1).map(|j| &ops[j]) else {
                break;
            };
            let prev = &t.gpu_ops[p as usize];
            let launch = t.index.op_launch.get(i as usize).copied().unwrap_or(NONE);
            let crosses_step = step_ends
                .get(step_ends.partition_point(|&e| e <= prev.start))
                .is_some_and(|&e| e <= op.start);
            if after_sync.contains(&i) || crosses_step {
                least = i64::MAX;
            } else if op.start >= prev.end && launch != NONE {
                let slack = op.start - t.host_spans[launch as usize].end.min(op.start);
                least = least.min(slack);
            }
        }
        Exposure { cap }
    }

    /// What shortening operation `i` by `saving` ns gives back. Operations outside the window
    /// give nothing.
    pub fn gain(&self, i: u32, saving: i64) -> i64 {
        self.cap.get(&i).map_or(0, |&c| saving.clamp(0, c))
    }
}
