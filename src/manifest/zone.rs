//! What to suggest for a time-zone name that is not in the IANA database.
//!
//! People write the abbreviation they see on a clock (`KST`, `PST`, `CEST`) or an offset
//! (`UTC+9`); neither is a zone name, and the nearest spelling (`KST` -> `MST`) is a
//! different place. An abbreviation is answered with the zone it stands for, or with
//! every candidate when it stands for several (`IST`: India, Ireland, Israel); an offset
//! with the `Etc/GMT` name of that fixed offset; anything else with the closest spelling
//! or the zone of a city written alone. Every command that takes a zone uses [`help`].

use crate::text::closest;

/// Abbreviations and the zones they are used for, most common first.
const ABBREVIATIONS: &[(&str, &[(&str, &str)])] = &[
    ("UT", &[("UTC", "")]),
    ("Z", &[("UTC", "")]),
    ("KST", &[("Asia/Seoul", "Korea")]),
    ("JST", &[("Asia/Tokyo", "Japan")]),
    ("HKT", &[("Asia/Hong_Kong", "Hong Kong")]),
    ("SGT", &[("Asia/Singapore", "Singapore")]),
    ("PHT", &[("Asia/Manila", "Philippines")]),
    ("PHST", &[("Asia/Manila", "Philippines")]),
    ("WIB", &[("Asia/Jakarta", "western Indonesia")]),
    (
        "ICT",
        &[
            ("Asia/Bangkok", "Thailand"),
            ("Asia/Ho_Chi_Minh", "Vietnam"),
        ],
    ),
    ("PKT", &[("Asia/Karachi", "Pakistan")]),
    ("GST", &[("Asia/Dubai", "Gulf")]),
    (
        "IST",
        &[
            ("Asia/Kolkata", "India"),
            ("Europe/Dublin", "Ireland"),
            ("Asia/Jerusalem", "Israel"),
        ],
    ),
    ("IDT", &[("Asia/Jerusalem", "Israel")]),
    ("MSK", &[("Europe/Moscow", "Moscow")]),
    ("TRT", &[("Europe/Istanbul", "Turkey")]),
    (
        "CEST",
        &[
            ("Europe/Berlin", "Germany"),
            ("Europe/Paris", "France"),
            ("Europe/Madrid", "Spain"),
            ("Europe/Rome", "Italy"),
            ("Europe/Amsterdam", "Netherlands"),
        ],
    ),
    (
        "EEST",
        &[
            ("Europe/Athens", "Greece"),
            ("Europe/Helsinki", "Finland"),
            ("Europe/Kyiv", "Ukraine"),
            ("Europe/Bucharest", "Romania"),
        ],
    ),
    (
        "WEST",
        &[
            ("Europe/Lisbon", "Portugal"),
            ("Atlantic/Canary", "Canary Islands"),
        ],
    ),
    (
        "BST",
        &[
            ("Europe/London", "British Summer Time"),
            ("Asia/Dhaka", "Bangladesh"),
        ],
    ),
    ("ET", &[("America/New_York", "US Eastern")]),
    ("EDT", &[("America/New_York", "US Eastern")]),
    (
        "CST",
        &[
            ("America/Chicago", "US Central"),
            ("Asia/Shanghai", "China"),
            ("America/Havana", "Cuba"),
        ],
    ),
    (
        "CDT",
        &[
            ("America/Chicago", "US Central"),
            ("America/Havana", "Cuba"),
        ],
    ),
    ("CT", &[("America/Chicago", "US Central")]),
    ("MDT", &[("America/Denver", "US Mountain")]),
    (
        "MT",
        &[
            ("America/Denver", "US Mountain"),
            ("America/Phoenix", "Arizona, no daylight saving time"),
        ],
    ),
    ("PST", &[("America/Los_Angeles", "US Pacific")]),
    ("PDT", &[("America/Los_Angeles", "US Pacific")]),
    ("PT", &[("America/Los_Angeles", "US Pacific")]),
    ("AKST", &[("America/Anchorage", "Alaska")]),
    ("AKDT", &[("America/Anchorage", "Alaska")]),
    (
        "AST",
        &[
            ("America/Halifax", "Atlantic"),
            ("America/Puerto_Rico", "Puerto Rico"),
            ("Asia/Riyadh", "Arabia"),
        ],
    ),
    ("ADT", &[("America/Halifax", "Atlantic")]),
    ("NST", &[("America/St_Johns", "Newfoundland")]),
    ("NDT", &[("America/St_Johns", "Newfoundland")]),
    ("BRT", &[("America/Sao_Paulo", "Brazil")]),
    ("ART", &[("America/Argentina/Buenos_Aires", "Argentina")]),
    (
        "AEST",
        &[
            ("Australia/Sydney", "New South Wales"),
            ("Australia/Melbourne", "Victoria"),
            ("Australia/Brisbane", "Queensland, no daylight saving time"),
        ],
    ),
    (
        "AEDT",
        &[
            ("Australia/Sydney", "New South Wales"),
            ("Australia/Melbourne", "Victoria"),
        ],
    ),
    (
        "ACST",
        &[
            ("Australia/Adelaide", "South Australia"),
            ("Australia/Darwin", "Northern Territory"),
        ],
    ),
    ("ACDT", &[("Australia/Adelaide", "South Australia")]),
    ("AWST", &[("Australia/Perth", "Western Australia")]),
    ("NZST", &[("Pacific/Auckland", "New Zealand")]),
    ("NZDT", &[("Pacific/Auckland", "New Zealand")]),
    ("SAST", &[("Africa/Johannesburg", "South Africa")]),
    ("WAT", &[("Africa/Lagos", "West Africa")]),
    (
        "CAT",
        &[
            ("Africa/Maputo", "Central Africa"),
            ("Africa/Harare", "Zimbabwe"),
        ],
    ),
    ("EAT", &[("Africa/Nairobi", "East Africa")]),
];

