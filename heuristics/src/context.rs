//! The analysis context: what every rule, the summary and the views read. It holds the
//! trace, the settings and the analysed window, and computes the shared queries (the idle
//! accounting, collective exposure, the roofline, the memory-bound operators, the software
//! stack, kernel classes) once, on first use, so rules that read the same fact share one
//! computation.

use crate::config::Config;
use crate::finding::Finding;
use crate::idle;
use crate::scope::Scope;
use tracehound_parsers::Trace;

/// What a rule gets: the [`Scope`] (trace, settings, window; its fields read through
/// `cx.trace`, `cx.window` ...) and the core's shared results, each computed on first use.
pub struct Ctx<'a> {
    /// The trace, the settings and the window.
    scope: Scope<'a>,
    /// Per-device idle analysis, computed on first use: the idle-gap rule and the summary's
    /// verdict both need it, and classifying every gap is the costliest step of analysis.
    idle: std::sync::OnceLock<Vec<idle::DeviceIdle>>,
    /// Collective time and its exposed part per device, computed on first use: the
    /// exposed_communication rule and the summary both read it.
    exposure: std::sync::OnceLock<Vec<crate::collectives::Exposure>>,
    /// Matrix operators on the roofline per device, computed on first use: the roofline
    /// rule and the summary's table read it.
    roofline: std::sync::OnceLock<Vec<crate::roofline::DeviceRoofline>>,
    /// The software stack's facts, computed on first use: the software_stack rule and the
    /// summary's stack section read them.
    stack: std::sync::OnceLock<Vec<crate::stack::StackFact>>,
    /// Matrix operator calls per device, computed on first use: the roofline and the
    /// tensor_cores rule read them.
    matrix: std::sync::OnceLock<Vec<(i32, crate::roofline::DeviceCalls)>>,
    /// Non-matrix operators against the HBM roof per device, computed on first use: the
    /// fusion rule, the power rule, the summary's table and the verdict read them.
    membound: std::sync::OnceLock<crate::membound::Membound>,
    /// FFT calls per device, for the accounting's FFT family and fft_lengths.
    ffts: std::sync::OnceLock<Vec<(i32, Vec<crate::fft::FftCall>)>>,
    /// Kernels that waited on an idle GPU with nothing queued, computed on first use: the
    /// launch_bound and sync_stalls rules split them by why the queue was empty.
    starved: std::sync::OnceLock<Vec<crate::starved::DeviceStarved>>,
    /// Where the GPU time goes by operator, Python frame and kernel, computed on first use:
    /// the hot_operator rule and the summary read it.
    accounting: std::sync::OnceLock<Vec<crate::accounting::DeviceAccounting>>,
    /// The optimizer calls, for optimizer_overhead and launch_bound.
    optimizer: std::sync::OnceLock<crate::optimizer::OptimizerCalls>,
    /// Activation checkpointing's recomputation, for recomputation and launch_bound.
    recomputation: std::sync::OnceLock<crate::checkpointing::Recomputation>,
    /// Loops over tensor lists, for tensor_loop and launch_bound.
    tensor_loops: std::sync::OnceLock<crate::tensor_loops::TensorLoops>,
    /// Python numbers copied to the device, for constant_uploads, launch_bound and sync_stalls.
    uploads: std::sync::OnceLock<crate::uploads::Uploads>,
    /// One-hot matrix products, for hot_operator and copy_hotspots.
    onehot: std::sync::OnceLock<Vec<crate::onehot::OneHotProduct>>,
    onehot_priced: std::sync::OnceLock<Vec<(i32, crate::onehot::Priced)>>,
}

impl<'a> std::ops::Deref for Ctx<'a> {
    type Target = Scope<'a>;
    fn deref(&self) -> &Scope<'a> {
        &self.scope
    }
}

impl<'a> Ctx<'a> {
    /// The context of one analysis: the window comes from the trace and the settings.
    pub fn new(trace: &'a Trace, config: &'a Config) -> Self {
        Ctx {
            scope: Scope::new(trace, config),
            idle: std::sync::OnceLock::new(),
            exposure: std::sync::OnceLock::new(),
            roofline: std::sync::OnceLock::new(),
            stack: std::sync::OnceLock::new(),
            matrix: std::sync::OnceLock::new(),
            membound: std::sync::OnceLock::new(),
            ffts: std::sync::OnceLock::new(),
            starved: std::sync::OnceLock::new(),
            accounting: std::sync::OnceLock::new(),
            optimizer: std::sync::OnceLock::new(),
            recomputation: std::sync::OnceLock::new(),
            tensor_loops: std::sync::OnceLock::new(),
            uploads: std::sync::OnceLock::new(),
            onehot: std::sync::OnceLock::new(),
            onehot_priced: std::sync::OnceLock::new(),
        }
    }

