//! The blind set of issue 39 (`sample-traces/generators/blind.py`): PyTorch mistakes no rule was
//! written for, each captured on an H200 with a twin that does the same work without the
//! mistake, timed in the same process. The binary's findings are checked against the truth
//! files (the planted lines, the cost the twin measured with CUDA events outside the
//! profiler) and against the profiled twin's step time read here from its trace, never from
//! tracehound.

mod common;

use common::{analyze_json, metric, own};
use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

fn truth(name: &str) -> Value {
    truth_on("h200", name)
}

/// The truth file of capture `name` made on `gpu` (`h200`, `h100`: the files' prefix).
fn truth_on(gpu: &str, name: &str) -> Value {
    let p = root().join(format!(
        "sample-traces/reference/{gpu}_blind_{name}.kineto.truth.json"
    ));
    serde_json::from_str(&std::fs::read_to_string(&p).expect("truth file")).expect("truth JSON")
}

fn analyze(file: &str) -> Value {
    analyze_json(&own(file), &[])
}

/// The Python frame Kineto records for a planted line: `blind.py(N): name`, N the first line
/// of the innermost function around it (read from the generator's source).
fn frame_of(line: usize) -> String {
    let src = std::fs::read_to_string(root().join("sample-traces/generators/blind.py"))
        .expect("generator source");
    let lines: Vec<&str> = src.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut want = indent(lines[line - 1]);
    for n in (0..line - 1).rev() {
        let l = lines[n];
        if l.trim_start().starts_with("def ") && indent(l) < want {
            let name = l.trim_start()["def ".len()..]
                .split('(')
                .next()
                .expect("a function name");
            return format!("blind.py({}): {name}", n + 1);
        }
        if !l.trim().is_empty() {
            want = want.min(indent(l) + 1);
        }
    }
    panic!("no function around line {line}");
}

fn planted_frame(t: &Value) -> String {
    frame_of(
        t["planted_source"]["lines"][0]
            .as_u64()
            .expect("a planted line") as usize,
    )
}

fn planted_ms(t: &Value) -> f64 {
    t["cost"]["planted_ms_per_step"]
        .as_f64()
        .expect("planted cost")
}

/// Profiled steps of a capture and their mean length, ms: the span of the `ProfilerStep#`
/// ranges on the GPU timeline when the capture has them for every step (the host runs ahead
/// of a busy GPU), else on the host.
fn profiled_steps(file: &str) -> (usize, f64) {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(own(file)).expect("trace"))
        .read_to_string(&mut text)
        .expect("gzip");
    let doc: Value = serde_json::from_str(&text).expect("trace JSON");
    let events = doc["traceEvents"].as_array().expect("events");
    let (host, gpu) = (
        step_ranges(events, "user_annotation"),
        step_ranges(events, "gpu_user_annotation"),
    );
    let r = if gpu.len() == host.len() {
        gpu
    } else {
        host.clone()
    };
    let a = r.iter().map(|x| x.0).fold(f64::MAX, f64::min);
    let b = r.iter().map(|x| x.1).fold(f64::MIN, f64::max);
    (host.len(), (b - a) / 1e3 / r.len() as f64)
}

/// The `ProfilerStep#` ranges of category `cat` (`user_annotation` on the host,
/// `gpu_user_annotation` on the GPU) among `events`, µs, in start order.
fn step_ranges(events: &[Value], cat: &str) -> Vec<(f64, f64)> {
    let mut r: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && e["cat"] == cat
                && e["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("ProfilerStep#"))
        })
        .map(|e| {
            let (a, b, _) = thread_span(e);
            (a, b)
        })
        .collect();
    r.sort_by(|a, b| a.0.total_cmp(&b.0));
    r
}

/// An event's start and end, µs, and its thread: spans nest only on one thread.
fn thread_span(e: &Value) -> (f64, f64, Value) {
    let ts = e["ts"].as_f64().expect("ts");
    (ts, ts + e["dur"].as_f64().expect("dur"), e["tid"].clone())
}

fn findings(a: &Value) -> &Vec<Value> {
    a["findings"].as_array().expect("findings")
}

fn text(f: &Value) -> String {
    f.to_string()
}

fn per_step_ms(f: &Value, steps: usize) -> f64 {
    f["impact_ns"].as_f64().expect("impact") / 1e6 / steps as f64
}

fn within(x: f64, truth: f64, tol: f64, what: &str) {
    assert!(
        (x / truth - 1.0).abs() <= tol,
        "{what}: {x:.2} ms per step against {truth:.2} (±{:.0}%)",
        100.0 * tol
    );
}

fn mistake(name: &str) -> (Value, Value, usize, String) {
    mistake_on("h200", name)
}

/// The truth, the analysis, the profiled steps and the file of capture `name` made on `gpu`
/// (`h200`, `h100`: the files' prefix).
fn mistake_on(gpu: &str, name: &str) -> (Value, Value, usize, String) {
    let file = format!("{gpu}_blind_{name}.pt.trace.json.gz");
    let t = truth_on(gpu, name);
    let (steps, _) = profiled_steps(&file);
    let a = analyze(&file);
    (t, a, steps, file)
}

/// Each form in `cases` (scenario, rule, words its finding holds), captured on `gpu` with
/// stacks and without: named by a medium or high finding of the rule holding every word, at
/// the planted line with stacks, within a quarter of what the twin measured outside the
/// profiler (except the captures with stacks of `cost_unchecked_with_stacks`), and the twin
/// gets no such finding.
fn forms_hold(gpu: &str, cases: &[(&str, &str, &[&str])], cost_unchecked_with_stacks: &[&str]) {
    for (base, rule, words) in cases {
        for sfx in ["", "_nostack"] {
            let name = format!("{base}{sfx}");
            let (t, a, steps, _) = mistake_on(gpu, &name);
            let f = naming(&a, rule, words);
            assert!(
                f["severity"] != "low" && f["severity"] != "info",
                "{name}: {f}"
            );
            if sfx.is_empty() {
                assert!(text(f).contains(&planted_frame(&t)), "{name}: {f}");
            }
            if !(sfx.is_empty() && cost_unchecked_with_stacks.contains(base)) {
                within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
            }
            let twin = analyze(&format!("{gpu}_blind_{name}_twin.pt.trace.json.gz"));
            assert!(
                findings(&twin)
                    .iter()
                    .all(|f| f["rule"] != *rule || !words.iter().all(|w| text(f).contains(w))),
                "{name} twin"
            );
        }
    }
}

/// The first finding of capture `name`, checked: of `rule`, holding every one of `words`, at
/// the planted line when the capture has Python stacks, and costing within 25% of what the
/// twin measured outside the profiler.
fn first_finding_holds(name: &str, rule: &str, words: &[&str]) {
    let (t, a, steps, _) = mistake(name);
    let f = &findings(&a)[0];
    assert_eq!(f["rule"], rule, "{name}: {f}");
    let s = text(f);
    assert!(words.iter().all(|w| s.contains(w)), "{name}: {s}");
    if t["with_stack"] != false {
        assert!(s.contains(&planted_frame(&t)), "{name}: {s}");
    }
    within(per_step_ms(f, steps), planted_ms(&t), 0.25, name);
}

#[test]
fn a_cat_grown_in_a_loop_is_named_with_its_line_growth_and_cost() {
    let (t, a, steps, _) = mistake("cat_kv_cache");
    let first = &findings(&a)[0];
    assert_eq!(first["rule"], "hot_operator", "{first}");
    let s = text(first);
    assert!(
        s.contains("aten::cat") && s.contains(&planted_frame(&t)),
        "{s}"
    );
    assert!(
        first["metrics"]["growth"].as_f64().expect("growth") >= 1.2,
        "{s}"
    );
    assert!(
        s.contains("preallocate") || s.contains("allocate it once"),
        "{s}"
    );
    within(per_step_ms(first, steps), planted_ms(&t), 0.25, "cat");
}

#[test]
fn attention_written_out_is_named_with_the_fused_cost() {
    let (t, a, steps, _) = mistake("naive_attention");
    let first = &findings(&a)[0];
    assert_eq!(first["rule"], "hot_operator", "{first}");
    let s = text(first);
    assert!(
        s.contains("attention written out") && s.contains(&planted_frame(&t)),
        "{s}"
    );
    assert!(s.contains("scaled_dot_product_attention"), "{s}");
    within(
        per_step_ms(first, steps),
        planted_ms(&t),
        0.25,
        "unfused attention",
    );
    // Its operators are rows of that finding, not findings of their own.
    assert_eq!(
        findings(&a)
            .iter()
            .filter(|f| f["rule"] == "hot_operator")
            .count(),
        1
    );
}

#[test]
fn a_mask_tensor_given_to_sdpa_is_named_with_the_causal_saving() {
    let (t, a, steps, _) = mistake("sdpa_mask_fallback");
    let first = &findings(&a)[0];
    assert_eq!(first["rule"], "hot_operator", "{first}");
    let s = text(first);
    assert!(
        s.contains("mask") && s.contains("is_causal=True") && s.contains(&planted_frame(&t)),
        "{s}"
    );
    within(
        per_step_ms(first, steps),
        planted_ms(&t),
        0.25,
        "masked sdpa",
    );
}

#[test]
fn a_full_sort_for_top_k_is_named_and_topk_is_not_blamed() {
    let (t, a, steps, file) = mistake("sort_for_topk");
    let first = &findings(&a)[0];
    assert_eq!(first["rule"], "hot_operator", "{first}");
    let s = text(first);
    assert!(
        s.contains("aten::sort") && s.contains(&planted_frame(&t)) && s.contains("torch.topk"),
        "{s}"
    );
    // Against the profiled twin (same profiler overhead): the GPU time a sort costs over a
    // top-k. The unprofiled twin gains less, being partly launch-bound (see blind-set.md).
    let (_, mistake_ms) = profiled_steps(&file);
    let (_, twin_ms) = profiled_steps("h200_blind_sort_for_topk_twin.pt.trace.json.gz");
    within(
        per_step_ms(first, steps),
        mistake_ms - twin_ms,
        0.25,
        "sort",
    );
    let twin = analyze("h200_blind_sort_for_topk_twin.pt.trace.json.gz");
    assert!(
        !findings(&twin).iter().any(|f| f["rule"] == "hot_operator"),
        "the twin's topk is the fix"
    );
}

#[test]
fn boolean_mask_syncs_are_named_and_graphs_are_not_advised() {
    let (t, a, steps, file) = mistake("moe_mask_sync");
    let first = &findings(&a)[0];
    // The host is slower than the GPU in the masked dispatch: launch-bound, in operators that
    // synchronise every call, which the title, the evidence and the advice name with their line.
    assert_eq!(first["rule"], "launch_bound", "{first}");
    let title = first["title"].as_str().expect("title");
    assert!(
        title.contains("synchronise") && title.contains("aten::nonzero"),
        "{title}"
    );
    let advice = first["advice"].to_string();
    assert!(advice.contains(&planted_frame(&t)), "{advice}");
    assert!(
        advice.contains("cannot capture") && !advice.contains("Replay the step as a CUDA graph"),
        "{advice}"
    );
    // A host-side cost: the profiler slows the host, so the capture's own twin is the measure.
    let (_, mistake_ms) = profiled_steps(&file);
    let (_, twin_ms) = profiled_steps("h200_blind_moe_mask_sync_twin.pt.trace.json.gz");
    within(
        per_step_ms(first, steps),
        mistake_ms - twin_ms,
        0.25,
        "syncs",
    );
}

#[test]
fn one_hot_cross_entropy_is_named_at_its_line() {
    let (t, a, steps, _) = mistake("onehot_ce");
    let frame = planted_frame(&t);
    let hit = findings(&a)
        .iter()
        .find(|f| {
            (f["severity"] == "high" || f["severity"] == "medium") && text(f).contains(&frame)
        })
        .expect("a medium or high finding at the planted line");
    within(
        per_step_ms(hit, steps),
        planted_ms(&t),
        0.25,
        "one-hot loss",
    );
}

#[test]
fn nchw_batchnorm_is_named_and_batch_128_is_not_called_small() {
    let (t, a, _, _) = mistake("conv_nchw");
    let fs = findings(&a);
    // cuDNN's transposes around the NCHW convolutions and the NCHW BatchNorm kernels between
    // them, one fix and one finding, at the planted frame. With Python stacks the step is
    // host-bound (the GPU idles 30% of it), so the GPU time channels_last saves shows only
    // partly in the step time; the cost is checked on the capture without stacks below.
    let layout = fs.first().expect("a first finding");
    assert_eq!(layout["rule"], "hot_operator", "{layout}");
    let s = text(layout);
    for w in [
        "run on NCHW tensors",
        "BatchNorm",
        "channels_last",
        "nchwToNhwc",
    ] {
        assert!(s.contains(w), "{w}: {s}");
    }
    assert!(s.contains(&planted_frame(&t)), "{layout}");
    assert!(
        !fs.iter()
            .any(|f| f["rule"] == "roofline" && text(f).contains("Small or skinny")),
        "batch-128 convolutions are not small shapes"
    );
    // Without stacks: the transforms' time and the BatchNorm time beyond 70% of its
    // two-pass roof, within 25% of what the channels_last twin saved outside the profiler.
    first_finding_holds(
        "conv_nchw_nostack",
        "hot_operator",
        &["run on NCHW tensors", "BatchNorm", "channels_last"],
    );
}

#[test]
fn a_prefix_rerun_every_token_shows_as_growth_and_graphs_are_not_advised_blindly() {
    let (t, a, _, _) = mistake("no_kv_cache");
    let acct = &a["summary"]["accounting"][0]["holders"];
    let frame = frame_of(
        // The planted call is inside `mistake`; the GEMMs run in the `block` it calls.
        t["planted_source"]["lines"][0].as_u64().expect("line") as usize,
    );
    assert!(frame.ends_with(": mistake"), "{frame}");
    let grows = acct
        .as_array()
        .expect("holders")
        .iter()
        .find(|h| {
            h["op"] == "aten::matmul" && h["frame"].as_str().is_some_and(|f| f.ends_with(": block"))
        })
        .expect("the matmuls under block");
    assert!(grows["growth"].as_f64().expect("growth") >= 1.2, "{grows}");
    let lb = findings(&a)
        .iter()
        .find(|f| f["rule"] == "launch_bound")
        .expect("the capture is launch-bound");
    assert!(
        text(lb).contains("a CUDA graph replays fixed shapes"),
        "{lb}"
    );
    assert!(
        !text(lb).contains("Replay the step as a CUDA graph"),
        "no graph advice for shapes that change every call: {lb}"
    );
}

