//! [`BlobOptions`]: when values are separated into blob files, and how those are written.

use sluice_sst::compression::CompressionType;

use crate::{Error, Result};

/// Value separation settings (RocksDB's `enable_blob_files`, `min_blob_size`,
/// `blob_file_size` and `blob_compression_type`), per keyspace.
#[derive(Clone, Debug, PartialEq)]
pub struct BlobOptions {
    /// Values of at least this many bytes are written to blob files when flushed, and the
    /// tables keep a reference of a few bytes instead; 0 turns separation off (the default).
    /// 4 KiB is a good first try: compactions then copy references, not the values.
    /// Changing it affects only what is flushed from then on; a database with blob files
    /// reads them whatever it is set to.
    pub min_blob_size: usize,
    /// A flush starts a new blob file once the current one holds this many bytes.
    pub blob_file_size: u64,
    /// How each value is compressed in its blob file. Values are compressed one by one, so
    /// a read decompresses only its own.
    pub blob_compression: CompressionType,
    /// Reads keep the values they read from blob files in the block cache (RocksDB's
    /// `blob_cache` set to the block cache; Pebble's behaviour), where they compete with
    /// table blocks for its bytes. Compactions never fill it. Off by default, as in RocksDB:
    /// an uncompressed value is one `pread` from the page cache, which copying it into and
    /// out of the block cache does not beat. Measured with 4 KiB values and a 64 MiB cache:
    /// uncompressed, readrandom over 2 GB lost 15% and zipfian YCSB C 9%; zstd-compressed,
    /// YCSB C gained 5% (a hit skips the decompression). Worth it for compressed values read
    /// often, or when the page cache cannot hold the hot ones.
    pub cache_values: bool,
    /// Compactions move the live values out of the oldest blob files, so those can be
    /// deleted (RocksDB's `enable_blob_garbage_collection`, on here by default).
    pub garbage_collection: bool,
    /// The share of blob files, oldest first, that garbage collection collects (RocksDB's
    /// `blob_garbage_collection_age_cutoff`).
    pub gc_age_cutoff: f64,
    /// Of those, only files at least this share garbage are collected. Moving a file's live
    /// values costs their bytes and frees its garbage, so a file collected at ratio `g` costs
    /// `(1 - g) / g` bytes written per byte freed: 1 at 0.5, against 3 at 0.25 and 19 at
    /// 0.05, which is what a compaction touching a young file's references pays under
    /// RocksDB's rule. In exchange a file may hold up to this share of garbage before it is
    /// collected. 0 collects every file under the age cutoff, as RocksDB does.
    pub gc_min_garbage_ratio: f64,
    /// When the collected files hold at least this share of garbage, the tables still
    /// referencing them are rewritten for that purpose alone (RocksDB's
    /// `blob_garbage_collection_force_threshold`); 1.0 leaves it to compactions due anyway.
    pub gc_force_threshold: f64,
}

impl Default for BlobOptions {
    fn default() -> Self {
        BlobOptions {
            min_blob_size: 0,
            blob_file_size: 256 << 20,
            blob_compression: CompressionType::None,
            cache_values: false,
            garbage_collection: true,
            gc_age_cutoff: 0.25,
            gc_min_garbage_ratio: 0.5,
            gc_force_threshold: 1.0,
        }
    }
}

impl BlobOptions {
    /// True when values are separated.
    pub fn enabled(&self) -> bool {
        self.min_blob_size > 0
    }

    /// Checks the settings; the error names the offending one.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("gc_age_cutoff", self.gc_age_cutoff),
            ("gc_min_garbage_ratio", self.gc_min_garbage_ratio),
            ("gc_force_threshold", self.gc_force_threshold),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(Error::InvalidArgument(format!(
                    "blob.{name} must be between 0 and 1, got {v}"
                )));
            }
        }
        if self.blob_file_size < 4096 {
            return Err(Error::InvalidArgument(format!(
                "blob.blob_file_size must be at least 4 KiB, got {}",
                self.blob_file_size
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separation_is_off_by_default_and_tiny_files_are_refused() {
        let options = BlobOptions::default();
        assert!(!options.enabled());
        assert!(options.validate().is_ok());
        let tiny = BlobOptions {
            blob_file_size: 100,
            ..options
        };
        assert!(
            tiny.validate()
                .unwrap_err()
                .to_string()
                .contains("blob_file_size")
        );
    }
}
