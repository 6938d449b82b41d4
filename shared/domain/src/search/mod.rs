//! The expression language of SearchGameSessions: GameLift's FilterExpression and SortExpression, as the contract
//! (`SearchGameSessionsRequest` in `berth/session/v1/game_sessions.proto`) describes them.
//!
//! An expression is parsed once per request into a typed tree: a comparison can only pair an operand with a literal
//! of its type, so evaluating it on thousands of sessions has no error path. Parsing is bounded by the contract's
//! limits (1024 characters, 64 comparisons, 16 levels of parentheses) and reports the first error by position, as
//! a 0-based character offset and a message saying what was expected there.
//!
//! Beside evaluation ([`Filter::matches`], [`Sort::compare`]), [`Filter::index_hint`] tells the session store which
//! range of one of its sorted-set indexes holds every session the filter can match, so a search reads that range
//! instead of the whole fleet and evaluates the full filter only on those candidates.
//!
//! Decisions the contract leaves open:
//! - an expression of only whitespace is the empty expression (every session; `creationTimeMillis ASC`);
//! - tokens need no whitespace between them where they cannot run together (`playerSessionCount>=4`);
//! - an integer may have leading zeros (`007` is 7) and `-0` is 0;
//! - `!=` is refused with a message pointing to `<>`, the only not-equal operator of the contract.
//!
//! The comparison limit is enforced although 1024 characters hold at most 54 comparisons (16 characters the
//! shortest, 3 between two): it keeps its meaning should the length limit grow.

mod ast;
mod eval;
mod lexer;
mod parser;
mod plan;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

pub use ast::{Filter, Sort};
pub use eval::SessionView;
pub use plan::{IndexRange, IndexedOperand};

use crate::validate::Violations;

/// Longest filter or sort expression, in characters.
pub const EXPRESSION_LEN_MAX: usize = 1024;
/// Most comparisons in one filter expression.
pub const COMPARISONS_MAX: usize = 64;
/// Deepest nesting of parentheses in a filter expression.
pub const PARENTHESES_DEPTH_MAX: usize = 16;

/// Operand names, as the contract spells them, for messages.
const OPERAND_NAMES: &str = "gameSessionName, gameSessionId, gameSessionProperties.KEY, maximumSessions, \
                             playerSessionCount, creationTimeMillis, hasAvailablePlayerSessions";

/// Parses a filter expression; the empty expression matches every session.
pub fn parse_filter(expression: &str) -> Result<Filter, SearchError> {
    parser::filter(expression)
}

/// Parses a sort expression; the empty expression is `creationTimeMillis ASC`.
pub fn parse_sort(expression: &str) -> Result<Sort, SearchError> {
    parser::sort(expression)
}

/// Parses a request's `filter_expression`, recording an error as a violation of that field.
pub fn check_filter(v: &mut Violations, expression: &str) -> Option<Filter> {
    parse_filter(expression)
        .map_err(|error| error.report(v, "filter_expression"))
        .ok()
}

/// Parses a request's `sort_expression`, recording an error as a violation of that field.
pub fn check_sort(v: &mut Violations, expression: &str) -> Option<Sort> {
    parse_sort(expression)
        .map_err(|error| error.report(v, "sort_expression"))
        .ok()
}

/// Why an expression was refused, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at character {offset}: {kind}")]
pub struct SearchError {
    /// 0-based offset, in characters (not bytes, so clients in any language can point at it), of the token or
    /// character where the expression went wrong; the length limit for an expression that is too long.
    pub offset: usize,
    /// What went wrong.
    pub kind: SearchErrorKind,
}

impl SearchError {
    /// Records the error as a violation of `field` (`filter_expression` or `sort_expression`).
    pub fn report(&self, v: &mut Violations, field: &str) {
        v.add(field, self.to_string());
    }
}

/// What is wrong with an expression. `found` fields quote the offending text, or say `the end of the expression`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchErrorKind {
    /// Longer than [`EXPRESSION_LEN_MAX`] characters.
    #[error("the expression is {0} characters long; at most {max} are allowed", max = EXPRESSION_LEN_MAX)]
    TooLong(usize),
    /// More than [`COMPARISONS_MAX`] comparisons.
    #[error("more than {max} comparisons; combine fewer", max = COMPARISONS_MAX)]
    TooManyComparisons,
    /// Parentheses nested deeper than [`PARENTHESES_DEPTH_MAX`].
    #[error("more than {max} levels of parentheses", max = PARENTHESES_DEPTH_MAX)]
    TooDeep,
    /// A character no token starts with.
    #[error("unexpected character {0:?}")]
    UnexpectedCharacter(char),
    /// `!=`, which the language does not have.
    #[error("'!=' is not an operator; write '<>' for not equal")]
    BangEquals,
    /// A string with no closing quote.
    #[error("unterminated string: close it with ' (a quote inside a string is written '')")]
    UnterminatedString,
    /// `gameSessionProperties.` with no key after it.
    #[error("expected a property key after 'gameSessionProperties.': bare A-Z a-z 0-9 _ - or single-quoted")]
    MissingPropertyKey,
    /// A bare property key with characters only a quoted key may hold.
    #[error("property key {0:?} must be single-quoted: a bare key is made of A-Z a-z 0-9 _ -")]
    PropertyKeyNeedsQuotes(String),
    /// A word that names no operand.
    #[error("unknown operand {found}{hint}; operands are {OPERAND_NAMES}", hint = case_hint(.suggestion))]
    UnknownOperand {
        /// The word, quoted.
        found: String,
        /// The operand it names but for letter case (names are case-sensitive).
        suggestion: Option<&'static str>,
    },
    /// Another token than the grammar allows here.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What the grammar allows.
        expected: String,
        /// What is there.
        found: String,
    },
    /// A literal of another type than its operand.
    #[error("{operand} is compared only with {expected}, found {found}")]
    TypeMismatch {
        /// The operand's name.
        operand: String,
        /// The literals it takes.
        expected: &'static str,
        /// The literal given.
        found: String,
    },
    /// A boolean operand with an ordering operator.
    #[error("hasAvailablePlayerSessions is compared only by '=' or '<>', found {0}")]
    BooleanOrdering(String),
    /// An integer outside the signed 64-bit range.
    #[error("{0} is outside the 64-bit integer range")]
    IntegerOutOfRange(String),
}

fn case_hint(suggestion: &Option<&'static str>) -> String {
    suggestion.map_or_else(String::new, |name| {
        format!(" (operand names are case-sensitive: did you mean '{name}'?)")
    })
}
