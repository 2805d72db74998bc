//! The background threads: one flushes frozen memtables, one runs automatic compactions.
//!
//! Flushes get their own thread so they never wait behind a long compaction: a stalled flush
//! stalls every writer, a stalled compaction only lets L0 grow.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::db::DbInner;
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
    Ok(vec![
        spawn("sluice-flush", flush_loop)?,
        spawn("sluice-compact", compaction_loop)?,
    ])
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
        let runnable = st.bg_error.is_none()
            && st.manual_waiting == 0
            && !st.compaction_running
            && inner.needs_compaction(&st);
        if !runnable {
            inner.bg_work.wait(&mut st);
            continue;
        }
        st.compaction_running = true;
        drop(st);
        let result = inner.run_automatic_compaction();
        st = inner.state.lock();
        st.compaction_running = false;
        if let Err(e) = result {
            inner.set_bg_error(&mut st, &e);
        }
        inner.bg_done.notify_all();
        inner.bg_work.notify_all();
    }
}
