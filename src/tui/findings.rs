//! The Findings screen: the ranked list and, beside it, the selected finding's measured
//! breakdown, worst instances and advice. Enter walks into the instances, Enter again opens the
//! timeline at one.

use super::app::{App, Focus};
use super::style;
use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Wrap};
use tracehound_heuristics::Severity;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let Some(l) = &app.loaded else {
        match &app.job {
            Some((dir, ranks, findings)) => job_findings(f, app, area, dir, ranks.len(), findings),
            None => f.render_widget(Paragraph::new("No trace open."), area),
        }
        return;
    };
    let findings = &l.analysis.findings;
    // The list takes what its rows need, up to 40% of the height; the detail the rest.
    let list_h = (findings.len() as u16 + 2).clamp(3, (area.height * 2 / 5).max(3));
    let cols = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Length(list_h), Constraint::Min(5)])
        .split(area);
    let items: Vec<ListItem> = findings
        .iter()
        .enumerate()
        .map(|(k, fi)| {
            ListItem::new(Line::from(vec![
                Span::raw(format!("{:>2} ", k + 1)),
                Span::styled(
                    format!("{:<6} ", fi.severity.label()),
                    style::severity(app, fi.severity),
                ),
                Span::raw(format!(
                    "{:>10} {:>6}  {:<22} ",
                    fi.impact_text(),
                    fi.share_text(),
                    fi.rule
                )),
                Span::raw(fi.title.clone()),
            ]))
        })
        .collect();
    let mut state = ListState::default();
    if !findings.is_empty() {
        state.select(Some(app.finding.min(findings.len() - 1)));
    }
    let title = format!(
        " findings ({}) · {} ",
        findings.len(),
        l.analysis.summary.verdict.split(':').next().unwrap_or("")
    );
    let list = List::new(items)
        .block(Block::default().borders(Borders::ALL).title(title))
        .highlight_style(style::selected(app, app.focus == Focus::List))
        .highlight_symbol("▶ ");
    f.render_stateful_widget(list, cols[0], &mut state);
    let Some(fi) = findings.get(app.finding) else {
        f.render_widget(
            Paragraph::new(format!("No findings.\n\n{}", l.analysis.summary.verdict))
                .wrap(Wrap { trim: false })
                .block(Block::default().borders(Borders::ALL).title(" detail ")),
            cols[1],
        );
        return;
    };
    let mut lines: Vec<Line> = vec![
        Line::from(Span::styled(
            fi.title.clone(),
            Style::default().add_modifier(Modifier::BOLD),
        )),
        Line::from(format!("evidence: {}", fi.evidence)),
        Line::from(""),
    ];
    if !fi.breakdown.is_empty() {
        lines.push(Line::from(Span::styled(
            "measured breakdown",
            Style::default().add_modifier(Modifier::BOLD),
        )));
        for r in &fi.breakdown {
            lines.push(Line::from(format!(
                "  · {}",
                crate::report::words::row_line(r)
            )));
        }
        lines.push(Line::from(""));
    }
    if !fi.instances.is_empty() {
        lines.push(Line::from(Span::styled(
            "worst instances (Enter to select, Enter again for the timeline)",
            Style::default().add_modifier(Modifier::BOLD),
        )));
        for (k, i) in fi.instances.iter().enumerate() {
            let t = format!(
                "  {}",
                crate::report::words::instance(i, &crate::report::words::Tui, true)
            );
            let sel = app.focus == Focus::Instances && k == app.instance;
            lines.push(if sel {
                Line::from(Span::styled(
                    format!("▶{}", &t[1..]),
                    style::selected(app, true),
                ))
            } else {
                Line::from(t)
            });
        }
        lines.push(Line::from(""));
    }
    for a in &fi.advice {
        lines.push(Line::from(vec![
            Span::styled("fix: ", style::severity(app, Severity::Low)),
            Span::raw(a.clone()),
        ]));
    }
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default().borders(Borders::ALL).title(format!(
                " {} · {} · confidence {:?} ",
                fi.rule,
                fi.severity.label(),
                fi.confidence
            )),
        ),
        cols[1],
    );
}

/// A job directory before a rank is opened: the job's own findings (stragglers, waits,
/// exposed communication), each with its evidence.
fn job_findings(
    f: &mut Frame,
    app: &App,
    area: Rect,
    dir: &str,
    ranks: usize,
    findings: &[tracehound_heuristics::Finding],
) {
    let mut lines: Vec<Line> = Vec::new();
    if findings.is_empty() {
        lines.push(Line::from("No job findings: the ranks agree."));
    }
    for (k, fi) in findings.iter().enumerate() {
        lines.push(Line::from(vec![
            Span::raw(format!("{:>2} ", k + 1)),
            Span::styled(
                format!("{:<6} ", fi.severity.label()),
                style::severity(app, fi.severity),
            ),
            Span::raw(format!("{:>10}  {:<22} ", fi.impact_text(), fi.rule)),
            Span::styled(
                fi.title.clone(),
                Style::default().add_modifier(Modifier::BOLD),
            ),
        ]));
        lines.push(Line::from(format!("     {}", fi.evidence)));
        if let Some(a) = fi.advice.first() {
            lines.push(Line::from(format!("     fix: {a}")));
        }
    }
    let title = format!(
        " job {dir}: {} findings across {ranks} ranks · a rank's own: Job screen (6), Enter ",
        findings.len()
    );
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}
