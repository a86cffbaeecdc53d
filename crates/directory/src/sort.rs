//! Server-side sorting (RFC 2891) and virtual list views
//! (draft-ietf-ldapext-ldapv3-vlv-09) for search.
//!
//! A sorted search runs as any search does (in steps, under the same
//! limits and access checks), but keeps each visible match's sort keys
//! instead of sending it. When every naming context is done, the keys are
//! sorted and the entries read again and sent in that order: all of them,
//! one page (paged results) or one window (VLV). Nothing is kept between
//! requests: the next page or window runs the search again, and a page's
//! cookie holds the last entry's keys so the next page starts after it
//! whatever was added or deleted meanwhile.
//!
//! What the keys of every sort in progress hold together is bounded by
//! `directory.sort_memory_bytes` ([`SortBudget`]).
//!
//! Choices where the RFC leaves room, with slapd's sssvlv overlay as the
//! reference:
//! - A multi-valued key sorts by its least value (RFC 2891 section 2.2),
//!   in either direction; an entry without the attribute sorts after all
//!   others, before them in reverse order (as slapd).
//! - An attribute without an ORDERING rule is sorted by its EQUALITY
//!   rule's order (as 389 DS and Active Directory do; slapd refuses with
//!   inappropriateMatching): address books sort on `cn`, which RFC 4519
//!   gives no ordering rule.
//! - A failure to sort is answered as RFC 2891 section 2 says: with a
//!   critical control, unavailableCriticalExtension and no entries; with
//!   a non-critical one, the entries unsorted. Either way the sort
//!   response says why. (slapd fails the search with the sort result's
//!   code whatever the criticality.)
//! - Values of an attribute the caller may not read count as absent: the
//!   order must not reveal them.

use std::cmp::Ordering;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as Atomic};

use meridian_model::Schema;
use meridian_model::entry::{Description, Entry};
use meridian_model::rules::{RuleInfo, RuleKind};
use meridian_model::schema::AttrId;
use meridian_proto::ResultCode;
use meridian_proto::sorting::{SortKey, VlvRequest, VlvTarget};
use meridian_store::EntryId;

/// A request control as the search received it: criticality and the raw
/// value (decoded where it is served).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlValue<'a> {
    /// The control's criticality.
    pub critical: bool,
    /// The control's value.
    pub value: Option<&'a [u8]>,
}

/// Why a search cannot be sorted as asked: the sort response's code, the
/// key's attribute it is about, and a message for the search result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SortRefusal {
    pub(crate) code: ResultCode,
    pub(crate) attr: Option<Vec<u8>>,
    pub(crate) message: String,
}

impl SortRefusal {
    fn new(code: ResultCode, attr: &[u8], message: String) -> Self {
        SortRefusal {
            code,
            attr: Some(attr.to_vec()),
            message,
        }
    }
}

/// One key of a sort, resolved against the schema.
#[derive(Debug)]
struct PlannedKey {
    desc: Description,
    rule: &'static RuleInfo,
    reverse: bool,
}

/// The keys of a sort request, resolved.
#[derive(Debug)]
pub(crate) struct SortPlan {
    keys: Vec<PlannedKey>,
}

/// A match's sort keys: per key, the sortable form of its least value
/// ([`RuleInfo::sortable_key`]: plain byte order is the rule's order), or
/// `None` when it has none the caller may read.
pub(crate) type Keys = Box<[Option<Box<[u8]>>]>;

impl SortPlan {
    /// Resolves a sort control's value. `Err(None)`: the value is
    /// malformed (protocolError); `Err(Some(refusal))`: well formed, but
    /// not a sort this server performs.
    pub(crate) fn resolve(
        value: Option<&[u8]>,
        schema: &Schema,
        most_keys: usize,
    ) -> Result<SortPlan, Option<SortRefusal>> {
        // Decoding stops at a bound far above any configured one, so a
        // list of a million keys is not decoded to be refused.
        let keys = meridian_proto::sorting::decode_sort_request(value, most_keys.saturating_add(1))
            .map_err(|_| None)?;
        if keys.len() > most_keys {
            return Err(Some(SortRefusal {
                code: ResultCode::UNWILLING_TO_PERFORM,
                attr: None,
                message: format!(
                    "a sort by more than {most_keys} keys is refused (directory.sort_max_keys)"
                ),
            }));
        }
        let mut planned: Vec<PlannedKey> = Vec::with_capacity(keys.len());
        for key in &keys {
            let key = Self::resolve_key(key, schema)?;
            if planned.iter().any(|p| p.desc == key.desc) {
                // RFC 2891 section 1.1.
                return Err(Some(SortRefusal {
                    code: ResultCode::UNWILLING_TO_PERFORM,
                    attr: None,
                    message: "an attribute appears twice in the sort keys".to_owned(),
                }));
            }
            planned.push(key);
        }
        Ok(SortPlan { keys: planned })
    }

