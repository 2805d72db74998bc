//! What a stress run counts: operations, verifications, kills, damage and faults injected and
//! how each was answered, and failures. One [`Tally`] is shared by every thread of a process;
//! the summary line is printed from it at the end.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Failure messages kept for printing; the count goes on past it.
const MAX_FAILURE_MESSAGES: usize = 20;

/// How one injected damage or fault was answered by the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Reported: `Corruption` (or an error for a fault), dropped bytes in the recovery
    /// report, or (for an orphan) swept by the next open.
    Reported,
    /// Not reported, and the data read back was exactly the expected data: the damage hit
    /// bytes that held nothing needed. Not a failure.
    Harmless,
    /// Not reported and the data differs, or a fault that never hit anything.
    Hidden,
}

/// Per injected class: injected, reported, harmless.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassCount {
    pub injected: u64,
    pub reported: u64,
    pub harmless: u64,
}

/// Counters of a run; see the module docs. All methods take `&self` and may be called from
/// any thread.
#[derive(Debug, Default)]
pub struct Tally {
    pub operations: AtomicU64,
    pub verified: AtomicU64,
    /// Errors returned to the workload while a fault was armed (expected, not failures).
    pub fault_errors: AtomicU64,
    pub rounds: AtomicU64,
    pub kills: AtomicU64,
    /// Compactions shared with offload workers.
    pub offloaded: AtomicU64,
    failures: AtomicU64,
    messages: Mutex<Vec<String>>,
    damage: Mutex<BTreeMap<&'static str, ClassCount>>,
    faults: Mutex<BTreeMap<&'static str, ClassCount>>,
}

impl Tally {
    /// Counts `n` operations.
    pub fn ops(&self, n: u64) {
        self.operations.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` verified reads (a key's value or absence checked exactly).
    pub fn verified(&self, n: u64) {
        self.verified.fetch_add(n, Ordering::Relaxed);
    }

    /// Records a failure: lost, changed or invented data, or an error where none may occur.
    pub fn fail(&self, message: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let mut messages = self.messages.lock().unwrap_or_else(|p| p.into_inner());
        if messages.len() < MAX_FAILURE_MESSAGES {
            messages.push(message);
        }
    }

    /// Failures so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The failure messages kept (the first [`MAX_FAILURE_MESSAGES`]).
    pub fn failure_messages(&self) -> Vec<String> {
        self.messages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records one damage injection of `class` and how it was answered.
    pub fn damage(&self, class: &'static str, answer: Answer) {
        count(&self.damage, class, answer);
    }

    /// Records one fault injection of `class` and how it was answered.
    pub fn fault(&self, class: &'static str, answer: Answer) {
        count(&self.faults, class, answer);
    }

    /// Damage per class.
    pub fn damage_counts(&self) -> BTreeMap<&'static str, ClassCount> {
        self.damage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Faults per class.
    pub fn fault_counts(&self) -> BTreeMap<&'static str, ClassCount> {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The one summary line.
    pub fn summary(&self, seed: u64) -> String {
        let sum = |m: &BTreeMap<&'static str, ClassCount>| {
            m.values()
                .fold((0, 0), |(i, r), c| (i + c.injected, r + c.reported))
        };
        let (damage, damage_reported) = sum(&self.damage_counts());
        let (faults, faults_reported) = sum(&self.fault_counts());
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "stress: seed {seed}, {} rounds, {} operations, {} verified, {} kills, \
             {damage} damage injected / {damage_reported} reported, \
             {faults} faults injected / {faults_reported} reported, {} failures",
            load(&self.rounds),
            load(&self.operations),
            load(&self.verified),
            load(&self.kills),
            self.failures()
        )
    }

    /// One line per class: `damage <class>: injected N, reported N, harmless N`.
    pub fn class_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (kind, counts) in [
            ("damage", self.damage_counts()),
            ("fault", self.fault_counts()),
        ] {
            for (class, c) in counts {
                lines.push(format!(
                    "{kind} {class}: injected {}, reported {}, harmless {}",
                    c.injected, c.reported, c.harmless
                ));
            }
        }
        lines
    }
}

fn count(map: &Mutex<BTreeMap<&'static str, ClassCount>>, class: &'static str, answer: Answer) {
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    let c = map.entry(class).or_default();
    c.injected += 1;
    match answer {
        Answer::Reported => c.reported += 1,
        Answer::Harmless => c.harmless += 1,
        Answer::Hidden => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_everything() {
        let t = Tally::default();
        t.ops(10);
        t.verified(4);
        t.damage("wal-page", Answer::Reported);
        t.damage("table-byte", Answer::Harmless);
        t.fault("wal-sync", Answer::Reported);
        t.fail("lost key 3".into());
        let line = t.summary(42);
        assert!(line.starts_with("stress: seed 42, 0 rounds, 10 operations, 4 verified"));
        assert!(line.contains("2 damage injected / 1 reported"), "{line}");
        assert!(line.contains("1 faults injected / 1 reported"), "{line}");
        assert!(line.ends_with(", 1 failures"), "{line}");
        assert_eq!(t.failure_messages(), vec!["lost key 3".to_string()]);
        assert_eq!(t.class_lines().len(), 3);
    }
}
