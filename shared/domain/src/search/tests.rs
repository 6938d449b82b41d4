//! Examples of each rule of the language, its errors and limits, evaluation, sorting and index hints.

use std::cmp::Ordering;

use tonic::Code;
use tonic_types::StatusExt;

use super::ast::{CmpOp, Comparison, Expr, IntegerOperand};
use super::*;

/// A session as the tests need it.
#[derive(Clone, Debug)]
pub(super) struct Session {
    pub(super) name: String,
    pub(super) id: String,
    pub(super) properties: Vec<(String, String)>,
    pub(super) maximum: i64,
    pub(super) players: i64,
    pub(super) created: i64,
    pub(super) accept_all: bool,
}

impl Session {
    /// The score the store's index on `operand` would give it.
    pub(super) fn score(&self, operand: IndexedOperand) -> i64 {
        match operand {
            IndexedOperand::CreationTimeMillis => self.created,
            IndexedOperand::PlayerSessionCount => self.players,
            IndexedOperand::MaximumSessions => self.maximum,
            IndexedOperand::AvailableSlots => self.maximum - self.players,
        }
    }
}

impl SessionView for Session {
    fn game_session_name(&self) -> &str {
        &self.name
    }
    fn game_session_id(&self) -> &str {
        &self.id
    }
    fn game_session_property(&self, key: &str) -> Option<&str> {
        self.properties.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
    fn maximum_sessions(&self) -> i64 {
        self.maximum
    }
    fn player_session_count(&self) -> i64 {
        self.players
    }
    fn creation_time_millis(&self) -> i64 {
        self.created
    }
    fn has_available_player_sessions(&self) -> bool {
        self.accept_all && self.players < self.maximum
    }
}

fn session() -> Session {
    Session {
        name: "it's ranked".into(),
        id: "gs-2".into(),
        properties: vec![("mode".into(), "ranked".into()), ("max level".into(), "7".into())],
        maximum: 10,
        players: 4,
        created: 1_700_000_000_000,
        accept_all: true,
    }
}

fn matches(expression: &str) -> bool {
    parse_filter(expression)
        .unwrap_or_else(|e| panic!("{expression}: {e}"))
        .matches(&session())
}

fn error(expression: &str) -> SearchError {
    parse_filter(expression).expect_err(expression)
}

fn message(expression: &str) -> String {
    error(expression).to_string()
}

fn integer(operand: IntegerOperand, op: CmpOp, value: i64) -> Expr {
    Expr::Compare(Comparison::Integer { operand, op, value })
}

#[test]
fn the_empty_expression_matches_everything() {
    for empty in ["", " \t\n"] {
        let filter = parse_filter(empty).unwrap();
        assert!(filter.matches(&session()));
        assert_eq!(filter.to_string(), "");
        assert_eq!(filter.index_hint(), None);
        assert_eq!(parse_sort(empty).unwrap().to_string(), "creationTimeMillis ASC");
    }
}

#[test]
fn integer_operators() {
    let cases = [
        ("playerSessionCount = 4", true),
        ("playerSessionCount = 5", false),
        ("playerSessionCount <> 4", false),
        ("playerSessionCount <> 5", true),
        ("playerSessionCount < 4", false),
        ("playerSessionCount < 5", true),
        ("playerSessionCount > 3", true),
        ("playerSessionCount > 4", false),
        ("playerSessionCount <= 4", true),
        ("playerSessionCount <= 3", false),
        ("playerSessionCount >= 4", true),
        ("playerSessionCount >= 5", false),
        ("maximumSessions = 10", true),
        ("creationTimeMillis >= 1700000000000", true),
        ("creationTimeMillis > -9223372036854775808", true),
        ("maximumSessions<=0010", true),
        ("playerSessionCount > -0", true),
    ];
    for (expression, expected) in cases {
        assert_eq!(matches(expression), expected, "{expression}");
    }
}

#[test]
fn strings_compare_by_code_point() {
    let cases = [
        ("gameSessionName = 'it''s ranked'", true),
        ("gameSessionName <> 'it''s ranked'", false),
        ("gameSessionName > 'It'", true),
        ("gameSessionName < 'é'", true),
        ("gameSessionName >= 'it''s'", true),
        ("gameSessionName <= 'it''s'", false),
        ("gameSessionId = 'gs-2'", true),
        ("gameSessionId = 'GS-2'", false),
        ("gameSessionProperties.mode = 'ranked'", true),
        ("gameSessionProperties.'max level' > '10'", true),
        ("gameSessionProperties.mode = 'RANKED'", false),
    ];
    for (expression, expected) in cases {
        assert_eq!(matches(expression), expected, "{expression}");
    }
}

#[test]
fn a_missing_property_compares_false_whatever_the_operator() {
    for op in ["=", "<>", "<", ">", "<=", ">="] {
        assert!(!matches(&format!("gameSessionProperties.map {op} 'x'")), "{op}");
        assert!(matches(&format!("NOT gameSessionProperties.map {op} 'x'")), "{op}");
    }
}

#[test]
fn booleans_by_equality_only() {
    assert!(matches("hasAvailablePlayerSessions = true"));
    assert!(matches("hasAvailablePlayerSessions = TRUE"));
    assert!(matches("hasAvailablePlayerSessions <> False"));
    assert!(!matches("hasAvailablePlayerSessions = false"));
    let mut full = session();
    full.players = full.maximum;
    assert!(
        parse_filter("hasAvailablePlayerSessions = false")
            .unwrap()
            .matches(&full)
    );
    let mut closed = session();
    closed.accept_all = false;
    assert!(
        !parse_filter("hasAvailablePlayerSessions = true")
            .unwrap()
            .matches(&closed)
    );
    assert_eq!(
        message("hasAvailablePlayerSessions < true"),
        "at character 27: hasAvailablePlayerSessions is compared only by '=' or '<>', found '<'"
    );
}

#[test]
fn precedence_is_not_then_and_then_or() {
    let a = || integer(IntegerOperand::PlayerSessionCount, CmpOp::Eq, 1);
    let b = || integer(IntegerOperand::MaximumSessions, CmpOp::Eq, 2);
    let c = || integer(IntegerOperand::CreationTimeMillis, CmpOp::Eq, 3);
    let parsed = parse_filter("playerSessionCount = 1 OR maximumSessions = 2 AND NOT creationTimeMillis = 3").unwrap();
    assert_eq!(
        parsed.expr,
        Some(Expr::Or(vec![a(), Expr::And(vec![b(), Expr::Not(Box::new(c()))])]))
    );
    let parsed = parse_filter("NOT playerSessionCount = 1 AND maximumSessions = 2").unwrap();
    assert_eq!(parsed.expr, Some(Expr::And(vec![Expr::Not(Box::new(a())), b()])));
    let parsed = parse_filter("(playerSessionCount = 1 OR maximumSessions = 2) AND creationTimeMillis = 3").unwrap();
    assert_eq!(parsed.expr, Some(Expr::And(vec![Expr::Or(vec![a(), b()]), c()])));
    // true OR (true AND false) is true; (true OR true) AND false is false.
    assert!(matches(
        "playerSessionCount = 4 OR maximumSessions = 10 AND playerSessionCount = 0"
    ));
    assert!(!matches(
        "(playerSessionCount = 4 OR maximumSessions = 10) AND playerSessionCount = 0"
    ));
    assert!(!matches("NOT playerSessionCount = 4 AND maximumSessions = 10"));
    assert!(matches("NOT (playerSessionCount = 4 AND maximumSessions = 0)"));
    assert!(matches("NOT NOT playerSessionCount = 4"));
}

#[test]
fn keywords_are_case_insensitive_operands_are_not() {
    assert!(matches(
        "not playerSessionCount = 0 and maximumSessions = 10 Or playerSessionCount = 0"
    ));
    let unknown = error("MaximumSessions = 10");
    assert_eq!(unknown.offset, 0);
    assert_eq!(
        unknown.kind,
        SearchErrorKind::UnknownOperand {
            found: "'MaximumSessions'".into(),
            suggestion: Some("maximumSessions"),
        }
    );
    assert!(unknown.to_string().contains("did you mean 'maximumSessions'?"));
    let property = error("GameSessionProperties.mode = 'x'");
    assert!(property.to_string().contains("did you mean 'gameSessionProperties'?"));
    assert!(message("level = 3").starts_with("at character 0: unknown operand 'level'; operands are gameSessionName"));
}

#[test]
fn canonical_text() {
    let cases = [
        ("playerSessionCount>=4", "playerSessionCount >= 4"),
        (
            "hasAvailablePlayerSessions=TRUE and (gameSessionProperties.'max level'<>'it''s' or not (maximumSessions=1 \
             and maximumSessions=2))",
            "hasAvailablePlayerSessions = true AND (gameSessionProperties.'max level' <> 'it''s' OR NOT \
             (maximumSessions = 1 AND maximumSessions = 2))",
        ),
        ("((gameSessionName = 'a'))", "gameSessionName = 'a'"),
        (
            "(maximumSessions = 1 AND maximumSessions = 2) AND maximumSessions = 3",
            "(maximumSessions = 1 AND maximumSessions = 2) AND maximumSessions = 3",
        ),
        ("gameSessionProperties.'mode' = ''", "gameSessionProperties.mode = ''"),
        ("gameSessionProperties.'' = 'x'", "gameSessionProperties.'' = 'x'"),
    ];
    for (expression, canonical) in cases {
        assert_eq!(parse_filter(expression).unwrap().to_string(), canonical);
    }
    assert_eq!(
        parse_sort(" gameSessionProperties.'max level'  desc ")
            .unwrap()
            .to_string(),
        "gameSessionProperties.'max level' DESC"
    );
}

#[test]
fn errors_say_where_and_what_was_expected() {
    let cases = [
        (
            "maximumSessions x 5",
            "at character 16: expected a comparison operator (= <> < > <= >=) after 'maximumSessions', found 'x'",
        ),
        (
            "maximumSessions",
            "at character 15: expected a comparison operator (= <> < > <= >=) after 'maximumSessions', found the end of the expression",
        ),
        (
            "maximumSessions != 5",
            "at character 16: '!=' is not an operator; write '<>' for not equal",
        ),
        (
            "maximumSessions = 'five'",
            "at character 18: maximumSessions is compared only with an integer, found a string 'five'",
        ),
        (
            "maximumSessions = true",
            "at character 18: maximumSessions is compared only with an integer, found a boolean 'true'",
        ),
        (
            "gameSessionName = 5",
            "at character 18: gameSessionName is compared only with a single-quoted string, found an integer '5'",
        ),
        (
            "gameSessionName = ranked",
            "at character 18: expected a literal: a single-quoted string, an integer, true or false, found 'ranked'",
        ),
        (
            "hasAvailablePlayerSessions = 1",
            "at character 29: hasAvailablePlayerSessions is compared only with true or false, found an integer '1'",
        ),
        (
            "maximumSessions = 1.5",
            "at character 18: expected a literal: a single-quoted string, an integer, true or false, found '1.5'",
        ),
        (
            "maximumSessions = 9223372036854775808",
            "at character 18: '9223372036854775808' is outside the 64-bit integer range",
        ),
        (
            "gameSessionName = 'x",
            "at character 18: unterminated string: close it with ' (a quote inside a string is written '')",
        ),
        (
            "(maximumSessions = 1",
            "at character 20: expected AND, OR or ')' to close the '(' at 0, found the end of the expression",
        ),
        (
            "maximumSessions = 1)",
            "at character 19: expected AND, OR or the end of the expression (this ')' closes no '('), found ')'",
        ),
        (
            "maximumSessions = 1 maximumSessions = 2",
            "at character 20: expected AND, OR or the end of the expression, found 'maximumSessions'",
        ),
        (
            "maximumSessions = 1 AND",
            "at character 23: expected a comparison, NOT or '(', found the end of the expression",
        ),
        (
            "AND maximumSessions = 1",
            "at character 0: expected a comparison, NOT or '(', found 'AND'",
        ),
        (
            "NOT",
            "at character 3: expected a comparison, NOT or '(', found the end of the expression",
        ),
        ("()", "at character 1: expected a comparison, NOT or '(', found ')'"),
        (
            "5 = maximumSessions",
            "at character 0: expected a comparison, NOT or '(', found '5'",
        ),
        ("maximumSessions = 1 # x", "at character 20: unexpected character '#'"),
        (
            "gameSessionName = 'é' AND #",
            "at character 26: unexpected character '#'",
        ),
    ];
    for (expression, expected) in cases {
        assert_eq!(message(expression), expected, "{expression}");
    }
}

#[test]
fn the_first_error_by_position_is_reported() {
    // The unterminated string comes after the missing operator.
    assert_eq!(error("maximumSessions x 'abc").offset, 16);
    // A boolean's bad operator comes before its bad literal.
    assert_eq!(error("hasAvailablePlayerSessions < 99999999999999999999").offset, 27);
}

#[test]
fn integers_span_64_bits() {
    assert!(matches("creationTimeMillis > -9223372036854775808"));
    assert!(matches("creationTimeMillis < 9223372036854775807"));
    assert_eq!(
        error("creationTimeMillis > -9223372036854775809").kind,
        SearchErrorKind::IntegerOutOfRange("'-9223372036854775809'".into())
    );
}

#[test]
fn length_is_limited_in_characters() {
    let padded = |len: usize| format!("{:<len$}", "maximumSessions = 10");
    assert!(parse_filter(&padded(EXPRESSION_LEN_MAX)).is_ok());
    assert_eq!(
        parse_filter(&padded(EXPRESSION_LEN_MAX + 1)).unwrap_err(),
        SearchError {
            offset: EXPRESSION_LEN_MAX,
            kind: SearchErrorKind::TooLong(EXPRESSION_LEN_MAX + 1),
        }
    );
    // 1024 two-byte characters are 2048 bytes but within the limit.
    let wide = format!("gameSessionName = '{}'", "é".repeat(EXPRESSION_LEN_MAX - 20));
    assert_eq!(wide.chars().count(), EXPRESSION_LEN_MAX);
    assert!(parse_filter(&wide).is_ok());
    assert!(parse_sort(&format!("{:<1025}", "gameSessionId ASC")).is_err());
}

#[test]
fn nesting_is_limited() {
    let nested = |n: usize| format!("{}maximumSessions = 10{}", "(".repeat(n), ")".repeat(n));
    assert!(matches(&nested(PARENTHESES_DEPTH_MAX)));
    assert_eq!(
        parse_filter(&nested(PARENTHESES_DEPTH_MAX + 1)).unwrap_err(),
        SearchError {
            offset: PARENTHESES_DEPTH_MAX,
            kind: SearchErrorKind::TooDeep,
        }
    );
    // Siblings do not add up.
    let siblings = vec![nested(PARENTHESES_DEPTH_MAX); 3].join(" OR ");
    assert!(matches(&siblings));
    // A long run of NOTs is no nesting of parentheses and is read without recursion.
    let nots = format!("{}maximumSessions = 10", "NOT ".repeat(250));
    assert!(matches(&nots));
    assert_eq!(parse_filter(&nots).unwrap().to_string(), nots);
}

#[test]
fn sort_expressions() {
    for (expression, canonical) in [
        ("creationTimeMillis ASC", "creationTimeMillis ASC"),
        ("playerSessionCount desc", "playerSessionCount DESC"),
        ("maximumSessions Asc", "maximumSessions ASC"),
        ("gameSessionName DESC", "gameSessionName DESC"),
        ("gameSessionId asc", "gameSessionId ASC"),
        ("gameSessionProperties.mode ASC", "gameSessionProperties.mode ASC"),
        ("hasAvailablePlayerSessions DESC", "hasAvailablePlayerSessions DESC"),
    ] {
        assert_eq!(parse_sort(expression).unwrap().to_string(), canonical);
    }
    let errors = [
        (
            "creationTimeMillis",
            "at character 18: expected ASC or DESC after 'creationTimeMillis', found the end of the expression",
        ),
        (
            "creationTimeMillis UP",
            "at character 19: expected ASC or DESC after 'creationTimeMillis', found 'UP'",
        ),
        (
            "creationTimeMillis ASC, gameSessionId ASC",
            "at character 22: unexpected character ','",
        ),
        (
            "creationTimeMillis ASC gameSessionId",
            "at character 23: expected the end of the expression, found 'gameSessionId'",
        ),
        ("ASC", "at character 0: expected an operand, found 'ASC'"),
        (
            "createdAt ASC",
            "at character 0: unknown operand 'createdAt'; operands are gameSessionName, gameSessionId, gameSessionProperties.KEY, maximumSessions, playerSessionCount, creationTimeMillis, hasAvailablePlayerSessions",
        ),
        (
            "(creationTimeMillis ASC)",
            "at character 0: expected an operand, found '('",
        ),
    ];
    for (expression, expected) in errors {
        assert_eq!(
            parse_sort(expression).unwrap_err().to_string(),
            expected,
            "{expression}"
        );
    }
}

#[test]
fn sorting_puts_missing_values_last_and_breaks_ties_by_id() {
    let with = |id: &str, mode: Option<&str>, players: i64| Session {
        id: id.into(),
        properties: mode
            .map(|m| vec![("mode".to_owned(), m.to_owned())])
            .unwrap_or_default(),
        players,
        ..session()
    };
    let sessions = [
        with("d", None, 1),
        with("c", Some("b"), 10),
        with("b", Some("a"), 1),
        with("a", Some("b"), 3),
        with("e", None, 0),
    ];
    let order = |expression: &str| {
        let sort = parse_sort(expression).unwrap();
        let mut sorted = sessions.to_vec();
        sorted.sort_by(|a, b| sort.compare(a, b));
        sorted.into_iter().map(|s| s.id).collect::<Vec<_>>().concat()
    };
    assert_eq!(order("gameSessionProperties.mode ASC"), "bacde");
    assert_eq!(order("gameSessionProperties.mode DESC"), "acbde");
    assert_eq!(order("playerSessionCount ASC"), "ebdac");
    assert_eq!(order("playerSessionCount DESC"), "cabde");
    assert_eq!(order(""), "abcde");
    let mut full = session();
    full.id = "z".into();
    full.players = full.maximum;
    let sort = parse_sort("hasAvailablePlayerSessions ASC").unwrap();
    assert_eq!(
        sort.compare(&full, &session()),
        Ordering::Less,
        "false sorts before true"
    );
}

#[test]
fn errors_become_field_violations() {
    let mut v = crate::validate::Violations::new();
    assert!(check_filter(&mut v, "maximumSessions = 1").is_some());
    assert!(check_sort(&mut v, "").is_some());
    assert!(check_filter(&mut v, "maximumSessions x").is_none());
    assert!(check_sort(&mut v, "maximumSessions").is_none());
    let status = v.into_result().unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    let bad = status.get_details_bad_request().expect("field violations attached");
    let violations: Vec<_> = bad
        .field_violations
        .iter()
        .map(|f| (f.field.as_str(), f.description.as_str()))
        .collect();
    assert_eq!(
        violations,
        [
            (
                "filter_expression",
                "at character 16: expected a comparison operator (= <> < > <= >=) after 'maximumSessions', found 'x'"
            ),
            (
                "sort_expression",
                "at character 15: expected ASC or DESC after 'maximumSessions', found the end of the expression"
            ),
        ]
    );
}

fn hint(expression: &str) -> Option<IndexRange> {
    parse_filter(expression).unwrap().index_hint()
}

fn range(operand: IndexedOperand, min: Option<i64>, max: Option<i64>) -> Option<IndexRange> {
    Some(IndexRange { operand, min, max })
}

#[test]
fn index_hints_intersect_the_bounds_of_a_conjunction() {
    use IndexedOperand::*;
    assert_eq!(
        hint("playerSessionCount >= 2"),
        range(PlayerSessionCount, Some(2), None)
    );
    assert_eq!(
        hint("playerSessionCount > 2 AND playerSessionCount < 8 AND gameSessionName = 'x'"),
        range(PlayerSessionCount, Some(3), Some(7))
    );
    assert_eq!(hint("maximumSessions = 4"), range(MaximumSessions, Some(4), Some(4)));
    assert_eq!(
        hint("hasAvailablePlayerSessions = true"),
        range(AvailableSlots, Some(1), None)
    );
    assert_eq!(
        hint("hasAvailablePlayerSessions <> false"),
        range(AvailableSlots, Some(1), None)
    );
    assert_eq!(
        hint("NOT hasAvailablePlayerSessions = false"),
        range(AvailableSlots, Some(1), None)
    );
    // "No free slot" bounds nothing: a DENY_ALL session may have free slots.
    assert_eq!(hint("hasAvailablePlayerSessions = false"), None);
    // Through NOT by De Morgan.
    assert_eq!(
        hint("NOT creationTimeMillis < 100"),
        range(CreationTimeMillis, Some(100), None)
    );
    assert_eq!(
        hint("NOT (creationTimeMillis < 100 OR creationTimeMillis >= 200)"),
        range(CreationTimeMillis, Some(100), Some(199))
    );
    assert_eq!(
        hint("(creationTimeMillis >= 100 AND (gameSessionName = 'x' AND creationTimeMillis <= 300))"),
        range(CreationTimeMillis, Some(100), Some(300))
    );
}

#[test]
fn index_hints_prefer_the_tightest_range() {
    use IndexedOperand::*;
    // Both sides beat one side.
    assert_eq!(
        hint("creationTimeMillis > 5 AND playerSessionCount >= 1 AND playerSessionCount <= 3"),
        range(PlayerSessionCount, Some(1), Some(3))
    );
    // One value beats both sides.
    assert_eq!(
        hint("creationTimeMillis > 5 AND creationTimeMillis < 9 AND maximumSessions = 8"),
        range(MaximumSessions, Some(8), Some(8))
    );
    // Equally tight: creation time first, free slots last.
    assert_eq!(
        hint("hasAvailablePlayerSessions = true AND maximumSessions >= 2 AND creationTimeMillis > 5"),
        range(CreationTimeMillis, Some(6), None)
    );
    assert_eq!(
        hint("hasAvailablePlayerSessions = true AND maximumSessions >= 2"),
        range(MaximumSessions, Some(2), None)
    );
    // A contradiction reads nothing.
    let empty = hint("playerSessionCount > 5 AND playerSessionCount < 3 AND maximumSessions = 1").unwrap();
    assert_eq!(empty.operand, PlayerSessionCount);
    assert!(empty.is_empty());
    let beyond = hint("creationTimeMillis > 9223372036854775807").unwrap();
    assert!(beyond.is_empty() && !beyond.contains(i64::MAX));
}

#[test]
fn index_hints_need_a_conjunction_with_a_range() {
    for expression in [
        "playerSessionCount = 1 OR playerSessionCount = 2",
        "NOT (playerSessionCount >= 1 AND playerSessionCount <= 2)",
        "playerSessionCount <> 1",
        "NOT playerSessionCount = 1",
        "gameSessionName = 'x' AND gameSessionProperties.mode < 'z'",
        "creationTimeMillis >= -9223372036854775808",
    ] {
        assert_eq!(hint(expression), None, "{expression}");
    }
    assert_eq!(
        hint("NOT playerSessionCount <> 1"),
        range(IndexedOperand::PlayerSessionCount, Some(1), Some(1))
    );
}

#[test]
fn a_sort_on_an_indexed_operand_names_its_index_and_direction() {
    let order = |text: &str| parse_sort(text).unwrap().index_order();
    assert_eq!(order(""), Some((IndexedOperand::CreationTimeMillis, false)));
    assert_eq!(
        order("playerSessionCount DESC"),
        Some((IndexedOperand::PlayerSessionCount, true))
    );
    assert_eq!(
        order("maximumSessions asc"),
        Some((IndexedOperand::MaximumSessions, false))
    );
    assert_eq!(order("gameSessionName ASC"), None);
    assert_eq!(order("hasAvailablePlayerSessions DESC"), None);
    assert_eq!(order("gameSessionProperties.mode DESC"), None);
}
