//! The background threads: one flushes frozen memtables, `max_concurrent_compactions` run
//! automatic compactions, and with a `LOG` one writes its periodic `stats:` line.
//!
//! Flushes get their own thread so they never wait behind a long compaction: a stalled flush
//! stalls every writer, a stalled compaction only lets L0 grow. Each compaction thread picks,
//! under the state lock, a compaction that does not conflict with the running ones
//! ([`crate::compaction::in_progress`]) and registers it before letting go of the lock, so two
//! threads never pick the same files.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::DbInner;
use crate::{Error, Result};

/// Starts the flush and compaction threads.
pub(crate) fn start(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let spawn = |name: &str, body: fn(&DbInner)| {
        let shared = Arc::clone(inner);
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || body(&shared))
            .map_err(|e| Error::io(&inner.dir, e))
    };
    let mut threads = vec![spawn("sluice-flush", flush_loop)?];
    for _ in 0..inner.options.compaction.max_concurrent_compactions {
        threads.push(spawn("sluice-compact", compaction_loop)?);
    }
    // One line for the database, from its default keyspace's tree (whose WAL and user-byte
    // figures are the database's).
    let default_tree = inner.keyspace_id == crate::batch::DEFAULT_KEYSPACE_ID;
    if default_tree
        && inner.events.log().is_some()
        && !inner.options.info_log.stats_dump_period.is_zero()
    {
        threads.push(spawn("sluice-stats", super::stats_dump::stats_dump_loop)?);
    }
    Ok(threads)
}

fn flush_loop(inner: &DbInner) {
    let mut st = inner.state.lock();
    loop {
        if st.closing {
            return;
        }
        if st.bg_error.is_some() || st.imm.is_empty() {
            inner.bg_work.wait(&mut st);
            continue;
        }
        st.flush_running = true;
        drop(st);
        let result = inner.flush_oldest_immutable();
        match &result {
            Ok(()) => inner.maybe_balance(),
            Err(e) => inner.tell_background_error("flush", e),
        }
        st = inner.state.lock();
        st.flush_running = false;
        if let Err(e) = result {
            st.flush_metrics.failed += 1;
            inner.set_bg_error(&mut st, &e);
        }
        // Wake stalled writers, `flush()` callers, and the compaction thread (L0 grew).
        inner.bg_done.notify_all();
        inner.bg_work.notify_all();
    }
}

fn compaction_loop(inner: &DbInner) {
    let mut st = inner.state.lock();
    loop {
        if st.closing {
            return;
        }
        let may_start = st.bg_error.is_none()
            && st.manual_waiting == 0
            && !st.manual_running
            && inner.needs_compaction(&st);
        let picked = may_start
            .then(|| {
                crate::compaction::picker::pick(
                    st.versions.current(),
                    &inner.options,
                    &st.versions.compact_pointers,
                    &st.compactions,
                )
            })
            .flatten();
        let Some(c) = picked else {
            inner.bg_work.wait(&mut st);
            continue;
        };
        let job = st.compactions.register(&c);
        drop(st);
        let result = inner.run_automatic_compaction(c);
        if let Err(e) = &result {
            inner.tell_background_error("compaction", e);
        }
        st = inner.state.lock();
        st.compactions.finish(job);
        if let Err(e) = result {
            inner.set_bg_error(&mut st, &e);
        }
        inner.bg_done.notify_all();
        inner.bg_work.notify_all();
    }
}
