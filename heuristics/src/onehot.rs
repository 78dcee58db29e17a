//! Matrix products over one-hot matrices (`F.one_hot(ids, V).to(dtype) @ W`), found once per
//! analysis ([`crate::context::Ctx::onehot_products`]): the hot_operator rule prices them, and
//! copy_hotspots leaves their casts to it, so the cast's time is reported once.

use crate::accounting::HOT_SHARE;
use crate::roofline::ACHIEVABLE;
use crate::scope::Scope;
use tracehound_parsers::{HostKind, NONE};

/// One one-hot product: the three outermost operators (span indices) and what a lookup of the
/// same rows would move.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OneHotProduct {
    /// The `aten::one_hot` call.
    pub(crate) onehot: u32,
    /// The next cast on its thread of an int64 tensor shaped like its output.
    pub(crate) cast: u32,
    /// The next matrix product on its thread whose first input has V columns and as many
    /// elements.
    pub(crate) product: u32,
    /// Rows selected: the ids' element count.
    pub(crate) rows: f64,
    /// Bytes of one row of the table.
    pub(crate) row_bytes: f64,
}

/// The one-hot products whose `one_hot` call starts in the window; empty (after one look at
/// the string table) when the trace has no `aten::one_hot`.
pub(crate) fn products(cx: &Scope) -> Vec<OneHotProduct> {
    let t = cx.trace;
    let is_onehot = t.strings.matching(|n| n == "aten::one_hot");
    if !is_onehot.contains(&true) {
        return Vec::new();
    }
    let is_cast = t
        .strings
        .matching(|n| matches!(n, "aten::to" | "aten::_to_copy"));
    let is_product = t.strings.matching(|n| {
        matches!(
            n,
            "aten::matmul" | "aten::mm" | "aten::linear" | "aten::bmm"
        )
    });
    let (w0, w1) = (cx.window.start, cx.window.end);
    let flag = |v: &[bool], s: &tracehound_parsers::HostSpan| {
        v.get(s.name as usize).copied().unwrap_or(false)
    };
    // Outermost operators of interest in the window, per thread, in start order.
    let mut spans: Vec<u32> = (0..t.host_spans.len() as u32)
        .filter(|&i| {
            let s = &t.host_spans[i as usize];
            s.kind == HostKind::CpuOp
                && s.start >= w0
                && s.start < w1
                && (flag(&is_onehot, s) || flag(&is_cast, s) || flag(&is_product, s))
                && t.outermost_cpu_op(i) == i
        })
        .collect();
    spans.sort_by_key(|&i| {
        let s = &t.host_spans[i as usize];
        (s.pid, s.tid, s.start)
    });
    let numel = |v: &[u64]| v.iter().map(|&x| x as f64).product::<f64>();
    let mut out = Vec::new();
    // A cast or product already matched to an earlier one_hot is not matched again.
    let mut claimed: rustc_hash::FxHashSet<u32> = rustc_hash::FxHashSet::default();
    for (k, &o) in spans.iter().enumerate() {
        let so = &t.host_spans[o as usize];
        if !flag(&is_onehot, so) {
            continue;
        }
        let Some(ids) = t.input_dims(o).into_iter().next() else {
            continue;
        };
        // The rest of this thread, up to the next one_hot: a one_hot whose tensor is not cast
        // and multiplied before the next one is made (one used for a loss) claims nothing.
        let same_thread = |j: &&u32| {
            let s = &t.host_spans[**j as usize];
            (s.pid, s.tid) == (so.pid, so.tid) && !flag(&is_onehot, s)
        };
        let rest = &spans[k + 1..];
        let cast = rest.iter().take_while(same_thread).position(|&c| {
            let sc = &t.host_spans[c as usize];
            let dims = t.input_dims(c);
            flag(&is_cast, sc)
                && !claimed.contains(&c)
                && t.input_types(c).first().map(String::as_str) == Some("long int")
                && dims
                    .first()
                    .is_some_and(|x| x.len() == ids.len() + 1 && x[..ids.len()] == ids[..])
        });
        let Some(ci) = cast else { continue };
        let c = rest[ci];
        let classes = t
            .input_dims(c)
            .first()
            .and_then(|x| x.last().copied())
            .unwrap_or(0);
        let product = rest[ci + 1..].iter().take_while(same_thread).find(|&&m| {
            let dims = t.input_dims(m);
            flag(&is_product, &t.host_spans[m as usize])
                && !claimed.contains(&m)
                && dims.first().is_some_and(|x| {
                    x.last() == Some(&classes) && numel(x) == numel(&ids) * classes as f64
                })
        });
        let Some(&m) = product else { continue };
        let dims = t.input_dims(m);
        let types = t.input_types(m);
        let elem = match types.get(1).map(String::as_str) {
            Some("c10::BFloat16" | "c10::Half") => 2.0,
            Some("float") => 4.0,
            _ => continue,
        };
        // The table's row length: the last dim of [V, d] or [B, V, d], the first of a linear
        // layer's [d, V] weight.
        let row = dims
            .get(1)
            .and_then(|w| {
                w.last()
                    .copied()
                    .filter(|&x| x != classes)
                    .or(w.first().copied())
            })
            .unwrap_or(0) as f64;
        claimed.insert(c);
        claimed.insert(m);
        out.push(OneHotProduct {
            onehot: o,
            cast: c,
            product: m,
            rows: numel(&ids),
            row_bytes: row * elem,
        });
    }
    out
}

