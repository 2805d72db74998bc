//! Block compression: none, snappy, lz4 and zstd.
//!
//! Every block on disk is followed by a one-byte compression type (see [`crate::format`]), so
//! blocks of one table may use different codecs: a block that compression shrinks by less than
//! one eighth is stored uncompressed, like LevelDB does, because decompressing it would cost read
//! time for almost no space.
//!
//! Compressed forms, byte for byte:
//!
//! ```text
//! snappy: raw snappy block (its own varint uncompressed length, then the snappy stream)
//! lz4:    fixed32 LE uncompressed length || LZ4 block (lz4_flex "size prepended" format)
//! zstd:   one zstd frame with its content size recorded in the frame header
//! ```
//!
//! Decompression bounds the output size *before* allocating: every codec's stored length comes
//! from the (possibly corrupt) input, and trusting it would let one flipped bit allocate 4 GiB.
//!
//! lz4 blocks are written by `lz4_flex` (with its fast unsafe encoder: it only ever sees our
//! own blocks) and read by the reference C library (the `lz4` crate, which vendors it), whose
//! `LZ4_decompress_safe` is meant for hostile input: it never reads or writes outside the
//! buffers it is given, and OSS-Fuzz runs it continuously. It is the fastest safe decoder
//! measured: 1.1x `lz4_flex`'s safe one on the benchmark's blocks, about 3x on values with runs
//! of one byte, while `lz4_flex` compresses 1.1x as fast as the C library, to the same size
//! (`cargo bench -p sluice-sst --bench compression`, design note 0001). One format either way:
//! each side reads the other's blocks.

use std::cell::RefCell;
use std::fmt;
use std::io::Read;
use std::str::FromStr;

/// The compression applied to a block.
///
/// These values are written to disk in every block trailer: they are frozen and must never be
/// renumbered. New codecs may only take new numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum CompressionType {
    /// Stored as is. The default, so a missing value reads as "no compression".
    #[default]
    None = 0,
    /// Raw snappy.
    Snappy = 1,
    /// LZ4 block format with a 4-byte little-endian uncompressed-length prefix.
    Lz4 = 2,
    /// One zstd frame.
    Zstd = 3,
}

/// The zstd level used when none is configured.
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

impl CompressionType {
    /// Every type, in on-disk order.
    pub const ALL: [CompressionType; 4] = [
        CompressionType::None,
        CompressionType::Snappy,
        CompressionType::Lz4,
        CompressionType::Zstd,
    ];

    /// Decodes a trailer byte; `None` for an unknown value (corrupt data or a newer format).
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(CompressionType::None),
            1 => Some(CompressionType::Snappy),
            2 => Some(CompressionType::Lz4),
            3 => Some(CompressionType::Zstd),
            _ => None,
        }
    }

    /// The lower-case name used in options, the CLI and properties dumps.
    pub fn name(self) -> &'static str {
        match self {
            CompressionType::None => "none",
            CompressionType::Snappy => "snappy",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }
}

impl fmt::Display for CompressionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CompressionType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CompressionType::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!("unknown compression type {s:?} (expected none, snappy, lz4 or zstd)")
            })
    }
}

/// Compresses `input` with `ctype` at the default zstd level; see [`compress_with_level`].
pub fn compress(ctype: CompressionType, input: &[u8], out: &mut Vec<u8>) -> CompressionType {
    compress_with_level(ctype, DEFAULT_ZSTD_LEVEL, input, out)
}

/// Compresses `input` with `ctype` (`zstd_level` only matters for zstd) and returns the type
/// actually used. `out` is cleared and then holds the bytes to store: the compressed form, or a
/// copy of `input` when the result is [`CompressionType::None`] (the codec failed, or saved less
/// than one eighth of the input).
pub fn compress_with_level(
    ctype: CompressionType,
    zstd_level: i32,
    input: &[u8],
    out: &mut Vec<u8>,
) -> CompressionType {
    if try_compress(ctype, zstd_level, input, out) {
        ctype
    } else {
        out.clear();
        out.extend_from_slice(input);
        CompressionType::None
    }
}

