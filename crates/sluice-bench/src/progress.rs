//! A progress bar on stderr while a benchmark runs, and nothing at all when it is disabled
//! (callers enable it only when stderr is a terminal, so pipes and logs stay clean).
//!
//! Worker threads count operations locally and publish them in batches of
//! [`TICK_BATCH_OPS`], so the bar costs one atomic add per batch rather than per operation.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Operations a thread counts before publishing them to the bar.
pub const TICK_BATCH_OPS: u64 = 1024;

/// The bar of one benchmark. Cheap to share by reference between threads.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar labelled `name` expecting `total` operations (`None`: a spinner), drawn on stderr
    /// if `enabled`.
    pub fn new(enabled: bool, name: &str, total: Option<u64>) -> Self {
        if !enabled {
            return Progress {
                bar: ProgressBar::hidden(),
            };
        }
        let bar = match total {
            Some(n) => {
                let bar = ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template(
                    "{msg:>12} [{bar:30}] {human_pos}/{human_len} ops, {eta} left",
                ) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar
            }
            None => {
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template("{msg:>12} {spinner} {elapsed}") {
                    bar.set_style(style);
                }
                bar.enable_steady_tick(Duration::from_millis(200));
                bar
            }
        };
        bar.set_message(name.to_string());
        Progress { bar }
    }

    /// A bar that draws nothing.
    pub fn hidden() -> Self {
        Self::new(false, "", None)
    }

    /// Counts `n` more operations.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Operations counted so far.
    pub fn position(&self) -> u64 {
        self.bar.position()
    }

    /// A per-thread counter publishing to this bar in batches.
    pub fn ticker(&self) -> Ticker<'_> {
        Ticker {
            progress: self,
            pending: 0,
        }
    }

    /// Removes the bar from the terminal, so the report line that follows stands alone.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Counts one thread's operations; publishes every [`TICK_BATCH_OPS`] and when dropped.
#[derive(Debug)]
pub struct Ticker<'a> {
    progress: &'a Progress,
    pending: u64,
}

impl Ticker<'_> {
    /// Counts one operation.
    #[inline]
    pub fn tick(&mut self) {
        self.pending += 1;
        if self.pending >= TICK_BATCH_OPS {
            self.progress.inc(self.pending);
            self.pending = 0;
        }
    }
}

impl Drop for Ticker<'_> {
    fn drop(&mut self) {
        if self.pending > 0 {
            self.progress.inc(self.pending);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickers_publish_in_batches_and_on_drop() {
        let p = Progress::new(false, "t", Some(5000));
        {
            let mut a = p.ticker();
            let mut b = p.ticker();
            for _ in 0..TICK_BATCH_OPS {
                a.tick();
            }
            assert_eq!(p.position(), TICK_BATCH_OPS);
            for _ in 0..10 {
                b.tick();
            }
            assert_eq!(p.position(), TICK_BATCH_OPS);
        }
        assert_eq!(p.position(), TICK_BATCH_OPS + 10);
        p.finish();
    }
}
