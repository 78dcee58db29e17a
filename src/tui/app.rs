//! The TUI's state: what was loaded, the views computed once from it, and where the user is.
//! Drawing reads it (`&App`); input changes it ([`App::apply`]).

use super::keys::Action;
use tracehound_heuristics::job::RankSummary;
use tracehound_heuristics::tables::TimeRow;
use tracehound_heuristics::{Analysis, Finding};
use tracehound_parsers::{GpuOpKind, HostKind, NONE, Trace};

/// The screens, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    Findings,
    Timeline,
    Memory,
    Tables,
    Counters,
    Job,
}

impl Screen {
    pub const ALL: [Screen; 6] = [
        Screen::Findings,
        Screen::Timeline,
        Screen::Memory,
        Screen::Tables,
        Screen::Counters,
        Screen::Job,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Screen::Findings => "1 Findings",
            Screen::Timeline => "2 Timeline",
            Screen::Memory => "3 Memory",
            Screen::Tables => "4 Kernels/Operators",
            Screen::Counters => "5 Counters",
            Screen::Job => "6 Job",
        }
    }
}

/// What a timeline item is, for its colour and glyph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ItemClass {
    Kernel,
    Collective,
    Memcpy,
    PageableMemcpy,
    Memset,
    HostOp,
    SyncCall,
    Annotation,
}

/// One event on a lane.
#[derive(Debug, Clone, Copy)]
pub struct Item {
    pub start: i64,
    pub end: i64,
    pub class: ItemClass,
    /// GPU op index (GPU lanes) or host span index (host lanes).
    pub index: u32,
}

/// A lane of the timeline: one GPU stream, or one host thread that launches GPU work.
#[derive(Debug, Clone)]
pub struct Lane {
    pub label: String,
    pub device: Option<i32>,
    /// Sorted by start; on a stream items do not overlap, on a host thread only the
    /// outermost spans are kept, so they do not either.
    pub items: Vec<Item>,
}

/// The timeline's view: which part of the time axis is shown and what is selected.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View {
    pub t0: i64,
    pub t1: i64,
    pub cursor: i64,
    pub lane: usize,
}

/// One analysed trace with everything the screens show, computed once.
pub struct Loaded {
    pub trace: Trace,
    pub analysis: Analysis,
    pub gap_threshold_ns: i64,
    pub lanes: Vec<Lane>,
    /// Idle gaps at or above the threshold: (device, start, end, cause).
    pub gaps: Vec<(i32, i64, i64, String)>,
    pub kernels: Vec<TimeRow>,
    pub operators: Vec<TimeRow>,
    pub memory: Vec<super::memory_view::MemoryView>,
}

