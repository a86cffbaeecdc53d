//! A set of attribute types as a bitmap over their ids.
//!
//! The schema check of every added and modified entry asks two
//! questions per attribute: does one of the entry's classes allow it,
//! and is each class's MUST present. Binary searches of the classes'
//! MUST and MAY lists, class by class, were most of that check's cost on
//! the store's writer (callgrind: about 3,000 instructions a modify);
//! with a bitmap each answer is one bit test.

use smallvec::SmallVec;

use super::AttrId;

/// Words kept inline: 256 types, more than the built-in schema defines,
/// so a set made per checked entry does not allocate.
const INLINE_WORDS: usize = 4;

/// A set of [`AttrId`]s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttrSet {
    words: SmallVec<[u64; INLINE_WORDS]>,
}

impl AttrSet {
    /// The empty set.
    pub fn new() -> AttrSet {
        AttrSet::default()
    }

    /// Adds `attr`.
    #[inline]
    pub fn insert(&mut self, attr: AttrId) {
        let (word, bit) = position(attr);
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        if let Some(w) = self.words.get_mut(word) {
            *w |= bit;
        }
    }

    /// True if `attr` is in the set.
    #[inline]
    pub fn contains(&self, attr: AttrId) -> bool {
        let (word, bit) = position(attr);
        self.words.get(word).is_some_and(|w| w & bit != 0)
    }

    /// True if every member of `self` is in `other`.
    pub fn is_subset(&self, other: &AttrSet) -> bool {
        self.words.iter().enumerate().all(|(i, &mine)| {
            let theirs = other.words.get(i).copied().unwrap_or(0);
            mine & !theirs == 0
        })
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &AttrSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (mine, theirs) in self.words.iter_mut().zip(&other.words) {
            *mine |= theirs;
        }
    }
}

impl FromIterator<AttrId> for AttrSet {
    fn from_iter<I: IntoIterator<Item = AttrId>>(iter: I) -> AttrSet {
        let mut set = AttrSet::new();
        for attr in iter {
            set.insert(attr);
        }
        set
    }
}

fn position(attr: AttrId) -> (usize, u64) {
    let index = attr.index();
    (index / 64, 1 << (index % 64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> AttrId {
        AttrId(n)
    }

    #[test]
    fn members_are_found_across_words_and_others_are_not() {
        let set: AttrSet = [0, 63, 64, 300].map(id).into_iter().collect();
        for n in [0, 63, 64, 300] {
            assert!(set.contains(id(n)), "{n}");
        }
        for n in [1, 62, 65, 299, 301, 10_000] {
            assert!(!set.contains(id(n)), "{n}");
        }
    }

    #[test]
    fn a_union_holds_both_sides_whichever_is_longer() {
        let short: AttrSet = [1].map(id).into_iter().collect();
        let long: AttrSet = [2, 500].map(id).into_iter().collect();
        for (mut a, b) in [(short.clone(), &long), (long.clone(), &short)] {
            a.union_with(b);
            for n in [1, 2, 500] {
                assert!(a.contains(id(n)), "{n}");
            }
            assert!(!a.contains(id(3)));
        }
    }

    #[test]
    fn a_subset_is_found_whatever_the_lengths() {
        let set = |ids: &[u32]| -> AttrSet { ids.iter().map(|&n| id(n)).collect() };
        let cases = [
            (&[][..], &[][..], true),
            (&[], &[5], true),
            (&[5], &[], false),
            (&[1, 64], &[1, 64, 500], true),
            (&[1, 500], &[1, 64], false),
            (&[1, 65], &[1, 64, 500], false),
        ];
        for (small, big, subset) in cases {
            assert_eq!(
                set(small).is_subset(&set(big)),
                subset,
                "{small:?} in {big:?}"
            );
        }
    }
}
