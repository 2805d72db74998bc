//! One database per prefix. The marker object `PREFIX/SLUICE-OWNER` names the database whose
//! tables live under the prefix, by a random id that the database also keeps in its own
//! directory (`OBJECT-STORE-OWNER`). A database that opened for writing with another's marker
//! in place would upload tables among the other's and, worse, delete the other's tables as
//! obsolete (its orphan sweep lists the prefix): the local `LOCK` file cannot stop that when
//! the two databases are on different machines, or in different directories of one.
//!
//! - Taking the database's `LOCK` exclusively (a read-write open, `repair`, `destroy`) claims
//!   the prefix: with no marker, the database writes its id locally, creates the marker with a
//!   conditional PUT (`If-None-Match: *`) and reads it back, so of two hosts claiming one
//!   prefix at once one succeeds; with a marker, its id must be this database's. Then it takes
//!   the next epoch (`fence.rs`), which fences an earlier open of a copy of this database.
//! - A shared lock (a read-only open) only checks: a marker naming another database fails the
//!   open, a missing one is left missing (read-only commands write nothing).
//! - A database without a `CURRENT` (new, or one whose first claim a crash cut short) never
//!   claims a prefix that already holds objects: they belong to a database that predates
//!   markers, or to one whose marker was deleted. A database that has a `CURRENT` and no
//!   marker claims the prefix it has been using.
//! - No database claims a prefix inside another's: one with a marker on a level above it.
//! - Removing the `LOCK` file (the last step of `Db::destroy`) releases the prefix, under the
//!   lock: the epochs, the marker, if it is this database's, and the local id go with it.
//!
//! A database moved to another directory keeps its id (it is a file of the directory). Two
//! copies of one directory have one id: the marker keeps other databases out, and the epochs
//! keep the earlier-opened copy from writing or deleting once the later one has opened, and
//! from opening for writing again (`fence.rs`).

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use parking_lot::Mutex;

use crate::Inner;
use crate::fence::Fence;
use crate::local_claim::{LOCAL_ID, LocalClaim};
use crate::requests::Requests;

/// The marker's name under the prefix.
pub const MARKER: &str = "SLUICE-OWNER";

/// The most bytes a marker is read for: one written here is under 200 plus the path.
const MAX_MARKER_BYTES: u64 = 4096;

/// The first line of a marker and of the local id file.
pub(crate) const HEADER: &str = "sluice prefix owner v1";

/// A database's id: 128 random bits, as 32 hex digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OwnerId(String);