impl Loaded {
    pub fn new(trace: Trace, analysis: Analysis, gap_threshold_ns: i64) -> Self {
        let w = analysis.summary.window.clone();
        let mut lanes: Vec<Lane> = Vec::new();
        // GPU lanes, one per (device, stream), in device and stream order.
        let mut streams: Vec<(i32, i64)> = trace
            .gpu_ops
            .iter()
            .filter(|o| o.is_work())
            .map(|o| (o.device, o.stream))
            .collect();
        streams.sort_unstable();
        streams.dedup();
        for &(d, s) in &streams {
            let items: Vec<Item> = trace
                .device_ops(d)
                .iter()
                .filter_map(|&i| {
                    let o = &trace.gpu_ops[i as usize];
                    (o.stream == s && o.is_work()).then(|| Item {
                        start: o.start,
                        end: o.end.max(o.start + 1),
                        class: match o.kind {
                            GpuOpKind::Memcpy if o.is_pageable_copy() => ItemClass::PageableMemcpy,
                            GpuOpKind::Memcpy => ItemClass::Memcpy,
                            GpuOpKind::Memset => ItemClass::Memset,
                            _ if tracehound_heuristics::collectives::is_collective_kernel(
                                trace.str(o.name),
                            ) =>
                            {
                                ItemClass::Collective
                            }
                            _ => ItemClass::Kernel,
                        },
                        index: i,
                    })
                })
                .collect();
            lanes.push(Lane {
                label: format!("GPU {d} stream {s}"),
                device: Some(d),
                items,
            });
        }
        // Host lanes: threads that launched GPU work, their outermost spans.
        let mut launchers: Vec<(i64, i64)> = trace
            .index
            .op_launch
            .iter()
            .filter(|&&l| l != NONE)
            .map(|&l| {
                let s = &trace.host_spans[l as usize];
                (s.pid, s.tid)
            })
            .collect();
        launchers.sort_unstable();
        launchers.dedup();
        for th in launchers {
            let items: Vec<Item> = trace
                .thread_spans(th)
                .iter()
                .filter_map(|&i| {
                    let s = &trace.host_spans[i as usize];
                    // Outermost among operators and CUDA calls (Python frames and
                    // annotations around them do not count).
                    let top = trace.ancestors(i).all(|a| {
                        !matches!(
                            trace.host_spans[a as usize].kind,
                            HostKind::CpuOp | HostKind::Runtime | HostKind::Driver
                        )
                    });
                    let shown = matches!(
                        s.kind,
                        HostKind::CpuOp | HostKind::Runtime | HostKind::Driver
                    );
                    (top && shown).then(|| Item {
                        start: s.start,
                        end: s.end.max(s.start + 1),
                        class: if tracehound_heuristics::names::is_sync_call(trace.api_name(s.name))
                        {
                            ItemClass::SyncCall
                        } else {
                            ItemClass::HostOp
                        },
                        index: i,
                    })
                })
                .collect();
            lanes.push(Lane {
                label: format!("host {}/{}", th.0, th.1 & 0xFF_FFFF),
                device: None,
                items,
            });
        }
        // User annotations and NVTX ranges (record_function, emit_nvtx; not the step
        // markers, which the ruler shows): the outermost ones, on a lane of their own.
        let mut notes: Vec<Item> = trace
            .host_spans
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.kind == HostKind::Annotation
                    && s.end > w.start
                    && s.start < w.end
                    && !trace.str(s.name).starts_with("ProfilerStep#")
            })
            .filter(|(i, _)| {
                trace.ancestors(*i as u32).all(|a| {
                    let p = &trace.host_spans[a as usize];
                    p.kind != HostKind::Annotation || trace.str(p.name).starts_with("ProfilerStep#")
                })
            })
            .map(|(i, s)| Item {
                start: s.start,
                end: s.end.max(s.start + 1),
                class: ItemClass::Annotation,
                index: i as u32,
            })
            .collect();
        notes.sort_by_key(|i| i.start);
        if !notes.is_empty() {
            lanes.push(Lane {
                label: "annotations".into(),
                device: None,
                items: notes,
            });
        }
        let gaps = analysis
            .idle
            .iter()
            .flat_map(|d| d.gaps.iter().map(move |g| (d.device, g)))
            .map(|(d, g)| (d, g.start, g.end, g.label.clone()))
            .collect();
        let kernels = tracehound_heuristics::tables::kernel_summary(&trace, Some(&w));
        let operators = tracehound_heuristics::tables::operator_summary(&trace, Some(&w));
        let memory = super::memory_view::build(&trace, &w);
        Loaded {
            trace,
            analysis,
            gap_threshold_ns,
            lanes,
            gaps,
            kernels,
            operators,
            memory,
        }
    }

    /// The item of `lane` under time `t`, or the nearest one within `slack` ns.
    pub fn item_at(&self, lane: usize, t: i64, slack: i64) -> Option<&Item> {
        let items = &self.lanes.get(lane)?.items;
        let k = items.partition_point(|i| i.end <= t);
        let near = |i: &&Item| i.start <= t + slack && i.end >= t - slack;
        items
            .get(k)
            .filter(near)
            .or_else(|| k.checked_sub(1).and_then(|j| items.get(j)).filter(near))
    }
}

/// Where the user is on the Findings screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    List,
    Instances,
}

/// Which table the Kernels/Operators screen shows, and how it is sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Total,
    Count,
    Mean,
    Max,
    Name,
}

