//! Recursive descent over the contract's grammar:
//!
//! ```text
//! filter     := [ or_expr ]
//! or_expr    := and_expr { OR and_expr }
//! and_expr   := not_expr { AND not_expr }
//! not_expr   := NOT not_expr | '(' or_expr ')' | comparison
//! comparison := operand op literal
//! sort       := [ operand ( ASC | DESC ) ]
//! ```
//!
//! Recursion is bounded by the nesting limit (each level of parentheses is one trip through `or_expr`); a run of
//! NOTs is read in a loop, so no input can exhaust the stack.

use super::ast::{
    CREATION_TIME_MILLIS, CmpOp, Comparison, Direction, Equality, Expr, Filter, GAME_SESSION_ID, GAME_SESSION_NAME,
    HAS_AVAILABLE_PLAYER_SESSIONS, IntegerOperand, MAXIMUM_SESSIONS, Operand, PLAYER_SESSION_COUNT, Sort, TextOperand,
};
use super::lexer::{Lexer, Token, TokenKind};
use super::{COMPARISONS_MAX, EXPRESSION_LEN_MAX, PARENTHESES_DEPTH_MAX, SearchError, SearchErrorKind};

const OPERAND_NAMES: [&str; 6] = [
    GAME_SESSION_NAME,
    GAME_SESSION_ID,
    MAXIMUM_SESSIONS,
    PLAYER_SESSION_COUNT,
    CREATION_TIME_MILLIS,
    HAS_AVAILABLE_PLAYER_SESSIONS,
];

/// Words that are keywords somewhere in the language, case-insensitive.
const KEYWORDS: [&str; 7] = ["AND", "OR", "NOT", "TRUE", "FALSE", "ASC", "DESC"];

const START_OF_TERM: &str = "a comparison, NOT or '('";

pub(super) fn filter(source: &str) -> Result<Filter, SearchError> {
    check_length(source)?;
    let mut parser = Parser::new(source);
    if parser.peek()?.kind == TokenKind::End {
        return Ok(Filter { expr: None });
    }
    let expr = parser.or_expr()?;
    let next = parser.bump()?;
    if next.kind != TokenKind::End {
        let expected = if next.kind == TokenKind::Close {
            "AND, OR or the end of the expression (this ')' closes no '(')"
        } else {
            "AND, OR or the end of the expression"
        };
        return Err(parser.expected(expected, &next));
    }
    Ok(Filter { expr: Some(expr) })
}

pub(super) fn sort(source: &str) -> Result<Sort, SearchError> {
    check_length(source)?;
    let mut parser = Parser::new(source);
    let first = parser.bump()?;
    if first.kind == TokenKind::End {
        return Ok(Sort::default());
    }
    let operand = parser.operand(&first, "an operand")?;
    let next = parser.bump()?;
    let direction = match &next.kind {
        TokenKind::Word(word) if word.eq_ignore_ascii_case("ASC") => Direction::Ascending,
        TokenKind::Word(word) if word.eq_ignore_ascii_case("DESC") => Direction::Descending,
        _ => {
            let expected = format!("ASC or DESC after {}", parser.lexer.describe(&first));
            return Err(parser.expected(&expected, &next));
        }
    };
    let end = parser.bump()?;
    if end.kind != TokenKind::End {
        return Err(parser.expected("the end of the expression", &end));
    }
    Ok(Sort { operand, direction })
}

fn check_length(source: &str) -> Result<(), SearchError> {
    let len = source.chars().count();
    if len > EXPRESSION_LEN_MAX {
        return Err(SearchError {
            offset: EXPRESSION_LEN_MAX,
            kind: SearchErrorKind::TooLong(len),
        });
    }
    Ok(())
}

/// A literal before it is checked against its operand's type.
enum Literal {
    Text(String),
    Integer(i64),
    Boolean(bool),
}

impl Literal {
    fn kind(&self) -> &'static str {
        match self {
            Literal::Text(_) => "a string",
            Literal::Integer(_) => "an integer",
            Literal::Boolean(_) => "a boolean",
        }
    }
}

struct Parser {
    lexer: Lexer,
    peeked: Option<Token>,
    comparisons: usize,
    depth: usize,
}

