//! Colours, in one place, and none at all under `NO_COLOR`.

use super::app::{App, ItemClass};
use ratatui::style::{Color, Modifier, Style};
use tracehound_heuristics::Severity;

fn fg(app: &App, c: Color) -> Style {
    if app.no_color {
        Style::default()
    } else {
        Style::default().fg(c)
    }
}

pub fn severity(app: &App, s: Severity) -> Style {
    match s {
        Severity::High => fg(app, Color::Red).add_modifier(Modifier::BOLD),
        Severity::Medium => fg(app, Color::Yellow),
        Severity::Low => fg(app, Color::Cyan),
        Severity::Info => fg(app, Color::Gray),
    }
}

/// The selection: reversed (readable without colour), brighter when focused.
pub fn selected(app: &App, focused: bool) -> Style {
    let s = Style::default().add_modifier(Modifier::REVERSED);
    if focused || app.no_color {
        s
    } else {
        s.add_modifier(Modifier::DIM)
    }
}

pub fn class(app: &App, c: Option<ItemClass>) -> Style {
    match c {
        Some(ItemClass::Kernel) => fg(app, Color::Green),
        Some(ItemClass::Collective) => fg(app, Color::Yellow),
        Some(ItemClass::Memcpy) => fg(app, Color::Blue),
        Some(ItemClass::PageableMemcpy) => fg(app, Color::Magenta),
        Some(ItemClass::Memset) => fg(app, Color::Gray),
        Some(ItemClass::HostOp) => fg(app, Color::Cyan),
        Some(ItemClass::SyncCall) => fg(app, Color::Red),
        Some(ItemClass::Annotation) => fg(app, Color::White),
        None => Style::default(),
    }
}

pub fn gap(app: &App) -> Style {
    fg(app, Color::Red).add_modifier(Modifier::BOLD)
}

pub fn cursor(app: &App, s: Style) -> Style {
    let _ = app;
    s.add_modifier(Modifier::REVERSED)
}

pub fn dim(app: &App) -> Style {
    fg(app, Color::DarkGray)
}
