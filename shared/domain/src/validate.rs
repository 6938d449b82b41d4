//! Input checks against the documented limits of the contracts.
//!
//! A request is checked whole before anything changes, and every broken rule is reported at once as a
//! `google.rpc.BadRequest` field violation, so a client learns from one answer what to fix.

use std::collections::HashSet;

use berth_proto::common::v1::KeyValue;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// Collects the field violations of one request.
#[derive(Debug, Default)]
pub struct Violations {
    details: Vec<(String, String)>,
}

impl Violations {
    /// An empty collection.
    pub fn new() -> Violations {
        Violations::default()
    }

    /// Records that `field` breaks a rule, described for the client.
    pub fn add(&mut self, field: &str, description: impl Into<String>) {
        self.details.push((field.to_owned(), description.into()));
    }

    /// Checks an identifier: `min..=max` characters of `[A-Za-z0-9_.-]`.
    pub fn id(&mut self, field: &str, value: &str, min: usize, max: usize) {
        let len = value.chars().count();
        if len < min || len > max {
            self.add(field, format!("must be {min} to {max} characters long, got {len}"));
        } else if let Some(bad) = value.chars().find(|c| !is_id_char(*c)) {
            self.add(
                field,
                format!("may hold only A-Z a-z 0-9 _ . - characters, got {bad:?}"),
            );
        }
    }

    /// Checks a name (queue names, placement ids): `min..=max` characters of `[A-Za-z0-9_-]`, ids' characters but
    /// the dot.
    pub fn name(&mut self, field: &str, value: &str, min: usize, max: usize) {
        let len = value.chars().count();
        if len < min || len > max {
            self.add(field, format!("must be {min} to {max} characters long, got {len}"));
        } else if let Some(bad) = value
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-')))
        {
            self.add(field, format!("may hold only A-Z a-z 0-9 _ - characters, got {bad:?}"));
        }
    }

    /// Checks a token of printable ASCII (space to tilde): `min..=max` characters.
    pub fn printable(&mut self, field: &str, value: &str, min: usize, max: usize) {
        let len = value.chars().count();
        if len < min || len > max {
            self.add(field, format!("must be {min} to {max} characters long, got {len}"));
        } else if let Some(bad) = value.chars().find(|c| !(' '..='~').contains(c)) {
            self.add(field, format!("may hold only printable ASCII characters, got {bad:?}"));
        }
    }

    /// Checks free text: at most `max` characters.
    pub fn text(&mut self, field: &str, value: &str, max: usize) {
        let len = value.chars().count();
        if len > max {
            self.add(field, format!("must be at most {max} characters long, got {len}"));
        }
    }

    /// `Ok` when nothing was recorded, else `INVALID_ARGUMENT` with the violations attached: the first
    /// [`VIOLATIONS_SHOWN`], and past them one more saying how many were left out, so that the status always fits in
    /// a default client's 8 KiB of metadata.
    pub fn into_result(mut self) -> Result<(), Status> {
        if self.details.is_empty() {
            return Ok(());
        }
        let left_out = self.details.len().saturating_sub(VIOLATIONS_SHOWN);
        if left_out > 0 {
            self.details.truncate(VIOLATIONS_SHOWN);
            // No field: it speaks of the request as a whole.
            self.details.push((
                String::new(),
                format!("{left_out} more violation(s) of the same request were left out; fix these and ask again"),
            ));
        }
        let message = self
            .details
            .iter()
            .map(|(field, description)| format!("{field} {description}").trim_start().to_owned())
            .collect::<Vec<_>>()
            .join("; ");
        let mut details = ErrorDetails::new();
        for (field, description) in self.details {
            details.add_bad_request_violation(field, description);
        }
        Err(Status::with_error_details(Code::InvalidArgument, message, details))
    }
}

/// The most field violations a refusal lists one by one.
pub const VIOLATIONS_SHOWN: usize = 10;

/// `INVALID_ARGUMENT` for one broken rule, with its field violation: for checks that need state (a page token
/// redeemed, a cursor parsed) and so run after the request's own checks.
pub fn invalid(field: &str, description: impl Into<String>) -> Status {
    let mut v = Violations::new();
    v.add(field, description);
    v.into_result().expect_err("a violation was recorded")
}

/// Whether `c` may stand in an identifier (fleet, server, instance, location ids): `[A-Za-z0-9_.-]`. Braces in
/// particular never can, since ids go inside Redis hash tags.
pub fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// Checks a page size against the listing's largest (`max`), and returns the size to serve: `default` when the
/// request leaves it at 0.
pub fn check_page_size(v: &mut Violations, requested: u32, max: u32, default: u32) -> usize {
    if requested > max {
        v.add("page_size", format!("must be at most {max}, got {requested}"));
    }
    let size = if requested == 0 { default } else { requested };
    size.min(max) as usize
}

/// Entries of a list to check one by one, with their index. Entries past the limit are left out: the count
/// already refuses the request, and one violation per entry of a huge list would not fit in the status.
pub fn checked_entries<T>(entries: &[T], max: usize) -> impl Iterator<Item = (usize, &T)> {
    entries.iter().take(max).enumerate()
}

