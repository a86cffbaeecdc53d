//! A linearizability checker for registers that many clients write and
//! read at once: the cluster tests' DNs, each written at several sites.
//!
//! [`crate::history`] checks the easy case (one sequential writer per
//! register, so the writes' order is known). Here nothing is known of
//! the order but real time, and the question is the general one: is
//! there one sequence of the operations that a single register could
//! have produced, in which every operation takes effect at one instant
//! between its invocation and its answer? That is NP-complete in
//! general; the search below is Wing and Gong's, with Lowe's
//! memoisation (a linearized set and a register value, once seen, is
//! never explored again), as Porcupine does. Registers are independent
//! (linearizability is compositional), so each is searched alone and
//! the search stays small.
//!
//! - A write acknowledged, or without an answer (a timeout, a leader
//!   killed under it), may take effect at any instant after its
//!   invocation; one without an answer may also never have: placing it
//!   after everything observed is the same thing, and its answer time is
//!   taken as "never" so the search may.
//! - A write refused before it could take effect (first-wins'
//!   assertionFailed, "was not applied") never happened: leave it out.
//! - A read without an answer says nothing: it is left out.
//!
//! Values are numbers the test gives each write (unique per register;
//! 0 the value before any write), so a read names the write it saw.

// The search walks a linked list of events by index: every index it
// follows was made with the list, and `NONE` is checked before use.
#![allow(clippy::indexing_slicing)]

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

/// What an operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Wrote this value.
    Write(u64),
    /// Read and got this value.
    Read(u64),
}

/// One operation on a register.
#[derive(Debug, Clone)]
pub struct Operation {
    /// When the request was sent.
    pub invoked: Instant,
    /// When its answer came; `None`: it never came.
    pub answered: Option<Instant>,
    /// What it did.
    pub action: Action,
    /// Who did it, for the message (e.g. "writer 3 at node 2").
    pub by: String,
}

/// How many steps the search of one register may take before it gives
/// up undecided (a failure too: the test should be made smaller).
pub const DEFAULT_BUDGET: u64 = 5_000_000;

/// Checks every register's history; the error names each register that
/// has no linearization and why.
pub fn check_all(registers: &BTreeMap<String, Vec<Operation>>, budget: u64) -> Result<(), String> {
    let failures: Vec<String> = registers
        .iter()
        .filter_map(|(name, ops)| check(ops, budget).err().map(|e| format!("{name}: {e}")))
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// The histories that many client threads or tasks record at once, one
/// per register.
#[derive(Debug, Default)]
pub struct Recorder {
    registers: Mutex<BTreeMap<String, Vec<Operation>>>,
}

impl Recorder {
    /// Records `op` on `register`.
    pub fn push(&self, register: &str, op: Operation) {
        let mut registers = self.registers.lock().unwrap_or_else(|e| e.into_inner());
        registers.entry(register.to_owned()).or_default().push(op);
    }

    /// How many operations are recorded, on every register.
    pub fn operations(&self) -> usize {
        let registers = self.registers.lock().unwrap_or_else(|e| e.into_inner());
        registers.values().map(Vec::len).sum()
    }

    /// [`check_all`] of what is recorded.
    pub fn check(&self, budget: u64) -> Result<(), String> {
        let registers = self.registers.lock().unwrap_or_else(|e| e.into_inner());
        check_all(&registers, budget)
    }
}

/// One event of the history: an operation's invocation or its answer.
#[derive(Debug, Clone, Copy)]
struct Event {
    op: usize,
    call: bool,
    /// The answer's event, for a call (its index in the events).
    answer: usize,
    prev: usize,
    next: usize,
}

/// The events in time order as a doubly linked list, so that an
/// operation's two events can be taken out when it is placed and put
/// back when the search backtracks, each in O(1). Index 0 is the head.
struct Events {
    list: Vec<Event>,
}

const NONE: usize = usize::MAX;

impl Events {
    fn new(ops: &[Operation]) -> Events {
        // (time, answer after call at one instant, op): an answer at the
        // instant of another's invocation counts as overlapping it.
        let mut order: Vec<(Option<Instant>, bool, usize)> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            order.push((Some(op.invoked), false, i));
            order.push((op.answered, true, i));
        }
        // `None` (never answered) sorts after every instant.
        order.sort_by(|a, b| {
            let time = match (a.0, b.0) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            };
            time.then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
        });
        let head = Event {
            op: NONE,
            call: false,
            answer: NONE,
            prev: NONE,
            next: if order.is_empty() { NONE } else { 1 },
        };
        let mut list = vec![head];
        let mut answer_at = vec![NONE; ops.len()];
        for (at, (_, is_answer, op)) in order.iter().enumerate() {
            let index = at + 1;
            if *is_answer {
                answer_at[*op] = index;
            }
            list.push(Event {
                op: *op,
                call: !is_answer,
                answer: NONE,
                prev: index - 1,
                next: if index == order.len() {
                    NONE
                } else {
                    index + 1
                },
            });
        }
        for event in list.iter_mut().skip(1) {
            if event.call {
                event.answer = answer_at[event.op];
            }
        }
        Events { list }
    }

    fn first(&self) -> usize {
        self.list[0].next
    }

    fn unlink(&mut self, at: usize) {
        let Event { prev, next, .. } = self.list[at];
        self.list[prev].next = next;
        if next != NONE {
            self.list[next].prev = prev;
        }
    }

    fn relink(&mut self, at: usize) {
        let Event { prev, next, .. } = self.list[at];
        self.list[prev].next = at;
        if next != NONE {
            self.list[next].prev = at;
        }
    }

    /// Takes out a call and its answer (the answer first: relinking in
    /// the reverse order restores the list exactly).
    fn lift(&mut self, call: usize) {
        let answer = self.list[call].answer;
        self.unlink(call);
        self.unlink(answer);
    }

    fn unlift(&mut self, call: usize) {
        let answer = self.list[call].answer;
        self.relink(answer);
        self.relink(call);
    }
}

