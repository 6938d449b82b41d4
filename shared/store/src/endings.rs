//! How processes end when they do not simply run on: a process ending by itself (ProcessEnding), one told to end
//! (TerminateGameServer, scale-in, or a game session terminated with it), one declared lost by the health monitor's
//! sweep or by its own heartbeats (UNHEALTHY for the fleet's threshold), and every process of a fleet or location
//! being deleted. Ending a process ends or closes its game sessions, so this area sits above both the
//! processes and the sessions areas, and its Lua (`endings/`) is the only Lua that reaches into both.

mod fleet_deletion;

use std::time::Duration;

use berth_domain::game_session::GameSessionRecord;
use berth_domain::stored::{ProcessHealth, TerminationReason};

use crate::keys::FleetKeys;
use crate::processes::{Heartbeat, HeartbeatSettings, ProcessRef, Routing, Timings, number, routed};
use crate::scripts::{Area, scripts};
use crate::sessions::routed_session;
use crate::{Store, StoreError, codec::unexpected};

pub use fleet_deletion::{
    Deleted, DeletionsFinished, LocationsDeleted, delete_fleet, delete_locations, finish_fleet_deletion,
};

/// This area's Lua: its helpers, which the areas above it may call too, and its functions.
pub(crate) const LUA: Area = Area {
    name: "endings",
    helpers: &[include_str!("endings/lib.lua")],
    functions: &[
        ("sweep_processes", include_str!("endings/sweep.lua"), false),
        ("heartbeats", include_str!("endings/heartbeats.lua"), false),
        (
            "terminate_game_session",
            include_str!("endings/terminate_session.lua"),
            false,
        ),
        ("terminate_process", include_str!("endings/terminate.lua"), false),
        ("process_ending", include_str!("endings/ending.lua"), false),
        ("delete_fleet", include_str!("endings/delete_fleet.lua"), false),
        (
            "delete_fleet_locations",
            include_str!("endings/delete_locations.lua"),
            false,
        ),
        (
            "finish_fleet_deletion",
            include_str!("endings/finish_deletion.lua"),
            false,
        ),
    ],
};

/// A process the monitor declared lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostProcess {
    /// Its id.
    pub game_server_id: String,
    /// The replica that held its stream.
    pub replica: String,
    /// The event recorded (SERVER_PROCESS_CRASHED, …_READY_TIMEOUT, …_FORCE_TERMINATED).
    pub code: String,
}

/// What a sweep of one fleet did and found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Swept {
    /// The processes it declared lost.
    pub lost: Vec<LostProcess>,
    /// Processes alive after it.
    pub alive: u64,
    /// Of those, how many report UNHEALTHY.
    pub unhealthy: u64,
}

/// A duration as the scripts take it, whole ms.
fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The health replica sweeping, and what its view of Redis allows it to judge: how long Redis has answered it for
/// the fleet (no sweep or heartbeat write failing), and how long the oldest heartbeat it holds but has not written
/// has waited.
#[derive(Clone, Copy, Debug)]
pub struct Judge<'a> {
    pub replica: &'a str,
    pub answered: Duration,
    pub lag: Duration,
}

/// Sweeps one fleet: every process whose ready or ProcessEnding deadline passed — and, once Redis has answered
/// `judge` for the fleet a whole heartbeat window of the fleet's, whose heartbeat deadline passed (for one whose
/// stream `judge` holds, longer ago than its lag) — is declared lost.
pub async fn sweep(
    store: &Store,
    fleet_id: &str,
    limit: u32,
    timings: &Timings,
    judge: Judge<'_>,
) -> Result<Swept, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().sweep_processes.for_fleet(&keys);
    call.arg(limit)
        .arg(timings.retention_ms)
        .arg(ms(judge.answered))
        .arg(judge.replica)
        .arg(ms(judge.lag));
    let raw: Vec<String> = store.invoke(&call).await?;
    let [alive, unhealthy, lost @ ..] = raw.as_slice() else {
        return Err(unexpected("sweep", "too short a reply"));
    };
    Ok(Swept {
        lost: lost
            .chunks_exact(3)
            .map(|lost| LostProcess {
                game_server_id: lost[0].clone(),
                replica: lost[1].clone(),
                code: lost[2].clone(),
            })
            .collect(),
        alive: number("sweep", alive)?,
        unhealthy: number("sweep", unhealthy)?,
    })
}

/// The outcome of telling a process to end.
#[derive(Debug, PartialEq, Eq)]
pub enum Terminating {
    /// It is terminating (now or already).
    Terminating(Routing),
    /// No such process.
    NotFound,
    /// It was declared lost already.
    Lost,
}

/// Tells a process to end within its fleet's termination grace, for `reason` (a TerminationReason name).
pub async fn terminate(
    store: &Store,
    fleet_id: &str,
    game_server_id: &str,
    reason: TerminationReason,
) -> Result<Terminating, StoreError> {
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().terminate_process.for_fleet(&keys);
    call.arg(game_server_id).arg(reason.as_str());
    match routed("terminate", store.invoke(&call).await?)? {
        (outcome, routing) if outcome == "TERMINATING" => Ok(Terminating::Terminating(routing)),
        (outcome, _) if outcome == "NOT_FOUND" => Ok(Terminating::NotFound),
        (outcome, _) if outcome == "LOST" => Ok(Terminating::Lost),
        (outcome, _) => Err(unexpected("terminate", outcome)),
    }
}

