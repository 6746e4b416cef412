//! `batchguard run` and `store` on a real PostgreSQL server (SPEC 7.2, 10): the scenarios
//! of `tests/common/run_store.rs`, each on a database of its own (`tests/common/pgdb.rs`).

#[path = "common/held.rs"]
mod held;
#[path = "common/run_store.rs"]
mod run_store;
#[path = "common/stores.rs"]
mod stores;

use stores::Kind;

run_store::every_store!(Kind::Pg);
run_store::databases!(Kind::Pg);
