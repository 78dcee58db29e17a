//! What every reader of a SQLite database needs: the header's signature, the size the header
//! declares (to tell a database cut short, copied while still being written, from a whole
//! one), a read-only URI and the table names that tell whose a database is. A helper of the
//! database readers, not a reader itself.

use std::path::Path;

/// The first bytes of every SQLite database file.
pub const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// Does `head` start like an SQLite database? (Whose it is, the tables decide:
/// `formats::database_reader`.)
pub fn is_sqlite(head: &[u8]) -> Option<bool> {
    if head.len() < SQLITE_MAGIC.len() {
        return None;
    }
    Some(head.starts_with(SQLITE_MAGIC))
}

/// The URI that opens `path` read-only and immutable, with the characters that have a
/// meaning in an SQLite URI percent-encoded.
pub fn uri_path(path: &Path) -> String {
    let mut s = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '?' | '#' | '%' => s.push_str(&format!("%{:02X}", c as u32)),
            _ => s.push(c),
        }
    }
    s.push_str("?mode=ro&immutable=1");
    s
}

/// The names of a database's tables.
pub fn table_names(conn: &rusqlite::Connection) -> Result<Vec<String>, rusqlite::Error> {
    let mut st = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let names = st
        .query_map([], |r| r.get::<_, String>(0))?
        .filter_map(Result::ok)
        .collect();
    Ok(names)
}

/// The size in bytes a SQLite database's header declares (page size times pages), when the
/// header says it (the page count is valid only where the change counter matches the
/// version-valid-for number, as SQLite itself checks).
pub fn declared_size(header: &[u8]) -> Option<u64> {
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(header.get(at..at + 4)?.try_into().ok()?))
    };
    let page = match u16::from_be_bytes(header.get(16..18)?.try_into().ok()?) {
        1 => 65_536,
        p => u64::from(p),
    };
    let pages = be32(28)?;
    (pages > 0 && be32(24)? == be32(92)? && page >= 512).then(|| page * u64::from(pages))
}

/// Why a database file cannot be read in full: it is shorter than its header declares.
pub fn cut_short(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut header = [0u8; 100];
    let mut f = std::fs::File::open(path).ok()?;
    f.read_exact(&mut header).ok()?;
    let declared = declared_size(&header)?;
    let len = f.metadata().ok()?.len();
    (len < declared).then(|| {
        format!(
            "the SQLite database is cut short: the file holds {len} of the {declared} bytes its header declares ({:.1}%), as when an export is copied while nsys still writes it; a database cannot be read in part (its tables' pages point past the cut): export it again (nsys export --type sqlite)",
            100.0 * len as f64 / declared as f64
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_escapes() {
        assert_eq!(
            uri_path(Path::new("/a b/c?#%.sqlite")),
            "file:/a b/c%3F%23%25.sqlite?mode=ro&immutable=1"
        );
    }
}
