//! torch.compile compiling inside the window: how many compilations, which steps paid for
//! them, the input shapes that triggered each, and the GPU idle time they cost.
//!
//! Reads torch.compile's own spans ([`crate::phases::compilations`]): `entire_frame_compile`
//! (Dynamo traces a frame, AOTAutograd and Inductor compile its forward) and
//! `entire_backward_compile` (the backward, compiled lazily at its first backward). A frame
//! compile whose graph runs as `Torch-Compiled Region: N/k` with k ≥ 1 is a recompilation of
//! frame N; the shapes are those of the compiled graph's inputs that differ from the graph
//! that ran before it. Impact: GPU idle time the idle engine measured inside compilation and
//! Inductor autotuning (the same time idle_gaps shows under "torch.compile compilation").

use super::Rule;
use crate::context::{Ctx, new_finding};
use crate::finding::{Confidence, Instance, Row, fmt_ns, metrics};
use crate::idle::CauseKind;
use crate::phases::CompileKind;

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "recompilation";

/// The rule.
pub struct Recompilation;

impl Rule for Recompilation {
    fn needs_whole_timeline(&self) -> bool {
        true
    }

    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "torch.compile compiling or recompiling inside the window: count, steps, new input shapes and the GPU time it cost"
    }

    fn uses_idle(&self) -> bool {
        true
    }

    fn check(&self, cx: &Ctx) -> Vec<crate::finding::Finding> {
        let w = &cx.window;
        let all: Vec<_> = cx
            .compilations()
            .iter()
            .filter(|c| c.end > w.start && c.start < w.end)
            .collect();
        if all.is_empty() {
            return Vec::new();
        }
        let steps = &cx.trace.steps;
        let step_of = |t: i64| {
            steps
                .iter()
                .find(|s| s.start <= t && t < s.end)
                .map(|s| s.number)
        };
        // GPU idle time measured inside compilation, on the device that lost most.
        let idle_by_device: Vec<(i32, i64)> = cx
            .idle()
            .iter()
            .map(|d| {
                let ns = d
                    .costly_gaps()
                    .flat_map(|g| &g.parts)
                    .filter(|p| p.kind == CauseKind::Compile)
                    .map(|p| p.ns)
                    .sum();
                (d.device, ns)
            })
            .collect();
        let (device, idle_ns) = idle_by_device
            .iter()
            .copied()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .unwrap_or((-1, 0));
        let frames: Vec<_> = all
            .iter()
            .filter(|c| c.kind == CompileKind::Frame)
            .collect();
        let recompiles = frames.iter().filter(|c| c.is_recompile()).count();
        let compile_ns: i64 = all
            .iter()
            .map(|c| c.end.min(w.end) - c.start.max(w.start))
            .sum();
        let mut paid: Vec<i64> = all.iter().filter_map(|c| step_of(c.start)).collect();
        paid.sort_unstable();
        paid.dedup();
        let steps_text = if paid.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = paid.iter().map(i64::to_string).collect();
            format!(
                " in step{} {} of {}",
                if paid.len() > 1 { "s" } else { "" },
                list.join(", "),
                steps.len()
            )
        };
        let title = if recompiles > 0 {
            format!(
                "torch.compile recompiled {recompiles} time{}{steps_text}: {} compiling, {} of GPU idle",
                if recompiles > 1 { "s" } else { "" },
                fmt_ns(compile_ns),
                fmt_ns(idle_ns)
            )
        } else {
            format!(
                "torch.compile compiled {} graph{}{steps_text}: {} compiling, {} of GPU idle",
                all.len(),
                if all.len() > 1 { "s" } else { "" },
                fmt_ns(compile_ns),
                fmt_ns(idle_ns)
            )
        };
        let describe = |c: &crate::phases::Compilation| {
            let what = match (c.kind, &c.graph) {
                (CompileKind::Frame, Some(g)) if c.is_recompile() => {
                    format!("recompiled frame {g}")
                }
                (CompileKind::Frame, Some(g)) => format!("compiled frame {g}"),
                (CompileKind::Frame, None) => "compiled a frame".to_string(),
                (CompileKind::Backward, _) => "compiled its backward".to_string(),
            };
            let shapes = if c.new_shapes.is_empty() {
                String::new()
            } else {
                format!(" for new input {}", c.new_shapes.join(", "))
            };
            let step = step_of(c.start)
                .map(|n| format!("step {n}: "))
                .unwrap_or_default();
            format!("{step}{what}{shapes}")
        };
        let breakdown: Vec<Row> = all
            .iter()
            .take(cx.config.max_rows)
            .map(|c| Row {
                cause: None,
                share: Some((c.end - c.start) as f64 / compile_ns.max(1) as f64),
                label: describe(c),
                count: 1,
                time_ns: c.end - c.start,
                bytes: None,
                python_frame: None,
            })
            .collect();
        let instances: Vec<Instance> = all
            .iter()
            .take(cx.config.max_instances)
            .map(|c| Instance {
                start_ns: c.start,
                dur_ns: c.end - c.start,
                offset_ms: w.offset_ms(c.start),
                what: describe(c),
                cpu_op: None,
                python_frame: None,
            })
            .collect();
        let mut f = new_finding(
            cx,
            ID,
            (device >= 0).then_some(device),
            title,
            idle_ns,
            Confidence::High,
            format!(
                "{} frame compilation{} ({recompiles} recompiling an existing frame) and {} backward compilation{}, from torch.compile's own spans (entire_frame_compile, entire_backward_compile); {} of them with the GPU idle ({:.0}% of the window)",
                frames.len(),
                if frames.len() == 1 { "" } else { "s" },
                all.len() - frames.len(),
                if all.len() - frames.len() == 1 { "" } else { "s" },
                fmt_ns(idle_ns),
                100.0 * w.share(idle_ns)
            ),
        );
        f.breakdown = breakdown;
        f.instances = instances;
        f.advice = if recompiles > 0 {
            vec![
                "Find what changed with TORCH_LOGS=recompiles (it prints the failed guard: a new size, dtype or a Python value).".into(),
                "For sizes that vary (sequence length, batch), compile for them: torch.compile(dynamic=True), or torch._dynamo.mark_dynamic(x, dim) on the varying dimension before the first call; or pad or bucket inputs to a few fixed sizes so each compiles once.".into(),
                "Raise torch._dynamo.config.cache_size_limit only if the number of shapes is small and known: each one still costs a compilation.".into(),
            ]
        } else {
            vec!["Compilation is a one-time cost: run warm-up steps until every graph has compiled before profiling (torch.profiler.schedule(wait=1, warmup=2, active=3)) or timing.".into()]
        };
        f.metrics = metrics([
            ("compilations", all.len() as f64),
            ("frame_compilations", frames.len() as f64),
            ("recompilations", recompiles as f64),
            ("compile_ns", compile_ns as f64),
            ("idle_ns", idle_ns as f64),
            ("steps_paying", paid.len() as f64),
        ]);
        vec![f]
    }
}
