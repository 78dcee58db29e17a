//! tracehound-heuristics: findings, the rules that produce them, and their ranking.
//!
//! Every rule reads the event model of `tracehound-parsers` (never a file format) and returns
//! [`Finding`]s with an impact in GPU time lost; [`analyze`] runs them all over the analysed
//! window and ranks the findings by impact, so rules of different kinds compare.

#![warn(missing_docs)]

pub mod accounting;
pub mod blocking;
pub mod checkpointing;
pub mod collectives;
pub mod config;
pub mod context;
pub mod copy_rate;
pub mod counters;
pub mod diff;
pub mod exposure;
pub mod failures;
pub(crate) mod fft;
pub mod finding;
pub mod hardware;
pub mod idle;
pub mod intern;
pub mod job;
pub mod membound;
pub mod names;
pub mod onehot;
pub mod optimizer;
pub mod phases;
pub mod profiled;
pub mod roofline;
pub mod rules;
pub mod scope;
pub mod stack;
pub mod starved;
pub mod stats;
pub mod summary;
pub mod tables;
pub mod tensor_loops;
pub mod unified;
pub mod uploads;
pub mod views;
pub mod window;

pub use config::Config;
pub use finding::{Confidence, Finding, Instance, Row, Severity};
pub use summary::TraceSummary;
pub use window::Window;

use tracehound_parsers::Trace;

/// Everything `analyze` reports for one trace.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Analysis {
    /// Ranked findings.
    pub findings: Vec<Finding>,
    /// The trace summary (includes the window).
    pub summary: TraceSummary,
    /// Every idle gap per device with its measured causes, for views that show them all
    /// (the TUI's timeline); the findings keep only the worst.
    #[serde(skip)]
    pub idle: Vec<idle::DeviceIdle>,
    /// The rules that did not run, with why: left out by `--rules` / `--skip-rules`, or
    /// needing a whole timeline on a file cut short. A report that lists rules (JUnit) must
    /// not show them as passed.
    #[serde(skip)]
    pub not_run: Vec<(&'static str, &'static str)>,
}

/// Runs every rule over `trace` and ranks the findings.
pub fn analyze(trace: &Trace, config: &Config) -> Analysis {
    let mut clock = tracehound_parsers::timing::Phases::start();
    let cx = context::Ctx::new(trace, config);
    clock.mark("analyze: context");
    // Rules are independent: run them, and the summary, in parallel. The idle accounting is
    // computed alongside the rules that do not read it, then the rules that do and the
    // summary run, so no thread waits on it. Collecting keeps the rules' order, and ranking
    // makes the order total, so output stays deterministic.
    use rayon::prelude::*;
    let all = rules::all();
    // A file cut short is judged only on what its records show, never on their absence.
    // Rules left out by `--rules` / `--skip-rules` do not run at all.
    let runs = |r: &dyn rules::Rule| {
        config.runs_rule(r.id()) && !(trace.stats.truncated && r.needs_whole_timeline())
    };
    let (early, ()) = rayon::join(
        || {
            let early: Vec<usize> = (0..all.len())
                .filter(|&i| !all[i].uses_idle() && runs(&*all[i]))
                .collect();
            longest_first(&all, early, &cx)
        },
        || {
            tracehound_parsers::timing::timed("idle accounting", || cx.idle());
        },
    );
    clock.mark("analyze: early rules + idle");
    let (late, summary) = rayon::join(
        || {
            all.par_iter()
                .filter(|r| r.uses_idle() && runs(r.as_ref()))
                .map(|r| tracehound_parsers::timing::timed(r.id(), || r.check(&cx)))
                .collect::<Vec<_>>()
        },
        || tracehound_parsers::timing::timed("summary", || summary::summarize(&cx)),
    );
    clock.mark("analyze: late rules + summary");
    let mut late = late.into_iter();
    let per_rule: Vec<Vec<Finding>> = early
        .into_iter()
        .zip(&all)
        .map(|(e, r)| match e {
            Some(found) => found,
            None if r.uses_idle() && runs(r.as_ref()) => late.next().unwrap_or_default(),
            None => Vec::new(),
        })
        .collect();
    let mut findings: Vec<Finding> = per_rule.into_iter().flatten().collect();
    for f in &mut findings {
        f.id = f.stable_id();
    }
    rank(&mut findings);
    drop_explained(&mut findings);
    drop_unpriced_named_elsewhere(&mut findings);
    if summary::window_is_graph_capture(&cx) {
        findings.retain(|f| ABOUT_THE_MACHINE.contains(&f.rule));
    }
    // Where the launches failed, the GPU's idle time is the failure, not a host too slow to
    // queue work or a cold start that warming up would remove; where the GPU barely worked,
    // gaps between a handful of operations say nothing about how a workload is fed.
    if matches!(
        summary.bound,
        summary::Bound::LaunchesFailed | summary::Bound::LittleWork
    ) {
        findings.retain(|f| {
            ![
                rules::idle_gaps::ID,
                rules::launch_bound::ID,
                rules::sync_stalls::ID,
            ]
            .contains(&f.rule)
        });
    }
    // Where the GPU barely works, a finding's share of that stretch says nothing about the
    // program: its severity is its share of the whole capture.
    if summary.bound == summary::Bound::LittleWork
        && let Some((start, end)) = summary::capture_span(cx.trace)
    {
        for f in &mut findings {
            let share = f.impact_ns as f64 / (end - start).max(1) as f64;
            f.severity = f.severity.min(Severity::from_share(share));
        }
    }
    graphs_need_fixed_shapes(&mut findings);
    graph_advice_agrees(&mut findings);
    let mut summary = summary;
    // The verdict names what bounds the run; when a costlier problem of another kind ranks
    // first, say so, or "GPU-bound" would read as "nothing to fix".
    // (The first priced one: an unpriced finding names what holds the time, not a fix.)
    if let Some(top) = findings.iter().find(|f| !f.unpriced())
        && top.severity == Severity::High
        && top.rule != rules::idle_gaps::ID
        && !(top.rule == rules::exposed_communication::ID
            && summary.bound == summary::Bound::Communication)
    {
        summary.verdict = format!(
            "{} First fix the top finding: {} ({:.0}% of the window).",
            summary.verdict,
            top.title,
            100.0 * top.impact_share
        );
    }
    let not_run = all
        .iter()
        .filter(|r| !runs(r.as_ref()))
        .map(|r| {
            let why = if config.runs_rule(r.id()) {
                "not run: the file is cut short, and this rule judges what the GPU did not record"
            } else {
                "not run: left out by --rules / --skip-rules"
            };
            (r.id(), why)
        })
        .collect();
    Analysis {
        findings,
        summary,
        idle: cx.into_idle(),
        not_run,
    }
}

