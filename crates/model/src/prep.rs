//! LDAP string preparation (RFC 4518): what makes `"  Babs   JENSEN "`
//! equal `"babs jensen"` under caseIgnoreMatch.
//!
//! Steps: transcode (values are already UTF-8), map (section 2.2),
//! case fold (Unicode full case folding, for case-ignoring rules),
//! normalize (NFKC), prohibit (section 2.4), and insignificant space
//! handling (section 2.6). Two deviations, both documented choices:
//! unassigned code points are not refused (that needs the Unicode 3.2
//! tables of RFC 3454, and refusing them would reject newer scripts), and
//! bidi is not checked (RFC 4518 section 2.5 says it is not). Internal runs
//! of spaces compare as one space, which is what the "two spaces" form of
//! section 2.6.1 achieves.

use unicode_normalization::UnicodeNormalization;

/// Why a value cannot be prepared (section 2.4): it holds a prohibited
/// code point. Matching against it is Undefined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prohibited;

/// Which insignificant characters to drop (section 2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spaces {
    /// Leading and trailing spaces dropped, inner runs count as one.
    Collapse,
    /// Every space dropped (numericString rules).
    RemoveAll,
    /// Every space and hyphen dropped (telephoneNumber rules).
    RemoveAllAndHyphens,
}

/// Where a substring assertion part sits, which decides which of its edge
/// spaces are significant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A whole value (equality, ordering).
    Whole,
    /// `initial`: leading spaces dropped, one trailing space kept.
    Initial,
    /// `any`: one leading and one trailing space kept.
    Any,
    /// `final`: one leading space kept, trailing spaces dropped.
    Final,
}

fn mapped(c: char) -> Option<char> {
    match c {
        '\u{09}'..='\u{0D}' | '\u{85}' => Some(' '),
        '\u{AD}'
        | '\u{34F}'
        | '\u{1806}'
        | '\u{180B}'..='\u{180D}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{FFFC}'
        | '\u{200B}' => None,
        '\u{00}'..='\u{08}'
        | '\u{0E}'..='\u{1F}'
        | '\u{7F}'..='\u{84}'
        | '\u{86}'..='\u{9F}'
        | '\u{6DD}'
        | '\u{70F}'
        | '\u{180E}'
        | '\u{200C}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2063}'
        | '\u{206A}'..='\u{206F}'
        | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0001}'
        | '\u{E0020}'..='\u{E007F}' => None,
        '\u{A0}'
        | '\u{1680}'
        | '\u{2000}'..='\u{200A}'
        | '\u{2028}'
        | '\u{2029}'
        | '\u{202F}'
        | '\u{205F}'
        | '\u{3000}' => Some(' '),
        _ => Some(c),
    }
}

fn prohibited(c: char) -> bool {
    let u = u32::from(c);
    matches!(u, 0xE000..=0xF8FF | 0xF0000..=0xFFFFD | 0x100000..=0x10FFFD | 0xFDD0..=0xFDEF | 0xFFFD)
        || (u & 0xFFFE) == 0xFFFE
}

/// Prepares `value` into `out` (cleared first).
pub fn prepare(
    value: &[u8],
    fold: bool,
    spaces: Spaces,
    part: Part,
    out: &mut String,
) -> Result<(), Prohibited> {
    out.clear();
    let text = std::str::from_utf8(value).map_err(|_| Prohibited)?;
    if text.is_ascii() && spaces == Spaces::Collapse {
        // Fast path: NFKC and case folding of ASCII are per byte, and
        // spaces collapse in the same pass, with no allocation beyond `out`.
        ascii_collapse(text.as_bytes(), fold, part, out);
        return Ok(());
    }
    if text.is_ascii() {
        for b in text.bytes() {
            if let Some(c) = mapped(char::from(b)) {
                out.push(if fold { c.to_ascii_lowercase() } else { c });
            }
        }
    } else {
        let mapped_text: String = text.chars().filter_map(mapped).collect();
        // RFC 3454 table B.2 is case folding closed under NFKC: folding,
        // normalising and folding again gets there (NFKC can produce
        // capitals, e.g. U+2102 DOUBLE-STRUCK CAPITAL C becomes 'C').
        let normalized: String = if fold {
            let once: String = caseless::default_case_fold_str(&mapped_text)
                .nfkc()
                .collect();
            caseless::default_case_fold_str(&once).nfkc().collect()
        } else {
            mapped_text.nfkc().collect()
        };
        for c in normalized.chars() {
            if prohibited(c) {
                return Err(Prohibited);
            }
            // NFKC can produce new separators (e.g. from compatibility forms).
            out.push(if c != ' ' && mapped(c) == Some(' ') {
                ' '
            } else {
                c
            });
        }
    }
    handle_spaces(out, spaces, part);
    Ok(())
}

/// Whether preparing the whole of `value` with spaces collapsed would give
/// it back unchanged: printable ASCII words joined by single spaces, with
/// no capitals when `fold`. Most stored values are so; matching them
/// needs no copy ([`crate::rules::Norm::key_cow`]).
pub fn is_prepared_ascii(value: &[u8], fold: bool) -> bool {
    // A space at the start is dropped, so it counts as following one.
    let mut after_space = true;
    for &b in value {
        if b == b' ' {
            if after_space {
                return false;
            }
            after_space = true;
        } else if (0x21..0x7f).contains(&b) && !(fold && b.is_ascii_uppercase()) {
            after_space = false;
        } else {
            return false;
        }
    }
    // A trailing space is dropped too; the empty value stays empty.
    !after_space || value.is_empty()
}

