//! Literals in a column's terms: timestamps (ISO text, with or without a zone) in the column's
//! unit, decimals scaled to the column's scale. A literal finer than the column's unit or scale
//! is not rounded: `<`/`<=` become `<=` of the value below it, `>`/`>=` become `>=` of the
//! value above, `=` is never true and `!=` is true for every non-null value.

/// Nanoseconds since 1970-01-01T00:00:00 of an ISO literal (`YYYY-MM-DD`, then optionally `T`
/// or a space and `HH:MM[:SS[.fraction]]`, then optionally `Z` or `±HH[:MM]`), and whether it
/// named a zone. The time given with a zone is converted to UTC.
pub(super) fn parse_timestamp(s: &str) -> Option<(i128, bool)> {
    let s = s.trim();
    let (date, rest) = match s.find(['T', ' ']) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    };
    let days = super::parse_date(date)? as i128;
    let mut nanos = days * 86_400 * 1_000_000_000;
    if rest.is_empty() {
        return Some((nanos, false));
    }
    // the zone: Z, or a sign after the time's first character
    let (time, zone) = if let Some(t) = rest.strip_suffix(['Z', 'z']) {
        (t, Some(0i128))
    } else if let Some(i) = rest.rfind(['+', '-']).filter(|&i| i > 0) {
        let (t, z) = rest.split_at(i);
        let sign: i128 = if z.starts_with('-') { -1 } else { 1 };
        let z = &z[1..];
        let (h, m) = match z.split_once(':') {
            Some((h, m)) => (h, m),
            None if z.len() == 4 => z.split_at(2),
            None => (z, "0"),
        };
        let (h, m): (i128, i128) = (h.parse().ok()?, m.parse().ok()?);
        if h > 18 || m > 59 || z.is_empty() {
            return None;
        }
        (t, Some(sign * (h * 3600 + m * 60)))
    } else {
        (rest, None)
    };
    let mut parts = time.splitn(3, ':');
    let h: i128 = parts.next()?.parse().ok()?;
    let m: i128 = parts.next()?.parse().ok()?;
    let (sec, frac) = match parts.next() {
        Some(sec) => match sec.split_once('.') {
            Some((s, f)) => (s, f),
            None => (sec, ""),
        },
        None => ("0", ""),
    };
    let sec: i128 = sec.parse().ok()?;
    if h > 23 || m > 59 || sec > 60 || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_nanos: i128 = if frac.is_empty() {
        0
    } else {
        frac.parse::<i128>().ok()? * 10i128.pow(9 - frac.len() as u32)
    };
    nanos += (h * 3600 + m * 60 + sec) * 1_000_000_000 + frac_nanos;
    if let Some(offset) = zone {
        nanos -= offset * 1_000_000_000;
    }
    Some((nanos, zone.is_some()))
}

/// A decimal literal's digits as an integer over a power of ten: `(numerator, fraction
/// digits)`, exactly as written (`-12.50` → (-1250, 2)).
pub(super) fn parse_decimal(s: &str) -> Option<(i128, u32)> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) || frac.len() > 38 {
        return None;
    }
    let mut v: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        v = v.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    Some((if neg { -v } else { v }, frac.len() as u32))
}

/// `num / den` (den > 0) as an integer the column can hold: `Exact(v)` when it divides, or the
/// values just below and above it.
pub(super) enum Scaled {
    Exact(i128),
    Between(i128, i128),
}

pub(super) fn scaled(num: i128, den: i128) -> Scaled {
    let (q, r) = (num.div_euclid(den), num.rem_euclid(den));
    if r == 0 {
        Scaled::Exact(q)
    } else {
        Scaled::Between(q, q + 1)
    }
}

