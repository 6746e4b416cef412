//! One file per rule: its code, name, severity, documentation and logic.

pub mod bg001_yaml_syntax;
pub mod bg002_unknown_field;
pub mod bg003_missing_field;
pub mod bg004_invalid_value;
pub mod bg005_duplicate_key;
pub mod bg006_input_limit;
pub mod bg202_lock_ttl_too_short;
pub mod bg801_plaintext_secret;
pub mod bg901_suppression_without_reason;
pub mod bg902_unused_suppression;