fn ascii_collapse(bytes: &[u8], fold: bool, part: Part, out: &mut String) {
    out.reserve(bytes.len());
    let mut leading = false;
    let mut pending = false;
    for &b in bytes {
        // Printable ASCII other than space maps to itself.
        let c = if (0x21..0x7f).contains(&b) {
            char::from(b)
        } else {
            match mapped(char::from(b)) {
                Some(c) => c,
                None => continue,
            }
        };
        if c == ' ' {
            if out.is_empty() {
                leading = true;
            } else {
                pending = true;
            }
            continue;
        }
        if pending {
            out.push(' ');
            pending = false;
        }
        out.push(if fold { c.to_ascii_lowercase() } else { c });
    }
    let keep_leading = leading && matches!(part, Part::Any | Part::Final);
    let trailing = pending || (out.is_empty() && leading);
    let keep_trailing = trailing && matches!(part, Part::Any | Part::Initial);
    if keep_leading {
        out.insert(0, ' ');
    }
    if keep_trailing && !(out.len() == 1 && keep_leading) {
        out.push(' ');
    }
}

fn handle_spaces(s: &mut String, spaces: Spaces, part: Part) {
    match spaces {
        Spaces::RemoveAll => s.retain(|c| c != ' '),
        Spaces::RemoveAllAndHyphens => {
            s.retain(|c| c != ' ' && c != '-' && c != '\u{2010}' && c != '\u{2212}')
        }
        Spaces::Collapse => {
            let leading = s.starts_with(' ');
            let trailing = s.ends_with(' ');
            let words: Vec<&str> = s.split(' ').filter(|w| !w.is_empty()).collect();
            let mut out = String::with_capacity(s.len());
            let keep_leading = leading && matches!(part, Part::Any | Part::Final);
            let keep_trailing = trailing && matches!(part, Part::Any | Part::Initial);
            if keep_leading {
                out.push(' ');
            }
            out.push_str(&words.join(" "));
            if keep_trailing && !(words.is_empty() && keep_leading) {
                out.push(' ');
            }
            *s = out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eq(v: &str, fold: bool) -> String {
        let mut out = String::new();
        prepare(v.as_bytes(), fold, Spaces::Collapse, Part::Whole, &mut out).unwrap();
        out
    }

    #[test]
    fn spaces_and_case() {
        assert_eq!(eq("  Babs   JENSEN ", true), "babs jensen");
        assert_eq!(eq("  Babs   JENSEN ", false), "Babs JENSEN");
        assert_eq!(eq("", true), "");
        assert_eq!(eq("   ", true), "");
        assert_eq!(eq("a\tb\r\nc", true), "a b c");
    }

    #[test]
    fn unicode_mapping_folding_and_nfkc() {
        // Soft hyphen and zero-width space vanish; NBSP is a space.
        assert_eq!(eq("ab\u{AD}c\u{200B}d\u{A0}e", true), "abcd e");
        // Full case folding: ß folds to ss, Σ to σ.
        assert_eq!(eq("Straße ΣΑΣ", true), "strasse σασ");
        // NFKC: the ligature ﬁ becomes fi, a composed é equals e + combining acute.
        assert_eq!(eq("\u{FB01}x", false), "fix");
        assert_eq!(eq("e\u{301}", false), eq("\u{E9}", false));
        // Fullwidth letters are their ASCII forms under NFKC.
        assert_eq!(eq("ＡＢＣ", true), "abc");
    }

    #[test]
    fn prohibited_code_points_refuse_the_value() {
        let mut out = String::new();
        for bad in ["a\u{E000}", "\u{FFFD}", "x\u{FDD0}"] {
            assert_eq!(
                prepare(
                    bad.as_bytes(),
                    true,
                    Spaces::Collapse,
                    Part::Whole,
                    &mut out
                ),
                Err(Prohibited),
                "{bad:?}"
            );
        }
        assert!(prepare(&[0xff, 0xfe], true, Spaces::Collapse, Part::Whole, &mut out).is_err());
    }

    #[test]
    fn numeric_and_telephone_spaces() {
        let mut out = String::new();
        prepare(b" 12 34 ", false, Spaces::RemoveAll, Part::Whole, &mut out).unwrap();
        assert_eq!(out, "1234");
        prepare(
            b"+1 512-315-0280",
            false,
            Spaces::RemoveAllAndHyphens,
            Part::Whole,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, "+15123150280");
    }

    #[test]
    fn substring_parts_keep_inner_edge_spaces() {
        let mut out = String::new();
        prepare(b"  Foo  ", true, Spaces::Collapse, Part::Initial, &mut out).unwrap();
        assert_eq!(out, "foo ");
        prepare(b"  Foo  ", true, Spaces::Collapse, Part::Final, &mut out).unwrap();
        assert_eq!(out, " foo");
        prepare(b"  Foo  ", true, Spaces::Collapse, Part::Any, &mut out).unwrap();
        assert_eq!(out, " foo ");
        prepare(b"   ", true, Spaces::Collapse, Part::Any, &mut out).unwrap();
        assert_eq!(out, " ");
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn preparing_twice_equals_preparing_once(s in "\\PC{0,24}", fold in any::<bool>()) {
                let mut once = String::new();
                if prepare(s.as_bytes(), fold, Spaces::Collapse, Part::Whole, &mut once).is_ok() {
                    let mut twice = String::new();
                    prepare(once.as_bytes(), fold, Spaces::Collapse, Part::Whole, &mut twice).unwrap();
                    prop_assert_eq!(once, twice);
                }
            }
        }
    }
}
