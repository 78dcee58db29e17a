//! tracehound-parsers: the event model ([`model`]) and the readers, one module per input
//! format ([`formats`]).
//!
//! [`load`] reads a file, detects compression and format from its content (never from its
//! extension) and returns a [`Trace`]. The file is only ever opened for reading.

#![warn(missing_docs)]

pub mod budget;
pub mod error;
pub mod formats;
pub mod model;
pub mod timing;

pub use formats::{Input, Reader, dmon, kineto, nsys, smi_query, smi_xml};

pub use error::LoadError;
pub use model::*;

use std::io::Read;
use std::path::Path;

/// Options that change how files are read.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// UTC offset of the machine that wrote wall-clock logs (dmon `-o DT`, `--query-gpu`
    /// timestamps), seconds east of UTC. None: assume UTC and say so.
    pub utc_offset_s: Option<i64>,
    /// Bytes of the file read so far, updated while loading (for a progress bar).
    pub progress: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    /// How much memory loading may take; a file estimated to need more is refused before
    /// it is read ([`budget`]).
    pub memory_limit: budget::MemoryLimit,
}

/// A reader that counts the bytes it hands out.
struct Counting<R> {
    inner: R,
    count: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// Maps a plain file read-only, so that the Kineto parser reads its chunks where they lie
/// instead of copying the file out of the page cache; `None` when it cannot be mapped (the
/// caller then reads it).
fn map_read_only(path: &Path) -> Option<memmap2::Mmap> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: the map is read-only and private to this process, so nothing is ever written
    // to the file. Another process changing the file while it is parsed would change the
    // bytes under the parser (truncating it ends the process with SIGBUS): the same trade
    // every reader of mapped files makes, taken here for the copy it saves.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    #[cfg(unix)]
    {
        // The parsers read the file front to back: read ahead generously (a hint only).
        let _ = map.advise(memmap2::Advice::Sequential);
    }
    Some(map)
}

/// Gives back the pages that lie wholly inside `chunk`, a part of `map` already parsed, so
/// the mapped file does not add up in the process's resident memory as the parse moves on.
/// A hint: when it fails, the pages simply stay.
fn release_pages(map: &memmap2::Mmap, chunk: &[u8]) {
    #[cfg(unix)]
    {
        // A multiple of every page size in use (4 KiB to 64 KiB), so the range is aligned
        // whatever the machine's; a chunk is megabytes, so little is left resident.
        const PAGE: usize = 64 << 10;
        let base = map.as_ptr() as usize;
        let Some(start) = (chunk.as_ptr() as usize).checked_sub(base) else {
            return;
        };
        let end = start + chunk.len();
        let (from, to) = (start.div_ceil(PAGE) * PAGE, end / PAGE * PAGE);
        if to > from && to <= map.len() {
            // SAFETY: the map is a shared read-only mapping of a file that is never written
            // through it: a page dropped here is read again from the page cache, unchanged,
            // if anything touches it later (a neighbouring chunk's first or last bytes, the
            // line count of an error), so no borrow of the map sees different bytes. Only
            // private and anonymous mappings lose their contents to MADV_DONTNEED.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
            };
        }
    }
}

/// True when `data` starts with the gzip magic bytes.
pub fn is_gzip(data: &[u8]) -> bool {
    data.len() >= 2 && data[0] == 0x1f && data[1] == 0x8b
}

/// Reads a file into memory, decompressing gzip (detected by magic bytes).
/// A gzip stream that ends early yields what was decompressed, plus a warning.
pub fn read_input(path: &Path) -> Result<(Vec<u8>, Vec<String>), LoadError> {
    let name = path.display().to_string();
    let raw = std::fs::read(path).map_err(|source| LoadError::Io {
        path: name.clone(),
        source,
    })?;
    if raw.is_empty() {
        return Err(LoadError::Empty { path: name });
    }
    if !is_gzip(&raw) {
        return Ok((raw, Vec::new()));
    }
    let mut out = Vec::with_capacity(raw.len().saturating_mul(8));
    let mut dec = flate2::read::MultiGzDecoder::new(&raw[..]);
    match dec.read_to_end(&mut out) {
        Ok(_) => Ok((out, Vec::new())),
        Err(e) if !out.is_empty() && e.kind() == std::io::ErrorKind::UnexpectedEof => {
            let warning = format!(
                "gzip stream ends early: decompressed {} bytes from {} compressed bytes",
                out.len(),
                raw.len()
            );
            Ok((out, vec![warning]))
        }
        Err(e) => Err(LoadError::Gzip {
            path: name,
            msg: e.to_string(),
        }),
    }
}

