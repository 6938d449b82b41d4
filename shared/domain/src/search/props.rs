//! Properties over generated input: parsing never panics, canonical text parses back to the same tree, evaluation
//! is boolean logic, and index hints never leave out a match.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use super::ast::{CmpOp, Comparison, Equality, Expr, Filter, IntegerOperand, TextOperand};
use super::tests::Session;
use super::*;

/// Pieces of the language, good and bad, for inputs that get past the first token.
const TOKENS: &[&str] = &[
    "(",
    ")",
    "=",
    "<>",
    "<",
    ">",
    "<=",
    ">=",
    "!=",
    "!",
    "AND",
    "or",
    "Not",
    "true",
    "FALSE",
    "ASC",
    "desc",
    "gameSessionName",
    "gameSessionId",
    "gameSessionProperties.mode",
    "gameSessionProperties.'a b'",
    "gameSessionProperties.",
    "gameSessionProperties.a.b",
    "maximumSessions",
    "playerSessionCount",
    "creationTimeMillis",
    "hasAvailablePlayerSessions",
    "MaximumSessions",
    "'x'",
    "'it''s'",
    "'",
    "''",
    "5",
    "-3",
    "007",
    "99999999999999999999",
    "-",
    ".",
    "1.5",
    "é",
    ",",
];
const SEPARATORS: &[&str] = &[" ", "", "\n", "  "];

fn token_soup() -> impl Strategy<Value = String> {
    vec((select(TOKENS), select(SEPARATORS)), 0..80).prop_map(|pieces| {
        pieces
            .into_iter()
            .flat_map(|(token, separator)| [token, separator])
            .collect()
    })
}

/// Parsing `source` does not panic, and what parses prints back to text that parses to the same thing.
fn check_parsers(source: &str) -> Result<(), TestCaseError> {
    if let Ok(filter) = parse_filter(source) {
        let canonical = filter.to_string();
        if canonical.chars().count() <= EXPRESSION_LEN_MAX {
            prop_assert_eq!(parse_filter(&canonical), Ok(filter.clone()), "{}", canonical);
        }
        filter.index_hint();
        filter.matches(&sample_session());
    }
    if let Ok(sort) = parse_sort(source) {
        prop_assert_eq!(parse_sort(&sort.to_string()), Ok(sort));
    }
    Ok(())
}

fn sample_session() -> Session {
    Session {
        name: "a".into(),
        id: "b".into(),
        properties: vec![("mode".into(), "x".into())],
        maximum: 5,
        players: 1,
        created: 3,
        accept_all: true,
    }
}

fn cmp_op() -> impl Strategy<Value = CmpOp> {
    select(&[CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Gt, CmpOp::Le, CmpOp::Ge][..])
}

/// Comparisons on values small enough to meet the generated sessions, with some at the ends of i64.
fn comparison() -> impl Strategy<Value = Comparison> {
    let key = prop_oneof![3 => "[a-c]{1,2}", 1 => "\\PC{0,4}"];
    let text = prop_oneof![
        Just(TextOperand::GameSessionName),
        Just(TextOperand::GameSessionId),
        key.prop_map(TextOperand::Property)
    ];
    let integer = select(
        &[
            IntegerOperand::MaximumSessions,
            IntegerOperand::PlayerSessionCount,
            IntegerOperand::CreationTimeMillis,
        ][..],
    );
    let value = prop_oneof![8 => -1i64..7, 1 => any::<i64>(), 1 => select(&[i64::MIN, i64::MAX][..])];
    prop_oneof![
        1 => (text, cmp_op(), "[a-c' ]{0,3}|\\PC{0,5}").prop_map(|(operand, op, value)| Comparison::Text {
            operand,
            op,
            value
        }),
        3 => (integer, cmp_op(), value).prop_map(|(operand, op, value)| Comparison::Integer { operand, op, value }),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(eq, value)| Comparison::Available {
            op: if eq { Equality::Eq } else { Equality::Ne },
            value
        }),
    ]
}

/// Trees as the parser builds them: AND and OR with at least two terms.
fn expr() -> impl Strategy<Value = Expr> {
    comparison().prop_map(Expr::Compare).prop_recursive(4, 16, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| Expr::Not(Box::new(e))),
            vec(inner.clone(), 2..=3).prop_map(Expr::And),
            vec(inner, 2..=3).prop_map(Expr::Or),
        ]
    })
}

fn comparisons(expr: &Expr) -> usize {
    match expr {
        Expr::Compare(_) => 1,
        Expr::Not(inner) => comparisons(inner),
        Expr::And(terms) | Expr::Or(terms) => terms.iter().map(comparisons).sum(),
    }
}

/// Mostly conjunctions of comparisons and negated comparisons, so that hints are often found and sessions often
/// match, with arbitrary trees among their terms.
fn conjunction() -> impl Strategy<Value = Expr> {
    let term = prop_oneof![
        3 => comparison().prop_map(Expr::Compare),
        2 => comparison().prop_map(|c| Expr::Not(Box::new(Expr::Compare(c)))),
        1 => expr(),
    ];
    vec(term, 1..4).prop_map(|mut terms| {
        if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::And(terms)
        }
    })
}

fn sessions() -> impl Strategy<Value = Vec<Session>> {
    let session = (
        "[a-c']{0,3}",
        "[a-c]{1,3}",
        vec(("[a-c]{1,2}", "[a-c' ]{0,3}"), 0..3),
        0i64..6,
        0i64..=6,
        -1i64..7,
        any::<bool>(),
    )
        .prop_map(
            |(name, id, properties, maximum, players, created, accept_all)| Session {
                name,
                id,
                properties,
                maximum,
                players: players.min(maximum),
                created,
                accept_all,
            },
        );
    vec(session, 1..32)
}

