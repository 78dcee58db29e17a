//! The Counters screen: nvidia-smi series (SM %, memory %, power, clocks) of one GPU as charts,
//! on the trace's time axis when the log came with a trace.

use super::app::App;
use ratatui::Frame;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::Line;
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph};

/// The metrics shown, in order, when the log has them.
const METRICS: [&str; 4] = ["sm", "mem", "pwr", "pclk"];

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let Some(l) = &app.loaded else {
        f.render_widget(Paragraph::new("No trace open."), area);
        return;
    };
    let t = &l.trace;
    let mut gpus: Vec<i32> = t.counters.iter().map(|c| c.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let Some(&gpu) = gpus.get(app.counter_gpu % gpus.len().max(1)) else {
        f.render_widget(
            Paragraph::new("No nvidia-smi series: give a dmon or --query-gpu log with the trace (tracehound tui trace.json.gz dmon.log).")
                .block(Block::default().borders(Borders::ALL).title(" counters ")),
            area,
        );
        return;
    };
    let series: Vec<_> = METRICS
        .iter()
        .filter_map(|m| t.counters.iter().find(|c| c.gpu == gpu && c.metric == *m))
        .collect();
    let origin = if t.gpu_ops.is_empty() && t.host_spans.is_empty() {
        series
            .iter()
            .filter_map(|s| s.samples.first().map(|x| x.0))
            .min()
            .unwrap_or(0)
    } else {
        l.analysis.summary.window.start
    };
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints(vec![
            Constraint::Ratio(1, series.len().max(1) as u32);
            series.len().max(1)
        ])
        .split(area);
    for (k, s) in series.iter().enumerate() {
        let data: Vec<(f64, f64)> = s
            .samples
            .iter()
            .map(|&(ts, v)| ((ts - origin) as f64 / 1e9, v))
            .collect();
        let (x0, x1) = (
            data.first().map_or(0.0, |d| d.0),
            data.last()
                .map_or(1.0, |d| d.0)
                .max(data.first().map_or(0.0, |d| d.0) + 1.0),
        );
        let y1 = data.iter().map(|d| d.1).fold(1.0, f64::max) * 1.1;
        let style = if app.no_color {
            Style::default()
        } else {
            Style::default().fg(Color::Cyan)
        };
        let chart = Chart::new(vec![
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(style)
                .data(&data),
        ])
        .block(Block::default().borders(Borders::ALL).title(format!(
            " GPU {gpu} {} ({}) · {} samples · o next GPU ",
            s.metric,
            s.unit,
            data.len()
        )))
        .x_axis(Axis::default().bounds([x0, x1]).labels(vec![
            Line::from(format!("{x0:.0} s")),
            Line::from(format!("{x1:.0} s")),
        ]))
        .y_axis(
            Axis::default()
                .bounds([0.0, y1])
                .labels(vec![Line::from("0"), Line::from(format!("{y1:.0}"))]),
        );
        f.render_widget(chart, rows[k]);
    }
}