/// The format of decompressed content, by the first reader in [`formats::READERS`] that
/// recognises it.
pub fn sniff(data: &[u8]) -> Option<&'static SourceFormat> {
    formats::recognise(&data[..data.len().min(4096)]).map(|r| r.format)
}

/// Formats bytes with binary units (`36.8 MiB`).
pub fn fmt_bytes(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < U.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", U[u])
    }
}

/// Refuses a file whose estimated memory exceeds the limit, before reading it.
fn check_memory(
    path: &Path,
    name: &str,
    len: u64,
    head: &[u8],
    limit: budget::MemoryLimit,
) -> Result<(), LoadError> {
    let (limit, what) = match limit {
        budget::MemoryLimit::Unlimited => return Ok(()),
        budget::MemoryLimit::Bytes(b) => (b, "the --max-memory limit is"),
        budget::MemoryLimit::Available => match budget::available() {
            Some(b) => (b, "this machine has"),
            None => return Ok(()),
        },
    };
    let e = budget::estimate(path, len, head);
    if e.need_bytes <= limit {
        return Ok(());
    }
    Err(LoadError::TooLarge {
        path: name.to_string(),
        why: format!(
            "loading it needs about {} ({} of {}) but {what} {}: capture fewer steps per file (torch.profiler.schedule(active=N), nsys --capture-range) or one rank per file, analyse it on a machine with more memory, or set the limit yourself with --max-memory (0 turns the check off)",
            fmt_bytes(e.need_bytes),
            fmt_bytes(e.input_bytes),
            if e.sqlite { "SQLite" } else { "JSON" },
            fmt_bytes(limit)
        ),
    })
}

/// Loads one trace file of any supported format with default options.
pub fn load(path: &Path) -> Result<Trace, LoadError> {
    load_with(path, LoadOptions::default())
}

/// Loads one trace file of any supported format. A file that ends before its trace does is
/// read as far as it goes: its trace carries [`LoadStats::incomplete`], and its first
/// warning says how much was read.
pub fn load_with(path: &Path, options: LoadOptions) -> Result<Trace, LoadError> {
    let mut trace = read_file(path, options)?;
    if let Some(i) = &trace.stats.incomplete {
        trace.warnings.insert(0, i.describe());
    }
    Ok(trace)
}

