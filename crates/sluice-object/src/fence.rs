//! Fencing copies of one database. The owner marker (`owner.rs`) keeps *other* databases off a
//! prefix by their ids, but two copies of one directory (a disk snapshot restored elsewhere, a
//! directory copied to another machine while the first still runs) carry one id: each would
//! upload among the other's tables and delete the other's as obsolete. So every open that
//! claims the prefix also takes the next *epoch*, and the newest open owns the prefix (SlateDB
//! fences its writers the same way, with an epoch in its manifest).
//!
//! - An epoch is the object `PREFIX/SLUICE-EPOCH/N`, `N` in 20 digits so that names sort as
//!   numbers, holding a random token and where it was taken from. Taking one lists the epochs,
//!   records the next number and its token in the directory (`local_claim.rs`), and creates
//!   that epoch with a conditional PUT (`If-None-Match: *`); of two copies after one number,
//!   the store lets one create it and refuses the other. Then it deletes the older ones.
//! - A claim is refused when the newest epoch is neither the one the directory recorded last
//!   nor below it: another copy has opened since, and this one is stale. Its MANIFEST names
//!   none of that copy's tables, so opening it for writing would sweep them away (which is
//!   where the MANIFEST being local, unlike SlateDB's, shows). The error says how to take the
//!   prefix back on purpose: delete the `epoch` line of the directory's record.
//! - Before every upload, deletion and copy under the prefix, the holder lists the epochs.
//!   Unless the newest is still its own (its number and the entity tag the store gave it), a
//!   later open has taken the prefix and this one is *fenced*: the operation fails with
//!   [`io::ErrorKind::PermissionDenied`], naming that open, and so does every later one,
//!   without a request. The engine logs a failed deletion and stops at a failed upload (its
//!   background error), so a fenced copy neither deletes what the newer one reads nor writes
//!   where it writes.
//! - The tag matters when the holder's epoch object is gone and another with its number was
//!   made since (the prefix released by `destroy` and claimed again): that one is not its own.
//! - The epoch stays this file system's after the database closes, and a fenced one stays
//!   fenced (its next claim is refused as stale): `destroy` (which releases the prefix after
//!   letting go of the lock) and `remove_objects` check it too.
//! - A worker writing into the bucket for a host checks the host's epoch, which every task
//!   carries ([`FileSystem::write_fence`](sluice_sst::fs::FileSystem::write_fence) on the
//!   host, [`ObjectFs::fenced_by`](crate::ObjectFs::fenced_by) on the worker): the host's
//!   copy numbers its outputs as the host does, so a fenced host's worker would otherwise
//!   upload under names the copy uses, or (a multipart upload) over its tables.
//! - A file system that never claimed the prefix nor writes for one that did (a read-only
//!   open's, a tool's) checks nothing.
//!
//! What it does not do: the check and the operation are two requests, so an open that takes
//! the prefix between them does not stop that one operation (S3 has no conditional delete to
//! close the window). And the newest open wins: a copy opened later takes the prefix from a
//! database still running, whose tables written since the copy become the newer one's to
//! sweep. A store whose conditional create is not atomic (`s3s-fs`, see design note 0017) can
//! let two copies opening at the same moment take one number; the first check after that
//! finds the other's tag and fences the one whose object was replaced, and its next claim is
//! refused as stale.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use parking_lot::Mutex;
use sluice_sst::fs::WriteFence;

use crate::Inner;
use crate::local_claim::{LocalClaim, RecordedEpoch};
use crate::owner::{describe, host_name};
use crate::requests::Requests;

/// The directory of epochs under the prefix.
pub const EPOCHS: &str = "SLUICE-EPOCH";

/// The first line of an epoch object.
const HEADER: &str = "sluice prefix epoch v1";

/// The most bytes read of an epoch object: its token is in the first hundred, and one written
/// here is under 200 plus the path.
const MAX_EPOCH_BYTES: u64 = 4096;

/// Whether a file system holds the prefix, and by which epoch: an `ObjectFs`'s, shared with
/// the writers it creates.
#[derive(Debug, Default)]
pub(crate) enum Fence {
    /// No epoch: the prefix was never claimed through this file system (or was released).
    #[default]
    Unclaimed,
    /// Took this epoch at its last claim (or writes for a host that did: a worker's), the
    /// newest when last checked.
    Holding(WriteFence),
    /// A later claim has taken the prefix from `epoch`: `why`, for every later refusal.
    Fenced { epoch: WriteFence, why: String },
}

impl Fence {
    /// The epoch held, fenced or not.
    pub(crate) fn epoch(&self) -> Option<&WriteFence> {
        match self {
            Fence::Unclaimed => None,
            Fence::Holding(epoch) | Fence::Fenced { epoch, .. } => Some(epoch),
        }
    }
}

impl Inner {
    fn epochs_dir(&self) -> ObjectPath {
        self.prefix.clone().join(EPOCHS)
    }