/// Which operations are placed, as a set the search can remember.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Placed(Vec<u64>);

impl Placed {
    fn new(n: usize) -> Placed {
        Placed(vec![0; n.div_ceil(64)])
    }

    fn set(&mut self, i: usize, on: bool) {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if on {
            self.0[word] |= bit;
        } else {
            self.0[word] &= !bit;
        }
    }
}

/// Checks one register's history (see the module's comment for what to
/// leave out); the error says where the longest order found got stuck.
pub fn check(ops: &[Operation], budget: u64) -> Result<(), String> {
    // A read that never answered says nothing.
    let ops: Vec<Operation> = ops
        .iter()
        .filter(|op| op.answered.is_some() || matches!(op.action, Action::Write(_)))
        .cloned()
        .collect();
    let mut events = Events::new(&ops);
    let mut placed = Placed::new(ops.len());
    let mut seen: HashSet<(Placed, u64)> = HashSet::new();
    // The calls placed, each with the value the register held before it.
    let mut stack: Vec<(usize, u64)> = Vec::new();
    let mut value = 0u64;
    let mut at = events.first();
    let mut deepest: (usize, String) = (0, String::new());
    let mut steps = 0u64;
    while at != NONE {
        steps += 1;
        if steps > budget {
            return Err(format!(
                "undecided after {budget} search steps over {} operations: make the test's history smaller",
                ops.len()
            ));
        }
        let event = events.list[at];
        if event.call {
            let op = &ops[event.op];
            let after = match op.action {
                Action::Write(v) => Some(v),
                Action::Read(v) => (v == value).then_some(value),
            };
            if let Some(after) = after {
                placed.set(event.op, true);
                if seen.insert((placed.clone(), after)) {
                    stack.push((at, value));
                    value = after;
                    events.lift(at);
                    at = events.first();
                    continue;
                }
                placed.set(event.op, false);
            }
            at = event.next;
        } else {
            // An answer reached before its call was placed: this
            // operation must come before everything later, and cannot
            // come next. Undo the last placement and try the next one.
            if stack.len() >= deepest.0 {
                let op = &ops[event.op];
                deepest = (
                    stack.len(),
                    format!(
                        "{} ({:?}) cannot be placed while the register holds {value}",
                        op.by, op.action
                    ),
                );
            }
            let Some((call, before)) = stack.pop() else {
                return Err(format!(
                    "not linearizable: the longest order found places {} of {} operations, then {}",
                    deepest.0,
                    ops.len(),
                    deepest.1
                ));
            };
            value = before;
            placed.set(events.list[call].op, false);
            events.unlift(call);
            at = events.list[call].next;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;

    struct Clock(Instant);

    impl Clock {
        fn op(&self, from: u64, to: Option<u64>, action: Action, by: &str) -> Operation {
            Operation {
                invoked: self.0 + Duration::from_millis(from),
                answered: to.map(|to| self.0 + Duration::from_millis(to)),
                action,
                by: by.into(),
            }
        }
    }

    fn clock() -> Clock {
        Clock(Instant::now())
    }

    #[test]
    fn concurrent_writers_with_reads_between_pass() {
        let c = clock();
        let ops = vec![
            c.op(0, Some(10), Action::Write(1), "a"),
            c.op(5, Some(15), Action::Write(2), "b"),
            // Both writes overlap: either order is possible, and the
            // reads pick one: 1 then 2.
            c.op(16, Some(18), Action::Read(2), "r"),
            c.op(20, Some(30), Action::Write(3), "a"),
            c.op(21, Some(22), Action::Read(2), "r"),
            c.op(31, Some(32), Action::Read(3), "r"),
        ];
        check(&ops, DEFAULT_BUDGET).unwrap();
    }

    #[test]
    fn the_overlapping_writes_may_land_in_either_order() {
        let c = clock();
        let ops = vec![
            c.op(0, Some(10), Action::Write(1), "a"),
            c.op(5, Some(15), Action::Write(2), "b"),
            c.op(16, Some(18), Action::Read(1), "r"),
        ];
        check(&ops, DEFAULT_BUDGET).unwrap();
    }

    #[test]
    fn a_read_of_an_overwritten_value_fails() {
        let c = clock();
        let ops = vec![
            c.op(0, Some(10), Action::Write(1), "a"),
            c.op(11, Some(20), Action::Write(2), "b"),
            c.op(21, Some(22), Action::Read(1), "stale reader"),
        ];
        let e = check(&ops, DEFAULT_BUDGET).unwrap_err();
        assert!(e.contains("stale reader"), "{e}");
    }

    #[test]
    fn two_readers_may_not_see_two_writes_in_opposite_orders() {
        let c = clock();
        let ops = vec![
            c.op(0, Some(100), Action::Write(1), "a"),
            c.op(0, Some(100), Action::Write(2), "b"),
            c.op(10, Some(20), Action::Read(1), "r1"),
            c.op(30, Some(40), Action::Read(2), "r1"),
            c.op(10, Some(20), Action::Read(2), "r2"),
            c.op(30, Some(40), Action::Read(1), "r2"),
        ];
        assert!(check(&ops, DEFAULT_BUDGET).is_err());
    }

    #[test]
    fn an_unanswered_write_may_have_happened_or_not() {
        let c = clock();
        let happened = vec![
            c.op(0, None, Action::Write(1), "lost"),
            c.op(50, Some(60), Action::Read(1), "r"),
        ];
        check(&happened, DEFAULT_BUDGET).unwrap();
        let never = vec![
            c.op(0, None, Action::Write(1), "lost"),
            c.op(50, Some(60), Action::Read(0), "r"),
            c.op(70, Some(80), Action::Write(2), "b"),
            c.op(90, Some(95), Action::Read(2), "r"),
        ];
        check(&never, DEFAULT_BUDGET).unwrap();
        // Once seen it has happened: it cannot vanish again.
        let flicker = vec![
            c.op(0, None, Action::Write(1), "lost"),
            c.op(50, Some(60), Action::Read(1), "r"),
            c.op(70, Some(80), Action::Read(0), "flickering reader"),
        ];
        assert!(check(&flicker, DEFAULT_BUDGET).is_err());
    }

    #[test]
    fn a_read_of_a_value_not_yet_written_fails() {
        let c = clock();
        let ops = vec![
            c.op(0, Some(10), Action::Read(1), "early reader"),
            c.op(20, Some(30), Action::Write(1), "a"),
        ];
        assert!(check(&ops, DEFAULT_BUDGET).is_err());
    }

    #[test]
    fn many_overlapping_writers_stay_within_the_budget() {
        // 12 writers at once, each overlapping all others, then a read
        // of the one that came last: 12! orders without memoisation.
        let c = clock();
        let mut ops: Vec<Operation> = (1..=12)
            .map(|v| c.op(v, Some(100 + v), Action::Write(v), "w"))
            .collect();
        ops.push(c.op(200, Some(210), Action::Read(7), "r"));
        check(&ops, DEFAULT_BUDGET).unwrap();
        ops.push(c.op(220, Some(230), Action::Read(8), "r"));
        assert!(check(&ops, DEFAULT_BUDGET).is_err());
    }

    /// Whether some order of `ops` that respects real time (an
    /// operation answered before another's invocation comes first) is a
    /// register's, by trying every permutation: the definition itself.
    fn brute_force(ops: &[Operation]) -> bool {
        fn extend(ops: &[Operation], used: &mut Vec<bool>, value: u64) -> bool {
            if used.iter().all(|u| *u) {
                return true;
            }
            for i in 0..ops.len() {
                if used[i] {
                    continue;
                }
                // Every operation not yet placed that was answered
                // before this one's invocation must come first.
                let blocked = (0..ops.len()).any(|j| {
                    !used[j]
                        && j != i
                        && ops[j]
                            .answered
                            .is_some_and(|answered| answered < ops[i].invoked)
                });
                let next = match ops[i].action {
                    Action::Write(v) => Some(v),
                    Action::Read(v) => (v == value).then_some(v),
                };
                if let (false, Some(next)) = (blocked, next) {
                    used[i] = true;
                    if extend(ops, used, next) {
                        return true;
                    }
                    used[i] = false;
                }
            }
            false
        }
        extend(ops, &mut vec![false; ops.len()], 0)
    }

    #[test]
    fn agrees_with_trying_every_order_on_random_small_histories() {
        let c = clock();
        let mut rng = crate::rng::Rng(0x5eed_1234_abcd_0001);
        let (mut passed, mut failed) = (0, 0);
        for _ in 0..3000 {
            let n = 2 + rng.below(5);
            let mut next_value = 1;
            let ops: Vec<Operation> = (0..n)
                .map(|_| {
                    let from = rng.below(40) as u64;
                    let to = from + 1 + rng.below(20) as u64;
                    let action = if rng.below(2) == 0 {
                        next_value += 1;
                        Action::Write(next_value - 1)
                    } else {
                        Action::Read(rng.below(next_value as usize + 1) as u64)
                    };
                    // Some writes never answer.
                    let answered =
                        (matches!(action, Action::Read(_)) || rng.below(5) != 0).then_some(to);
                    c.op(from, answered, action, "x")
                })
                .collect();
            let expected = brute_force_with_lost_writes(&ops);
            assert_eq!(
                check(&ops, DEFAULT_BUDGET).is_ok(),
                expected,
                "checker and brute force disagree on {ops:#?}"
            );
            if expected {
                passed += 1;
            } else {
                failed += 1;
            }
        }
        // Both sides of the line were exercised.
        assert!(
            passed > 300 && failed > 300,
            "{passed} passed, {failed} failed"
        );
    }

    /// [`brute_force`] where each unanswered write may also never have
    /// happened: tried with every subset of them left out.
    fn brute_force_with_lost_writes(ops: &[Operation]) -> bool {
        let lost: Vec<usize> = (0..ops.len())
            .filter(|i| ops[*i].answered.is_none())
            .collect();
        (0..1u32 << lost.len()).any(|mask| {
            let kept: Vec<Operation> = ops
                .iter()
                .enumerate()
                .filter(|(i, _)| {
                    lost.iter()
                        .position(|l| l == i)
                        .is_none_or(|bit| mask & (1 << bit) == 0)
                })
                .map(|(_, op)| op.clone())
                .collect();
            brute_force(&kept)
        })
    }

    #[test]
    fn every_register_is_checked_and_named() {
        let c = clock();
        let mut registers = BTreeMap::new();
        registers.insert(
            "good".to_owned(),
            vec![c.op(0, Some(10), Action::Write(1), "a")],
        );
        registers.insert(
            "bad".to_owned(),
            vec![c.op(0, Some(10), Action::Read(5), "r")],
        );
        let e = check_all(&registers, DEFAULT_BUDGET).unwrap_err();
        assert!(e.starts_with("bad:") && !e.contains("good"), "{e}");
    }
}
