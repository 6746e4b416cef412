//! `run --report FILE` (SPEC 8): the slot's outcome and every attempt this process made.

use jiff::Timestamp;
use serde::Serialize;

#[derive(Serialize)]
pub struct Attempt {
    pub attempt: u32,
    pub run_id: String,
    pub fence: i64,
    pub instance: String,
    pub started_at: Timestamp,
    pub ended_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    pub outputs: usize,
    pub rejected_output_lines: usize,
}

#[derive(Serialize)]
pub struct Report {
    pub version: u32,
    pub tool: &'static str,
    pub job: String,
    pub scheduled_at: Option<Timestamp>,
    /// succeeded | failed | dead_lettered | skipped | not_run
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    pub exit_code: i32,
    pub attempts: Vec<Attempt>,
    /// An unfinished earlier slot this run caught up before its own (SPEC 7.1 item 20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caught_up: Option<CaughtUp>,
    /// Check-ins and spans sent, and those that did not go through (when configured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notifications: Option<crate::notify::http::Summary>,
}

/// The catch-up a run did before its own slot.
#[derive(Serialize)]
pub struct CaughtUp {
    pub scheduled_at: Timestamp,
    /// succeeded | failed | dead_lettered | skipped | not_run
    pub outcome: &'static str,
    pub exit_code: i32,
    pub attempts: Vec<Attempt>,
}

impl Report {
    pub fn new(job: &str, scheduled_at: Option<Timestamp>) -> Report {
        Report {
            version: 1,
            tool: "batchguard",
            job: job.to_owned(),
            scheduled_at,
            outcome: "not_run",
            skip_reason: None,
            exit_code: 125,
            attempts: vec![],
            caught_up: None,
            notifications: None,
        }
    }

    /// The `result` line of `run --link` (`docs/node-protocol.md`).
    pub fn link_result(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "event": "result",
            "status": self.outcome,
            "exitCode": self.exit_code,
        });
        if let Some(t) = self.scheduled_at {
            v["slot"] = serde_json::json!(crate::store::rfc3339(t));
        }
        if let Some(r) = &self.skip_reason {
            v["reason"] = serde_json::json!(r);
        }
        if let Some(a) = self.attempts.last() {
            v["runId"] = serde_json::json!(a.run_id);
            v["fence"] = serde_json::json!(a.fence.to_string());
            v["attempt"] = serde_json::json!(a.attempt);
            if let Some(c) = &a.error_code {
                v["code"] = serde_json::json!(c);
            }
        }
        v
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }
}
