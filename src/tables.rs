//! The model as tables for `tracehound sql` and `tracehound export` (columns in
//! docs/tables.md). Tables are built column by column from the model, borrowing names from the
//! trace's string table, and only the tables a query names are built.

use tracehound_heuristics::Analysis;
use tracehound_parsers::{GpuOpKind, HostKind, NONE, Trace};

/// One column's values.
pub enum Data<'t> {
    I64(Vec<Option<i64>>),
    F64(Vec<Option<f64>>),
    Str(Vec<Option<&'t str>>),
    Owned(Vec<Option<String>>),
    Bool(Vec<bool>),
}

/// A table: named columns of equal length.
pub struct Table<'t> {
    pub name: &'static str,
    pub columns: Vec<(&'static str, Data<'t>)>,
}

/// Every table, in the order docs/tables.md lists them.
pub const NAMES: [&str; 10] = [
    "kernels",
    "memcpys",
    "memsets",
    "host_spans",
    "memory",
    "counters",
    "steps",
    "gaps",
    "gap_causes",
    "findings",
];

/// Columns every table starts with: the file and its rank.
const ORIGIN: &[(&str, char)] = &[("source", 's'), ("rank", 'i')];

/// Columns the GPU-operation tables share, after [`ORIGIN`].
const GPU_OP: &[(&str, char)] = &[
    ("device", 'i'),
    ("stream", 'i'),
    ("start_ns", 'i'),
    ("end_ns", 'i'),
    ("dur", 'i'),
    ("name", 's'),
    ("correlation", 'i'),
    ("in_window", 'b'),
    ("cpu_op", 's'),
];

/// Column names and types (`i` integer, `f` float, `s` text borrowed from the trace, `o` text
/// made here, `b` boolean).
type Columns = &'static [(&'static str, char)];

/// The columns of each table, so that a table without rows still has them: [`ORIGIN`], then
/// the shared part (GPU-operation columns or none), then its own.
const SCHEMA: [(&str, Columns, Columns); 10] = [
    (
        "kernels",
        GPU_OP,
        &[
            ("grid_x", 'i'),
            ("grid_y", 'i'),
            ("grid_z", 'i'),
            ("block_x", 'i'),
            ("block_y", 'i'),
            ("block_z", 'i'),
            ("registers", 'i'),
            ("shared_mem", 'i'),
            ("occupancy_pct", 'f'),
        ],
    ),
    (
        "memcpys",
        GPU_OP,
        &[
            ("direction", 's'),
            ("src_kind", 's'),
            ("dst_kind", 's'),
            ("bytes", 'i'),
        ],
    ),
    ("memsets", GPU_OP, &[("bytes", 'i')]),
    (
        "host_spans",
        &[],
        &[
            ("id", 'i'),
            ("parent_id", 'i'),
            ("kind", 's'),
            ("pid", 'i'),
            ("tid", 'i'),
            ("start_ns", 'i'),
            ("end_ns", 'i'),
            ("dur", 'i'),
            ("name", 's'),
            ("depth", 'i'),
            ("correlation", 'i'),
            ("external_id", 'i'),
            ("input_dims", 's'),
            ("in_window", 'b'),
        ],
    ),
    (
        "memory",
        &[],
        &[
            ("ts_ns", 'i'),
            ("device", 'i'),
            ("addr", 'i'),
            ("bytes", 'i'),
            ("total_allocated", 'i'),
            ("total_reserved", 'i'),
            ("oom", 'b'),
        ],
    ),
    (
        "counters",
        &[],
        &[
            ("gpu", 'i'),
            ("metric", 's'),
            ("unit", 's'),
            ("ts_ns", 'i'),
            ("value", 'f'),
        ],
    ),
    (
        "steps",
        &[],
        &[
            ("step", 'i'),
            ("start_ns", 'i'),
            ("end_ns", 'i'),
            ("dur", 'i'),
        ],
    ),
    (
        "gaps",
        &[],
        &[
            ("gap_id", 'i'),
            ("device", 'i'),
            ("start_ns", 'i'),
            ("end_ns", 'i'),
            ("dur", 'i'),
            ("cause", 's'),
            ("mixed", 'b'),
            ("label", 'o'),
            ("drained_by", 'o'),
            ("python_frame", 'o'),
        ],
    ),
    (
        "gap_causes",
        &[],
        &[
            ("gap_id", 'i'),
            ("device", 'i'),
            ("cause", 's'),
            ("leaf", 'o'),
            ("python_frame", 'o'),
            ("ns", 'i'),
        ],
    ),
    (
        "findings",
        &[],
        &[
            ("id", 'o'),
            ("rule", 's'),
            ("severity", 's'),
            ("device", 'i'),
            ("impact_ns", 'i'),
            ("impact_share", 'f'),
            ("title", 'o'),
            ("advice", 'o'),
        ],
    ),
];

