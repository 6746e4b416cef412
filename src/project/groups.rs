//! Places that are one job (SPEC 3.5 "Duplicates"): one `service/name`, a tie, or the
//! same command (SPEC 3.6) on a schedule sharing a slot; and how many runners fire it.

use super::slots::{MAX_SCHEDULES_PER_COMMAND, ScheduleKey, share_a_slot};
use super::{Analysis, Group, Place};
use crate::sources::SourceKind;
use crate::sources::command::{self, Identity};
use std::collections::HashMap;

struct Dsu(Vec<usize>);
impl Dsu {
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.0[a.max(b)] = a.min(b);
        }
    }
}

impl Analysis<'_> {
    /// The namespace that separates a place from CronJobs of other namespaces (SPEC 3.6):
    /// a Kubernetes registration's `metadata.namespace`; None (any) elsewhere.
    fn namespace(&self, p: Place) -> Option<&str> {
        match p {
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                (reg.kind == SourceKind::Kubernetes)
                    .then(|| reg.namespace.as_ref().map(|n| n.value.as_str()))
                    .flatten()
            }
            Place::Job(_) => None,
        }
    }

    /// The command identity of a place that takes part in "same command" duplicates:
    /// enabled manifest jobs and untied, unsuspended registrations with a command.
    fn identity_of(&self, p: Place) -> Option<Identity> {
        let id = match p {
            Place::Job(j) => {
                let job = &self.project.jobs[j];
                if !job.enabled {
                    return None;
                }
                command::identity(&job.command, None)
            }
            Place::Reg(r) => {
                let reg = &self.project.regs[r];
                if self.ties[r].is_some() || reg.suspended() {
                    return None;
                }
                command::identity(&reg.command, reg.workdir.as_ref().map(|w| w.value.as_str()))
            }
        };
        (!id.is_empty()).then_some(id)
    }

    /// Two in-process schedules called in the same file (SPEC 3.7).
    fn same_module(&self, a: Place, b: Place) -> bool {
        match (a, b) {
            (Place::Reg(x), Place::Reg(y)) => {
                let (x, y) = (&self.project.regs[x], &self.project.regs[y]);
                x.kind == SourceKind::Code && y.kind == SourceKind::Code && x.file == y.file
            }
            _ => false,
        }
    }

    pub(super) fn build_groups(&mut self) {
        let nj = self.project.jobs.len();
        let nr = self.project.regs.len();
        let idx = |p: Place| match p {
            Place::Job(j) => j,
            Place::Reg(r) => nj + r,
        };
        let mut dsu = Dsu((0..nj + nr).collect());
        // Two manifests declaring one `service/name` are one job where they deploy together.
        for same in self.by_key().values() {
            for (i, &a) in same.iter().enumerate() {
                for &b in &same[i + 1..] {
                    if self.together(Place::Job(a), Place::Job(b)) {
                        dsu.union(a, b);
                    }
                }
            }
        }
        for (r, t) in self.ties.iter().enumerate() {
            if let Some(j) = t {
                dsu.union(nj + r, *j);
            }
        }
        // Same command (SPEC 3.6), then slots. Places are bucketed by a key every matching
        // command shares (program basename, last path component of each argument), so
        // distinct commands are never compared, let alone their slots enumerated.
        let places: Vec<(Place, Identity)> = (0..nj)
            .map(Place::Job)
            .chain((0..nr).map(Place::Reg))
            .filter_map(|p| self.identity_of(p).map(|id| (p, id)))
            .collect();
        let mut buckets: HashMap<Vec<&str>, Vec<usize>> = HashMap::new();
        for (i, (_, id)) in places.iter().enumerate() {
            buckets.entry(id.bucket_key()).or_default().push(i);
        }
        for bucket in buckets.values().filter(|b| b.len() > 1) {
            self.join_same_commands(&places, bucket, &mut |a, b| {
                // Two schedules of one module are two jobs, not one registered twice;
                // places in units deployed apart are two jobs too.
                if !self.same_module(a, b) && self.together(a, b) {
                    dsu.union(idx(a), idx(b));
                }
            });
        }
        let mut roots: HashMap<usize, usize> = HashMap::new();
        let all = (0..nj).map(Place::Job).chain((0..nr).map(Place::Reg));
        for p in all {
            let root = dsu.find(idx(p));
            let g = *roots.entry(root).or_insert_with(|| {
                self.groups.push(Group::default());
                self.groups.len() - 1
            });
            self.groups[g].places.push(p);
            self.group_of.insert(p, g);
        }
        let mut tie_count: HashMap<usize, u64> = HashMap::new();
        for (r, t) in self.ties.iter().enumerate() {
            if let Some(j) = t
                && !self.project.regs[r].suspended()
            {
                *tie_count.entry(*j).or_default() += 1;
            }
        }
        let mut groups = std::mem::take(&mut self.groups);
        for g in &mut groups {
            g.places
                .sort_by(|a, b| self.order_key(*a).cmp(&self.order_key(*b)));
            // CronJobs of different namespaces are separate runners (staging and
            // production of one job): count per namespace, with the places that have none
            // (manifest jobs, other sources) in every count.
            let mut namespaces: Vec<&str> =
                g.places.iter().filter_map(|p| self.namespace(*p)).collect();
            namespaces.sort_unstable();
            namespaces.dedup();
            let passes: Vec<Option<&str>> = if namespaces.is_empty() {
                vec![None]
            } else {
                namespaces.into_iter().map(Some).collect()
            };
            // Units deployed apart are separate runners too: count per deploy set.
            let unit_passes = self.unit_passes(&g.places);
            let (mut most_runners, mut most_instances) = (0u64, 0u64);
            // The pass that fires the job most: its places are the ones reported.
            let mut best: Option<&(Option<usize>, Vec<Option<usize>>)> = None;
            let mut best_count = (0u64, 0u64);
            for (up, ns) in unit_passes
                .iter()
                .flat_map(|up| passes.iter().map(move |ns| (up, *ns)))
            {
                let mut runners = 0u64;
                let mut instances = 0u64;
                for p in &g.places {
                    if ns.is_some() && self.namespace(*p).is_some_and(|n| Some(n) != ns) {
                        continue;
                    }
                    if !self.in_pass(*p, &up.1) {
                        continue;
                    }
                    match *p {
                        Place::Job(j) => {
                            // A job with registrations runs where they are.
                            if tie_count.get(&j).copied().unwrap_or(0) == 0 {
                                runners += 1;
                                instances =
                                    instances.saturating_add(self.project.jobs[j].instances);
                            }
                        }
                        Place::Reg(r) => {
                            let reg = &self.project.regs[r];
                            if reg.suspended() {
                                continue;
                            }
                            runners += 1;
                            instances = instances.saturating_add(reg.instances);
                        }
                    }
                }
                if (runners, instances) > best_count || best.is_none() {
                    best = Some(up);
                    best_count = (runners, instances);
                }
                most_runners = most_runners.max(runners);
                most_instances = most_instances.max(instances);
            }
            g.instances = most_instances;
            g.duplicate = most_runners >= 2;
            if let Some((set, units)) = best {
                g.duplicated = g
                    .places
                    .iter()
                    .copied()
                    .filter(|p| self.in_pass(*p, units))
                    .collect();
                g.tie = set.and_then(|s| self.sets.get(s)).map(|s| s.tie.clone());
                // A manifest above the other places' unit ties them by covering it.
                let mut seen: Vec<Option<usize>> =
                    g.duplicated.iter().map(|p| self.unit(*p)).collect();
                seen.sort_unstable();
                seen.dedup();
                if g.tie.is_none()
                    && seen.len() > 1
                    && let Some(Place::Job(j)) = g
                        .duplicated
                        .iter()
                        .find(|p| matches!(p, Place::Job(_)))
                        .copied()
                {
                    g.tie = Some(format!(
                        "manifest `{}` (it declares the jobs of the tree below it)",
                        self.display(self.project.jobs[j].file)
                    ));
                }
            }
            if g.duplicate {
                g.guarded = self.guarded_by(&g.places);
            }
        }
        self.groups = groups;
    }

    /// The deploy sets a group's places are counted in, each as (the set, when it ties
    /// several units; the units counted). One pass when every place is in one unit.
    fn unit_passes(&self, places: &[Place]) -> Vec<(Option<usize>, Vec<Option<usize>>)> {
        let mut units: Vec<Option<usize>> = places.iter().map(|p| self.unit(*p)).collect();
        units.sort_unstable();
        units.dedup();
        if units.len() < 2 {
            return vec![(None, units)];
        }
        let mut sets: Vec<usize> = units
            .iter()
            .flatten()
            .flat_map(|u| self.sets_of(*u).iter().copied())
            .collect();
        sets.sort_unstable();
        sets.dedup();
        let mut out: Vec<(Option<usize>, Vec<Option<usize>>)> = Vec::new();
        for s in sets {
            let within: Vec<Option<usize>> = units
                .iter()
                .copied()
                .filter(|u| u.is_some_and(|u| self.sets[s].units.contains(&u)))
                .collect();
            if within.len() > 1 {
                out.push((Some(s), within));
            }
        }
        out.extend(units.into_iter().map(|u| (None, vec![u])));
        out
    }

    /// A place is counted in a pass over `units` when its unit is one of them, or when it
    /// is a manifest job whose manifest covers one of them.
    fn in_pass(&self, p: Place, units: &[Option<usize>]) -> bool {
        let u = self.unit(p);
        units.contains(&u) || units.iter().any(|v| self.covers(p, *v))
    }

    /// One place per deploy unit of `xs` stands for its unit: the others are joined to it.
    fn per_unit(&self, xs: &[Place], union: &mut dyn FnMut(Place, Place)) -> Vec<Place> {
        let mut reps: HashMap<Option<usize>, Place> = HashMap::new();
        let mut order = Vec::new();
        for &x in xs {
            match reps.get(&self.unit(x)) {
                Some(&r) => union(r, x),
                None => {
                    reps.insert(self.unit(x), x);
                    order.push(x);
                }
            }
        }
        order
    }

    /// Joins the representatives of two lists (or of one list among itself) that may be
    /// one deploy's: a place of a unit in no deploy set meets only its own unit and
    /// manifest jobs; the callback decides ([`Analysis::together`]).
    fn join_reps(&self, a: &[Place], b: Option<&[Place]>, union: &mut dyn FnMut(Place, Place)) {
        let job = |p: Place| matches!(p, Place::Job(_));
        let linked = |p: Place| job(p) || self.unit(p).is_none_or(|u| !self.sets_of(u).is_empty());
        let (b, same_list) = match b {
            Some(b) => (b, false),
            None => (a, true),
        };
        let by_unit: HashMap<Option<usize>, Place> =
            b.iter().map(|p| (self.unit(*p), *p)).collect();
        let jobs: Vec<Place> = b.iter().copied().filter(|p| job(*p)).collect();
        for &x in a {
            if linked(x) {
                for &y in b {
                    if x != y && (linked(y) || job(x)) {
                        union(x, y);
                    }
                }
            } else {
                if !same_list && let Some(&y) = by_unit.get(&self.unit(x)) {
                    union(x, y);
                }
                for &y in &jobs {
                    union(x, y);
                }
            }
        }
    }

    /// Joins the places of one bucket that run the same command on schedules sharing a
    /// slot. Equal identities form one class (compared once); classes are compared
    /// pairwise with the tail rule. Slots are enumerated once per distinct schedule.
    fn join_same_commands(
        &self,
        places: &[(Place, Identity)],
        bucket: &[usize],
        union: &mut dyn FnMut(Place, Place),
    ) {
        type Sub = (usize, Vec<Place>);
        let mut class_of: HashMap<(&Identity, Option<&str>), usize> = HashMap::new();
        // (identity, namespace, places by schedule: (index into `scheds`, places))
        let mut classes: Vec<(&Identity, Option<&str>, Vec<Sub>)> = Vec::new();
        let mut sched_of: HashMap<ScheduleKey, usize> = HashMap::new();
        let mut scheds: Vec<Place> = Vec::new();
        for &i in bucket {
            let (p, id) = (&places[i].0, &places[i].1);
            let ns = self.namespace(*p);
            let c = *class_of.entry((id, ns)).or_insert_with(|| {
                classes.push((id, ns, Vec::new()));
                classes.len() - 1
            });
            let key = self.schedule_key(*p);
            let s = match sched_of.get(&key) {
                Some(&s) => s,
                None if scheds.len() < MAX_SCHEDULES_PER_COMMAND => {
                    sched_of.insert(key, scheds.len());
                    scheds.push(*p);
                    scheds.len() - 1
                }
                None => continue,
            };
            let subs = &mut classes[c].2;
            match subs.iter_mut().find(|(k, _)| *k == s) {
                Some((_, ps)) => ps.push(*p),
                None => subs.push((s, vec![*p])),
            }
        }
        // Classes without relative words can match only classes with the same exact key
        // (or a relative one, which compares itself with every class): thousands of
        // `node /srv/app-N/index.js` in one bucket are not compared pairwise.
        let all_classes: Vec<usize> = (0..classes.len()).collect();
        let mut exact: HashMap<Vec<&str>, Vec<usize>> = HashMap::new();
        for (c, (id, _, _)) in classes.iter().enumerate() {
            if !id.has_relative() {
                exact.entry(id.exact_key()).or_default().push(c);
            }
        }
        let slots: Vec<Option<Vec<i64>>> = scheds.iter().map(|&p| self.slots_of(p)).collect();
        let meets = |a: usize, b: usize| match (&slots[a], &slots[b]) {
            (Some(x), Some(y)) => share_a_slot(x, y),
            _ => false,
        };
        for (c, (id, ns, subs)) in classes.iter().enumerate() {
            // One place per unit stands for each list (places of one unit, one identity
            // and one schedule are one job when the schedule fires at all).
            let reps: Vec<Vec<Place>> = subs
                .iter()
                .map(|(s, ps)| {
                    if slots[*s].as_ref().is_some_and(|v| !v.is_empty()) {
                        let r = self.per_unit(ps, union);
                        self.join_reps(&r, None, union);
                        r
                    } else {
                        ps.clone()
                    }
                })
                .collect();
            for (k, (s, _)) in subs.iter().enumerate() {
                for (l, (t, _)) in subs.iter().enumerate().skip(k + 1) {
                    if meets(*s, *t) {
                        self.join_reps(&reps[k], Some(&reps[l]), union);
                    }
                }
            }
            let relative = id.has_relative();
            let others: &[usize] = if relative {
                &all_classes
            } else {
                exact.get(&id.exact_key()).map_or(&[], Vec::as_slice)
            };
            for &d in others {
                let (id2, ns2, subs2) = &classes[d];
                // Each pair is met once: a relative class meets every class (another
                // relative one only from the first of the two), an exact group its
                // later members.
                if d == c || ((!relative || id2.has_relative()) && d < c) {
                    continue;
                }
                let other_namespace = matches!((ns, ns2), (Some(a), Some(b)) if a != b);
                if other_namespace || !id.same_command(id2) {
                    continue;
                }
                for (s, ps) in subs {
                    for (t, qs) in subs2 {
                        if meets(*s, *t) {
                            let (ps, qs) = (
                                self.per_unit(ps, &mut |_, _| {}),
                                self.per_unit(qs, &mut |_, _| {}),
                            );
                            self.join_reps(&ps, Some(&qs), union);
                        }
                    }
                }
            }
        }
    }
}