    fn resolve_key(key: &SortKey<'_>, schema: &Schema) -> Result<PlannedKey, Option<SortRefusal>> {
        let name = String::from_utf8_lossy(key.attr);
        let desc = Description::parse_selector(key.attr, schema).map_err(|_| {
            Some(SortRefusal::new(
                ResultCode::NO_SUCH_ATTRIBUTE,
                key.attr,
                format!("sort key {name:?} is not an attribute type of the schema"),
            ))
        })?;
        let rule = match key.ordering_rule {
            Some(rule_name) => {
                let text = String::from_utf8_lossy(rule_name);
                schema
                    .rule(text.trim())
                    .filter(|r| r.kind != RuleKind::Substrings)
                    .ok_or_else(|| {
                        Some(SortRefusal::new(
                            ResultCode::INAPPROPRIATE_MATCHING,
                            key.attr,
                            format!(
                                "sort key {name:?}: {text:?} is not an ordering or equality \
                                 matching rule this server implements"
                            ),
                        ))
                    })?
            }
            None => schema
                .attr(desc.attr)
                .and_then(|at| at.ordering.or(at.equality))
                .ok_or_else(|| {
                    Some(SortRefusal::new(
                        ResultCode::INAPPROPRIATE_MATCHING,
                        key.attr,
                        format!(
                            "sort key {name:?}: the attribute type has no matching rule to order by"
                        ),
                    ))
                })?,
        };
        Ok(PlannedKey {
            desc,
            rule,
            reverse: key.reverse,
        })
    }

    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The sort keys of `entry`, counting only the values of attributes
    /// `readable` allows.
    pub(crate) fn keys_of(
        &self,
        entry: &Entry,
        schema: &Schema,
        readable: impl Fn(AttrId) -> bool,
    ) -> Keys {
        self.keys
            .iter()
            .map(|key| {
                let mut least: Option<Vec<u8>> = None;
                for attribute in entry.matching(&key.desc, schema) {
                    if !readable(attribute.desc.attr) {
                        continue;
                    }
                    for value in attribute.values.iter() {
                        // A value the rule cannot read does not count.
                        let Some(k) = key.rule.key(value, schema) else {
                            continue;
                        };
                        let sortable = key.rule.sortable_key(&k);
                        if least.as_deref().is_none_or(|l| *sortable < *l) {
                            least = Some(sortable.into_owned());
                        }
                    }
                }
                least.map(Vec::into_boxed_slice)
            })
            .collect()
    }

    /// The sort order of two matches' keys.
    pub(crate) fn compare(&self, a: &Keys, b: &Keys) -> Ordering {
        for (i, key) in self.keys.iter().enumerate() {
            let order = key_order(a.get(i), b.get(i));
            let order = if key.reverse { order.reverse() } else { order };
            if order != Ordering::Equal {
                return order;
            }
        }
        Ordering::Equal
    }

    /// Where `value` (a greaterThanOrEqual target) falls among `sorted`:
    /// the position of the first match at or after it in the sort order,
    /// by the first key alone. `None`: the value is not one the first
    /// key's rule can read.
    fn position_of_value(&self, sorted: &[Sorted], value: &[u8], schema: &Schema) -> Option<usize> {
        let first = self.keys.first()?;
        let key = first.rule.key(value, schema)?;
        let probe = first.rule.sortable_key(&key);
        Some(sorted.partition_point(|item| {
            let have = item.keys.first().and_then(|k| k.as_deref());
            let order = match have {
                None => Ordering::Greater,
                Some(have) => have.cmp(&probe),
            };
            let order = if first.reverse {
                order.reverse()
            } else {
                order
            };
            order == Ordering::Less
        }))
    }