/// The zones a suggestion names, best first; empty when there is nothing likely. Only the
/// tests use it, as a plain oracle for what [`help`] words.
#[cfg(test)]
fn suggestions(name: &str) -> Vec<String> {
    let word = name.trim();
    if let Some((_, zones)) = ABBREVIATIONS
        .iter()
        .find(|(abbr, _)| abbr.eq_ignore_ascii_case(word))
    {
        return zones.iter().map(|(z, _)| (*z).to_owned()).collect();
    }
    if let Some(offset) = fixed_offset(word) {
        return vec![offset.etc_name()];
    }
    closest_zone(word).into_iter().collect()
}

/// The help line for an unknown zone name, when there is one to give.
pub fn help(name: &str) -> Option<String> {
    let word = name.trim();
    if let Some((abbr, zones)) = ABBREVIATIONS
        .iter()
        .find(|(abbr, _)| abbr.eq_ignore_ascii_case(word))
    {
        if let [(zone, _)] = zones {
            return Some(format!(
                "did you mean `{zone}`? `{abbr}` is an abbreviation; zones are named by place (Area/City)"
            ));
        }
        let listed: Vec<String> = zones
            .iter()
            .map(|(zone, place)| format!("`{zone}` ({place})"))
            .collect();
        return Some(format!(
            "`{abbr}` is an abbreviation used by several zones; name the one you mean: {}",
            listed.join(", ")
        ));
    }
    if let Some(offset) = fixed_offset(word) {
        return Some(if offset.minutes == 0 && offset.hours == 0 {
            "did you mean `UTC`?".to_owned()
        } else if offset.minutes == 0 && offset.hours <= 14 {
            format!(
                "`{word}` is a fixed offset, not a zone: name the zone of the place (it follows daylight saving time), or write `{}` for a fixed {} (Etc/GMT names invert the sign)",
                offset.etc_name(),
                offset.shown()
            )
        } else {
            format!(
                "`{word}` is a fixed offset, not a zone: name the zone of the place (Area/City); its offset follows daylight saving time"
            )
        });
    }
    closest_zone(word).map(|z| format!("did you mean `{z}`?"))
}

/// `UTC+9`, `GMT-05:00`, `+09:00`, `UTC+5:30`: a sign, hours and optional minutes.
struct Offset {
    east: bool,
    hours: u32,
    minutes: u32,
}

