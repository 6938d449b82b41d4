//! The decision for one location: the largest standing proposal wins, clamped to the location's bounds; an increase
//! applies at once, a decrease only down to the highest winning value of the stabilisation window, so that a fleet
//! does not flap; and never below the instances hosting games now.

/// A winning value and when it won, ms.
pub type Won = (i64, u32);

/// A decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The desired count to set; the current one when nothing changes.
    pub desired: u32,
    /// The proposal that won (a policy's name, or "standby"), and what it proposed.
    pub winner: (String, u32),
    /// The winning values of the stabilisation window that may still be its highest, this one last: each lower than
    /// the one before.
    pub history: Vec<Won>,
}

/// What a location's autoscaling knows when it decides.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub minimum: u32,
    pub maximum: u32,
    pub desired: u32,
    /// Instances hosting game sessions now: a decrease stops there.
    pub busy: u32,
    /// The largest scale-in stabilisation of the location's policies, ms.
    pub stabilization_ms: i64,
}

/// Decides from the standing proposals (name, instances); `None` when there is none, which leaves the desired
/// count as it is. `history` is what the last decision kept.
pub fn decide(proposals: &[(String, u32)], bounds: &Bounds, history: &[Won], now_ms: i64) -> Option<Decision> {
    // The largest wins; between equals, the first named.
    let (name, proposed) = proposals
        .iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))?
        .clone();
    let wanted = proposed.clamp(bounds.minimum, bounds.maximum.max(bounds.minimum));
    let since = now_ms - bounds.stabilization_ms;
    // A value no higher than a later one can never be the window's highest again: only a falling staircase is kept,
    // its first step the highest.
    let mut kept: Vec<Won> = history
        .iter()
        .copied()
        .filter(|(at, value)| *at > since && *value > wanted)
        .collect();
    kept.push((now_ms, wanted));
    let desired = if wanted >= bounds.desired {
        wanted
    } else {
        kept[0].1.max(bounds.busy.min(bounds.maximum)).min(bounds.desired)
    };
    Some(Decision {
        desired,
        winner: (name, proposed),
        history: kept,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bounds(desired: u32, busy: u32, stabilization_ms: i64) -> Bounds {
        Bounds {
            minimum: 1,
            maximum: 50,
            desired,
            busy,
            stabilization_ms,
        }
    }

    fn proposals(values: &[(&str, u32)]) -> Vec<(String, u32)> {
        values.iter().map(|(name, n)| (name.to_string(), *n)).collect()
    }

    #[test]
    fn the_largest_proposal_wins_clamped_and_increases_at_once() {
        let decided = decide(
            &proposals(&[("a", 4), ("b", 9), ("c", 9)]),
            &bounds(3, 0, 300_000),
            &[],
            0,
        )
        .unwrap();
        assert_eq!(decided.desired, 9);
        assert_eq!(decided.winner, ("b".to_owned(), 9), "between equals, the first named");
        let capped = decide(&proposals(&[("a", 80)]), &bounds(3, 0, 300_000), &[], 0).unwrap();
        assert_eq!((capped.desired, capped.winner.1), (50, 80));
        let floored = decide(&proposals(&[("a", 0)]), &bounds(0, 0, 0), &[], 0).unwrap();
        assert_eq!(floored.desired, 1, "never below the minimum");
        assert_eq!(decide(&[], &bounds(3, 0, 0), &[], 0), None);
    }

    #[test]
    fn a_decrease_waits_out_the_stabilization_window_and_stops_at_the_busy_instances() {
        let spike = decide(&proposals(&[("a", 20)]), &bounds(5, 0, 300_000), &[], 0).unwrap();
        let quiet = decide(
            &proposals(&[("a", 2)]),
            &bounds(20, 0, 300_000),
            &spike.history,
            100_000,
        )
        .unwrap();
        assert_eq!(quiet.desired, 20, "the spike is within the window");
        let later = decide(
            &proposals(&[("a", 2)]),
            &bounds(20, 0, 300_000),
            &quiet.history,
            300_001,
        )
        .unwrap();
        assert_eq!(later.desired, 2);
        let busy = decide(
            &proposals(&[("a", 2)]),
            &bounds(20, 7, 300_000),
            &quiet.history,
            300_001,
        )
        .unwrap();
        assert_eq!(busy.desired, 7, "instances hosting games are needed");
    }

    proptest! {
        /// The kept staircase answers as the whole history would: the decrease stops at the highest value won
        /// within the window, and an increase is never held back.
        #[test]
        fn the_decision_matches_a_recount_of_the_whole_history(
            steps in prop::collection::vec((0i64..120_000, 0u32..60, 0u32..10), 1..60),
            stabilization_ms in 0i64..600_000,
        ) {
            let (mut now, mut desired, mut kept) = (0i64, 1u32, Vec::new());
            let mut all: Vec<(i64, u32)> = Vec::new();
            for (gap, proposed, busy) in steps {
                now += gap;
                let at = Bounds { desired, busy, ..bounds(desired, busy, stabilization_ms) };
                let decided = decide(&proposals(&[("p", proposed)]), &at, &kept, now).unwrap();
                let wanted = proposed.clamp(1, 50);
                all.push((now, wanted));
                // The window is (now - stabilization, now], and the proposal of now is in it even when it is empty.
                let window = all.iter().filter(|(t, _)| *t > now - stabilization_ms).map(|(_, v)| *v);
                let highest = window.max().unwrap_or(wanted).max(wanted);
                let expected = if wanted >= desired { wanted } else { highest.max(busy).min(desired) };
                prop_assert_eq!(decided.desired, expected);
                prop_assert!((1..=50).contains(&decided.desired));
                prop_assert!(decided.history.windows(2).all(|w| w[0].1 > w[1].1 && w[0].0 <= w[1].0));
                desired = decided.desired;
                kept = decided.history;
            }
        }
    }
}
