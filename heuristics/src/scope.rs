//! What one analysis reads: the trace, the settings, the analysed window, and each distinct
//! kernel name classified once. The core's computations (the idle engine, the roofline, the
//! stack facts, counters, collectives) take a [`Scope`]; the analysis context
//! ([`crate::context::Ctx`]) adds their shared results on top of it.

use crate::config::Config;
use crate::window::Window;
use tracehound_parsers::Trace;

/// The trace, the settings and the analysed window (computed once).
pub struct Scope<'a> {
    /// The trace.
    pub trace: &'a Trace,
    /// The settings.
    pub config: &'a Config,
    /// The analysed window.
    pub window: Window,
    /// Each distinct kernel name classified once (units, architecture): several rules ask
    /// for every kernel, and a trace has millions of kernels but a few thousand names.
    kernel_classes: std::sync::OnceLock<
        rustc_hash::FxHashMap<tracehound_parsers::StrId, crate::hardware::KernelClass>,
    >,
    /// The trace's CUDA/HIP graph captures, found on first use (the idle engine of every
    /// device and the verdict read them).
    graph_captures: std::sync::OnceLock<crate::phases::GraphCaptures>,
    /// Training, inference or unknown, found on first use (advice depends on it).
    workload: std::sync::OnceLock<crate::phases::Workload>,
    /// The program's framework, found on first use (advice is written in its terms).
    framework: std::sync::OnceLock<crate::phases::Framework>,
    /// torch.compile's compilations, found on first use.
    compilations: std::sync::OnceLock<Vec<crate::phases::Compilation>>,
    /// Correlation ids of copies to or from pageable memory, found on first use: the idle
    /// engine, the starved-kernel pass and launch_bound all ask whether a call blocked.
    pageable_launches: std::sync::OnceLock<rustc_hash::FxHashSet<u64>>,
    /// Each thread's calls as the drain search reads them, built on first use (the
    /// starved-kernel pass and launch_bound).
    blocking_calls: std::sync::OnceLock<crate::blocking::BlockingCalls<'a>>,
}

impl<'a> Scope<'a> {
    /// The scope of one analysis: the window comes from the trace and the settings.
    pub fn new(trace: &'a Trace, config: &'a Config) -> Self {
        Scope {
            trace,
            config,
            window: crate::window::analysed_window(trace, config),
            kernel_classes: std::sync::OnceLock::new(),
            graph_captures: std::sync::OnceLock::new(),
            workload: std::sync::OnceLock::new(),
            framework: std::sync::OnceLock::new(),
            compilations: std::sync::OnceLock::new(),
            pageable_launches: std::sync::OnceLock::new(),
            blocking_calls: std::sync::OnceLock::new(),
        }
    }

    /// The trace's CUDA/HIP graph captures ([`crate::phases::graph_captures`]).
    pub fn graph_captures(&self) -> &crate::phases::GraphCaptures {
        self.graph_captures
            .get_or_init(|| crate::phases::graph_captures(self.trace))
    }

    /// Whether the trace shows training or inference ([`crate::phases::workload`]).
    pub fn workload(&self) -> crate::phases::Workload {
        *self
            .workload
            .get_or_init(|| crate::phases::workload(self.trace))
    }

    /// The traced program's framework ([`crate::phases::framework`]).
    pub fn framework(&self) -> crate::phases::Framework {
        *self
            .framework
            .get_or_init(|| crate::phases::framework(self.trace))
    }

    /// Whether the traced program is a PyTorch program, as far as the capture shows.
    pub fn pytorch(&self) -> bool {
        self.framework() == crate::phases::Framework::PyTorch
    }

    /// Whether the program already runs torch.compile'd code (a compiled region or function
    /// is in the trace): advice to compile is then beside the point.
    pub fn compiled(&self) -> bool {
        self.trace
            .strings
            .matching(|n| {
                n.starts_with("Torch-Compiled Region")
                    || n.starts_with("CompiledFunction")
                    || n.starts_with("## Call CompiledFxGraph")
            })
            .contains(&true)
    }

    /// torch.compile's compilations in the trace ([`crate::phases::compilations`]).
    pub fn compilations(&self) -> &[crate::phases::Compilation] {
        self.compilations
            .get_or_init(|| crate::phases::compilations(self.trace))
    }

    /// The correlation ids of copies to or from pageable memory
    /// ([`crate::blocking::pageable_copy_launches`]): their launch calls block the host.
    pub(crate) fn pageable_launches(&self) -> &rustc_hash::FxHashSet<u64> {
        self.pageable_launches
            .get_or_init(|| crate::blocking::pageable_copy_launches(self.trace))
    }

    /// Each thread's runtime and driver calls and which of them block
    /// ([`crate::blocking::BlockingCalls`]).
    pub(crate) fn blocking_calls(&self) -> &crate::blocking::BlockingCalls<'a> {
        self.blocking_calls.get_or_init(|| {
            crate::blocking::BlockingCalls::new(self.trace, self.pageable_launches())
        })
    }

    /// What the name of a kernel says about its math (see [`crate::hardware::classify`]).
    pub fn kernel_class(&self, name: tracehound_parsers::StrId) -> crate::hardware::KernelClass {
        self.kernel_classes
            .get_or_init(|| {
                let mut names: Vec<tracehound_parsers::StrId> = self
                    .trace
                    .gpu_ops
                    .iter()
                    .filter(|o| o.kind == tracehound_parsers::GpuOpKind::Kernel)
                    .map(|o| o.name)
                    .collect();
                names.sort_unstable();
                names.dedup();
                names
                    .into_iter()
                    .map(|n| (n, crate::hardware::classify(self.trace.str(n))))
                    .collect()
            })
            .get(&name)
            .copied()
            .unwrap_or_default()
    }
}
