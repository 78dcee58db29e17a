//! `tracehound tui`: the terminal UI. It opens on the ranked findings and lets one walk from a
//! finding to its instances and to the events behind them on a timeline, over SSH and on
//! traces no browser opens.
//!
//! Layout after gitui and bottom: state ([`app::App`]) apart from drawing (one module per
//! screen, each a function of `&App`) apart from input ([`keys`], whose table also writes the
//! help overlay). Every view is computed once at load, so a key press only redraws.

pub mod app;
mod counters;
mod findings;
mod job;
pub mod keys;
mod memory;
mod memory_view;
mod style;
mod tables;
mod timeline;

use app::{App, Loaded, Screen};
use crossterm::event::{self, Event, KeyEventKind, MouseEventKind};
use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Tabs, Wrap};
use std::io::Write;

/// The smallest terminal the screens are laid out for.
pub const MIN_W: u16 = 80;
pub const MIN_H: u16 = 24;

/// Draws the whole frame: tabs, the screen, the status bar, and the help overlay.
pub fn ui(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width < MIN_W || area.height < MIN_H {
        f.render_widget(
            Paragraph::new(format!(
                "terminal too small: {}x{}, tracehound needs {MIN_W}x{MIN_H}. Resize, or press q to quit.",
                area.width, area.height
            ))
            .wrap(Wrap { trim: false }),
            area,
        );
        return;
    }
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Min(10),
            Constraint::Length(1),
        ])
        .split(area);
    let idx = Screen::ALL
        .iter()
        .position(|&s| s == app.screen)
        .unwrap_or(0);
    f.render_widget(
        Tabs::new(Screen::ALL.iter().map(|s| s.title()).collect::<Vec<_>>())
            .select(idx)
            .highlight_style(Style::default().add_modifier(Modifier::REVERSED)),
        rows[0],
    );
    match app.screen {
        Screen::Findings => findings::draw(f, app, rows[1]),
        Screen::Timeline => timeline::draw(f, app, rows[1]),
        Screen::Memory => memory::draw(f, app, rows[1]),
        Screen::Tables => tables::draw(f, app, rows[1]),
        Screen::Counters => counters::draw(f, app, rows[1]),
        Screen::Job => job::draw(f, app, rows[1]),
    }
    f.render_widget(Paragraph::new(status(app)), rows[2]);
    if app.help {
        help(f, area);
    }
}

/// File, GPU, window, selection and key hints.
fn status(app: &App) -> Line<'static> {
    let mut parts: Vec<String> = Vec::new();
    if let Some(l) = &app.loaded {
        let name = std::path::Path::new(&l.trace.source)
            .file_name()
            .map_or(l.trace.source.clone(), |n| n.to_string_lossy().into_owned());
        parts.push(name);
        if let Some(g) = l.trace.meta.gpus.first() {
            parts.push(format!("GPU {} {}", g.id, g.name));
        }
        parts.push(l.analysis.summary.window.describe());
    } else if let Some((dir, ranks, _)) = &app.job {
        parts.push(format!("{dir} ({} ranks)", ranks.len()));
    }
    if app.typing {
        parts.push(format!("/{}▏", app.query));
    } else if !app.query.is_empty() {
        parts.push(format!("search \"{}\" (n/N)", app.query));
    }
    if !app.message.is_empty() {
        parts.push(app.message.clone());
    }
    parts.push("? help · Tab screens · q quit".into());
    Line::from(Span::styled(
        format!(" {}", parts.join(" │ ")),
        Style::default().add_modifier(Modifier::REVERSED),
    ))
}

fn help(f: &mut Frame, area: Rect) {
    let w = area.width.min(90);
    let h = (keys::KEYS.len() as u16 + 4).min(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    let lines: Vec<Line> = keys::KEYS
        .iter()
        .map(|(k, _, what)| Line::from(format!("  {k:<12} {what}")))
        .collect();
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" keys (any key closes) "),
        ),
        r,
    );
}

/// Restores the terminal on every exit path: drop (normal return, `?`) and panic (the hook).
struct TerminalGuard;

impl TerminalGuard {
    fn enter() -> std::io::Result<Self> {
        crossterm::terminal::enable_raw_mode()?;
        let guard = TerminalGuard;
        crossterm::execute!(
            std::io::stdout(),
            crossterm::terminal::EnterAlternateScreen,
            crossterm::event::EnableMouseCapture,
            crossterm::cursor::Hide
        )?;
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        Ok(guard)
    }
}

