//! A linearizability checker for the histories the cluster tests record:
//! one register per DN, written by one client at a time (its writes are
//! sequential: each waits for the last one's answer), read by any number
//! of clients at any node.
//!
//! With a single sequential writer the order of the writes in any
//! linearization is the writer's own order, so no search over
//! interleavings is needed (the general problem is NP-complete; Porcupine
//! searches): the history is linearizable if and only if
//!
//! 1. every read returns the initial value or a write that was invoked
//!    before the read completed and did not definitively fail;
//! 2. no read returns a write older than one that was acknowledged
//!    before the read was invoked;
//! 3. reads that do not overlap in time return writes in the writers'
//!    order (a later read never goes back);
//! 4. a write whose outcome is unknown (no answer) may or may not have
//!    happened, but if any read saw it, it happened: every later read
//!    must treat it as acknowledged at that read's completion; a write
//!    refused as "not applied" never happened, and no read may see it;
//! 5. the final value is the last acknowledged write or a later one of
//!    unknown outcome, and is not older than any read's.
//!
//! Times are `Instant`s taken by the client threads around each request,
//! so "before" means strictly before in real time, as linearizability
//! demands.

use std::time::Instant;

/// What the writer learned of one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Acknowledged: it happened.
    Acknowledged,
    /// Refused before it was applied anywhere: it never happened.
    NotApplied,
    /// No answer, or "may or may not have been applied".
    Unknown,
}

/// One write of a register: its value's position in the writer's order
/// is its index in [`Register::writes`] (from 1; 0 is the initial value).
#[derive(Debug, Clone)]
pub struct Write {
    /// When the request was sent.
    pub invoked: Instant,
    /// When its answer came (or the writer gave up on it).
    pub completed: Instant,
    /// What the writer learned.
    pub outcome: WriteOutcome,
}

/// One read: the write it saw (0: the initial value).
#[derive(Debug, Clone)]
pub struct Read {
    /// When the request was sent.
    pub invoked: Instant,
    /// When its answer came.
    pub completed: Instant,
    /// The index of the write whose value it returned.
    pub saw: usize,
    /// Who read, for the message (e.g. "reader at node 2").
    pub by: String,
}

/// One register's history.
#[derive(Debug, Clone, Default)]
pub struct Register {
    /// The writes, in the writer's order.
    pub writes: Vec<Write>,
    /// The reads, in any order.
    pub reads: Vec<Read>,
}

