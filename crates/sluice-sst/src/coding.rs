//! Fixed-width little-endian integers and LEB128 varints.
//!
//! Decoders never panic: they return `None` when the input is too short or a varint runs past
//! its maximum length, and the caller turns that into a `Corruption` error naming the file.

/// Appends `v` as 4 little-endian bytes.
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads 4 little-endian bytes at the start of `src`.
pub fn get_fixed32(src: &[u8]) -> Option<u32> {
    let bytes: [u8; 4] = src.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// Reads 8 little-endian bytes at the start of `src`.
pub fn get_fixed64(src: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = src.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Appends `v` as an unsigned LEB128 varint (1..=5 bytes).
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Appends `v` as an unsigned LEB128 varint (1..=10 bytes).
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Decodes a varint32 from the start of `src`; returns the value and the bytes consumed.
#[inline]
pub fn get_varint32(src: &[u8]) -> Option<(u32, usize)> {
    // Most varints (lengths, shared prefixes) are one byte.
    if let Some(&b) = src.first()
        && b < 0x80
    {
        return Some((u32::from(b), 1));
    }
    let (v, n) = get_varint_limited(src, 5)?;
    Some((u32::try_from(v).ok()?, n))
}

/// Decodes a varint64 from the start of `src`; returns the value and the bytes consumed.
#[inline]
pub fn get_varint64(src: &[u8]) -> Option<(u64, usize)> {
    if let Some(&b) = src.first()
        && b < 0x80
    {
        return Some((u64::from(b), 1));
    }
    get_varint_limited(src, 10)
}

fn get_varint_limited(src: &[u8], max_len: usize) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (i, &byte) in src.iter().take(max_len).enumerate() {
        let shift = 7 * i as u32;
        let bits = u64::from(byte & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        result |= bits << shift;
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Appends `bytes` prefixed with its length as a varint32.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint32(dst, bytes.len() as u32);
    dst.extend_from_slice(bytes);
}

/// Decodes a length-prefixed slice from `src`; returns it and the bytes consumed.
pub fn get_length_prefixed(src: &[u8]) -> Option<(&[u8], usize)> {
    let (len, n) = get_varint32(src)?;
    let end = n.checked_add(len as usize)?;
    Some((src.get(n..end)?, end))
}

/// Number of bytes `v` takes as a varint.
pub fn varint_length(mut v: u64) -> usize {
    let mut len = 1;
    while v >= 0x80 {
        v >>= 7;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint64_round_trips(v: u64) {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            prop_assert_eq!(buf.len(), varint_length(v));
            prop_assert_eq!(get_varint64(&buf), Some((v, buf.len())));
        }

        #[test]
        fn decoders_never_panic(bytes: Vec<u8>) {
            let _ = get_varint32(&bytes);
            let _ = get_varint64(&bytes);
            let _ = get_length_prefixed(&bytes);
            let _ = get_fixed32(&bytes);
            let _ = get_fixed64(&bytes);
        }
    }

    #[test]
    fn truncated_and_overlong_varints_are_rejected() {
        assert_eq!(get_varint32(&[0x80]), None);
        assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
        assert_eq!(get_varint64(&[0xff; 11]), None);
        assert_eq!(
            get_varint32(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            Some((u32::MAX, 5))
        );
    }

    #[test]
    fn fixed_round_trip() {
        let mut buf = Vec::new();
        put_fixed32(&mut buf, 0xdead_beef);
        put_fixed64(&mut buf, 0x0123_4567_89ab_cdef);
        assert_eq!(get_fixed32(&buf), Some(0xdead_beef));
        assert_eq!(get_fixed64(&buf[4..]), Some(0x0123_4567_89ab_cdef));
        assert_eq!(get_fixed64(&buf[8..]), None);
    }
}
