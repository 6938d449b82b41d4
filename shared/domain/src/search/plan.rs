//! Which range of a sorted-set index can hold every match of a filter.
//!
//! The session store keeps, per fleet and location, sorted sets of sessions scored by creation time, player
//! session count and maximum sessions, and one of the sessions that could take a player. When a filter is a conjunction that bounds one of those, a
//! search reads only the bounded range of that index and evaluates the full filter on what it reads; otherwise it
//! scans. The range must never leave out a session the filter matches; it may hold sessions the filter rejects.

use super::ast::{CmpOp, Comparison, Direction, Equality, Expr, Filter, IntegerOperand, Operand, Sort};

/// A numeric value the session store indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexedOperand {
    /// `creationTimeMillis`.
    CreationTimeMillis,
    /// `playerSessionCount`.
    PlayerSessionCount,
    /// `maximumSessions`.
    MaximumSessions,
    /// Sessions that could take a player now. The index holds every such session with a score of at least 1
    /// (the store's: its creation time), so `hasAvailablePlayerSessions = true` bounds it below by 1.
    AvailableSlots,
}

/// An inclusive range of one index's scores; `None` is unbounded on that side. `min > max` means the filter can
/// match no session at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexRange {
    /// The index to read.
    pub operand: IndexedOperand,
    /// Smallest score to read, inclusive.
    pub min: Option<i64>,
    /// Largest score to read, inclusive.
    pub max: Option<i64>,
}

impl IndexRange {
    /// Whether no score lies in the range.
    pub fn is_empty(&self) -> bool {
        matches!((self.min, self.max), (Some(min), Some(max)) if min > max)
    }

    /// Whether `score` lies in the range.
    pub fn contains(&self, score: i64) -> bool {
        self.min.is_none_or(|min| min <= score) && self.max.is_none_or(|max| score <= max)
    }
}

/// Indexes in order of preference when two bound their operand equally tightly: creation times are nearly
/// unique per session, so a bound on them tends to leave fewest candidates; most sessions have free slots, so that
/// bound leaves most. Without statistics this is a guess, and only a guess at speed: any choice is correct.
const PREFERENCE: [IndexedOperand; 4] = [
    IndexedOperand::AvailableSlots,
    IndexedOperand::MaximumSessions,
    IndexedOperand::PlayerSessionCount,
    IndexedOperand::CreationTimeMillis,
];

/// Bounds found so far, inclusive, in `i128` so that `< i64::MIN` and `> i64::MAX` need no special case.
#[derive(Clone, Copy)]
struct Bounds {
    lo: i128,
    hi: i128,
}

impl Bounds {
    const ALL: Bounds = Bounds {
        lo: i64::MIN as i128,
        hi: i64::MAX as i128,
    };

    fn at_least(&mut self, lo: i128) {
        self.lo = self.lo.max(lo);
    }

    fn at_most(&mut self, hi: i128) {
        self.hi = self.hi.min(hi);
    }

    /// How tightly it bounds, higher first: empty, one value, both sides, one side.
    fn tightness(self) -> u8 {
        let (bounded_below, bounded_above) = (self.lo > Bounds::ALL.lo, self.hi < Bounds::ALL.hi);
        if self.lo > self.hi {
            3
        } else if self.lo == self.hi {
            2
        } else if bounded_below && bounded_above {
            1
        } else {
            0
        }
    }

    fn range(self, operand: IndexedOperand) -> IndexRange {
        if self.lo > self.hi {
            // Canonical empty range: the bounds themselves may lie outside i64.
            return IndexRange {
                operand,
                min: Some(i64::MAX),
                max: Some(i64::MIN),
            };
        }
        // Not empty, so both bounds lie within i64.
        let bound = |value: i128, unbounded: i128| (value != unbounded).then_some(value as i64);
        IndexRange {
            operand,
            min: bound(self.lo, Bounds::ALL.lo),
            max: bound(self.hi, Bounds::ALL.hi),
        }
    }
}

