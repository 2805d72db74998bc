//! Manual compaction: `compact_range` pushes everything in a key range down the tree.

use crate::db::DbInner;
use crate::version::edit::NUM_LEVELS;
use crate::{Error, Result};

use super::picker::pick_manual;

impl DbInner {
    /// Flushes the memtable, then compacts every level holding data in `[start, end]` into the
    /// next, from L0 down, until the range lives in one level (the deepest that held it, or
    /// L1). Automatic compactions pause while it runs.
    pub(crate) fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        if let (Some(s), Some(e)) = (start, end)
            && s > e
        {
            return Err(Error::InvalidArgument(
                "compact_range: start is after end".into(),
            ));
        }
        self.flush_and_wait()?;
        self.acquire_compaction_slot()?;
        let result = (|| {
            let deepest = {
                let st = self.state.lock();
                let v = st.versions.current();
                (1..NUM_LEVELS)
                    .rev()
                    .find(|&l| !v.overlapping_files(l, start, end).is_empty())
                    .unwrap_or(1)
            };
            for level in 0..deepest {
                let picked = {
                    let st = self.state.lock();
                    pick_manual(st.versions.current(), level, start, end)
                };
                if let Some(c) = picked {
                    self.run_compaction(&c)?;
                    drop(c);
                    self.delete_obsolete_files();
                }
            }
            Ok(())
        })();
        self.release_compaction_slot();
        result
    }

    /// Waits until no compaction runs and claims the right to run one; automatic compactions
    /// do not start while a manual one waits.
    fn acquire_compaction_slot(&self) -> Result<()> {
        let mut st = self.state.lock();
        st.manual_waiting += 1;
        while st.compaction_running && st.bg_error.is_none() && !st.closing {
            self.bg_done.wait(&mut st);
        }
        st.manual_waiting -= 1;
        Self::check_bg_error(&st)?;
        if st.closing {
            return Err(Error::Closed);
        }
        st.compaction_running = true;
        Ok(())
    }

    fn release_compaction_slot(&self) {
        let mut st = self.state.lock();
        st.compaction_running = false;
        self.bg_done.notify_all();
        self.bg_work.notify_all();
    }
}
