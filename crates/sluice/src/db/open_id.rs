//! Which open database a handle came from.
//!
//! A keyspace id or a sequence number means something only in the database that issued it: a
//! batch entry added through another database's `users` handle carries only that handle's id,
//! which here may be `orders`; a snapshot of another database may read at a sequence number
//! this one has not published. So snapshots, keyspace handles and the batch entries added
//! through keyspace handles carry the [`OpenId`] of the open that made them, and a database
//! refuses those of any other, including an earlier open of itself: its snapshots are
//! released and its keyspace ids may since have been dropped.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

/// Numbers opens in this process; 0 is never given.
static NEXT_OPEN: AtomicU64 = AtomicU64::new(1);

/// One open of a database: a number no other open in this process has, and the database's
/// directory (for messages). Every keyspace's tree shares its database's.
///
/// A secondary instance's open also counts the catch-ups that replaced a version by one
/// without some of its tables ([`OpenId::secondary`]): its primary never saw the secondary's
/// snapshots, so a compaction it ran may have dropped what they see, and a snapshot taken
/// before such a catch-up can no longer be read.
#[derive(Clone, Debug)]
pub(crate) struct OpenId {
    number: u64,
    dir: Arc<Path>,
    /// A secondary's generation: odd while a catch-up that drops tables is being published
    /// (a seqlock), even otherwise. `None` for every other open.
    generation: Option<Arc<AtomicU64>>,
}

impl OpenId {
    /// A new open of the database in `dir`.
    pub(crate) fn new(dir: &Path) -> OpenId {
        OpenId {
            number: NEXT_OPEN.fetch_add(1, Ordering::Relaxed),
            dir: Arc::from(dir),
            generation: None,
        }
    }

    /// A new secondary instance's open of the database in `dir`.
    pub(crate) fn secondary(dir: &Path) -> OpenId {
        OpenId {
            generation: Some(Arc::default()),
            ..OpenId::new(dir)
        }
    }

    /// True if both are the same open.
    pub(crate) fn is(&self, other: &OpenId) -> bool {
        self.number == other.number
    }

    /// Reads `seq` (the visible sequence number) together with the generation it belongs to.
    pub(crate) fn read_at(&self, seq: &AtomicU64) -> (u64, u64) {
        let Some(generation) = &self.generation else {
            return (seq.load(Ordering::Acquire), 0);
        };
        loop {
            let before = generation.load(Ordering::Acquire);
            let value = seq.load(Ordering::Acquire);
            if before % 2 == 0 && generation.load(Ordering::Acquire) == before {
                return (value, before);
            }
            std::hint::spin_loop();
        }
    }

    /// Publishes a secondary's catch-up that dropped tables: `publish` (which stores the new
    /// visible sequence number) runs inside a new generation. Callers hold every tree's state
    /// lock, so a reader holding one sees the generation and the state it belongs to.
    pub(crate) fn new_generation(&self, publish: impl FnOnce()) {
        match &self.generation {
            Some(generation) => {
                generation.fetch_add(1, Ordering::AcqRel);
                publish();
                generation.fetch_add(1, Ordering::AcqRel);
            }
            None => publish(),
        }
    }

    /// Refuses a snapshot at `seq` taken in generation `taken` once a later catch-up may have
    /// dropped what it sees.
    pub(crate) fn check_generation(&self, taken: u64, seq: u64) -> Result<()> {
        let Some(generation) = &self.generation else {
            return Ok(());
        };
        let now = generation.load(Ordering::Acquire);
        if now == taken {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "a snapshot (at sequence {seq}) of the secondary instance of {} was taken before a \
             catch-up that installed compactions of its primary, which may have dropped what \
             it sees; take a new snapshot after each try_catch_up",
            self.dir.display()
        )))
    }

    /// Refuses `what` (a handle, named for the message), which came from open `from`, unless
    /// that is this open.
    pub(crate) fn check(&self, from: &OpenId, what: std::fmt::Arguments<'_>) -> Result<()> {
        if self.is(from) {
            return Ok(());
        }
        let whose = if from.dir == self.dir {
            format!("another open of the database in {}", from.dir.display())
        } else {
            format!("the database in {}", from.dir.display())
        };
        Err(Error::InvalidArgument(format!(
            "{what} belongs to {whose}, not to the database in {} it was given to",
            self.dir.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_open_is_its_own_and_messages_name_both_databases() {
        let (a, b) = (Path::new("/data/a"), Path::new("/data/b"));
        let first = OpenId::new(a);
        let again = OpenId::new(a);
        let other = OpenId::new(b);
        assert!(first.is(&first.clone()));
        first.check(&first.clone(), format_args!("x")).unwrap();
        let e = first
            .check(&other, format_args!("keyspace \"users\""))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("keyspace \"users\" belongs to the database in /data/b")
                && text.contains("not to the database in /data/a"),
            "{text}"
        );
        let text = first
            .check(&again, format_args!("a snapshot"))
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("another open of the database in /data/a"),
            "{text}"
        );
    }

    #[test]
    fn a_secondarys_snapshot_is_refused_after_a_generation_that_dropped_tables() {
        let open = OpenId::secondary(Path::new("/data/a"));
        let seq = AtomicU64::new(7);
        let (at, taken) = open.read_at(&seq);
        assert_eq!(at, 7);
        open.check_generation(taken, at).unwrap();
        open.new_generation(|| seq.store(9, Ordering::Release));
        let e = open.check_generation(taken, at).unwrap_err();
        assert!(e.to_string().contains("take a new snapshot"), "{e}");
        let (at, taken) = open.read_at(&seq);
        assert_eq!(at, 9);
        open.check_generation(taken, at).unwrap();
        // A primary's open has no generations: nothing is ever refused.
        let primary = OpenId::new(Path::new("/data/a"));
        primary.new_generation(|| seq.store(10, Ordering::Release));
        primary.check_generation(0, 10).unwrap();
    }
}