#[test]
fn the_twins_get_no_finding_from_the_new_rules() {
    for name in [
        "cat_kv_cache",
        "naive_attention",
        "onehot_ce",
        "sdpa_mask_fallback",
        "no_kv_cache",
    ] {
        let a = analyze(&format!("h200_blind_{name}_twin.pt.trace.json.gz"));
        let bad: Vec<String> = findings(&a)
            .iter()
            .filter(|f| f["rule"] == "hot_operator" || f["rule"] == "sync_stalls")
            .map(|f| f["title"].to_string())
            .collect();
        assert!(bad.is_empty(), "{name}: {bad:?}");
    }
}

// The second set (`set: 2` in the truth files): captured after the rules above were written,
// with and without Python stacks (`with_stack` in the truth files), so that the rules meet
// mistakes they were not written against.

/// The finding of `rule` that names every one of `words`.
fn naming<'a>(a: &'a Value, rule: &str, words: &[&str]) -> &'a Value {
    findings(a)
        .iter()
        .find(|f| f["rule"] == rule && words.iter().all(|w| text(f).contains(w)))
        .unwrap_or_else(|| panic!("no {rule} finding naming {words:?}: {}", a["findings"]))
}

#[test]
fn a_broadcast_written_only_to_be_reduced_is_named_with_its_cost() {
    for name in ["pairwise_broadcast", "pairwise_broadcast_nostack"] {
        let (t, a, steps, _) = mistake(name);
        let first = &findings(&a)[0];
        assert_eq!(first["rule"], "unfused_elementwise", "{name}: {first}");
        let s = text(first);
        assert!(
            s.contains("aten::sub") && s.contains("aten::linalg_vector_norm"),
            "{name}: {s}"
        );
        if t["with_stack"] != false {
            assert!(s.contains(&planted_frame(&t)), "{name}: {s}");
        }
        assert!(s.contains("torch.cdist"), "{name}: {s}");
        within(per_step_ms(first, steps), planted_ms(&t), 0.25, name);
    }
}

#[test]
fn multihead_attention_asked_for_its_weights_is_attention_written_out() {
    for name in ["mha_need_weights", "mha_need_weights_nostack"] {
        let (t, a, steps, _) = mistake(name);
        let first = &findings(&a)[0];
        assert_eq!(first["rule"], "hot_operator", "{name}: {first}");
        let s = text(first);
        assert!(s.contains("attention written out"), "{name}: {s}");
        // Forward under the user's frame and backward on autograd's thread, together.
        within(per_step_ms(first, steps), planted_ms(&t), 0.25, name);
        if t["with_stack"] != false {
            assert!(s.contains(&planted_frame(&t)), "{name}: {s}");
            assert!(s.contains("need_weights=False"), "{name}: {s}");
        }
    }
}

#[test]
fn a_kv_cache_repeated_per_query_head_is_named_with_enable_gqa() {
    for name in ["gqa_repeat_kv", "gqa_repeat_kv_nostack"] {
        let (t, a, steps, _) = mistake(name);
        let f = naming(
            &a,
            "copy_hotspots",
            &["aten::repeat_interleave", "enable_gqa=True"],
        );
        assert_eq!(f, &findings(&a)[0], "{name}: the first finding");
        if t["with_stack"] != false {
            assert!(text(f).contains(&planted_frame(&t)), "{name}: {f}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, name);
    }
}

#[test]
fn a_logsumexp_chain_is_not_called_a_hand_written_activation() {
    // torch.distributions.Categorical normalises its logits with logsumexp, which runs as a
    // chain of elementwise kernels around its reductions: a compiler fuses it, no F.* op does.
    let (_, a, _, _) = mistake("categorical_validate");
    let f = naming(&a, "unfused_elementwise", &["aten::amax", "aten::log_"]);
    assert!(!text(f).contains("hand-written activation"), "{f}");
}

#[test]
fn the_second_sets_twins_get_no_finding_from_the_new_rules() {
    for name in ["pairwise_broadcast", "mha_need_weights", "gqa_repeat_kv"] {
        for v in ["", "_nostack"] {
            let a = analyze(&format!("h200_blind_{name}{v}_twin.pt.trace.json.gz"));
            let bad: Vec<String> = findings(&a)
                .iter()
                .filter(|f| {
                    f["rule"] == "hot_operator"
                        || ((f["rule"] == "copy_hotspots" || f["rule"] == "unfused_elementwise")
                            && f["severity"] == "high")
                })
                .map(|f| f["title"].to_string())
                .collect();
            assert!(bad.is_empty(), "{name}{v}: {bad:?}");
        }
    }
}

#[test]
fn without_python_stacks_the_first_sets_costs_hold_against_the_unprofiled_twin() {
    // Captured again in a later process without `with_stack` (shapes kept): the operator is
    // named (no line can be), and the impact is checked against that process's own twin.
    for (name, rule, op) in [
        ("cat_kv_cache_nostack", "hot_operator", "aten::cat"),
        (
            "naive_attention_nostack",
            "hot_operator",
            "attention written out",
        ),
        ("onehot_ce_nostack", "unfused_elementwise", "aten::scatter_"),
        (
            "sdpa_mask_fallback_nostack",
            "hot_operator",
            "scaled_dot_product_attention",
        ),
    ] {
        let (t, a, steps, _) = mistake(name);
        assert_eq!(t["with_stack"], false, "{name}");
        let f = naming(&a, rule, &[op]);
        assert!(
            f["severity"] == "high" || f["severity"] == "medium",
            "{name}: {f}"
        );
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, name);
    }
}

/// Whether any finding of the capture advises replaying the work as a CUDA graph.
fn advises_graphs(a: &Value) -> Vec<String> {
    findings(a)
        .iter()
        .flat_map(|f| f["advice"].as_array().cloned().unwrap_or_default())
        .filter_map(|x| x.as_str().map(str::to_string))
        .filter(|x| {
            x.contains("replay the step as a CUDA graph")
                || x.contains("Replay the step as a CUDA graph")
        })
        .collect()
}

#[test]
fn shapes_that_change_every_call_rule_graphs_out_without_a_growth_finding() {
    // Without stacks the re-run prefix's matmuls grow 1.199x a step, under the growth bar, so
    // no hot_operator finding says so; their input shapes, counted by the test from the trace's
    // own events, change call to call all the same.
    let (_, a, steps, file) = mistake("no_kv_cache_nostack");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(own(&file)).expect("trace"))
        .read_to_string(&mut text)
        .expect("gzip");
    let doc: Value = serde_json::from_str(&text).expect("trace JSON");
    let shapes: std::collections::BTreeSet<String> = doc["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::matmul")
        .map(|e| e["args"]["Input Dims"].to_string())
        .collect();
    let per_step = shapes.len() / steps;
    assert!(per_step >= 32, "{per_step}");
    let lb = &findings(&a)[0];
    assert_eq!(lb["rule"], "launch_bound", "{lb}");
    assert!(
        lb.to_string().contains(&format!(
            "aten::matmul ran on {per_step} distinct input shapes a step"
        )),
        "{lb}"
    );
    assert!(advises_graphs(&a).is_empty(), "{:?}", advises_graphs(&a));
    // Its twin runs a few fixed shapes: graphs stay the advice there.
    let twin = analyze("h200_blind_no_kv_cache_nostack_twin.pt.trace.json.gz");
    assert!(!advises_graphs(&twin).is_empty(), "{}", twin["findings"]);
}

#[test]
fn no_finding_advises_graphs_where_syncs_empty_the_queue() {
    for name in ["moe_mask_sync", "moe_mask_sync_nostack"] {
        let (_, a, _, _) = mistake(name);
        assert!(
            advises_graphs(&a).is_empty(),
            "{name}: {:?}",
            advises_graphs(&a)
        );
    }
}

// The third set (`set: 3`): captured after the changes for the second, scored first as it was
// (sample-traces/reference/blind-set.md), then with the changes below.

#[test]
fn float64_from_numpy_is_named_with_what_tf32_would_take() {
    for name in ["float64_numpy", "float64_numpy_nostack"] {
        first_finding_holds(name, "tensor_cores", &["FP64", "from_numpy"]);
    }
}

#[test]
fn verdicts_name_the_syncs_that_drain_the_queue() {
    // The MoE dispatch by boolean masks: with stacks, syncs hold most of the idle time, and the
    // verdict says so, naming the masked index and its nonzero; without stacks they hold 44%,
    // named beside the launch rate. Neither advises a CUDA graph, which cannot capture a sync.
    for (name, lead) in [
        ("moe_mask_sync", true),
        ("moe_mask_sync_nostack", false),
        ("unique_counts_nostack", false),
    ] {
        let (_, a, _, _) = mistake(name);
        let v = a["summary"]["verdict"].as_str().expect("verdict");
        assert_eq!(a["summary"]["bound"], "launch/host bound", "{name}: {v}");
        assert_eq!(
            v.starts_with("launch/host bound, on host synchronisations"),
            lead,
            "{name}: {v}"
        );
        assert!(
            v.contains("around syncs that drained") && v.contains("cannot capture a sync"),
            "{name}: {v}"
        );
        if name.starts_with("moe") {
            assert!(v.contains("aten::index › aten::nonzero"), "{name}: {v}");
        } else {
            // torch.unique's syncs are named, with a count that neither sorts nor waits (its
            // sort's GPU time leads: `unique_used_to_count_is_named_as_the_sort_it_runs`).
            let f = findings(&a)
                .iter()
                .find(|f| f["rule"] == "sync_stalls")
                .expect("a sync_stalls finding");
            assert!(
                ["medium", "high"].contains(&f["severity"].as_str().unwrap_or("")),
                "{f}"
            );
            assert!(
                text(f).contains("aten::_unique2")
                    && text(f).contains("torch.unique sorts its input")
                    && text(f).contains("index_add_"),
                "{f}"
            );
        }
        assert!(!v.contains("reduce-overhead"), "{name}: {v}");
    }
}

#[test]
fn launch_waits_say_they_were_measured_under_the_profiler() {
    // The per-head loop's twin gained 3.0 ms a step outside the profiler and 6.9 inside it:
    // the finding says its waits are the profiler's too, naming the options that were on.
    let (t, a, _, _) = mistake("per_head_loop_nostack");
    assert_eq!(t["with_stack"], false);
    let f = naming(&a, "launch_bound", &["aten::linear"]);
    let e = f["evidence"].as_str().expect("evidence");
    assert!(
        e.contains("measured under the profiler") && e.contains("more with record_shapes, on here"),
        "{e}"
    );
    let (_, a, _, _) = mistake("per_head_loop");
    let f = naming(&a, "launch_bound", &["aten::linear"]);
    assert!(
        text(f).contains("more with record_shapes and with_stack, on here"),
        "{f}"
    );
}

#[test]
fn compute_bound_says_where_the_step_can_shorten() {
    // Written-out dropout beside bf16 GEMMs at 81% of their roof: the verdict says the GEMMs
    // have little left to give and points at the other 45%, where the planted chain is.
    let (_, a, _, _) = mistake("dropout_manual_nostack");
    let v = a["summary"]["verdict"].as_str().expect("verdict");
    assert!(
        v.contains("little left to give") && v.contains("the other 45% of kernel time"),
        "{v}"
    );
    // FP32 GEMMs near the FP32 CUDA-core roof are far from what TF32 tensor cores do: no
    // such claim there.
    let (_, a, _, _) = mistake("fp32_no_tf32_nostack");
    let v = a["summary"]["verdict"].as_str().expect("verdict");
    assert!(!v.contains("little left to give"), "{v}");
}

#[test]
fn a_convolution_written_as_unfold_is_named_with_its_column_tensor() {
    for name in ["unfold_conv", "unfold_conv_nostack"] {
        first_finding_holds(name, "hot_operator", &["aten::im2col", "F.conv2d"]);
    }
    // Its twin runs cuDNN's convolution: nothing about a column tensor there.
    let twin = analyze("h200_blind_unfold_conv_twin.pt.trace.json.gz");
    assert!(
        !twin["findings"].to_string().contains("im2col"),
        "{}",
        twin["findings"]
    );
}

#[test]
fn a_per_sample_loop_is_launch_bound_at_its_loop_line() {
    let (t, a, steps, _) = mistake("per_sample_loop");
    let first = &findings(&a)[0];
    assert_eq!(first["rule"], "launch_bound", "{first}");
    let s = text(first);
    // The operators' own frame and the loop that calls them.
    assert!(s.contains(&format!("← {}", planted_frame(&t))), "{s}");
    assert!(s.contains("torch.vmap"), "{s}");
    // Without stacks the host is not slowed by the stack tracer: the unprofiled twin measures it.
    let (t, a, steps_n, _) = mistake("per_sample_loop_nostack");
    within(
        per_step_ms(&findings(&a)[0], steps_n),
        planted_ms(&t),
        0.25,
        "per-sample loop",
    );
    assert!(steps > 0);
}

// The fourth set (`set: 4`): captured after the third set's changes and scored before any
// change for it (blind-set.md); these hold what it showed.

#[test]
fn the_fourth_set_is_named_at_its_lines_with_its_costs() {
    for v in ["", "_nostack"] {
        let stack = v.is_empty();
        // A broadcast product written only to be summed: a matrix product.
        let (t, a, steps, _) = mistake(&format!("broadcast_dot{v}"));
        let f = naming(&a, "unfused_elementwise", &["aten::mul", "aten::sum"]);
        assert!(text(f).contains("a matrix product for dot products"), "{f}");
        if stack {
            assert!(text(f).contains(&planted_frame(&t)), "{f}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, "broadcast_dot");
        // Attention by einsum: attention written out, priced on its score matrices.
        let (t, a, steps, _) = mistake(&format!("einsum_attention{v}"));
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "hot_operator", "{f}");
        assert!(
            text(f).contains("attention written out") && text(f).contains("aten::einsum"),
            "{f}"
        );
        within(
            per_step_ms(f, steps),
            planted_ms(&t),
            0.25,
            "einsum_attention",
        );
        // An expanded bias made contiguous: the [B, H, T, T] copy at its line.
        let (t, a, steps, _) = mistake(&format!("expand_contiguous_mask{v}"));
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "copy_hotspots", "{f}");
        assert!(text(f).contains("[8, 16, 1024, 1024]"), "{f}");
        within(
            per_step_ms(f, steps),
            planted_ms(&t),
            0.25,
            "expand_contiguous_mask",
        );
        // A loop over heads: launch-bound at the loop, advised to batch the heads. Its launches
        // are slower under the profiler, so the capture's own twin is the measure.
        let (t, a, steps, file) = mistake(&format!("per_head_loop{v}"));
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "launch_bound", "{f}");
        assert!(text(f).contains("aten::linear"), "{f}");
        // The loop advice needs the loop's line, which only a capture with stacks records.
        if stack {
            assert!(
                text(f).contains(&planted_frame(&t)) && text(f).contains("heads"),
                "{f}"
            );
        }
        let (_, mistake_ms) = profiled_steps(&file);
        let (_, twin_ms) = profiled_steps(&format!(
            "h200_blind_per_head_loop{v}_twin.pt.trace.json.gz"
        ));
        within(
            per_step_ms(f, steps),
            mistake_ms - twin_ms,
            0.25,
            "per_head_loop",
        );
    }
}

