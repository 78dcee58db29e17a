//! Each screen rendered on real sample traces into ratatui's test backend, asserting on what
//! is shown: the top finding's title, the lane names, the first table row, a marked gap at the
//! column it must fall in, the help overlay, and the message for a small terminal.

use super::app::{App, Loaded, Screen};
use super::keys::{Action, KEYS};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::path::PathBuf;

fn sample(name: &str) -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("sample-traces")
    .join(name)
}

fn app(name: &str) -> App {
    let t = tracehound_parsers::load(&sample(name)).expect("sample trace loads");
    let config = tracehound_heuristics::Config::default();
    let a = tracehound_heuristics::analyze(&t, &config);
    let mut app = App::new(Some(Loaded::new(t, a, config.gap_threshold_ns)));
    app.no_color = true;
    app
}

/// The screen as text, one string per row.
fn render(app: &App, w: u16, h: u16) -> Vec<String> {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| super::ui(f, app)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect())
        .collect()
}

fn text(rows: &[String]) -> String {
    rows.join("\n")
}

const RESNET: &str = "kineto/h200_resnet_unpinned_sync.pt.trace.json.gz";

#[test]
fn findings_screen_shows_the_ranked_findings_and_the_measured_causes() {
    let a = app(RESNET);
    let screen = text(&render(&a, 120, 40));
    let top = &a.loaded.as_ref().unwrap().analysis.findings[0];
    let head: String = top.title.chars().take(40).collect();
    assert!(screen.contains(&head), "{screen}");
    assert!(screen.contains("input-bound"), "{screen}");
    assert!(
        screen.contains("% data loading: torch/utils/data/dataloader.py"),
        "{screen}"
    );
    assert!(screen.contains("pageable_memcpy"));
    // The status bar names the file, the GPU and the window.
    assert!(screen.contains("h200_resnet_unpinned_sync.pt.trace.json.gz │ GPU 0 NVIDIA H200"));
}

#[test]
fn enter_twice_opens_the_timeline_at_the_worst_instance() {
    let mut a = app(RESNET);
    a.apply(Action::Enter, 10);
    a.apply(Action::Enter, 10);
    assert_eq!(a.screen, Screen::Timeline);
    let inst = &a.loaded.as_ref().unwrap().analysis.findings[0].instances[0];
    assert!(a.view.t0 <= inst.start_ns && inst.start_ns + inst.dur_ns <= a.view.t1);
    let screen = text(&render(&a, 120, 40));
    assert!(screen.contains("at the cursor"), "{screen}");
    assert!(
        screen.contains("idle gap of 83.6 ms: data loading"),
        "{screen}"
    );
}

#[test]
fn timeline_lanes_and_a_gap_at_its_column() {
    let mut a = app(RESNET);
    a.apply(Action::Screen(1), 10);
    let (w, h) = (120u16, 40u16);
    let rows = render(&a, w, h);
    let screen = text(&rows);
    for lane in ["GPU 0 stream 7", "host 701/701", "host 701/749"] {
        assert!(screen.contains(lane), "{lane} in {screen}");
    }
    // The 83.6 ms gap opening the window: 18% of the 463 ms window, so it covers the first
    // fifth of the plot's columns on the GPU lane (row 3: tabs, border, ruler).
    let l = a.loaded.as_ref().unwrap();
    let g = &l.analysis.idle[0].gaps[0];
    let plot_w = (w - 18 - 2) as f64;
    let (t0, t1) = (a.view.t0, a.view.t1);
    let col = |t: i64| 1 + 18 + ((t - t0) as f64 / (t1 - t0) as f64 * plot_w) as usize;
    let lane: Vec<char> = rows[3].chars().collect();
    let mid = col((g.start + g.end) / 2);
    assert_eq!(lane[mid], '·', "gap column {mid} in {}", rows[3]);
    assert_ne!(lane[col(g.end) + 2], '·', "{}", rows[3]);
}