impl Parser {
    fn new(source: &str) -> Parser {
        Parser {
            lexer: Lexer::new(source),
            peeked: None,
            comparisons: 0,
            depth: 0,
        }
    }

    fn peek(&mut self) -> Result<&Token, SearchError> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lexer.next_token()?);
        }
        Ok(self.peeked.as_ref().expect("just filled"))
    }

    fn bump(&mut self) -> Result<Token, SearchError> {
        match self.peeked.take() {
            Some(token) => Ok(token),
            None => self.lexer.next_token(),
        }
    }

    /// Consumes the next token if it is `keyword`, in any letter case.
    fn eat_keyword(&mut self, keyword: &str) -> Result<bool, SearchError> {
        let found = matches!(&self.peek()?.kind, TokenKind::Word(word) if word.eq_ignore_ascii_case(keyword));
        if found {
            self.bump()?;
        }
        Ok(found)
    }

    fn expected(&self, expected: &str, found: &Token) -> SearchError {
        SearchError {
            offset: found.start,
            kind: SearchErrorKind::Expected {
                expected: expected.to_owned(),
                found: self.lexer.describe(found),
            },
        }
    }

    fn or_expr(&mut self) -> Result<Expr, SearchError> {
        let mut terms = vec![self.and_expr()?];
        while self.eat_keyword("OR")? {
            terms.push(self.and_expr()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::Or(terms)
        })
    }

    fn and_expr(&mut self) -> Result<Expr, SearchError> {
        let mut terms = vec![self.not_expr()?];
        while self.eat_keyword("AND")? {
            terms.push(self.not_expr()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::And(terms)
        })
    }

    fn not_expr(&mut self) -> Result<Expr, SearchError> {
        let mut nots = 0;
        while self.eat_keyword("NOT")? {
            nots += 1;
        }
        let mut expr = self.primary()?;
        for _ in 0..nots {
            expr = Expr::Not(Box::new(expr));
        }
        Ok(expr)
    }

    fn primary(&mut self) -> Result<Expr, SearchError> {
        let token = self.bump()?;
        match token.kind {
            TokenKind::Open => {
                if self.depth == PARENTHESES_DEPTH_MAX {
                    return Err(SearchError {
                        offset: token.start,
                        kind: SearchErrorKind::TooDeep,
                    });
                }
                self.depth += 1;
                let expr = self.or_expr()?;
                let close = self.bump()?;
                if close.kind != TokenKind::Close {
                    let expected = format!("AND, OR or ')' to close the '(' at {}", token.start);
                    return Err(self.expected(&expected, &close));
                }
                self.depth -= 1;
                Ok(expr)
            }
            TokenKind::Word(_) | TokenKind::Property(_) => self.comparison(&token).map(Expr::Compare),
            _ => Err(self.expected(START_OF_TERM, &token)),
        }
    }

    fn comparison(&mut self, first: &Token) -> Result<Comparison, SearchError> {
        let operand = self.operand(first, START_OF_TERM)?;
        self.comparisons += 1;
        if self.comparisons > COMPARISONS_MAX {
            return Err(SearchError {
                offset: first.start,
                kind: SearchErrorKind::TooManyComparisons,
            });
        }
        let op_token = self.bump()?;
        let TokenKind::Op(op) = op_token.kind else {
            let expected = format!(
                "a comparison operator (= <> < > <= >=) after {}",
                self.lexer.describe(first)
            );
            return Err(self.expected(&expected, &op_token));
        };
        // A boolean's operator is checked before its literal is read: it comes first in the source.
        if operand == Operand::HasAvailablePlayerSessions && !matches!(op, CmpOp::Eq | CmpOp::Ne) {
            return Err(SearchError {
                offset: op_token.start,
                kind: SearchErrorKind::BooleanOrdering(self.lexer.describe(&op_token)),
            });
        }
        let literal_token = self.bump()?;
        let literal = self.literal(&literal_token)?;
        let mismatch = |expected| SearchError {
            offset: literal_token.start,
            kind: SearchErrorKind::TypeMismatch {
                operand: operand.to_string(),
                expected,
                found: format!("{} {}", literal.kind(), self.lexer.describe(&literal_token)),
            },
        };
        match (&operand, &literal) {
            (Operand::Text(text), Literal::Text(value)) => Ok(Comparison::Text {
                operand: text.clone(),
                op,
                value: value.clone(),
            }),
            (Operand::Text(_), _) => Err(mismatch("a single-quoted string")),
            (Operand::Integer(integer), Literal::Integer(value)) => Ok(Comparison::Integer {
                operand: *integer,
                op,
                value: *value,
            }),
            (Operand::Integer(_), _) => Err(mismatch("an integer")),
            (Operand::HasAvailablePlayerSessions, Literal::Boolean(value)) => Ok(Comparison::Available {
                op: if op == CmpOp::Eq { Equality::Eq } else { Equality::Ne },
                value: *value,
            }),
            (Operand::HasAvailablePlayerSessions, _) => Err(mismatch("true or false")),
        }
    }

    /// Reads an operand from `token`; `expected` says what else could have stood there.
    fn operand(&self, token: &Token, expected: &str) -> Result<Operand, SearchError> {
        let word = match &token.kind {
            TokenKind::Property(key) => return Ok(Operand::Text(TextOperand::Property(key.clone()))),
            TokenKind::Word(word) => word,
            _ => return Err(self.expected(expected, token)),
        };
        match word.as_str() {
            GAME_SESSION_NAME => Ok(Operand::Text(TextOperand::GameSessionName)),
            GAME_SESSION_ID => Ok(Operand::Text(TextOperand::GameSessionId)),
            MAXIMUM_SESSIONS => Ok(Operand::Integer(IntegerOperand::MaximumSessions)),
            PLAYER_SESSION_COUNT => Ok(Operand::Integer(IntegerOperand::PlayerSessionCount)),
            CREATION_TIME_MILLIS => Ok(Operand::Integer(IntegerOperand::CreationTimeMillis)),
            HAS_AVAILABLE_PLAYER_SESSIONS => Ok(Operand::HasAvailablePlayerSessions),
            _ if KEYWORDS.iter().any(|k| word.eq_ignore_ascii_case(k)) || is_integer(word) => {
                Err(self.expected(expected, token))
            }
            _ => Err(SearchError {
                offset: token.start,
                kind: SearchErrorKind::UnknownOperand {
                    found: self.lexer.describe(token),
                    suggestion: OPERAND_NAMES
                        .into_iter()
                        .chain(["gameSessionProperties"])
                        .find(|name| name.eq_ignore_ascii_case(word.split('.').next().unwrap_or_default())),
                },
            }),
        }
    }

    fn literal(&self, token: &Token) -> Result<Literal, SearchError> {
        match &token.kind {
            TokenKind::Str(text) => Ok(Literal::Text(text.clone())),
            TokenKind::Word(word) if word.eq_ignore_ascii_case("true") => Ok(Literal::Boolean(true)),
            TokenKind::Word(word) if word.eq_ignore_ascii_case("false") => Ok(Literal::Boolean(false)),
            TokenKind::Word(word) if is_integer(word) => word.parse().map(Literal::Integer).map_err(|_| SearchError {
                offset: token.start,
                kind: SearchErrorKind::IntegerOutOfRange(self.lexer.describe(token)),
            }),
            _ => Err(self.expected("a literal: a single-quoted string, an integer, true or false", token)),
        }
    }
}

/// Decimal digits, optionally negative: the only integers the contract has.
fn is_integer(word: &str) -> bool {
    let digits = word.strip_prefix('-').unwrap_or(word);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_are_limited() {
        // At least 16 characters a comparison and 3 between two leave room for 54 comparisons in 1024
        // characters, so only a parser that skips the length check can show the limit.
        let conjunction = |n: usize| vec!["maximumSessions = 1"; n].join(" AND ");
        let parse = |source: &str| Parser::new(source).or_expr();
        assert!(parse(&conjunction(COMPARISONS_MAX)).is_ok());
        assert_eq!(
            parse(&conjunction(COMPARISONS_MAX + 1)).unwrap_err(),
            SearchError {
                offset: COMPARISONS_MAX * "maximumSessions = 1 AND ".len(),
                kind: SearchErrorKind::TooManyComparisons,
            }
        );
        let densest = |n: usize| vec!["gameSessionId=''"; n].join("OR ");
        assert!(filter(&densest(54)).is_ok());
        assert_eq!(filter(&densest(55)).unwrap_err().kind, SearchErrorKind::TooLong(1042));
    }
}
