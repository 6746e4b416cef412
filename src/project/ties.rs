//! Registrations tied to manifest jobs (SPEC 3.5 "Ties"), and deploy units tied together
//! (docs/deploy-units.md): by the tree (a kustomization, a chart) or by a manifest whose
//! jobs are registered in several units.

use super::{Analysis, DeploySet, Place};
use std::collections::{BTreeMap, HashMap};

impl Analysis<'_> {
    pub(super) fn by_key(&self) -> HashMap<String, Vec<usize>> {
        let mut m: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, j) in self.project.jobs.iter().enumerate() {
            m.entry(j.key()).or_default().push(i);
        }
        m
    }

    pub(super) fn resolve_ties(&mut self) {
        let keys = self.by_key();
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, j) in self.project.jobs.iter().enumerate() {
            by_name.entry(j.name.as_str()).or_default().push(i);
        }
        self.ties = self
            .project
            .regs
            .iter()
            .map(|r| {
                let tie = r.tie.as_ref()?;
                if let Some(svc) = &tie.service {
                    return keys.get(&format!("{svc}/{}", tie.job))?.first().copied();
                }
                let cands = by_name.get(tie.job.as_str())?;
                if cands.len() == 1 {
                    return cands.first().copied();
                }
                // `--manifest PATH` picks among services by the manifest's file name.
                let m = tie.manifest.as_deref()?;
                let base = m.rsplit('/').next().unwrap_or(m);
                let hits: Vec<usize> = cands
                    .iter()
                    .copied()
                    .filter(|&j| {
                        self.files
                            .get(self.project.jobs[j].file)
                            .is_some_and(|f| f.display.ends_with(base))
                    })
                    .collect();
                (hits.len() == 1).then(|| hits[0])
            })
            .collect();
    }

    /// The deploy unit of a place; `None` when units were not detected (one unit).
    pub fn unit(&self, p: Place) -> Option<usize> {
        self.project.units.of(self.location(p).file)
    }

    /// The tree's deploy sets, then one per manifest that ties units: the manifest's own
    /// unit and those of the registrations tied to its jobs.
    pub(super) fn build_sets(&mut self) {
        let units = &self.project.units;
        let mut sets = units.sets.clone();
        let mut by_manifest: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (r, t) in self.ties.iter().enumerate() {
            let Some(j) = *t else { continue };
            let file = self.project.jobs[j].file;
            if let (Some(mu), Some(ru)) = (units.of(file), units.of(self.project.regs[r].file)) {
                by_manifest.entry(file).or_default().extend([mu, ru]);
            }
        }
        for (file, mut list) in by_manifest {
            list.sort_unstable();
            list.dedup();
            if list.len() > 1 {
                sets.push(DeploySet {
                    units: list,
                    tie: format!("manifest `{}`", self.display(file)),
                });
            }
        }
        // Kustomizations that bring in the same units are one deploy set (the first named).
        let mut seen = std::collections::HashSet::new();
        sets.retain(|s| seen.insert(s.units.clone()));
        let mut sets_of = vec![Vec::new(); units.units.len()];
        for (i, s) in sets.iter().enumerate() {
            for &u in &s.units {
                if let Some(list) = sets_of.get_mut(u) {
                    list.push(i);
                }
            }
        }
        self.sets = sets;
        self.sets_of = sets_of;
        let mut covered: HashMap<usize, Vec<usize>> = HashMap::new();
        for job in &self.project.jobs {
            if covered.contains_key(&job.file) {
                continue;
            }
            let Some(own) = units.of(job.file) else {
                continue;
            };
            let dir = self
                .files
                .get(job.file)
                .and_then(|f| std::path::absolute(&f.path).ok())
                .and_then(|p| p.parent().map(std::path::Path::to_path_buf));
            let mut list = vec![own];
            if let Some(dir) = dir
                && units.units.get(own).is_some_and(|u| u.fixture.is_none())
            {
                list.extend(
                    units
                        .units
                        .iter()
                        .enumerate()
                        .filter(|(_, u)| u.fixture.is_none() && u.root.starts_with(&dir))
                        .map(|(i, _)| i),
                );
            }
            list.sort_unstable();
            list.dedup();
            covered.insert(job.file, list);
        }
        self.covered = covered;
    }

    /// A manifest job declares the jobs of the tree below its manifest: it is compared
    /// with the places of every unit there (not of test fixtures).
    pub(super) fn covers(&self, p: Place, unit: Option<usize>) -> bool {
        match (p, unit) {
            (Place::Job(j), Some(u)) => self
                .covered
                .get(&self.project.jobs[j].file)
                .is_some_and(|l| l.contains(&u)),
            _ => false,
        }
    }

    /// The deploy sets a unit is in (none: it is deployed on its own).
    pub fn sets_of(&self, unit: usize) -> &[usize] {
        self.sets_of.get(unit).map_or(&[], Vec::as_slice)
    }

    /// Two places may be one deploy's: the same unit, units a deploy set ties, or a
    /// manifest job and a place in the tree below its manifest.
    pub fn together(&self, a: Place, b: Place) -> bool {
        match (self.unit(a), self.unit(b)) {
            (Some(x), Some(y)) => {
                x == y
                    || share(self.sets_of(x), self.sets_of(y))
                    || self.covers(a, Some(y))
                    || self.covers(b, Some(x))
            }
            _ => true,
        }
    }
}

/// Two ascending lists share an element (a merge, linear in their lengths).
fn share(a: &[usize], b: &[usize]) -> bool {
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        match x.cmp(y) {
            std::cmp::Ordering::Equal => return true,
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
        }
    }
    false
}
