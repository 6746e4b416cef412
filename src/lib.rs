//! batchguard: keeps scheduled batch jobs from doing the same work twice, or not at all.
pub mod schedule;