/// [`load_with`], before the incomplete capture's warning.
fn read_file(path: &Path, options: LoadOptions) -> Result<Trace, LoadError> {
    let name = path.display().to_string();
    let io = |source| LoadError::Io {
        path: name.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(LoadError::NotATrace {
            path: name,
            why: "a directory, not a file".into(),
        });
    }
    if !meta.is_file() {
        // A FIFO or a device would block or stream forever; traces are files.
        return Err(LoadError::NotATrace {
            path: name,
            why: "not a regular file (a FIFO, socket or device): give the trace file itself".into(),
        });
    }
    if meta.len() == 0 {
        return Err(LoadError::Empty { path: name });
    }
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut magic = [0u8; 16];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]).map_err(io)? {
            0 => break,
            k => got += k,
        }
    }
    check_memory(path, &name, meta.len(), &magic[..got], options.memory_limit)?;
    // A database is opened in place (SQLite: read-only, immutable), never read into memory.
    if let Some(r) = formats::recognise(&magic[..got])
        && let Input::Database { .. } = r.input
    {
        return open_database(path, name).map(Parsed::finish);
    }
    use std::io::Seek;
    file.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
    let gz = is_gzip(&magic[..got]);
    // Progress counts bytes of the file itself (compressed ones for gzip), and so does what
    // an incomplete capture says it read.
    let count = options.progress.clone().unwrap_or_default();
    let file: Box<dyn Read + Send> = Box::new(Counting {
        inner: file,
        count: std::sync::Arc::clone(&count),
    });
    let file_read = || count.load(std::sync::atomic::Ordering::Relaxed);
    let mut reader: Box<dyn Read + Send> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(
            std::io::BufReader::with_capacity(1 << 20, file),
        ))
    } else {
        file
    };
    // The head decides the format; Kineto traces then stream through the parallel parser.
    let mut head = Vec::with_capacity(1 << 16);
    let head_result = reader.by_ref().take(1 << 16).read_to_end(&mut head);
    let gzip_err = |e: std::io::Error| LoadError::Gzip {
        path: name.clone(),
        msg: e.to_string(),
    };
    match head_result {
        Ok(_) => {}
        Err(e) if gz && e.kind() == std::io::ErrorKind::UnexpectedEof && !head.is_empty() => {}
        Err(e) if gz => return Err(gzip_err(e)),
        Err(e) => return Err(io(e)),
    }
    if head.is_empty() {
        return Err(LoadError::Empty { path: name });
    }
    let Some(found) = formats::recognise(&head[..head.len().min(4096)]) else {
        return Err(named(
            LoadError::NotATrace {
                path: name.clone(),
                why: describe_content(&head),
            },
            &head,
        ));
    };
    let text = match found.input {
        Input::Database { .. } => {
            return gunzipped_sqlite(path, &name, head, reader, options.memory_limit);
        }
        Input::Text(text) => text,
        Input::Stream { slice, stream } => {
            if !gz && let Some(map) = map_read_only(path) {
                let progress = options.progress.as_deref();
                let release = |chunk: &[u8]| release_pages(&map, chunk);
                let t = slice(&map, &name, progress, Some(&release))
                    .map(Parsed::finish)
                    .map_err(|e| named(e, &head));
                if let Some(c) = progress {
                    c.fetch_max(map.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
                return t;
            }
            // Kept to name the file's tool if the reader refuses it.
            let head_copy = head.clone();
            let chained = Box::new(std::io::Cursor::new(head).chain(reader));
            // A reader that cut the input speculatively and then failed to parse it reads it
            // once more from the start, cutting only where it knows it may.
            let speculated = std::cell::Cell::new(false);
            let first = stream(chained, &name, Some(&speculated));
            let result = match first {
                Err(_) if speculated.get() => {
                    count.store(0, std::sync::atomic::Ordering::Relaxed);
                    let file = std::fs::File::open(path).map_err(io)?;
                    let file: Box<dyn Read + Send> = Box::new(Counting {
                        inner: file,
                        count: std::sync::Arc::clone(&count),
                    });
                    let again: Box<dyn Read + Send> = if gz {
                        Box::new(flate2::read::MultiGzDecoder::new(
                            std::io::BufReader::with_capacity(1 << 20, file),
                        ))
                    } else {
                        file
                    };
                    stream(again, &name, None)
                }
                result => result,
            };
            return match result.map(Parsed::finish).map_err(|e| named(e, &head_copy)) {
                Ok(mut t) => {
                    if let Some(i) = &mut t.stats.incomplete {
                        i.compressed = gz;
                        i.file_bytes = meta.len();
                        i.file_bytes_read = file_read().min(meta.len());
                    }
                    Ok(t)
                }
                // Where in the file the compressed data turned unreadable.
                Err(LoadError::Gzip { path, msg }) => Err(LoadError::Gzip {
                    msg: format!(
                        "{msg} (about {} of the file's {} bytes read)",
                        file_read().min(meta.len()),
                        meta.len()
                    ),
                    path,
                }),
                Err(e) => Err(e),
            };
        }
    };
    // The nvidia-smi formats are small text: read them whole.
    let mut data = head;
    let mut stream_cut = false;
    match reader.read_to_end(&mut data) {
        Ok(_) => {}
        Err(e) if gz && e.kind() == std::io::ErrorKind::UnexpectedEof => stream_cut = true,
        Err(e) if gz => return Err(gzip_err(e)),
        Err(e) => return Err(io(e)),
    }
    let mut trace = text(&data, &name, &options)?.finish();
    if stream_cut || trace.stats.incomplete.is_some() {
        trace.stats.truncated = true;
        let i = trace.stats.incomplete.get_or_insert_with(|| Incomplete {
            why: format!(
                "the gzip stream stops without its end marker after {} bytes of decompressed text",
                data.len()
            ),
            compressed: gz,
            file_bytes: 0,
            file_bytes_read: 0,
            text_bytes_complete: data.len() as u64,
            events_read: trace.stats.events_total,
        });
        i.compressed = gz;
        i.file_bytes = meta.len();
        i.file_bytes_read = file_read().min(meta.len());
    }
    Ok(trace)
}

/// Opens a database at `path` (known to the user as `name`) with the reader that owns its
/// tables: every database format shares SQLite's header, so the header cannot tell them
/// apart.
fn open_database(path: &Path, name: String) -> Result<Parsed, LoadError> {
    if let Some(why) = formats::sqlite::cut_short(path) {
        return Err(LoadError::Cut { path: name, why });
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
        | rusqlite::OpenFlags::SQLITE_OPEN_URI
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let not_a_trace = |why: String| LoadError::NotATrace {
        path: name.clone(),
        why,
    };
    let conn = rusqlite::Connection::open_with_flags(formats::sqlite::uri_path(path), flags)
        .map_err(|e| not_a_trace(format!("cannot open as SQLite: {e}")))?;
    let tables = formats::sqlite::table_names(&conn)
        .map_err(|e| not_a_trace(format!("not a readable SQLite database: {e}")))?;
    drop(conn);
    let has = |t: &str| tables.iter().any(|x| x == t);
    match formats::database_reader(&has) {
        Ok(open) => open(path, name),
        Err(why) => Err(not_a_trace(why)),
    }
}

/// A temporary file that is removed when dropped (also when parsing fails).
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A gzip-compressed Nsight Systems export (`.sqlite.gz`): SQLite reads a file in place, so
/// the database is inflated into a temporary file (the user's file is never touched), checked
/// against the memory limit at its inflated size, read, and the temporary file removed.
fn gunzipped_sqlite(
    path: &Path,
    name: &str,
    head: Vec<u8>,
    mut rest: Box<dyn Read + Send>,
    limit: budget::MemoryLimit,
) -> Result<Trace, LoadError> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = TempFile(std::env::temp_dir().join(format!(
        "tracehound-{}-{}.sqlite",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )));
    let io = |what: &str, e: std::io::Error| LoadError::Gzip {
        path: name.to_string(),
        msg: format!("{what} {}: {e}", tmp.0.display()),
    };
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp.0)
        .map_err(|e| io("creating the temporary file", e))?;
    out.write_all(&head)
        .map_err(|e| io("writing the temporary file", e))?;
    let copied = std::io::copy(&mut rest, &mut out);
    match copied {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            let inflated = std::fs::metadata(&tmp.0).map_or(0, |m| m.len());
            let of = match formats::sqlite::declared_size(&head) {
                Some(d) => format!(
                    "{inflated} bytes of the SQLite database, of the {d} its header declares ({:.1}%)",
                    100.0 * inflated as f64 / d.max(1) as f64
                ),
                None => format!("{inflated} bytes of the SQLite database"),
            };
            return Err(LoadError::Cut {
                path: name.to_string(),
                why: format!(
                    "the gzip stream stops without its end marker: the file inflates to {of}, and a database cannot be read in part (its tables' pages point past the cut): compress the whole export again"
                ),
            });
        }
        Err(e) => {
            return Err(LoadError::Gzip {
                path: name.to_string(),
                msg: e.to_string(),
            });
        }
    }
    drop(out);
    let len = std::fs::metadata(&tmp.0).map_or(0, |m| m.len());
    check_memory(path, name, len, &head[..head.len().min(16)], limit)?;
    let mut trace = open_database(&tmp.0, name.to_string())?.finish();
    trace.stats.notes.push(format!(
        "decompressed from gzip into a temporary file ({})",
        fmt_bytes(len)
    ));
    Ok(trace)
}

/// A refusal that says what the file is, when its first bytes are another tool's
/// ([`formats::foreign`]): what it holds first, then what the reader found.
fn named(e: LoadError, head: &[u8]) -> LoadError {
    match (e, formats::foreign::recognise(head)) {
        (LoadError::NotATrace { path, why }, Some(f)) => LoadError::NotATrace {
            path,
            why: format!("{}, holding {} ({why})", f.what, f.holds),
        },
        (e, _) => e,
    }
}

fn describe_content(data: &[u8]) -> String {
    let text = data
        .iter()
        .take(512)
        .filter(|b| **b == 0 || (**b < 0x20 && !b" \t\r\n".contains(b)))
        .count();
    if text > 0 {
        return "binary data, not JSON".into();
    }
    let first_line: String = String::from_utf8_lossy(&data[..data.len().min(60)])
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    format!("text that is not JSON (starts with {first_line:?})")
}
