//! CRC32C checksums, masked the way LevelDB masks them.
//!
//! A CRC stored next to the data it covers is masked so that computing the CRC of a string that
//! itself contains embedded CRCs does not degenerate:
//!
//! ```text
//! mask(crc)   = rotate_right(crc, 15) + 0xa282ead8   (wrapping, u32)
//! unmask(m)   = rotate_left(m - 0xa282ead8, 15)
//! block crc   = mask(crc32c(contents || compression_type_byte))
//! ```
//!
//! The mask constant and rotation are part of the on-disk format: frozen.

/// Added after rotating; frozen (LevelDB's value, so tools that know LevelDB read ours).
const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C (Castagnoli) of `data`, using the CPU instruction where available.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Extends `crc` (the CRC32C of some prefix) with `data`.
#[inline]
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// Masks a CRC for storage.
#[inline]
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverts [`mask`].
#[inline]
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The masked checksum stored in a block trailer: it covers the stored (possibly compressed)
/// contents and the compression type byte, so a flipped type byte is caught too.
#[inline]
pub fn block_checksum(contents: &[u8], ctype_byte: u8) -> u32 {
    mask(crc32c_extend(crc32c(contents), &[ctype_byte]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_crc32c_values() {
        // RFC 3720 test vectors.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(
            crc32c_extend(crc32c(b"1234"), b"56789"),
            crc32c(b"123456789")
        );
    }

    #[test]
    fn mask_changes_the_value_and_inverts() {
        let crc = crc32c(b"foo");
        assert_ne!(mask(crc), crc);
        assert_ne!(mask(mask(crc)), crc);
        assert_eq!(unmask(mask(crc)), crc);
        assert_eq!(unmask(unmask(mask(mask(crc)))), crc);
    }

    #[test]
    fn block_checksum_covers_the_type_byte() {
        let data = b"some block contents";
        assert_ne!(block_checksum(data, 0), block_checksum(data, 1));
        let mut both = data.to_vec();
        both.push(2);
        assert_eq!(unmask(block_checksum(data, 2)), crc32c(&both));
    }

    proptest! {
        #[test]
        fn unmask_inverts_mask(crc: u32) {
            prop_assert_eq!(unmask(mask(crc)), crc);
        }
    }
}