/// Compresses into `out` (cleared first). Returns false when the block should be stored
/// uncompressed; `out` then holds nothing useful. Lets callers that own the input avoid a copy.
pub(crate) fn try_compress(
    ctype: CompressionType,
    zstd_level: i32,
    input: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    out.clear();
    let ok = match ctype {
        CompressionType::None => false,
        CompressionType::Snappy => snappy_compress(input, out),
        CompressionType::Lz4 => lz4_compress(input, out),
        CompressionType::Zstd => zstd_compress(zstd_level, input, out),
    };
    ok && out.len() < input.len() - input.len() / 8
}

fn snappy_compress(input: &[u8], out: &mut Vec<u8>) -> bool {
    thread_local! {
        // The encoder owns a hash table; reusing it saves an allocation per block.
        static ENCODER: RefCell<snap::raw::Encoder> = RefCell::new(snap::raw::Encoder::new());
    }
    out.resize(snap::raw::max_compress_len(input.len()), 0);
    if out.is_empty() {
        // Input too large for snappy's 32-bit length.
        return false;
    }
    match ENCODER.with(|e| e.borrow_mut().compress(input, out)) {
        Ok(n) => {
            out.truncate(n);
            true
        }
        Err(_) => false,
    }
}

fn lz4_compress(input: &[u8], out: &mut Vec<u8>) -> bool {
    let Ok(len) = u32::try_from(input.len()) else {
        return false;
    };
    out.extend_from_slice(&len.to_le_bytes());
    out.resize(4 + lz4_flex::block::get_maximum_output_size(input.len()), 0);
    match lz4_flex::block::compress_into(input, &mut out[4..]) {
        Ok(n) => {
            out.truncate(4 + n);
            true
        }
        Err(_) => false,
    }
}

fn zstd_compress(level: i32, input: &[u8], out: &mut Vec<u8>) -> bool {
    thread_local! {
        // A zstd compression context is large (about 1 MiB at level 3): keep one per thread and
        // level instead of building one per block.
        static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
            const { RefCell::new(None) };
    }
    out.reserve(zstd::zstd_safe::compress_bound(input.len()));
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            match zstd::bulk::Compressor::new(level) {
                Ok(c) => *slot = Some((level, c)),
                Err(_) => return false,
            }
        }
        match slot.as_mut() {
            // `compress_to_buffer` writes from the start of `out` up to its capacity.
            Some((_, c)) => c.compress_to_buffer(input, out).is_ok(),
            None => false,
        }
    })
}

/// Decompresses `input`, which was compressed with `ctype`, into `out` (cleared first).
///
/// Fails, without allocating more than `max_len` bytes, when the stored uncompressed length
/// exceeds `max_len`, when the data does not decode, or when it decodes to a length other than
/// the stored one. The error string says which.
pub fn decompress(
    ctype: CompressionType,
    input: &[u8],
    max_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.clear();
    match ctype {
        CompressionType::None => {
            if input.len() > max_len {
                return Err(too_large(input.len() as u64, max_len));
            }
            out.extend_from_slice(input);
            Ok(())
        }
        CompressionType::Snappy => snappy_decompress(input, max_len, out),
        CompressionType::Lz4 => lz4_decompress(input, max_len, out),
        CompressionType::Zstd => zstd_decompress(input, max_len, out),
    }
}

fn too_large(len: u64, max_len: usize) -> String {
    format!("uncompressed length {len} exceeds the limit of {max_len} bytes")
}

fn snappy_decompress(input: &[u8], max_len: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let len = snap::raw::decompress_len(input).map_err(|e| format!("snappy: {e}"))?;
    if len > max_len {
        return Err(too_large(len as u64, max_len));
    }
    out.resize(len, 0);
    let n = snap::raw::Decoder::new()
        .decompress(input, out)
        .map_err(|e| format!("snappy: {e}"))?;
    if n != len {
        return Err(format!("snappy: decoded {n} bytes, header says {len}"));
    }
    Ok(())
}

