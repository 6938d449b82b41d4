//! Splits an expression into tokens. Tokens are read on demand by the parser, so the error reported is the first
//! one by position, whether the lexer or the grammar finds it.

use super::ast::{CmpOp, PROPERTY_PREFIX};
use super::{SearchError, SearchErrorKind};

/// Longest piece of source quoted back in a message.
const QUOTE_MAX: usize = 40;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum TokenKind {
    Open,
    Close,
    Op(CmpOp),
    /// A single-quoted string, unescaped.
    Str(String),
    /// A run of `[A-Za-z0-9_.-]`: an operand name, a keyword or an integer; only the parser knows which one may
    /// stand where it is.
    Word(String),
    /// `gameSessionProperties.KEY`, KEY bare or quoted, unescaped. One token, so no whitespace may split it.
    Property(String),
    End,
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    pub(super) kind: TokenKind,
    /// Character offsets of the token in the source, end excluded.
    pub(super) start: usize,
    pub(super) end: usize,
}

pub(super) struct Lexer {
    // Characters rather than bytes: offsets in errors are character offsets, and the expression is at most 1024
    // characters long by the time it gets here.
    chars: Vec<char>,
    pos: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

fn error(offset: usize, kind: SearchErrorKind) -> SearchError {
    SearchError { offset, kind }
}

impl Lexer {
    pub(super) fn new(source: &str) -> Lexer {
        Lexer {
            chars: source.chars().collect(),
            pos: 0,
        }
    }

    pub(super) fn next_token(&mut self) -> Result<Token, SearchError> {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
        let start = self.pos;
        let Some(c) = self.peek() else {
            return Ok(Token {
                kind: TokenKind::End,
                start,
                end: start,
            });
        };
        self.pos += 1;
        let kind = match c {
            '(' => TokenKind::Open,
            ')' => TokenKind::Close,
            '=' => TokenKind::Op(CmpOp::Eq),
            '<' if self.eat('>') => TokenKind::Op(CmpOp::Ne),
            '<' if self.eat('=') => TokenKind::Op(CmpOp::Le),
            '<' => TokenKind::Op(CmpOp::Lt),
            '>' if self.eat('=') => TokenKind::Op(CmpOp::Ge),
            '>' => TokenKind::Op(CmpOp::Gt),
            '!' if self.peek() == Some('=') => return Err(error(start, SearchErrorKind::BangEquals)),
            '\'' => TokenKind::Str(self.quoted(start)?),
            c if is_word_char(c) => self.word(start)?,
            c => return Err(error(start, SearchErrorKind::UnexpectedCharacter(c))),
        };
        Ok(Token {
            kind,
            start,
            end: self.pos,
        })
    }

    /// The token's source text, for messages: quoted, shortened if long.
    pub(super) fn describe(&self, token: &Token) -> String {
        if token.kind == TokenKind::End {
            return "the end of the expression".to_owned();
        }
        let source = &self.chars[token.start..token.end];
        let mut text: String = source.iter().take(QUOTE_MAX).collect();
        if source.len() > QUOTE_MAX {
            text.push('…');
        }
        // Strings and quoted keys carry their own quotes.
        if text.contains('\'') { text } else { format!("'{text}'") }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, expected: char) -> bool {
        let found = self.peek() == Some(expected);
        if found {
            self.pos += 1;
        }
        found
    }

    /// Reads the rest of a string whose opening quote is at `start`.
    fn quoted(&mut self, start: usize) -> Result<String, SearchError> {
        let mut text = String::new();
        loop {
            match self.peek() {
                None => return Err(error(start, SearchErrorKind::UnterminatedString)),
                Some('\'') => {
                    self.pos += 1;
                    if !self.eat('\'') {
                        return Ok(text);
                    }
                    text.push('\'');
                }
                Some(c) => {
                    self.pos += 1;
                    text.push(c);
                }
            }
        }
    }

