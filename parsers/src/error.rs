//! Typed load errors. Every variant names the file and says what is wrong.

use thiserror::Error;

/// Why a file could not be loaded.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The file could not be opened or read.
    #[error("{path}: cannot read the file: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file has no bytes.
    #[error("{path}: the file is empty")]
    Empty {
        /// The file.
        path: String,
    },
    /// The file starts like gzip but does not decompress.
    #[error("{path}: corrupt gzip data: {msg}")]
    Gzip {
        /// The file.
        path: String,
        /// What the decoder said.
        msg: String,
    },
    /// The file would need more memory than allowed; refused before reading it.
    #[error("{path}: too large for the memory available: {why}")]
    TooLarge {
        /// The file.
        path: String,
        /// What it needs, what there is, and what to do.
        why: String,
    },
    /// The content is not a format tracehound reads.
    #[error("{path}: not a trace tracehound can read: {why}")]
    NotATrace {
        /// The file.
        path: String,
        /// What was found instead.
        why: String,
    },
    /// The JSON is malformed before its end.
    #[error("{path}: invalid JSON at line {line}, column {column}: {msg}")]
    Json {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the JSON reader expected.
        msg: String,
    },
    /// The file ends before its content does, in a format that cannot be read in part (a
    /// SQLite database cut short: its tables' pages point past the cut).
    #[error("{path}: incomplete capture: {why}")]
    Cut {
        /// The file.
        path: String,
        /// How much of it is there, and why that cannot be read.
        why: String,
    },
}
