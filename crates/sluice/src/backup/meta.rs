//! A backup's description: which stored files make it up, under which names they go back
//! into a database, and their sizes and CRC32Cs. `docs/format/backup.md` has the bytes.
//!
//! ```text
//! sluice-backup 1
//! id 3
//! created 1764140000
//! sequence 12345
//! manifest 7
//! file shared/000012_1a2b3c4d_30120611.sst 000012.sst 30120611 9f8e7d6c
//! file private/3-000028.log 000028.log 35214968 01234567
//! file private/3-MANIFEST-000007 MANIFEST-000007 1760 89abcdef
//! crc 1234abcd
//! ```
//!
//! The last line is the CRC32C of every byte before it, so a damaged or cut description is
//! an error, never a smaller backup.

use std::fmt::Write as _;

use sluice_sst::checksum::crc32c;

/// One file of a backup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupFile {
    /// Where it is stored, relative to the backup directory (`shared/...` or `private/...`).
    pub stored: String,
    /// Its name in a restored database (a plain file name).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// CRC32C of its bytes.
    pub crc32c: u32,
}

/// A backup's description, as written to `meta/<id>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupMeta {
    /// The backup's number, from 1, increasing.
    pub id: u64,
    /// When it was made, in seconds since the Unix epoch.
    pub created_unix_secs: u64,
    /// Every write up to this sequence number is in it.
    pub sequence: u64,
    /// The number of its MANIFEST, which a restore names in `CURRENT`.
    pub manifest_number: u64,
    /// Its files: tables, WALs and the MANIFEST.
    pub files: Vec<BackupFile>,
}

const MAGIC: &str = "sluice-backup 1";

impl BackupMeta {
    /// The description's bytes.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(s, "{MAGIC}");
        let _ = writeln!(s, "id {}", self.id);
        let _ = writeln!(s, "created {}", self.created_unix_secs);
        let _ = writeln!(s, "sequence {}", self.sequence);
        let _ = writeln!(s, "manifest {}", self.manifest_number);
        for f in &self.files {
            let _ = writeln!(
                s,
                "file {} {} {} {:08x}",
                f.stored, f.name, f.size, f.crc32c
            );
        }
        let crc = crc32c(s.as_bytes());
        let _ = writeln!(s, "crc {crc:08x}");
        s
    }

    /// Parses a description; the error says what is wrong (the caller adds the file).
    pub fn decode(bytes: &[u8]) -> Result<BackupMeta, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
        let body_len = text.trim_end_matches('\n').rfind('\n').map_or(0, |i| i + 1);
        let (body, last) = text.split_at(body_len);
        let stored_crc = last
            .strip_prefix("crc ")
            .and_then(|c| c.strip_suffix('\n'))
            .ok_or("its last line is not `crc <hex>`: cut short?")?;
        let stored_crc = u32::from_str_radix(stored_crc, 16).map_err(|_| "bad crc line")?;
        if crc32c(body.as_bytes()) != stored_crc {
            return Err("checksum mismatch".into());
        }
        let mut lines = body.lines();
        if lines.next() != Some(MAGIC) {
            return Err(format!("does not start with `{MAGIC}`"));
        }
        let mut field = |name: &str| -> Result<u64, String> {
            let line = lines.next().unwrap_or_default();
            line.strip_prefix(name)
                .and_then(|v| v.strip_prefix(' '))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("expected `{name} <number>`, found `{line}`"))
        };
        let (id, created_unix_secs, sequence, manifest_number) = (
            field("id")?,
            field("created")?,
            field("sequence")?,
            field("manifest")?,
        );
        let files = lines
            .map(|line| parse_file_line(line).ok_or_else(|| format!("bad line `{line}`")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BackupMeta {
            id,
            created_unix_secs,
            sequence,
            manifest_number,
            files,
        })
    }

    /// Bytes of all its files.
    pub fn size(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
}

fn parse_file_line(line: &str) -> Option<BackupFile> {
    let mut parts = line.strip_prefix("file ")?.split(' ');
    let (stored, name, size, crc) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !safe_stored_path(stored) || !safe_restore_name(name) {
        return None;
    }
    Some(BackupFile {
        stored: stored.to_string(),
        name: name.to_string(),
        size: size.parse().ok()?,
        crc32c: u32::from_str_radix(crc, 16).ok()?,
    })
}

/// A plain file name: restoring it cannot reach outside the target directory.
pub(crate) fn safe_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
}

/// A plain file name, or one in a keyspace's directory (`keyspaces/<id>/<name>`): restoring it
/// cannot reach outside the target directory.
pub(crate) fn safe_restore_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("keyspaces/") else {
        return safe_file_name(name);
    };
    match rest.split_once('/') {
        Some((id, file)) => {
            crate::keyspace::options::parse_keyspace_dir(std::ffi::OsStr::new(id)).is_some()
                && safe_file_name(file)
        }
        None => false,
    }
}

/// `shared/<name>` or `private/<name>`: reading it cannot reach outside the backup directory.
fn safe_stored_path(stored: &str) -> bool {
    match stored.split_once('/') {
        Some(("shared" | "private", name)) => safe_file_name(name),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

    use super::*;

    fn sample() -> BackupMeta {
        BackupMeta {
            id: 3,
            created_unix_secs: 1_764_140_000,
            sequence: 12_345,
            manifest_number: 7,
            files: vec![
                BackupFile {
                    stored: "shared/000012_1a2b3c4d_30120611.sst".into(),
                    name: "000012.sst".into(),
                    size: 30_120_611,
                    crc32c: 0x9f8e_7d6c,
                },
                BackupFile {
                    stored: "private/3-MANIFEST-000007".into(),
                    name: "MANIFEST-000007".into(),
                    size: 1760,
                    crc32c: 0x89ab_cdef,
                },
            ],
        }
    }

    #[test]
    fn a_description_round_trips() {
        let meta = sample();
        let text = meta.encode();
        assert!(text.starts_with("sluice-backup 1\nid 3\n"), "{text}");
        assert_eq!(BackupMeta::decode(text.as_bytes()).unwrap(), meta);
        assert_eq!(meta.size(), 30_120_611 + 1760);
    }

    #[test]
    fn any_changed_or_missing_byte_is_refused() {
        let text = sample().encode().into_bytes();
        for cut in 0..text.len() {
            assert!(BackupMeta::decode(&text[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..text.len() {
            let mut bad = text.clone();
            bad[at] ^= 0x01;
            assert!(BackupMeta::decode(&bad).is_err(), "flip at {at}");
        }
    }

    #[test]
    fn paths_that_leave_their_directory_are_refused_even_with_a_good_crc() {
        for (stored, name) in [
            ("shared/../../etc/passwd", "x"),
            ("private/a", "../escape"),
            ("elsewhere/a", "a"),
            ("shared/", "a"),
            ("shared/a", "a/b"),
        ] {
            let mut meta = sample();
            meta.files[0].stored = stored.into();
            meta.files[0].name = name.into();
            let err = BackupMeta::decode(meta.encode().as_bytes()).unwrap_err();
            assert!(err.contains("bad line"), "{stored} {name}: {err}");
        }
    }
}