/// Ends a process on its ProcessEnding; `false` when the registration is not its live one.
pub async fn process_ending(store: &Store, process: &ProcessRef<'_>, reason: &str) -> Result<bool, StoreError> {
    let keys = FleetKeys::new(process.fleet_id);
    let mut call = scripts().process_ending.for_fleet(&keys);
    call.arg(process.game_server_id)
        .arg(process.registration_id)
        .arg(reason);
    let raw: Vec<String> = store.invoke(&call).await?;
    match raw.first().map(String::as_str) {
        Some("ENDED") => Ok(true),
        Some("UNKNOWN") => Ok(false),
        other => Err(unexpected("process_ending", format!("{other:?}"))),
    }
}

/// Most heartbeats one `record_heartbeats` call takes: the script hands its deadlines to one ZADD, and Lua can
/// pass a command at most ~8,000 arguments.
pub const HEARTBEATS_PER_CALL: usize = 1_000;

/// What recording one heartbeat found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Beaten {
    /// Recorded; the process's desired-state version.
    Version(u64),
    /// The process was declared lost, and must end.
    Lost,
    /// A newer stream resumed the registration; this one must close.
    Superseded,
}

/// The health replica writing heartbeats, and how long it has written this fleet's on time (none received
/// waiting past lateness, no write failing): the sweep gives the processes whose streams it holds time to be
/// written after it falls behind.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    pub replica: &'a str,
    pub kept_up: Duration,
}

/// Records a batch of one fleet's heartbeats (at most [`HEARTBEATS_PER_CALL`]) written by `writer`; for each, in
/// order, what it found, and the fleet's heartbeat settings as they stand (`None` when its record is gone).
pub async fn record_heartbeats(
    store: &Store,
    fleet_id: &str,
    heartbeats: &[Heartbeat],
    timings: &Timings,
    writer: Writer<'_>,
) -> Result<(Vec<Beaten>, Option<HeartbeatSettings>), StoreError> {
    if heartbeats.len() > HEARTBEATS_PER_CALL {
        return Err(unexpected(
            "heartbeats",
            format!(
                "{} heartbeats in one call, at most {HEARTBEATS_PER_CALL}",
                heartbeats.len()
            ),
        ));
    }
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().heartbeats.for_fleet(&keys);
    call.arg(timings.retention_ms)
        .arg(writer.replica)
        // A day is as good as forever against any heartbeat window, and keeps the figure exact in Lua's doubles.
        .arg(ms(writer.kept_up.min(Duration::from_secs(86_400))));
    for beat in heartbeats {
        call.arg(&*beat.game_server_id)
            .arg(&*beat.registration_id)
            .arg(beat.attach)
            .arg(
                if beat.healthy {
                    ProcessHealth::Healthy
                } else {
                    ProcessHealth::Unhealthy
                }
                .as_str(),
            )
            .arg(beat.game_state)
            .arg(beat.players);
    }
    let mut versions: Vec<i64> = store.invoke(&call).await?;
    let (Some(unhealthy_after), Some(interval_ms)) = (versions.pop(), versions.pop()) else {
        return Err(unexpected("heartbeats", "no heartbeat settings in the reply"));
    };
    if versions.len() != heartbeats.len() {
        return Err(unexpected(
            "heartbeats",
            format!("{} results for {}", versions.len(), heartbeats.len()),
        ));
    }
    let settings = (interval_ms > 0).then(|| HeartbeatSettings {
        interval_ms: u32::try_from(interval_ms).unwrap_or(u32::MAX),
        unhealthy_after: u32::try_from(unhealthy_after).unwrap_or(u32::MAX),
    });
    let beaten = versions
        .into_iter()
        .map(|version| match u64::try_from(version) {
            Ok(version) => Beaten::Version(version),
            Err(_) if version == -2 => Beaten::Superseded,
            Err(_) => Beaten::Lost,
        })
        .collect();
    Ok((beaten, settings))
}

/// The outcome of TerminateGameSession.
#[derive(Debug)]
pub enum Terminated {
    /// TERMINATED (forced) or TERMINATING (triggered); the hosting process (id, routing) is to be told.
    Done(Box<GameSessionRecord>, String, Routing),
    NotFound,
    /// It had ended already, as it stands.
    Ended(Box<GameSessionRecord>),
}

/// Ends a game session on request: at once (`force`) or through its server within the fleet's grace period.
pub async fn terminate_game_session(
    store: &Store,
    fleet_id: &str,
    game_session_id: &str,
    force: bool,
) -> Result<Terminated, StoreError> {
    const SCRIPT: &str = "terminate_game_session";
    let keys = FleetKeys::new(fleet_id);
    let mut call = scripts().terminate_game_session.for_fleet(&keys);
    call.arg(game_session_id).arg(if force { "FORCE" } else { "TRIGGER" });
    let raw: Vec<String> = store.invoke(&call).await?;
    let (outcome, routing, server, session) = routed_session(SCRIPT, &raw)?;
    let present =
        |session: Option<GameSessionRecord>| session.map(Box::new).ok_or_else(|| unexpected(SCRIPT, &outcome));
    Ok(match outcome.as_str() {
        "TERMINATED" | "TERMINATING" => Terminated::Done(present(session)?, server, routing),
        "ENDED" => Terminated::Ended(present(session)?),
        "NOT_FOUND" => Terminated::NotFound,
        other => return Err(unexpected(SCRIPT, other)),
    })
}
