//! `batchguard run` and `store` on a real PostgreSQL server (SPEC 7.2, 10): the scenarios
//! of `tests/common/run_store.rs`, each on a database of its own (`tests/common/pgdb.rs`).

#[path = "common/held.rs"]
mod held;
#[path = "common/run_store.rs"]
mod run_store;
#[path = "common/stores.rs"]
mod stores;

use stores::Kind;

run_store::tests!(Kind::Pg =>
    a_successful_run_is_at_most_three_round_trips_and_the_acquire_is_one,
    an_unmigrated_database_is_refused_naming_store_migrate,
    exit_75_is_retried_with_a_new_fence_and_a_succeeded_slot_never_reruns,
    a_held_lease_is_skipped_naming_the_holder_and_an_expired_one_is_retaken,
    fifty_contenders_on_one_slot_give_one_start_and_forty_nine_skips,
    outputs_of_dead_runs_are_written_once_when_many_catch_up_at_once,
    watch_and_metrics_list_the_leases_held_and_not_the_released_ones,
);
