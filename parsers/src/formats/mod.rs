//! The readers, one module (or folder) per input format, and [`READERS`], the one list of
//! them. A reader declares its format ([`SourceFormat`]: id, name, what it records, where its
//! clock starts), how to recognise it from a file's first bytes and how it takes its input;
//! it imports no other reader. What two readers share is a helper module here
//! ([`counter_log`], [`sqlite`]), not a reader; [`foreign`] names the files of other tools
//! that no reader takes.

pub mod counter_log;
pub mod dmon;
pub mod foreign;
pub mod kineto;
pub mod nsys;
pub mod rpd;
pub mod smi_query;
pub mod smi_xml;
pub mod sqlite;

use crate::error::LoadError;
use crate::model::{Parsed, SourceFormat};
use std::path::Path;

/// Every reader, in the order their recognisers are asked: the exact signatures (SQLite's
/// header, XML's declaration) before the loose ones (a JSON brace, a `#` line). The database
/// readers share SQLite's header and are told apart by their tables ([`database_reader`]),
/// so their place in the list does not matter.
pub static READERS: &[&Reader] = &[
    &nsys::READER,
    &smi_xml::READER,
    &kineto::READER,
    &dmon::READER,
    &smi_query::READER,
    &rpd::READER,
];

/// One input format's reader. Its functions hand over a [`Parsed`] trace, which `load`
/// finishes.
pub struct Reader {
    /// What the format is, as the rest of the tool sees it.
    pub format: &'static SourceFormat,
    /// Whether a file's first bytes (decompressed) are this format: `Some(true)` yes,
    /// `Some(false)` no, `None` when that much cannot tell.
    pub is_applicable: fn(&[u8]) -> Option<bool>,
    /// How it takes its input.
    pub input: Input,
}

/// Called with each chunk of an input held in memory once it is parsed, so that a mapped
/// file's pages can be given back as the parse moves on.
pub type Release<'d> = &'d (dyn Fn(&[u8]) + Sync);

/// Reads a whole input held in memory: the bytes, the name, the progress counter raised as
/// chunks are handed out, the page release.
pub type ReadSlice = for<'d> fn(
    &'d [u8],
    &str,
    Option<&'d std::sync::atomic::AtomicU64>,
    Option<Release<'d>>,
) -> Result<Parsed, LoadError>;

/// Reads an input as it is decompressed (see [`Input::Stream`]).
pub type ReadStream = fn(
    Box<dyn std::io::Read + Send>,
    &str,
    Option<&std::cell::Cell<bool>>,
) -> Result<Parsed, LoadError>;

/// How a reader takes its input: the three ways differ in what `load` must prepare.
pub enum Input {
    /// A database opened in place by path (a compressed one is inflated to a temporary file
    /// first). Every database reader recognises the same SQLite header, so the tables decide
    /// whose a database is.
    Database {
        /// Whether a database with these tables (asked by name) is this format's.
        owns: Owns,
        /// What it looks for, for the message when no reader owns a database.
        wants: &'static str,
        /// Opens it: the path, and the name to show for it.
        open: OpenDatabase,
    },
    /// Streamed: a plain file mapped and read where it lies (`slice`: the bytes, the name,
    /// the progress counter raised as chunks are handed out, the page release), a compressed
    /// one read through (`stream`: the reader, the name).
    Stream {
        /// A whole input held in memory.
        slice: ReadSlice,
        /// An input read as it is decompressed. With a flag given, a reader may cut the
        /// input where it only probably may be cut, and sets the flag when it did: the
        /// caller then reads the input again without a flag if it fails to parse.
        stream: ReadStream,
    },
    /// Small text read whole: the bytes, the name, the options that change how it is read
    /// (the UTC offset of wall-clock logs).
    Text(fn(&[u8], &str, &crate::LoadOptions) -> Result<Parsed, LoadError>),
}

/// Whether a database with the tables a closure answers for (asked by name) is a format's.
pub type Owns = fn(&dyn Fn(&str) -> bool) -> bool;

/// Opens a database at a path, known to the user by a name.
pub type OpenDatabase = fn(&Path, String) -> Result<Parsed, LoadError>;

/// The opener of the database reader that owns a database with these tables (asked by
/// name), or why none does.
pub fn database_reader(has: &dyn Fn(&str) -> bool) -> Result<OpenDatabase, String> {
    let mut wanted = Vec::new();
    for r in READERS {
        if let Input::Database { owns, wants, open } = r.input {
            if owns(has) {
                return Ok(open);
            }
            wanted.push(wants);
        }
    }
    Err(format!(
        "an SQLite database, but none tracehound reads: not {}",
        wanted.join(", not ")
    ))
}

/// The reader whose recogniser says yes to `head`, asked in [`READERS`] order.
pub fn recognise(head: &[u8]) -> Option<&'static Reader> {
    READERS
        .iter()
        .copied()
        .find(|r| (r.is_applicable)(head) == Some(true))
}