// The fifth set (`set: 5`): captured after the host-check pricing of sync_stalls was written
// against `categorical_validate` (set 2), scored before the changes it then led to.

#[test]
fn a_host_check_is_priced_with_its_kernels_and_its_waits() {
    // Argument validation in torch.distributions (set 2), and a Python assert (set 5) that the
    // pricing was not written against.
    for (name, ops) in [
        ("categorical_validate", ["aten::eq", "aten::all"]),
        ("categorical_validate_nostack", ["aten::eq", "aten::all"]),
        ("isfinite_assert", ["aten::isfinite", "aten::all"]),
        ("isfinite_assert_nostack", ["aten::isfinite", "aten::all"]),
    ] {
        let (t, a, steps, _) = mistake(name);
        let f = naming(&a, "sync_stalls", &[ops[0], ops[1], "aten::is_nonzero"]);
        let s = text(f);
        assert!(s.contains("host checks"), "{name}: {s}");
        assert!(
            s.contains("validate_args=False") && s.contains("torch._assert_async"),
            "{name}: {s}"
        );
        assert!(!s.contains("boolean-mask index"), "{name}: {s}");
        if t["with_stack"] != false {
            assert!(s.contains(&planted_frame(&t)), "{name}: {s}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, name);
    }
    // Without the check, no sync to name.
    for v in ["", "_nostack"] {
        let twin = analyze(&format!(
            "h200_blind_isfinite_assert{v}_twin.pt.trace.json.gz"
        ));
        assert!(
            !findings(&twin).iter().any(|f| f["rule"] == "sync_stalls"),
            "{}",
            twin["findings"]
        );
    }
}

#[test]
fn fp32_matmuls_without_tf32_are_named_at_their_line() {
    for name in ["fp32_no_tf32", "fp32_no_tf32_nostack"] {
        first_finding_holds(name, "tensor_cores", &["FP32", "allow_tf32"]);
    }
    let twin = analyze("h200_blind_fp32_no_tf32_twin.pt.trace.json.gz");
    assert!(
        !findings(&twin).iter().any(|f| f["rule"] == "tensor_cores"),
        "{}",
        twin["findings"]
    );
}

#[test]
fn rmsnorm_written_out_is_priced_against_one_fused_pass() {
    for name in ["rmsnorm_manual", "rmsnorm_manual_nostack"] {
        first_finding_holds(
            name,
            "unfused_elementwise",
            &["aten::pow", "aten::mean", "F.rms_norm"],
        );
    }
}

#[test]
fn a_dataloader_in_the_training_process_is_named_as_input_bound() {
    for name in ["loader_in_process", "loader_in_process_nostack"] {
        let (t, a, steps, _) = mistake(name);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "idle_gaps", "{name}: {f}");
        let s = text(f);
        assert!(
            s.contains("data loading") && s.contains("num_workers"),
            "{name}: {s}"
        );
        assert!(
            a["summary"]["verdict"]
                .as_str()
                .is_some_and(|v| v.starts_with("input-bound")),
            "{name}: {}",
            a["summary"]["verdict"]
        );
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, name);
    }
}

// The sixth set (`set: 6`), scored before the change it led to (blind-set.md).

#[test]
fn a_single_tensor_optimizer_leads_with_its_own_finding() {
    for name in ["adam_foreach_off", "adam_foreach_off_nostack"] {
        let (t, a, steps, file) = mistake(name);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "optimizer_overhead", "{name}: {f}");
        let s = text(f);
        assert!(
            s.contains("Optimizer.step#Adam.step")
                && s.contains("torch.optim.Adam(params, fused=True)"),
            "{name}: {s}"
        );
        // The waits inside the step are this finding's, not launch_bound's too.
        if let Some(lb) = findings(&a).iter().find(|f| f["rule"] == "launch_bound") {
            assert!(text(lb).contains("see optimizer_overhead"), "{name}: {lb}");
        }
        if t["with_stack"] != false {
            assert!(s.contains(&planted_frame(&t)), "{name}: {s}");
            // The stack tracer slows the host: the capture's own twin is the measure.
            let (_, mistake_ms) = profiled_steps(&file);
            let (_, twin_ms) = profiled_steps("h200_blind_adam_foreach_off_twin.pt.trace.json.gz");
            within(per_step_ms(f, steps), mistake_ms - twin_ms, 0.25, name);
        } else {
            within(per_step_ms(f, steps), planted_ms(&t), 0.25, name);
        }
    }
    for v in ["", "_nostack"] {
        let twin = analyze(&format!(
            "h200_blind_adam_foreach_off{v}_twin.pt.trace.json.gz"
        ));
        assert!(
            !findings(&twin)
                .iter()
                .any(|f| f["rule"] == "optimizer_overhead"),
            "{}",
            twin["findings"]
        );
    }
}

#[test]
fn dropout_written_out_is_priced_with_its_random_draw() {
    // The random fill joins the chain (rand_like is empty_like + uniform_), its generator's
    // arithmetic stays in the fused kernel, and the bf16 x bool multiply's casting path does
    // not: within 25% of the twin's F.dropout, with and without Python stacks.
    for name in ["dropout_manual", "dropout_manual_nostack"] {
        first_finding_holds(
            name,
            "unfused_elementwise",
            &["aten::uniform_", "aten::gt", "aten::mul", "F.dropout"],
        );
    }
}

#[test]
fn a_full_sort_without_stacks_is_priced_against_its_radix_passes() {
    // A bf16 sort moves its keys and indices in two radix passes: held to that, not to one
    // read and write, the sort's excess is within 25% of what topk saved outside the profiler.
    first_finding_holds(
        "sort_for_topk_nostack",
        "hot_operator",
        &["aten::sort", "torch.topk"],
    );
}

#[test]
fn a_one_hot_matrix_product_is_named_with_the_lookup_it_replaces() {
    // one_hot, its cast and the matmul over every class, less what F.embedding needs: within
    // 25% of the twin, with and without Python stacks.
    for name in ["onehot_embedding", "onehot_embedding_nostack"] {
        first_finding_holds(
            name,
            "hot_operator",
            &[
                "one-hot matrix product",
                "aten::one_hot",
                "aten::matmul",
                "F.embedding",
            ],
        );
        // The cast is priced there, not again as a copy hotspot.
        let (_, a, _, _) = mistake(name);
        assert!(
            !findings(&a).iter().any(|f| f["rule"] == "copy_hotspots"),
            "{name}: the one-hot cast counted twice"
        );
    }
}

#[test]
fn the_sixth_sets_lstm_loop_is_named() {
    // Named with its operator; its cost is not yet right (the profiler inflates the host's
    // per-step launches: blind-set.md): this holds the naming only.
    let (_, a, _, _) = mistake("lstm_cell_loop_nostack");
    let f = &findings(&a)[0];
    assert_eq!(f["rule"], "launch_bound", "{f}");
    assert!(text(f).contains("aten::lstm_cell"), "{f}");
}

// ---------------------------------------------------------------- seventh set (H100)

fn truth_h100(name: &str) -> Value {
    truth_on("h100", name)
}

/// The trace's complete events, read here with serde_json.
fn events_of(file: &str) -> Vec<Value> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(own(file)).expect("trace"))
        .read_to_string(&mut text)
        .expect("gzip");
    let doc: Value = serde_json::from_str(&text).expect("trace JSON");
    doc["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["ph"] == "X")
        .cloned()
        .collect()
}

/// Activation checkpointing on every block (`checkpoint_all`): the forward operators that run
/// inside autograd's backward functions, counted here from the events (a composite forward
/// operator nested in an `autograd::engine::evaluate_function` span of its thread, not inside
/// another one, with a kernel launch inside it), are what the recomputation finding counts; its cost holds against the twin
/// measured outside the profiler, and the twin, never checkpointed, has no such finding.
#[test]
fn activation_checkpointing_is_named_with_what_the_recomputation_costs() {
    const FORWARD: &[&str] = &[
        "aten::linear",
        "aten::layer_norm",
        "aten::scaled_dot_product_attention",
        "aten::dropout",
        "aten::relu",
    ];
    let file = "h100_blind_checkpoint_all_nostack.pt.trace.json.gz";
    let ev = events_of(file);
    let cpu: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "cpu_op").collect();
    let inside =
        |a: (f64, f64, Value), b: (f64, f64, Value)| a.2 == b.2 && b.0 <= a.0 && a.1 <= b.1;
    let launches: Vec<_> = ev
        .iter()
        .filter(|e| {
            (e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver")
                && e["name"]
                    .as_str()
                    .is_some_and(|n| n.contains("LaunchKernel"))
        })
        .map(thread_span)
        .collect();
    let backward: Vec<_> = cpu
        .iter()
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("autograd::engine::evaluate_function"))
        })
        .map(|e| thread_span(e))
        .collect();
    let forward: Vec<_> = cpu
        .iter()
        .filter(|e| FORWARD.contains(&e["name"].as_str().unwrap_or_default()))
        .map(|e| thread_span(e))
        .collect();
    let recomputed = forward
        .iter()
        .filter(|f| backward.iter().any(|b| inside((*f).clone(), b.clone())))
        .filter(|f| {
            !forward
                .iter()
                .any(|g| g != *f && inside((*f).clone(), g.clone()) && (g.1 - g.0) > (f.1 - f.0))
        })
        // Those that ran GPU work (a dropout of p = 0 launches nothing).
        .filter(|f| launches.iter().any(|l| inside(l.clone(), (*f).clone())))
        .count();
    assert!(recomputed > 0);
    let a = analyze(file);
    let f = naming(&a, "recomputation", &["Activation checkpointing"]);
    assert_eq!(
        f["metrics"]["recomputed_ops"].as_f64(),
        Some(recomputed as f64),
        "{}",
        f["title"]
    );
    let t = truth_h100("checkpoint_all_nostack");
    let (steps, _) = profiled_steps(file);
    within(
        per_step_ms(f, steps),
        planted_ms(&t),
        0.25,
        "checkpoint_all",
    );
    // The short waits before recomputed kernels are that finding's, not launch_bound's too:
    // launch_bound names them as left out, at most the recomputation's waits.
    let waits = f["metrics"]["launch_waits_ns"].as_f64().expect("waits");
    let lb = findings(&a)
        .iter()
        .find(|f| f["rule"] == "launch_bound")
        .expect("launch_bound");
    let left = lb["metrics"]["recomputation_waits_ns"]
        .as_f64()
        .expect("left out");
    assert!(left > 0.0 && left <= waits, "{left} of {waits}");
    assert!(
        lb["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("(see recomputation)")),
        "{lb}"
    );
    // Without the recomputation rule nothing is left to it: launch_bound counts those waits
    // itself, to the nanosecond.
    let alone = analyze_json(
        &own("h100_blind_checkpoint_all_nostack.pt.trace.json.gz"),
        &["--skip-rules", "recomputation"],
    );
    let lb2 = findings(&alone)
        .iter()
        .find(|f| f["rule"] == "launch_bound")
        .expect("launch_bound");
    assert_eq!(lb2["metrics"]["recomputation_waits_ns"].as_f64(), Some(0.0));
    assert_eq!(
        lb2["metrics"]["starved_ns"].as_f64().expect("starved"),
        lb["metrics"]["starved_ns"].as_f64().expect("starved") + left
    );
    let twin = analyze("h100_blind_checkpoint_all_nostack_twin.pt.trace.json.gz");
    assert!(
        !findings(&twin).iter().any(|f| f["rule"] == "recomputation"),
        "{twin}"
    );
    // With stacks the title names the checkpoint call's line.
    let with = analyze("h100_blind_checkpoint_all.pt.trace.json.gz");
    let f = naming(&with, "recomputation", &["Activation checkpointing"]);
    let line = truth_h100("checkpoint_all")["planted_source"]["lines"][0]
        .as_u64()
        .expect("line") as usize;
    assert!(
        f["title"]
            .as_str()
            .is_some_and(|s| s.contains(&frame_of(line))),
        "{}",
        f["title"]
    );
}

/// The gradient norm summed in Python with `.item()` per parameter (`grad_norm_item`): each
/// norm's kernel waits while the host reads the one before. The waits are named as a loop
/// that synchronises after each call, with one read a step per parameter (counted here from
/// the `aten::item` events), no CUDA-graph advice for them, and launch_bound, which keeps the
/// forward's and backward's waits, no longer holds the norm.
#[test]
fn a_loop_that_reads_each_result_is_named_as_such_and_not_as_launch_speed() {
    let file = "h100_blind_grad_norm_item_nostack.pt.trace.json.gz";
    let ev = events_of(file);
    let items = ev
        .iter()
        .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::item")
        .count();
    let (steps, _) = profiled_steps(file);
    let a = analyze(file);
    let f = naming(
        &a,
        "sync_stalls",
        &["aten::linalg_vector_norm read by aten::item"],
    );
    let row = &f["breakdown"][0];
    assert!(
        row["label"]
            .as_str()
            .is_some_and(|l| l.starts_with("aten::linalg_vector_norm read by aten::item")),
        "{row}"
    );
    // One read per parameter a step; the first norm of the window follows no read.
    let reads = row["count"].as_f64().expect("count");
    assert!(
        (reads - items as f64).abs() <= 2.0 && items / steps == 64,
        "{reads} reads against {items} aten::item events in {steps} steps"
    );
    let advice = f["advice"].to_string();
    assert!(advice.contains("torch._foreach_norm"), "{advice}");
    assert!(advice.contains("CUDA graphs will not help"), "{advice}");
    let lb = findings(&a)
        .iter()
        .find(|f| f["rule"] == "launch_bound")
        .expect("the forward's and backward's waits");
    assert!(!text(lb).contains("aten::linalg_vector_norm —"), "{lb}");
    assert!(
        lb["advice"]
            .to_string()
            .contains("a CUDA graph cannot contain a sync"),
        "{}",
        lb["advice"]
    );
}

