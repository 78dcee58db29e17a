//! Embedding tables updated whole every step though each step looks up few of their rows.
//!
//! An `nn.Embedding` or `nn.EmbeddingBag` with dense gradients (`sparse=False`, the default)
//! gets a gradient the size of the whole table every step: autograd's dense backward
//! (`aten::embedding_dense_backward`, `aten::_embedding_bag_dense_backward`) zeroes a
//! `[V, D]` tensor and scatters the looked-up rows into it, and everything after it that
//! takes the gradient (the optimizer's update of the weights and their state, gradient
//! clipping, the AMP unscale, `zero_grad(set_to_none=False)`) reads and writes all V rows.
//! With sparse gradients that work covers the rows looked up. A recommender's table of
//! millions of rows, a few thousand looked up a step, spends most of its step there (the
//! blind set's `embedding_dense_adam`: 71% of the step).
//!
//! The rule finds each table from its lookups' recorded shapes (the weight `[V, D]`, the
//! indices), requires a dense backward over rows of width D and no sparse one, and prices the
//! kernels of gradient and optimizer work that take the whole table: operators with a `[V, D]`
//! input inside autograd's backward, an `Optimizer.*` range or `AccumulateGrad`, and the
//! multi-tensor operators (`_foreach_*`, `_fused_*`, `_amp_foreach_*`) anywhere, each charged
//! the table's share of the elements of the tensor list it takes. Row-wise operators (the
//! lookups and their backward's scatter, index operators) are not counted: a sparse gradient
//! keeps that work. The impact is that time less its share for the rows a step can touch, at
//! most the indices looked up a step (so the saving is a lower bound). A table that is also a
//! matrix operand (an output projection tied to the embedding) is left alone: its gradient is
//! dense whatever the lookup does. Reported where a step touches at most half the table and
//! the saving is 1% of the window or more; traces without recorded shapes cannot show it.

use super::Rule;
use crate::context::{Ctx, new_finding, per_step_note, rows_with_frames};
use crate::finding::{Confidence, Finding, fmt_ns, metrics};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use tracehound_parsers::shapes::{items, numbers};
use tracehound_parsers::{HostKind, NONE, Trace};

/// The rule's id: in its findings, their stable ids and `--rules`.
pub const ID: &str = "dense_embedding_grad";

/// The rule.
pub struct DenseEmbeddingGrad;

/// Lookups into a table: the weight is their first input, the indices their second.
const LOOKUPS: &[&str] = &[
    "aten::embedding",
    "aten::embedding_bag",
    "aten::_embedding_bag",
    "aten::_embedding_bag_forward_only",
];

/// Backward formulas that build a table-sized gradient.
const DENSE_BACKWARD: &[&str] = &[
    "aten::embedding_dense_backward",
    "aten::_embedding_bag_dense_backward",
];

/// Backward formulas that build a sparse gradient of the looked-up rows.
const SPARSE_BACKWARD: &[&str] = &[
    "aten::embedding_sparse_backward",
    "aten::_embedding_bag_sparse_backward",
];

/// Operators that read or write only some rows of a table: work a sparse gradient keeps.
const ROW_WISE: &[&str] = &[
    "aten::embedding",
    "aten::embedding_bag",
    "aten::_embedding_bag",
    "aten::_embedding_bag_forward_only",
    "aten::embedding_backward",
    "aten::embedding_dense_backward",
    "aten::_embedding_bag_backward",
    "aten::_embedding_bag_dense_backward",
    "aten::_embedding_bag_per_sample_weights_backward",
    "aten::embedding_renorm_",
    "aten::index_select",
    "aten::index",
    "aten::gather",
    "aten::take",
    "aten::index_add_",
    "aten::index_put_",
    "aten::_index_put_impl_",
    "aten::index_copy_",
    "aten::scatter_add_",
];

/// Matrix operators: a table that is one of their operands (an output projection tied to the
/// embedding) gets a dense gradient from them.
const MATRIX: &[&str] = &[
    "aten::linear",
    "aten::matmul",
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::einsum",
    "aten::t",
];

/// Reported where a step looks up at most this share of the table's rows: beyond it the
/// saving is under half the whole-table work, and a sparse gradient's sort and coalescing
/// (not priced) take a larger part of it.
const MAX_TOUCHED: f64 = 0.5;

/// Reported from this share of the window.
const MIN_SHARE: f64 = 0.01;

