//! Keys and values of the stress workload: both are functions of numbers, so any value read
//! back names the key and version it was written for and can be checked byte for byte.
//!
//! Key `k` is `key` followed by `k` in eight zero-padded decimal digits, so key order is
//! number order; every keyspace has the same keys. Version `v` of key `k` in keyspace `ks`
//! (versions count from 1; 0 means "never written") is:
//!
//! ```text
//! offset  size  field
//! 0       4     key number, u32 little-endian
//! 4       4     version, u32 little-endian
//! 8       n     filler: bytes drawn from a generator seeded by (keyspace, key, version), every
//!               other 16-byte run a repeated letter so blocks compress a little
//! ```
//!
//! The total length `value_len(ks, k, v)` is also drawn from (keyspace, key, version), so a
//! value that turns up in another keyspace does not read back as that keyspace's. Most are
//! 16-127 bytes, one in eight 256-1023, one in thirty-two 1-4 KiB, so blocks, restart points
//! and table cuts meet values of every size.

/// Bytes before the filler: key number and version.
const HEADER_BYTES: usize = 8;
/// Digits of the key number in a key.
const KEY_DIGITS: usize = 8;
/// Prefix of every key.
const KEY_PREFIX: &[u8] = b"key";

/// The key of number `k`.
pub fn key(k: u32) -> Vec<u8> {
    format!("key{k:0width$}", width = KEY_DIGITS).into_bytes()
}

/// The number of a key written by [`key`], or `None` for any other bytes.
pub fn key_number(key: &[u8]) -> Option<u32> {
    let digits = key.strip_prefix(KEY_PREFIX)?;
    if digits.len() != KEY_DIGITS || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A 64-bit mix of (keyspace, key, version) (splitmix64's finaliser): the seed of a value's
/// length and filler.
fn mix(ks: usize, k: u32, version: u32) -> u64 {
    let mut z = (u64::from(k) << 32 | u64::from(version))
        .wrapping_add(0x9e37_79b9_7f4a_7c15)
        .wrapping_add((ks as u64).wrapping_mul(0xd6e8_feb8_6659_fd93));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Length in bytes of version `version` of key `k` in keyspace `ks`.
pub fn value_len(ks: usize, k: u32, version: u32) -> usize {
    let h = mix(ks, k, version);
    let r = (h >> 8) as usize;
    match h % 32 {
        0 => 1024 + r % 3072,
        1..=4 => 256 + r % 768,
        _ => 16 + r % 112,
    }
}

/// Writes the filler of (ks, k, version) into `out`.
fn fill(ks: usize, k: u32, version: u32, out: &mut [u8]) {
    let mut x = mix(ks, k, version) | 1;
    let letter = b'a' + (k % 26) as u8;
    for (i, b) in out.iter_mut().enumerate() {
        *b = if (i / 16) % 2 == 1 {
            letter
        } else {
            // xorshift64: cheap, and any changed byte shows.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
    }
}

/// Version `version` of key `k`'s value in keyspace `ks`.
pub fn encode(ks: usize, k: u32, version: u32) -> Vec<u8> {
    let len = value_len(ks, k, version);
    let mut v = vec![0; len];
    v[..4].copy_from_slice(&k.to_le_bytes());
    v[4..HEADER_BYTES].copy_from_slice(&version.to_le_bytes());
    fill(ks, k, version, &mut v[HEADER_BYTES..]);
    v
}

/// The version a value read for key `k` in keyspace `ks` holds, after checking every byte of
/// it against [`encode`]; the error says what differs.
pub fn decode(ks: usize, k: u32, value: &[u8]) -> Result<u32, String> {
    let (Some(key_bytes), Some(version_bytes)) = (value.get(..4), value.get(4..HEADER_BYTES))
    else {
        return Err(format!("value of {} bytes is too short", value.len()));
    };
    let mut word = [0u8; 4];
    word.copy_from_slice(key_bytes);
    let owner = u32::from_le_bytes(word);
    word.copy_from_slice(version_bytes);
    let version = u32::from_le_bytes(word);
    if owner != k {
        return Err(format!("value belongs to key {owner} (version {version})"));
    }
    if version == 0 {
        return Err("value names version 0, which is never written".into());
    }
    if value != encode(ks, k, version).as_slice() {
        return Err(format!(
            "value of version {version} differs from what was written ({} bytes, expected {})",
            value.len(),
            value_len(ks, k, version)
        ));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_numbers_and_parse_back() {
        assert_eq!(key(42), b"key00000042".to_vec());
        assert!(key(9) < key(10) && key(99_999) < key(100_000));
        for k in [0, 7, 12_345, 99_999_999] {
            assert_eq!(key_number(&key(k)), Some(k));
        }
        for bad in [
            &b"key1"[..],
            b"kex00000001",
            b"key0000000x",
            b"key000000001",
            b"",
        ] {
            assert_eq!(key_number(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn values_round_trip_and_vary_in_size() {
        let mut sizes = std::collections::BTreeSet::new();
        for k in 0..200 {
            for version in 1..20 {
                let v = encode(0, k, version);
                assert_eq!(v.len(), value_len(0, k, version));
                assert_eq!(decode(0, k, &v), Ok(version));
                sizes.insert(v.len() / 1024);
            }
        }
        // Small, medium and KiB-sized values all occur.
        assert!(
            sizes.contains(&0) && sizes.iter().any(|&s| s >= 2),
            "{sizes:?}"
        );
    }

    #[test]
    fn every_changed_byte_and_every_mix_up_is_caught() {
        let v = encode(1, 5, 3);
        for i in 0..v.len() {
            let mut bad = v.clone();
            bad[i] ^= 0x01;
            assert!(
                decode(1, 5, &bad).is_err(),
                "byte {i} flipped went unnoticed"
            );
        }
        assert!(decode(1, 6, &v).is_err(), "another key's value");
        assert!(decode(0, 5, &v).is_err(), "another keyspace's value");
        assert!(decode(2, 5, &v).is_err(), "another keyspace's value");
        assert!(decode(1, 5, &v[..v.len() - 1]).is_err(), "cut short");
        assert!(
            decode(1, 5, &[v.clone(), vec![0]].concat()).is_err(),
            "extended"
        );
        assert!(decode(1, 5, &v[..7]).is_err(), "shorter than the header");
        let mut zero = encode(1, 5, 3);
        zero[4..8].copy_from_slice(&0u32.to_le_bytes());
        assert!(decode(1, 5, &zero).is_err(), "version 0");
    }
}