impl OwnerId {
    pub(crate) fn random() -> OwnerId {
        OwnerId(format!("{:032x}", rand::random::<u128>()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The id in `text` (a marker or the local file): the line `id HEX` after the header.
    pub(crate) fn parse(text: &[u8]) -> Option<OwnerId> {
        let text = std::str::from_utf8(text).ok()?;
        let mut lines = text.lines();
        (lines.next()? == HEADER).then_some(())?;
        let id = lines.next()?.strip_prefix("id ")?;
        let hex = id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit());
        hex.then(|| OwnerId(id.to_ascii_lowercase()))
    }
}

/// What a marker says: the owner's id, and where it was claimed from (for messages, escaped
/// and cut short: anyone with the bucket's keys can write it).
struct Marker {
    id: OwnerId,
    claimed_by: String,
}

impl Inner {
    fn marker_location(&self) -> ObjectPath {
        self.prefix.clone().join(MARKER)
    }

    /// Where the marker is: its name in the store.
    fn marker_name(&self) -> String {
        format!("{} in {}", self.marker_location(), self.store)
    }

    /// Claims the prefix for this database (`exclusive`), or checks that it is not another's.
    /// A claim also takes the next epoch, which fences any earlier open of a copy of this
    /// database (`fence.rs`).
    pub(crate) fn claim(&self, exclusive: bool, fence: &Mutex<Fence>) -> io::Result<()> {
        let claim = self.read_local_claim()?;
        let local = claim.as_ref().map(|c| c.id.clone());
        let claim = match (self.read_marker()?, local) {
            (Some(m), Some(id)) if m.id == id => claim,
            (Some(m), local) => return Err(self.not_ours(&m, local.as_ref())),
            (None, _) if !exclusive => return Ok(()),
            (None, local) => {
                self.refuse_if_taken(claim.as_ref())?;
                self.refuse_if_nested()?;
                // Written again for an id already there: it records the prefix now claimed.
                let claim = LocalClaim {
                    id: local.unwrap_or_else(OwnerId::random),
                    prefix: Some(self.prefix_name()),
                    epoch: claim.and_then(|c| c.epoch),
                };
                self.write_local_claim(&claim)?;
                self.create_marker(&claim.id)?;
                Some(claim)
            }
        };
        match claim.filter(|_| exclusive) {
            Some(claim) => self.take_epoch(fence, claim),
            None => Ok(()),
        }
    }

    /// Fails unless the marker names this database.
    pub(crate) fn check_owned(&self) -> io::Result<()> {
        let local = self.read_local_id()?;
        match (self.read_marker()?, local) {
            (Some(m), Some(id)) if m.id == id => Ok(()),
            (Some(m), local) => Err(self.not_ours(&m, local.as_ref())),
            (None, _) => Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is missing: nothing shows that the objects under the prefix are this \
                     database's",
                    self.marker_name()
                ),
            )),
        }
    }

    /// Releases the prefix: deletes the marker if it names this database, then the local id
    /// (and the temporary file of a claim a crash interrupted).
    pub(crate) fn release(&self, fence: &Mutex<Fence>) -> io::Result<()> {
        remove_if_there(&*self.local, &self.local_id_tmp())?;
        let Some(id) = self.read_local_id()? else {
            return Ok(());
        };
        if self.read_marker()?.is_some_and(|m| m.id == id) {
            // The epochs first: a crash between the two leaves the marker, which still names
            // this database.
            self.release_epochs(fence)?;
            Requests::count(&self.requests.deletes, 1);
            let (store, location) = (Arc::clone(&self.store), self.marker_location());
            self.wait(async move { store.delete(&location).await })?;
        }
        self.local.remove(&self.local_id_path())
    }

    fn not_ours(&self, marker: &Marker, local: Option<&OwnerId>) -> io::Error {
        let this = match local {
            Some(id) => format!("this database's id is {}", id.0),
            None => "this database has no id yet".to_string(),
        };
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} names another database, id {} ({}): its tables live under this prefix, and \
                 {this} (give each database a prefix of its own; delete the marker only if \
                 that database and its tables are gone)",
                self.marker_name(),
                marker.id.0,
                marker.claimed_by
            ),
        )
    }

    /// A database without a `CURRENT` (new, or one whose claim a crash interrupted) claims
    /// only an empty prefix; one that has a `CURRENT` has been using the prefix before markers
    /// existed, or its marker was deleted, unless its claim records another prefix: then it
    /// claims none without a marker. If all the prefix holds is a marker (or epochs), another
    /// claim made it since this one looked: the marker decides, and names its owner.
    fn refuse_if_taken(&self, claim: Option<&LocalClaim>) -> io::Result<()> {
        let local = claim.map(|c| &c.id);
        // The engine's `CURRENT` (this crate does not link the engine to name it).
        if self.local.exists(&self.root.join("CURRENT"))? {
            let recorded = claim.and_then(|c| c.prefix.as_ref());
            return match recorded.filter(|p| **p != self.prefix_name()) {
                None => Ok(()),
                // Its tables are not here, whatever is: a mistaken URL, not a move.
                Some(claimed) => Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} has no owner marker, and this database's tables are under {} (its \
                         {LOCAL_ID} says so): open it with that prefix",
                        self.prefix_name(),
                        describe(claimed)
                    ),
                )),
            };
        }
        Requests::count(&self.requests.lists, 1);
        let (store, prefix) = (Arc::clone(&self.store), self.prefix.clone());
        let first = self.wait(async move {
            use futures::TryStreamExt;
            let mut listing = store.list(Some(&prefix));
            listing.try_next().await
        })?;
        // The epochs sort before the marker: either means another claim may have made it.
        let epochs = self.prefix.clone().join(crate::EPOCHS);
        let claimed = |o: &ObjectMeta| {
            o.location == self.marker_location() || o.location.prefix_matches(&epochs)
        };
        match first {
            None => Ok(()),
            Some(object) if claimed(&object) => match self.read_marker()? {
                // A copy of this database claimed it at the same moment: the epochs decide.
                Some(m) if Some(&m.id) == local => Ok(()),
                Some(m) => Err(self.not_ours(&m, local)),
                // The marker was there and is gone (released since): the prefix is empty.
                None if object.location == self.marker_location() => Ok(()),
                // Epochs with no marker: what a deleted marker left.
                None => Err(self.holds_objects(&object)),
            },
            Some(object) => Err(self.holds_objects(&object)),
        }
    }

    /// The refusal of a prefix that holds `object` and no marker, for a new database.
    fn holds_objects(&self, object: &ObjectMeta) -> io::Error {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} holds objects ({} among them) and no owner marker: they belong to another \
                 database; a new database needs a prefix of its own",
                self.prefix_name(),
                object.location
            ),
        )
    }

    fn read_local_id(&self) -> io::Result<Option<OwnerId>> {
        Ok(self.read_local_claim()?.map(|c| c.id))
    }

    fn read_marker(&self) -> io::Result<Option<Marker>> {
        Requests::count(&self.requests.gets, 1);
        let (store, location) = (Arc::clone(&self.store), self.marker_location());
        let got = self.wait(async move {
            match store.get(&location).await {
                // Anyone with the bucket's keys can write the marker: what is read is bounded.
                Ok(got) if got.meta.size > MAX_MARKER_BYTES => Ok(Some(Bytes::new())),
                Ok(got) => got.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        let Some(bytes) = got else {
            return Ok(None);
        };
        Requests::count(&self.requests.bytes_downloaded, bytes.len() as u64);
        let id = OwnerId::parse(&bytes).ok_or_else(|| {
            let why = match bytes.is_empty() {
                true => format!(" (empty, or more than {MAX_MARKER_BYTES} bytes)"),
                false => String::new(),
            };
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a prefix owner marker{why}", self.marker_name()),
            )
        })?;
        let text = String::from_utf8_lossy(&bytes);
        let claimed_by = describe(text.lines().nth(2).unwrap_or("claimed by an unknown host"));
        Ok(Some(Marker { id, claimed_by }))
    }

    /// Refuses a prefix inside another database's (`s3://b/db/x` when `s3://b/db` has a
    /// marker): that one's tables, keyspaces and tools reach into it. A prefix with another
    /// nested inside is not empty, so `refuse_if_taken` already keeps a new database off it.
    /// One HEAD per level above the prefix, at a claim only.
    fn refuse_if_nested(&self) -> io::Result<()> {
        let mut above = ObjectPath::default();
        for part in self.prefix.parts() {
            let marker = above.clone().join(MARKER);
            match self.head(&marker) {
                Ok(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!(
                            "{} in {} lies inside the prefix of another database ({marker} is \
                             its owner marker): give each database a prefix outside every \
                             other's",
                            self.prefix, self.store
                        ),
                    ));
                }
                // Credentials for this prefix alone may not read above it (S3 answers 403 for
                // a missing key it will not show): nothing to see there, then.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
                    ) => {}
                Err(e) => return Err(e),
            }
            above = above.join(part);
        }
        Ok(())
    }

    /// Creates the marker for `id`, conditionally: if another claim got there first, the
    /// marker it made decides.
    fn create_marker(&self, id: &OwnerId) -> io::Result<()> {
        let text = format!(
            "{HEADER}\nid {}\nclaimed by {} for {}\n",
            id.0,
            host_name(),
            self.root.display()
        );
        Requests::count(&self.requests.puts, 1);
        let (store, location) = (Arc::clone(&self.store), self.marker_location());
        let put = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let payload = PutPayload::from(Bytes::from(text));
        let put = self.wait(async move { store.put_opts(&location, payload, put).await });
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", self.marker_name()));
        match put {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(named(e)),
        }
        // Read back whether the PUT succeeded or found a marker there: a store that ignores
        // `If-None-Match` would otherwise let two claims both succeed.
        match self.read_marker()? {
            Some(m) if &m.id == id => Ok(()),
            Some(m) => Err(self.not_ours(&m, Some(id))),
            None => Err(named(io::Error::new(
                io::ErrorKind::NotFound,
                "the marker was created and is gone",
            ))),
        }
    }
}

/// Removes `path` from `local` if it is there.
pub(crate) fn remove_if_there(
    local: &dyn sluice_sst::fs::FileSystem,
    path: &std::path::Path,
) -> io::Result<()> {
    match local.remove(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A line of a marker or an epoch for a message: anyone with the bucket's keys can write it,
/// so it is escaped and cut short.
pub(crate) fn describe(line: &str) -> String {
    line.escape_debug().take(200).collect()
}

/// This machine's name, for the reader of a marker or an epoch.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "an unknown host".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_from_what_is_written() {
        let id = OwnerId::random();
        let text = format!("{HEADER}\nid {}\nclaimed by h for /d\n", id.0);
        assert_eq!(OwnerId::parse(text.as_bytes()), Some(id.clone()));
        assert_ne!(OwnerId::random(), id);
        for bad in [
            "".to_string(),
            format!("{HEADER}\n"),
            format!("{HEADER}\nid 12\n"),
            format!("{HEADER}\nid {}\n", "g".repeat(32)),
            format!("other\nid {}\n", id.0),
        ] {
            assert_eq!(OwnerId::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
