//! Memory needed to load a file, estimated before reading it, against what the machine has.
//!
//! The event model takes about 0.21-0.26 of the JSON's size on traces of 0.5-10 GB (README,
//! Performance; 0.54 on a 121 MB trace, whose fixed costs weigh more), and Nsight Systems
//! exports about 2.5 times the SQLite file (rows become events with their strings). The
//! estimate adds a margin to both (0.30 of the JSON, 3 times the SQLite, plus 64 MiB), so a
//! file refused would really not fit, and one accepted does: a 100 GB trace on a 24 GB
//! machine is refused up front instead of being killed by the OOM killer halfway through.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Fixed memory of a run besides the model (binary, buffers, thread stacks), bytes.
const BASE: u64 = 64 << 20;
/// Model bytes per byte of Kineto JSON (measured 0.21-0.26 above 0.5 GB).
const JSON_RATIO: f64 = 0.30;
/// Model bytes per byte of an Nsight Systems SQLite export (measured about 2.5).
const SQLITE_RATIO: f64 = 3.0;
/// Assumed decompression ratio of gzip JSON when its trailer cannot tell (traces compress
/// 8-15x; the trailer holds the size modulo 4 GiB, and only of the last member).
const GZIP_RATIO: u64 = 8;

/// How much memory loading may take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MemoryLimit {
    /// What the machine has available now (`MemAvailable`, within the cgroup's limit).
    #[default]
    Available,
    /// At most this many bytes.
    Bytes(u64),
    /// No check.
    Unlimited,
}

/// What loading a file is expected to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Bytes of trace data (decompressed JSON, or the SQLite file).
    pub input_bytes: u64,
    /// Memory needed, bytes.
    pub need_bytes: u64,
    /// Whether the input is an SQLite export.
    pub sqlite: bool,
}

/// Estimates the memory loading `path` takes, from its size, its first bytes and, for gzip,
/// the size its trailer records.
pub fn estimate(path: &Path, len: u64, head: &[u8]) -> Estimate {
    let sqlite = head.starts_with(b"SQLite format 3\0");
    let input_bytes = if sqlite {
        len
    } else if crate::is_gzip(head) {
        let floor = len.saturating_mul(GZIP_RATIO);
        match gzip_trailer_size(path, len) {
            // The trailer is exact below 4 GiB for one member; never trust it below the
            // floor (a multi-member file records only its last member).
            Some(isize) => isize.max(floor),
            None => floor,
        }
    } else {
        len
    };
    let ratio = if sqlite { SQLITE_RATIO } else { JSON_RATIO };
    Estimate {
        input_bytes,
        need_bytes: BASE + (input_bytes as f64 * ratio) as u64,
        sqlite,
    }
}

/// The uncompressed size a gzip file's trailer records (ISIZE, modulo 4 GiB).
fn gzip_trailer_size(path: &Path, len: u64) -> Option<u64> {
    if len < 18 {
        return None;
    }
    let mut f = std::fs::File::open(path).ok()?;
    f.seek(SeekFrom::End(-4)).ok()?;
    let mut b = [0u8; 4];
    f.read_exact(&mut b).ok()?;
    Some(u64::from(u32::from_le_bytes(b)))
}

/// Memory available to this process now, bytes: `MemAvailable`, lowered to the room left
/// under the cgroup's limit when there is one. `None` where the system does not say.
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let avail = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())?
        * 1024;
    let cgroup = || -> Option<u64> {
        let max = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok()?;
        let max: u64 = max.trim().parse().ok()?; // "max": no limit
        let cur: u64 = std::fs::read_to_string("/sys/fs/cgroup/memory.current")
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(max.saturating_sub(cur))
    };
    Some(cgroup().map_or(avail, |c| c.min(avail)))
}

/// Parses a size as people write it: `64G`, `512M`, `1.5T`, `2048` (bytes), `0` (no limit).
pub fn parse_size(s: &str) -> Option<MemoryLimit> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| c.is_ascii_alphabetic())
        .map_or((s, ""), |k| (&s[..k], &s[k..]));
    let v: f64 = num.trim().parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    let mult: f64 = match unit
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = (v * mult) as u64;
    Some(if bytes == 0 {
        MemoryLimit::Unlimited
    } else {
        MemoryLimit::Bytes(bytes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64G"), Some(MemoryLimit::Bytes(64 << 30)));
        assert_eq!(parse_size("512MiB"), Some(MemoryLimit::Bytes(512 << 20)));
        assert_eq!(parse_size("1.5g"), Some(MemoryLimit::Bytes(3 << 29)));
        assert_eq!(parse_size("0"), Some(MemoryLimit::Unlimited));
        assert_eq!(parse_size("2048"), Some(MemoryLimit::Bytes(2048)));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("-3G"), None);
    }

    #[test]
    fn the_machine_says_what_it_has() {
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(available().is_some_and(|b| b > 0));
        }
    }
}
