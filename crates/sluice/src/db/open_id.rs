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
#[derive(Clone, Debug)]
pub(crate) struct OpenId {
    number: u64,
    dir: Arc<Path>,
}

impl OpenId {
    /// A new open of the database in `dir`.
    pub(crate) fn new(dir: &Path) -> OpenId {
        OpenId {
            number: NEXT_OPEN.fetch_add(1, Ordering::Relaxed),
            dir: Arc::from(dir),
        }
    }

    /// True if both are the same open.
    pub(crate) fn is(&self, other: &OpenId) -> bool {
        self.number == other.number
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
}
