//! Where a game session goes within a fleet: which servers can host it, and in what order they are tried. This is
//! the one statement of the rule. The Lua that takes a server atomically (`sessions/create.lua`) reads its
//! constants from here (generated into the library: the states that host, the tiers, how many candidates are looked
//! at) and walks the same two lists in the same order, and one table of cases ([`cases`]) is run against this module
//! and against the Lua on a real Redis, so that the two cannot drift apart.
//!
//! The order packs: servers already hosting sessions with a slot to spare come first (longest since they took one
//! first), so that whole instances empty out and can be scaled in; then the pool of ready servers, ACTIVE instances
//! before DRAINING ones, the longest idle first. A server on a SPOT_TERMINATING instance is never chosen.

use crate::stored::{InstanceStatus, ProcessHealth, ProcessState, Utilization};

/// The states of an SDK process that may take a game session: ready and idle, or hosting with a slot to spare.
pub const HOSTING_STATES: [ProcessState; 2] = [ProcessState::StandingBy, ProcessState::Active];
/// The pool's score of a server is `tier * TIER_SPAN + idle since (ms)`: every tier's scores above the one before.
pub const TIER_SPAN: u64 = 10_000_000_000_000;
/// Most candidates looked at in each list, read a batch at a time: a few hundred, never the whole fleet.
pub const CANDIDATES_LOOKED: usize = 500;
pub const CANDIDATES_BATCH: usize = 50;

/// The tier of a server's instance in the pool: ACTIVE 0, DRAINING 1; none for an instance that takes no new work.
pub fn tier(instance: InstanceStatus) -> Option<u64> {
    match instance {
        InstanceStatus::Active => Some(0),
        InstanceStatus::Draining => Some(1),
        InstanceStatus::SpotTerminating => None,
    }
}

/// What the choice reads of one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub id: String,
    /// Its state as an SDK process; `None` for a server registered without the SDK stream (FleetIQ).
    pub state: Option<ProcessState>,
    pub location: String,
    /// Most players a session on it may take, and most sessions it hosts at once.
    pub max_players: u32,
    pub max_sessions: u32,
    /// Sessions it hosts now: none unless it is ACTIVE (a process becomes ACTIVE with its first session and
    /// STANDING_BY again once its last ends), which lets the store count only an ACTIVE one's.
    pub sessions: u32,
    pub health: ProcessHealth,
    pub instance: InstanceStatus,
    pub utilization: Utilization,
    /// Claimed by a caller of ClaimGameServer, whose game it is to place.
    pub claimed: bool,
}

/// What a session asks of its server.
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a> {
    /// The location it must be in; `None` for any.
    pub location: Option<&'a str>,
    /// Its maximum players.
    pub players: u32,
    /// Servers an earlier attempt of its placement failed on, not to be tried again.
    pub avoid: &'a [String],
}

/// How a server fits a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// It can host it now.
    Hosts,
    /// It is a server that hosts sessions, but cannot host this one (too small, elsewhere, busy, unhealthy, …);
    /// `too_small` when it takes fewer players than asked.
    Not { too_small: bool },
    /// It is no server to look at for a session at all (not ready, ending, avoided, a FleetIQ server).
    Ignored,
}

/// How `server` fits `ask`.
pub fn fit(server: &Server, ask: &Ask<'_>) -> Fit {
    if ask.avoid.contains(&server.id) || !server.state.is_some_and(|state| HOSTING_STATES.contains(&state)) {
        return Fit::Ignored;
    }
    let too_small = server.max_players < ask.players;
    let hosts = !too_small
        && ask.location.is_none_or(|location| location == server.location)
        && server.health != ProcessHealth::Unhealthy
        && tier(server.instance).is_some()
        && server.utilization == Utilization::Available
        && !server.claimed
        && server.sessions < server.max_sessions;
    if hosts { Fit::Hosts } else { Fit::Not { too_small } }
}

