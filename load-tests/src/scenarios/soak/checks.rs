//! The soak's invariants, checked at its end against every answer the clients got, what the game servers were
//! told, and Redis itself. Each is a count of violations out of the cases it looked at, so that a check that looked
//! at nothing shows as such rather than as passed.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use berth_proto::placement::v1::PlacementStatus;
use berth_store::Store;
use berth_store::fleets::recent_fleet_events;
use berth_store::utilization::{Tally, UtilizationRead, read_utilization};
use berth_testkit::keys_without_expiry;
use berth_testkit::recount::{fields, recount};

use super::HOSTS;
use super::chaos::Faults;
use super::hosts::{Book, MAX_PLAYERS};
use super::traffic::Answers;
use crate::fleet;

/// One invariant: how many cases broke it, of how many looked at, and the first few that did.
pub struct Check {
    pub name: &'static str,
    pub violations: u64,
    pub of: u64,
    pub examples: Vec<String>,
}

/// How many broken cases a check names.
const EXAMPLES: usize = 5;

impl Check {
    fn new(name: &'static str) -> Check {
        Check {
            name,
            violations: 0,
            of: 0,
            examples: Vec::new(),
        }
    }

    fn case(&mut self, broken: Option<String>) {
        self.of += 1;
        if let Some(example) = broken {
            self.violations += 1;
            if self.examples.len() < EXAMPLES {
                self.examples.push(example);
            }
        }
    }
}

/// No server was answered to two claims at once: for each server, a claim answered to another token no earlier
/// than the claim timeout after the previous one was first asked for (which is when it was made, at the earliest).
pub fn claims_exclusive(answers: &Answers, claim_timeout: Duration) -> Check {
    let mut check = Check::new("no server claimed by two callers at once");
    let claims = answers.claims.lock().expect("answers lock");
    let mut by_server: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, claim) in claims.iter().enumerate() {
        by_server.entry(claim.server.as_str()).or_default().push(index);
    }
    for (server, mut indexes) in by_server {
        indexes.sort_by_key(|index| claims[*index].answered);
        check.case(None);
        for pair in indexes.windows(2) {
            let (earlier, later) = (&claims[pair[0]], &claims[pair[1]]);
            let overlapped = later.answered < earlier.first_sent + claim_timeout;
            check.case(overlapped.then(|| {
                format!(
                    "{server}: claimed under {} and, {:?} after that was asked, under {}",
                    earlier.token,
                    later.answered - earlier.first_sent,
                    later.token
                )
            }));
        }
    }
    check
}

/// Every acknowledged placement ended FULFILLED, TIMED_OUT, CANCELLED or FAILED, the watch saw it end exactly once,
/// its servers were told of one game session at most, and a FULFILLED one's session is the one they were told of.
pub fn placements(answers: &Answers, book: &Book) -> [Check; 3] {
    let mut ended = Check::new("every acknowledged placement ended, seen ending exactly once");
    let mut one_session = Check::new("no placement given two game sessions");
    let mut fulfilled = Check::new("a FULFILLED placement's session is the one its server hosted");
    let placements = answers.placements.lock().expect("answers lock");
    let ends = answers.placement_ends.lock().expect("answers lock");
    let placed = book.placed();
    for (id, (status, game_session_id)) in placements.iter() {
        let seen = ends.get(id).copied().unwrap_or(0);
        ended.case(match (status, seen) {
            (PlacementStatus::Pending | PlacementStatus::Unspecified, _) => Some(format!("{id} still {status:?}")),
            (_, 1) => None,
            (_, seen) => Some(format!("{id} {status:?}, its end seen {seen} times")),
        });
        let told = placed.get(id);
        one_session.case(told.filter(|told| told.len() > 1).map(|told| format!("{id}: {told:?}")));
        if *status == PlacementStatus::Fulfilled {
            let hosted = told.is_some_and(|told| told.contains(game_session_id));
            fulfilled.case((!hosted).then(|| format!("{id}: {game_session_id}, servers told {told:?}")));
        }
    }
    [ended, one_session, fulfilled]
}

/// No game session admitted more players than it holds, however many raced for it.
pub fn players_within_max(answers: &Answers) -> Check {
    let mut check = Check::new("no game session above its maximum players");
    for (game_session_id, admitted) in answers.players.lock().expect("answers lock").iter() {
        check.case(
            (admitted.len() > MAX_PLAYERS as usize).then(|| format!("{game_session_id}: {} players", admitted.len())),
        );
    }
    check
}