    /// Non-matrix operators (elementwise, reductions, norms, copies, optimizer kernels) of
    /// every device against its HBM roof, and how each device's kernel time splits
    /// ([`crate::membound`]).
    pub fn membound(&self) -> &crate::membound::Membound {
        self.membound
            .get_or_init(|| crate::membound::membound(self))
    }

    /// Kernels that started on an idle GPU with nothing queued, per device
    /// ([`crate::starved`]).
    pub fn starved(&self) -> &[crate::starved::DeviceStarved] {
        self.starved.get_or_init(|| {
            tracehound_parsers::timing::timed("starved kernels", || crate::starved::starved(self))
        })
    }

    /// The window's optimizer calls and the kernels they queued
    /// ([`crate::optimizer::scan`]).
    pub(crate) fn optimizer_calls(&self) -> &crate::optimizer::OptimizerCalls {
        self.optimizer.get_or_init(|| crate::optimizer::scan(self))
    }

    /// The window's recomputed forward operators and their cost
    /// ([`crate::checkpointing::scan`]).
    pub(crate) fn recomputation(&self) -> &crate::checkpointing::Recomputation {
        self.recomputation
            .get_or_init(|| crate::checkpointing::scan(self))
    }

    /// The window's loops over tensor lists and the waits for their launches
    /// ([`crate::tensor_loops::scan`]).
    pub(crate) fn tensor_loops(&self) -> &crate::tensor_loops::TensorLoops {
        self.tensor_loops.get_or_init(|| {
            let mut loops = crate::tensor_loops::scan(self);
            if !loops.runs.is_empty() {
                for dev in self.starved() {
                    let waits = dev.launch_bound().map(|s| (s.op, s.gap_ns));
                    loops.add_device(self.trace, &self.window, dev.device, waits);
                }
            }
            loops
        })
    }

    /// The window's copies of Python numbers to the device and the GPU's waits they cause
    /// ([`crate::uploads::Uploads::add_device`]).
    pub(crate) fn constant_uploads(&self) -> &crate::uploads::Uploads {
        self.uploads.get_or_init(|| {
            let mut uploads = crate::uploads::Uploads::default();
            // PyTorch captures only: the remedy is a Python number passed as it is.
            if !self.pytorch() {
                return uploads;
            }
            // Iterations: the step markers, else the optimizer's steps (a short capture of a
            // toy model copies its few-byte batch and labels once an iteration: data, not
            // constants).
            let steps = match self.window.steps_in(self.trace) {
                0 => self.optimizer_calls().steps(),
                n => n,
            };
            for dev in self.starved() {
                uploads.add_device(
                    self,
                    dev.device,
                    steps,
                    dev.launch_bound().map(|s| (s.op, s.gap_ns)),
                    dev.drained().map(|s| (s.op, s.drained_by, s.gap_ns)),
                );
            }
            uploads
        })
    }

    /// The window's one-hot matrix products ([`crate::onehot::products`]).
    pub(crate) fn onehot_products(&self) -> &[crate::onehot::OneHotProduct] {
        self.onehot.get_or_init(|| crate::onehot::products(self))
    }

    /// The one-hot products' cost on each device where they hold enough of its GPU time to be
    /// reported ([`crate::onehot::priced`]): hot_operator reports them, copy_hotspots leaves
    /// their casts out there.
    pub(crate) fn onehot_priced(&self, device: i32) -> Option<&crate::onehot::Priced> {
        self.onehot_priced
            .get_or_init(|| {
                let groups = self.onehot_products();
                if groups.is_empty() {
                    return Vec::new();
                }
                self.accounting()
                    .iter()
                    .filter_map(|a| {
                        crate::onehot::priced(self, groups, a.device, a.gpu_ns)
                            .map(|p| (a.device, p))
                    })
                    .collect()
            })
            .iter()
            .find(|(d, _)| *d == device)
            .map(|(_, p)| p)
    }

    /// Where each device's GPU time goes ([`crate::accounting`]).
    pub fn accounting(&self) -> &[crate::accounting::DeviceAccounting] {
        self.accounting.get_or_init(|| {
            let (membound, matrix) = (self.membound(), self.all_matrix_calls());
            let ffts = self.all_fft_calls();
            tracehound_parsers::timing::timed("accounting", || {
                crate::accounting::accounting(self, membound, matrix, ffts)
            })
        })
    }

    /// FFT calls with recorded geometry of every device in the window ([`crate::fft`]).
    fn all_fft_calls(&self) -> &[(i32, Vec<crate::fft::FftCall>)] {
        self.ffts.get_or_init(|| {
            self.trace
                .devices()
                .into_iter()
                .map(|d| (d, crate::fft::calls(self, d)))
                .filter(|(_, c)| !c.is_empty())
                .collect()
        })
    }

