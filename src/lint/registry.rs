//! The one list of rules: `rules`, `explain`, SARIF's rule table, the README list and the
//! lint run all read it.

use super::rule::{Rule, RuleMeta};
use super::rules::*;

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
    &bg701_unknown_dependency::UnknownDependency,
    &bg702_dependency_cycle::DependencyCycle,
    &bg703_dependency_order::DependencyOrder,
    &bg801_plaintext_secret::PlaintextSecret,
    &bg802_shell_command::ShellCommand,
    &bg901_suppression_without_reason::SuppressionWithoutReason,
    &bg902_unused_suppression::UnusedSuppression,
];

/// Lint rules, then the audit checks (AU101-AU204) from `crate::audit::checks`.
pub fn all() -> impl Iterator<Item = &'static RuleMeta> {
    RULES
        .iter()
        .map(|r| r.meta())
        .chain(crate::audit::checks::all())
}

pub fn job_rules() -> &'static [&'static dyn Rule] {
    RULES
}

/// By code (`BG202`, any case) or name (`lock-ttl-too-short`).
pub fn find(code_or_name: &str) -> Option<&'static RuleMeta> {
    all().find(|m| m.code.eq_ignore_ascii_case(code_or_name) || m.name == code_or_name)
}
