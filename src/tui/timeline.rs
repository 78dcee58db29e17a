//! The Timeline screen: one lane per GPU stream and per host thread that launches onto it,
//! drawn per terminal column (each column shows the busy fraction of the time it covers and
//! the class that dominates it), so a frame costs the same at any zoom. Gaps over the
//! threshold are marked, step boundaries sit on the ruler, and the event under the cursor is
//! described below.

use super::app::{App, ItemClass, Lane, Loaded};
use super::style;
use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use tracehound_heuristics::finding::{fmt_bytes, fmt_ns};

/// Width of the lane labels.
const LABEL: u16 = 18;

/// What one column of a lane shows: busy share of its time and the dominant class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub busy: f64,
    pub class: Option<ItemClass>,
}

/// The cells of `lane` for `width` columns over `[t0, t1)`: one pass over the items in view.
pub fn cells(lane: &Lane, t0: i64, t1: i64, width: usize) -> Vec<Cell> {
    let mut out = vec![
        Cell {
            busy: 0.0,
            class: None
        };
        width
    ];
    if width == 0 || t1 <= t0 {
        return out;
    }
    let span = (t1 - t0) as f64;
    let col_ns = span / width as f64;
    let mut best: Vec<(i64, Option<ItemClass>)> = vec![(0, None); width];
    let k = lane.items.partition_point(|i| i.end <= t0);
    for it in lane.items[k..].iter().take_while(|i| i.start < t1) {
        let (s, e) = (it.start.max(t0), it.end.min(t1));
        let c0 = (((s - t0) as f64) / col_ns) as usize;
        let c1 = ((((e - t0) as f64) / col_ns).ceil() as usize).min(width);
        for (c, cell) in out.iter_mut().enumerate().take(c1).skip(c0) {
            let cs = t0 + (c as f64 * col_ns) as i64;
            let ce = t0 + ((c + 1) as f64 * col_ns) as i64;
            let ov = (e.min(ce) - s.max(cs)).max(0);
            cell.busy += ov as f64 / col_ns;
            if ov > best[c].0 {
                best[c] = (ov, Some(it.class));
            }
        }
    }
    for (cell, b) in out.iter_mut().zip(best) {
        cell.busy = cell.busy.min(1.0);
        cell.class = b.1;
    }
    out
}

fn glyph(busy: f64) -> &'static str {
    if busy >= 0.66 {
        "█"
    } else if busy >= 0.33 {
        "▓"
    } else if busy > 0.0 {
        "░"
    } else {
        " "
    }
}

/// Columns of `[t0, t1)` (width `width`) that a gap of device `device` covers.
pub fn gap_columns(l: &Loaded, device: Option<i32>, t0: i64, t1: i64, width: usize) -> Vec<bool> {
    let mut out = vec![false; width];
    let Some(d) = device else { return out };
    if width == 0 || t1 <= t0 {
        return out;
    }
    let col_ns = (t1 - t0) as f64 / width as f64;
    for &(gd, s, e, _) in &l.gaps {
        if gd != d || e <= t0 || s >= t1 {
            continue;
        }
        let c0 = (((s.max(t0) - t0) as f64) / col_ns) as usize;
        let c1 = ((((e.min(t1) - t0) as f64) / col_ns).ceil() as usize).min(width);
        for x in out.iter_mut().take(c1).skip(c0) {
            *x = true;
        }
    }
    out
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let Some(l) = &app.loaded else {
        f.render_widget(Paragraph::new("No trace open."), area);
        return;
    };
    let v = app.view;
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Min(6), Constraint::Length(8)])
        .split(area);
    let plot = rows[0];
    let inner_w = plot.width.saturating_sub(LABEL + 2) as usize;
    let visible = plot.height.saturating_sub(3) as usize;
    let first = v.lane.saturating_sub(visible.saturating_sub(1));
    let mut lines: Vec<Line> = Vec::new();
    lines.push(ruler(l, v.t0, v.t1, inner_w, app));
    let cursor_col = if v.t1 > v.t0 {
        (((v.cursor - v.t0) as f64 / (v.t1 - v.t0) as f64) * inner_w as f64) as usize
    } else {
        0
    };
    for (k, lane) in l.lanes.iter().enumerate().skip(first).take(visible) {
        let cells = cells(lane, v.t0, v.t1, inner_w);
        let gaps = gap_columns(l, lane.device, v.t0, v.t1, inner_w);
        let mut spans: Vec<Span> = Vec::with_capacity(inner_w + 1);
        let label = format!("{:<w$.w$}", lane.label, w = LABEL as usize - 1);
        spans.push(Span::styled(
            format!("{label} "),
            style::selected(app, k == v.lane),
        ));
        for (c, (cell, gap)) in cells.iter().zip(&gaps).enumerate() {
            let (g, st) = if cell.busy == 0.0 && *gap {
                ("·", style::gap(app))
            } else {
                (glyph(cell.busy), style::class(app, cell.class))
            };
            let st = if c == cursor_col && k == v.lane {
                style::cursor(app, st)
            } else {
                st
            };
            spans.push(Span::styled(g, st));
        }
        lines.push(Line::from(spans));
    }
    lines.push(legend(app, l.gap_threshold_ns));
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(format!(
            " timeline {} – {} ({} shown, {} a column) · lanes {}/{} ",
            fmt_offset(l, v.t0),
            fmt_offset(l, v.t1),
            fmt_ns(v.t1 - v.t0),
            fmt_ns((v.t1 - v.t0) / inner_w.max(1) as i64),
            v.lane + 1,
            l.lanes.len()
        ))),
        plot,
    );
    f.render_widget(
        Paragraph::new(details(l, app))
            .wrap(Wrap { trim: false })
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" at the cursor: {} ", fmt_offset(l, v.cursor))),
            ),
        rows[1],
    );
}

