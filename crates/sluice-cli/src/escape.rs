//! How bytes from the database are shown: printable ASCII as is, everything else as `\xNN`.
//!
//! The backslash itself is written `\x5c`, so the output is unambiguous and reversible, and a
//! tab or newline inside a key can never be mistaken for the separators of `scan` output.

use sluice_sst::key::{ValueKind, parse_internal_key};

/// `bytes` with every byte outside `' '..='~'`, and `\`, written as `\xNN` (the engine's
/// form, which its own descriptions of keys use too).
pub use sluice_sst::key::escape_bytes as escape;

/// The bytes [`escape`] wrote: `\xNN` back to its byte, everything else as is. Any other
/// backslash sequence is an error, so that no input means two things.
pub fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let hex = bytes
            .get(i + 1..i + 4)
            .filter(|h| h[0] == b'x' && h[1..].iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(&h[1..]).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .ok_or_else(|| format!("bad escape at byte {i} of {s:?}: only \\xNN is allowed"))?;
        out.push(hex);
        i += 4;
    }
    Ok(out)
}

/// The lower-case name of an entry kind, as dumps print it.
pub fn kind_name(kind: ValueKind) -> &'static str {
    kind.name()
}

/// An internal key as `'user key' @ seq kind`, its bytes written by `encode` (`--hex` passes
/// hexadecimal); keys that do not parse are shown raw.
pub use sluice_sst::key::describe_internal_key as internal_key_with;

/// An internal key as a JSON object `{key, seq, kind}` (or `{raw}` if it does not parse).
pub fn internal_key_json(ikey: &[u8]) -> serde_json::Value {
    internal_key_json_with(ikey, escape)
}

/// As [`internal_key_json`], the bytes written by `encode` (`--hex` passes hexadecimal).
pub fn internal_key_json_with(ikey: &[u8], encode: impl Fn(&[u8]) -> String) -> serde_json::Value {
    match parse_internal_key(ikey) {
        Some(k) => serde_json::json!({
            "key": encode(k.user_key),
            "seq": k.seq,
            "kind": kind_name(k.kind),
        }),
        None => serde_json::json!({ "raw": encode(ikey) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sst::key::make_internal_key;

    #[test]
    fn unescape_reverses_escape_and_refuses_anything_else() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unescape(&escape(&all)).unwrap(), all);
        assert_eq!(unescape("plain").unwrap(), b"plain");
        for bad in ["\\", "\\n", "\\x4", "\\xzz", "\\x+f", "a\\"] {
            assert!(unescape(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn printable_bytes_pass_and_others_are_hex() {
        assert_eq!(escape(b"hello world~"), "hello world~");
        assert_eq!(escape(b"a\tb\n\x00\xff"), "a\\x09b\\x0a\\x00\\xff");
        assert_eq!(escape(b"back\\slash"), "back\\x5cslash");
        assert_eq!(escape("é".as_bytes()), "\\xc3\\xa9");
        assert_eq!(escape(b""), "");
    }

    #[test]
    fn internal_keys_show_seq_and_kind() {
        let k = make_internal_key(b"k\x01", 42, ValueKind::Deletion);
        assert_eq!(internal_key_with(&k, escape), "'k\\x01' @ 42 delete");
        assert_eq!(internal_key_json(&k)["seq"], 42);
        assert!(internal_key_with(b"short", escape).starts_with("<invalid"));
        assert_eq!(internal_key_json(b"x")["raw"], "x");
    }
}