/// Runs the rules of `all` at the indices `run` on every thread of the pool, each next rule
/// taken by the next free thread, those of [`rules::LONGEST_FIRST`] first: with the rules
/// split between the threads up front, one was left running the longest rules in a row at
/// the end while the other had nothing to do. The findings come back by index (`None` for a
/// rule not run), so the order they are read in does not depend on the schedule.
fn longest_first(
    all: &[Box<dyn rules::Rule>],
    mut run: Vec<usize>,
    cx: &context::Ctx,
) -> Vec<Option<Vec<Finding>>> {
    let rank = |i: &usize| {
        rules::LONGEST_FIRST
            .iter()
            .position(|&id| id == all[*i].id())
            .unwrap_or(rules::LONGEST_FIRST.len())
    };
    // Stable: the rest keep the list's order.
    run.sort_by_key(rank);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found: std::sync::Mutex<Vec<Option<Vec<Finding>>>> =
        std::sync::Mutex::new((0..all.len()).map(|_| None).collect());
    rayon::scope(|s| {
        for _ in 0..rayon::current_num_threads() {
            s.spawn(|_| {
                while let Some(&i) =
                    run.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    let r = &all[i];
                    let f = tracehound_parsers::timing::timed(r.id(), || r.check(cx));
                    found
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(f);
                }
            });
        }
    });
    found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The rules whose findings hold in a window that is mostly graph capture: they are about the
/// machine and its memory, not about what the work costs. A capture records launches without
/// running them, and what runs around it (the allocator, Python, a few warm-up kernels and
/// copies) is a one-time warm-up, so idle, copy, launch and kernel findings would state a
/// steady-state cost the window does not show (vLLM's decode-graph capture on MI300X: 1.5 ms of
/// idle with allocator-churn advice, 7 µs of copies).
const ABOUT_THE_MACHINE: &[&str] = &[
    rules::memory_pressure::ID,
    rules::software_stack::ID,
    rules::ecc_errors::ID,
    rules::pcie_link::ID,
    rules::throttling::ID,
    rules::power_headroom::ID,
];

