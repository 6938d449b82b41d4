//! Evaluating a parsed filter on one session, and ordering sessions by a parsed sort.

use std::cmp::Ordering;

use super::ast::{CmpOp, Comparison, Direction, Equality, Expr, Filter, IntegerOperand, Operand, Sort, TextOperand};

/// The values of a game session the expressions can name. Implemented by whatever record the caller holds, so
/// evaluation needs no copy of it.
pub trait SessionView {
    /// `gameSessionName`.
    fn game_session_name(&self) -> &str;
    /// `gameSessionId`; also the tie-breaker of every sort.
    fn game_session_id(&self) -> &str;
    /// `gameSessionProperties.KEY`: the value of game property `key`, `None` when the session lacks it.
    fn game_session_property(&self, key: &str) -> Option<&str>;
    /// `maximumSessions`: the maximum player session count.
    fn maximum_sessions(&self) -> i64;
    /// `playerSessionCount`: the current player session count.
    fn player_session_count(&self) -> i64;
    /// `creationTimeMillis`: creation time in ms since the Unix epoch.
    fn creation_time_millis(&self) -> i64;
    /// `hasAvailablePlayerSessions`: a player session could be created now (a free slot and ACCEPT_ALL).
    fn has_available_player_sessions(&self) -> bool;
}

impl Filter {
    /// Whether `session` matches. A comparison on a property the session lacks is false whatever its operator
    /// (even `<>`), so NOT of it is true, as in GameLift. Only ACTIVE sessions are searched; the caller selects
    /// those, the filter does not see the status.
    pub fn matches<S: SessionView + ?Sized>(&self, session: &S) -> bool {
        self.expr.as_ref().is_none_or(|expr| expr.matches(session))
    }
}

impl Expr {
    pub(super) fn matches<S: SessionView + ?Sized>(&self, session: &S) -> bool {
        match self {
            Expr::Compare(comparison) => comparison.matches(session),
            Expr::Not(inner) => !inner.matches(session),
            Expr::And(terms) => terms.iter().all(|term| term.matches(session)),
            Expr::Or(terms) => terms.iter().any(|term| term.matches(session)),
        }
    }
}

impl Comparison {
    fn matches<S: SessionView + ?Sized>(&self, session: &S) -> bool {
        match self {
            // `str` orders by UTF-8 bytes, which is Unicode code point order, as the contract says.
            Comparison::Text { operand, op, value } => {
                text_value(operand, session).is_some_and(|actual| op.holds(actual.cmp(value.as_str())))
            }
            Comparison::Integer { operand, op, value } => op.holds(integer_value(*operand, session).cmp(value)),
            Comparison::Available { op, value } => {
                (session.has_available_player_sessions() == *value) == (*op == Equality::Eq)
            }
        }
    }
}

impl CmpOp {
    /// Whether `actual op literal` holds, given how `actual` compares to `literal`.
    pub(super) fn holds(self, ordering: Ordering) -> bool {
        match self {
            CmpOp::Eq => ordering.is_eq(),
            CmpOp::Ne => ordering.is_ne(),
            CmpOp::Lt => ordering.is_lt(),
            CmpOp::Gt => ordering.is_gt(),
            CmpOp::Le => ordering.is_le(),
            CmpOp::Ge => ordering.is_ge(),
        }
    }
}

fn text_value<'s, S: SessionView + ?Sized>(operand: &TextOperand, session: &'s S) -> Option<&'s str> {
    match operand {
        TextOperand::GameSessionName => Some(session.game_session_name()),
        TextOperand::GameSessionId => Some(session.game_session_id()),
        TextOperand::Property(key) => session.game_session_property(key),
    }
}

fn integer_value<S: SessionView + ?Sized>(operand: IntegerOperand, session: &S) -> i64 {
    match operand {
        IntegerOperand::MaximumSessions => session.maximum_sessions(),
        IntegerOperand::PlayerSessionCount => session.player_session_count(),
        IntegerOperand::CreationTimeMillis => session.creation_time_millis(),
    }
}

/// A sort value; the variants of one operand never mix, so the derived order is the operand's order, with false
/// before true.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Value<'s> {
    Text(&'s str),
    Integer(i64),
    Boolean(bool),
}

impl Sort {
    /// The order of two sessions in search results: by the operand in the sort's direction, sessions lacking a
    /// sorted property last in either direction, ties by `gameSessionId` ascending, so the order is total and a
    /// page boundary is well defined.
    pub fn compare<S: SessionView + ?Sized>(&self, a: &S, b: &S) -> Ordering {
        let by_value = match (self.value(a), self.value(b)) {
            (Some(x), Some(y)) => match self.direction {
                Direction::Ascending => x.cmp(&y),
                Direction::Descending => y.cmp(&x),
            },
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        by_value.then_with(|| a.game_session_id().cmp(b.game_session_id()))
    }

    fn value<'s, S: SessionView + ?Sized>(&self, session: &'s S) -> Option<Value<'s>> {
        match &self.operand {
            Operand::Text(text) => text_value(text, session).map(Value::Text),
            Operand::Integer(integer) => Some(Value::Integer(integer_value(*integer, session))),
            Operand::HasAvailablePlayerSessions => Some(Value::Boolean(session.has_available_player_sessions())),
        }
    }
}
