//! Python numbers made device tensors inside the step: `torch.tensor(c, device="cuda")`, a
//! scalar's `.to("cuda")`, `torch.tensor(w).cuda()` for a loss weight. Each is a copy of a few
//! bytes from pageable host memory, launched by a framework operator (`aten::to` and its
//! `aten::copy_`), and without `non_blocking=True` PyTorch waits for the stream after it
//! (`cudaStreamSynchronize` inside `aten::copy_`). In a step whose host is the bound, the GPU
//! waits for each copy's launch; in a step whose GPU is the bound, the queue drains at each
//! sync and the GPU waits for the next launch. A Python number passed as it is needs neither.
//! Found once per analysis ([`crate::context::Ctx::constant_uploads`]): the constant_uploads
//! rule prices those waits, and launch_bound and sync_stalls leave them to it where it reports.

use crate::scope::Scope;
use rustc_hash::FxHashSet;
use tracehound_parsers::{CopyDirection, GpuOpKind, NONE};

/// Largest copy counted, bytes: a scalar or a short list of numbers (8 doubles), never a
/// batch. Above it a copy's bytes take time of their own and pageable_memcpy prices them.
pub(crate) const MAX_BYTES: u64 = 64;

/// Copies a step from which the uploads are a pattern of the step rather than a one-off
/// (a learning rate read once): a loss weight per head, a constant per layer.
pub(crate) const MIN_PER_STEP: usize = 8;

/// Share of the window the waits must reach for the rule to report, and for launch_bound and
/// sync_stalls to leave them to it.
pub(crate) const MIN_SHARE: f64 = 0.01;

/// One device's constant uploads.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceUploads {
    /// Device index.
    pub device: i32,
    /// Copies of at most [`MAX_BYTES`] to the device launched by a framework operator in the
    /// window.
    pub copies: usize,
    /// The GPU's waits they cause, (GPU op, the uploading operator's outermost span, idle
    /// before the GPU op, ns): copies that started on an idle GPU with nothing queued, waiting
    /// for their launch, and GPU ops launched onto a queue that an upload's own sync drained.
    pub waits: Vec<(u32, u32, i64)>,
    /// Of [`Self::waits`], those after a drain.
    pub drained: usize,
    /// The GPU ops of [`Self::waits`].
    ops: FxHashSet<u32>,
    /// Whether they are a pattern of the step ([`MIN_PER_STEP`]) and their waits reach
    /// [`MIN_SHARE`] of the window.
    pub reported: bool,
}

/// The window's constant uploads, by device.
#[derive(Debug, Clone, Default)]
pub(crate) struct Uploads {
    /// Devices with such copies, in device order.
    pub devices: Vec<DeviceUploads>,
}

impl Uploads {
    /// Whether GPU op `op` on `device` waited because of a constant upload of a reported
    /// device (for its own launch, or after the upload's sync drained the queue): its wait is
    /// the constant_uploads finding's.
    pub(crate) fn owns(&self, device: i32, op: u32) -> bool {
        self.devices
            .iter()
            .any(|d| d.device == device && d.reported && d.ops.contains(&op))
    }
}

/// Whether `g` is a copy of at most [`MAX_BYTES`] to the device: a Python number or a short
/// list of them made a device tensor.
pub(crate) fn is_upload(g: &tracehound_parsers::GpuOp) -> bool {
    g.kind == GpuOpKind::Memcpy && g.direction == CopyDirection::HtoD && g.bytes <= MAX_BYTES
}

impl Uploads {
    /// Adds device `device`'s uploads: its copies in the window, then of its GPU ops that
    /// waited for a slow host (`launch_waits`: GPU op index and idle before it, ns;
    /// launch_bound's kind of wait) the copies, and of those launched after a sync drained the
    /// queue (`drained`: GPU op, the sync's host span, idle before it) those whose sync was made
    /// inside an uploading operator. `steps`: the window's iterations (at least 1).
    pub(crate) fn add_device(
        &mut self,
        cx: &Scope,
        device: i32,
        steps: usize,
        launch_waits: impl Iterator<Item = (u32, i64)>,
        drained: impl Iterator<Item = (u32, u32, i64)>,
    ) {
        let t = cx.trace;
        let w = &cx.window;
        let launched = |op: usize| {
            t.index
                .op_outer_cpu_op
                .get(op)
                .copied()
                .filter(|&o| o != NONE)
        };
        // The copies' uploading operators (outermost spans), one entry a copy.
        let ups: Vec<u32> = t
            .device_ops(device)
            .iter()
            .filter(|&&i| {
                let g = &t.gpu_ops[i as usize];
                g.start >= w.start && g.end <= w.end && is_upload(g)
            })
            .filter_map(|&i| launched(i as usize))
            .collect();
        let copies = ups.len();
        if copies == 0 {
            return;
        }
        let uploading: FxHashSet<u32> = ups.into_iter().collect();
        let mut waits: Vec<(u32, u32, i64)> = launch_waits
            .filter(|&(op, _)| t.gpu_ops.get(op as usize).is_some_and(is_upload))
            .filter_map(|(op, gap)| launched(op as usize).map(|o| (op, o, gap)))
            .collect();
        let before = waits.len();
        waits.extend(drained.filter_map(|(op, sync, gap)| {
            let o = t.outermost_cpu_op(sync);
            uploading.contains(&o).then_some((op, o, gap))
        }));
        let drained = waits.len() - before;
        let waits_ns: i64 = waits.iter().map(|w| w.2).sum();
        self.devices.push(DeviceUploads {
            device,
            copies,
            reported: copies >= MIN_PER_STEP * steps.max(1) && w.share(waits_ns) >= MIN_SHARE,
            ops: waits.iter().map(|w| w.0).collect(),
            waits,
            drained,
        });
    }
}