/// Where a session goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Chosen {
    /// This server.
    Server(String),
    /// Every server looked at takes fewer players than asked: waiting for another would not help.
    TooSmall,
    /// None can host it now.
    NoServer,
}

/// The server for `ask`: the first that hosts it among the first [`CANDIDATES_LOOKED`] of `hosting` (servers
/// hosting sessions with a slot to spare, in the order they last took one), then of `pool` (ready servers, by their
/// pool score, of the tiers that take work).
pub fn choose(hosting: &[Server], pool: &[Server], ask: &Ask<'_>) -> Chosen {
    let (mut looked, mut too_small) = (0, 0);
    for list in [hosting, pool] {
        for server in list.iter().take(CANDIDATES_LOOKED) {
            match fit(server, ask) {
                Fit::Hosts => return Chosen::Server(server.id.clone()),
                Fit::Not { too_small: small } => {
                    looked += 1;
                    too_small += usize::from(small);
                }
                Fit::Ignored => {}
            }
        }
    }
    if looked > 0 && too_small == looked {
        Chosen::TooSmall
    } else {
        Chosen::NoServer
    }
}

/// One case of the rule: servers (each with where it stands: `Some(score)` in the hosting list, or in the pool),
/// what the session asks, and where it must go.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: &'static str,
    /// Each server, and whether it is listed among the hosting ones (else in the pool, at its tier), in list order.
    pub servers: Vec<(Server, bool)>,
    pub location: Option<&'static str>,
    pub players: u32,
    pub avoid: Vec<String>,
    pub chosen: Chosen,
}

impl Case {
    /// The ask of the case.
    pub fn ask(&self) -> Ask<'_> {
        Ask {
            location: self.location,
            players: self.players,
            avoid: &self.avoid,
        }
    }

    /// Its two lists, in order: the hosting servers as given, the pool by tier then as given.
    pub fn lists(&self) -> (Vec<Server>, Vec<Server>) {
        let hosting = self
            .servers
            .iter()
            .filter(|(_, h)| *h)
            .map(|(s, _)| s.clone())
            .collect();
        let mut pool: Vec<Server> = self
            .servers
            .iter()
            .filter(|(_, h)| !*h)
            .map(|(s, _)| s.clone())
            .collect();
        pool.retain(|server| tier(server.instance).is_some());
        pool.sort_by_key(|server| tier(server.instance));
        (hosting, pool)
    }
}

/// A ready, idle, healthy server of 10 players in location `home`, on an ACTIVE instance.
pub fn ready(id: &str) -> Server {
    Server {
        id: id.to_owned(),
        state: Some(ProcessState::StandingBy),
        location: "home".to_owned(),
        max_players: 10,
        max_sessions: 1,
        sessions: 0,
        health: ProcessHealth::Healthy,
        instance: InstanceStatus::Active,
        utilization: Utilization::Available,
        claimed: false,
    }
}

/// A server hosting `sessions` of at most `max_sessions`, otherwise as [`ready`].
pub fn hosting(id: &str, sessions: u32, max_sessions: u32) -> Server {
    Server {
        state: Some(ProcessState::Active),
        sessions,
        max_sessions,
        ..ready(id)
    }
}