    /// Bytes a match's keys take in memory, for the budget.
    fn weight(keys: &Keys) -> usize {
        std::mem::size_of::<Sorted>()
            + keys
                .iter()
                .map(|k| {
                    std::mem::size_of::<Option<Box<[u8]>>>() + k.as_ref().map_or(0, |k| k.len())
                })
                .sum::<usize>()
    }
}

/// Ascending order of one key's values, absent after present.
fn key_order(a: Option<&Option<Box<[u8]>>>, b: Option<&Option<Box<[u8]>>>) -> Ordering {
    match (a.and_then(Option::as_deref), b.and_then(Option::as_deref)) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(a), Some(b)) => a.cmp(b),
    }
}

/// One match of a sorted search: its keys and where it is.
#[derive(Debug)]
pub(crate) struct Sorted {
    pub(crate) keys: Keys,
    /// The naming context (a position in the searched ones' list).
    pub(crate) context: u32,
    pub(crate) id: EntryId,
}

impl Sorted {
    /// The full order: the keys, then where the entries are (so equal
    /// keys keep one order from page to page).
    fn order(plan: &SortPlan, a: &Sorted, b: &Sorted) -> Ordering {
        plan.compare(&a.keys, &b.keys)
            .then(a.context.cmp(&b.context))
            .then(a.id.cmp(&b.id))
    }
}

/// The memory every sort in progress may hold together
/// (`directory.sort_memory_bytes`).
#[derive(Debug)]
pub struct SortBudget {
    most: usize,
    in_use: AtomicUsize,
}

impl SortBudget {
    /// A budget of `most` bytes.
    pub fn new(most: usize) -> Arc<SortBudget> {
        Arc::new(SortBudget {
            most,
            in_use: AtomicUsize::new(0),
        })
    }

    fn take(&self, bytes: usize) -> bool {
        self.in_use
            .fetch_update(Atomic::AcqRel, Atomic::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.most)
            })
            .is_ok()
    }
}

/// The matches a sorted search has kept so far, and the memory they hold
/// of the budget (given back when dropped).
#[derive(Debug)]
pub(crate) struct Collected {
    pub(crate) items: Vec<Sorted>,
    held: usize,
    budget: Arc<SortBudget>,
}

impl Collected {
    pub(crate) fn new(budget: &Arc<SortBudget>) -> Self {
        Collected {
            items: Vec::new(),
            held: 0,
            budget: Arc::clone(budget),
        }
    }

    /// Keeps a match; `Err` when the budget has no room for it.
    pub(crate) fn push(&mut self, item: Sorted) -> Result<(), SortRefusal> {
        let bytes = SortPlan::weight(&item.keys);
        if !self.budget.take(bytes) {
            return Err(SortRefusal {
                code: ResultCode::ADMIN_LIMIT_EXCEEDED,
                attr: None,
                message: format!(
                    "too many matching entries to sort: their keys would take more than the \
                     {} bytes all sorts in progress may hold (directory.sort_memory_bytes)",
                    self.budget.most
                ),
            });
        }
        self.held += bytes;
        self.items.push(item);
        Ok(())
    }

    /// Puts the matches in the plan's order.
    pub(crate) fn sort(&mut self, plan: &SortPlan) {
        self.items
            .sort_unstable_by(|a, b| Sorted::order(plan, a, b));
    }

    /// The position of the first match after `last` (a page cookie's).
    pub(crate) fn after(&self, plan: &SortPlan, last: &Sorted) -> usize {
        self.items
            .partition_point(|item| Sorted::order(plan, item, last) != Ordering::Greater)
    }
}

impl Drop for Collected {
    fn drop(&mut self) {
        self.budget.in_use.fetch_sub(self.held, Atomic::AcqRel);
    }
}

/// What a virtual list view asks of a sorted list of `count` matches:
/// the window to send (positions, 0-based, end exclusive) and the
/// response's values, or the error to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// 1-based, as the response reports it.
    pub(crate) target_position: u32,
    pub(crate) content_count: u32,
    /// success, offsetRangeError or inappropriateMatching.
    pub(crate) result: ResultCode,
}

