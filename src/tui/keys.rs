//! The key table: one list both dispatches keys and writes the help overlay, so the two can
//! never disagree.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Help,
    NextScreen,
    PrevScreen,
    Screen(usize),
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Home,
    End,
    Enter,
    Back,
    ZoomIn,
    ZoomOut,
    PanLeft,
    PanRight,
    Fit,
    Search,
    NextMatch,
    PrevMatch,
    Sort,
    Toggle,
}

/// (keys as shown, action, what it does). The first key of each entry is matched by
/// [`action`]; the help overlay lists every entry.
pub const KEYS: &[(&str, Action, &str)] = &[
    ("q", Action::Quit, "quit"),
    ("?", Action::Help, "this help (any key closes it)"),
    ("Tab", Action::NextScreen, "next screen"),
    ("S-Tab", Action::PrevScreen, "previous screen"),
    (
        "1-6",
        Action::Screen(0),
        "Findings, Timeline, Memory, Kernels/Operators, Counters, Job",
    ),
    ("k / ↑", Action::Up, "up: previous finding, row, lane"),
    ("j / ↓", Action::Down, "down: next finding, row, lane"),
    ("h / ←", Action::Left, "timeline: cursor left (one column)"),
    (
        "l / →",
        Action::Right,
        "timeline: cursor right (one column)",
    ),
    ("H", Action::PanLeft, "timeline: pan left half a view"),
    ("L", Action::PanRight, "timeline: pan right half a view"),
    ("+ / =", Action::ZoomIn, "timeline: zoom in at the cursor"),
    ("-", Action::ZoomOut, "timeline: zoom out"),
    ("0", Action::Fit, "timeline: the whole analysed window"),
    ("PgUp", Action::PageUp, "a page up"),
    ("PgDn", Action::PageDown, "a page down"),
    ("Home", Action::Home, "first row / start of the window"),
    ("End", Action::End, "last row / end of the window"),
    (
        "Enter",
        Action::Enter,
        "drill in: finding -> its instances -> the timeline at one; rank -> its findings; table row -> its whole name, demangled",
    ),
    ("Esc / Bksp", Action::Back, "back"),
    (
        "/",
        Action::Search,
        "search (findings, tables: filter by name; Enter keeps it)",
    ),
    ("n", Action::NextMatch, "next match"),
    ("N", Action::PrevMatch, "previous match"),
    ("s", Action::Sort, "tables: sort by the next column"),
    (
        "o",
        Action::Toggle,
        "tables: kernels / operators; counters: next GPU",
    ),
];

/// The action of a key press, if any.
pub fn action(k: KeyEvent) -> Option<Action> {
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    Some(match k.code {
        KeyCode::Char('c') if ctrl => Action::Quit,
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('?') => Action::Help,
        KeyCode::Tab => Action::NextScreen,
        KeyCode::BackTab => Action::PrevScreen,
        KeyCode::Char(c @ '1'..='6') => Action::Screen(c as usize - '1' as usize),
        KeyCode::Char('k') | KeyCode::Up => Action::Up,
        KeyCode::Char('j') | KeyCode::Down => Action::Down,
        KeyCode::Char('h') | KeyCode::Left => Action::Left,
        KeyCode::Char('l') | KeyCode::Right => Action::Right,
        KeyCode::Char('H') => Action::PanLeft,
        KeyCode::Char('L') => Action::PanRight,
        KeyCode::Char('+') | KeyCode::Char('=') => Action::ZoomIn,
        KeyCode::Char('-') => Action::ZoomOut,
        KeyCode::Char('0') => Action::Fit,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        KeyCode::Home => Action::Home,
        KeyCode::End => Action::End,
        KeyCode::Enter => Action::Enter,
        KeyCode::Esc | KeyCode::Backspace => Action::Back,
        KeyCode::Char('/') => Action::Search,
        KeyCode::Char('n') => Action::NextMatch,
        KeyCode::Char('N') => Action::PrevMatch,
        KeyCode::Char('s') => Action::Sort,
        KeyCode::Char('o') => Action::Toggle,
        _ => return None,
    })
}