/// The whole TUI state.
pub struct App {
    /// The trace on screen (none for a job directory before a rank is opened).
    pub loaded: Option<Loaded>,
    /// The job's ranks and findings, for a directory.
    pub job: Option<(String, Vec<RankSummary>, Vec<Finding>)>,
    pub screen: Screen,
    pub finding: usize,
    pub instance: usize,
    pub focus: Focus,
    pub view: View,
    pub operators: bool,
    pub sort: SortKey,
    pub row: usize,
    /// Whether the Kernels/Operators screen shows the selected row's whole name, demangled
    /// (Enter): the table shortens names to a cell, and CUPTI leaves some kernels mangled.
    pub full_name: bool,
    pub rank_row: usize,
    pub counter_gpu: usize,
    /// The search / filter text and whether it is being typed.
    pub query: String,
    pub typing: bool,
    pub help: bool,
    pub quit: bool,
    /// A one-line message for the status bar.
    pub message: String,
    pub no_color: bool,
    /// A rank trace the Job screen asked to open (the event loop loads it).
    pub open_rank: Option<String>,
}

impl App {
    pub fn new(loaded: Option<Loaded>) -> Self {
        let view = loaded.as_ref().map_or(
            View {
                t0: 0,
                t1: 1,
                cursor: 0,
                lane: 0,
            },
            |l| {
                let w = &l.analysis.summary.window;
                View {
                    t0: w.start,
                    t1: w.end.max(w.start + 1),
                    cursor: w.start,
                    lane: 0,
                }
            },
        );
        App {
            loaded,
            job: None,
            screen: Screen::Findings,
            finding: 0,
            instance: 0,
            focus: Focus::List,
            view,
            operators: false,
            sort: SortKey::Total,
            row: 0,
            full_name: false,
            rank_row: 0,
            counter_gpu: 0,
            query: String::new(),
            typing: false,
            help: false,
            quit: false,
            message: String::new(),
            no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
            open_rank: None,
        }
    }

    /// The rows of the Kernels/Operators table, filtered by the query and sorted.
    pub fn table_rows(&self) -> Vec<&TimeRow> {
        let Some(l) = &self.loaded else {
            return Vec::new();
        };
        let src = if self.operators {
            &l.operators
        } else {
            &l.kernels
        };
        let q = self.query.to_lowercase();
        let mut rows: Vec<&TimeRow> = src
            .iter()
            .filter(|r| {
                q.is_empty()
                    || r.name.to_lowercase().contains(&q)
                    || tracehound_heuristics::names::demangle(&r.name)
                        .to_lowercase()
                        .contains(&q)
            })
            .collect();
        match self.sort {
            SortKey::Total => rows.sort_by_key(|r| std::cmp::Reverse(r.total_ns)),
            SortKey::Count => rows.sort_by_key(|r| std::cmp::Reverse(r.instances)),
            SortKey::Mean => rows.sort_by(|a, b| b.avg_ns.total_cmp(&a.avg_ns)),
            SortKey::Max => rows.sort_by_key(|r| std::cmp::Reverse(r.max_ns)),
            SortKey::Name => rows.sort_by(|a, b| a.name.cmp(&b.name)),
        }
        rows
    }

    fn findings(&self) -> &[Finding] {
        self.loaded
            .as_ref()
            .map_or(&[], |l| l.analysis.findings.as_slice())
    }

    /// Moves the timeline to show `[start, end)` with context on both sides.
    pub fn show_on_timeline(&mut self, start: i64, end: i64, device: Option<i32>) {
        let len = (end - start).max(1000);
        self.view.t0 = start - len;
        self.view.t1 = end + len;
        self.view.cursor = start;
        if let (Some(d), Some(l)) = (device, &self.loaded)
            && let Some(k) = l.lanes.iter().position(|x| x.device == Some(d))
        {
            self.view.lane = k;
        }
        self.screen = Screen::Timeline;
    }

    /// Applies one action; `page` is the number of rows a page moves.
    pub fn apply(&mut self, a: Action, page: usize) {
        if self.help {
            self.help = false;
            return;
        }
        let screens = Screen::ALL.len();
        let idx = Screen::ALL
            .iter()
            .position(|&s| s == self.screen)
            .unwrap_or(0);
        match a {
            Action::Quit => self.quit = true,
            Action::Help => self.help = true,
            Action::NextScreen => self.screen = Screen::ALL[(idx + 1) % screens],
            Action::PrevScreen => self.screen = Screen::ALL[(idx + screens - 1) % screens],
            Action::Screen(k) => self.screen = Screen::ALL[k.min(screens - 1)],
            Action::Search => {
                self.typing = true;
                self.query.clear();
            }
            Action::NextMatch | Action::PrevMatch => self.next_match(a == Action::NextMatch),
            _ => match self.screen {
                Screen::Findings => self.on_findings(a, page),
                Screen::Timeline => self.on_timeline(a),
                Screen::Tables => self.on_table(a, page),
                Screen::Job => self.on_job(a, page),
                Screen::Counters => {
                    if a == Action::Toggle {
                        self.counter_gpu += 1;
                    }
                }
                Screen::Memory => {}
            },
        }
    }

