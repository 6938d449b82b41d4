//! The health service's metrics, each declared once with its help text. Their names are part of the product:
//! dashboards and alerts read them.

use metrics::{counter, describe_counter, describe_gauge, gauge};

const SDK_STREAMS: &str = "berth_sdk_streams";
const HEARTBEATS: &str = "berth_heartbeats_total";
const UNWRITTEN: &str = "berth_heartbeats_answered_unwritten_total";
const PROCESSES_LOST: &str = "berth_processes_lost_total";
const HEALTHY: &str = "berth_healthy_server_processes";
const PERCENT_HEALTHY: &str = "berth_percent_healthy_server_processes";
const SDK_REGISTRATIONS: &str = "berth_sdk_registrations_total";
const STREAM_RESUMES: &str = "berth_stream_resumes_total";
const STALE_RESUMES: &str = "berth_stream_stale_resumes_total";
const REGISTRATIONS: &str = "berth_game_server_registrations_total";
const UTILIZED: &str = "berth_game_servers_utilized_total";
const WRITE_LAG: &str = "berth_heartbeat_write_lag_seconds";

/// Gives each metric its help text (once a recorder is installed).
pub(crate) fn describe() {
    describe_gauge!(SDK_STREAMS, "SDK streams this replica holds");
    describe_counter!(HEARTBEATS, "Heartbeats written");
    describe_counter!(
        UNWRITTEN,
        "Heartbeats answered UNAVAILABLE while heartbeat writes ran over 500 ms late (Redis slow or the replica behind)"
    );
    describe_counter!(PROCESSES_LOST, "Processes declared lost, by event code");
    describe_gauge!(HEALTHY, "Live SDK processes reporting HEALTHY, by fleet");
    describe_gauge!(
        PERCENT_HEALTHY,
        "Share of live SDK processes reporting HEALTHY, in percent, by fleet"
    );
    describe_counter!(SDK_REGISTRATIONS, "New registrations over the SDK stream");
    describe_counter!(STREAM_RESUMES, "Registrations resumed over a new SDK stream");
    describe_counter!(
        STALE_RESUMES,
        "Resumes refused because the registration already took a later try of its process"
    );
    describe_counter!(REGISTRATIONS, "Game servers registered through RegisterGameServer");
    describe_counter!(UTILIZED, "Game servers reported UTILIZED");
    describe_gauge!(
        WRITE_LAG,
        "How long the oldest heartbeat this replica is writing has waited; past 1 s it takes no new stream"
    );
}

/// A stream opened (`1.0`) or closed (`-1.0`) on this replica.
pub(crate) fn sdk_streams(change: f64) {
    gauge!(SDK_STREAMS).increment(change);
}

/// How far behind the heartbeat writer is, read at every sweep.
pub(crate) fn write_lag(behind: std::time::Duration) {
    gauge!(WRITE_LAG).set(behind.as_secs_f64());
}

/// Heartbeats written.
pub(crate) fn heartbeats(count: usize) {
    counter!(HEARTBEATS).increment(count as u64);
}

/// A heartbeat answered before its write ended.
pub(crate) fn answered_unwritten() {
    counter!(UNWRITTEN).increment(1);
}

/// A process declared lost with event `code`.
pub(crate) fn process_lost(code: &str) {
    counter!(PROCESSES_LOST, "code" => code.to_owned()).increment(1);
}

/// A fleet's live processes as a sweep found them.
pub(crate) fn fleet_health(fleet: &str, alive: u64, unhealthy: u64) {
    let healthy = alive.saturating_sub(unhealthy) as f64;
    gauge!(HEALTHY, "fleet" => fleet.to_owned()).set(healthy);
    let percent = if alive == 0 {
        100.0
    } else {
        100.0 * healthy / alive as f64
    };
    gauge!(PERCENT_HEALTHY, "fleet" => fleet.to_owned()).set(percent);
}

/// A process attached over the SDK stream, new or resumed.
pub(crate) fn attached(resumed: bool) {
    counter!(if resumed { STREAM_RESUMES } else { SDK_REGISTRATIONS }).increment(1);
}

/// A resume that reached Redis after a later try of its process, refused.
pub(crate) fn stale_resume() {
    counter!(STALE_RESUMES).increment(1);
}

/// A game server registered through RegisterGameServer.
pub(crate) fn registered() {
    counter!(REGISTRATIONS).increment(1);
}

/// A game server reported UTILIZED.
pub(crate) fn utilized() {
    counter!(UTILIZED).increment(1);
}