fn lz4_decompress(input: &[u8], max_len: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let (Some(&[a, b, c, d]), Some(body)) = (input.get(..4), input.get(4..)) else {
        return Err("lz4: no room for the uncompressed length".to_string());
    };
    let len = u32::from_le_bytes([a, b, c, d]);
    if len as usize > max_len {
        return Err(too_large(u64::from(len), max_len));
    }
    // The C library counts in `i32`.
    let Ok(want) = i32::try_from(len) else {
        return Err(too_large(u64::from(len), i32::MAX as usize));
    };
    out.resize(len as usize, 0);
    let n =
        lz4::block::decompress_to_buffer(body, Some(want), out).map_err(|e| format!("lz4: {e}"))?;
    if n != len as usize {
        return Err(format!("lz4: decoded {n} bytes, header says {len}"));
    }
    Ok(())
}

fn zstd_decompress(input: &[u8], max_len: usize, out: &mut Vec<u8>) -> Result<(), String> {
    thread_local! {
        static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { RefCell::new(None) };
    }
    let content_size = zstd::zstd_safe::get_frame_content_size(input)
        .map_err(|_| "zstd: bad frame header".to_string())?;
    let Some(len) = content_size else {
        // Our writer always records the content size; decode frames without one through a
        // reader capped at `max_len + 1` bytes so the output grows only as data is produced.
        return zstd_decompress_streaming(input, max_len, out);
    };
    if len > max_len as u64 {
        return Err(too_large(len, max_len));
    }
    let len = len as usize;
    out.reserve_exact(len);
    let n = DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?);
        }
        match slot.as_mut() {
            // Writes at most `out.capacity()` bytes; a frame that claims fewer bytes than it
            // holds fails with "destination buffer too small" instead of growing the buffer.
            Some(d) => d
                .decompress_to_buffer(input, out)
                .map_err(|e| format!("zstd: {e}")),
            None => Err("zstd: no decompression context".to_string()),
        }
    })?;
    if n != len {
        return Err(format!("zstd: decoded {n} bytes, frame header says {len}"));
    }
    Ok(())
}

