//! Did-you-mean: the known word nearest to a misspelling.

/// The known word nearest to a misspelling, when it is near enough to be a likely typo.
pub fn closest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    // Edit distance catches short typos (`tll` for `ttl`); Jaro-Winkler catches longer
    // words with a shared prefix (`max_attempt` for `max_attempts`).
    let limit = (word.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| {
            let edits = strsim::damerau_levenshtein(word, k);
            let jw = strsim::jaro_winkler(word, k);
            (edits <= limit || jw >= 0.85, jw - edits as f64, *k)
        })
        .filter(|(near, _, _)| *near)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(_, _, k)| k)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn near_words_only() {
        assert_eq!(closest("tll", &["ttl", "key"]), Some("ttl"));
        assert_eq!(
            closest("max_attempt", &["max_attempts"]),
            Some("max_attempts")
        );
        assert_eq!(closest("zzz", &["ttl", "key"]), None);
    }
}
