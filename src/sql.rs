//! `tracehound sql` and `tracehound export` (the cargo feature `sql`): the model's tables as
//! polars frames, queried with polars SQL or written as Parquet or CSV.

use crate::tables::{Data, NAMES, Source, Table, build, named_in};
use anyhow::{Context, Result, anyhow};
use polars::prelude::*;
use std::io::Write;
use std::path::Path;

/// A table as a polars frame.
fn frame(t: Table) -> Result<DataFrame> {
    let cols: Vec<Column> = t
        .columns
        .into_iter()
        .map(|(name, d)| {
            let name: PlSmallStr = name.into();
            match d {
                Data::I64(v) => Column::new(name, v),
                Data::F64(v) => Column::new(name, v),
                Data::Str(v) => Column::new(name, v),
                Data::Owned(v) => Column::new(name, v),
                Data::Bool(v) => Column::new(name, v),
            }
        })
        .collect();
    DataFrame::new_infer_height(cols).map_err(|e| anyhow!("building table {}: {e}", t.name))
}

/// Makes polars print every row and the full width of a result (the user asked for exactly
/// that result). polars reads these from the environment.
///
/// # Safety
/// Call before any other thread starts: setting the environment races with threads that
/// read it.
pub unsafe fn show_whole_results() {
    unsafe {
        std::env::set_var("POLARS_FMT_MAX_ROWS", "-1");
        std::env::set_var("POLARS_FMT_MAX_COLS", "-1");
        std::env::set_var("POLARS_FMT_STR_LEN", "120");
        std::env::set_var("POLARS_FMT_TABLE_WIDTH", "200");
    }
}

/// How query results are printed.
#[derive(Clone, Copy)]
pub enum Output {
    Table,
    Csv,
    Json,
}

/// Runs a query over the tables it names; prints the result.
pub fn query(sources: &[Source], q: &str, out: Output) -> Result<i32> {
    let names = named_in(q);
    if names.is_empty() {
        anyhow::bail!("the query names none of the tables: {}", NAMES.join(", "));
    }
    let mut ctx = polars::sql::SQLContext::new();
    for n in names {
        if let Some(t) = build(n, sources) {
            ctx.register(n, frame(t)?.lazy());
        }
    }
    let mut df = match ctx.execute(q).and_then(|lf| lf.collect()) {
        Ok(df) => df,
        Err(e) => anyhow::bail!("the query failed: {e}"),
    };
    let mut stdout = std::io::stdout().lock();
    match out {
        Output::Table => {
            writeln!(stdout, "{df}").context("writing the result")?;
        }
        Output::Csv => {
            // Into memory first, so that a closed pipe (`| head`) stays an I/O error, which
            // the CLI treats as the reader having had enough.
            let mut buf = Vec::new();
            CsvWriter::new(&mut buf)
                .finish(&mut df)
                .map_err(|e| anyhow!("writing CSV: {e}"))?;
            stdout.write_all(&buf).context("writing CSV")?;
        }
        Output::Json => {
            let rows = json_rows(&df);
            serde_json::to_writer_pretty(&mut stdout, &rows).context("writing JSON")?;
            writeln!(stdout).context("writing the result")?;
        }
    }
    Ok(0)
}

/// A frame as a list of JSON objects, one per row.
fn json_rows(df: &DataFrame) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let cols = df.columns();
    (0..df.height())
        .map(|i| {
            cols.iter()
                .map(|c| {
                    let v = match c.get(i) {
                        Ok(AnyValue::Null) | Err(_) => serde_json::Value::Null,
                        Ok(AnyValue::Boolean(b)) => b.into(),
                        Ok(AnyValue::String(s)) => s.into(),
                        Ok(AnyValue::StringOwned(s)) => s.to_string().into(),
                        Ok(AnyValue::Int64(x)) => x.into(),
                        Ok(AnyValue::Int32(x)) => x.into(),
                        Ok(AnyValue::UInt32(x)) => x.into(),
                        Ok(AnyValue::UInt64(x)) => x.into(),
                        Ok(AnyValue::Float64(x)) => x.into(),
                        Ok(AnyValue::Float32(x)) => (x as f64).into(),
                        Ok(other) => other.to_string().into(),
                    };
                    (c.name().to_string(), v)
                })
                .collect()
        })
        .collect()
}

/// Writes every table into `dir` as Parquet or CSV (`tables.parquet` / `tables.csv`).
pub fn export(sources: &[Source], dir: &Path, parquet: bool) -> Result<i32> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for n in NAMES {
        let Some(t) = build(n, sources) else { continue };
        let mut df = frame(t)?;
        let path = dir.join(format!("{n}.{}", if parquet { "parquet" } else { "csv" }));
        let tmp = dir.join(format!(".{n}.tmp-{}", std::process::id()));
        let mut f =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let written = if parquet {
            ParquetWriter::new(&mut f).finish(&mut df).map(|_| ())
        } else {
            CsvWriter::new(&mut f).finish(&mut df)
        };
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(anyhow!("writing {}: {e}", path.display()));
        }
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "tracehound: wrote {} ({} rows)",
            path.display(),
            df.height()
        );
    }
    Ok(0)
}
