//! The Kernels / Operators screen: sortable tables (total, count, mean, max, share), filtered
//! by name with `/`.

use super::app::{App, SortKey};
use super::style;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};
use tracehound_heuristics::finding::fmt_ns;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let rows = app.table_rows();
    let head = |name: &'static str, key: SortKey| {
        let mark = if app.sort == key { " ▼" } else { "" };
        Cell::from(format!("{name}{mark}"))
    };
    let header = Row::new(vec![
        head("name", SortKey::Name),
        head("total", SortKey::Total),
        head("count", SortKey::Count),
        head("mean", SortKey::Mean),
        head("max", SortKey::Max),
        Cell::from("share"),
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let all: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    let names = tracehound_heuristics::names::distinct_short_names(&all, 120);
    let body: Vec<Row> = rows
        .iter()
        .zip(names)
        .map(|(r, name)| {
            Row::new(vec![
                Cell::from(name),
                Cell::from(fmt_ns(r.total_ns)),
                Cell::from(r.instances.to_string()),
                Cell::from(fmt_ns(r.avg_ns as i64)),
                Cell::from(fmt_ns(r.max_ns)),
                Cell::from(format!("{:.1}%", 100.0 * r.time_share)),
            ])
        })
        .collect();
    let what = if app.operators {
        "CPU operators (host time, inclusive)"
    } else {
        "kernels (GPU time)"
    };
    let filter = if app.query.is_empty() {
        String::new()
    } else {
        format!(" · filter \"{}\"", app.query)
    };
    let table = Table::new(
        body,
        [
            Constraint::Min(30),
            Constraint::Length(10),
            Constraint::Length(8),
            Constraint::Length(10),
            Constraint::Length(10),
            Constraint::Length(7),
        ],
    )
    .header(header)
    .block(Block::default().borders(Borders::ALL).title(format!(
        " {what}: {} rows{filter} · s sort · o {} · Enter whole name ",
        rows.len(),
        if app.operators {
            "kernels"
        } else {
            "operators"
        }
    )))
    .row_highlight_style(style::selected(app, true));
    let mut state = TableState::default();
    if !rows.is_empty() {
        state.select(Some(app.row.min(rows.len() - 1)));
    }
    let selected = rows.get(app.row.min(rows.len().saturating_sub(1)));
    let Some(row) = selected.filter(|_| app.full_name) else {
        f.render_stateful_widget(table, area, &mut state);
        return;
    };
    let [top, bottom] =
        Layout::vertical([Constraint::Min(6), Constraint::Percentage(40)]).areas(area);
    f.render_stateful_widget(table, top, &mut state);
    f.render_widget(whole_name(&row.name), bottom);
}

/// The selected row's whole name, demangled; when it was recorded mangled, first a line that
/// says so (the symbol itself would fill the pane before the name could be read).
fn whole_name(name: &str) -> Paragraph<'static> {
    let shown = tracehound_heuristics::names::demangle(name);
    let mut text = String::new();
    if shown != name {
        text.push_str(&format!(
            "recorded as a mangled symbol of {} characters: {}\n\n",
            name.chars().count(),
            tracehound_heuristics::names::clip(name, 48)
        ));
    }
    text.push_str(&shown);
    Paragraph::new(text).wrap(Wrap { trim: false }).block(
        Block::default()
            .borders(Borders::ALL)
            .title(" whole name · Enter or Esc hides it "),
    )
}
