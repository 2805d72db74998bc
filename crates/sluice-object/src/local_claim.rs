//! The database's own record of its claim on a prefix: the file `OBJECT-STORE-OWNER` in its
//! directory. It holds the database's id (which the prefix's marker must name, `owner.rs`),
//! the prefix it claimed, and the epoch it took last (`fence.rs`), so that a copy of the
//! directory which another copy has since fenced cannot take the prefix back by opening again
//! (its sweep would delete the other copy's tables):
//!
//! ```text
//! sluice prefix owner v1
//! id 0123456789abcdef0123456789abcdef
//! epoch 7 89abcdef0123456789abcdef01234567
//! prefix AmazonS3(tables)/db
//! ```
//!
//! The `prefix` and `epoch` lines are absent from files written before they were recorded;
//! such a file claims as before. The file is written whole to a temporary name, synced,
//! renamed over the old one and the directory synced, so a crash leaves the old record or the
//! new one.

use std::io;
use std::path::PathBuf;

use sluice_sst::fs::IoMode;

use crate::Inner;
use crate::owner::{HEADER, OwnerId, remove_if_there};

/// The file in the database directory that holds the database's claim.
pub const LOCAL_ID: &str = "OBJECT-STORE-OWNER";

/// The most bytes it may hold: one written here is under 150 plus the prefix's name. A longer
/// one is refused rather than read in part.
const MAX_BYTES: u64 = 4096;

/// What the database's directory records of its claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LocalClaim {
    pub id: OwnerId,
    /// The prefix claimed, as [`Inner::prefix_name`] names it.
    pub prefix: Option<String>,
    /// The epoch taken last.
    pub epoch: Option<RecordedEpoch>,
}

/// An epoch as the directory records it: its number, and the random token written into its
/// object, which tells it apart from another epoch of that number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RecordedEpoch {
    pub number: u64,
    pub token: String,
}

impl LocalClaim {
    fn parse(text: &[u8]) -> Option<LocalClaim> {
        let id = OwnerId::parse(text)?;
        let text = std::str::from_utf8(text).ok()?;
        let prefix = text
            .lines()
            .find_map(|l| l.strip_prefix("prefix "))
            .map(str::to_string);
        let epoch = match text.lines().find_map(|l| l.strip_prefix("epoch ")) {
            None => None,
            Some(line) => {
                let (number, token) = line.split_once(' ')?;
                let hex = token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit());
                Some(RecordedEpoch {
                    number: number.parse().ok()?,
                    token: hex.then(|| token.to_string())?,
                })
            }
        };
        Some(LocalClaim { id, prefix, epoch })
    }

    fn text(&self) -> String {
        let mut text = format!("{HEADER}\nid {}\n", self.id.as_str());
        if let Some(epoch) = &self.epoch {
            text.push_str(&format!("epoch {} {}\n", epoch.number, epoch.token));
        }
        if let Some(prefix) = &self.prefix {
            text.push_str(&format!("prefix {prefix}\n"));
        }
        text
    }
}

impl Inner {
    pub(crate) fn local_id_path(&self) -> PathBuf {
        self.root.join(LOCAL_ID)
    }

    pub(crate) fn local_id_tmp(&self) -> PathBuf {
        self.root.join(format!("{LOCAL_ID}.new"))
    }

    /// The prefix as the claim records it: the store, then the prefix.
    pub(crate) fn prefix_name(&self) -> String {
        format!("{}/{}", self.store, self.prefix)
    }

    /// The directory's claim; `None` if it never claimed a prefix.
    pub(crate) fn read_local_claim(&self) -> io::Result<Option<LocalClaim>> {
        let path = self.local_id_path();
        match self.local.read_prefix(&path, MAX_BYTES + 1) {
            Ok(text) => LocalClaim::parse(&text)
                .filter(|_| text.len() as u64 <= MAX_BYTES)
                .map(Some)
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{}: not a prefix owner id (or longer than {MAX_BYTES} bytes)",
                            path.display()
                        ),
                    )
                }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces the directory's claim with `claim`, durably.
    pub(crate) fn write_local_claim(&self, claim: &LocalClaim) -> io::Result<()> {
        let path = self.local_id_path();
        let tmp = self.local_id_tmp();
        // Left by a crash during an earlier write: the old record still stands.
        remove_if_there(&*self.local, &tmp)?;
        let mut file = self.local.create(&tmp, IoMode::Buffered)?;
        file.append(claim.text().as_bytes())?;
        file.sync()?;
        drop(file);
        self.local.rename(&tmp, &path)?;
        self.local.sync_dir(&self.root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_read_back_what_is_written_and_older_files_still_read() {
        let id = OwnerId::random();
        let full = LocalClaim {
            id: id.clone(),
            prefix: Some("AmazonS3(b)/db".to_string()),
            epoch: Some(RecordedEpoch {
                number: 7,
                token: "ab".repeat(16),
            }),
        };
        assert_eq!(LocalClaim::parse(full.text().as_bytes()), Some(full));
        let old = format!("{HEADER}\nid {}\n", id.as_str());
        let read = LocalClaim::parse(old.as_bytes()).unwrap();
        assert_eq!((read.id, read.prefix, read.epoch), (id.clone(), None, None));
        for bad in [
            "epoch x y",
            "epoch 7",
            "epoch 7 abc",
            &format!("epoch 7 {}", "g".repeat(32)),
        ] {
            let text = format!("{HEADER}\nid {}\n{bad}\n", id.as_str());
            assert_eq!(LocalClaim::parse(text.as_bytes()), None, "{bad}");
        }
    }
}
