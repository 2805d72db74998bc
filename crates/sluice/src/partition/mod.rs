//! Partitioned mode (the MStore paper): the key space is cut into ranges, each owned by one
//! owner (a data directory, and the worker that compacts it, or the host), so that compaction
//! never moves data between owners.
//!
//! How it fits the engine: the tree stays one leveled LSM on the host, whose version lists
//! every table with the directory it lives in; partitioning adds one invariant and one map.
//! - **Every table lies inside one range.** Flushes cut the memtable at range boundaries and
//!   write each piece to its range owner's directory; a compaction's inputs are chosen by
//!   overlap, and tables of different ranges never overlap, so every compaction stays inside
//!   one range and so do its outputs. It writes them to the range owner's directory and runs
//!   on that owner's worker (through the offload machinery) when it has one.
//! - **The range map** ([`RangeMap`]) is versioned with the tree and recorded in the MANIFEST.
//!   A table outside its range owner's directory is allowed only where the range has a
//!   forwarding entry to that directory's owner (a range that moved, whose old data has not
//!   been rewritten yet). `version::range_checks::check_tables` checks both after every
//!   edit. Ranges move whole ([`balance`]); one too big to move is first cut in two (`split`),
//!   rewriting the few
//!   tables that cross the cut so the invariant holds in the edit that changes the map.
//! - **Reads** need nothing new: a lookup consults the tables whose key range holds the key,
//!   and those live exactly in the directories of the key's range owner and its forwarding
//!   entries ([`RangeMap::owners_for`]).

pub mod balance;
pub mod load;
pub mod options;
pub(crate) mod placement;
pub(crate) mod split;
pub mod stats;

pub use options::{PartitionOptions, PartitionOwner};
// The range map is data the version carries; this module is the policy that acts on it.
pub use crate::version::range_map::{KeyRange, OwnerId, RangeMap, owner_dir_index, owner_of_dir};