/// An EMA updated parameter by parameter (`ema_param_loop`): the in-place operators of the
/// loop wait once per parameter a step (192), and the advice names the foreach operators,
/// which batch exactly such updates: tensor_loop's finding where it runs; without it,
/// launch_bound keeps those waits (its total grows by exactly tensor_loop's impact) and gives
/// the same advice for the in-place operator.
#[test]
fn an_in_place_loop_over_parameters_is_pointed_at_the_foreach_operators() {
    let t = truth_h100("ema_param_loop_nostack");
    assert!(
        t["notes"]
            .as_str()
            .is_some_and(|n| n.contains("192 parameters"))
    );
    let file = "h100_blind_ema_param_loop_nostack.pt.trace.json.gz";
    let a = analyze(file);
    let tl = naming(&a, "tensor_loop", &["torch._foreach_mul_"]);
    let lb = naming(&a, "launch_bound", &["see tensor_loop"]);
    let without = analyze_json(&own(file), &["--skip-rules", "tensor_loop"]);
    let lb2 = naming(&without, "launch_bound", &["aten::mul_"]);
    let advice = lb2["advice"].to_string();
    assert!(advice.contains("torch._foreach_"), "{advice}");
    assert!(advice.contains("aten::mul_ waits 19"), "{advice}");
    let ns = |f: &Value| f["impact_ns"].as_i64().expect("impact");
    assert_eq!(ns(lb2), ns(lb) + ns(tl));
}

/// `repeat_interleave` with a tensor of repeats (`repeat_interleave_sync`): the sync inside it
/// is named, and the advice is `output_size=`, not the boolean-mask remedies.
#[test]
fn repeat_interleave_syncs_are_pointed_at_output_size() {
    let a = analyze("h100_blind_repeat_interleave_sync_nostack.pt.trace.json.gz");
    let lb = naming(&a, "launch_bound", &["aten::repeat_interleave"]);
    let advice = lb["advice"].to_string();
    assert!(advice.contains("output_size="), "{advice}");
    assert!(!advice.contains("torch.where"), "{advice}");
    assert!(
        !advice.contains("Replay the step as a CUDA graph"),
        "{advice}"
    );
}

/// The eighth set's dense embedding under AdamW (`embedding_dense_adam`): a fused optimizer
/// step over an 8M-row table holds most of the GPU time near its roof, where no finding
/// prices a faster kernel; the verdict names it, with its share counted here from the events
/// (the `FusedAdam` kernels' time over all GPU operations' time), and the sparse remedy. The
/// twin (sparse gradients, SparseAdam) has no such holder.
#[test]
fn a_dominant_holder_near_its_roof_is_named_in_the_verdict() {
    let file = "h100_blind_embedding_dense_adam_nostack.pt.trace.json.gz";
    let ev = events_of(file);
    let gpu: Vec<&Value> = ev
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && ["kernel", "gpu_memcpy", "gpu_memset"]
                    .iter()
                    .any(|c| e["cat"] == *c)
        })
        .collect();
    let dur = |e: &&Value| e["dur"].as_f64().expect("dur");
    let total: f64 = gpu.iter().map(dur).sum();
    let adam: f64 = gpu
        .iter()
        .filter(|e| e["name"].as_str().is_some_and(|n| n.contains("FusedAdam")))
        .map(dur)
        .sum();
    let want = format!(
        "aten::_fused_adamw_ holds {:.0}% of the GPU time",
        100.0 * adam / total
    );
    let verdict = analyze(file)["summary"]["verdict"]
        .as_str()
        .expect("verdict")
        .to_string();
    assert!(verdict.contains(&want), "{want}: {verdict}");
    assert!(verdict.contains("torch.optim.SparseAdam"), "{verdict}");
    let twin = analyze("h100_blind_embedding_dense_adam_nostack_twin.pt.trace.json.gz");
    let twin_verdict = twin["summary"]["verdict"].as_str().expect("verdict");
    assert!(!twin_verdict.contains("holds"), "{twin_verdict}");
}

/// The eighth set's unpadded vocabulary (`vocab_unaligned`): the misaligned-GEMM finding leads,
/// and its row for the LM head's forward product names the vocabulary as N and the user's
/// function around the planted line, where the width is chosen.
#[test]
fn an_unpadded_vocabulary_is_named_with_its_line() {
    let a = analyze("h100_blind_vocab_unaligned.pt.trace.json.gz");
    let first = &findings(&a)[0];
    assert_eq!(first["rule"], "tensor_cores", "{first}");
    assert!(text(first).contains("not multiples of 8"), "{first}");
    let line = truth_h100("vocab_unaligned")["planted_source"]["lines"][0]
        .as_u64()
        .expect("line") as usize;
    let frame = frame_of(line);
    let rows = first["breakdown"].as_array().expect("rows");
    assert!(
        rows.iter().any(
            |r| r["label"].as_str().is_some_and(|l| l.contains("N=50257"))
                && r["python_frame"].as_str() == Some(frame.as_str())
        ),
        "{frame}: {first}"
    );
}

// ---------------------------------------------------------------- dense embedding gradients

/// Kernel time of each CPU operator's launches, by the operator's name and recorded dims, read
/// from the events (a kernel's `External id` is its launching operator's).
fn kernel_us_by_op(ev: &[Value]) -> Vec<(String, String, f64)> {
    let ops: std::collections::HashMap<u64, (String, String)> = ev
        .iter()
        .filter(|e| e["cat"] == "cpu_op")
        .filter_map(|e| {
            Some((
                e["args"]["External id"].as_u64()?,
                (
                    e["name"].as_str()?.to_string(),
                    e["args"]["Input Dims"].to_string(),
                ),
            ))
        })
        .collect();
    ev.iter()
        .filter(|e| e["cat"] == "kernel")
        .filter_map(|e| {
            let (name, dims) = ops.get(&e["args"]["External id"].as_u64()?)?;
            Some((name.clone(), dims.clone(), e["dur"].as_f64()?))
        })
        .collect()
}

/// The eighth set's `embedding_dense_adam`, the case the rule was written for: its impact is the
/// fused AdamW kernels' time, charged the table's share of the parameters' elements, plus the
/// zeroing of the table-sized gradient, less the share of the rows a step can touch (65,536
/// ids of 8,000,000): all counted here from the events. It holds against the twin's measure;
/// the sparse twin and a tied LM embedding get no such finding.
#[test]
fn an_embedding_with_dense_gradients_is_priced_by_its_whole_table_work() {
    let file = "h100_blind_embedding_dense_adam_nostack.pt.trace.json.gz";
    let by_op = kernel_us_by_op(&events_of(file));
    let (rows, width) = (8_000_000.0f64, 64.0f64);
    // The parameters AdamW takes: the table, then the MLP's [256, 64], [256], [1, 256], [1].
    let table_share = rows * width / (rows * width + 256.0 * 64.0 + 256.0 + 256.0 + 1.0);
    let adam: f64 = by_op
        .iter()
        .filter(|(n, ..)| n == "aten::_fused_adamw_")
        .map(|x| x.2)
        .sum();
    let fill: f64 = by_op
        .iter()
        .filter(|(n, d, _)| n == "aten::fill_" && d.starts_with("[[8000000,64]"))
        .map(|x| x.2)
        .sum();
    assert!(adam > 0.0 && fill > 0.0, "{adam} {fill}");
    let (steps, _) = profiled_steps(file);
    let touched = (65_536.0f64 / rows).min(1.0);
    let want_ms = (adam * table_share + fill) * (1.0 - touched) / 1e3;
    let a = analyze(file);
    let f = &findings(&a)[0];
    assert_eq!(f["rule"], "dense_embedding_grad", "{f}");
    let got_ms = f["impact_ns"].as_f64().expect("impact") / 1e6;
    assert!(
        (got_ms / want_ms - 1.0).abs() < 0.01,
        "{got_ms} ms against {want_ms} ms from the events"
    );
    assert!(
        text(f).contains("[8000000, 64]") && text(f).contains("SparseAdam"),
        "{f}"
    );
    within(
        got_ms / steps as f64,
        planted_ms(&truth_h100("embedding_dense_adam_nostack")),
        0.25,
        "embedding_dense_adam",
    );
    for quiet in [
        "h100_blind_embedding_dense_adam_nostack_twin.pt.trace.json.gz",
        "h200_gpt_train_gpu_bound_clean.pt.trace.json.gz",
    ] {
        let a = analyze(quiet);
        assert!(
            findings(&a)
                .iter()
                .all(|f| f["rule"] != "dense_embedding_grad"),
            "{quiet}"
        );
    }
}

