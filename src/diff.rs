//! `tracehound diff BEFORE AFTER`: what changed between two captures of the same job.
//! Findings are matched by their stable id (resolved, new, changed with the impact delta);
//! step time comes from the step markers' own spans; busy and idle time with their measured
//! causes, top kernels and operators by delta, and memory peaks. Directories of rank traces
//! are compared rank by rank (files of the same name).

use crate::pipeline::{Error, Options, Result as PResult};
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::Path;
use tracehound_heuristics::finding::{fmt_bytes, fmt_ns};
use tracehound_heuristics::job::median_step_ns;
use tracehound_heuristics::{Analysis, Finding};
use tracehound_parsers::Trace;

/// Output formats.
#[derive(Clone, Copy)]
pub enum Format {
    Text,
    Markdown,
    Json,
    Html,
}

/// A number before and after.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub before: f64,
    pub after: f64,
    /// (after - before) / before, in percent; 0 when before is 0.
    pub change_pct: f64,
}

impl Change {
    fn new(before: f64, after: f64) -> Self {
        Change {
            before,
            after,
            change_pct: if before.abs() > 0.0 {
                100.0 * (after - before) / before.abs()
            } else {
                0.0
            },
        }
    }
}

/// What became of a finding from one capture to the other. Serialized, and printed, in
/// lowercase (`resolved`); the order is the report's (resolved first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// In the first capture only.
    Resolved,
    /// In the second capture only.
    New,
    /// In both (its impact may have changed).
    Changed,
}

impl Status {
    /// The lowercase name (`resolved`).
    pub fn label(self) -> &'static str {
        match self {
            Status::Resolved => "resolved",
            Status::New => "new",
            Status::Changed => "changed",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.label())
    }
}

/// A finding in one capture and not the other, or in both.
#[derive(Debug, Clone, Serialize)]
pub struct FindingChange {
    pub id: String,
    pub rule: &'static str,
    pub status: Status,
    pub title_before: Option<String>,
    pub title_after: Option<String>,
    pub severity_before: Option<String>,
    pub severity_after: Option<String>,
    pub impact_ns: Change,
}

/// A named time before and after (kernel, operator, idle cause).
#[derive(Debug, Clone, Serialize)]
pub struct NamedChange {
    pub name: String,
    pub before_ns: i64,
    pub after_ns: i64,
    pub delta_ns: i64,
}

/// The comparison of two captures.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub before: String,
    pub after: String,
    /// Median step time from the step markers, ns, when both captures mark steps.
    pub step_ns: Option<Change>,
    pub busy_share: Change,
    pub idle_gap_ns: Change,
    pub idle_causes: Vec<NamedChange>,
    pub findings: Vec<FindingChange>,
    pub kernels: Vec<NamedChange>,
    pub operators: Vec<NamedChange>,
    pub reserved_peak: Option<Change>,
    pub allocated_peak: Option<Change>,
}

fn idle_gap_ns(a: &Analysis) -> i64 {
    a.idle.iter().map(|d| d.gap_ns()).sum()
}

/// Per name totals of two tables, the ten largest changes.
fn by_delta(
    before: &[tracehound_heuristics::tables::TimeRow],
    after: &[tracehound_heuristics::tables::TimeRow],
) -> Vec<NamedChange> {
    use std::collections::BTreeMap;
    let mut m: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for r in before {
        m.entry(&r.name).or_default().0 += r.total_ns;
    }
    for r in after {
        m.entry(&r.name).or_default().1 += r.total_ns;
    }
    let mut v: Vec<NamedChange> = m
        .into_iter()
        .map(|(n, (b, a))| NamedChange {
            name: n.to_string(),
            before_ns: b,
            after_ns: a,
            delta_ns: a - b,
        })
        .collect();
    v.sort_by(|x, y| {
        y.delta_ns
            .abs()
            .cmp(&x.delta_ns.abs())
            .then(x.name.cmp(&y.name))
    });
    v.truncate(10);
    v
}

fn peak(
    a: &Analysis,
    f: impl Fn(&tracehound_heuristics::summary::DeviceSummary) -> Option<i64>,
) -> Option<i64> {
    a.summary.devices.iter().filter_map(f).max()
}

