//! tracehound as a library: the command line, the reports and the model's tables, shared by
//! the `tracehound` binary and the Python package (`python/`), so both print the same
//! documents from the same code.

pub mod cli;
pub mod pipeline;
pub mod report;
// The benchmark generator behind `tracehound-dev scale` (xtask/) and the tests' generated
// jobs, not part of the user's interface.
#[doc(hidden)]
pub mod scale;
#[cfg(feature = "sql")]
pub mod sql;
pub mod tables;
#[cfg(feature = "tui")]
pub mod tui;