impl Filter {
    /// The index range to read for this filter, or `None` to scan every session. The filter's top-level AND terms
    /// (seen through NOT by De Morgan, since integer operands are never missing) that compare an indexed operand
    /// with `= < > <= >=` are intersected per operand, and the tightest range is returned: an empty one, else a
    /// single value, else one bounded on both sides, else on one side, ties going to the operand most likely to be
    /// selective. `<>` and terms under OR bound nothing. The store must still evaluate the full filter.
    pub fn index_hint(&self) -> Option<IndexRange> {
        let mut bounds = [Bounds::ALL; PREFERENCE.len()];
        collect(self.expr.as_ref()?, false, &mut bounds);
        PREFERENCE
            .into_iter()
            .zip(bounds)
            .enumerate()
            .filter(|(_, (_, b))| b.lo > Bounds::ALL.lo || b.hi < Bounds::ALL.hi)
            .max_by_key(|(preference, (_, b))| (b.tightness(), *preference))
            .map(|(_, (operand, b))| b.range(operand))
    }
}

fn slot(operand: IndexedOperand) -> usize {
    PREFERENCE
        .iter()
        .position(|p| *p == operand)
        .expect("every operand has a preference")
}

/// Narrows `bounds` by every range that `expr` (negated when `negated`) implies as a conjunction.
fn collect(expr: &Expr, negated: bool, bounds: &mut [Bounds; PREFERENCE.len()]) {
    match (expr, negated) {
        (Expr::Not(inner), _) => collect(inner, !negated, bounds),
        // NOT (a OR b) is NOT a AND NOT b.
        (Expr::And(terms), false) | (Expr::Or(terms), true) => {
            for term in terms {
                collect(term, negated, bounds);
            }
        }
        (Expr::And(_) | Expr::Or(_), _) => {}
        (Expr::Compare(Comparison::Integer { operand, op, value }), _) => {
            let indexed = match operand {
                IntegerOperand::CreationTimeMillis => IndexedOperand::CreationTimeMillis,
                IntegerOperand::PlayerSessionCount => IndexedOperand::PlayerSessionCount,
                IntegerOperand::MaximumSessions => IndexedOperand::MaximumSessions,
            };
            let b = &mut bounds[slot(indexed)];
            let value = i128::from(*value);
            let op = if negated { negate(*op) } else { *op };
            match op {
                CmpOp::Eq => {
                    b.at_least(value);
                    b.at_most(value);
                }
                CmpOp::Ne => {}
                CmpOp::Lt => b.at_most(value - 1),
                CmpOp::Le => b.at_most(value),
                CmpOp::Gt => b.at_least(value + 1),
                CmpOp::Ge => b.at_least(value),
            }
        }
        (Expr::Compare(Comparison::Available { op, value }), _) => {
            // Only "has available" bounds the slots index: "has none" may hold for a session with free slots
            // whose creation policy is DENY_ALL.
            if (*value == (*op == Equality::Eq)) != negated {
                bounds[slot(IndexedOperand::AvailableSlots)].at_least(1);
            }
        }
        (Expr::Compare(Comparison::Text { .. }), _) => {}
    }
}

/// The operator of `NOT (x op v)` for an integer `x`, which is never missing.
fn negate(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Eq => CmpOp::Ne,
        CmpOp::Ne => CmpOp::Eq,
        CmpOp::Lt => CmpOp::Ge,
        CmpOp::Ge => CmpOp::Lt,
        CmpOp::Gt => CmpOp::Le,
        CmpOp::Le => CmpOp::Gt,
    }
}

impl Sort {
    /// The index whose score order is this sort's order, and whether it is read from the top (DESC): a search may
    /// then read that index in order and stop once a page is full, instead of reading every candidate. `None` for a
    /// sort on a name, a property or `hasAvailablePlayerSessions`.
    pub fn index_order(&self) -> Option<(IndexedOperand, bool)> {
        let operand = match self.operand {
            Operand::Integer(IntegerOperand::CreationTimeMillis) => IndexedOperand::CreationTimeMillis,
            Operand::Integer(IntegerOperand::PlayerSessionCount) => IndexedOperand::PlayerSessionCount,
            Operand::Integer(IntegerOperand::MaximumSessions) => IndexedOperand::MaximumSessions,
            _ => return None,
        };
        Some((operand, self.direction == Direction::Descending))
    }
}