/// Compares two analysed captures.
pub fn compare(tb: &Trace, ab: &Analysis, ta: &Trace, aa: &Analysis) -> Diff {
    let busy = |a: &Analysis| {
        a.summary
            .devices
            .iter()
            .map(|d| d.busy_share)
            .fold(0.0, f64::max)
    };
    let causes = |a: &Analysis| {
        let mut m: std::collections::BTreeMap<&'static str, i64> = Default::default();
        for d in &a.idle {
            for (k, ns) in d.by_kind() {
                *m.entry(k.label()).or_default() += ns;
            }
        }
        m
    };
    let (cb, ca) = (causes(ab), causes(aa));
    let mut idle_causes: Vec<NamedChange> = cb
        .keys()
        .chain(ca.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|k| {
            let (b, a) = (
                cb.get(k).copied().unwrap_or(0),
                ca.get(k).copied().unwrap_or(0),
            );
            NamedChange {
                name: k.to_string(),
                before_ns: b,
                after_ns: a,
                delta_ns: a - b,
            }
        })
        .collect();
    idle_causes.sort_by(|x, y| {
        y.delta_ns
            .abs()
            .cmp(&x.delta_ns.abs())
            .then(x.name.cmp(&y.name))
    });
    let mut findings: Vec<FindingChange> = Vec::new();
    let find = |fs: &[Finding], id: &str| fs.iter().find(|f| f.id == id).cloned();
    let mut ids: Vec<&str> = ab
        .findings
        .iter()
        .chain(aa.findings.iter())
        .map(|f| f.id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        let (b, a) = (find(&ab.findings, id), find(&aa.findings, id));
        let rule = b.as_ref().or(a.as_ref()).map_or("", |f| f.rule);
        findings.push(FindingChange {
            id: id.to_string(),
            rule,
            status: match (&b, &a) {
                (Some(_), None) => Status::Resolved,
                (None, Some(_)) => Status::New,
                _ => Status::Changed,
            },
            title_before: b.as_ref().map(|f| f.title.clone()),
            title_after: a.as_ref().map(|f| f.title.clone()),
            severity_before: b.as_ref().map(|f| f.severity.label().to_string()),
            severity_after: a.as_ref().map(|f| f.severity.label().to_string()),
            impact_ns: Change::new(
                b.as_ref().map_or(0.0, |f| f.impact_ns as f64),
                a.as_ref().map_or(0.0, |f| f.impact_ns as f64),
            ),
        });
    }
    findings.sort_by(|x, y| x.status.cmp(&y.status).then(x.id.cmp(&y.id)));
    let (wb, wa) = (&ab.summary.window, &aa.summary.window);
    let tables = tracehound_heuristics::tables::kernel_summary;
    let ops = tracehound_heuristics::tables::operator_summary;
    let change = |b: Option<i64>, a: Option<i64>| match (b, a) {
        (Some(b), Some(a)) => Some(Change::new(b as f64, a as f64)),
        _ => None,
    };
    Diff {
        before: tb.source.clone(),
        after: ta.source.clone(),
        step_ns: match (median_step_ns(tb), median_step_ns(ta)) {
            (Some(b), Some(a)) => Some(Change::new(b as f64, a as f64)),
            _ => None,
        },
        busy_share: Change::new(busy(ab), busy(aa)),
        idle_gap_ns: Change::new(idle_gap_ns(ab) as f64, idle_gap_ns(aa) as f64),
        idle_causes,
        findings,
        kernels: by_delta(&tables(tb, Some(wb)), &tables(ta, Some(wa))),
        operators: by_delta(&ops(tb, Some(wb)), &ops(ta, Some(wa))),
        reserved_peak: change(peak(ab, |d| d.reserved_peak), peak(aa, |d| d.reserved_peak)),
        allocated_peak: change(
            peak(ab, |d| d.allocated_peak),
            peak(aa, |d| d.allocated_peak),
        ),
    }
}

/// The regression the CI gate looks at: step time when both captures mark steps, else idle
/// time, in percent.
pub fn regression_pct(d: &Diff) -> (&'static str, f64) {
    match &d.step_ns {
        Some(c) => ("step time", c.change_pct),
        None => ("idle time", d.idle_gap_ns.change_pct),
    }
}

fn pct(c: &Change) -> String {
    format!("{:+.1}%", c.change_pct)
}