/// A boolean formula and its value, rendered into the language independently of `Display`.
#[derive(Clone, Debug)]
enum Formula {
    Atom(bool, usize),
    Not(Box<Formula>),
    And(Vec<Formula>),
    Or(Vec<Formula>),
}

/// Atoms true and false of `sample_session()`, including missing-property comparisons and a NOT.
const TRUE_ATOMS: &[&str] = &[
    "playerSessionCount = 1",
    "hasAvailablePlayerSessions = true",
    "gameSessionProperties.mode >= 'x'",
    "NOT gameSessionProperties.map = 'x'",
];
const FALSE_ATOMS: &[&str] = &[
    "playerSessionCount <> 1",
    "gameSessionProperties.map <> 'x'",
    "gameSessionName > 'a'",
    "hasAvailablePlayerSessions = FALSE",
];

impl Formula {
    fn value(&self) -> bool {
        match self {
            Formula::Atom(value, _) => *value,
            Formula::Not(inner) => !inner.value(),
            Formula::And(terms) => terms.iter().all(Formula::value),
            Formula::Or(terms) => terms.iter().any(Formula::value),
        }
    }

    /// Writes the formula with only the parentheses precedence needs, plus some extra ones and some lower-case
    /// keywords as `choices` says.
    fn render(&self, choices: &mut impl Iterator<Item = bool>) -> String {
        let mut choose = || choices.next().unwrap_or(false);
        let keyword = |word: &str, lower: bool| if lower { word.to_lowercase() } else { word.to_owned() };
        let wrap = |text: String, parenthesize: bool| if parenthesize { format!("({text})") } else { text };
        match self {
            Formula::Atom(true, i) => TRUE_ATOMS[i % TRUE_ATOMS.len()].to_owned(),
            Formula::Atom(false, i) => FALSE_ATOMS[i % FALSE_ATOMS.len()].to_owned(),
            Formula::Not(inner) => {
                let (lower, extra) = (choose(), choose());
                let needed = matches!(**inner, Formula::And(_) | Formula::Or(_));
                format!(
                    "{} {}",
                    keyword("NOT", lower),
                    wrap(inner.render(choices), needed || extra)
                )
            }
            Formula::And(terms) => {
                let separator = format!(" {} ", keyword("AND", choose()));
                let rendered: Vec<_> = terms
                    .iter()
                    .map(|t| (matches!(t, Formula::Or(_)), t.render(choices)))
                    .collect();
                let rendered: Vec<_> = rendered
                    .into_iter()
                    .map(|(needed, text)| wrap(text, needed || choices.next().unwrap_or(false)))
                    .collect();
                rendered.join(&separator)
            }
            Formula::Or(terms) => {
                let separator = format!(" {} ", keyword("OR", choose()));
                let rendered: Vec<_> = terms.iter().map(|t| t.render(choices)).collect();
                let rendered: Vec<_> = rendered
                    .into_iter()
                    .map(|text| wrap(text, choices.next().unwrap_or(false)))
                    .collect();
                rendered.join(&separator)
            }
        }
    }
}

fn formula() -> impl Strategy<Value = Formula> {
    (any::<bool>(), 0usize..4)
        .prop_map(|(value, i)| Formula::Atom(value, i))
        .prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                inner.clone().prop_map(|f| Formula::Not(Box::new(f))),
                vec(inner.clone(), 2..=4).prop_map(Formula::And),
                vec(inner, 2..=4).prop_map(Formula::Or),
            ]
        })
}

proptest! {
    #[test]
    fn parsing_never_panics_on_any_text(source in "\\PC{0,1100}") {
        check_parsers(&source)?;
    }

    #[test]
    fn parsing_never_panics_on_token_soup(source in token_soup()) {
        check_parsers(&source)?;
    }

    #[test]
    fn canonical_text_parses_back(expr in expr()) {
        let filter = Filter { expr: Some(expr) };
        let text = filter.to_string();
        prop_assume!(text.chars().count() <= EXPRESSION_LEN_MAX);
        prop_assume!(comparisons(filter.expr.as_ref().unwrap()) <= COMPARISONS_MAX);
        prop_assert_eq!(parse_filter(&text), Ok(filter), "{}", text);
    }

    #[test]
    fn evaluation_is_boolean_logic(formula in formula(), choices in vec(any::<bool>(), 0..64)) {
        let text = formula.render(&mut choices.into_iter());
        prop_assume!(text.chars().count() <= EXPRESSION_LEN_MAX);
        let filter = parse_filter(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(filter.matches(&sample_session()), formula.value(), "{}", text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn index_hints_never_leave_out_a_match(expr in conjunction(), sessions in sessions()) {
        let filter = Filter { expr: Some(expr) };
        if let Some(range) = filter.index_hint() {
            for session in sessions.iter().filter(|s| filter.matches(*s)) {
                prop_assert!(
                    range.contains(session.score(range.operand)),
                    "{} matches {:?} outside {:?}", filter, session, range
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    /// A fuzz test without cargo-fuzz: arbitrary bytes, read as text the way a gRPC string would never be but a
    /// careless client might send after lossy decoding.
    #[test]
    fn fuzz_arbitrary_bytes(bytes in vec(any::<u8>(), 0..1200)) {
        check_parsers(&String::from_utf8_lossy(&bytes))?;
    }
}
