//! The store each `batchguard run` registration resolves, as lint can know it (SPEC 7.1
//! item 13: `--store`, else `BATCHGUARD_STORE`, else `[run] store`), and the groups whose
//! places are all guarded by one shared store's lock (the HA pattern, not BG601).
//!
//! A value lint cannot read (`--store "$STORE"`, `$(VAR)`, a `valueFrom`, a value an
//! ecosystem file computes) is a reference: it counts as given. Its kind is the one its
//! literal scheme names (`postgres://batch:$PW@db/ops` is PostgreSQL), else unknown; two
//! registrations that write the same reference are taken to mean the same store, since
//! `run` refuses any URL whose kind is not the job's `lock.store`.

use super::{Analysis, Place};
use crate::manifest::model::LockStore;
use crate::sources::command::{self, RunStore};
use crate::text::Span;

/// Where a registration's `batchguard run` finds its store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreFrom {
    /// `--store URL` on the command.
    Flag,
    /// `BATCHGUARD_STORE=URL` in the registration's environment: in front of the command,
    /// a crontab env line, a container's `env`, PM2 `env`.
    Env,
    /// `[run] store` in `batchguard.toml`.
    Config,
}

impl StoreFrom {
    /// How a message names it.
    pub fn phrase(self) -> &'static str {
        match self {
            StoreFrom::Flag => "`--store`",
            StoreFrom::Env => "`BATCHGUARD_STORE` in its environment",
            StoreFrom::Config => "`[run] store` in batchguard.toml",
        }
    }
}

/// What a store value says of the store's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// A URL of a store `run` knows.
    Kind(LockStore),
    /// A reference lint cannot read (`$STORE`, `$(valueFrom)`): given, kind unknown.
    Reference,
    /// Written out, and no store URL (`postgress://…`, `store.db`): `run` refuses it.
    NotAStore,
}

/// The store one registration's `batchguard run` uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOfRun {
    /// As written, its password masked: what messages show and registrations compare.
    pub shown: String,
    pub from: StoreFrom,
    pub scheme: Scheme,
    /// Where the value is written in the registration's file (none for `[run] store`).
    pub span: Option<Span>,
}

/// The kind a store value names by its scheme (the URLs `batchguard run` opens).
pub fn scheme_of(value: &str) -> Scheme {
    let v = value.trim();
    if v.starts_with("sqlite:") {
        return Scheme::Kind(LockStore::Sqlite);
    }
    match v.split_once("://") {
        Some((scheme, _)) if scheme.contains('$') => Scheme::Reference,
        Some(("postgres" | "postgresql", _)) => Scheme::Kind(LockStore::Postgres),
        Some(("mysql", _)) => Scheme::Kind(LockStore::Mysql),
        Some(("redis" | "rediss", _)) => Scheme::Kind(LockStore::Redis),
        _ if v.contains('$') => Scheme::Reference,
        _ => Scheme::NotAStore,
    }
}

/// A store every host reaches (not one host's file).
pub fn shared(kind: LockStore) -> bool {
    matches!(
        kind,
        LockStore::Postgres | LockStore::Mysql | LockStore::Redis
    )
}