/// The diff as plain text (`html` false) or Markdown.
pub fn text(d: &Diff, markdown: bool) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let h = |s: &mut String, t: &str| {
        if markdown {
            let _ = writeln!(s, "\n## {t}\n");
        } else {
            let _ = writeln!(s, "\n  {t}");
        }
    };
    if markdown {
        let _ = writeln!(
            s,
            "# tracehound diff\n\nbefore: `{}`  \nafter: `{}`",
            d.before, d.after
        );
    } else {
        let _ = writeln!(s, "before: {}\nafter:  {}", d.before, d.after);
    }
    h(&mut s, "Time");
    let line = |s: &mut String, what: &str, b: String, a: String, p: String| {
        if markdown {
            let _ = writeln!(s, "| {what} | {b} | {a} | {p} |");
        } else {
            let _ = writeln!(s, "    {what:<36} {b:>12} -> {a:>12}  {p}");
        }
    };
    if markdown {
        let _ = writeln!(s, "| | before | after | change |\n|---|---:|---:|---:|");
    }
    if let Some(c) = &d.step_ns {
        line(
            &mut s,
            "median step",
            fmt_ns(c.before as i64),
            fmt_ns(c.after as i64),
            pct(c),
        );
    }
    line(
        &mut s,
        "GPU busy",
        format!("{:.1}%", 100.0 * d.busy_share.before),
        format!("{:.1}%", 100.0 * d.busy_share.after),
        format!(
            "{:+.1} points",
            100.0 * (d.busy_share.after - d.busy_share.before)
        ),
    );
    line(
        &mut s,
        "idle in gaps",
        fmt_ns(d.idle_gap_ns.before as i64),
        fmt_ns(d.idle_gap_ns.after as i64),
        pct(&d.idle_gap_ns),
    );
    for c in d.idle_causes.iter().take(6) {
        line(
            &mut s,
            &format!("  idle: {}", c.name),
            fmt_ns(c.before_ns),
            fmt_ns(c.after_ns),
            fmt_ns(c.delta_ns),
        );
    }
    for (what, c) in [
        ("reserved peak", &d.reserved_peak),
        ("allocated peak", &d.allocated_peak),
    ] {
        if let Some(c) = c {
            line(
                &mut s,
                what,
                fmt_bytes(c.before as u64),
                fmt_bytes(c.after as u64),
                pct(c),
            );
        }
    }
    h(&mut s, "Findings");
    if d.findings.is_empty() {
        let _ = writeln!(s, "    none in either capture");
    }
    for f in &d.findings {
        let title = f
            .title_after
            .as_ref()
            .or(f.title_before.as_ref())
            .cloned()
            .unwrap_or_default();
        let impact = format!(
            "{} -> {}",
            fmt_ns(f.impact_ns.before as i64),
            fmt_ns(f.impact_ns.after as i64)
        );
        if markdown {
            let _ = writeln!(s, "- **{}** `{}` ({impact}): {title}", f.status, f.id);
        } else {
            let _ = writeln!(s, "    {:<9} {:<32} {impact:<24} {title}", f.status, f.id);
        }
    }
    for (t, rows) in [
        ("Kernels by change", &d.kernels),
        ("Operators by change", &d.operators),
    ] {
        h(&mut s, t);
        for r in rows {
            let name = tracehound_heuristics::summary::short_kernel(&r.name);
            if markdown {
                let _ = writeln!(
                    s,
                    "- `{name}`: {} -> {} ({})",
                    fmt_ns(r.before_ns),
                    fmt_ns(r.after_ns),
                    fmt_ns(r.delta_ns)
                );
            } else {
                let _ = writeln!(
                    s,
                    "    {:>10} -> {:>10} ({:>10})  {name}",
                    fmt_ns(r.before_ns),
                    fmt_ns(r.after_ns),
                    fmt_ns(r.delta_ns)
                );
            }
        }
    }
    s
}

fn html(d: &Diff) -> String {
    let md = text(d, false);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>tracehound diff</title><style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:0 auto;padding:12px}}pre{{white-space:pre-wrap;font-size:.9em}}</style></head><body><h1>tracehound diff</h1><pre>{}</pre></body></html>\n",
        crate::report::esc_html(&md)
    )
}

fn load(path: &Path, opts: &Options) -> PResult<(Trace, Analysis)> {
    let t = tracehound_parsers::load_with(path, opts.load_options()?)
        .map_err(|e| Error::Input(vec![e.to_string()]))?;
    let a = tracehound_heuristics::analyze(&t, &opts.config(Some(&t))?);
    Ok((t, a))
}

/// Pairs of files to compare: the two files, or the files of the same name in two
/// directories (a job rank by rank).
fn pairs(before: &Path, after: &Path) -> Result<Vec<(std::path::PathBuf, std::path::PathBuf)>> {
    if before.is_dir() && after.is_dir() {
        let mut names: Vec<_> = std::fs::read_dir(before)
            .with_context(|| format!("reading {}", before.display()))?
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .filter(|n| after.join(n).is_file() && before.join(n).is_file())
            .collect();
        names.sort();
        Ok(names
            .into_iter()
            .map(|n| (before.join(&n), after.join(&n)))
            .collect())
    } else {
        Ok(vec![(before.to_path_buf(), after.to_path_buf())])
    }
}

/// Runs `tracehound diff`.
pub fn run(
    before: &Path,
    after: &Path,
    format: Format,
    fail_on_regression: Option<f64>,
    opts: &Options,
) -> PResult<i32> {
    use std::io::Write;
    let pairs = pairs(before, after)?;
    if pairs.is_empty() {
        return Err(Error::Input(vec![format!(
            "{} and {}: no files of the same name to compare",
            before.display(),
            after.display()
        )]));
    }
    let mut diffs = Vec::new();
    for (b, a) in pairs {
        let (tb, ab) = load(&b, opts)?;
        let (ta, aa) = load(&a, opts)?;
        diffs.push(compare(&tb, &ab, &ta, &aa));
    }
    let out = match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&serde_json::json!({
                "schema_version": crate::report::JSON_SCHEMA_VERSION,
                "tool": "tracehound",
                "diffs": diffs,
            }))
            .context("writing the diff")?;
            s.push('\n');
            s
        }
        Format::Text => diffs
            .iter()
            .map(|d| text(d, false))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Markdown => diffs
            .iter()
            .map(|d| text(d, true))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Html => diffs.iter().map(html).collect::<Vec<_>>().join("\n"),
    };
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .context("writing the diff")?;
    if let Some(limit) = fail_on_regression {
        for d in &diffs {
            let (what, p) = regression_pct(d);
            if p > limit {
                eprintln!(
                    "tracehound: {what} got worse by {p:.1}% (more than {limit}%): {} -> {}",
                    d.before, d.after
                );
                return Ok(1);
            }
        }
    }
    Ok(0)
}