/// The ninth set's `embedding_dense_adagrad`, a form the rule was not written against (an
/// `nn.Embedding` under foreach Adagrad rather than an `EmbeddingBag` under fused AdamW): the
/// finding leads, at the planted line with stacks, within 25% of the twin's measure either
/// way; the sparse twins get none.
#[test]
fn a_dense_embedding_under_adagrad_is_named_with_its_cost() {
    for sfx in ["", "_nostack"] {
        let name = format!("embedding_dense_adagrad{sfx}");
        let file = format!("h100_blind_{name}.pt.trace.json.gz");
        let t = truth_h100(&name);
        let (steps, _) = profiled_steps(&file);
        let a = analyze(&file);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "dense_embedding_grad", "{name}: {f}");
        assert!(text(f).contains("[4000000, 128]"), "{f}");
        if sfx.is_empty() {
            assert!(text(f).contains(&planted_frame(&t)), "{f}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
        let twin = analyze(&format!("h100_blind_{name}_twin.pt.trace.json.gz"));
        assert!(
            findings(&twin)
                .iter()
                .all(|f| f["rule"] != "dense_embedding_grad"),
            "{name} twin"
        );
    }
}

// ---------------------------------------------------------------- tiny batched matrices

/// The ninth set's `bmm_tiny_matrices`: batched 3×3 products, FP32 under the HBM roof, which
/// no rule named before (FP32 products were left to tensor_cores, whose TF32 remedy cannot
/// help a memory-bound product). The roofline finding leads with advice for tiny matrices, not
/// a larger batch, within 25% of the twin's measure; the verdict's rate is the products'
/// minimum traffic (each call reads [N, 3, 3] and [N, 3, 1] and writes [N, 3, 1] in FP32) over
/// their kernels' time, both counted here from the events; the twin gets no roofline finding.
#[test]
fn batched_products_of_tiny_matrices_are_named_with_their_remedy() {
    for sfx in ["", "_nostack"] {
        let name = format!("bmm_tiny_matrices{sfx}");
        let file = format!("h100_blind_{name}.pt.trace.json.gz");
        let t = truth_h100(&name);
        let (steps, _) = profiled_steps(&file);
        let a = analyze(&file);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "roofline", "{name}: {f}");
        let s = text(f);
        assert!(
            s.contains("aten::bmm") && s.contains("broadcast multiply"),
            "{s}"
        );
        assert!(!s.contains("batch more rows"), "{s}");
        if sfx.is_empty() {
            assert!(s.contains(&planted_frame(&t)), "{s}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
        // Calls are operators (cuBLAS splits a call of a million matrices into several
        // kernels); their time is their kernels'.
        let ev = events_of(&file);
        let calls = ev
            .iter()
            .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::bmm")
            .count();
        let us: f64 = kernel_us_by_op(&ev)
            .iter()
            .filter(|(n, ..)| n == "aten::bmm")
            .map(|x| x.2)
            .sum();
        let bytes = calls as f64 * 1e6 * (9.0 + 3.0 + 3.0) * 4.0;
        let tbps = bytes / (us / 1e6) / 1e12;
        let verdict = a["summary"]["verdict"].as_str().expect("verdict");
        assert!(
            verdict.contains(&format!("at {tbps:.2} TB/s")),
            "{tbps}: {verdict}"
        );
        assert!(!verdict.contains("shapes not recorded"), "{verdict}");
        // Fusing passes does not help a product run at 2% of the roof: its kernel does.
        assert!(verdict.contains("how they are computed"), "{verdict}");
        assert!(!verdict.contains("fuse passes"), "{verdict}");
        let twin = analyze(&format!("h100_blind_{name}_twin.pt.trace.json.gz"));
        assert!(
            findings(&twin).iter().all(|f| f["rule"] != "roofline"),
            "{name} twin"
        );
    }
}

// ---------------------------------------------------------------- loops over tensor lists

/// GPU idle right before each kernel (from the end of all earlier GPU work) whose launching
/// operator is one of `names`, ms, and how many such kernels: read from the events.
fn idle_before_kernels_of(file: &str, names: &[&str]) -> (f64, usize) {
    let ev = events_of(file);
    let ops: std::collections::HashMap<u64, &str> = ev
        .iter()
        .filter(|e| e["cat"] == "cpu_op")
        .filter_map(|e| Some((e["args"]["External id"].as_u64()?, e["name"].as_str()?)))
        .collect();
    let mut gpu: Vec<&Value> = ev
        .iter()
        .filter(|e| {
            ["kernel", "gpu_memset", "gpu_memcpy"]
                .iter()
                .any(|c| e["cat"] == *c)
        })
        .collect();
    gpu.sort_by(|a, b| a["ts"].as_f64().partial_cmp(&b["ts"].as_f64()).expect("ts"));
    let (mut idle, mut n, mut end) = (0.0, 0usize, f64::MIN);
    for k in gpu {
        let ts = k["ts"].as_f64().expect("ts");
        let op = k["args"]["External id"].as_u64().and_then(|x| ops.get(&x));
        if op.is_some_and(|o| names.contains(o)) && end > f64::MIN {
            idle += (ts - end).max(0.0);
            n += 1;
        }
        end = end.max(ts + k["dur"].as_f64().expect("dur"));
    }
    (idle / 1e3, n)
}

/// The seventh set's `ema_param_loop` (192 parameters, `e.mul_(d).add_(p, alpha=1-d)` each):
/// the loop is a finding of its own, counting 384 calls a step (two per parameter, from the
/// generator) and the GPU idle before their kernels, which the events give here (the waits
/// under 100 µs with nothing queued are all but all of it); launch_bound leaves those waits
/// to it and says so; the twin (`torch._foreach_lerp_`) has no loop.
#[test]
fn a_per_parameter_ema_loop_is_priced_apart_from_the_launch_waits() {
    let file = "h100_blind_ema_param_loop_nostack.pt.trace.json.gz";
    let (steps, _) = profiled_steps(file);
    let a = analyze(file);
    let f = naming(
        &a,
        "tensor_loop",
        &["aten::mul_", "aten::add_", "torch._foreach_lerp_"],
    );
    assert_eq!(
        f["metrics"]["calls"].as_f64(),
        Some((384 * steps) as f64),
        "{f}"
    );
    let (idle_ms, kernels) = idle_before_kernels_of(file, &["aten::mul_", "aten::add_"]);
    assert_eq!(kernels, 384 * steps);
    let got = f["impact_ns"].as_f64().expect("impact") / 1e6;
    assert!(
        got <= idle_ms && got >= 0.95 * idle_ms,
        "{got} ms against {idle_ms} ms of idle before the loop's kernels"
    );
    let lb = findings(&a)
        .iter()
        .find(|f| f["rule"] == "launch_bound")
        .expect("launch_bound");
    assert_eq!(
        lb["metrics"]["tensor_loop_ns"].as_f64(),
        f["impact_ns"].as_f64(),
        "{lb}"
    );
    assert!(text(lb).contains("see tensor_loop"), "{lb}");
    assert!(
        lb["breakdown"]
            .as_array()
            .expect("rows")
            .iter()
            .all(|r| r["label"] != "aten::mul_" && r["label"] != "aten::add_"),
        "{lb}"
    );
    let twin = analyze("h100_blind_ema_param_loop_nostack_twin.pt.trace.json.gz");
    assert!(findings(&twin).iter().all(|f| f["rule"] != "tensor_loop"));
}

/// The ninth set's `grad_clip_manual`, read while the rule was built (a norm per gradient,
/// then `p.grad.mul_(coef)` per gradient, 128 parameters): both runs are named, 256
/// calls a step, with the foreach norm and `clip_grad_norm_` in the advice, at the planted
/// function with stacks; the twin (`clip_grad_norm_`) has no loop.
#[test]
fn a_hand_written_gradient_clipping_loop_is_named_with_clip_grad_norm() {
    for sfx in ["", "_nostack"] {
        let name = format!("grad_clip_manual{sfx}");
        let file = format!("h100_blind_{name}.pt.trace.json.gz");
        let t = truth_h100(&name);
        let (steps, _) = profiled_steps(&file);
        let a = analyze(&file);
        let f = naming(
            &a,
            "tensor_loop",
            &["aten::linalg_vector_norm", "aten::mul_", "clip_grad_norm_"],
        );
        assert_eq!(
            f["metrics"]["calls"].as_f64(),
            Some((256 * steps) as f64),
            "{f}"
        );
        if sfx.is_empty() {
            assert!(text(f).contains(&planted_frame(&t)), "{f}");
        }
        let twin = analyze(&format!("h100_blind_{name}_twin.pt.trace.json.gz"));
        assert!(findings(&twin).iter().all(|f| f["rule"] != "tensor_loop"));
    }
}

/// The eighth set's `vocab_unaligned` without stacks: autograd's weight gradient of the LM head
/// multiplies a [50257, 8192] view whose recorded strides (read here from the events) are
/// [1, 50257], so its leading dimension is the vocabulary; the misaligned finding counts that
/// product with the two whose N or K is 50257, and its cost holds against the padded twin's
/// measure (it priced the forward and input-gradient products alone before, −28%).
#[test]
fn a_transposed_operand_with_an_odd_leading_dimension_is_misaligned() {
    let file = "h100_blind_vocab_unaligned_nostack.pt.trace.json.gz";
    let transposed = events_of(file).into_iter().any(|e| {
        e["name"] == "aten::mm"
            && e["args"]["Input Dims"] == serde_json::json!([[50257, 8192], [8192, 1024]])
            && e["args"]["Input Strides"] == serde_json::json!([[1, 50257], [1024, 1]])
    });
    assert!(
        transposed,
        "the weight gradient's operand is a transposed view"
    );
    let (steps, _) = profiled_steps(file);
    let a = analyze(file);
    let f = &findings(&a)[0];
    assert_eq!(f["rule"], "tensor_cores", "{f}");
    let rows = f["breakdown"].as_array().expect("rows");
    assert!(
        rows.iter().any(|r| r["label"]
            .as_str()
            .is_some_and(|l| l.contains("[50257, 8192] x [8192, 1024]"))),
        "{f}"
    );
    within(
        per_step_ms(f, steps),
        planted_ms(&truth_h100("vocab_unaligned_nostack")),
        0.25,
        "vocab_unaligned",
    );
}

// ---------------------------------------------------------------- tenth set (H200)

/// The tenth set, captured after this session's rules and scored before any change for it:
/// each of them meets a form it was not written against, and holds within 25% of what the
/// twin measured outside the profiler, with and without stacks: a per-parameter
/// `clamp_`/`add_` SGD step (`tensor_loop`, written for an EMA's `mul_`/`add_`), an
/// `EmbeddingBag(sum)` under plain SGD (`dense_embedding_grad`, written for fused AdamW), 4×4
/// transforms through `torch.matmul` (`roofline`'s tiny matrices, written for 3×3 `bmm`), and
/// GELU written out with `erf` (`unfused_elementwise`). The twins get none of these findings.
#[test]
fn the_tenth_sets_forms_are_named_within_a_quarter_of_their_cost() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "clip_value_sgd_loop",
            "tensor_loop",
            &["aten::clamp_", "aten::add_", "torch._foreach_add_"],
        ),
        (
            "embedding_bag_dense_sgd",
            "dense_embedding_grad",
            &["[10000000, 32]", "sparse=True"],
        ),
        (
            "matmul_4x4_transforms",
            "roofline",
            &["aten::bmm", "[4, 4] x [4, 1]", "broadcast multiply"],
        ),
        ("gelu_erf_manual", "unfused_elementwise", &["aten::erf"]),
    ];
    forms_hold("h200", cases, &[]);
}

/// The tenth set's `stack_row_loop` with stacks: 4,096 rows a step taken with `x[i]` one by one
/// (the generator's batch, and the `aten::select` calls counted here from the events), then one
/// stack. The host's views leave the GPU idle, and the advice names the loop and one index,
/// not "do it on the GPU".
#[test]
fn a_loop_of_row_views_is_pointed_at_one_index() {
    let file = "h200_blind_stack_row_loop.pt.trace.json.gz";
    let (steps, _) = profiled_steps(file);
    let selects = events_of(file)
        .iter()
        .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::select")
        .count();
    assert_eq!(selects, 4096 * steps);
    let a = analyze(file);
    let f = naming(&a, "idle_gaps", &["aten::select ran 4096 times a step"]);
    assert!(text(f).contains("x[idx]"), "{f}");
}

/// The tenth set's `stack_row_loop` without stacks: its first profiled step took 285 ms where
/// the other three took 37, and the GPU sat idle from the window's start through all of it.
/// That stall opens the window and does not come back in the later steps: it is paid once, so
/// idle_gaps leaves it out of its impact, and says so, while the title keeps every gap. The
/// gaps (at least 100 µs between GPU operations, over the steps' host span) are measured here
/// from the events.
#[test]
fn a_stall_that_opens_the_window_once_is_left_out_of_the_impact() {
    let file = "h200_blind_stack_row_loop_nostack.pt.trace.json.gz";
    let ev = events_of(file);
    let steps = step_ranges(&ev, "user_annotation");
    let (w0, w1) = (steps[0].0, steps[steps.len() - 1].1);
    let mut ops: Vec<(f64, f64)> = ev
        .iter()
        .filter(|e| {
            matches!(
                e["cat"].as_str(),
                Some("kernel" | "gpu_memcpy" | "gpu_memset")
            )
        })
        .map(|e| {
            let (a, b, _) = thread_span(e);
            (a, b)
        })
        .filter(|&(a, b)| b > w0 && a < w1)
        .collect();
    ops.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut gaps = Vec::new();
    let mut at = w0;
    for (a, b) in ops {
        if a - at >= 100.0 {
            gaps.push(a - at);
        }
        at = at.max(b);
    }
    if w1 - at >= 100.0 {
        gaps.push(w1 - at);
    }
    // The stall: the first step's extra host time, before any GPU work.
    let first = gaps[0];
    assert!(first > 5.0 * (steps[1].1 - steps[1].0), "{first} µs");
    let all: f64 = gaps.iter().sum();
    let a = analyze(file);
    let f = naming(&a, "idle_gaps", &["stall at the start of the window"]);
    let t = f["title"].as_str().expect("title");
    assert!(
        t.contains(&format!("{} gaps", gaps.len()))
            && t.contains(&format!("cost {:.1} ms", all / 1e3)),
        "{t}"
    );
    let impact = f["impact_ns"].as_f64().expect("impact") / 1e3;
    assert!(
        ((all - first) / impact - 1.0).abs() < 0.001,
        "{impact} µs against {} µs",
        all - first
    );
    assert!(
        text(f).contains("the later steps do not pay it again"),
        "{f}"
    );
    // With stacks, the same loop has no such stall and every gap stays in the impact.
    let b = analyze("h200_blind_stack_row_loop.pt.trace.json.gz");
    let g = naming(&b, "idle_gaps", &["aten::select"]);
    assert!(!text(g).contains("do not pay it again"), "{g}");
    assert_eq!(
        g["impact_ns"].as_f64(),
        g["metrics"]["gap_ns"].as_f64(),
        "{g}"
    );
}

/// The seventh set's `empty_cache_step` with stacks, captured without `profile_memory`: the
/// `torch.cuda.empty_cache()` frames (one a step, counted here from the events) are named in
/// the loop, which the rule skipped when the trace had no allocator samples; the twin has none.
#[test]
fn empty_cache_in_the_loop_is_named_without_allocator_samples() {
    let file = "h100_blind_empty_cache_step.pt.trace.json.gz";
    let (steps, _) = profiled_steps(file);
    let frames = events_of(file)
        .iter()
        .filter(|e| {
            e["name"].as_str().is_some_and(|n| {
                n.contains("torch/cuda/memory.py(") && n.ends_with("): empty_cache")
            })
        })
        .count();
    assert_eq!(frames, steps);
    let a = analyze(file);
    naming(
        &a,
        "memory_pressure",
        &[&format!(
            "empty_cache() runs in the loop: {steps} calls in {steps} steps"
        )],
    );
    let twin = analyze("h100_blind_empty_cache_step_twin.pt.trace.json.gz");
    assert!(
        findings(&twin)
            .iter()
            .all(|f| f["rule"] != "memory_pressure")
    );
}

// ---------------------------------------------------------------- eleventh set (H100)

/// The eleventh set: the ninth and tenth sets' problems written differently (an `nn.Embedding`
/// two-tower model under foreach Adam, `bmm` of 3x3 rotations, a SwiGLU width of 2730, gradients
/// zeroed one by one), each named at medium or high severity by the rule built for the earlier
/// form, at the planted line with stacks, within a quarter of what the twin measured outside
/// the profiler; the twins get no such finding. (`zero_grad_loop` with stacks is +28%: the
/// profiler recording Python stacks slows the host loop more; its cost is checked without.)
#[test]
fn the_eleventh_sets_forms_are_named_within_a_quarter_of_their_cost() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "embedding_dense_adam_foreach",
            "dense_embedding_grad",
            &["2 tables [4000000, 64]", "all 8000000 rows", "sparse=True"],
        ),
        (
            "bmm_3x3_compose",
            "roofline",
            &["aten::bmm", "[3, 3] x [3, 3]", "broadcast multiply"],
        ),
        ("swiglu_width_unaligned", "tensor_cores", &["2730"]),
        (
            "zero_grad_loop",
            "tensor_loop",
            &["aten::zero_", "set_to_none=True"],
        ),
    ];
    forms_hold("h100", cases, &["zero_grad_loop"]);
}

/// The eleventh set's `ragged_pad_loop`: 512 sequences a step written into a padded batch with
/// `padded[i, :n] = flat[s:s + n]` (the `aten::copy_` calls counted here from the events). The
/// copies wait for their launches, and the advice names the slice loop and one indexed copy
/// ahead of the varying-shape advice; the first set's decode twin, which writes one token a
/// step into a static cache between its other operators, keeps the general loop advice.
#[test]
fn slices_copied_one_at_a_time_are_pointed_at_one_indexed_copy() {
    for file in [
        "h100_blind_ragged_pad_loop.pt.trace.json.gz",
        "h100_blind_ragged_pad_loop_nostack.pt.trace.json.gz",
    ] {
        let (steps, _) = profiled_steps(file);
        let copies = events_of(file)
            .iter()
            .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::copy_")
            .count();
        assert!(copies >= 512 * steps, "{file}: {copies} copies");
        let a = analyze(file);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "launch_bound", "{file}: {f}");
        let advice: Vec<&str> = f["advice"]
            .as_array()
            .expect("advice")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let waits: usize = advice[0]
            .strip_prefix("aten::copy_ waits ")
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{file}: {advice:?}"));
        assert!(
            waits * steps <= copies && waits >= 400,
            "{file}: {waits} of {copies}"
        );
        assert!(advice[0].contains("one indexed copy"), "{file}: {advice:?}");
    }
    let twin = analyze("h200_blind_cat_kv_cache_twin.pt.trace.json.gz");
    let text = findings(&twin)
        .iter()
        .map(|f| f["advice"].to_string())
        .collect::<String>();
    assert!(!text.contains("one indexed copy"), "{text}");
}