/// One table: its shape, the rows a step can touch, its lookups' operator and line.
struct Table {
    rows: u64,
    width: u64,
    dtype: String,
    /// Index elements looked up in the window.
    indices: f64,
    lookups: u64,
    /// The first lookup span, for its operator name and line.
    first: u32,
    /// Tables of this shape: the most `[V, D]` entries one optimizer's tensor list holds (a
    /// list holds each parameter once; two towers' tables of one shape are two entries).
    /// Lookups do not tell tables apart: the trace records no tensor identities.
    copies: std::cell::Cell<u64>,
}

impl Rule for DenseEmbeddingGrad {
    fn id(&self) -> &'static str {
        ID
    }

    fn description(&self) -> &'static str {
        "embedding tables with dense gradients: the whole table zeroed and updated every step for the few rows looked up"
    }

    fn check(&self, cx: &Ctx) -> Vec<Finding> {
        let t = cx.trace;
        let w = &cx.window;
        let flag = |names: &[&str]| t.strings.matching(|n| names.contains(&n));
        let dense_bw = flag(DENSE_BACKWARD);
        if !dense_bw.contains(&true) {
            return Vec::new();
        }
        let (lookup, sparse_bw, row_wise, matrix) = (
            flag(LOOKUPS),
            flag(SPARSE_BACKWARD),
            flag(ROW_WISE),
            flag(MATRIX),
        );
        let is = |v: &[bool], name: u32| v.get(name as usize).copied().unwrap_or(false);
        // Gradient and optimizer scopes, and the multi-tensor operators counted anywhere.
        let gradient_scope = t.strings.matching(|n| {
            n.starts_with("Optimizer.")
                || n.starts_with("autograd::engine::evaluate_function")
                || n == "torch::autograd::AccumulateGrad"
        });
        let multi_tensor = t.strings.matching(|n| {
            n.starts_with("aten::_foreach_")
                || n.starts_with("aten::_fused_")
                || n.starts_with("aten::_amp_foreach_")
        });
        let steps = w.steps_in(t).max(1) as f64;

        // Tables from the lookups in the window; the widths of dense and sparse gradients;
        // the 2-D operands of matrix operators anywhere (once per distinct recorded inputs):
        // a table that is one has a dense gradient anyway.
        let mut tables: Vec<Table> = Vec::new();
        let (mut dense_widths, mut sparse_widths) = (Vec::<u64>::new(), Vec::<u64>::new());
        let mut seen_args: rustc_hash::FxHashSet<u32> = Default::default();
        let mut tied: Vec<(u64, u64)> = Vec::new();
        for (i, s) in t.host_spans.iter().enumerate() {
            if s.kind != HostKind::CpuOp {
                continue;
            }
            let i = i as u32;
            if is(&matrix, s.name) {
                if seen_args.insert(s.args) {
                    for d in t.input_dims(i) {
                        if let &[a, b] = d.as_slice() {
                            tied.push((a, b));
                            tied.push((b, a));
                        }
                    }
                }
                continue;
            }
            if s.start < w.start || s.start >= w.end {
                continue;
            }
            if is(&dense_bw, s.name) || is(&sparse_bw, s.name) {
                // The gradient of the lookup's output, `[..., D]`, is the first input.
                if let Some(&d) = t.input_dims(i).first().and_then(|x| x.last()) {
                    let v = if is(&dense_bw, s.name) {
                        &mut dense_widths
                    } else {
                        &mut sparse_widths
                    };
                    v.push(d);
                }
                continue;
            }
            // The outermost lookup of a chain (`embedding_bag` calls `_embedding_bag`).
            if !is(&lookup, s.name)
                || t.ancestors(i)
                    .any(|a| is(&lookup, t.host_spans[a as usize].name))
            {
                continue;
            }
            let dims = t.input_dims(i);
            let (Some(weight), Some(idx)) = (dims.first(), dims.get(1)) else {
                continue;
            };
            let &[rows, width] = weight.as_slice() else {
                continue;
            };
            let n: f64 = idx.iter().map(|&x| x as f64).product();
            match tables.iter_mut().find(|x| (x.rows, x.width) == (rows, width)) {
                Some(x) => {
                    x.indices += n;
                    x.lookups += 1;
                }
                None => tables.push(Table {
                    rows,
                    width,
                    dtype: t.input_types(i).first().cloned().unwrap_or_default(),
                    indices: n,
                    lookups: 1,
                    first: i,
                    copies: std::cell::Cell::new(1),
                }),
            }
        }
        tables.retain(|x| {
            x.rows > 0
                && dense_widths.contains(&x.width)
                && !sparse_widths.contains(&x.width)
                && !tied.contains(&(x.rows, x.width))
                && (x.indices / steps).min(x.rows as f64) <= MAX_TOUCHED * x.rows as f64
        });
        if tables.is_empty() {
            return Vec::new();
        }

        // Each operator's share, by table, of the whole-table work it does (by its recorded
        // inputs, once per distinct inputs).
        let mut share_of: FxHashMap<u32, Vec<(usize, f64)>> = FxHashMap::default();
        let mut out = Vec::new();
        for d in t.devices() {
            // (table, operator name) → (kernels, ns, first span).
            let mut work: BTreeMap<(usize, u32), (u64, i64, u32)> = BTreeMap::new();
            for (k, op) in w.kernels(t, d) {
                let inner = t.index.op_cpu_op.get(k).copied().unwrap_or(NONE);
                if inner == NONE {
                    continue;
                }
                let Some((span, shares)) =
                    whole_table_op(t, inner, &tables, &row_wise, &mut share_of)
                else {
                    continue;
                };
                let s = &t.host_spans[span as usize];
                let counted = is(&multi_tensor, s.name)
                    || std::iter::once(span)
                        .chain(t.ancestors(span))
                        .any(|a| is(&gradient_scope, t.host_spans[a as usize].name));
                if !counted {
                    continue;
                }
                for &(x, f) in &shares {
                    let e = work.entry((x, s.name)).or_insert((0, 0, span));
                    e.0 += 1;
                    e.1 += (op.dur() as f64 * f).round() as i64;
                }
            }
            if work.is_empty() {
                continue;
            }
            if let Some(f) = finding(cx, d, &tables, &work, steps) {
                out.push(f);
            }
        }
        out
    }
}