/// CUDA graphs replay fixed shapes: on a device where an operator's cost grows call over call
/// (a hot_operator finding says so), the launch_bound finding's advice says that first, in
/// place of replaying the step as a graph.
fn graphs_need_fixed_shapes(findings: &mut [Finding]) {
    let growing: Vec<(Option<i32>, String)> = findings
        .iter()
        .filter(|f| {
            f.rule == rules::hot_operator::ID
                && f.metrics
                    .get("growth")
                    .is_some_and(|&g| g >= accounting::GROWTH)
        })
        .map(|f| (f.device, f.subject.clone().unwrap_or_default()))
        .collect();
    for f in findings
        .iter_mut()
        .filter(|f| f.rule == rules::launch_bound::ID)
    {
        if let Some((_, what)) = growing.iter().find(|(d, _)| *d == f.device) {
            f.advice.retain(|a| {
                a != rules::launch_bound::GRAPH_ADVICE
                    && a != rules::launch_bound::GRAPH_ADVICE_CUDA
                    && !a.starts_with(rules::launch_bound::VARYING_SHAPES_ADVICE)
            });
            f.advice.insert(0, format!(
                "Shapes change call over call here ({what} costs more every call, see hot_operator): a CUDA graph replays fixed shapes, so fix the growth first, or pad to a few fixed sizes."
            ));
        }
    }
}

/// Where the launch_bound finding rules CUDA graphs out on a device (the syncs it names, or
/// shapes that change call to call), idle_gaps' launch-overhead advice on that device drops
/// its graph clause: two findings must not disagree about the same gaps.
fn graph_advice_agrees(findings: &mut [Finding]) {
    let no_graphs: Vec<Option<i32>> = findings
        .iter()
        .filter(|f| {
            f.rule == rules::launch_bound::ID
                && !f.advice.iter().any(|a| {
                    a == rules::launch_bound::GRAPH_ADVICE
                        || a == rules::launch_bound::GRAPH_ADVICE_CUDA
                })
        })
        .map(|f| f.device)
        .collect();
    for f in findings
        .iter_mut()
        .filter(|f| f.rule == rules::idle_gaps::ID && no_graphs.contains(&f.device))
    {
        for a in &mut f.advice {
            if a == idle::LAUNCH_OVERHEAD {
                *a = idle::LAUNCH_OVERHEAD_NO_GRAPHS.into();
            } else if a == idle::LAUNCH_OVERHEAD_CUDA {
                *a = idle::LAUNCH_OVERHEAD_CUDA_NO_GRAPHS.into();
            }
        }
    }
}

/// Rules whose findings mention operators and kernels without explaining or pricing what is
/// wrong with them (time around them, the machine): a finding of theirs that names an operator
/// or a kernel leaves hot_operator's finding about it in place.
const NOT_EXPLAINING: &[&str] = &[
    rules::hot_operator::ID,
    rules::idle_gaps::ID,
    rules::launch_bound::ID,
    rules::sync_stalls::ID,
    rules::step_outliers::ID,
    rules::software_stack::ID,
];

/// The share of the window an unpriced finding holds (0 for the others): the larger holder of
/// two devices first.
fn unpriced_share(f: &Finding) -> f64 {
    f.metrics
        .get(finding::UNPRICED)
        .copied()
        .filter(|_| f.unpriced())
        .unwrap_or(0.0)
}

/// Drops an unpriced finding about a kernel that another finding on its device names (Rodinia's
/// `Fan2`, priced by underfilled_kernels for its 16-thread blocks): that finding says what is
/// wrong with it and what it costs.
fn drop_unpriced_named_elsewhere(findings: &mut Vec<Finding>) {
    let named: Vec<bool> = findings
        .iter()
        .map(|f| {
            let Some(kernel) = f.unpriced().then_some(f.subject.as_deref()).flatten() else {
                return false;
            };
            let call = format!("{}(", kernel.trim_start_matches("kernel "));
            let kernel_ns = f.metrics.get("kernel_ns").copied().unwrap_or(0.0);
            findings.iter().any(|o| {
                !o.unpriced()
                    && o.device == f.device
                    && !NOT_EXPLAINING.contains(&o.rule)
                    // A finding that prices a tenth of the kernel's time or more.
                    && 10.0 * o.impact_ns as f64 >= kernel_ns
                    && std::iter::once(&o.title)
                        .chain(o.breakdown.iter().map(|r| &r.label))
                        .any(|t| names_call(t, &call))
            })
        })
        .collect();
    let mut k = 0;
    findings.retain(|_| {
        k += 1;
        !named[k - 1]
    });
}

