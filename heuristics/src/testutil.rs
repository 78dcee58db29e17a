//! Small hand-made traces for the rules' unit tests.

use crate::Finding;
use crate::config::Config;
use crate::context::Ctx;
use crate::rules::Rule;
use tracehound_parsers::*;

/// Runs one rule over `t` with the default settings and the window they give.
pub fn check(rule: &dyn Rule, t: &Trace) -> Vec<Finding> {
    let config = Config::default();
    rule.check(&Ctx::new(t, &config))
}

/// A trace builder: one host thread (pid 1, tid 1), GPU ops on device 0.
pub struct TB {
    pub t: Trace,
    corr: u64,
}

impl TB {
    pub fn new() -> Self {
        let mut t = Trace::default();
        t.strings.intern("");
        TB { t, corr: 0 }
    }

    pub fn span(&mut self, kind: HostKind, name: &str, start: i64, end: i64) -> &mut Self {
        let name = self.t.strings.intern(name);
        self.t
            .host_spans
            .push(HostSpan::new(kind, 1, 1, start, end, name));
        self
    }

    /// A GPU op launched by a runtime call at `launch` (1 µs long) on the host thread.
    pub fn op(
        &mut self,
        kind: GpuOpKind,
        name: &str,
        stream: i64,
        start: i64,
        end: i64,
        launch: Option<i64>,
    ) -> &mut Self {
        self.corr += 1;
        let corr = self.corr;
        if let Some(l) = launch {
            let rt = if kind == GpuOpKind::Memcpy {
                "cudaMemcpyAsync"
            } else {
                "cudaLaunchKernel"
            };
            self.span(HostKind::Runtime, rt, l, l + 1_000);
            self.t.host_spans.last_mut().unwrap().link = corr;
        }
        let (direction, src_kind, dst_kind) = kineto::parse_memcpy_name(name);
        let name = self.t.strings.intern(name);
        self.t.gpu_ops.push(GpuOp {
            correlation: corr,
            direction,
            src_kind,
            dst_kind,
            ..GpuOp::new(kind, 0, stream, start, end, name)
        });
        self
    }

    pub fn bytes(&mut self, b: u64) -> &mut Self {
        self.t.gpu_ops.last_mut().unwrap().bytes = b;
        self
    }

    pub fn build(&mut self) -> Trace {
        let mut t = std::mem::take(&mut self.t);
        t.finish();
        t
    }
}