/// Device-to-device copies are GPU work no kernel holds: the share copy_hotspots states is of
/// kernels, copies and memsets together, computed here from the events of `ragged_pad_loop`
/// (where the slice copies are memcpys and the kernels alone take less time than the copies).
#[test]
fn the_copy_share_counts_memcpys_in_the_gpus_work() {
    let file = "h100_blind_ragged_pad_loop_nostack.pt.trace.json.gz";
    let ev = events_of(file);
    let dur = |cat: &str| -> f64 {
        ev.iter()
            .filter(|e| e["cat"] == cat)
            .map(|e| e["dur"].as_f64().expect("dur"))
            .sum()
    };
    let (kernels, memcpy, memset) = (dur("kernel"), dur("gpu_memcpy"), dur("gpu_memset"));
    assert!(memcpy > 0.5 * kernels, "{kernels} {memcpy}");
    let a = analyze(file);
    let f = naming(&a, "copy_hotspots", &["of the GPU's work"]);
    let share = f["metrics"]["share_of_gpu_work"].as_f64().expect("share");
    let gpu_us = f["metrics"]["gpu_ns"].as_f64().expect("gpu_ns") / 1e3;
    // The window holds the profiled steps: the events outside it are few and short here.
    let expect = gpu_us / (kernels + memcpy + memset);
    assert!(
        share <= 1.0 && (share / expect - 1.0).abs() < 0.05,
        "{share} vs {expect}"
    );
}

// ---------------------------------------------------------------- twelfth set (H200)

