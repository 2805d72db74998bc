//! The shape of the LSM tree when a benchmark or phase ended: files and bytes per level.

use serde::{Deserialize, Serialize};
use sluice::Metrics;

/// One level of the tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelShape {
    /// Level number, 0 for L0.
    pub level: usize,
    /// Table files.
    pub files: usize,
    /// Bytes of table files.
    pub size_bytes: u64,
}

/// The tree at one instant. Every level is listed, empty or not, so a reader can index
/// `levels` by level number.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LsmShape {
    /// L0 first.
    pub levels: Vec<LevelShape>,
    /// Bytes of all tables.
    pub total_bytes: u64,
    /// Overlapping runs in L0: the files a point read may have to look at there.
    pub l0_sublevels: usize,
}

impl LsmShape {
    /// The shape recorded in `m`.
    pub fn of(m: &Metrics) -> Self {
        LsmShape {
            levels: m
                .levels
                .iter()
                .map(|l| LevelShape {
                    level: l.level,
                    files: l.files,
                    size_bytes: l.size_bytes,
                })
                .collect(),
            total_bytes: m.total_size_bytes(),
            l0_sublevels: m.l0_sublevels,
        }
    }

    /// `L0 4 files 8.1 MB, L1 3 files 6.0 MB` (MB = 10^6 bytes), or `empty`.
    pub fn summary(&self) -> String {
        let levels: Vec<String> = self
            .levels
            .iter()
            .filter(|l| l.files > 0)
            .map(|l| {
                format!(
                    "L{} {} file{} {:.1} MB",
                    l.level,
                    l.files,
                    if l.files == 1 { "" } else { "s" },
                    l.size_bytes as f64 / 1e6
                )
            })
            .collect();
        if levels.is_empty() {
            "empty".into()
        } else {
            levels.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_lists_every_level_and_summarises_the_nonempty_ones() {
        let mut m = Metrics::of_empty_tree();
        m.levels[0].files = 1;
        m.levels[0].size_bytes = 2_000_000;
        m.levels[2].files = 3;
        m.levels[2].size_bytes = 6_500_000;
        m.l0_sublevels = 1;
        let s = LsmShape::of(&m);
        assert_eq!(s.levels.len(), 7);
        assert_eq!(s.total_bytes, 8_500_000);
        assert_eq!(s.summary(), "L0 1 file 2.0 MB, L2 3 files 6.5 MB");
        assert_eq!(LsmShape::default().summary(), "empty");
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["levels"][2]["files"], 3);
        assert_eq!(v["l0_sublevels"], 1);
    }
}