fn zstd_decompress_streaming(
    input: &[u8],
    max_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let decoder = zstd::stream::read::Decoder::new(input).map_err(|e| format!("zstd: {e}"))?;
    let limit = (max_len as u64).saturating_add(1);
    decoder
        .take(limit)
        .read_to_end(out)
        .map_err(|e| format!("zstd: {e}"))?;
    if out.len() > max_len {
        out.clear();
        return Err(format!(
            "uncompressed length exceeds the limit of {max_len} bytes"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn compressible(len: usize) -> Vec<u8> {
        (0..len).map(|i| b"abcabcabd"[i % 9]).collect()
    }

    #[test]
    fn names_round_trip() {
        for t in CompressionType::ALL {
            assert_eq!(t.to_string().parse::<CompressionType>().unwrap(), t);
            assert_eq!(CompressionType::from_u8(t as u8), Some(t));
        }
        assert_eq!(
            "ZSTD".parse::<CompressionType>().unwrap(),
            CompressionType::Zstd
        );
        assert!("gzip".parse::<CompressionType>().is_err());
        assert_eq!(CompressionType::from_u8(4), None);
        // Frozen on-disk values.
        assert_eq!(
            CompressionType::ALL.map(|t| t as u8),
            [0, 1, 2, 3],
            "compression type values are frozen"
        );
    }

    #[test]
    fn every_codec_round_trips() {
        for t in CompressionType::ALL {
            for len in [0usize, 1, 7, 100, 4096, 70_000] {
                let input = compressible(len);
                let mut c = Vec::new();
                let used = compress(t, &input, &mut c);
                if t != CompressionType::None && len >= 100 {
                    assert_eq!(used, t, "{t} should compress {len} repetitive bytes");
                    assert!(c.len() < input.len());
                }
                let mut d = Vec::new();
                decompress(used, &c, input.len(), &mut d).unwrap();
                assert_eq!(d, input, "{t} len {len}");
            }
        }
    }

    /// Blocks are written by `lz4_flex` and read by the C library: one format, so blocks of
    /// either writer read the same through either reader (earlier builds read with
    /// `lz4_flex`).
    #[test]
    fn lz4_blocks_read_across_implementations() {
        for len in [100usize, 4096, 70_000] {
            let input = compressible(len);
            let mut by_flex = Vec::new();
            assert!(try_compress(CompressionType::Lz4, 0, &input, &mut by_flex));
            let mut by_c = vec![0; 4 + lz4::block::compress_bound(len).unwrap()];
            let n = lz4::block::compress_to_buffer(&input, None, true, &mut by_c).unwrap();
            by_c.truncate(n);
            for (writer, block) in [("lz4_flex", &by_flex), ("C", &by_c)] {
                let mut d = Vec::new();
                decompress(CompressionType::Lz4, block, len, &mut d).unwrap();
                assert_eq!(d, input, "{writer}'s block of {len} bytes, read by C");
                let read = lz4_flex::block::decompress_size_prepended(block).unwrap();
                assert_eq!(
                    read, input,
                    "{writer}'s block of {len} bytes, read by lz4_flex"
                );
            }
        }
    }

    #[test]
    fn an_lz4_block_too_short_for_its_prefix_is_an_error() {
        for bad in [&[][..], &[1], &[1, 0, 0]] {
            let err = decompress(CompressionType::Lz4, bad, 1 << 16, &mut Vec::new()).unwrap_err();
            assert!(err.contains("uncompressed length"), "{err}");
        }
    }

    #[test]
    fn incompressible_input_falls_back_to_none() {
        // An xorshift stream does not compress.
        let mut x = 0x1234_5678_9abc_def0u64;
        let input: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for t in CompressionType::ALL {
            let mut c = Vec::new();
            assert_eq!(compress(t, &input, &mut c), CompressionType::None);
            assert_eq!(c, input);
        }
    }

    #[test]
    fn stored_length_above_limit_is_rejected_before_allocation() {
        let input = compressible(10_000);
        for t in CompressionType::ALL {
            let mut c = Vec::new();
            let used = compress(t, &input, &mut c);
            let mut d = Vec::new();
            let err = decompress(used, &c, 9_999, &mut d).unwrap_err();
            assert!(err.contains("exceeds the limit"), "{t}: {err}");
        }
        // An lz4 prefix claiming 4 GiB fails without trying to allocate it.
        let mut bogus = u32::MAX.to_le_bytes().to_vec();
        bogus.extend_from_slice(&[0x10, b'a']);
        let err = decompress(CompressionType::Lz4, &bogus, 1 << 20, &mut Vec::new()).unwrap_err();
        assert!(err.contains("exceeds the limit"), "{err}");
    }

    #[test]
    fn zstd_frame_without_content_size_is_bounded() {
        let input = compressible(50_000);
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut enc, &input).unwrap();
        let frame = enc.finish().unwrap();
        let mut d = Vec::new();
        decompress(CompressionType::Zstd, &frame, 50_000, &mut d).unwrap();
        assert_eq!(d, input);
        assert!(decompress(CompressionType::Zstd, &frame, 49_999, &mut d).is_err());
    }

    #[test]
    fn flipped_bytes_never_panic_and_never_return_wrong_length() {
        let input = compressible(4096);
        for t in [
            CompressionType::Snappy,
            CompressionType::Lz4,
            CompressionType::Zstd,
        ] {
            let mut c = Vec::new();
            assert_eq!(compress(t, &input, &mut c), t);
            for i in 0..c.len() {
                let mut bad = c.clone();
                bad[i] ^= 0x5a;
                let mut d = Vec::new();
                if decompress(t, &bad, 8192, &mut d).is_ok() {
                    assert!(d.len() <= 8192);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes: Vec<u8>, t in 0u8..4) {
            let t = CompressionType::from_u8(t).unwrap();
            let mut d = Vec::new();
            if decompress(t, &bytes, 1 << 16, &mut d).is_ok() {
                prop_assert!(d.len() <= 1 << 16);
            }
        }

        #[test]
        fn round_trip_arbitrary(input: Vec<u8>, t in 0u8..4) {
            let t = CompressionType::from_u8(t).unwrap();
            let mut c = Vec::new();
            let used = compress(t, &input, &mut c);
            let mut d = Vec::new();
            decompress(used, &c, input.len(), &mut d).unwrap();
            prop_assert_eq!(d, input);
        }
    }
}