#[test]
fn zoom_and_pan_keep_the_cursor_in_view() {
    let mut a = app(RESNET);
    a.apply(Action::Screen(1), 10);
    let full = a.view.t1 - a.view.t0;
    a.apply(Action::ZoomIn, 10);
    a.apply(Action::ZoomIn, 10);
    assert_eq!(a.view.t1 - a.view.t0, full / 4);
    for _ in 0..300 {
        a.apply(Action::Right, 10);
    }
    assert!(a.view.t0 <= a.view.cursor && a.view.cursor < a.view.t1);
    a.apply(Action::Fit, 10);
    assert_eq!(a.view.t1 - a.view.t0, full);
    render(&a, 100, 30);
}

#[test]
fn kernel_table_first_row_is_the_summary_top_kernel_and_filters() {
    let mut a = app(RESNET);
    a.apply(Action::Screen(3), 10);
    let screen = render(&a, 120, 40);
    let top = a
        .loaded
        .as_ref()
        .unwrap()
        .analysis
        .summary
        .top_kernel
        .clone()
        .expect("a top kernel");
    // Row 3: tabs, border, header. The summary computes the top kernel on its own; the table
    // shows names shortened only as far as they stay distinct (two batch-norm kernels differ
    // in a template argument only).
    let rows = a.table_rows();
    assert_eq!(rows[0].name, top.name);
    let all: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    let shown = tracehound_heuristics::names::distinct_short_names(&all, 120);
    let short: String = shown[0].chars().take(60).collect();
    assert!(screen[3].contains(&short), "{}", screen[3]);
    a.query = "nchwToNhwc".into();
    let rows = a.table_rows();
    assert!(!rows.is_empty() && rows.iter().all(|r| r.name.contains("nchwToNhwc")));
    a.apply(Action::Toggle, 10);
    a.query.clear();
    // The operator with the most host time in the window, summed here from the spans.
    let l = a.loaded.as_ref().unwrap();
    let w = &l.analysis.summary.window;
    let mut by: std::collections::HashMap<&str, i64> = Default::default();
    for sp in l.trace.host_spans.iter().filter(|sp| {
        sp.kind == tracehound_parsers::HostKind::CpuOp && sp.start >= w.start && sp.start < w.end
    }) {
        *by.entry(l.trace.str(sp.name)).or_default() += sp.end - sp.start;
    }
    let top_op = by.into_iter().max_by_key(|x| x.1).unwrap().0.to_string();
    assert_eq!(a.table_rows()[0].name, top_op);
    let screen = text(&render(&a, 120, 40));
    assert!(screen.contains("CPU operators (host time, inclusive)"));
}

#[test]
fn memory_screen_marks_the_reserved_peak() {
    let mut a = app(RESNET);
    a.apply(Action::Screen(2), 10);
    let screen = text(&render(&a, 120, 40));
    assert!(screen.contains("reserved peak 2.5 GiB"), "{screen}");
    assert!(
        screen.contains('⣀') || screen.contains('⡇'),
        "a braille chart"
    );
}

#[test]
fn help_lists_every_key_and_closes_on_any_key() {
    let mut a = app(RESNET);
    a.apply(Action::Help, 10);
    let screen = text(&render(&a, 120, 40));
    for (k, _, what) in KEYS {
        assert!(screen.contains(k), "{k}");
        assert!(screen.contains(&what[..what.len().min(20)]), "{what}");
    }
    a.apply(Action::Down, 10);
    assert!(!a.help);
}

#[test]
fn a_small_terminal_is_told_so() {
    let a = app(RESNET);
    let screen = text(&render(&a, 60, 20));
    assert!(screen.contains("terminal too small: 60x20"), "{screen}");
    // 80x24 is enough for every screen.
    let mut a = a;
    for k in 0..6 {
        a.apply(Action::Screen(k), 10);
        let s = text(&render(&a, 80, 24));
        assert!(!s.contains("too small"));
    }
}

