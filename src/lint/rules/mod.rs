//! One file per rule: its code, name, severity, documentation and logic; and the list of
//! them in the order lint runs them and `batchguard rules` lists them.

pub mod bg001_yaml_syntax;
pub mod bg002_unknown_field;
pub mod bg003_missing_field;
pub mod bg004_invalid_value;
pub mod bg005_duplicate_key;
pub mod bg006_input_limit;
pub mod bg101_invalid_cron;
pub mod bg102_cron_never_fires;
pub mod bg103_dst_ambiguous_time;
pub mod bg104_schedule_overlap;
pub mod bg105_unknown_timezone;
pub mod bg106_seconds_unsupported;
pub mod bg107_interval_schedule;
pub mod bg108_schedule_timezone_prefix;
pub mod bg201_missing_lock;
pub mod bg202_lock_ttl_too_short;
pub mod bg203_lock_ttl_too_long;
pub mod bg204_lock_key_not_unique;
pub mod bg301_missing_idempotency;
pub mod bg302_idempotency_key_missing;
pub mod bg401_unbounded_retry;
pub mod bg402_retry_limit_too_high;
pub mod bg403_missing_backoff;
pub mod bg404_conflicting_error_class;
pub mod bg405_missing_dead_letter;
pub mod bg406_retry_on_unknown;
pub mod bg407_unbounded_backoff;
pub mod bg408_retry_window_exceeds_interval;
pub mod bg501_missing_runbook_field;
pub mod bg502_missing_latency_alert;
pub mod bg503_missing_snapshot;
pub mod bg504_snapshot_retention_too_short;
pub mod bg505_missing_alert_channel;
pub mod bg601_duplicate_registration;
pub mod bg602_unguarded_concurrency;
pub mod bg603_k8s_concurrency_allow;
pub mod bg604_k8s_missing_starting_deadline;
pub mod bg605_k8s_backoff_limit;
pub mod bg606_pm2_cluster_cron;
pub mod bg607_crontab_unguarded;
pub mod bg608_registration_drift;
pub mod bg609_source_not_read;
pub mod bg610_crontab_format;
pub mod bg611_in_process_schedule_replicated;
pub mod bg612_in_process_schedule_gated;
pub mod bg613_pm2_cron_restart_loop;
pub mod bg614_run_without_store;
pub mod bg701_unknown_dependency;
pub mod bg702_dependency_cycle;
pub mod bg703_dependency_order;
pub mod bg801_plaintext_secret;
pub mod bg802_shell_command;
pub mod bg901_suppression_without_reason;
pub mod bg902_unused_suppression;

/// Helpers for the rules' own tests: lint a manifest held in a string.
use crate::finding::RuleMeta;
use crate::lint::rule::Rule;

static RULES: &[&dyn Rule] = &[
    &bg001_yaml_syntax::YamlSyntax,
    &bg002_unknown_field::UnknownField,
    &bg003_missing_field::MissingField,
    &bg004_invalid_value::InvalidValue,
    &bg005_duplicate_key::DuplicateKey,
    &bg006_input_limit::InputLimit,
    &bg101_invalid_cron::InvalidCron,
    &bg102_cron_never_fires::CronNeverFires,
    &bg103_dst_ambiguous_time::DstAmbiguousTime,
    &bg104_schedule_overlap::ScheduleOverlap,
    &bg105_unknown_timezone::UnknownTimezone,
    &bg106_seconds_unsupported::SecondsUnsupported,
    &bg107_interval_schedule::IntervalSchedule,
    &bg108_schedule_timezone_prefix::ScheduleTimezonePrefix,
    &bg201_missing_lock::MissingLock,
    &bg202_lock_ttl_too_short::LockTtlTooShort,
    &bg203_lock_ttl_too_long::LockTtlTooLong,
    &bg204_lock_key_not_unique::LockKeyNotUnique,
    &bg301_missing_idempotency::MissingIdempotency,
    &bg302_idempotency_key_missing::IdempotencyKeyMissing,
    &bg401_unbounded_retry::UnboundedRetry,
    &bg402_retry_limit_too_high::RetryLimitTooHigh,
    &bg403_missing_backoff::MissingBackoff,
    &bg404_conflicting_error_class::ConflictingErrorClass,
    &bg405_missing_dead_letter::MissingDeadLetter,
    &bg406_retry_on_unknown::RetryOnUnknown,
    &bg407_unbounded_backoff::UnboundedBackoff,
    &bg408_retry_window_exceeds_interval::RetryWindowExceedsInterval,
    &bg501_missing_runbook_field::MissingRunbookField,
    &bg502_missing_latency_alert::MissingLatencyAlert,
    &bg503_missing_snapshot::MissingSnapshot,
    &bg504_snapshot_retention_too_short::SnapshotRetentionTooShort,
    &bg505_missing_alert_channel::MissingAlertChannel,
    &bg601_duplicate_registration::DuplicateRegistration,
    &bg602_unguarded_concurrency::UnguardedConcurrency,
    &bg603_k8s_concurrency_allow::K8sConcurrencyAllow,
    &bg604_k8s_missing_starting_deadline::K8sMissingStartingDeadline,
    &bg605_k8s_backoff_limit::K8sBackoffLimit,
    &bg606_pm2_cluster_cron::Pm2ClusterCron,
    &bg607_crontab_unguarded::CrontabUnguarded,
    &bg608_registration_drift::RegistrationDrift,
    &bg609_source_not_read::SourceNotRead,
    &bg610_crontab_format::CrontabFormat,
    &bg611_in_process_schedule_replicated::InProcessScheduleReplicated,
    &bg612_in_process_schedule_gated::InProcessScheduleGated,
    &bg613_pm2_cron_restart_loop::Pm2CronRestartLoop,
    &bg614_run_without_store::RunWithoutStore,
    &bg701_unknown_dependency::UnknownDependency,
    &bg702_dependency_cycle::DependencyCycle,
    &bg703_dependency_order::DependencyOrder,
    &bg801_plaintext_secret::PlaintextSecret,
    &bg802_shell_command::ShellCommand,
    &bg901_suppression_without_reason::SuppressionWithoutReason,
    &bg902_unused_suppression::UnusedSuppression,
];

/// Every lint rule, in code order.
pub fn all() -> &'static [&'static dyn Rule] {
    RULES
}

/// The lint rules' part of [`crate::REGISTRY`].
pub fn register(out: &mut Vec<&'static RuleMeta>) {
    out.extend(RULES.iter().map(|r| r.meta()));
}

#[cfg(test)]
pub(crate) mod testing {
    use crate::finding::Finding;
    use crate::lint::{LintOptions, lint_bytes};

    /// The findings of rule `code` for the manifest `yaml`, in the order emitted.
    pub(crate) fn findings(yaml: &str, code: &str) -> Vec<Finding> {
        let opts = LintOptions {
            paths: Vec::new(),
            settings: crate::config::Settings::default(),
            now: "2026-03-01T00:00:00Z".parse().expect("fixed timestamp"),
        };
        let (_, all, _) = lint_bytes(
            std::path::Path::new("test.batchguard.yaml"),
            yaml.as_bytes(),
            &opts,
        );
        all.into_iter().filter(|f| f.code == code).collect()
    }
}
