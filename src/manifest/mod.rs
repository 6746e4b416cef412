//! Batchguard manifests (SPEC 2): YAML text → spanned tree → typed model.

pub mod duration;
pub mod issue;
pub mod load;
pub mod model;
pub mod retry;
pub mod template;
pub mod yaml;
pub mod zone;
pub use issue::Issue;