/// The table of cases, run against [`choose`] and against the Lua.
pub fn cases() -> Vec<Case> {
    let case = |name, servers, players, chosen| Case {
        name,
        servers,
        location: None,
        players,
        avoid: Vec::new(),
        chosen,
    };
    let server = |id: &str| Chosen::Server(id.to_owned());
    vec![
        case("an idle server is taken", vec![(ready("a"), false)], 4, server("a")),
        case(
            "a server with a slot to spare packs before an idle one",
            vec![(ready("idle"), false), (hosting("busy", 1, 4), true)],
            4,
            server("busy"),
        ),
        case(
            "a full server is passed over",
            vec![(hosting("full", 2, 2), true), (ready("b"), false)],
            4,
            server("b"),
        ),
        case(
            "ACTIVE instances before DRAINING ones, whatever their idle time",
            vec![
                (
                    Server {
                        instance: InstanceStatus::Draining,
                        ..ready("draining")
                    },
                    false,
                ),
                (ready("active"), false),
            ],
            4,
            server("active"),
        ),
        case(
            "a DRAINING instance's server when no ACTIVE one is free",
            vec![(
                Server {
                    instance: InstanceStatus::Draining,
                    ..ready("draining")
                },
                false,
            )],
            4,
            server("draining"),
        ),
        case(
            "unhealthy, claimed and UTILIZED servers host nothing",
            vec![
                (
                    Server {
                        health: ProcessHealth::Unhealthy,
                        ..ready("sick")
                    },
                    false,
                ),
                (
                    Server {
                        claimed: true,
                        ..ready("claimed")
                    },
                    false,
                ),
                (
                    Server {
                        utilization: Utilization::Utilized,
                        ..ready("utilized")
                    },
                    false,
                ),
                (ready("well"), false),
            ],
            4,
            server("well"),
        ),
        case(
            "too small everywhere: waiting would not help",
            vec![
                (
                    Server {
                        max_players: 2,
                        ..ready("small")
                    },
                    false,
                ),
                (
                    Server {
                        max_players: 3,
                        ..hosting("small-busy", 1, 4)
                    },
                    true,
                ),
            ],
            4,
            Chosen::TooSmall,
        ),
        case(
            "one too small and one busy: a server may yet come",
            vec![
                (
                    Server {
                        max_players: 2,
                        ..ready("small")
                    },
                    false,
                ),
                (hosting("full", 1, 1), true),
            ],
            4,
            Chosen::NoServer,
        ),
        case(
            "a server not ready yet is not looked at",
            vec![(
                Server {
                    state: Some(ProcessState::Initializing),
                    ..ready("starting")
                },
                false,
            )],
            4,
            Chosen::NoServer,
        ),
        Case {
            location: Some("away"),
            ..case(
                "a location asked for: its servers only",
                vec![
                    (ready("home-1"), false),
                    (
                        Server {
                            location: "away".to_owned(),
                            ..ready("away-1")
                        },
                        false,
                    ),
                ],
                4,
                server("away-1"),
            )
        },
        Case {
            avoid: vec!["failed".to_owned()],
            ..case(
                "a server an earlier attempt failed on is not tried again",
                vec![(ready("failed"), false), (ready("other"), false)],
                4,
                server("other"),
            )
        },
        case("an empty fleet has no server", Vec::new(), 4, Chosen::NoServer),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_chooses_as_the_table_says() {
        for case in cases() {
            let (hosting, pool) = case.lists();
            assert_eq!(choose(&hosting, &pool, &case.ask()), case.chosen, "{}", case.name);
        }
    }

    #[test]
    fn a_spot_terminating_instance_is_never_chosen() {
        let doomed = Server {
            instance: InstanceStatus::SpotTerminating,
            ..ready("doomed")
        };
        let ask = Ask {
            location: None,
            players: 1,
            avoid: &[],
        };
        assert_eq!(fit(&doomed, &ask), Fit::Not { too_small: false });
        assert_eq!(choose(&[], &[doomed], &ask), Chosen::NoServer);
    }

    #[test]
    fn only_the_first_candidates_of_each_list_are_looked_at() {
        let mut pool: Vec<Server> = (0..CANDIDATES_LOOKED)
            .map(|i| hosting(&format!("full-{i}"), 1, 1))
            .collect();
        pool.push(ready("too-far"));
        let ask = Ask {
            location: None,
            players: 1,
            avoid: &[],
        };
        assert_eq!(choose(&[], &pool, &ask), Chosen::NoServer);
        assert_eq!(choose(&[], &pool[1..], &ask), Chosen::Server("too-far".to_owned()));
    }
}