#[test]
fn job_screen_lists_the_ranks_and_the_straggler() {
    let dir = sample("kineto-jobs/h200_ddp_straggler");
    let mut ranks = Vec::new();
    for r in 0..2 {
        let t = tracehound_parsers::load(&dir.join(format!("rank{r}.pt.trace.json.gz"))).unwrap();
        let a = tracehound_heuristics::analyze(&t, &tracehound_heuristics::Config::default());
        ranks.push(tracehound_heuristics::job::RankSummary::new(&t, r, &a));
    }
    let findings = tracehound_heuristics::job::job_findings(&mut ranks);
    let mut a = App::new(None);
    a.no_color = true;
    a.job = Some(("job".into(), ranks, findings));
    a.screen = Screen::Job;
    let screen = text(&render(&a, 120, 30));
    assert!(
        screen.contains("straggler_rank: rank 1 arrives last"),
        "{screen}"
    );
    // The rank files are named.
    assert!(screen.contains("rank1.pt.trace.json"), "{screen}");
    // Before a rank is opened, the Findings screen shows the job's findings.
    a.screen = Screen::Findings;
    let findings = text(&render(&a, 120, 30));
    assert!(!findings.contains("No trace open"), "{findings}");
    assert!(findings.contains("straggler_rank"), "{findings}");
    assert!(findings.contains("across 2 ranks"), "{findings}");
    a.screen = Screen::Job;
    a.apply(Action::Down, 10);
    a.apply(Action::Enter, 10);
    assert!(
        a.open_rank
            .as_deref()
            .unwrap()
            .ends_with("rank1.pt.trace.json.gz")
    );
}

#[test]
fn search_moves_to_the_matching_finding() {
    let mut a = app(RESNET);
    a.apply(Action::Search, 10);
    for c in "pageable".chars() {
        a.type_key(Some(c), false, false);
    }
    a.type_key(None, true, false);
    let want = a
        .loaded
        .as_ref()
        .unwrap()
        .analysis
        .findings
        .iter()
        .position(|f| f.rule == "pageable_memcpy")
        .unwrap();
    assert!(want > 0);
    assert_eq!(a.finding, want);
    a.apply(Action::NextMatch, 10);
    assert_eq!(a.finding, want);
}

#[test]
fn counters_screen_charts_the_log_given_with_the_trace() {
    let dmon = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    )
    .join("../shared/sample-traces/dmon/h200_dmon_s_pucvmet_o_DT.log");
    if !dmon.exists() {
        eprintln!("skipping: {} is absent", dmon.display());
        return;
    }
    let mut t = tracehound_parsers::load(&sample(RESNET)).unwrap();
    let log = tracehound_parsers::load(&dmon).unwrap();
    tracehound_parsers::session::attach(&mut t, &log).expect("the log overlaps the trace");
    let config = tracehound_heuristics::Config::default();
    let a = tracehound_heuristics::analyze(&t, &config);
    let mut app = App::new(Some(Loaded::new(t, a, config.gap_threshold_ns)));
    app.no_color = true;
    app.apply(Action::Screen(4), 10);
    let screen = text(&render(&app, 120, 40));
    for m in ["GPU 0 sm (%)", "GPU 0 mem (%)", "GPU 0 pwr (W)"] {
        assert!(screen.contains(m), "{m} in {screen}");
    }
}

#[test]
fn annotations_have_a_lane_of_their_own() {
    // The DataLoader's record_function ranges in the ResNet capture.
    let mut a = app(RESNET);
    a.apply(Action::Screen(1), 10);
    let l = a.loaded.as_ref().unwrap();
    let lane = l
        .lanes
        .iter()
        .find(|x| x.label == "annotations")
        .expect("an annotation lane");
    assert!(lane.items.iter().any(|i| {
        l.trace
            .str(l.trace.host_spans[i.index as usize].name)
            .contains("DataLoader")
    }));
}