/// The operator, from span `inner` outwards, that does whole-table work on one of `tables`
/// (a `[V, D]` input, or one in a tensor list), with each table's share of it; `None` when a
/// row-wise operator comes first or none takes a table.
fn whole_table_op(
    t: &Trace,
    inner: u32,
    tables: &[Table],
    row_wise: &[bool],
    share_of: &mut FxHashMap<u32, Vec<(usize, f64)>>,
) -> Option<(u32, Vec<(usize, f64)>)> {
    for a in std::iter::once(inner).chain(t.ancestors(inner)) {
        let s = &t.host_spans[a as usize];
        if s.kind != HostKind::CpuOp {
            continue;
        }
        if row_wise.get(s.name as usize).copied().unwrap_or(false) {
            return None;
        }
        let shares = share_of
            .entry(s.args)
            .or_insert_with(|| table_shares(t, a, tables))
            .clone();
        if !shares.is_empty() {
            return Some((a, shares));
        }
    }
    None
}

/// Each table's share of the work of operator `i`: 1 for a `[V, D]` input; for the first
/// tensor list holding one, the elements of the table's entries over the list's.
fn table_shares(t: &Trace, i: u32, tables: &[Table]) -> Vec<(usize, f64)> {
    let find = |d: &[u64]| {
        tables
            .iter()
            .position(|x| d == [x.rows, x.width].as_slice())
    };
    for item in t.input_shapes(i) {
        if item.starts_with("[[") {
            let entries: Vec<Vec<u64>> = items(&item).iter().map(|e| numbers(e)).collect();
            let numel = |d: &Vec<u64>| d.iter().map(|&x| x as f64).product::<f64>();
            let total: f64 = entries.iter().map(numel).sum();
            let mut shares: Vec<(usize, f64, u64)> = Vec::new();
            for e in &entries {
                if let Some(x) = find(e) {
                    match shares.iter_mut().find(|s| s.0 == x) {
                        Some(s) => {
                            s.1 += numel(e) / total;
                            s.2 += 1;
                        }
                        None => shares.push((x, numel(e) / total, 1)),
                    }
                }
            }
            if !shares.is_empty() {
                for &(x, _, n) in &shares {
                    let c = &tables[x].copies;
                    c.set(c.get().max(n));
                }
                return shares.into_iter().map(|(x, f, _)| (x, f)).collect();
            }
        } else if let Some(x) = find(&numbers(&item)) {
            return vec![(x, 1.0)];
        }
    }
    Vec::new()
}