    fn epoch_location(&self, number: u64) -> ObjectPath {
        self.epochs_dir().join(format!("{number:020}"))
    }

    /// The epochs under the prefix, oldest first. Objects there whose names are not epochs
    /// (nested deeper, too) are left out: a stray one must not fence every open.
    fn list_epochs(&self) -> io::Result<Vec<(u64, ObjectMeta)>> {
        let (store, dir) = (Arc::clone(&self.store), self.epochs_dir());
        let listed: Vec<ObjectMeta> = self.wait(async move {
            store
                .list_with_delimiter(Some(&dir))
                .await
                .map(|l| l.objects)
        })?;
        self.requests.count_listing(listed.len());
        let mut epochs: Vec<(u64, ObjectMeta)> = listed
            .into_iter()
            .filter_map(|meta| {
                let name = meta.location.filename()?;
                let digits = name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit());
                let number = digits.then(|| name.parse().ok()).flatten()?;
                Some((number, meta))
            })
            .collect();
        epochs.sort_unstable_by_key(|(number, _)| *number);
        Ok(epochs)
    }

    /// Takes the epoch above the newest for the database whose record is `claim` (see the
    /// module docs), then deletes the older ones. Refuses when another copy of the database
    /// has taken one since this directory's last claim (`refuse_if_stale`), or takes the same
    /// number at the same moment.
    pub(crate) fn take_epoch(&self, fence: &Mutex<Fence>, claim: LocalClaim) -> io::Result<()> {
        let older = self.list_epochs()?;
        if let (Some(last), Some((newest, meta))) = (&claim.epoch, older.last()) {
            self.refuse_if_stale(last, *newest, meta)?;
        }
        let number = match older.last() {
            None => 1,
            Some((newest, _)) => newest.checked_add(1).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: the epochs are used up", self.epochs_dir()),
                )
            })?,
        };
        let token = format!("{:032x}", rand::random::<u128>());
        // Recorded before the epoch is made: a crash between the two leaves a record above
        // every epoch there, which the next claim accepts.
        self.write_local_claim(&LocalClaim {
            prefix: Some(self.prefix_name()),
            epoch: Some(RecordedEpoch {
                number,
                token: token.clone(),
            }),
            ..claim
        })?;
        let text = format!(
            "{HEADER}\ntoken {token}\nopened by {} for {}\n",
            host_name(),
            self.root.display()
        );
        Requests::count(&self.requests.puts, 1);
        let (store, location) = (Arc::clone(&self.store), self.epoch_location(number));
        let put = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let payload = PutPayload::from(Bytes::from(text));
        let e_tag = match self.wait(async move { store.put_opts(&location, payload, put).await }) {
            Ok(done) => done.e_tag,
            // The store's client retries a PUT whose answer was lost, and the retry finds the
            // object the first try made: ours if it holds our token.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                self.made_by_this_claim(number, &token)?
            }
            Err(e) => {
                let at = self.epoch_location(number);
                return Err(io::Error::new(e.kind(), format!("{at}: {e}")));
            }
        };
        *fence.lock() = Fence::Holding(WriteFence {
            epoch: number,
            e_tag,
        });
        // One left behind is only listed again: the newest decides.
        if let Err(e) = self.delete_epochs(older.iter().map(|(n, _)| *n)) {
            tracing::debug!(error = %e, "could not delete the older epochs");
        }
        Ok(())
    }

    /// After the store answered that epoch `number` exists: its entity tag if it holds
    /// `token` (this claim made it), else the refusal of a claim another copy won.
    fn made_by_this_claim(&self, number: u64, token: &str) -> io::Result<Option<String>> {
        let location = self.epoch_location(number);
        let meta = self.head(&location).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{location}: the store said it exists, and then: {e}"),
            )
        })?;
        let text = self.read_epoch(&meta)?;
        if token_of(&text) == Some(token) {
            return Ok(meta.e_tag);
        }
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{location}: another copy of this database took epoch {number} at the same \
                 moment ({}), and holds the prefix",
                opened_by(&text)
            ),
        ))
    }

    /// Refuses a claim when the newest epoch is not the one this directory took last (`last`)
    /// nor below it: another copy of the database has taken the prefix since, and this one is
    /// stale. Its MANIFEST does not name that copy's tables, so opening it for writing would
    /// delete them. Below is fine: this directory recorded an epoch and a crash kept it from
    /// making it. An epoch that cannot be read fails the claim with that error, not as stale.
    fn refuse_if_stale(
        &self,
        last: &RecordedEpoch,
        newest: u64,
        meta: &ObjectMeta,
    ) -> io::Result<()> {
        if newest < last.number {
            return Ok(());
        }
        let text = if newest == last.number {
            let text = self.read_epoch(meta)?;
            if token_of(&text) == Some(last.token.as_str()) {
                return Ok(());
            }
            text
        } else {
            // Only for the message.
            self.read_epoch(meta).unwrap_or_default()
        };
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} in {}: epoch {newest} is the newest ({}), and this directory's last claim \
                 took epoch {} (token {}): another copy of this database has opened on the \
                 prefix since, so this copy is stale, and opening it for writing would delete \
                 that copy's tables. If that copy is gone for good and this directory is to own \
                 the prefix again, delete the line starting with `epoch` from {} and open again",
                self.epochs_dir(),
                self.store,
                opened_by(&text),
                last.number,
                last.token,
                self.local_id_path().display()
            ),
        ))
    }

    /// Deletes the epochs `numbers`.
    fn delete_epochs(&self, numbers: impl Iterator<Item = u64>) -> io::Result<()> {
        for number in numbers {
            Requests::count(&self.requests.deletes, 1);
            let (store, location) = (Arc::clone(&self.store), self.epoch_location(number));
            self.wait(async move { store.delete(&location).await })?;
        }
        Ok(())
    }

    /// Deletes every epoch, unless this file system is fenced: the prefix is being released
    /// (`owner.rs`).
    pub(crate) fn release_epochs(&self, fence: &Mutex<Fence>) -> io::Result<()> {
        self.check_fence(fence)?;
        let epochs = self.list_epochs()?;
        self.delete_epochs(epochs.iter().map(|(n, _)| *n))?;
        *fence.lock() = Fence::Unclaimed;
        Ok(())
    }

    /// Fails if a later open has taken the prefix from this one (see the module docs). Called
    /// before every upload, deletion and copy under the prefix.
    pub(crate) fn check_fence(&self, fence: &Mutex<Fence>) -> io::Result<()> {
        let held = match &*fence.lock() {
            Fence::Unclaimed => return Ok(()),
            Fence::Holding(epoch) => epoch.clone(),
            Fence::Fenced { why, .. } => return Err(fenced(why)),
        };
        let epochs = self.list_epochs()?;
        let newest = epochs.last();
        if let Some((number, listed)) = newest
            && self.is_held(&held, *number, listed)?
        {
            return Ok(());
        }
        let why = self.why_fenced(&held, newest);
        let mut fence = fence.lock();
        // Unless the database was opened again meanwhile, with an epoch of its own.
        if matches!(&*fence, Fence::Holding(epoch) if *epoch == held) {
            *fence = Fence::Fenced {
                epoch: held,
                why: why.clone(),
            };
        }
        Err(fenced(&why))
    }

    /// The text of the epoch `meta` lists: its first [`MAX_EPOCH_BYTES`] (one written here
    /// is far shorter; anyone with the bucket's keys can write a longer one).
    fn read_epoch(&self, meta: &ObjectMeta) -> io::Result<String> {
        let end = meta.size.min(MAX_EPOCH_BYTES);
        if end == 0 {
            return Ok(String::new());
        }
        Requests::count(&self.requests.gets, 1);
        let (store, location) = (Arc::clone(&self.store), meta.location.clone());
        let bytes = self.wait(async move { store.get_range(&location, 0..end).await })?;
        Requests::count(&self.requests.bytes_downloaded, bytes.len() as u64);
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Whether the epoch `number` listed as `listed` is the object `held` created: its
    /// number, and the tag the store gave it when it has one. A store that lists no tags
    /// (`s3s-fs`) is asked for this one's with a HEAD.
    fn is_held(&self, held: &WriteFence, number: u64, listed: &ObjectMeta) -> io::Result<bool> {
        if number != held.epoch {
            return Ok(false);
        }
        let Some(mine) = &held.e_tag else {
            return Ok(true);
        };
        if let Some(theirs) = &listed.e_tag {
            return Ok(mine == theirs);
        }
        match self.head(&listed.location) {
            Ok(meta) => Ok(meta.e_tag.as_ref() == Some(mine)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// What took the prefix from `held`: the newest epoch, named by what it says of itself.
    fn why_fenced(&self, held: &WriteFence, newest: Option<&(u64, ObjectMeta)>) -> String {
        let taken = match newest {
            None => "no epoch is left there (the prefix was released)".to_string(),
            Some((number, meta)) => {
                let opened = opened_by(&self.read_epoch(meta).unwrap_or_default());
                format!("epoch {number} is the newest, {opened}")
            }
        };
        format!(
            "{} in {}: this open of the database took epoch {}, and {taken}: a later open of \
             this database (a copy of its directory?) has taken the prefix, and this one may \
             no longer upload or delete there",
            self.epochs_dir(),
            self.store,
            held.epoch
        )
    }
}

/// The token an epoch's text holds.
fn token_of(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("token "))
}

/// Where an epoch's text says it was taken from, for a message.
fn opened_by(text: &str) -> String {
    text.lines()
        .nth(2)
        .map_or_else(|| "opened by an unknown host".to_string(), describe)
}

/// The error of a fenced operation.
fn fenced(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, format!("fenced: {why}"))
}
