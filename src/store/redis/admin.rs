//! The Redis store's operator side: its epoch (a Redis that lost its data is refused until
//! repaired, SPEC 7.1 item 16), `store migrate` and `store repair`.

use super::fences::read_fences;
use super::scripts::{MIGRATE, RAISE, RESTORE};
use super::{RedisStore, glob_escape, text};
use crate::store::{Store, StoreError, rfc3339};

impl RedisStore {
    pub(super) fn epoch_key(&self) -> String {
        format!("{}:epoch", self.cfg.prefix)
    }

    /// The epoch's value (what wrote it, when), or `None`: every acquire is then refused.
    pub fn epoch(&mut self) -> Result<Option<String>, StoreError> {
        let key = self.epoch_key();
        redis::cmd("GET")
            .arg(&key)
            .query(&mut self.conn)
            .map_err(|e| self.fail("cannot read the epoch", e))
    }

    /// `store migrate`: writes the epoch a new Redis (or one that ran batchguard before
    /// epochs existed) needs before any acquire. A Redis with no key of batchguard's is new
    /// or lost its data; when this working directory was given fences by it, it lost them,
    /// and only `store repair` (which knows the ledger) may write the epoch.
    pub fn migrate(&mut self) -> Result<String, StoreError> {
        const WHAT: &str = "cannot write the epoch";
        let epoch = self.epoch_key();
        let found: Option<String> = redis::cmd("GET")
            .arg(&epoch)
            .query(&mut self.conn)
            .map_err(|e| self.fail(WHAT, e))?;
        if let Some(e) = found {
            return Ok(format!(
                "{}: the epoch is in place (`{epoch}`: {e}); nothing to do",
                self.shown
            ));
        }
        let known = read_fences(&self.fences)
            .map_err(|e| self.fences_error(&e))?
            .get(&self.cfg.identity)
            .and_then(|m| m.values().max().copied());
        let has_keys = !self
            .scan(&format!("{}:*", glob_escape(&self.cfg.prefix)), 1, WHAT)?
            .is_empty();
        if let (Some(f), false) = (known, has_keys) {
            return Err(StoreError::refused(format!(
                "{}: this Redis has none of batchguard's keys, but this working directory was given fences up to {f} by it ({}): it lost its data. Restore it from the ledger with `batchguard store repair --store '{}' --ledger SOURCE`",
                self.shown,
                self.fences.display(),
                self.shown
            )));
        }
        let reply = self.eval(
            MIGRATE,
            std::slice::from_ref(&epoch),
            &["migrate".to_owned()],
            WHAT,
        )?;
        let value = text(reply.get(1)).unwrap_or_default();
        Ok(if has_keys {
            format!(
                "{}: epoch written (`{epoch}`: {value}); the counters and slot markers already here are kept",
                self.shown
            )
        } else {
            format!(
                "{}: epoch written (`{epoch}`: {value}); a new store: its keys are written as jobs run",
                self.shown
            )
        })
    }

    /// `store repair`: every job's counter raised to the highest fence known (the
    /// ledger's, this working directory's), the ledger's slots within the markers'
    /// retention restored, then a new epoch, last, so no host acquires before the rest is
    /// in place.
    pub fn repair(
        &mut self,
        facts: &crate::store::repair::Facts,
    ) -> Result<crate::store::repair::Repaired, StoreError> {
        let mut fences = facts.fences.clone();
        if let Some(mine) = read_fences(&self.fences)
            .map_err(|e| self.fences_error(&e))?
            .get(&self.cfg.identity)
        {
            for (job, f) in mine {
                let e = fences.entry(job.clone()).or_insert(0);
                *e = (*e).max(*f);
            }
        }
        let mut counters = Vec::new();
        for (job, f) in &fences {
            let reply: i64 = redis::cmd("EVAL")
                .arg(RAISE)
                .arg(1)
                .arg(self.key("fence", job))
                .arg(f)
                .query(&mut self.conn)
                .map_err(|e| self.fail("cannot move a fencing counter", e))?;
            counters.push((job.clone(), reply));
        }
        let now = self.now()?;
        let oldest = now
            .as_second()
            .saturating_sub(i64::try_from(self.cfg.retention_secs).unwrap_or(i64::MAX));
        let retention_ms = self.cfg.retention_secs.saturating_mul(1000).to_string();
        let jobs = format!("{}:jobs", self.cfg.prefix);
        let mut restored = 0u64;
        let mut too_old = 0u64;
        let kept: Vec<&crate::store::repair::SlotFact> = facts
            .slots
            .iter()
            .filter(|f| {
                let keep = f.scheduled_at.as_second() >= oldest;
                too_old += u64::from(!keep);
                keep
            })
            .collect();
        for chunk in kept.chunks(500) {
            let mut pipe = redis::pipe();
            for f in chunk {
                let slot = rfc3339(f.scheduled_at);
                pipe.cmd("EVAL")
                    .arg(RESTORE)
                    .arg(3)
                    .arg(self.slot_key(&f.job, &slot))
                    .arg(self.key("slots", &f.job))
                    .arg(&jobs)
                    .arg(f.attempts)
                    .arg(f.state.as_str())
                    .arg(&f.run_id)
                    .arg(&retention_ms)
                    .arg(&f.job)
                    .arg(&slot)
                    .arg(f.scheduled_at.as_second())
                    .ignore();
            }
            pipe.query::<()>(&mut self.conn)
                .map_err(|e| self.fail("cannot restore the slots", e))?;
            restored += chunk.len() as u64;
        }
        let epoch = self.epoch_key();
        let _: () = redis::cmd("DEL")
            .arg(&epoch)
            .query(&mut self.conn)
            .map_err(|e| self.fail("cannot write the epoch", e))?;
        let reply = self.eval(
            MIGRATE,
            std::slice::from_ref(&epoch),
            &["repair".to_owned()],
            "cannot write the epoch",
        )?;
        Ok(crate::store::repair::Repaired {
            counters,
            restored,
            too_old,
            epoch: Some(text(reply.get(1)).unwrap_or_default()),
        })
    }
}