/// The finding for device `d` from its whole-table work by (table, operator).
fn finding(
    cx: &Ctx,
    d: i32,
    tables: &[Table],
    work: &BTreeMap<(usize, u32), (u64, i64, u32)>,
    steps: f64,
) -> Option<Finding> {
    let t = cx.trace;
    let w = &cx.window;
    // Per table: the whole-table time and the saving.
    let mut whole = vec![0i64; tables.len()];
    for (&(x, _), &(_, ns, _)) in work {
        whole[x] += ns;
    }
    let rows_of = |x: &Table| x.rows * x.copies.get();
    let touched = |x: &Table| (x.indices / steps).min(rows_of(x) as f64) / rows_of(x) as f64;
    let saving: Vec<i64> = tables
        .iter()
        .zip(&whole)
        .map(|(x, &ns)| (ns as f64 * (1.0 - touched(x))).round() as i64)
        .collect();
    let impact: i64 = saving.iter().sum();
    if w.share(impact) < MIN_SHARE {
        return None;
    }
    let whole_ns: i64 = whole.iter().sum();
    // The table that costs most leads the title.
    let lead = (0..tables.len()).max_by_key(|&x| (saving[x], std::cmp::Reverse(x)))?;
    let x = &tables[lead];
    let at = t
        .user_frame(x.first)
        .map(|f| format!(" at {f}"))
        .unwrap_or_default();
    let per_step = |ns: i64| per_step_note(cx, ns as f64);
    let rows_per_step = (x.indices / steps).min(rows_of(x) as f64);
    let copies = x.copies.get();
    let mut f = new_finding(
        cx,
        ID,
        Some(d),
        format!(
            "{} {} [{}, {}] {}{at} {} dense gradients: every step zeroes and updates all {} rows for at most {:.0} looked up ({:.1}%), {} of whole-table work{}",
            t.str(t.host_spans[x.first as usize].name),
            if copies > 1 {
                format!("{copies} tables")
            } else {
                "table".to_string()
            },
            x.rows,
            x.width,
            x.dtype,
            if copies > 1 { "have" } else { "has" },
            rows_of(x),
            rows_per_step,
            100.0 * rows_per_step / rows_of(x) as f64,
            fmt_ns(whole[lead]),
            per_step(whole[lead])
        ),
        impact,
        Confidence::High,
        format!(
            "{} lookups a step over the table, of {} index elements a step (so at most that many rows touched); autograd's dense backward ({}) makes a gradient of every row, and the kernels that then take the whole table — the zeroing of that gradient, the optimizer's update of the weights and their state, any clipping, unscaling or accumulation of the gradient — ran {}{}. With a sparse gradient that work covers the rows looked up: at most {:.1}% of it, so {} is saved{} (a lower bound: fewer distinct rows than indices save more; the sort and coalescing of sparse gradients, and an all-reduce of the dense gradient in data-parallel training, are not priced)",
            fmt_per(x.lookups as f64 / steps),
            fmt_per(x.indices / steps),
            DENSE_BACKWARD
                .iter()
                .map(|n| n.trim_start_matches("aten::"))
                .collect::<Vec<_>>()
                .join(" or "),
            fmt_ns(whole_ns),
            per_step(whole_ns),
            100.0 * touched(x),
            fmt_ns(impact),
            per_step(impact)
        ),
    );
    let groups = work.iter().map(|(&(tx, name), &(n, ns, span))| {
        let tb = &tables[tx];
        (
            (
                format!("{} over [{}, {}]", t.str(name), tb.rows, tb.width),
                t.user_frame(span).map(str::to_string),
            ),
            (n, ns),
        )
    });
    f.breakdown = rows_with_frames(cx, groups, whole_ns);
    f.advice = vec![
        "Give the table sparse gradients: nn.Embedding(..., sparse=True) or nn.EmbeddingBag(..., sparse=True), updated by an optimizer that takes them (torch.optim.SparseAdam, SGD, Adagrad) in its own optimizer or parameter group, the dense optimizer keeping the rest. SparseAdam updates the moments of the rows looked up only (a lazy Adam): validate the model's quality after the change; weight decay then no longer reaches rows a step does not touch.".to_string(),
        "For many large tables, a fused embedding update in the backward pass (TorchRec's EmbeddingBagCollection over FBGEMM's table-batched embeddings) updates only the rows looked up without a separate gradient.".to_string(),
    ];
    f.metrics = metrics([
        ("whole_table_ns", whole_ns as f64),
        ("table_rows", x.rows as f64),
        ("tables_of_shape", copies as f64),
        ("table_width", x.width as f64),
        ("rows_touched_per_step", rows_per_step),
        ("tables", tables.len() as f64),
    ]);
    Some(f)
}

/// A count a step, whole when it is one.
fn fmt_per(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}
