//! Which files make up the tree: version edits, the MANIFEST that logs them, immutable
//! versions, and the version set that recovers and installs them.

pub mod edit;
pub mod l0_sublevels;
pub mod manifest;
pub mod set;
#[expect(
    clippy::module_inception,
    reason = "the type is a Version; the module holds it"
)]
pub mod version;

pub use version::Version;