impl Window {
    /// The window `vlv` asks of `sorted` (already in order). The offset
    /// arithmetic is slapd's: offset 1 is the first match, offset equal
    /// to the client's count the last; with a client count other than
    /// ours the offset is scaled to ours; an offset past the end is
    /// offsetRangeError.
    pub(crate) fn of(
        plan: &SortPlan,
        sorted: &[Sorted],
        vlv: &VlvRequest<'_>,
        schema: &Schema,
    ) -> Window {
        let count = sorted.len();
        let content_count = u32::try_from(count).unwrap_or(u32::MAX);
        let refused = |result| Window {
            start: 0,
            end: 0,
            target_position: 0,
            content_count,
            result,
        };
        // The target's 1-based position (count + 1: past the end).
        let target = match vlv.target {
            VlvTarget::ByOffset {
                offset,
                content_count: theirs,
            } => {
                let offset = offset as usize;
                let theirs = theirs as usize;
                if offset == 0 {
                    return refused(ResultCode::OFFSET_RANGE_ERROR);
                } else if offset == theirs {
                    count.max(1)
                } else if offset == 1 {
                    1
                } else if theirs != 0 && theirs != count {
                    if offset > theirs {
                        return refused(ResultCode::OFFSET_RANGE_ERROR);
                    }
                    // Scaled, in u128 so a maxInt product cannot wrap.
                    let scaled = (count as u128 * offset as u128) / theirs as u128;
                    usize::try_from(scaled).unwrap_or(count).max(1)
                } else if offset > count {
                    return refused(ResultCode::OFFSET_RANGE_ERROR);
                } else {
                    offset
                }
            }
            VlvTarget::GreaterOrEqual(value) => match plan.position_of_value(sorted, value, schema)
            {
                Some(position) => position + 1,
                None => return refused(ResultCode::INAPPROPRIATE_MATCHING),
            },
        };
        let after = vlv.after as usize;
        // Past the end (no value at or after the target's): the window
        // still ends with the last entry, as slapd's does.
        let before = if target > count {
            (vlv.before as usize).max(1)
        } else {
            vlv.before as usize
        };
        // 0-based: the target is at target - 1.
        let start = target.saturating_sub(1).saturating_sub(before).min(count);
        let end = target
            .saturating_sub(1)
            .saturating_add(after)
            .saturating_add(1)
            .min(count);
        Window {
            start,
            end: end.max(start),
            target_position: u32::try_from(target).unwrap_or(u32::MAX),
            content_count,
            result: ResultCode::SUCCESS,
        }
    }
}

/// The cookie of a sorted page: version 4, the fingerprint of the search
/// (and of its sort), entries sent on all pages so far, and the last
/// entry sent with its keys.
pub(crate) fn encode_page_cookie(fingerprint: u64, total: u64, last: &Sorted) -> Vec<u8> {
    let mut c = Vec::with_capacity(32);
    c.push(4);
    c.extend_from_slice(&fingerprint.to_be_bytes());
    c.extend_from_slice(&total.to_be_bytes());
    c.extend_from_slice(&last.context.to_be_bytes());
    c.extend_from_slice(&last.id.to_be_bytes());
    for key in last.keys.iter() {
        match key {
            None => c.push(0),
            Some(bytes) => {
                c.push(1);
                c.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
                c.extend_from_slice(bytes);
            }
        }
    }
    c
}

