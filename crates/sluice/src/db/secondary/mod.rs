//! Secondary instances: a read-only open that follows a primary while it runs, in another
//! process or this one (RocksDB's `OpenAsSecondary` and `TryCatchUpWithPrimary`).
//!
//! A secondary takes no lock and writes nothing in the primary's directory (its `LOG` goes to
//! a directory of its own). Each catch-up reads what the primary appended to its MANIFESTs
//! (the database's and every keyspace's) and WALs since the last one, and publishes the result
//! at once: readers see the state of the primary as of one sequence number, the highest the
//! secondary read.
//!
//! A catch-up runs in rounds. Each round
//! 1. follows the MANIFESTs, the database's first (it names the keyspaces and the WAL floor),
//!    into version sets of the follower's own;
//! 2. opens every table and blob file those versions list and holds them open: from then on
//!    the primary may delete them and readers of those versions still read them;
//! 3. reads the WALs from where it stopped, the database's floor on, into memtables of one WAL
//!    each, skipping each tree's entries in WALs below its own floor;
//! 4. reads the MANIFESTs again. If they grew (a flush, a compaction or an ingest landed while
//!    the WALs were read), another round follows: an ingest's tables carry sequence numbers no
//!    WAL has, and the state published must hold every write at or below its number.
//!
//! A round starts again when the primary deleted a file before it could be held, a WAL the
//! follower still needed, or a MANIFEST it was reading: in every case a newer MANIFEST says
//! where that data went. A file the latest MANIFEST lists that is missing is `Corruption`.
//!
//! The primary never sees the secondary's snapshots, so its compactions may drop versions they
//! see: a snapshot taken before a catch-up that installed a compaction is refused
//! ([`super::open_id::OpenId::check_generation`]). Iterators keep their version and memtables,
//! and so their files: they read the state they were made with to the end.

mod round;
mod tree;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_sst::cache::BlockCache;
use sluice_sst::key::SeqNo;

use self::tree::FollowedTree;
use super::journal::Journal;
use super::open::Parts;
use super::recover::numbered_files;
use crate::batch::DEFAULT_KEYSPACE_ID;
use crate::filename::current_file_name;
use crate::info_log::InfoLog;
use crate::keyspace::DEFAULT_KEYSPACE;
use crate::options::Options;
use crate::table_cache::TableCache;
use crate::version::Version;
use crate::version::edit::NUM_LEVELS;
use crate::{Error, IoContext, Result};

/// Rounds a catch-up tries before it gives up with `Busy` (see the module docs).
const MAX_ROUNDS: u32 = 64;

/// The follower of a secondary instance's journal.
pub(crate) struct Follower {
    state: Mutex<FollowState>,
    /// The secondary's own `LOG`, in its scratch directory.
    log: Option<Arc<InfoLog>>,
}

/// What the follower has read so far.
struct FollowState {
    /// The default keyspace's tree, whose MANIFEST is the database's.
    default: FollowedTree,
    /// The other keyspaces' trees, by id.
    keyspaces: BTreeMap<u32, FollowedTree>,
    /// Per WAL still needed: the bytes read through (the end of its last complete record).
    wals: BTreeMap<u64, u64>,
    /// The highest sequence number read from a WAL.
    wal_seq: SeqNo,
    /// The block cache every tree's tables share.
    block_cache: Option<Arc<BlockCache>>,
}

/// How a round ended.
enum Round {
    /// Nothing moved while the WALs were read: the state may be published.
    Settled,
    /// The primary moved on under the round; why.
    Again(String),
}

/// What following the MANIFESTs found.
enum Manifests {
    Unchanged,
    Grew,
    /// The primary deleted something the follower was reading; why.
    Again(String),
}

/// Opens a secondary instance of the database in `dir`, whose `LOG` goes to `scratch`, and
/// catches it up once.
pub(super) fn open_secondary(dir: &Path, scratch: &Path, options: Options) -> Result<Journal> {
    options.validate()?;
    let fs = &*options.fs;
    let current = current_file_name(dir);
    if !fs.exists(&current).with_path(&current)? {
        return Err(Error::InvalidArgument(format!(
            "{} holds no database",
            dir.display()
        )));
    }
    if resolved(scratch).starts_with(resolved(dir)) {
        return Err(Error::InvalidArgument(format!(
            "a secondary instance needs a directory of its own, not {} in its primary's {}",
            scratch.display(),
            dir.display()
        )));
    }
    crate::filename::create_dir_all_durably(fs, scratch)?;
    let block_cache = match &options.block_cache {
        Some(shared) => Some(Arc::clone(shared)),
        None => (options.block_cache_bytes > 0)
            .then(|| Arc::new(BlockCache::new(options.block_cache_bytes))),
    };
    let table_cache = Arc::new(
        TableCache::new(options.table_dirs(dir), &options, block_cache.clone()).holding_files(),
    );
    let default = FollowedTree::new(
        DEFAULT_KEYSPACE,
        dir.to_path_buf(),
        options.clone(),
        Arc::clone(&table_cache),
    );
    let parts = Parts::empty();
    let log = InfoLog::open(options.fs.clone(), scratch, &options.info_log);
    let mut journal = super::open::new_secondary_journal(dir, options, table_cache, parts)?;
    if let Some(log) = &log {
        log.line(&format!(
            "open: secondary instance of {} (sluice {})",
            dir.display(),
            env!("CARGO_PKG_VERSION")
        ));
    }
    journal.follower = Some(Follower {
        state: Mutex::new(FollowState {
            default,
            keyspaces: BTreeMap::new(),
            wals: BTreeMap::new(),
            wal_seq: 0,
            block_cache,
        }),
        log,
    });
    journal.catch_up()?;
    Ok(journal)
}