fn restore() {
    let _ = crossterm::execute!(
        std::io::stdout(),
        crossterm::event::DisableMouseCapture,
        crossterm::terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = std::io::stdout().flush();
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Opens a rank trace of the job the way every command opens a trace
/// ([`crate::pipeline::open`]) and makes it the one on screen; the status bar says its first
/// warning (an incomplete capture's, when its file is cut short).
fn open_rank(app: &mut App, path: &str, opts: &crate::pipeline::Options) {
    let how = crate::pipeline::How {
        sessions: false,
        analyse: true,
    };
    let opened = crate::pipeline::open(
        &[std::path::PathBuf::from(path)],
        opts,
        how,
        &crate::pipeline::no_progress,
    )
    .and_then(|o| {
        let warning = o.warnings.first().cloned();
        let mut opened = o.into_result()?;
        Ok((opened.pop(), warning))
    });
    match opened {
        Ok((Some(o), warning)) => {
            let Some(a) = o.analysis else {
                app.message = format!("cannot open {path}: nothing to show");
                return;
            };
            let job = app.job.take();
            let no_color = app.no_color;
            *app = App::new(Some(Loaded::new(o.trace, a, o.config.gap_threshold_ns)));
            app.job = job;
            app.no_color = no_color;
            app.message = match warning {
                Some(w) => format!("opened {path}; warning: {w}"),
                None => format!("opened {path}"),
            };
        }
        Ok((None, _)) => app.message = format!("cannot open {path}: nothing to show"),
        Err(e) => app.message = format!("cannot open {path}: {e}"),
    }
}

/// Runs the TUI until the user quits.
pub fn run(mut app: App, opts: &crate::pipeline::Options) -> anyhow::Result<()> {
    let _guard = TerminalGuard::enter()?;
    let backend = ratatui::backend::CrosstermBackend::new(std::io::stdout());
    let mut terminal = ratatui::Terminal::new(backend)?;
    terminal.clear()?;
    loop {
        terminal.draw(|f| ui(f, &app))?;
        let page = terminal.size().map_or(10, |s| s.height.saturating_sub(8)) as usize;
        match event::read()? {
            Event::Key(k) if k.kind != KeyEventKind::Release => {
                if app.typing {
                    use crossterm::event::KeyCode;
                    match k.code {
                        KeyCode::Enter => app.type_key(None, true, false),
                        KeyCode::Esc => app.type_key(None, false, true),
                        KeyCode::Backspace => app.type_key(None, false, false),
                        KeyCode::Char(c) => app.type_key(Some(c), false, false),
                        _ => {}
                    }
                } else if let Some(a) = keys::action(k) {
                    app.apply(a, page);
                }
            }
            Event::Mouse(m) => match m.kind {
                MouseEventKind::ScrollUp => app.apply(keys::Action::Up, page),
                MouseEventKind::ScrollDown => app.apply(keys::Action::Down, page),
                MouseEventKind::Down(_) => app.click(m.column, m.row),
                _ => {}
            },
            _ => {}
        }
        if let Some(path) = app.open_rank.take() {
            open_rank(&mut app, &path, opts);
        }
        if app.quit {
            return Ok(());
        }
    }
}

/// `tracehound-dev tui-bench` (xtask/): the time to the first frame after analysis, and the
/// redraw time per key over a scripted session (zooms, pans, screen switches, searches) on an
/// off-screen 200x50 terminal, for `benches/tui.sh`.
pub fn bench(
    trace: tracehound_parsers::Trace,
    analysis: tracehound_heuristics::Analysis,
    gap_threshold_ns: i64,
    analyze_s: f64,
) -> anyhow::Result<String> {
    use keys::Action::*;
    let t0 = Instant::now();
    let mut app = App::new(Some(Loaded::new(trace, analysis, gap_threshold_ns)));
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 50))?;
    term.draw(|f| ui(f, &app))?;
    let first = t0.elapsed().as_secs_f64();
    let mut script: Vec<keys::Action> = Vec::new();
    for _ in 0..3 {
        script.extend([
            Screen(1),
            ZoomIn,
            ZoomIn,
            ZoomIn,
            Right,
            Right,
            PanRight,
            PanLeft,
        ]);
        script.extend([
            ZoomOut,
            Down,
            Down,
            Up,
            Fit,
            Screen(3),
            Sort,
            Toggle,
            Down,
            Screen(2),
        ]);
        script.extend([
            Screen(0),
            Down,
            Enter,
            Enter,
            Back,
            Screen(4),
            Screen(5),
            NextScreen,
        ]);
    }
    let mut times: Vec<f64> = Vec::new();
    for a in script {
        let t = Instant::now();
        app.apply(a, 40);
        term.draw(|f| ui(f, &app))?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    // A search typed on the kernel table.
    app.apply(Screen(3), 40);
    for c in "gemm".chars() {
        let t = Instant::now();
        app.type_key(Some(c), false, false);
        term.draw(|f| ui(f, &app))?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    Ok(format!(
        "analyze {analyze_s:.2} s; views and first frame {first:.3} s after it; {} key presses: redraw p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        times.len(),
        pct(0.5),
        pct(0.99),
        times.last().copied().unwrap_or(0.0)
    ))
}

use std::time::Instant;

#[cfg(test)]
mod tests;
