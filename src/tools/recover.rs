//! Help for a model that got a call slightly wrong (small local models often do): the tool
//! name closest to an unknown one. (Arguments with raw control characters are read by
//! `crate::model::arguments`.)

/// The name in `names` closest to `wanted` (fewest single-character edits, case ignored),
/// when it is close enough to be a likely slip.
pub(crate) fn closest<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = wanted.to_ascii_lowercase();
    names
        .map(|name| (edits(&wanted, &name.to_ascii_lowercase()), name))
        .filter(|(distance, name)| *distance <= name.len().max(wanted.len()) / 2 + 1)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// The Levenshtein distance of `a` and `b`, over characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closest_name_is_a_likely_slip_or_nothing() {
        let names = ["read", "write", "edit", "glob", "grep", "bash"];
        assert_eq!(closest("read_file", names.iter().copied()), Some("read"));
        assert_eq!(closest("Bash", names.iter().copied()), Some("bash"));
        assert_eq!(closest("greb", names.iter().copied()), Some("grep"));
        assert_eq!(closest("launch_rockets_now", names.iter().copied()), None);
    }
}