impl Journal {
    /// Catches a secondary instance up with its primary (see the module docs); returns the
    /// sequence number its reads now see.
    pub(crate) fn catch_up(&self) -> Result<SeqNo> {
        let Some(follower) = &self.follower else {
            return Err(Error::InvalidArgument(format!(
                "{} is not open as a secondary instance",
                self.default.dir.display()
            )));
        };
        let mut st = follower.state.lock();
        let mut why = String::new();
        for round in 0..MAX_ROUNDS {
            match st.round(&self.default.dir)? {
                Round::Settled => {
                    let seq = self.publish(&mut st)?;
                    if let Some(log) = &follower.log {
                        log.line(&format!(
                            "catch-up: at sequence {seq} after {} round(s)",
                            round + 1
                        ));
                    }
                    return Ok(seq);
                }
                Round::Again(reason) => {
                    tracing::debug!(round, reason, "catch-up round starts again");
                    why = reason;
                    // The primary is mid-change: give it a moment, longer each time.
                    std::thread::sleep(Duration::from_millis(u64::from(round)));
                }
            }
        }
        Err(Error::Busy(format!(
            "the secondary instance of {} did not catch up in {MAX_ROUNDS} rounds: the \
             primary changed under each (last: {why})",
            self.default.dir.display()
        )))
    }

    /// Makes what the follower read the state readers see, in every tree at once.
    fn publish(&self, st: &mut FollowState) -> Result<SeqNo> {
        let floors = st.wal_floors();
        let floor = |id| floors.get(&id).copied().unwrap_or(0);
        st.default.drop_flushed(floor(DEFAULT_KEYSPACE_ID));
        for (&id, tree) in &mut st.keyspaces {
            tree.drop_flushed(floor(id));
        }
        self.attach_followed_keyspaces(st)?;
        let mut trees = vec![(DEFAULT_KEYSPACE_ID, Arc::clone(&self.default))];
        trees.extend(self.trees().iter().map(|t| (t.id, Arc::clone(&t.tree))));
        let mut guards: Vec<_> = trees.iter().map(|(_, t)| t.state.lock()).collect();
        let mut seq = self.visible_seq.load(Ordering::Acquire).max(st.wal_seq);
        let mut older_snapshots_break = false;
        for ((id, _), guard) in trees.iter().zip(guards.iter_mut()) {
            let followed = match *id {
                DEFAULT_KEYSPACE_ID => &st.default,
                id => match st.keyspaces.get(&id) {
                    Some(followed) => followed,
                    None => continue, // dropped: detached below
                },
            };
            older_snapshots_break |=
                drops_or_backdates(guard.versions.current(), followed.versions.current());
            guard.versions.adopt(&followed.versions);
            guard.imm = followed.mems.iter().cloned().collect();
            seq = seq.max(followed.versions.last_sequence);
        }
        let visible = &self.visible_seq;
        match older_snapshots_break {
            true => self
                .open_id
                .new_generation(|| visible.store(seq, Ordering::Release)),
            false => visible.store(seq, Ordering::Release),
        }
        drop(guards);
        for (id, tree) in &trees {
            if *id != DEFAULT_KEYSPACE_ID && !st.keyspaces.contains_key(id) {
                tree.dropped.store(true, Ordering::Release);
                self.keyspaces.write().remove(id);
            }
            let live = tree.state.lock().versions.live_file_numbers();
            tree.table_cache.release_all_but(&live);
        }
        Ok(seq)
    }

    /// Builds, empty, the trees of keyspaces the follower found that readers cannot reach
    /// yet: the publication under way gives them their state with everyone else's.
    fn attach_followed_keyspaces(&self, st: &FollowState) -> Result<()> {
        for (&id, followed) in &st.keyspaces {
            if self.keyspaces.read().contains_key(&id) {
                continue;
            }
            self.attach_followed(
                (id, &followed.name),
                followed.dir.clone(),
                followed.options.clone(),
                Arc::clone(&followed.table_cache),
                Parts::empty(),
            )?;
        }
        Ok(())
    }
}

/// Whether replacing version `before` by `after` may change what a read at an older sequence
/// number sees: a table left (a compaction, which may have dropped versions such a read sees)
/// or one came in below L0 (an ingest, a range move or a compaction's output, whose entries
/// may carry old sequence numbers). A flush only adds to L0 what the memtables held.
fn drops_or_backdates(before: &Arc<Version>, after: &Arc<Version>) -> bool {
    if Arc::ptr_eq(before, after) {
        return false;
    }
    let had: HashSet<u64> = before.live_files().map(|f| f.number).collect();
    let has: HashSet<u64> = after.live_files().map(|f| f.number).collect();
    if had.iter().any(|n| !has.contains(n)) {
        return true;
    }
    (1..NUM_LEVELS).any(|level| after.files(level).iter().any(|f| !had.contains(&f.number)))
}

/// `path` made absolute, with symbolic links and `..` resolved as far as it exists.
fn resolved(path: &Path) -> std::path::PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    for existing in absolute.ancestors() {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let rest = absolute.strip_prefix(existing).unwrap_or(Path::new(""));
            return real.join(rest);
        }
    }
    absolute
}