/// Offset from the window start, as people read it.
fn fmt_offset(l: &Loaded, t: i64) -> String {
    let ms = (t - l.analysis.summary.window.start) as f64 / 1e6;
    format!("{ms:+.3} ms")
}

/// The time ruler with step boundaries (`|`).
fn ruler<'a>(l: &Loaded, t0: i64, t1: i64, width: usize, app: &App) -> Line<'a> {
    let mut chars = vec!['─'; width];
    if t1 > t0 && width > 0 {
        let col = |t: i64| (((t - t0) as f64 / (t1 - t0) as f64) * width as f64) as i64;
        for s in &l.trace.steps {
            let c = col(s.start);
            if (0..width as i64).contains(&c) {
                chars[c as usize] = '┃';
            }
        }
    }
    let steps: String = chars.into_iter().collect();
    Line::from(vec![
        Span::raw(format!("{:<w$}", "steps ┃", w = LABEL as usize)),
        Span::styled(steps, style::dim(app)),
    ])
}

fn legend<'a>(app: &App, gap_ns: i64) -> Line<'a> {
    let item = |c: ItemClass, name: &'static str| {
        vec![
            Span::styled("█", style::class(app, Some(c))),
            Span::raw(format!(" {name}  ")),
        ]
    };
    let mut v = vec![Span::raw(format!("{:<w$}", "", w = LABEL as usize))];
    v.extend(item(ItemClass::Kernel, "kernel"));
    v.extend(item(ItemClass::Collective, "NCCL"));
    v.extend(item(ItemClass::Memcpy, "memcpy"));
    v.extend(item(ItemClass::PageableMemcpy, "pageable memcpy"));
    v.extend(item(ItemClass::HostOp, "host op"));
    v.extend(item(ItemClass::SyncCall, "sync call"));
    v.push(Span::styled("·", style::gap(app)));
    v.push(Span::raw(format!(" idle gap ≥ {}", fmt_ns(gap_ns))));
    Line::from(v)
}

/// The event under the cursor on the selected lane, described.
fn details<'a>(l: &Loaded, app: &App) -> Vec<Line<'a>> {
    let v = app.view;
    let col_ns = ((v.t1 - v.t0) / 100).max(1);
    let t = &l.trace;
    let Some(lane) = l.lanes.get(v.lane) else {
        return vec![Line::from("no lanes")];
    };
    let gap = l
        .gaps
        .iter()
        .find(|g| Some(g.0) == lane.device && g.1 <= v.cursor && v.cursor < g.2);
    let Some(it) = l.item_at(v.lane, v.cursor, col_ns) else {
        return vec![Line::from(match gap {
            Some(g) => format!("idle gap of {}: {}", fmt_ns(g.2 - g.1), g.3),
            None => format!("{}: nothing at the cursor", lane.label),
        })];
    };
    let mut out = Vec::new();
    if lane.device.is_some() {
        let o = &t.gpu_ops[it.index as usize];
        out.push(Line::from(format!(
            "{:?} {} — {} on GPU {} stream {}",
            o.kind,
            tracehound_heuristics::names::demangle(t.str(o.name)),
            fmt_ns(o.dur()),
            o.device,
            o.stream
        )));
        if let Some(k) = &o.kernel {
            out.push(Line::from(format!(
                "grid {:?} block {:?} · {} registers · {} shared memory{}",
                k.grid,
                k.block,
                k.registers,
                fmt_bytes(k.shared_mem as u64),
                k.occupancy_pct
                    .map(|p| format!(" · est. occupancy {p:.0}%"))
                    .unwrap_or_default()
            )));
        }
        if o.bytes > 0 {
            out.push(Line::from(format!(
                "{} {} -> {} · {}",
                o.direction.label(),
                o.src_kind.label(),
                o.dst_kind.label(),
                fmt_bytes(o.bytes)
            )));
        }
        let launch = t.index.op_launch.get(it.index as usize).copied();
        if let Some(li) = launch.filter(|&x| x != tracehound_parsers::NONE) {
            let s = &t.host_spans[li as usize];
            let chain: Vec<&str> = t
                .ancestors(li)
                .filter(|&a| t.host_spans[a as usize].kind == tracehound_parsers::HostKind::CpuOp)
                .map(|a| t.str(t.host_spans[a as usize].name))
                .collect();
            out.push(Line::from(format!(
                "launched by {} ({}, correlation {}) {} before it started",
                t.str(s.name),
                fmt_ns(s.dur()),
                s.correlation(),
                fmt_ns(o.start - s.start)
            )));
            if !chain.is_empty() {
                let ops: Vec<&str> = chain.into_iter().rev().collect();
                out.push(Line::from(format!("operators: {}", ops.join(" > "))));
            }
            if let Some(fr) = t.user_frame(li) {
                out.push(Line::from(format!("python: {fr}")));
            }
        }
    } else {
        let s = &t.host_spans[it.index as usize];
        out.push(Line::from(format!(
            "{:?} {} — {}",
            s.kind,
            t.str(s.name),
            fmt_ns(s.dur())
        )));
        let dims = t.op_args(s).input_dims;
        if dims != 0 {
            out.push(Line::from(format!("input dims {}", t.str(dims))));
        }
        if let Some(fr) = t.user_frame(it.index) {
            out.push(Line::from(format!("python: {fr}")));
        }
    }
    if let Some(g) = gap {
        out.push(Line::from(Span::styled(
            format!("in an idle gap of {}: {}", fmt_ns(g.2 - g.1), g.3),
            Style::default(),
        )));
    }
    out
}
