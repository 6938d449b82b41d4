//! Page tokens and request digests. A page token carries where the next page starts and a digest of the
//! request's selection, so a token handed back with other filters is refused instead of silently paging
//! something else.

use crate::validate::invalid;
use tonic::Status;

/// FNV-1a, 64 bits: stable across builds and replicas, unlike std's hasher, which matters for tokens that one
/// replica issues and another reads.
pub fn digest(parts: &[&[u8]]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.iter().chain(std::iter::once(&0xff)) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// A page token for `position` under a selection digest.
pub fn issue(selection: &str, position: Option<String>) -> String {
    position
        .map(|position| format!("{selection}.{position}"))
        .unwrap_or_default()
}

/// The position a page token holds, checked against the selection it was issued for; `None` for the first
/// page.
pub fn redeem<'t>(selection: &str, token: &'t str) -> Result<Option<&'t str>, Status> {
    if token.is_empty() {
        return Ok(None);
    }
    match token.split_once('.') {
        Some((issued, position)) if issued == selection && !position.is_empty() => Ok(Some(position)),
        _ => Err(invalid(
            "page_token",
            "was not issued by this call with the same selection; start again without it",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_pages_only_the_selection_it_was_issued_for() {
        let mine = digest(&[b"fleet-a", b"ACTIVE"]);
        let other = digest(&[b"fleet-a", b"ERROR"]);
        assert_ne!(mine, other);
        assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
        let token = issue(&mine, Some("1700000000000 f/gsess-1".into()));
        assert_eq!(redeem(&mine, &token).unwrap(), Some("1700000000000 f/gsess-1"));
        assert!(redeem(&other, &token).is_err());
        assert!(redeem(&mine, "garbage").is_err());
        assert_eq!(redeem(&mine, "").unwrap(), None);
        assert_eq!(issue(&mine, None), "");
    }
}