/// Reads a cookie of [`encode_page_cookie`]: entries sent so far and the
/// last one; `None` if it is not a cookie of this search and sort
/// (`keys` of them).
pub(crate) fn decode_page_cookie(
    cookie: &[u8],
    fingerprint: u64,
    keys: usize,
) -> Option<(u64, Sorted)> {
    let (&version, mut rest) = cookie.split_first()?;
    if version != 4 {
        return None;
    }
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, tail) = rest.split_at_checked(n)?;
        rest = tail;
        Some(head)
    };
    let word = |b: &[u8]| -> Option<u64> { Some(u64::from_be_bytes(b.try_into().ok()?)) };
    if word(take(8)?)? != fingerprint {
        return None;
    }
    let total = word(take(8)?)?;
    let context = u32::from_be_bytes(take(4)?.try_into().ok()?);
    let id = word(take(8)?)?;
    let mut values = Vec::with_capacity(keys);
    for _ in 0..keys {
        let value = match take(1)? {
            [0] => None,
            [1] => {
                let len = u32::from_be_bytes(take(4)?.try_into().ok()?) as usize;
                Some(take(len)?.to_vec().into_boxed_slice())
            }
            _ => return None,
        };
        values.push(value);
    }
    if !rest.is_empty() {
        return None;
    }
    Some((
        total,
        Sorted {
            keys: values.into_boxed_slice(),
            context,
            id,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_proto::sorting::encode_sort_request;

    fn schema() -> Arc<Schema> {
        Arc::new(Schema::builtin().unwrap())
    }

    fn plan(keys: &[SortKey<'_>]) -> Result<SortPlan, Option<SortRefusal>> {
        let mut value = Vec::new();
        encode_sort_request(keys, &mut value);
        SortPlan::resolve(Some(&value), &schema(), 5)
    }

    fn key(attr: &str) -> SortKey<'_> {
        SortKey {
            attr: attr.as_bytes(),
            ordering_rule: None,
            reverse: false,
        }
    }

    fn sorted(values: &[Option<&str>], plan: &SortPlan, schema: &Schema) -> Vec<Sorted> {
        let mut items: Vec<Sorted> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let keys: Keys = vec![v.and_then(|v| {
                    let rule = plan.keys[0].rule;
                    rule.key(v.as_bytes(), schema)
                        .map(|k| rule.sortable_key(&k).into_owned().into_boxed_slice())
                })]
                .into_boxed_slice();
                Sorted {
                    keys,
                    context: 0,
                    id: i as EntryId + 1,
                }
            })
            .collect();
        items.sort_unstable_by(|a, b| Sorted::order(plan, a, b));
        items
    }

    /// Issue 44, small 13: seven keys or more were a protocolError
    /// ("not a SortKeyList"), even in a non-critical control; more keys
    /// than allowed are refused as RFC 2891 says, whatever their number.
    #[test]
    fn a_list_of_too_many_keys_is_refused_not_malformed() {
        let names = [
            "cn", "sn", "uid", "mail", "o", "ou", "l", "st", "title", "street",
        ];
        for n in 6..=names.len() {
            let keys: Vec<SortKey<'_>> = names[..n].iter().map(|name| key(name)).collect();
            let refusal = plan(&keys).err().flatten();
            assert_eq!(
                refusal.map(|r| r.code),
                Some(ResultCode::UNWILLING_TO_PERFORM),
                "{n} keys"
            );
        }
    }

    #[test]
    fn keys_are_resolved_or_refused_with_the_rfc_codes() {
        assert!(
            plan(&[key("cn"), key("uidNumber")]).is_ok(),
            "cn by its equality rule"
        );
        let code = |keys: &[SortKey<'_>]| plan(keys).err().flatten().map(|r| r.code);
        assert_eq!(code(&[key("nosuch")]), Some(ResultCode::NO_SUCH_ATTRIBUTE));
        assert_eq!(
            code(&[key("jpegPhoto")]),
            Some(ResultCode::INAPPROPRIATE_MATCHING)
        );
        let bogus = SortKey {
            ordering_rule: Some(b"bogusMatch"),
            ..key("sn")
        };
        assert_eq!(code(&[bogus]), Some(ResultCode::INAPPROPRIATE_MATCHING));
        let substrings = SortKey {
            ordering_rule: Some(b"caseIgnoreSubstringsMatch"),
            ..key("sn")
        };
        assert_eq!(
            code(&[substrings]),
            Some(ResultCode::INAPPROPRIATE_MATCHING)
        );
        assert_eq!(
            code(&[key("cn"), key("CN")]),
            Some(ResultCode::UNWILLING_TO_PERFORM)
        );
        let six = [
            key("cn"),
            key("sn"),
            key("uid"),
            key("mail"),
            key("ou"),
            key("o"),
        ];
        assert_eq!(code(&six), Some(ResultCode::UNWILLING_TO_PERFORM));
        assert!(matches!(
            SortPlan::resolve(Some(b"\x30"), &schema(), 5),
            Err(None)
        ));
    }

    #[test]
    fn integers_sort_as_numbers_and_absent_values_last_or_first_in_reverse() {
        let schema = schema();
        let ascending = plan(&[key("uidNumber")]).unwrap();
        let items = sorted(
            &[Some("100"), None, Some("-3"), Some("7")],
            &ascending,
            &schema,
        );
        let ids: Vec<EntryId> = items.iter().map(|i| i.id).collect();
        assert_eq!(ids, [3, 4, 1, 2]);
        let descending = plan(&[SortKey {
            reverse: true,
            ..key("uidNumber")
        }])
        .unwrap();
        let items = sorted(
            &[Some("100"), None, Some("-3"), Some("7")],
            &descending,
            &schema,
        );
        let ids: Vec<EntryId> = items.iter().map(|i| i.id).collect();
        assert_eq!(ids, [2, 1, 4, 3]);
    }

    #[test]
    fn windows_follow_slapds_offset_arithmetic() {
        let schema = schema();
        let plan = plan(&[key("sn")]).unwrap();
        let names = ["adams", "baker", "cole", "duke", "ellis", "ford", "gray"];
        let values: Vec<Option<&str>> = names.iter().map(|n| Some(*n)).collect();
        let items = sorted(&values, &plan, &schema);
        let by = |before, after, offset, count| VlvRequest {
            before,
            after,
            target: VlvTarget::ByOffset {
                offset,
                content_count: count,
            },
            context: None,
        };
        let window = |vlv: VlvRequest<'_>| {
            let w = Window::of(&plan, &items, &vlv, &schema);
            (w.start, w.end, w.target_position, w.result)
        };
        assert_eq!(window(by(1, 1, 3, 0)), (1, 4, 3, ResultCode::SUCCESS));
        assert_eq!(window(by(0, 2, 1, 0)), (0, 3, 1, ResultCode::SUCCESS));
        assert_eq!(window(by(1, 1, 7, 7)), (5, 7, 7, ResultCode::SUCCESS));
        assert_eq!(
            window(by(1, 1, 9, 9)),
            (5, 7, 7, ResultCode::SUCCESS),
            "offset = count: the last"
        );
        assert_eq!(window(by(1, 1, 9, 0)).3, ResultCode::OFFSET_RANGE_ERROR);
        assert_eq!(window(by(1, 1, 9, 8)).3, ResultCode::OFFSET_RANGE_ERROR);
        assert_eq!(window(by(0, 0, 0, 0)).3, ResultCode::OFFSET_RANGE_ERROR);
        // Half-way through a client's list of 14 is half-way through ours.
        assert_eq!(window(by(0, 0, 8, 14)), (3, 4, 4, ResultCode::SUCCESS));
        let at = |before, after, value: &'static str| VlvRequest {
            before,
            after,
            target: VlvTarget::GreaterOrEqual(value.as_bytes()),
            context: None,
        };
        assert_eq!(window(at(1, 1, "C")), (1, 4, 3, ResultCode::SUCCESS));
        assert_eq!(window(at(0, 1, "coz")), (3, 5, 4, ResultCode::SUCCESS));
        // Past every value: the target is one past the end.
        assert_eq!(window(at(1, 1, "zzz")), (6, 7, 8, ResultCode::SUCCESS));
        assert_eq!(window(at(0, 2, "zzz")), (6, 7, 8, ResultCode::SUCCESS));
        assert_eq!(window(at(3, 0, "zzz")), (4, 7, 8, ResultCode::SUCCESS));
        assert_eq!(Window::of(&plan, &[], &by(1, 1, 1, 0), &schema).start, 0);
    }

    #[test]
    fn page_cookies_round_trip_and_belong_to_one_search() {
        let item = Sorted {
            keys: vec![Some(b"jensen".to_vec().into_boxed_slice()), None].into_boxed_slice(),
            context: 1,
            id: 42,
        };
        let cookie = encode_page_cookie(7, 10, &item);
        let (total, back) = decode_page_cookie(&cookie, 7, 2).unwrap();
        assert_eq!((total, back.context, back.id), (10, 1, 42));
        assert_eq!(back.keys, item.keys);
        assert!(
            decode_page_cookie(&cookie, 8, 2).is_none(),
            "another search"
        );
        assert!(decode_page_cookie(&cookie, 7, 3).is_none(), "another sort");
        assert!(decode_page_cookie(&cookie[..cookie.len() - 1], 7, 2).is_none());
    }

    #[test]
    fn the_budget_is_shared_and_given_back() {
        let budget = SortBudget::new(200);
        let item = || Sorted {
            keys: vec![Some(vec![0u8; 10].into_boxed_slice())].into_boxed_slice(),
            context: 0,
            id: 1,
        };
        let mut first = Collected::new(&budget);
        first.push(item()).unwrap();
        let mut second = Collected::new(&budget);
        let mut refused = false;
        for _ in 0..100 {
            if second.push(item()).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused);
        drop(second);
        drop(first);
        assert_eq!(budget.in_use.load(Atomic::Acquire), 0);
    }
}
