//! Wall-clock parsing shared by the nvidia-smi text formats.

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix epoch ns of a local date and time written at `utc_offset_s` east of UTC.
pub fn epoch_ns(
    y: i64,
    mo: i64,
    d: i64,
    h: i64,
    mi: i64,
    s: f64,
    utc_offset_s: i64,
) -> Option<i64> {
    if !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || !(0..24).contains(&h)
        || !(0..60).contains(&mi)
        || !(0.0..61.0).contains(&s)
    {
        return None;
    }
    // A damaged file can hold any year: one off the ns timeline (it ends in 2262) is no time.
    if !(0..=9999).contains(&y) {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3_600 + mi * 60 - utc_offset_s.clamp(-86_400, 86_400);
    secs.checked_mul(1_000_000_000)?
        .checked_add((s * 1e9).round() as i64)
}

/// Parses `HH:MM:SS[.fff]` into (h, m, s).
pub fn parse_hms(t: &str) -> Option<(i64, i64, f64)> {
    let mut it = t.split(':');
    let h = it.next()?.parse().ok()?;
    let m = it.next()?.parse().ok()?;
    let s = it.next()?.parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Some((h, m, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_year_off_the_timeline_is_no_time() {
        // Nanoseconds since 1970 in an i64 end in April 2262: a later year (a flipped digit
        // in a damaged log) is no time, not an overflow.
        assert!(epoch_ns(2262, 1, 1, 0, 0, 0.0, 0).is_some());
        assert!(epoch_ns(9999, 12, 31, 23, 59, 59.0, 0).is_none());
        assert_eq!(epoch_ns(99_999, 1, 1, 0, 0, 0.0, 0), None);
        assert_eq!(epoch_ns(-5, 1, 1, 0, 0, 0.0, 0), None);
    }

    #[test]
    fn epoch() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        // 2026-11-29 16:35:32 UTC
        assert_eq!(
            epoch_ns(2026, 11, 29, 16, 35, 32.0, 0),
            Some(1_795_970_132_000_000_000)
        );
        assert_eq!(
            epoch_ns(2026, 11, 29, 18, 35, 32.0, 7200),
            Some(1_795_970_132_000_000_000)
        );
        assert_eq!(epoch_ns(2026, 13, 1, 0, 0, 0.0, 0), None);
        assert_eq!(parse_hms("16:35:23.878"), Some((16, 35, 23.878)));
    }
}