/// The literal `(num, frac_digits)` at `scale` fraction digits.
pub(super) fn at_scale(num: i128, frac_digits: u32, scale: u32) -> Option<Scaled> {
    if frac_digits <= scale {
        Some(Scaled::Exact(
            num.checked_mul(10i128.checked_pow(scale - frac_digits)?)?,
        ))
    } else {
        Some(scaled(num, 10i128.checked_pow(frac_digits - scale)?))
    }
}

/// `v` × 10^-scale written out exactly, as the predicate language reads a decimal (`-0.05`).
pub fn format_decimal(v: i128, scale: i32) -> String {
    if scale <= 0 {
        return format!("{v}{}", "0".repeat(scale.unsigned_abs() as usize));
    }
    let digits = v.unsigned_abs().to_string();
    let s = scale as usize;
    let padded = format!("{digits:0>width$}", width = s + 1);
    let (int, frac) = padded.split_at(padded.len() - s);
    format!("{}{int}.{frac}", if v < 0 { "-" } else { "" })
}

/// The civil date (proleptic Gregorian) of `days` since 1970-01-01.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `days` since 1970-01-01 as `YYYY-MM-DD`.
pub fn format_date(days: i64) -> String {
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `v` units of 10^-digits seconds since midnight as `HH:MM:SS[.fraction]`.
pub fn format_time_of_day(v: i64, digits: u32) -> String {
    let per_sec = 10i64.pow(digits);
    let (secs, frac) = (v.div_euclid(per_sec), v.rem_euclid(per_sec));
    let hms = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    match digits {
        0 => hms,
        _ => format!("{hms}.{frac:0w$}", w = digits as usize),
    }
}

/// `v` units of 10^-digits seconds since 1970-01-01T00:00:00 as ISO 8601, `Z` at the end when
/// `utc`: a timestamp literal of the predicate language.
pub fn format_timestamp(v: i64, digits: u32, utc: bool) -> String {
    let per_day = 86_400 * 10i64.pow(digits);
    let (days, rest) = (v.div_euclid(per_day), v.rem_euclid(per_day));
    format!(
        "{}T{}{}",
        format_date(days),
        format_time_of_day(rest, digits),
        if utc { "Z" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i128 = 1_000_000_000;

    #[test]
    fn timestamps_parse_with_and_without_zones() {
        let day = 86_400 * S;
        assert_eq!(parse_timestamp("1970-01-02"), Some((day, false)));
        assert_eq!(parse_timestamp("1970-01-01T00:00:01"), Some((S, false)));
        assert_eq!(parse_timestamp("1970-01-01 00:01"), Some((60 * S, false)));
        assert_eq!(
            parse_timestamp("1970-01-01T00:00:00.5Z"),
            Some((S / 2, true))
        );
        assert_eq!(
            parse_timestamp("1970-01-01T01:00:00+01:00"),
            Some((0, true))
        );
        assert_eq!(parse_timestamp("1969-12-31T23:00:00-0100"), Some((0, true)));
        assert_eq!(
            parse_timestamp("2024-02-29T12:34:56.123456789"),
            Some((
                (19_782 * 86_400 + 12 * 3600 + 34 * 60 + 56) * S + 123_456_789,
                false
            ))
        );
        for bad in [
            "2024-02-30",
            "2024-01-01T25:00",
            "2024-01-01T10",
            "x",
            "2024-01-01T10:00:00.1234567890",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn decimals_keep_their_digits() {
        assert_eq!(parse_decimal("-12.50"), Some((-1250, 2)));
        assert_eq!(parse_decimal("0.07"), Some((7, 2)));
        assert_eq!(parse_decimal("24"), Some((24, 0)));
        assert_eq!(parse_decimal("1e5"), None);
        assert!(matches!(at_scale(7, 2, 2), Some(Scaled::Exact(7))));
        assert!(matches!(at_scale(24, 0, 2), Some(Scaled::Exact(2400))));
        assert!(matches!(
            at_scale(-1255, 3, 2),
            Some(Scaled::Between(-126, -125))
        ));
    }
}