    fn word(&mut self, start: usize) -> Result<TokenKind, SearchError> {
        while self.peek().is_some_and(is_word_char) {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        let Some(key) = text.strip_prefix(PROPERTY_PREFIX) else {
            return Ok(TokenKind::Word(text));
        };
        if key.is_empty() {
            let quote = self.pos;
            if !self.eat('\'') {
                return Err(error(quote, SearchErrorKind::MissingPropertyKey));
            }
            return self.quoted(quote).map(TokenKind::Property);
        }
        if key.contains('.') {
            let key_start = start + PROPERTY_PREFIX.len();
            return Err(error(
                key_start,
                SearchErrorKind::PropertyKeyNeedsQuotes(key.to_owned()),
            ));
        }
        Ok(TokenKind::Property(key.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(source: &str) -> Result<Vec<TokenKind>, SearchError> {
        let mut lexer = Lexer::new(source);
        let mut kinds = Vec::new();
        loop {
            let token = lexer.next_token()?;
            if token.kind == TokenKind::End {
                return Ok(kinds);
            }
            kinds.push(token.kind);
        }
    }

    fn word(text: &str) -> TokenKind {
        TokenKind::Word(text.to_owned())
    }

    #[test]
    fn operators_need_no_whitespace() {
        assert_eq!(
            kinds("a<>b<=c>=d<e>f=-1").unwrap(),
            [
                word("a"),
                TokenKind::Op(CmpOp::Ne),
                word("b"),
                TokenKind::Op(CmpOp::Le),
                word("c"),
                TokenKind::Op(CmpOp::Ge),
                word("d"),
                TokenKind::Op(CmpOp::Lt),
                word("e"),
                TokenKind::Op(CmpOp::Gt),
                word("f"),
                TokenKind::Op(CmpOp::Eq),
                word("-1"),
            ]
        );
    }

    #[test]
    fn any_whitespace_separates() {
        assert_eq!(
            kinds("\t(a\n)\u{3000}").unwrap(),
            [TokenKind::Open, word("a"), TokenKind::Close]
        );
    }

    #[test]
    fn a_doubled_quote_is_a_quote() {
        assert_eq!(
            kinds("'it''s' '' ''''").unwrap(),
            [
                TokenKind::Str("it's".into()),
                TokenKind::Str(String::new()),
                TokenKind::Str("'".into())
            ]
        );
        let unterminated = kinds("x = 'it''s").unwrap_err();
        assert_eq!(unterminated, error(4, SearchErrorKind::UnterminatedString));
    }

    #[test]
    fn property_keys_bare_or_quoted() {
        assert_eq!(
            kinds("gameSessionProperties.max-level_2 gameSessionProperties.'max level'").unwrap(),
            [
                TokenKind::Property("max-level_2".into()),
                TokenKind::Property("max level".into())
            ]
        );
        assert_eq!(
            kinds("gameSessionProperties. 'x'").unwrap_err(),
            error(22, SearchErrorKind::MissingPropertyKey)
        );
        assert_eq!(
            kinds("gameSessionProperties.a.b").unwrap_err(),
            error(22, SearchErrorKind::PropertyKeyNeedsQuotes("a.b".into()))
        );
    }

    #[test]
    fn offsets_count_characters_not_bytes() {
        assert_eq!(
            kinds("'é€😀' #").unwrap_err(),
            error(6, SearchErrorKind::UnexpectedCharacter('#'))
        );
        assert_eq!(kinds("a != 1").unwrap_err(), error(2, SearchErrorKind::BangEquals));
        assert_eq!(
            kinds("a ! 1").unwrap_err(),
            error(2, SearchErrorKind::UnexpectedCharacter('!'))
        );
    }

    #[test]
    fn long_tokens_are_shortened_in_messages() {
        let source = format!("'{}'", "x".repeat(100));
        let mut lexer = Lexer::new(&source);
        let token = lexer.next_token().unwrap();
        assert_eq!(lexer.describe(&token), format!("'{}…", "x".repeat(39)));
        let end = lexer.next_token().unwrap();
        assert_eq!(lexer.describe(&end), "the end of the expression");
    }
}