    /// A mouse click at a terminal cell: the tab bar switches screens, a list row selects it.
    pub fn click(&mut self, col: u16, row: u16) {
        if row == 0 {
            // Tabs are drawn as " title │ title ...": find the tab under the column.
            let mut x = 0u16;
            for s in Screen::ALL {
                let w = s.title().chars().count() as u16 + 3;
                if col < x + w {
                    self.screen = s;
                    return;
                }
                x += w;
            }
            return;
        }
        // Lists start under the tab bar and the block's border (tables under a header too).
        match self.screen {
            Screen::Findings if row >= 2 => {
                let n = self.findings().len();
                let k = (row - 2) as usize;
                if k < n {
                    self.finding = k;
                    self.focus = Focus::List;
                }
            }
            Screen::Tables if row >= 3 => {
                let k = (row - 3) as usize;
                if k < self.table_rows().len() {
                    self.row = k;
                }
            }
            Screen::Job if row >= 3 => {
                let k = (row - 3) as usize;
                if k < self.job.as_ref().map_or(0, |j| j.1.len()) {
                    self.rank_row = k;
                }
            }
            Screen::Timeline if row >= 3 => {
                let lanes = self.loaded.as_ref().map_or(0, |l| l.lanes.len());
                let k = (row - 3) as usize;
                if k < lanes {
                    self.view.lane = k;
                }
            }
            _ => {}
        }
    }

    /// A typed character of the search query (Enter keeps it, Esc clears it).
    pub fn type_key(&mut self, c: Option<char>, enter: bool, esc: bool) {
        if esc {
            self.query.clear();
            self.typing = false;
        } else if enter {
            self.typing = false;
            // A table is filtered as the query is typed, its first row selected: Enter keeps
            // the filter and the selection.
            if self.screen != Screen::Tables {
                self.next_match(true);
            }
        } else if let Some(c) = c {
            self.query.push(c);
            self.row = 0;
        } else {
            self.query.pop();
        }
    }

    fn next_match(&mut self, forward: bool) {
        if self.query.is_empty() {
            return;
        }
        let q = self.query.to_lowercase();
        match self.screen {
            Screen::Findings => {
                let n = self.findings().len();
                let hits: Vec<usize> = (0..n)
                    .filter(|&i| self.findings()[i].title.to_lowercase().contains(&q))
                    .collect();
                if let Some(&k) = if forward {
                    hits.iter().find(|&&i| i > self.finding).or(hits.first())
                } else {
                    hits.iter()
                        .rev()
                        .find(|&&i| i < self.finding)
                        .or(hits.last())
                } {
                    self.finding = k;
                    self.message.clear();
                } else {
                    self.message = format!("no finding matches \"{}\"", self.query);
                }
            }
            // Tables filter as the query is typed; n/N walk the filtered rows.
            Screen::Tables => {
                let n = self.table_rows().len();
                if n > 0 {
                    self.row = if forward {
                        (self.row + 1) % n
                    } else {
                        (self.row + n - 1) % n
                    };
                }
            }
            _ => {}
        }
    }

    fn on_findings(&mut self, a: Action, page: usize) {
        let n = self.findings().len();
        let instances = self
            .findings()
            .get(self.finding)
            .map_or(0, |f| f.instances.len());
        match (self.focus, a) {
            (Focus::List, Action::Enter) if instances > 0 => {
                self.focus = Focus::Instances;
                self.instance = 0;
            }
            (Focus::Instances, Action::Enter) => {
                if let Some(f) = self.findings().get(self.finding)
                    && let Some(i) = f.instances.get(self.instance)
                {
                    let (s, e, d) = (i.start_ns, i.start_ns + i.dur_ns, f.device);
                    self.show_on_timeline(s, e, d);
                }
            }
            (Focus::Instances, Action::Back) => self.focus = Focus::List,
            (Focus::List, _) => self.finding = step(self.finding, n, a, page),
            (Focus::Instances, _) => self.instance = step(self.instance, instances, a, page),
        }
    }