/// Checks that a list has `min..=max` entries.
pub fn check_count(v: &mut Violations, field: &str, count: usize, min: usize, max: usize) {
    if count > max {
        v.add(field, format!("must have at most {max} entries, got {count}"));
    } else if count < min {
        v.add(field, format!("must have {min} to {max} entries, got {count}"));
    }
}

/// Longest label key, in characters: room for Kubernetes-style prefixed keys, such as the `agones.dev/sdk-<key>` that
/// Agones' SetLabel writes (its key part may be 59 characters).
pub const LABEL_KEY_MAX: usize = 128;

/// Checks labels (`berth.common.v1.KeyValue`): at most `max`, keys unique and 1 to [`LABEL_KEY_MAX`] characters,
/// values at most 96.
pub fn check_labels(v: &mut Violations, field: &str, labels: &[KeyValue], max: usize) {
    check_pairs(v, field, labels, max, 96);
}

/// Checks key/value pairs keyed as labels are: at most `max`, keys unique and 1 to [`LABEL_KEY_MAX`] characters,
/// values at most `value_max`.
pub fn check_pairs(v: &mut Violations, field: &str, labels: &[KeyValue], max: usize, value_max: usize) {
    check_count(v, field, labels.len(), 0, max);
    let mut keys = HashSet::new();
    for (i, label) in checked_entries(labels, max) {
        let len = label.key.chars().count();
        if !(1..=LABEL_KEY_MAX).contains(&len) {
            v.add(
                &format!("{field}[{i}].key"),
                format!("must be 1 to {LABEL_KEY_MAX} characters long, got {len}"),
            );
        } else if !keys.insert(label.key.as_str()) {
            v.add(&format!("{field}[{i}].key"), format!("{:?} is given twice", label.key));
        }
        v.text(&format!("{field}[{i}].value"), &label.value, value_max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_label_key_may_hold_an_agones_prefix() {
        let label = |key: String| KeyValue { key, value: "v".into() };
        let mut fits = Violations::new();
        let agones = format!("agones.dev/sdk-{}", "k".repeat(59));
        check_labels(
            &mut fits,
            "labels",
            &[label(agones), label("k".repeat(LABEL_KEY_MAX))],
            64,
        );
        assert!(fits.into_result().is_ok());
        let mut too_long = Violations::new();
        check_labels(&mut too_long, "labels", &[label("k".repeat(LABEL_KEY_MAX + 1))], 64);
        let status = too_long.into_result().unwrap_err();
        assert!(status.message().contains("1 to 128 characters"), "{status:?}");
    }

    #[test]
    fn reports_every_broken_field_at_once() {
        let mut v = Violations::new();
        v.id("fleet_id", "", 1, 128);
        v.id("game_server_id", "a{b}", 3, 128);
        v.text("connection_info", &"x".repeat(513), 512);
        let status = v.into_result().unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        let bad = status.get_details_bad_request().expect("field violations attached");
        let fields: Vec<_> = bad.field_violations.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["fleet_id", "game_server_id", "connection_info"]);
        assert!(status.message().contains("at most 512"));
    }

    #[test]
    fn a_refusal_lists_the_first_violations_and_how_many_more() {
        let mut v = Violations::new();
        for i in 0..1001 {
            v.add(&format!("locations[{i}]"), "is listed twice");
        }
        let status = v.into_result().unwrap_err();
        let bad = status.get_details_bad_request().expect("field violations attached");
        assert_eq!(bad.field_violations.len(), VIOLATIONS_SHOWN + 1);
        assert_eq!(bad.field_violations[9].field, "locations[9]");
        let last = &bad.field_violations[VIOLATIONS_SHOWN];
        assert!(last.description.starts_with("991 more"), "{}", last.description);
        assert!(status.message().contains("991 more"), "{}", status.message());
        // What travels in the trailers: the message and the details, well within a default client's 8 KiB.
        assert!(status.message().len() + status.details().len() < 2048);
    }

    #[test]
    fn one_invalid_field_carries_its_violation() {
        let status = invalid("page_token", "was not issued by this call");
        assert_eq!(status.code(), Code::InvalidArgument);
        let bad = status.get_details_bad_request().expect("field violations attached");
        assert_eq!(bad.field_violations[0].field, "page_token");
    }

    proptest! {
        #[test]
        fn printable_tokens_are_space_to_tilde(value in "\\PC{0,70}|[\\x00-\\x7f]{0,70}") {
            let mut v = Violations::new();
            v.printable("request_id", &value, 1, 64);
            let len = value.chars().count();
            let valid = (1..=64).contains(&len) && value.chars().all(|c| (' '..='~').contains(&c));
            prop_assert_eq!(v.into_result().is_ok(), valid);
        }


        #[test]
        fn ids_accepted_exactly_when_in_the_alphabet_and_length(value in "\\PC{0,140}") {
            let mut v = Violations::new();
            v.id("id", &value, 3, 128);
            let len = value.chars().count();
            let valid = (3..=128).contains(&len) && value.chars().all(is_id_char);
            prop_assert_eq!(v.into_result().is_ok(), valid);
        }
    }
}
