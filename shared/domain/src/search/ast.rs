//! The parsed form of filter and sort expressions, and its canonical text.
//!
//! `Display` writes the canonical syntax: keywords upper-case, one space around operators, strings and keys quoted
//! only as needed, parentheses only where precedence needs them. Parsing that text gives back the same tree, so
//! a filter can be logged or echoed in one normal form. It may be longer than what the client wrote (spaces are
//! added), so it can exceed the length limit of a request.

use std::fmt;

/// A parsed filter expression. The empty expression matches every session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    pub(super) expr: Option<Expr>,
}

/// A parsed sort expression: one operand and a direction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sort {
    pub(super) operand: Operand,
    pub(super) direction: Direction,
}

impl Default for Sort {
    /// `creationTimeMillis ASC`, the order of an empty sort expression.
    fn default() -> Sort {
        Sort {
            operand: Operand::Integer(IntegerOperand::CreationTimeMillis),
            direction: Direction::Ascending,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Direction {
    Ascending,
    Descending,
}

/// A boolean expression over comparisons. `And` and `Or` hold at least two terms; a parenthesized AND inside an
/// AND (or OR inside OR) stays nested, as written, so the canonical text keeps those parentheses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Expr {
    Compare(Comparison),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
}

/// One comparison, typed: each operand kind can only hold a literal of its own type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Comparison {
    Text {
        operand: TextOperand,
        op: CmpOp,
        value: String,
    },
    Integer {
        operand: IntegerOperand,
        op: CmpOp,
        value: i64,
    },
    Available {
        op: Equality,
        value: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Operand {
    Text(TextOperand),
    Integer(IntegerOperand),
    HasAvailablePlayerSessions,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum TextOperand {
    GameSessionName,
    GameSessionId,
    /// `gameSessionProperties.KEY`, with KEY unescaped.
    Property(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IntegerOperand {
    MaximumSessions,
    PlayerSessionCount,
    CreationTimeMillis,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

/// The operators a boolean takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Equality {
    Eq,
    Ne,
}

/// Operand names, as the contract spells them.
pub(super) const GAME_SESSION_NAME: &str = "gameSessionName";
pub(super) const GAME_SESSION_ID: &str = "gameSessionId";
pub(super) const PROPERTY_PREFIX: &str = "gameSessionProperties.";
pub(super) const MAXIMUM_SESSIONS: &str = "maximumSessions";
pub(super) const PLAYER_SESSION_COUNT: &str = "playerSessionCount";
pub(super) const CREATION_TIME_MILLIS: &str = "creationTimeMillis";
pub(super) const HAS_AVAILABLE_PLAYER_SESSIONS: &str = "hasAvailablePlayerSessions";

/// Whether a property key can be written without quotes.
pub(super) fn is_bare_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

/// Writes `text` single-quoted, a quote inside doubled.
fn write_quoted(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    write!(f, "'{}'", text.replace('\'', "''"))
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.expr {
            Some(expr) => expr.fmt(f),
            None => Ok(()),
        }
    }
}

impl fmt::Display for Sort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let direction = match self.direction {
            Direction::Ascending => "ASC",
            Direction::Descending => "DESC",
        };
        write!(f, "{} {direction}", self.operand)
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A term is parenthesized exactly when the parser would otherwise group it differently: NOT binds tighter
        // than AND, AND tighter than OR, and a nested AND/OR of the same kind was parenthesized in the source.
        fn term(f: &mut fmt::Formatter<'_>, term: &Expr, parenthesize: bool) -> fmt::Result {
            if parenthesize {
                write!(f, "({term})")
            } else {
                term.fmt(f)
            }
        }
        fn terms(f: &mut fmt::Formatter<'_>, terms: &[Expr], keyword: &str, is_and: bool) -> fmt::Result {
            for (i, t) in terms.iter().enumerate() {
                if i > 0 {
                    write!(f, " {keyword} ")?;
                }
                term(f, t, matches!(t, Expr::Or(_)) || (is_and && matches!(t, Expr::And(_))))?;
            }
            Ok(())
        }
        match self {
            Expr::Compare(comparison) => comparison.fmt(f),
            Expr::Not(inner) => {
                f.write_str("NOT ")?;
                term(f, inner, matches!(**inner, Expr::And(_) | Expr::Or(_)))
            }
            Expr::And(and) => terms(f, and, "AND", true),
            Expr::Or(or) => terms(f, or, "OR", false),
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Comparison::Text { operand, op, value } => {
                write!(f, "{operand} {op} ")?;
                write_quoted(f, value)
            }
            Comparison::Integer { operand, op, value } => write!(f, "{operand} {op} {value}"),
            Comparison::Available { op, value } => {
                let op = match op {
                    Equality::Eq => "=",
                    Equality::Ne => "<>",
                };
                write!(f, "{HAS_AVAILABLE_PLAYER_SESSIONS} {op} {value}")
            }
        }
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Text(text) => text.fmt(f),
            Operand::Integer(integer) => integer.fmt(f),
            Operand::HasAvailablePlayerSessions => f.write_str(HAS_AVAILABLE_PLAYER_SESSIONS),
        }
    }
}

impl fmt::Display for TextOperand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TextOperand::GameSessionName => f.write_str(GAME_SESSION_NAME),
            TextOperand::GameSessionId => f.write_str(GAME_SESSION_ID),
            TextOperand::Property(key) if is_bare_key(key) => write!(f, "{PROPERTY_PREFIX}{key}"),
            TextOperand::Property(key) => {
                f.write_str(PROPERTY_PREFIX)?;
                write_quoted(f, key)
            }
        }
    }
}

impl fmt::Display for IntegerOperand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IntegerOperand::MaximumSessions => MAXIMUM_SESSIONS,
            IntegerOperand::PlayerSessionCount => PLAYER_SESSION_COUNT,
            IntegerOperand::CreationTimeMillis => CREATION_TIME_MILLIS,
        })
    }
}

impl fmt::Display for CmpOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Gt => ">",
            CmpOp::Le => "<=",
            CmpOp::Ge => ">=",
        })
    }
}