    fn on_table(&mut self, a: Action, page: usize) {
        match a {
            Action::Sort => {
                self.sort = match self.sort {
                    SortKey::Total => SortKey::Count,
                    SortKey::Count => SortKey::Mean,
                    SortKey::Mean => SortKey::Max,
                    SortKey::Max => SortKey::Name,
                    SortKey::Name => SortKey::Total,
                };
                self.row = 0;
            }
            Action::Toggle => {
                self.operators = !self.operators;
                self.row = 0;
            }
            Action::Enter => self.full_name = !self.full_name,
            Action::Back if self.full_name => self.full_name = false,
            Action::Back => self.query.clear(),
            _ => self.row = step(self.row, self.table_rows().len(), a, page),
        }
    }

    fn on_job(&mut self, a: Action, page: usize) {
        let n = self.job.as_ref().map_or(0, |j| j.1.len());
        if a == Action::Enter {
            if let Some((_, ranks, _)) = &self.job
                && let Some(r) = ranks.get(self.rank_row)
            {
                self.message = format!("opening {}", r.source);
                self.open_rank = Some(r.source.clone());
            }
        } else {
            self.rank_row = step(self.rank_row, n, a, page);
        }
    }

    fn on_timeline(&mut self, a: Action) {
        let Some(l) = &self.loaded else { return };
        let v = &mut self.view;
        let span = (v.t1 - v.t0).max(1);
        // One column of a 100-column plot: the cursor moves by what a column shows.
        let col = (span / 100).max(1);
        let w = &l.analysis.summary.window;
        match a {
            Action::Left => v.cursor -= col,
            Action::Right => v.cursor += col,
            Action::Up => v.lane = v.lane.saturating_sub(1),
            Action::Down => v.lane = (v.lane + 1).min(l.lanes.len().saturating_sub(1)),
            Action::PanLeft => {
                v.t0 -= span / 2;
                v.t1 -= span / 2;
                v.cursor -= span / 2;
            }
            Action::PanRight => {
                v.t0 += span / 2;
                v.t1 += span / 2;
                v.cursor += span / 2;
            }
            Action::ZoomIn if span > 2_000 => {
                let c = v.cursor.clamp(v.t0, v.t1);
                let f = (c - v.t0) as f64 / span as f64;
                let new = span / 2;
                v.t0 = c - (new as f64 * f) as i64;
                v.t1 = v.t0 + new;
            }
            Action::ZoomOut => {
                let c = v.cursor.clamp(v.t0, v.t1);
                let f = (c - v.t0) as f64 / span as f64;
                let new = span.saturating_mul(2).min((w.len() * 4).max(span));
                v.t0 = c - (new as f64 * f) as i64;
                v.t1 = v.t0 + new;
            }
            Action::Fit | Action::Home if a == Action::Fit => {
                v.t0 = w.start;
                v.t1 = w.end.max(w.start + 1);
                v.cursor = v.cursor.clamp(v.t0, v.t1);
            }
            Action::Home => {
                v.cursor = w.start;
            }
            Action::End => v.cursor = w.end,
            Action::Back => self.screen = Screen::Findings,
            _ => {}
        }
        // Keep the cursor in view by panning.
        let v = &mut self.view;
        let span = (v.t1 - v.t0).max(1);
        if v.cursor < v.t0 {
            v.t0 = v.cursor;
            v.t1 = v.t0 + span;
        } else if v.cursor >= v.t1 {
            v.t1 = v.cursor + 1;
            v.t0 = v.t1 - span;
        }
    }
}

/// A list selection after a movement key.
fn step(cur: usize, n: usize, a: Action, page: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let last = n - 1;
    match a {
        Action::Up => cur.saturating_sub(1),
        Action::Down => (cur + 1).min(last),
        Action::PageUp => cur.saturating_sub(page.max(1)),
        Action::PageDown => (cur + page.max(1)).min(last),
        Action::Home => 0,
        Action::End => last,
        _ => cur.min(last),
    }
}
