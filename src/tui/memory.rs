//! The Memory screen: allocated and reserved memory per device over the window (braille
//! chart), with the reserved peak, out-of-memory events and cudaMalloc/cudaFree calls marked.

use super::app::App;
use super::memory_view::MemoryView;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::Line;
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph};
use tracehound_heuristics::finding::fmt_bytes;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let views: &[MemoryView] = app.loaded.as_ref().map_or(&[], |l| l.memory.as_slice());
    let Some(v) = views.first() else {
        f.render_widget(
            Paragraph::new("No allocator events in this trace (record with profile_memory=True; nsys: --cuda-memory-usage=true).")
                .block(Block::default().borders(Borders::ALL).title(" memory ")),
            area,
        );
        return;
    };
    let x_max = app
        .loaded
        .as_ref()
        .map_or(1.0, |l| l.analysis.summary.window.len() as f64 / 1e6);
    let y_max = (v.peak.1 * 1.15).max(0.001);
    let color = |c: Color| {
        if app.no_color {
            Style::default()
        } else {
            Style::default().fg(c)
        }
    };
    let peak = [v.peak];
    let mut sets = vec![
        Dataset::default()
            .name("reserved")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(color(Color::Yellow))
            .data(&v.reserved),
        Dataset::default()
            .name("allocated")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(color(Color::Green))
            .data(&v.allocated),
        Dataset::default()
            .name("reserved peak")
            .marker(Marker::Dot)
            .style(color(Color::Red))
            .data(&peak),
    ];
    if !v.ooms.is_empty() {
        sets.push(
            Dataset::default()
                .name("OOM")
                .marker(Marker::Block)
                .style(color(Color::Red))
                .data(&v.ooms),
        );
    }
    if !v.calls.is_empty() {
        sets.push(
            Dataset::default()
                .name("cudaMalloc/cudaFree")
                .marker(Marker::Dot)
                .style(color(Color::Magenta))
                .data(&v.calls),
        );
    }
    let title = format!(
        " memory, GPU {} · reserved peak {} at +{:.1} ms · {} OOM · {} cudaMalloc/cudaFree{} ",
        v.device,
        fmt_bytes((v.peak.1 * (1u64 << 30) as f64) as u64),
        v.peak.0,
        v.ooms.len(),
        v.calls.len(),
        if views.len() > 1 {
            format!(" · {} devices (first shown)", views.len())
        } else {
            String::new()
        }
    );
    let chart = Chart::new(sets)
        .block(Block::default().borders(Borders::ALL).title(title))
        .x_axis(
            Axis::default()
                .title("ms")
                .bounds([0.0, x_max])
                .labels(vec![Line::from("0"), Line::from(format!("{x_max:.0}"))]),
        )
        .y_axis(
            Axis::default()
                .title("GiB")
                .bounds([0.0, y_max])
                .labels(vec![Line::from("0"), Line::from(format!("{y_max:.2}"))]),
        );
    f.render_widget(chart, area);
}
