//! The ledger row formats as JSON Schema (`batchguard schema ledger`): these types exist only
//! to describe one JSONL line (equally one CSV row or table row) for editors and
//! validators; the readers do not deserialize through them. Timestamps are RFC 3339 with a
//! UTC offset. Other keys are allowed and ignored.

#![allow(dead_code)]

use schemars::JsonSchema;

/// `event` values (SPEC 5.1).
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventWord {
    Start,
    End,
    /// The lock was not acquired.
    Skip,
    /// The input was quarantined.
    DeadLetter,
    /// An operator's recovery action.
    Manual,
}

/// `status` values, on `end`.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusWord {
    Success,
    Failure,
    /// A newer holder took the slot over (its lease had expired): no verdict.
    Superseded,
}

/// `trigger` values; absent means `schedule`.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TriggerWord {
    Schedule,
    Retry,
    Manual,
    Replay,
    /// An unfinished earlier slot worked by a later tick (SPEC 7.1 item 20).
    CatchUp,
}

/// One batchguard ledger event (SPEC 5.1): one line of an events JSONL file, one row of an
/// events CSV file or of the `batchguard_events` table.
#[derive(JsonSchema)]
#[schemars(title = "batchguard ledger event")]
pub struct LedgerEvent {
    /// One execution attempt; all events of one attempt share it.
    #[schemars(length(min = 1))]
    pub run_id: String,
    /// Job name, or `service/name`.
    #[schemars(length(min = 1))]
    pub job: String,
    /// The slot this execution is for (RFC 3339 with offset).
    #[schemars(extend("format" = "date-time"))]
    pub scheduled_at: String,
    pub event: EventWord,
    /// When the event happened (RFC 3339 with offset).
    #[schemars(extend("format" = "date-time"))]
    pub at: String,
    /// Host, pod or PM2 id.
    pub instance: Option<String>,
    /// 1 for the first attempt of a slot; absent means 1.
    #[schemars(range(min = 1))]
    pub attempt: Option<u32>,
    /// On `end`.
    pub status: Option<StatusWord>,
    /// On a failed `end` and on `dead_letter`.
    pub error_code: Option<String>,
    /// On `start`: `sha256:<hex>` of the input snapshot.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub snapshot_digest: Option<String>,
    pub trigger: Option<TriggerWord>,
    /// On `start`: the fencing token of the acquisition (`batchguard run`).
    pub fence: Option<i64>,
    /// At most 4 KiB: why a `skip`, what a failed `end` printed last, an operator's reason.
    #[schemars(length(max = 4096))]
    pub detail: Option<String>,
}

/// One applied output (SPEC 5.2): one line of an outputs JSONL file, one row of an outputs
/// CSV file or of the `batchguard_outputs` table.
#[derive(JsonSchema)]
#[schemars(title = "batchguard ledger output")]
pub struct LedgerOutput {
    #[schemars(length(min = 1))]
    pub job: String,
    /// The slot of the execution that applied it (RFC 3339 with offset).
    #[schemars(extend("format" = "date-time"))]
    pub scheduled_at: String,
    #[schemars(length(min = 1))]
    pub run_id: String,
    /// What identifies one applied output (a payment id, an email id): the same
    /// `(job, output_key)` twice is a duplicate output (AU201).
    #[schemars(length(min = 1))]
    pub output_key: String,
    /// When it was applied (RFC 3339 with offset).
    #[schemars(extend("format" = "date-time"))]
    pub at: String,
}

/// One drill record (SPEC 5.3): one line of a drill records JSONL file or one row of the
/// `batchguard_drills` table, written by `batchguard drill --record` and read by `audit`
/// (AU301).
#[derive(JsonSchema)]
#[schemars(title = "batchguard drill record")]
pub struct LedgerDrill {
    /// Job name, or `service/name`.
    #[schemars(length(min = 1))]
    pub job: String,
    /// The slot whose input snapshot was replayed (RFC 3339 with offset).
    #[schemars(extend("format" = "date-time"))]
    pub scheduled_at: String,
    /// When the drill ran (RFC 3339 with offset): what `drill_cadence` is measured against.
    #[schemars(extend("format" = "date-time"))]
    pub at: String,
    /// Whether every scenario passed.
    pub passed: bool,
    /// The scenarios that ran, each `name:passed` or `name:failed`, comma-separated
    /// (`clean:passed,rerun:failed`); empty only for a failed drill that stopped before its
    /// first scenario.
    #[schemars(regex(
        pattern = r"^([a-z0-9][a-z0-9_-]{0,31}:(passed|failed)(,[a-z0-9][a-z0-9_-]{0,31}:(passed|failed))*)?$"
    ))]
    pub scenarios: String,
    /// The digest of the drill's report (`sha256:<hex>`).
    #[schemars(length(min = 1))]
    pub report_digest: String,
}