impl Register {
    /// Checks the history against a final value that is write
    /// `final_value`'s. An error names the first violation found.
    pub fn check(&self, final_value: usize) -> Result<(), String> {
        let write = |i: usize| self.writes.get(i.wrapping_sub(1));
        for read in &self.reads {
            self.check_read(read)?;
        }
        // 3: non-overlapping reads never go back.
        let mut by_completion: Vec<&Read> = self.reads.iter().collect();
        by_completion.sort_by_key(|r| r.completed);
        let mut by_invocation: Vec<&Read> = self.reads.iter().collect();
        by_invocation.sort_by_key(|r| r.invoked);
        // Walk reads by invocation; the highest write seen by any read
        // completed before this one was invoked is a floor.
        let mut floor = (0usize, None::<&Read>);
        let mut done = by_completion.iter().peekable();
        for read in by_invocation {
            while let Some(earlier) = done.peek() {
                if earlier.completed >= read.invoked {
                    break;
                }
                if earlier.saw > floor.0 {
                    floor = (earlier.saw, Some(earlier));
                }
                done.next();
            }
            if read.saw < floor.0 {
                let earlier = floor.1.map(|r| r.by.as_str()).unwrap_or_default();
                return Err(format!(
                    "{} saw write {} after {earlier} had seen write {} (a read went back in time)",
                    read.by, read.saw, floor.0
                ));
            }
        }
        // 5: the final value.
        let last_acknowledged = self
            .writes
            .iter()
            .rposition(|w| w.outcome == WriteOutcome::Acknowledged)
            .map_or(0, |i| i + 1);
        let highest_read = self.reads.iter().map(|r| r.saw).max().unwrap_or(0);
        if final_value < last_acknowledged.max(highest_read) {
            return Err(format!(
                "the final value is write {final_value}, older than write {} (acknowledged or read)",
                last_acknowledged.max(highest_read)
            ));
        }
        if final_value > 0 {
            match write(final_value).map(|w| w.outcome) {
                None => {
                    return Err(format!(
                        "the final value is write {final_value}, never sent"
                    ));
                }
                Some(WriteOutcome::NotApplied) => {
                    return Err(format!(
                        "the final value is write {final_value}, which was refused as not applied"
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// 1, 2 and 4 for one read.
    fn check_read(&self, read: &Read) -> Result<(), String> {
        if read.saw > self.writes.len() {
            return Err(format!("{} saw write {}, never sent", read.by, read.saw));
        }
        if let Some(seen) = read.saw.checked_sub(1).and_then(|i| self.writes.get(i)) {
            if seen.invoked > read.completed {
                return Err(format!(
                    "{} saw write {} before it was sent",
                    read.by, read.saw
                ));
            }
            if seen.outcome == WriteOutcome::NotApplied {
                return Err(format!(
                    "{} saw write {}, which was refused as not applied",
                    read.by, read.saw
                ));
            }
        }
        // 2: a write acknowledged before the read began is a floor.
        let newest_acknowledged = self
            .writes
            .iter()
            .enumerate()
            .filter(|(_, w)| w.outcome == WriteOutcome::Acknowledged && w.completed < read.invoked)
            .map(|(i, _)| i + 1)
            .max()
            .unwrap_or(0);
        if read.saw < newest_acknowledged {
            return Err(format!(
                "{} saw write {} though write {newest_acknowledged} was acknowledged before it began (a stale read)",
                read.by, read.saw
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A clock of whole milliseconds from one origin.
    struct Clock(Instant);
    impl Clock {
        fn at(&self, ms: u64) -> Instant {
            self.0 + Duration::from_millis(ms)
        }
        fn write(&self, from: u64, to: u64, outcome: WriteOutcome) -> Write {
            Write {
                invoked: self.at(from),
                completed: self.at(to),
                outcome,
            }
        }
        fn read(&self, from: u64, to: u64, saw: usize) -> Read {
            Read {
                invoked: self.at(from),
                completed: self.at(to),
                saw,
                by: format!("read [{from}, {to}]"),
            }
        }
    }

    fn history(clock: &Clock) -> Register {
        use WriteOutcome::*;
        Register {
            // Write 1 [0, 10] ok, write 2 [10, 20] unknown, write 3 [30, 40] ok.
            writes: vec![
                clock.write(0, 10, Acknowledged),
                clock.write(10, 20, Unknown),
                clock.write(30, 40, Acknowledged),
            ],
            reads: Vec::new(),
        }
    }

    #[test]
    fn reads_that_respect_real_time_pass() {
        let clock = Clock(Instant::now());
        let mut h = history(&clock);
        h.reads = vec![
            clock.read(5, 8, 0),   // write 1 not yet acknowledged
            clock.read(12, 15, 1), // write 2 in flight: either
            clock.read(21, 25, 2), // the unknown one happened
            clock.read(35, 36, 3), // write 3 in flight: it may be seen
            clock.read(41, 45, 3),
        ];
        assert_eq!(h.check(3), Ok(()));
    }

    #[test]
    fn a_stale_read_fails() {
        let clock = Clock(Instant::now());
        let mut h = history(&clock);
        h.reads = vec![clock.read(41, 45, 1)];
        let error = h.check(3).unwrap_err();
        assert!(error.contains("stale read"), "{error}");
    }

    #[test]
    fn a_read_going_back_after_an_unknown_write_was_seen_fails() {
        let clock = Clock(Instant::now());
        let mut h = history(&clock);
        // Write 2's outcome is unknown, but a read saw it: a later read
        // may not return write 1.
        h.reads = vec![clock.read(21, 22, 2), clock.read(23, 24, 1)];
        let error = h.check(3).unwrap_err();
        assert!(error.contains("went back in time"), "{error}");
    }

    #[test]
    fn overlapping_reads_may_disagree() {
        let clock = Clock(Instant::now());
        let mut h = history(&clock);
        h.reads = vec![clock.read(31, 39, 3), clock.read(32, 38, 2)];
        assert_eq!(h.check(3), Ok(()));
    }

    #[test]
    fn a_read_of_the_future_or_of_a_refused_write_fails() {
        let clock = Clock(Instant::now());
        let mut h = history(&clock);
        h.reads = vec![clock.read(21, 25, 3)];
        assert!(h.check(3).unwrap_err().contains("before it was sent"));
        h.writes[1].outcome = WriteOutcome::NotApplied;
        h.reads = vec![clock.read(21, 25, 2)];
        assert!(h.check(3).unwrap_err().contains("refused as not applied"));
    }

    #[test]
    fn the_final_value_must_not_be_older_than_what_was_acknowledged_or_read() {
        let clock = Clock(Instant::now());
        let mut h = history(&clock);
        assert!(h.check(2).unwrap_err().contains("older than write 3"));
        h.writes.push(clock.write(50, 60, WriteOutcome::Unknown));
        assert_eq!(h.check(4), Ok(()));
        assert_eq!(h.check(3), Ok(()));
        h.reads = vec![clock.read(61, 62, 4)];
        assert!(h.check(3).unwrap_err().contains("older than write 4"));
    }
}