/// The one-hot products' GPU time on one device, and what lookups of the same rows need.
pub(crate) struct Priced {
    /// Kernel time of the `one_hot` calls, ns.
    pub(crate) onehot_ns: i64,
    /// Of the casts.
    pub(crate) cast_ns: i64,
    /// Of the matrix products.
    pub(crate) product_ns: i64,
    /// What the lookups need at 70% of the HBM roof: the int64 ids read, the selected rows
    /// read and written, ns.
    pub(crate) lookup_ns: f64,
    /// The three together, ns.
    pub(crate) total: i64,
    /// Their share of the device's GPU time (`device_ns`).
    pub(crate) share: f64,
}

/// The products' cost on device `d`, whose GPU time in the window is `device_ns`; `None` below
/// [`HOT_SHARE`] of it (no finding: the casts stay copy_hotspots') or for a GPU without known
/// peaks.
pub(crate) fn priced(
    cx: &Scope,
    groups: &[OneHotProduct],
    d: i32,
    device_ns: i64,
) -> Option<Priced> {
    if groups.is_empty() {
        return None;
    }
    let t = cx.trace;
    let hbm = crate::membound::peaks_of(t, d).map(|p| p.mem_tbps)?;
    let mut ns_of: rustc_hash::FxHashMap<u32, i64> = rustc_hash::FxHashMap::default();
    for g in groups {
        for s in [g.onehot, g.cast, g.product] {
            ns_of.insert(s, 0);
        }
    }
    for (i, op) in cx.window.kernels(t, d) {
        let inner = t.index.op_cpu_op.get(i).copied().unwrap_or(NONE);
        if inner == NONE {
            continue;
        }
        if let Some(ns) = ns_of.get_mut(&t.outermost_cpu_op(inner)) {
            *ns += op.dur();
        }
    }
    let ns = |s: u32| ns_of.get(&s).copied().unwrap_or(0);
    let onehot_ns: i64 = groups.iter().map(|g| ns(g.onehot)).sum();
    let cast_ns: i64 = groups.iter().map(|g| ns(g.cast)).sum();
    let product_ns: i64 = groups.iter().map(|g| ns(g.product)).sum();
    let lookup_ns: f64 = groups
        .iter()
        .map(|g| (g.rows * 8.0 + 2.0 * g.rows * g.row_bytes) / (hbm * 1e3) / ACHIEVABLE)
        .sum();
    let total = onehot_ns + cast_ns + product_ns;
    let share = total as f64 / device_ns.max(1) as f64;
    (share >= HOT_SHARE).then_some(Priced {
        onehot_ns,
        cast_ns,
        product_ns,
        lookup_ns,
        total,
        share,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::testutil::TB;
    use tracehound_parsers::{GpuOpKind, OpArgs};

    /// An outermost operator at `at` µs with recorded dims and types, launching one kernel.
    fn op(tb: &mut TB, name: &str, dims: &str, types: &str, at: i64) {
        tb.span(HostKind::CpuOp, name, at * 1000, at * 1000 + 5_000);
        let args = OpArgs {
            input_dims: tb.t.strings.intern(dims),
            input_types: tb.t.strings.intern(types),
            call_stack: 0,
        };
        let args = tb.t.args.intern(args);
        if let Some(s) = tb.t.host_spans.last_mut() {
            s.args = args;
        }
        tb.op(
            GpuOpKind::Kernel,
            "k",
            7,
            at * 1000 + 2_000,
            at * 1000 + 4_000,
            Some(at * 1000 + 1_000),
        );
    }

    #[test]
    fn each_one_hot_claims_its_own_cast_and_product_once() {
        let mut tb = TB::new();
        let ids = r#"[[8, 1024], []]"#;
        let long = r#"["long int", "Scalar"]"#;
        let cast = r#"[[8, 1024, 32000], [], [], [], [], [], [], []]"#;
        let cast_types = r#"["long int", "", "", "", "", "", "", ""]"#;
        let mm = r#"[[8, 1024, 32000], [32000, 1024]]"#;
        let bf16 = r#"["c10::BFloat16", "c10::BFloat16"]"#;
        // A one_hot for a loss (no cast or product before the next one_hot), then an
        // embedding written as one_hot(ids).to(bf16) @ W.
        op(&mut tb, "aten::one_hot", ids, long, 0);
        op(&mut tb, "aten::one_hot", ids, long, 10);
        op(&mut tb, "aten::to", cast, cast_types, 20);
        op(&mut tb, "aten::matmul", mm, bf16, 30);
        let t = tb.build();
        let config = Config::default();
        let cx = Scope::new(&t, &config);
        let found = products(&cx);
        assert_eq!(found.len(), 1, "{found:?}");
        let g = found[0];
        assert_eq!(t.str(t.host_spans[g.onehot as usize].name), "aten::one_hot");
        assert_eq!(t.host_spans[g.onehot as usize].start, 10_000);
        assert_eq!(t.host_spans[g.cast as usize].start, 20_000);
        assert_eq!(t.host_spans[g.product as usize].start, 30_000);
        // 8192 rows of a [32000, 1024] bf16 table: 2 KiB a row.
        assert_eq!((g.rows, g.row_bytes), (8192.0, 2048.0));
    }
}