impl Offset {
    /// The Etc zone of a whole-hour offset: POSIX signs, so UTC+9 is `Etc/GMT-9`.
    fn etc_name(&self) -> String {
        if self.hours == 0 {
            return "UTC".to_owned();
        }
        format!("Etc/GMT{}{}", if self.east { '-' } else { '+' }, self.hours)
    }

    fn shown(&self) -> String {
        format!("UTC{}{}", if self.east { '+' } else { '-' }, self.hours)
    }
}

fn fixed_offset(word: &str) -> Option<Offset> {
    let upper = word.to_ascii_uppercase();
    let rest = ["UTC", "GMT", "UT"]
        .iter()
        .find_map(|p| upper.strip_prefix(p))
        .unwrap_or(&upper)
        .trim_start();
    let east = match rest.chars().next()? {
        '+' => true,
        '-' | '\u{2212}' => false,
        _ => return None,
    };
    let digits = rest[rest.char_indices().nth(1)?.0..].trim();
    let (h, m) = match digits.split_once(':') {
        Some((h, m)) => (h, m),
        None if digits.len() == 4 => digits.split_at(2),
        None => (digits, "0"),
    };
    let all_digits =
        |s: &str| !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(h) || !all_digits(m) {
        return None;
    }
    let hours = h.parse().ok()?;
    let minutes = m.parse().ok()?;
    (hours <= 18 && minutes < 60).then_some(Offset {
        east,
        hours,
        minutes,
    })
}

/// The closest known zone name: by spelling, or by the city part (`New York` ->
/// `America/New_York`).
fn closest_zone(name: &str) -> Option<String> {
    let db = jiff::tz::db();
    let names: Vec<String> = db.available().map(|n| n.as_str().to_owned()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    if let Some(s) = closest(name, &refs) {
        return Some(s.to_owned());
    }
    let city = name.trim().replace(' ', "_");
    let city = city.rsplit('/').next().unwrap_or(&city);
    refs.iter()
        .find(|n| {
            n.rsplit('/')
                .next()
                .is_some_and(|last| last.eq_ignore_ascii_case(city))
        })
        .map(|s| (*s).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviations_name_their_zones() {
        assert_eq!(suggestions("KST"), ["Asia/Seoul"]);
        assert_eq!(suggestions("pst"), ["America/Los_Angeles"]);
        assert_eq!(
            suggestions("IST"),
            ["Asia/Kolkata", "Europe/Dublin", "Asia/Jerusalem"]
        );
        let h = help("KST").unwrap();
        assert!(h.starts_with("did you mean `Asia/Seoul`?"), "{h}");
        let h = help("IST").unwrap();
        assert!(
            h.contains(
                "`Asia/Kolkata` (India), `Europe/Dublin` (Ireland), `Asia/Jerusalem` (Israel)"
            ),
            "{h}"
        );
        assert!(help("CST").unwrap().contains("`Asia/Shanghai` (China)"));
    }

    #[test]
    fn every_suggested_zone_exists() {
        for (abbr, zones) in ABBREVIATIONS {
            assert!(
                jiff::tz::TimeZone::get(abbr).is_err(),
                "{abbr} is a zone name itself"
            );
            for (z, _) in *zones {
                assert!(jiff::tz::TimeZone::get(z).is_ok(), "{z}");
            }
        }
    }

    #[test]
    fn offsets_and_spellings() {
        assert_eq!(suggestions("UTC+9"), ["Etc/GMT-9"]);
        assert_eq!(suggestions("GMT-05:00"), ["Etc/GMT+5"]);
        assert_eq!(suggestions("+0900"), ["Etc/GMT-9"]);
        assert!(help("UTC+9").unwrap().contains("fixed offset"));
        assert_eq!(help("UTC+0").unwrap(), "did you mean `UTC`?");
        assert!(help("UTC+5:30").unwrap().contains("Area/City"));
        assert_eq!(suggestions("Asia/Seol"), ["Asia/Seoul"]);
        assert_eq!(suggestions("New York"), ["America/New_York"]);
        assert!(suggestions("Mars/Olympus_Mons").is_empty());
        assert!(suggestions("").is_empty());
        assert!(suggestions("+").is_empty());
    }
}