/// Whether `text` names the function call `call` (`render(`) as a whole name: not inside
/// `prerender(` or `ns_render(`.
fn names_call(text: &str, call: &str) -> bool {
    text.match_indices(call).any(|(i, _)| {
        !text[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Drops hot_operator findings about an operator whose time a finding of a specific rule
/// already explains (that rule names the operator and costs at least half as much): the
/// accounting names what holds the time when no rule knows why, and a second finding about
/// the same time with a generic explanation would count it twice.
fn drop_explained(findings: &mut Vec<Finding>) {
    let explained = |f: &Finding| {
        if f.rule != rules::hot_operator::ID {
            return false;
        }
        let Some(op) = f
            .subject
            .as_deref()
            .and_then(|s| s.split(" at ").next())
            .and_then(|o| o.strip_prefix("aten::"))
        else {
            return false;
        };
        let base = op.trim_start_matches('_').trim_start_matches("native_");
        let names = [
            format!("aten::{base}"),
            format!("aten::_{base}"),
            format!("aten::native_{base}"),
        ];
        findings.iter().any(|o| {
            !NOT_EXPLAINING.contains(&o.rule)
                && 2 * o.impact_ns >= f.impact_ns
                && std::iter::once(&o.title)
                    .chain(o.breakdown.iter().map(|r| &r.label))
                    .any(|text| names.iter().any(|n| text.contains(n.as_str())))
        })
    };
    let drop: Vec<bool> = findings.iter().map(explained).collect();
    let mut k = 0;
    findings.retain(|_| {
        k += 1;
        !drop[k - 1]
    });
}

/// Orders findings by impact (largest first), then severity, rule id and title, so the
/// order is total and the output deterministic; an unpriced finding ([`Finding::unpriced`]:
/// the kernel that holds most of a GPU-bound run) comes first.
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        // What holds most of the time, where no saving can be priced, before what can.
        b.unpriced()
            .cmp(&a.unpriced())
            .then(unpriced_share(b).total_cmp(&unpriced_share(a)))
            .then(b.impact_ns.cmp(&a.impact_ns))
            .then(b.severity.cmp(&a.severity))
            .then(a.rule.cmp(b.rule))
            .then(a.title.cmp(&b.title))
    });
}

#[cfg(test)]
mod testutil;

#[cfg(test)]
mod unpriced_tests {
    use super::*;

    fn finding(rule: &'static str, impact_ns: i64, unpriced: Option<f64>, title: &str) -> Finding {
        Finding {
            id: String::new(),
            rule,
            subject: unpriced.map(|_| "kernel render".to_string()),
            title: title.to_string(),
            severity: Severity::from_share(0.0),
            impact_ns,
            impact_share: 0.0,
            confidence: Confidence::High,
            device: Some(0),
            evidence: String::new(),
            breakdown: Vec::new(),
            instances: Vec::new(),
            advice: Vec::new(),
            metrics: unpriced
                .map(|s| {
                    [(finding::UNPRICED, s), ("kernel_ns", 1.6e9)]
                        .into_iter()
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    #[test]
    fn a_call_is_named_only_as_a_whole_name() {
        assert!(names_call("render(…): 12835 blocks", "render("));
        assert!(names_call("kernels: render(…), x(…)", "render("));
        assert!(!names_call("prerender(…): 1 block", "render("));
        assert!(!names_call("ns_render(…)", "render("));
    }

    #[test]
    fn the_unpriced_holder_ranks_first_and_yields_to_a_finding_that_prices_it() {
        let mut v = vec![
            finding(
                rules::underfilled_kernels::ID,
                23_000_000,
                None,
                "create_world(…): 1 block",
            ),
            finding(
                rules::hot_operator::ID,
                0,
                Some(0.98),
                "render(…) holds 98%",
            ),
        ];
        rank(&mut v);
        assert!(v[0].unpriced(), "{}", v[0].title);
        // A finding that prices a tenth of the kernel's time and names it: the unpriced one goes.
        let mut w = vec![
            finding(
                rules::hot_operator::ID,
                0,
                Some(0.98),
                "render(…) holds 98%",
            ),
            finding(
                rules::underfilled_kernels::ID,
                200_000_000,
                None,
                "render(…): 16 threads",
            ),
        ];
        drop_unpriced_named_elsewhere(&mut w);
        assert_eq!(w.len(), 1);
        assert!(!w[0].unpriced());
        // Named by a rule that does not price it (idle_gaps), or by a different kernel: kept.
        let mut x = vec![
            finding(
                rules::hot_operator::ID,
                0,
                Some(0.98),
                "render(…) holds 98%",
            ),
            finding(
                rules::idle_gaps::ID,
                200_000_000,
                None,
                "next on the GPU: render(…)",
            ),
            finding(
                rules::underfilled_kernels::ID,
                200_000_000,
                None,
                "prerender(…): 1 block",
            ),
        ];
        drop_unpriced_named_elsewhere(&mut x);
        assert_eq!(x.len(), 3);
    }
}