impl Analysis<'_> {
    /// The store registration `r`'s `batchguard run` resolves: `None` when its command is
    /// no `batchguard run`, `Some(None)` when nothing gives it one.
    pub fn store_of_run(&self, r: usize) -> Option<Option<StoreOfRun>> {
        let reg = &self.project.regs[r];
        let own = command::run_store(&reg.command)?;
        let text = self.files.get(reg.file).map(|f| f.text.as_str());
        // The value as the command writes it: its first occurrence from the command's
        // start (a YAML sequence's span may not cover all its items).
        let in_command = |v: &str| {
            let from = reg.command_span.start;
            let cmd = text?.get(from..)?;
            cmd.find(v).map(|i| Span::new(from + i, v.len()))
        };
        let (value, from, span) = match own {
            Some(RunStore::Flag(v)) => {
                let span = in_command(&v);
                (v, StoreFrom::Flag, span)
            }
            Some(RunStore::Env(v)) => {
                let span = in_command(&v);
                (v, StoreFrom::Env, span)
            }
            None => match (&reg.store_env, &self.project.run_store) {
                (Some(e), _) => (e.value.clone(), StoreFrom::Env, Some(e.span)),
                (None, Some(c)) => (c.clone(), StoreFrom::Config, None),
                (None, None) => return Some(None),
            },
        };
        Some(Some(StoreOfRun {
            shown: crate::db::mask(value.trim()),
            from,
            scheme: scheme_of(&value),
            span,
        }))
    }

    /// The store that guards every place of a duplicated group, when one does: each
    /// unsuspended registration calls `batchguard run` for the same manifest job (one
    /// lock key), that job declares a lock, no other manifest job runs it, and every one
    /// resolves the same shared store (compared with the password masked). A reference
    /// counts as shared when the job's `lock.store` is.
    pub(super) fn guarded_by(&self, places: &[Place]) -> Option<String> {
        let mut job = None;
        let mut store: Option<String> = None;
        for p in places {
            let r = match *p {
                Place::Reg(r) => r,
                Place::Job(_) => continue,
            };
            if self.project.regs[r].suspended() {
                continue;
            }
            let j = self.ties[r]?;
            if *job.get_or_insert(j) != j {
                return None;
            }
            let s = self.store_of_run(r)??;
            let declared = self.project.jobs[j].lock_store;
            let ok = match s.scheme {
                Scheme::Kind(k) => shared(k) && declared.is_none_or(|d| d == k),
                Scheme::Reference => declared.is_some_and(shared),
                Scheme::NotAStore => false,
            };
            if !ok || store.as_ref().is_some_and(|first| *first != s.shown) {
                return None;
            }
            store.get_or_insert(s.shown);
        }
        let j = job?;
        let only_this_job = places
            .iter()
            .all(|p| !matches!(*p, Place::Job(k) if k != j));
        (only_this_job && self.project.jobs[j].locked)
            .then_some(store)
            .flatten()
    }
}

/// How `lint --list-files` and `graph` say that a group is guarded.
pub fn guard_note(store: &str) -> String {
    format!("guarded by batchguard run on {store}")
}

/// The registrations among a group's places.
pub fn registrations(places: &[Place]) -> usize {
    places.iter().filter(|p| matches!(p, Place::Reg(_))).count()
}

impl Analysis<'_> {
    /// For each registration of a guarded group, in path order: its file and the note
    /// `lint --list-files` shows under that file.
    pub fn guarded_notes(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for g in &self.groups {
            let Some(store) = &g.guarded else { continue };
            let (service, job) = super::group_subject(self, g);
            let subject = match service {
                Some(s) => format!("job `{s}/{job}`"),
                None => job,
            };
            let regs = registrations(&g.places);
            for p in &g.places {
                if let Place::Reg(r) = *p {
                    let reg = &self.project.regs[r];
                    out.push((
                        reg.file,
                        format!(
                            "{}: one of {regs} registrations of {subject}, {}",
                            reg.label,
                            guard_note(store)
                        ),
                    ));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_name_kinds_references_and_typos() {
        let k = |v: &str| scheme_of(v);
        assert_eq!(k("postgres://db/ops"), Scheme::Kind(LockStore::Postgres));
        assert_eq!(k("postgresql://db/ops"), Scheme::Kind(LockStore::Postgres));
        assert_eq!(k("mysql://m/ops"), Scheme::Kind(LockStore::Mysql));
        assert_eq!(k("rediss://:pw@r:6380/0"), Scheme::Kind(LockStore::Redis));
        assert_eq!(
            k("sqlite:.batchguard/store.db"),
            Scheme::Kind(LockStore::Sqlite)
        );
        assert_eq!(
            k("postgres://batch:$PW@db/ops"),
            Scheme::Kind(LockStore::Postgres)
        );
        assert_eq!(k("$STORE"), Scheme::Reference);
        assert_eq!(k("${STORE}"), Scheme::Reference);
        assert_eq!(k("$(valueFrom)"), Scheme::Reference);
        assert_eq!(k("${SCHEME}://db/ops"), Scheme::Reference);
        assert_eq!(k("postgress://db/ops"), Scheme::NotAStore);
        assert_eq!(k("store.db"), Scheme::NotAStore);
    }
}
