//! Benchmark keys: db_bench's fixed-width, zero-padded decimal key numbers.
//!
//! Key number 42 with `key_size` 16 is the 16 ASCII bytes `0000000000000042`. Decimal padding
//! makes byte order equal numeric order, so `fillseq` writes keys in ascending order and a key
//! range of numbers is a contiguous key range of the database.
//!
//! This is `benches/peers/STREAM.md` section 4, which the peer engines' benchmark programs
//! implement too: the key numbers come from [`crate::stream`], the bytes from here.

use sluice::{Error, Result};

/// Formats key numbers as exactly `key_size` bytes.
///
/// Invariant: every number below the `num` given to [`KeyFormat::new`] fits in `key_size`
/// decimal digits, so distinct numbers give distinct keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyFormat {
    key_size: usize,
}

/// Decimal digits of `n` (1 for 0).
fn decimal_digits(mut n: u64) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

impl KeyFormat {
    /// A format for the key numbers `0..num`. Fails if `num - 1` needs more than `key_size`
    /// digits: keys would collide.
    pub fn new(key_size: usize, num: u64) -> Result<Self> {
        let needed = decimal_digits(num.saturating_sub(1));
        if key_size < needed {
            return Err(Error::InvalidArgument(format!(
                "key_size {key_size} is too small for {num} keys (needs at least {needed} digits)"
            )));
        }
        Ok(KeyFormat { key_size })
    }

    /// Bytes per key.
    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// Replaces the contents of `buf` with the key for number `n`.
    ///
    /// A number with more digits than `key_size` keeps its low digits (callers validated `num`
    /// with [`KeyFormat::new`], so this happens only for numbers outside `0..num`).
    pub fn write(&self, mut n: u64, buf: &mut Vec<u8>) {
        buf.clear();
        buf.resize(self.key_size, b'0');
        for byte in buf.iter_mut().rev() {
            if n == 0 {
                break;
            }
            *byte = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }

    /// The key for number `n`.
    pub fn key(&self, n: u64) -> Vec<u8> {
        let mut buf = Vec::with_capacity(self.key_size);
        self.write(n, &mut buf);
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_zero_padded_decimal() {
        let f = KeyFormat::new(16, 1_000_000).unwrap();
        assert_eq!(f.key(0), b"0000000000000000");
        assert_eq!(f.key(42), b"0000000000000042");
        assert_eq!(f.key(999_999), b"0000000000999999");
        // STREAM.md section 6: fillrandom's first key at seed 301, num 1,000,000.
        assert_eq!(f.key(568_985), b"0000000000568985");
        assert_eq!(f.key(u64::MAX).len(), 16);
        // A number with more digits than the key keeps its low digits (STREAM.md section 4).
        assert_eq!(KeyFormat::new(3, 1000).unwrap().key(12_345), b"345");
        let mut buf = b"leftover bytes".to_vec();
        f.write(7, &mut buf);
        assert_eq!(buf, b"0000000000000007");
    }

    #[test]
    fn byte_order_is_numeric_order() {
        let f = KeyFormat::new(8, 100_000).unwrap();
        let mut prev = f.key(0);
        for n in 1..100_000 {
            let k = f.key(n);
            assert!(k > prev, "{n}");
            prev = k;
        }
    }

    #[test]
    fn too_small_key_size_is_rejected() {
        assert!(KeyFormat::new(3, 1000).is_ok()); // 0..=999
        assert!(KeyFormat::new(3, 1001).is_err());
        assert!(KeyFormat::new(1, 1).is_ok());
        assert_eq!(decimal_digits(0), 1);
        assert_eq!(decimal_digits(u64::MAX), 20);
    }
}
