//! Hexadecimal keys and values for `--hex` (RocksDB's `ldb --hex`): lower-case pairs of digits,
//! one per byte, and an optional `0x` prefix on input.

use std::fmt::Write as _;

/// `bytes` as lower-case hexadecimal, two digits a byte, no prefix.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The bytes hexadecimal `text` stands for (either case, optionally `0x`-prefixed); the error
/// says what is wrong with it.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "{text:?} is not hexadecimal bytes: an odd number of digits"
        ));
    }
    digits
        .as_bytes()
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            // from_str_radix alone would take a sign ("+1").
            pair.iter()
                .all(u8::is_ascii_hexdigit)
                .then(|| std::str::from_utf8(pair).ok())
                .flatten()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("{text:?} is not hexadecimal bytes: bad digits at byte {i}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_byte_and_refuses_what_is_not_hex() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
        assert_eq!(encode(b"\x00\xffA"), "00ff41");
        assert_eq!(decode("0xABcd").unwrap(), vec![0xab, 0xcd]);
        assert_eq!(decode("").unwrap(), Vec::<u8>::new());
        for bad in ["abc", "zz", "0x1", "12 34", "+1"] {
            assert!(decode(bad).is_err(), "{bad}");
        }
        assert!(decode("12g4").unwrap_err().contains("byte 1"));
    }
}