/// A table being filled row by row; each typed push goes to the column of that name.
struct Builder<'t> {
    name: &'static str,
    columns: Vec<(&'static str, Data<'t>)>,
}

impl<'t> Builder<'t> {
    fn new(name: &'static str) -> Self {
        let (shared, own) = SCHEMA
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or((&[][..], &[][..]), |(_, a, b)| (*a, *b));
        let cols = ORIGIN.iter().chain(shared).chain(own);
        Builder {
            name,
            columns: cols
                .map(|&(c, ty)| {
                    (
                        c,
                        match ty {
                            'i' => Data::I64(Vec::new()),
                            'f' => Data::F64(Vec::new()),
                            'b' => Data::Bool(Vec::new()),
                            'o' => Data::Owned(Vec::new()),
                            _ => Data::Str(Vec::new()),
                        },
                    )
                })
                .collect(),
        }
    }

    fn slot(&mut self, col: &'static str, empty: impl FnOnce() -> Data<'t>) -> &mut Data<'t> {
        let k = match self.columns.iter().position(|c| c.0 == col) {
            Some(k) => k,
            None => {
                self.columns.push((col, empty()));
                self.columns.len() - 1
            }
        };
        &mut self.columns[k].1
    }

    fn i64(&mut self, col: &'static str, v: Option<i64>) -> &mut Self {
        if let Data::I64(x) = self.slot(col, || Data::I64(Vec::new())) {
            x.push(v);
        }
        self
    }

    fn f64(&mut self, col: &'static str, v: Option<f64>) -> &mut Self {
        if let Data::F64(x) = self.slot(col, || Data::F64(Vec::new())) {
            x.push(v);
        }
        self
    }

    fn str(&mut self, col: &'static str, v: Option<&'t str>) -> &mut Self {
        if let Data::Str(x) = self.slot(col, || Data::Str(Vec::new())) {
            x.push(v);
        }
        self
    }

    fn owned(&mut self, col: &'static str, v: Option<String>) -> &mut Self {
        if let Data::Owned(x) = self.slot(col, || Data::Owned(Vec::new())) {
            x.push(v);
        }
        self
    }

    fn bool(&mut self, col: &'static str, v: bool) -> &mut Self {
        if let Data::Bool(x) = self.slot(col, || Data::Bool(Vec::new())) {
            x.push(v);
        }
        self
    }

    /// Ends a row: columns this row did not set (kernel columns of a table without them)
    /// get a null, so every column keeps the table's length.
    fn end_row(&mut self) {
        let n = self.columns.iter().map(|c| len(&c.1)).max().unwrap_or(0);
        for (_, d) in &mut self.columns {
            if len(d) < n {
                match d {
                    Data::I64(x) => x.push(None),
                    Data::F64(x) => x.push(None),
                    Data::Str(x) => x.push(None),
                    Data::Owned(x) => x.push(None),
                    Data::Bool(x) => x.push(false),
                }
            }
        }
    }

    fn finish(self) -> Table<'t> {
        Table {
            name: self.name,
            columns: self.columns,
        }
    }
}

fn len(d: &Data) -> usize {
    match d {
        Data::I64(x) => x.len(),
        Data::F64(x) => x.len(),
        Data::Str(x) => x.len(),
        Data::Owned(x) => x.len(),
        Data::Bool(x) => x.len(),
    }
}

