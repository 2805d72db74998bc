//! Number formatting shared by the commands, and parsing of counts and sizes given on the
//! command line. Two families, each for one kind of figure: what a database holds and what
//! options set (file, level and cache sizes) in binary units (KiB, MiB, GiB), as the sizes
//! on the command line are; what a benchmark measured (bytes moved, rates) in decimal MB and
//! MB/s (10^6 bytes), the unit compaction bandwidth is defined in, as the charts use.

/// `bytes` as a short human size: `0 B`, `512 B`, `4.0 KiB`, `1.5 MiB`, `2.25 GiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let decimals = if value < 10.0 { 2 } else { 1 };
    format!("{value:.decimals$} {}", UNITS[unit])
}

/// `bytes` in decimal megabytes, the unit of the byte counts and rates `sluice bench` and
/// `sluice ycsb` report (1 MB = 10^6 bytes, so MB/s = MB / s): `2.2 MB`.
pub fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// Parses a count or size: decimal digits, optionally grouped with `_`, optionally followed by
/// a binary suffix `K`, `M`, `G` (also `KB`/`KiB`, ...; case-insensitive).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(t.len());
    let (digits, suffix) = t.split_at(digits_end);
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() {
        return Err(format!("{s:?} is not a number"));
    }
    let n: u64 = digits.parse().map_err(|_| format!("{s:?} is too large"))?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{s:?}: unknown suffix {suffix:?} (use K, M or G)")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// [`parse_size`] into a `usize`.
pub fn parse_usize(s: &str) -> Result<usize, String> {
    parse_size(s).and_then(|n| usize::try_from(n).map_err(|_| format!("{s:?} is too large")))
}

/// [`parse_size`] into a `u32`.
pub fn parse_u32(s: &str) -> Result<u32, String> {
    parse_size(s).and_then(|n| u32::try_from(n).map_err(|_| format!("{s:?} is too large")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_pick_a_readable_unit() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1024), "1.00 KiB");
        assert_eq!(megabytes(2_210_000), "2.2 MB");
        assert_eq!(size(64 << 20), "64.0 MiB");
        assert_eq!(size(3 << 29), "1.50 GiB");
        assert_eq!(size(u64::MAX), "16384.0 PiB");
    }

    #[test]
    fn sizes_parse_with_suffixes_and_underscores() {
        assert_eq!(parse_size("1_000_000"), Ok(1_000_000));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("12x").unwrap_err().contains("suffix"));
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("17179869184G").is_err());
        assert!(parse_u32("5G").is_err());
        assert_eq!(parse_usize("10"), Ok(10));
    }
}