/// No game server that kept heartbeating was declared lost; each that was is shown with the last fault before it
/// heard so and what its fleet's events say of it.
pub async fn no_false_losses(store: &Store, book: &Book, servers: u64, faults: &Faults) -> Check {
    let mut check = Check::new("no heartbeating game server declared lost");
    let events = recent_fleet_events(store, HOSTS, 10_000).await.unwrap_or_default();
    for (at, id, words) in book.lost() {
        let cause = match faults.before(at) {
            Some((after, fault)) => format!("{:.1} s after the start of \"{fault}\"", after.as_secs_f64()),
            None => "before any fault".to_owned(),
        };
        let said: Vec<String> = events
            .iter()
            .filter(|event| event.game_server_id == id)
            .map(|event| format!("{} {}", event.code_name(), event.message))
            .collect();
        check.case(Some(format!(
            "{id}: {words} (heard {cause}; its events, newest first: {said:?})"
        )));
    }
    // Every server was looked at: those not in the book were never declared lost.
    check.of = servers;
    check
}

/// Each location's live counts equal a recount from the records, for every fleet: read, recounted and read again
/// until the two reads agree (the recount is not atomic with the fleet's changes), a few times at most.
pub async fn counts_match_recount(store: &Store, fleets: &[&str]) -> Check {
    let mut check = Check::new("utilization counts equal a recount from the records");
    for fleet_id in fleets {
        let compared = compare(store, fleet_id).await;
        if compared.is_empty() {
            check.case(Some(format!(
                "{fleet_id}: no two reads of its counts agreed, or none answered"
            )));
        }
        for (location, differences) in compared {
            check.case((!differences.is_empty()).then(|| format!("{fleet_id} {location}: {}", differences.join(", "))));
        }
    }
    check
}

async fn compare(store: &Store, fleet_id: &str) -> Vec<(String, Vec<String>)> {
    let mut last = Vec::new();
    for _ in 0..10 {
        let before = read(store, fleet_id).await;
        let recounted = recount(store, fleet_id, fleet::LOCATION, &[fleet::LOCATION], 0).await;
        if read(store, fleet_id).await != before {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        last = before
            .into_iter()
            .map(|(location, kept)| {
                let counted = recounted.get(&location).cloned().unwrap_or_default();
                let differences = fields(&kept)
                    .into_iter()
                    .zip(fields(&counted))
                    .filter(|((field, kept), (_, counted))| *field != "desired_instances" && kept != counted)
                    .map(|((field, kept), (_, counted))| format!("{field} kept {kept}, recounted {counted}"))
                    .collect();
                (location, differences)
            })
            .collect();
        if last
            .iter()
            .all(|(_, differences): &(String, Vec<String>)| differences.is_empty())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    last
}

async fn read(store: &Store, fleet_id: &str) -> Vec<(String, Tally)> {
    match read_utilization(store, fleet_id, "").await {
        Ok(UtilizationRead::Read(read)) => read.locations,
        _ => Vec::new(),
    }
}

/// Once every fleet and queue was deleted, their deletions finished and the retention passed, no key is left that
/// never expires: what remains of them is records still within their retention, expiring by themselves.
pub async fn no_orphans(store: &Store) -> Check {
    let mut check = Check::new("no key left without an expiry a retention after every fleet and queue was deleted");
    let Ok((looked_at, lasting)) = keys_without_expiry(store, "*").await else {
        check.case(Some("the key space could not be scanned".into()));
        return check;
    };
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    // The list of fleets the sweeps visit among them: it is gone once every fleet it named is.
    for key in &lasting {
        *kinds.entry(kind(key)).or_default() += 1;
    }
    check.of = looked_at;
    for (kind, count) in kinds {
        check.violations += count;
        check.examples.push(format!("{count} × {kind}"));
    }
    check
}

/// A key with the id it ends with left out: `berth:{f:x}:gs:…` for every server of fleet x.
fn kind(key: &str) -> String {
    let Some(tag_end) = key.find('}').map(|end| end + 1) else {
        return key.to_owned();
    };
    match key[tag_end..].trim_start_matches(':').split_once(':') {
        Some((kind, _)) => format!("{}:{kind}:…", &key[..tag_end]),
        None => key.to_owned(),
    }
}