/// One loaded trace with its analysis and where it came from.
pub struct Source<'t> {
    pub trace: &'t Trace,
    /// The analysed window (for `in_window`).
    pub window: tracehound_heuristics::Window,
    /// The analysis, when a table that needs it (gaps, gap_causes, findings) was asked for.
    pub analysis: Option<&'t Analysis>,
    /// The rank (from the trace, else the file's position).
    pub rank: i64,
}

fn common<'t>(b: &mut Builder<'t>, s: &Source<'t>) {
    b.str("source", Some(&s.trace.source))
        .i64("rank", Some(s.rank));
}

fn name(t: &Trace, id: u32) -> Option<&str> {
    (id != 0).then(|| t.str(id))
}

/// Builds table `which` over all sources, or None for an unknown name.
pub fn build<'t>(which: &str, sources: &[Source<'t>]) -> Option<Table<'t>> {
    let name_of = NAMES.iter().find(|n| **n == which)?;
    let mut b = Builder::new(name_of);
    for s in sources {
        let t = s.trace;
        let w = &s.window;
        let launching_op = |i: usize| {
            t.index
                .op_cpu_op
                .get(i)
                .copied()
                .filter(|&c| c != NONE)
                .map(|c| t.str(t.host_spans[c as usize].name))
        };
        match which {
            "kernels" | "memcpys" | "memsets" => {
                let kind = match which {
                    "kernels" => GpuOpKind::Kernel,
                    "memcpys" => GpuOpKind::Memcpy,
                    _ => GpuOpKind::Memset,
                };
                for (i, o) in t.gpu_ops.iter().enumerate().filter(|(_, o)| o.kind == kind) {
                    common(&mut b, s);
                    b.i64("device", Some(o.device as i64))
                        .i64("stream", Some(o.stream))
                        .i64("start_ns", Some(o.start))
                        .i64("end_ns", Some(o.end))
                        .i64("dur", Some(o.dur()))
                        .str("name", Some(t.str(o.name)))
                        .i64("correlation", Some(o.correlation as i64))
                        .bool("in_window", o.start >= w.start && o.start < w.end)
                        .str("cpu_op", launching_op(i));
                    match kind {
                        GpuOpKind::Kernel => {
                            let k = o.kernel.as_ref();
                            let g = |f: fn(&tracehound_parsers::KernelInfo) -> i64| k.map(f);
                            b.i64("grid_x", g(|k| k.grid[0] as i64))
                                .i64("grid_y", g(|k| k.grid[1] as i64))
                                .i64("grid_z", g(|k| k.grid[2] as i64))
                                .i64("block_x", g(|k| k.block[0] as i64))
                                .i64("block_y", g(|k| k.block[1] as i64))
                                .i64("block_z", g(|k| k.block[2] as i64))
                                .i64("registers", g(|k| k.registers as i64))
                                .i64("shared_mem", g(|k| k.shared_mem as i64))
                                .f64(
                                    "occupancy_pct",
                                    k.and_then(|k| k.occupancy_pct.map(|p| p as f64)),
                                );
                        }
                        GpuOpKind::Memcpy => {
                            b.str("direction", Some(o.direction.label()))
                                .str("src_kind", Some(o.src_kind.label()))
                                .str("dst_kind", Some(o.dst_kind.label()))
                                .i64("bytes", Some(o.bytes as i64));
                        }
                        _ => {
                            b.i64("bytes", Some(o.bytes as i64));
                        }
                    }
                    b.end_row();
                }
            }
            "host_spans" => {
                for (i, h) in t.host_spans.iter().enumerate() {
                    common(&mut b, s);
                    b.i64("id", Some(i as i64))
                        .i64("parent_id", (h.parent != NONE).then_some(h.parent as i64))
                        .str(
                            "kind",
                            Some(match h.kind {
                                HostKind::CpuOp => "cpu_op",
                                HostKind::Runtime => "runtime",
                                HostKind::Driver => "driver",
                                HostKind::Python => "python",
                                HostKind::Annotation => "annotation",
                                HostKind::GpuAnnotation => "gpu_annotation",
                                HostKind::OsCall => "os_call",
                            }),
                        )
                        .i64("pid", Some(h.pid))
                        .i64("tid", Some(h.tid))
                        .i64("start_ns", Some(h.start))
                        .i64("end_ns", Some(h.end))
                        .i64("dur", Some(h.dur()))
                        .str("name", Some(t.str(h.name)))
                        .i64("depth", Some(h.depth as i64))
                        .i64("correlation", Some(h.correlation() as i64))
                        .i64("external_id", Some(h.external_id() as i64))
                        .str("input_dims", name(t, t.op_args(h).input_dims))
                        .bool("in_window", h.start >= w.start && h.start < w.end);
                    b.end_row();
                }
            }
            "memory" => {
                for m in &t.memory {
                    common(&mut b, s);
                    b.i64("ts_ns", Some(m.ts))
                        .i64("device", Some(m.device as i64))
                        .i64("addr", Some(m.addr as i64))
                        .i64("bytes", Some(m.bytes))
                        .i64("total_allocated", m.total_allocated.get())
                        .i64("total_reserved", m.total_reserved.get())
                        .bool("oom", m.oom);
                    b.end_row();
                }
            }
            "counters" => {
                for c in &t.counters {
                    for &(ts, v) in &c.samples {
                        common(&mut b, s);
                        b.i64("gpu", Some(c.gpu as i64))
                            .str("metric", Some(&c.metric))
                            .str("unit", Some(&c.unit))
                            .i64("ts_ns", Some(ts))
                            .f64("value", Some(v));
                        b.end_row();
                    }
                }
            }
            "steps" => {
                for st in &t.steps {
                    common(&mut b, s);
                    b.i64("step", Some(st.number))
                        .i64("start_ns", Some(st.start))
                        .i64("end_ns", Some(st.end))
                        .i64("dur", Some(st.end - st.start));
                    b.end_row();
                }
            }
            "gaps" | "gap_causes" => {
                let mut gap_id = 0i64;
                for d in s.analysis.map_or(&[][..], |a| a.idle.as_slice()) {
                    for g in &d.gaps {
                        if which == "gaps" {
                            common(&mut b, s);
                            b.i64("gap_id", Some(gap_id))
                                .i64("device", Some(d.device as i64))
                                .i64("start_ns", Some(g.start))
                                .i64("end_ns", Some(g.end))
                                .i64("dur", Some(g.end - g.start))
                                .str("cause", Some(g.kind.id()))
                                .bool("mixed", g.mixed)
                                .owned("label", Some(g.label.clone()))
                                .owned("drained_by", g.drained_by.clone())
                                .owned("python_frame", g.frame.clone());
                            b.end_row();
                        } else {
                            for p in &g.parts {
                                common(&mut b, s);
                                b.i64("gap_id", Some(gap_id))
                                    .i64("device", Some(d.device as i64))
                                    .str("cause", Some(p.kind.id()))
                                    .owned("leaf", Some(p.leaf.to_string()))
                                    .owned("python_frame", p.frame.as_deref().map(str::to_string))
                                    .i64("ns", Some(p.ns));
                                b.end_row();
                            }
                        }
                        gap_id += 1;
                    }
                }
            }
            "findings" => {
                for f in s.analysis.map_or(&[][..], |a| a.findings.as_slice()) {
                    common(&mut b, s);
                    b.owned("id", Some(f.id.clone()))
                        .str("rule", Some(f.rule))
                        .str("severity", Some(f.severity.label()))
                        .i64("device", f.device.map(|d| d as i64))
                        // An unpriced finding's 0 is "unknown", not "costs nothing": NULL, so
                        // that sums and rankings over the column leave it out.
                        .i64("impact_ns", (!f.unpriced()).then_some(f.impact_ns))
                        .f64("impact_share", (!f.unpriced()).then_some(f.impact_share))
                        .owned("title", Some(f.title.clone()))
                        .owned("advice", f.advice.first().cloned());
                    b.end_row();
                }
            }
            _ => {}
        }
    }
    Some(b.finish())
}

/// Tables that need the analysis (the rules and the idle accounting), not only the events.
pub const ANALYSED: [&str; 3] = ["gaps", "gap_causes", "findings"];

/// The tables a query names (as whole words, any case), so the others are not built.
pub fn named_in(query: &str) -> Vec<&'static str> {
    let q = query.to_ascii_lowercase();
    let words: Vec<&str> = q
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    NAMES
        .iter()
        .copied()
        .filter(|n| words.contains(n))
        .collect()
}
