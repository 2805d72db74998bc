//! Which files make up the tree: version edits, the MANIFEST that logs them, immutable
//! versions, the version set that recovers and installs them, and partitioned mode's range
//! map (data the version carries, with the invariants it puts on tables).

pub mod blob_files;
pub mod edit;
pub mod l0_sublevels;
pub mod manifest;
pub mod pin;
pub mod range_checks;
pub mod range_map;
pub mod set;
#[cfg(test)]
pub(crate) mod testing;
#[expect(
    clippy::module_inception,
    reason = "the type is a Version; the module holds it"
)]
pub mod version;

pub use version::Version;
