//! The Job screen (a directory of rank traces): one row per rank with its step time, busy
//! share, exposed wait in collectives and top finding, then the job's findings. Enter opens a
//! rank's own analysis.

use super::app::App;
use super::style;
use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};
use tracehound_heuristics::finding::fmt_ns;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let Some((dir, ranks, findings)) = &app.job else {
        f.render_widget(
            Paragraph::new(
                "Not a job: open a directory of rank traces (tracehound tui DIR) to compare ranks.",
            )
            .block(Block::default().borders(Borders::ALL).title(" job ")),
            area,
        );
        return;
    };
    let parts = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Min(5), Constraint::Length(9)])
        .split(area);
    let header = Row::new(vec![
        "rank",
        "file",
        "steps",
        "step time",
        "busy",
        "wait/step",
        "top finding",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let rows: Vec<Row> = ranks
        .iter()
        .map(|r| {
            Row::new(vec![
                Cell::from(r.rank.to_string()),
                Cell::from(
                    std::path::Path::new(&r.source)
                        .file_name()
                        .map_or_else(|| r.source.clone(), |n| n.to_string_lossy().into_owned()),
                ),
                Cell::from(r.steps.to_string()),
                Cell::from(fmt_ns(r.step_ns)),
                Cell::from(format!("{:.0}%", 100.0 * r.busy_share)),
                Cell::from(if r.collectives.is_empty() {
                    "-".into()
                } else {
                    fmt_ns(r.collective_exposed_wait_ns / r.steps.max(1) as i64)
                }),
                Cell::from(r.top_finding.clone().unwrap_or_default()),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(5),
            Constraint::Length(24),
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Min(20),
        ],
    )
    .header(header)
    .block(Block::default().borders(Borders::ALL).title(format!(
        " job {dir}: {} ranks · Enter opens a rank ",
        ranks.len()
    )))
    .row_highlight_style(style::selected(app, true));
    let mut state = TableState::default();
    if !ranks.is_empty() {
        state.select(Some(app.rank_row.min(ranks.len() - 1)));
    }
    f.render_stateful_widget(table, parts[0], &mut state);
    let text = if findings.is_empty() {
        "Balanced: no rank keeps the others waiting.".to_string()
    } else {
        findings
            .iter()
            .map(|fi| {
                format!(
                    "{} {}: {}\n  {}",
                    fi.severity.label(),
                    fi.rule,
                    fi.title,
                    fi.evidence
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    f.render_widget(
        Paragraph::new(text).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" job findings "),
        ),
        parts[1],
    );
}