/// The twelfth set's `linalg_inv_solve`: 16,384 FP32 systems of 64 x 64 solved as
/// `torch.linalg.inv(A) @ b` with 8 right-hand sides. The inverse holds nearly all the GPU
/// time; the finding names it, the product after it, and `torch.linalg.solve`, and prices the
/// change within a quarter of what the solve twin saved outside the profiler. The shapes are
/// read here from the events; the twin gets no such finding.
#[test]
fn an_explicit_inverse_times_a_matrix_is_priced_as_a_solve() {
    for sfx in ["", "_nostack"] {
        let name = format!("linalg_inv_solve{sfx}");
        let file = format!("h200_blind_{name}.pt.trace.json.gz");
        let ev = events_of(&file);
        let dims = |op: &str| -> Vec<String> {
            ev.iter()
                .filter(|e| e["cat"] == "cpu_op" && e["name"] == op)
                .map(|e| e["args"]["Input Dims"].to_string())
                .collect()
        };
        let inv = dims("aten::linalg_inv");
        assert!(!inv.is_empty() && inv.iter().all(|d| d.starts_with("[[16384,64,64]")));
        assert!(
            dims("aten::matmul")
                .iter()
                .all(|d| d == "[[16384,64,64],[16384,64,8]]")
        );
        let (t, a, steps, _) = mistake(&name);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "hot_operator", "{name}: {f}");
        let s = text(f);
        for w in [
            "aten::linalg_inv",
            "[16384, 64, 64]",
            "[16384, 64, 8]",
            "torch.linalg.solve",
        ] {
            assert!(s.contains(w), "{name}: {w}: {s}");
        }
        if sfx.is_empty() {
            assert!(s.contains(&planted_frame(&t)), "{name}: {s}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
        let twin = analyze(&format!("h200_blind_{name}_twin.pt.trace.json.gz"));
        assert!(
            !findings(&twin)
                .iter()
                .any(|f| text(f).contains("explicit inverses")),
            "{name} twin"
        );
    }
}

/// The twelfth set's `quantile_sort` was planted the wrong way round: its twin, `torch.kthvalue`
/// of 8M values, is the slow one (one block on the whole GPU, counted here from the events).
/// That capture's first finding names the kernel and its operator, prices it within a quarter of
/// the difference the two measured outside the profiler, points at a device-wide sort, and the
/// verdict does not call the step memory-bound.
#[test]
fn a_one_block_selection_is_named_and_not_called_memory_bound() {
    let file = "h200_blind_quantile_sort_nostack_twin.pt.trace.json.gz";
    let ev = events_of(file);
    let kth: Vec<&Value> = ev
        .iter()
        .filter(|e| {
            e["cat"] == "kernel"
                && e["name"]
                    .as_str()
                    .is_some_and(|n| n.contains("gatherKthValue"))
        })
        .collect();
    assert!(!kth.is_empty());
    assert!(
        kth.iter()
            .all(|e| e["args"]["grid"] == serde_json::json!([1, 1, 1]))
    );
    let (steps, _) = profiled_steps(file);
    let t = truth("quantile_sort_nostack");
    let cost = -planted_ms(&t);
    let a = analyze(file);
    let f = &findings(&a)[0];
    assert_eq!(f["rule"], "underfilled_kernels", "{f}");
    assert!(text(f).contains("aten::kthvalue"), "{f}");
    assert!(text(f).contains("torch.quantile"), "{f}");
    within(per_step_ms(f, steps), cost, 0.25, "kthvalue");
    let verdict = a["summary"]["verdict"].as_str().unwrap_or_default();
    assert!(!verdict.contains("memory-bound"), "{verdict}");
    assert!(verdict.contains("a few of its SMs"), "{verdict}");
    assert_eq!(a["summary"]["membound"][0]["bound"], "parallelism");
}

/// Copies of at most 64 bytes to the device in a capture's events (Python numbers made device
/// tensors), counted from the file.
fn tiny_uploads(file: &str) -> usize {
    events_of(file)
        .iter()
        .filter(|e| {
            e["cat"] == "gpu_memcpy"
                && e["args"]["bytes"].as_u64().is_some_and(|b| b <= 64)
                && e["name"].as_str().is_some_and(|n| n.contains("HtoD"))
        })
        .count()
}

/// A capture's constant_uploads finding, checked as a user reads it: medium or high, its
/// copies those counted from the events, its remedy the Python number as it is; and the waits
/// it prices are taken from launch_bound and sync_stalls, not counted twice: run without it,
/// those rules' impacts grow by exactly its launch waits and its waits after drains.
fn constant_uploads_named(file: &str, copies: usize) -> Value {
    assert_eq!(tiny_uploads(file), copies, "{file}");
    let a = analyze(file);
    let f = naming(&a, "constant_uploads", &["aten::to", "torch.full(("]).clone();
    assert!(
        f["severity"] == "medium" || f["severity"] == "high",
        "{file}: {f}"
    );
    assert_eq!(metric(&f, "copies") as usize, copies, "{file}");
    assert!(
        text(&f).contains(&format!("{copies} copies of at most 64 bytes")),
        "{file}: {f}"
    );
    let without = analyze_json(&own(file), &["--skip-rules", "constant_uploads"]);
    let impact = |doc: &Value, rule: &str| -> i64 {
        findings(doc)
            .iter()
            .filter(|g| g["rule"] == rule)
            .map(|g| g["impact_ns"].as_i64().expect("impact"))
            .sum()
    };
    assert_eq!(
        impact(&without, "launch_bound"),
        impact(&a, "launch_bound") + metric(&f, "launch_waits_ns") as i64,
        "{file}"
    );
    // sync_stalls reports from 1% of the window: compare where it reports without the finding.
    if impact(&without, "sync_stalls") > 0 {
        assert_eq!(
            impact(&without, "sync_stalls"),
            impact(&a, "sync_stalls") + metric(&f, "drained_ns") as i64,
            "{file}"
        );
    }
    assert_eq!(
        f["impact_ns"].as_i64().expect("impact"),
        (metric(&f, "launch_waits_ns") + metric(&f, "drained_ns")) as i64
    );
    f
}

/// The twelfth set's `tensor_scalar_per_step`: 48 Python numbers a step made device tensors
/// (`torch.tensor(c, device="cuda")`), each a 2-byte copy to the GPU (counted here from the
/// events), named by their own finding at the planted function where stacks were recorded;
/// its twin (the Python float) has none.
#[test]
fn scalars_made_device_tensors_in_the_loop_are_named() {
    for (file, frame) in [
        (
            "h200_blind_tensor_scalar_per_step.pt.trace.json.gz",
            Some("blind.py(2300): forward"),
        ),
        (
            "h200_blind_tensor_scalar_per_step_nostack.pt.trace.json.gz",
            None,
        ),
    ] {
        let (steps, _) = profiled_steps(file);
        let f = constant_uploads_named(file, 48 * steps);
        if let Some(frame) = frame {
            assert!(text(&f).contains(frame), "{file}: {f}");
        }
        let twin = file.replace(".pt.trace", "_twin.pt.trace");
        assert_eq!(tiny_uploads(&twin), 0);
        assert!(
            findings(&analyze(&twin))
                .iter()
                .all(|g| g["rule"] != "constant_uploads")
        );
    }
}

// ---------------------------------------------------------------- thirteenth set (H100)

/// The thirteenth set: the twelfth set's problems written differently, scored by the changes
/// made for the twelfth. `x @ torch.inverse(C)` (the inverse on the right, `aten::inverse`)
/// is priced as `solve(..., left=False)`; `torch.kthvalue` along the rows of a [4, 2M] tensor
/// (four blocks) is named and the verdict says few SMs; both within a quarter of what their
/// twins saved outside the profiler. `torch.tensor(w).cuda()` for 32 loss weights a step gets
/// the constant_uploads finding and a padded batch unpacked slice by slice the slice-copy
/// advice, the counts read here from the events.
#[test]
fn the_thirteenth_sets_forms_are_named() {
    for sfx in ["", "_nostack"] {
        let name = format!("inverse_right_multiply{sfx}");
        let file = format!("h100_blind_{name}.pt.trace.json.gz");
        let t = truth_h100(&name);
        let (steps, _) = profiled_steps(&file);
        let a = analyze(&file);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "hot_operator", "{name}: {f}");
        for w in [
            "aten::inverse",
            "[4096, 128, 128]",
            "[4096, 32, 128]",
            "left=False",
        ] {
            assert!(text(f).contains(w), "{name}: {w}: {f}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);

        let name = format!("kthvalue_few_rows{sfx}");
        let file = format!("h100_blind_{name}.pt.trace.json.gz");
        let t = truth_h100(&name);
        let (steps, _) = profiled_steps(&file);
        let a = analyze(&file);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "underfilled_kernels", "{name}: {f}");
        assert!(text(f).contains("aten::kthvalue"), "{name}: {f}");
        if sfx.is_empty() {
            assert!(text(f).contains(&planted_frame(&t)), "{name}: {f}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
        let verdict = a["summary"]["verdict"].as_str().unwrap_or_default();
        assert!(verdict.contains("a few of its SMs"), "{name}: {verdict}");

        let file = format!("h100_blind_aux_loss_weights_cuda{sfx}.pt.trace.json.gz");
        let (steps, _) = profiled_steps(&file);
        constant_uploads_named(&file, 32 * steps);

        let file = format!("h100_blind_ragged_unpad_loop{sfx}.pt.trace.json.gz");
        let a = analyze(&file);
        naming(
            &a,
            "launch_bound",
            &["slices copied one at a time", "one indexed copy"],
        );
    }
}

/// Each `aten::_unique2` call's kernel time and the time of its kernels named `sort`, in
/// microseconds, with its first input's type: the kernels found through the correlation ids
/// of the runtime calls made on the call's thread while it ran.
fn unique_sort_times(ev: &[Value]) -> Vec<(f64, f64, String)> {
    // (kernel time, sort kernel time) per correlation id.
    let mut kernels: std::collections::HashMap<i64, (f64, f64)> = Default::default();
    for e in ev.iter().filter(|e| e["cat"] == "kernel") {
        let d = e["dur"].as_f64().expect("dur");
        let sort = e["name"]
            .as_str()
            .is_some_and(|n| n.to_ascii_lowercase().contains("sort"));
        let k = kernels
            .entry(e["args"]["correlation"].as_i64().expect("correlation"))
            .or_default();
        k.0 += d;
        k.1 += if sort { d } else { 0.0 };
    }
    let mut out = Vec::new();
    for u in ev
        .iter()
        .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::_unique2")
    {
        let (a, b) = (u["ts"].as_f64().unwrap(), u["dur"].as_f64().unwrap());
        let (mut total, mut sort) = (0.0, 0.0);
        for l in ev.iter().filter(|e| {
            e["cat"] == "cuda_runtime"
                && e["tid"] == u["tid"]
                && e["ts"].as_f64().is_some_and(|t| t >= a && t <= a + b)
        }) {
            if let Some(k) = l["args"]["correlation"]
                .as_i64()
                .and_then(|c| kernels.get(&c))
            {
                total += k.0;
                sort += k.1;
            }
        }
        let ty = u["args"]["Input type"][0]
            .as_str()
            .unwrap_or("")
            .to_string();
        out.push((total, sort, ty));
    }
    out
}

/// `torch.unique(x, return_counts=True)` over 4M int64 labels holds three quarters of the GPU's
/// time in the third set's capture, and no finding named it as GPU time before (only its
/// syncs). The first finding now names it, with and without stacks, priced as the calls' kernel
/// time beyond what `torch.bincount` would take: three reads of every key (its min, its max,
/// its count), each at the rate of one pass of the radix sort (recomputed here from the
/// events: int64 keys make eight passes after a histogram read). That price lands within a
/// quarter of what the twin (`torch.bincount`) measured outside the profiler; the twin gets no
/// such finding.
#[test]
fn unique_used_to_count_is_named_as_the_sort_it_runs() {
    for sfx in ["", "_nostack"] {
        let name = format!("unique_counts{sfx}");
        let file = format!("h200_blind_{name}.pt.trace.json.gz");
        let ev = events_of(&file);
        let (steps, _) = profiled_steps(&file);
        for u in ev
            .iter()
            .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::_unique2")
        {
            assert_eq!(
                u["args"]["Concrete Inputs"],
                serde_json::json!(["", "True", "False", "True"]),
                "{name}"
            );
        }
        let calls = unique_sort_times(&ev);
        assert!(!calls.is_empty(), "{name}");
        let mut saving_us = 0.0;
        for (total, sort, ty) in &calls {
            assert_eq!(ty, "long int", "{name}");
            assert!(*sort > 0.0, "{name}: a unique call without sort kernels");
            saving_us += total - 3.0 * sort / 9.0;
        }
        let t = truth("unique_counts_nostack");
        let a = analyze(&file);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "hot_operator", "{name}: {f}");
        let s = text(f);
        for w in [
            "torch.unique(return_counts=True)",
            "4194304 int64",
            "index_add_",
        ] {
            assert!(s.contains(w), "{name}: {w}: {s}");
        }
        let impact_us = f["impact_ns"].as_f64().expect("impact") / 1e3;
        assert!(
            (impact_us / saving_us - 1.0).abs() < 0.01,
            "{name}: impact {impact_us:.0} µs against {saving_us:.0} µs from the events"
        );
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
        let twin = analyze(&format!("h200_blind_{name}_twin.pt.trace.json.gz"));
        assert!(
            !findings(&twin)
                .iter()
                .any(|f| text(f).contains("torch.unique(return_counts=True)")),
            "{name} twin"
        );
    }
}

/// Set 14's two counting mistakes recaptured on an H200 against a `torch.bincount` twin (the
/// advice's first choice). The twin's events show what the price and the advice say bincount
/// does: each call runs two reductions (min and max) and copies each back to the host before
/// its histogram kernel. The counting finding's price is the events' kernel time beyond three
/// sort passes a call, and it lands nearer the measured difference than the one-pass price it
/// replaced did (measured 0.117 and 0.255 ms a step; three passes price 0.162 and 0.337, one
/// pass priced 0.272 and 0.435: the rest is bincount's second host wait a call, which the
/// profiled trace cannot price, as the evidence says).
#[test]
fn unique_counting_is_priced_against_the_bincount_it_advises() {
    for (scenario, passes) in [
        ("class_hist_unique_bincount", 5.0),
        ("token_frequency_unique_bincount", 9.0),
    ] {
        for sfx in ["", "_nostack"] {
            let name = format!("{scenario}{sfx}");
            let file = format!("h200_blind_{name}.pt.trace.json.gz");
            // The twin: two reductions and two device-to-host copies per bincount call.
            let tev = events_of(&format!("h200_blind_{name}_twin.pt.trace.json.gz"));
            let corr_of = |cat: &str, pick: &dyn Fn(&str) -> bool| {
                tev.iter()
                    .filter(|e| e["cat"] == cat && e["name"].as_str().is_some_and(pick))
                    .filter_map(|e| e["args"]["correlation"].as_i64())
                    .collect::<std::collections::HashSet<i64>>()
            };
            let reductions = corr_of("kernel", &|n| n.contains("reduce_kernel"));
            let readbacks = corr_of("gpu_memcpy", &|n| n.contains("DtoH"));
            let bincounts: Vec<&Value> = tev
                .iter()
                .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::bincount")
                .collect();
            assert!(!bincounts.is_empty(), "{name} twin");
            for b in &bincounts {
                let (a, d) = (b["ts"].as_f64().unwrap(), b["dur"].as_f64().unwrap());
                let inside: Vec<i64> = tev
                    .iter()
                    .filter(|e| {
                        e["cat"] == "cuda_runtime"
                            && e["tid"] == b["tid"]
                            && e["ts"].as_f64().is_some_and(|t| t >= a && t <= a + d)
                    })
                    .filter_map(|e| e["args"]["correlation"].as_i64())
                    .collect();
                let n = |set: &std::collections::HashSet<i64>| {
                    inside.iter().filter(|c| set.contains(c)).count()
                };
                assert_eq!(n(&reductions), 2, "{name} twin: min and max");
                assert_eq!(n(&readbacks), 2, "{name} twin: two waits");
            }

            let ev = events_of(&file);
            let (steps, _) = profiled_steps(&file);
            let (mut three, mut one) = (0.0, 0.0);
            for (total, sort, _) in unique_sort_times(&ev) {
                assert!(sort > 0.0, "{name}");
                three += total - 3.0 * sort / passes;
                one += total - sort / passes;
            }
            let a = analyze(&file);
            let f = findings(&a)
                .iter()
                .find(|f| text(f).contains("torch.unique(return_counts=True)"))
                .unwrap_or_else(|| panic!("{name}: no counting finding"));
            let impact_us = f["impact_ns"].as_f64().expect("impact") / 1e3;
            assert!(
                (impact_us / three - 1.0).abs() < 0.01,
                "{name}: impact {impact_us:.0} µs against {three:.0} µs from the events"
            );
            let s = text(f);
            assert!(s.contains("three passes"), "{name}: {s}");
            assert!(s.contains("two waits"), "{name}: {s}");
            let measured = planted_ms(&truth(&name));
            let per = |us: f64| us / 1e3 / steps as f64;
            assert!(
                (per(three) - measured).abs() < (per(one) - measured).abs(),
                "{name}: three passes {:.3} ms a step, one pass {:.3}, measured {measured:.3}",
                per(three),
                per(one)
            );
        }
    }
}

/// The fourteenth set: `torch.unique` on code the counting finding was not written against.
/// A class histogram of 2M int32 labels over 100 classes measured its `index_add_` twin slower
/// than the sort (truth file), so the advice must lead with `torch.bincount` and say why
/// `index_add_` can lose; a deduplication (`return_inverse=True`) gets no counting advice; and
/// a frequency penalty whose small sorts launch about sixteen kernels a call, eight calls a
/// step (counted here from the events), is no "Python loop of small calls", and a graph cannot
/// capture it: the advice offers a CUDA graph only after removing that sync.
#[test]
fn unique_on_code_the_counting_finding_was_not_written_against() {
    let calls_of = |file: &str| {
        events_of(file)
            .into_iter()
            .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::_unique2")
            .collect::<Vec<Value>>()
    };
    for sfx in ["", "_nostack"] {
        // Class histogram: inverted, the twin is the slow one.
        let name = format!("class_hist_unique_int32{sfx}");
        let t = truth_on("h100", &name);
        assert!(
            t["cost"]["twin_median_ms"].as_f64() > t["cost"]["mistake_median_ms"].as_f64(),
            "{name}: the index_add_ twin measured slower"
        );
        let file = format!("h100_blind_{name}.pt.trace.json.gz");
        let uniques = calls_of(&file);
        assert!(!uniques.is_empty());
        for u in &uniques {
            assert_eq!(u["args"]["Input type"][0], "int", "{name}");
            assert_eq!(u["args"]["Input Dims"][0], serde_json::json!([2097152]));
        }
        let a = analyze(&file);
        let f = findings(&a)
            .iter()
            .find(|f| text(f).contains("torch.unique(return_counts=True)"))
            .unwrap_or_else(|| panic!("{name}: no counting finding"));
        assert!(text(f).contains("2097152 int32"), "{name}: {f}");
        let advice = f["advice"][0].as_str().expect("advice");
        let (b, i) = (
            advice.find("torch.bincount").expect("bincount"),
            advice.find("index_add_").expect("index_add_"),
        );
        assert!(b < i, "{name}: bincount first: {advice}");
        assert!(advice.contains("collide"), "{name}: {advice}");

        // Deduplication: no counting advice anywhere.
        let name = format!("unique_dedupe_lookup{sfx}");
        let file = format!("h100_blind_{name}.pt.trace.json.gz");
        for u in calls_of(&file) {
            assert_eq!(
                u["args"]["Concrete Inputs"],
                serde_json::json!(["", "True", "True", "False"]),
                "{name}: return_inverse=True, return_counts=False"
            );
        }
        let a = analyze(&file);
        for f in findings(&a) {
            let s = text(f);
            assert!(
                !s.contains("count without sorting") && !s.contains("return_counts=True"),
                "{name}: {s}"
            );
        }

        // Frequency penalty: calls, not kernels, and the sync before the graph.
        let name = format!("token_frequency_unique{sfx}");
        let file = format!("h100_blind_{name}.pt.trace.json.gz");
        let (steps, _) = profiled_steps(&file);
        let calls = calls_of(&file).len();
        assert_eq!(calls / steps, 8, "{name}: {calls} calls in {steps} steps");
        let a = analyze(&file);
        let f = findings(&a)
            .iter()
            .find(|f| f["rule"] == "launch_bound")
            .unwrap_or_else(|| panic!("{name}: no launch_bound finding"));
        let advice: Vec<&str> = f["advice"]
            .as_array()
            .expect("advice")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            !advice.iter().any(|a| a.contains("loop of small calls")),
            "{name}: {advice:?}"
        );
        // The graph advice is the sync line's second half, not a line of its own promising
        // one launch for every kernel of a step that waits eight times.
        assert!(
            advice
                .iter()
                .any(|a| a.contains("cannot capture a synchronisation")
                    && a.contains("aten::_unique2")
                    && a.contains("before replaying the step as a graph")),
            "{name}: {advice:?}"
        );
        assert!(
            !advice
                .iter()
                .any(|a| a.contains("Replay the step as a CUDA graph")),
            "{name}: {advice:?}"
        );
    }
}

/// An optimizer already on the multi-tensor path (`aten::_foreach_*` in the trace, counted here
/// from the events) is advised `fused=True`, not the `foreach=True` it already runs (a field T4
/// trace on foreach Adam was told "or foreach=True").
#[test]
fn an_optimizer_already_on_foreach_is_not_told_to_use_it() {
    for sfx in ["", "_nostack"] {
        let file = format!("h100_blind_embedding_dense_adam_foreach{sfx}.pt.trace.json.gz");
        let foreach = events_of(&file)
            .iter()
            .filter(|e| {
                e["cat"] == "cpu_op"
                    && e["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("aten::_foreach_"))
            })
            .count();
        assert!(foreach > 0, "{file}: no foreach operators");
        let a = analyze(&file);
        let advice: Vec<String> = findings(&a)
            .iter()
            .flat_map(|f| f["advice"].as_array().cloned().unwrap_or_default())
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        assert!(
            advice.iter().any(|a| a.contains("fused=True")),
            "{file}: {advice:?}"
        );
        assert!(
            !advice.iter().any(|a| a.contains("foreach=True")),
            "{file}: {advice:?}"
        );
    }
}

// ---------------------------------------------------------------- fifteenth set (H100)

/// The fifteenth set: Python numbers made device tensors in code the constant_uploads finding
/// was not written against. A masked fill's zero per layer (`where_zero_tensor`) and a decode
/// loop's temperature per token (`temperature_decode`) wait for their launches on a host-bound
/// step; a per-layer scale on a GPU-bound stack of large products (`scale_tensor_gpu_bound`)
/// waits after each copy's sync has drained the queue, which sync_stalls priced before and
/// now leaves to the finding. Each is named with its copies (counted here from the events), at
/// the planted function where stacks were recorded, and the twins (the Python number) have no
/// such finding. The verdict of the GPU-bound one stays GPU-bound.
#[test]
fn python_numbers_made_device_tensors_are_named_where_the_rule_was_not_written() {
    for (name, per_step) in [
        ("where_zero_tensor", 32),
        ("temperature_decode", 64),
        ("scale_tensor_gpu_bound", 16),
    ] {
        for sfx in ["", "_nostack"] {
            let scenario = format!("{name}{sfx}");
            let t = truth_h100(&scenario);
            let file = format!("h100_blind_{scenario}.pt.trace.json.gz");
            let (steps, _) = profiled_steps(&file);
            let f = constant_uploads_named(&file, per_step * steps);
            if sfx.is_empty() {
                assert!(text(&f).contains(&planted_frame(&t)), "{scenario}: {f}");
            }
            if name == "scale_tensor_gpu_bound" {
                assert!(
                    metric(&f, "drained_ns") > metric(&f, "launch_waits_ns"),
                    "{f}"
                );
                let a = analyze(&file);
                let verdict = a["summary"]["verdict"].as_str().unwrap_or_default();
                assert!(verdict.starts_with("GPU-bound"), "{verdict}");
            }
            let twin = format!("h100_blind_{scenario}_twin.pt.trace.json.gz");
            assert_eq!(tiny_uploads(&twin), 0, "{twin}");
            assert!(
                findings(&analyze(&twin))
                    .iter()
                    .all(|g| g["rule"] != "constant_uploads"),
                "{twin}"
            );
        }
    }
}

// ---------------------------------------------------------------- sixteenth set (H100)

/// The sixteenth set, captured after the constant_uploads finding: clamp bounds made device
/// tensors with `.cuda()` twice a layer in training (`clamp_bounds_cuda`, 48 copies a step) are
/// named by it, at the planted function where stacks were recorded; a loss scale made a device
/// tensor once a step (`loss_scale_once`, one copy a step, counted here from the events) is no
/// pattern of the step and gets no such finding, nor do the twins.
#[test]
fn one_upload_a_step_is_not_a_pattern_and_two_a_layer_are() {
    for sfx in ["", "_nostack"] {
        let scenario = format!("clamp_bounds_cuda{sfx}");
        let t = truth_h100(&scenario);
        let file = format!("h100_blind_{scenario}.pt.trace.json.gz");
        let (steps, _) = profiled_steps(&file);
        let f = constant_uploads_named(&file, 48 * steps);
        if sfx.is_empty() {
            assert!(text(&f).contains(&planted_frame(&t)), "{scenario}: {f}");
        }
        let file = format!("h100_blind_loss_scale_once{sfx}.pt.trace.json.gz");
        let (steps, _) = profiled_steps(&file);
        assert_eq!(tiny_uploads(&file), steps, "{file}");
        for f in [
            file.clone(),
            format!("h100_blind_clamp_bounds_cuda{sfx}_twin.pt.trace.json.gz"),
            format!("h100_blind_loss_scale_once{sfx}_twin.pt.trace.json.gz"),
        ] {
            assert!(
                findings(&analyze(&f))
                    .iter()
                    .all(|g| g["rule"] != "constant_uploads"),
                "{f}"
            );
        }
    }
}

/// GPU time, ns, of the kernels in `file` that are not PyTorch's own (`at::native`): in the
/// FFT captures, only the FFT library's.
fn library_kernel_ns(file: &str) -> f64 {
    events_of(file)
        .iter()
        .filter(|e| {
            e["cat"] == "kernel" && !e["name"].as_str().unwrap_or("").contains("at::native")
        })
        .map(|e| e["dur"].as_f64().unwrap_or(0.0) * 1e3)
        .sum()
}

/// Kernels in `file` named for Bluestein's algorithm.
fn bluestein_kernels(file: &str) -> usize {
    events_of(file)
        .iter()
        .filter(|e| {
            e["cat"] == "kernel"
                && e["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_ascii_lowercase()
                    .contains("bluestein")
        })
        .count()
}

fn no_fft_lengths(file: &str) {
    let a = analyze(file);
    assert!(
        findings(&a).iter().all(|f| f["rule"] != "fft_lengths"),
        "{file}: {a}"
    );
}

/// An FFT convolution at n = 16096 = 2^5 × 503 (blind set 17, what `fft_lengths` was written
/// against): cuFFT's Bluestein kernels hold most of the GPU. The first finding names the
/// length with its factors at the planted line, counts the FFT calls and the library's kernel
/// time as the events hold them, and prices the saving within a quarter of the twin at 16384;
/// the twin gets no such finding, and its FFTs show near the HBM roof in the accounting.
#[test]
fn an_fft_at_a_length_with_a_large_prime_factor_is_named_with_its_saving() {
    for sfx in ["", "_nostack"] {
        let name = format!("fft_prime_length{sfx}");
        let (t, a, steps, file) = mistake_on("h100", &name);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "fft_lengths", "{name}: {f}");
        assert!(text(f).contains("16096 (2^5 × 503)"), "{name}: {f}");
        if sfx.is_empty() {
            assert!(text(f).contains(&planted_frame(&t)), "{name}: {f}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
        let ffts = events_of(&file)
            .iter()
            .filter(|e| {
                e["cat"] == "cpu_op"
                    && e["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("aten::_fft_"))
            })
            .count();
        assert_eq!(metric(f, "calls"), ffts as f64, "{name}");
        let lib = library_kernel_ns(&file);
        assert!(
            (metric(f, "library_ns") / lib - 1.0).abs() < 1e-3,
            "{name}: {} against {lib}",
            metric(f, "library_ns")
        );
        let twin = format!("h100_blind_{name}_twin.pt.trace.json.gz");
        let b = analyze(&twin);
        assert!(findings(&b).iter().all(|f| f["rule"] != "fft_lengths"));
        let holders = b["summary"]["accounting"][0]["holders"]
            .as_array()
            .expect("holders");
        let ffts: Vec<&Value> = holders.iter().filter(|h| h["family"] == "fft").collect();
        assert_eq!(ffts.len(), 2, "{twin}: {holders:?}");
        for h in ffts {
            assert!(h["roof_share"].as_f64().expect("roof") > 0.7, "{twin}: {h}");
        }
    }
}

/// The eighteenth set, captured after `fft_lengths` for forms it was not written against: a
/// 2-D filter over 1021 × 1021 images is named first and priced within a quarter of the
/// 1024 × 1024 twin; a complex transform of 3001 samples, whose Bluestein kernels cost little
/// more than padding to 4096 (the twin saved 0.08 ms a step), and a length of 2s, 3s, 5s and
/// 7s (15120, no Bluestein kernels in its trace) get no such finding, nor do the twins.
#[test]
fn fft_lengths_holds_on_forms_it_was_not_written_against() {
    for sfx in ["", "_nostack"] {
        let name = format!("fft2_odd_images{sfx}");
        let (t, a, steps, _) = mistake_on("h100", &name);
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "fft_lengths", "{name}: {f}");
        assert!(text(f).contains("1021 × 1021"), "{name}: {f}");
        if sfx.is_empty() {
            assert!(text(f).contains(&planted_frame(&t)), "{name}: {f}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
        let c2c = format!("h100_blind_fft_c2c_prime{sfx}.pt.trace.json.gz");
        assert!(bluestein_kernels(&c2c) > 0, "{c2c}");
        assert!(planted_ms(&truth_h100(&format!("fft_c2c_prime{sfx}"))) < 0.1);
        no_fft_lengths(&c2c);
        let smooth = format!("h100_blind_fft_smooth_length{sfx}.pt.trace.json.gz");
        assert_eq!(bluestein_kernels(&smooth), 0, "{smooth}");
        no_fft_lengths(&smooth);
        for base in ["fft2_odd_images", "fft_c2c_prime", "fft_smooth_length"] {
            no_fft_lengths(&format!("h100_blind_{base}{sfx}_twin.pt.trace.json.gz"));
        }
    }
}

/// torch.multinomial in a decode (blind set 17): PyTorch 2.11 checks the probabilities with
/// eleven kernels a call (the events hold the `aten::_assert_async` inside it); the launch
/// waits name it among their operators, and the advice gives the draw without the checks; its
/// twin, which draws that way, is not told so.
#[test]
fn multinomial_checks_are_named_with_the_draw_without_them() {
    for sfx in ["", "_nostack"] {
        let file = format!("h100_blind_multinomial_decode{sfx}.pt.trace.json.gz");
        let asserts = events_of(&file)
            .iter()
            .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::_assert_async")
            .count();
        let (steps, _) = profiled_steps(&file);
        // Two a token, 32 tokens a step.
        assert_eq!(asserts, 2 * 32 * steps, "{file}");
        let a = analyze(&file);
        let f = naming(&a, "launch_bound", &["aten::multinomial"]);
        assert!(
            f["advice"].as_array().expect("advice").iter().any(|x| x
                .as_str()
                .is_some_and(|x| x.contains(".exponential_(1)).argmax"))),
            "{file}: {f}"
        );
        let twin = analyze(&format!(
            "h100_blind_multinomial_decode{sfx}_twin.pt.trace.json.gz"
        ));
        assert!(
            !text(&twin).contains("torch.multinomial checks"),
            "{file} twin"
        );
    }
}

/// The nineteenth set's `ce_channels_middle`: `F.cross_entropy(logits.transpose(1, 2), labels)`
/// over [8, 1024, 32000] logits runs PyTorch's softmax over a non-last dim, whose forward
/// kernel's grid (read here from the kernel events) gives the H100's 132 SMs 8 blocks. The first
/// finding names that kernel in its operator, at the line with stacks, within a quarter of the
/// cost the twin measured, and says to keep the classes last rather than to batch more rows;
/// the operator's own finding says the same. The twin runs no such kernel and gets no such
/// finding.
#[test]
fn a_softmax_over_a_middle_dim_is_named_with_the_layout_that_fixes_it() {
    let spatial = |file: &str| -> Vec<i64> {
        events_of(file)
            .iter()
            .filter(|e| {
                e["cat"] == "kernel"
                    && e["name"]
                        .as_str()
                        .is_some_and(|n| n.contains("cunn_SpatialSoftMaxForward"))
            })
            .map(|e| {
                e["args"]["grid"]
                    .as_array()
                    .expect("grid")
                    .iter()
                    .map(|x| x.as_i64().expect("grid dim"))
                    .product()
            })
            .collect()
    };
    for sfx in ["", "_nostack"] {
        let name = format!("ce_channels_middle{sfx}");
        let (t, a, steps, file) = mistake_on("h100", &name);
        let blocks = spatial(&file);
        assert_eq!(blocks.len(), steps, "{name}");
        assert!(blocks.iter().all(|&b| b == blocks[0]), "{name}: {blocks:?}");
        let f = &findings(&a)[0];
        assert_eq!(f["rule"], "underfilled_kernels", "{name}: {f}");
        let s = text(f);
        assert!(
            s.contains("cunn_SpatialSoftMaxForward")
                && s.contains("in aten::_log_softmax")
                && s.contains(&format!("{} blocks on 132 SMs", blocks[0])),
            "{name}: {s}"
        );
        if sfx.is_empty() {
            assert!(s.contains(&planted_frame(&t)), "{name}: {s}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
        assert!(
            s.contains("F.cross_entropy(logits.reshape(-1, C)"),
            "{name}: {s}"
        );
        assert!(!s.contains("batch the calls over more rows"), "{name}: {s}");
        let h = naming(&a, "hot_operator", &["aten::cross_entropy_loss"]);
        assert!(
            text(h).contains("F.cross_entropy(logits.reshape(-1, C)"),
            "{name}: {h}"
        );
        let twin = format!("h100_blind_{name}_twin.pt.trace.json.gz");
        assert!(spatial(&twin).is_empty(), "{twin}");
        let b = analyze(&twin);
        assert!(
            findings(&b)
                .iter()
                .all(|f| !text(f).contains("SpatialSoftMax")),
            "{twin}"
        );
    }
}

/// The nineteenth set's `noise_randn_cpu`: the noise of a diffusion-style step drawn with
/// `torch.randn(x.shape)` on the CPU (one `aten::randn` with no device a step, counted here)
/// and copied to the GPU. idle_gaps names the CPU operator, at the line with stacks, within a
/// quarter of what the twin measured, and says to draw it on the GPU with the factory's own
/// `device=`; the twin draws on the GPU and no finding of it names a CPU `randn`.
#[test]
fn noise_drawn_on_the_cpu_is_named_with_the_device_to_draw_it_on() {
    for sfx in ["", "_nostack"] {
        let name = format!("noise_randn_cpu{sfx}");
        let (t, a, steps, file) = mistake_on("h100", &name);
        // A randn on the CPU launches nothing: no runtime call inside its span on its thread.
        let on_cpu = |file: &str| {
            let ev = events_of(file);
            let launches: Vec<(f64, f64, Value)> = ev
                .iter()
                .filter(|e| e["cat"] == "cuda_runtime")
                .map(thread_span)
                .collect();
            ev.iter()
                .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::randn")
                .map(thread_span)
                .filter(|(a, b, tid)| {
                    !launches
                        .iter()
                        .any(|(x, _, t)| t == tid && x >= a && x <= b)
                })
                .count()
        };
        assert!(on_cpu(&file) >= steps, "{name}");
        assert_eq!(
            on_cpu(&format!("h100_blind_{name}_twin.pt.trace.json.gz")),
            0,
            "{name} twin"
        );
        let f = naming(&a, "idle_gaps", &["aten::randn on CPU"]);
        assert_eq!(f, &findings(&a)[0], "{name}");
        assert!(
            f["severity"] == "medium" || f["severity"] == "high",
            "{name}: {f}"
        );
        if sfx.is_empty() {
            assert!(text(f).contains(&planted_frame(&t)), "{name}: {f}");
        }
        within(per_step_ms(f, steps), planted_ms(&t), 0.25, &name);
        let advice = f["advice"].to_string();
        assert!(
            advice.contains("aten::randn on CPU makes a tensor on the CPU")
                && advice.contains(r#"torch.randn(shape, device=\"cuda\")"#),
            "{name}: {advice}"
        );
        let twin = analyze(&format!("h100_blind_{name}_twin.pt.trace.json.gz"));
        assert!(
            findings(&twin)
                .iter()
                .all(|f| !text(f).contains("aten::randn on CPU")),
            "{name} twin"
        );
    }
}

/// The nineteenth set's `bool_mask_assign`, a negative: torch 2.11 runs `h[h < 0] = 0` as
/// `masked_fill_`, with no `nonzero` and no stream sync (counted here from the events), and the
/// step costs what its twin does outside the profiler. No finding is about a sync or names the
/// assignment's `index_put` as its subject (launch_bound's rows may list the waits before its
/// backward's kernels among others: the step is host-bound, twin and all).
#[test]
fn a_boolean_mask_assignment_with_no_sync_gets_no_sync_finding() {
    for sfx in ["", "_nostack"] {
        let name = format!("bool_mask_assign{sfx}");
        let (t, a, _, file) = mistake_on("h100", &name);
        assert!(planted_ms(&t).abs() < 0.1, "{name}");
        let ev = events_of(&file);
        let count = |n: &str| ev.iter().filter(|e| e["name"] == n).count();
        assert_eq!(count("aten::nonzero"), 0, "{name}");
        assert_eq!(count("cudaStreamSynchronize"), 0, "{name}");
        assert!(count("aten::masked_fill_") > 0, "{name}");
        for f in findings(&a) {
            assert_ne!(f["rule"], "sync_stalls", "{name}: {f}");
            let title = f["title"].as_str().expect("title");
            assert!(
                !title.contains("index_put") && !title.contains("synchronis"),
                "{name}: {title}"
            );
        }
    }
}

/// The twentieth set's `cudnn_deterministic_convt`, a negative on this machine: cuDNN 9.19 runs
/// the transposed convolutions as fast with `cudnn.deterministic = True` (the twin measured the
/// same step time). The mistake and its twin get the same medium and high findings, rule for
/// rule, and none names determinism.
#[test]
fn deterministic_cudnn_at_no_cost_gets_the_twins_findings() {
    for sfx in ["", "_nostack"] {
        let name = format!("cudnn_deterministic_convt{sfx}");
        let (t, a, _, _) = mistake_on("h100", &name);
        assert!(planted_ms(&t).abs() < 0.1, "{name}");
        let b = analyze(&format!("h100_blind_{name}_twin.pt.trace.json.gz"));
        let rules = |x: &Value| -> Vec<String> {
            findings(x)
                .iter()
                .filter(|f| f["severity"] == "medium" || f["severity"] == "high")
                .map(|f| f["rule"].as_str().expect("rule").to_string())
                .collect()
        };
        assert_eq!(rules(&a), rules(&b), "{name}");
        assert!(
            findings(&a).iter().all(|f| !text(f).contains("determinis")),
            "{name}"
        );
    }
}

/// The twentieth set's `logits_all_positions`: the LM head over every prompt position, upcast to
/// fp32, then one row read. `copy_hotspots` names the upcast with its shape and its GPU time as
/// the events hold it (the kernels of `aten::_to_copy`, summed here); the product itself runs
/// near the roof and no finding prices the rows it computes for nothing (blind-set.md).
#[test]
fn logits_upcast_for_every_position_is_named_with_its_shape_and_time() {
    for sfx in ["", "_nostack"] {
        let name = format!("logits_all_positions{sfx}");
        let (_, a, _, file) = mistake_on("h100", &name);
        let ev = events_of(&file);
        // The copy kernels: those correlated with a launch inside aten::_to_copy's span.
        let copies: Vec<(f64, f64, Value)> = ev
            .iter()
            .filter(|e| e["cat"] == "cpu_op" && e["name"] == "aten::_to_copy")
            .map(thread_span)
            .collect();
        let launched: Vec<i64> = ev
            .iter()
            .filter(|e| e["cat"] == "cuda_runtime")
            .filter(|e| {
                let ts = e["ts"].as_f64().expect("ts");
                copies
                    .iter()
                    .any(|(a, b, tid)| *tid == e["tid"] && ts >= *a && ts <= *b)
            })
            .filter_map(|e| e["args"]["correlation"].as_i64())
            .collect();
        let kernel_us: f64 = ev
            .iter()
            .filter(|e| e["cat"] == "kernel")
            .filter(|e| {
                e["args"]["correlation"]
                    .as_i64()
                    .is_some_and(|c| launched.contains(&c))
            })
            .map(|e| e["dur"].as_f64().expect("dur"))
            .sum();
        let f = naming(
            &a,
            "copy_hotspots",
            &["[4, 2048, 128256] c10::BFloat16 → float"],
        );
        assert_eq!(f, &findings(&a)[0], "{name}");
        let impact_us = f["impact_ns"].as_f64().expect("impact") / 1e3;
        assert!(
            (impact_us / kernel_us - 1.0).abs() < 0.01,
            "{name}: {impact_us} µs against {kernel_us} µs"
        );
    }
}