    /// FFT calls of `device` in the window.
    pub(crate) fn fft_calls(&self, device: i32) -> &[crate::fft::FftCall] {
        crate::fft::calls_of(self.all_fft_calls(), device)
    }

    /// Matrix operator calls (with recorded shapes) of every device in the window.
    fn all_matrix_calls(&self) -> &[(i32, crate::roofline::DeviceCalls)] {
        self.matrix.get_or_init(|| {
            use rayon::prelude::*;
            self.trace
                .devices()
                .into_par_iter()
                .map(|d| (d, crate::roofline::matrix_calls(self, d)))
                .collect()
        })
    }

    /// Matrix operator calls (with recorded shapes) of `device` in the window.
    pub(crate) fn matrix_calls(&self, device: i32) -> &crate::roofline::DeviceCalls {
        crate::roofline::calls_of(self.all_matrix_calls(), device)
    }

    /// The software stack, layer by layer ([`crate::stack::stack_facts`]).
    pub fn stack(&self) -> &[crate::stack::StackFact] {
        self.stack.get_or_init(|| crate::stack::stack_facts(self))
    }

    /// Matrix operators with recorded shapes on each device's roofline.
    pub fn roofline(&self) -> &[crate::roofline::DeviceRoofline] {
        self.roofline
            .get_or_init(|| crate::roofline::roofline(self, self.all_matrix_calls()))
    }

    /// Collective time per device that ran collectives in the window, and the part of it no
    /// other GPU work overlapped.
    pub fn exposure(&self) -> &[crate::collectives::Exposure] {
        self.exposure
            .get_or_init(|| crate::collectives::exposure(self.trace, &self.window))
    }

    /// The idle accounting, computing it if no rule did, taken out of the context.
    pub fn into_idle(self) -> Vec<idle::DeviceIdle> {
        self.idle();
        self.idle.into_inner().unwrap_or_default()
    }

    /// Idle accounting of every device that ran GPU work, ascending by device.
    pub fn idle(&self) -> &[idle::DeviceIdle] {
        self.idle.get_or_init(|| {
            use rayon::prelude::*;
            self.trace
                .devices()
                .into_par_iter()
                .map(|d| idle::analyse_device(self, d))
                .collect()
        })
    }
}

/// A finding of `rule` (the rule module's `ID`) with its impact, share and severity set from
/// the window; the caller fills breakdown, instances, advice and metrics, and the subject
/// when the rule makes more than one finding per device.
pub(crate) fn new_finding(
    cx: &Ctx,
    rule: &'static str,
    device: Option<i32>,
    title: String,
    impact_ns: i64,
    confidence: crate::finding::Confidence,
    evidence: String,
) -> Finding {
    let share = cx.window.share(impact_ns);
    Finding {
        id: String::new(),
        rule,
        subject: None,
        title,
        severity: crate::finding::Severity::from_share(share),
        impact_ns,
        impact_share: share,
        confidence,
        device,
        evidence,
        breakdown: Vec::new(),
        instances: Vec::new(),
        advice: Vec::new(),
        metrics: Default::default(),
    }
}

/// Breakdown rows from `(label, count, time)` groups, largest time first (ties by label),
/// each with its share of `total_ns`, at most `cx.config.max_rows`.
pub(crate) fn rows_by_time(
    cx: &Ctx,
    groups: impl IntoIterator<Item = (String, (u64, i64))>,
    total_ns: i64,
) -> Vec<crate::finding::Row> {
    rows_with_frames(
        cx,
        groups.into_iter().map(|(l, v)| ((l, None), v)),
        total_ns,
    )
}

/// " (1.2 ms a step)" for a saving of `ns` over the window's steps, or nothing without steps.
pub(crate) fn per_step_note(cx: &Ctx, ns: f64) -> String {
    crate::finding::a_step(ns, cx.window.steps_in(cx.trace))
        .map(|x| format!(" ({x})"))
        .unwrap_or_default()
}

/// [`rows_by_time`] from `((label, Python frame), (count, time))` groups.
pub(crate) fn rows_with_frames(
    cx: &Ctx,
    groups: impl IntoIterator<Item = ((String, Option<String>), (u64, i64))>,
    total_ns: i64,
) -> Vec<crate::finding::Row> {
    let mut rows: Vec<crate::finding::Row> = groups
        .into_iter()
        .map(
            |((label, python_frame), (count, time_ns))| crate::finding::Row {
                label,
                count,
                time_ns,
                bytes: None,
                python_frame,
                cause: None,
                share: Some(time_ns as f64 / total_ns.max(1) as f64),
            },
        )
        .collect();
    rows.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.label.cmp(&b.label)));
    rows.truncate(cx.config.max_rows);
    rows
}
