//! The session service's metrics, each declared once with its help text. Their names are part of the product:
//! dashboards and alerts read them.

use berth_store::sessions::SessionSweep;
use metrics::{counter, describe_counter};

const GAME_SESSIONS_CREATED: &str = "berth_game_sessions_created_total";
const PLAYER_SESSIONS_CREATED: &str = "berth_player_sessions_created_total";
const ACTIVATION_TIMED_OUT: &str = "berth_game_sessions_activation_timed_out_total";
const FORCE_TERMINATED: &str = "berth_game_sessions_force_terminated_total";
const PLAYER_SESSIONS_TIMED_OUT: &str = "berth_player_sessions_timed_out_total";
const EXPIRED: &str = "berth_game_sessions_expired_total";

/// Gives each metric its help text (once a recorder is installed).
pub(crate) fn describe() {
    describe_counter!(GAME_SESSIONS_CREATED, "Game sessions created");
    describe_counter!(PLAYER_SESSIONS_CREATED, "Player sessions created");
    describe_counter!(
        ACTIVATION_TIMED_OUT,
        "Game sessions ended TERMINATED (ACTIVATION_TIMEOUT): not activated in time"
    );
    describe_counter!(
        FORCE_TERMINATED,
        "TERMINATING game sessions forced to end after the termination grace period"
    );
    describe_counter!(
        PLAYER_SESSIONS_TIMED_OUT,
        "Player sessions ended TIMEDOUT: not accepted within the reservation timeout"
    );
    describe_counter!(EXPIRED, "Ended game sessions deleted after the retention");
}

/// A game session created.
pub(crate) fn game_session_created() {
    counter!(GAME_SESSIONS_CREATED).increment(1);
}

/// Player sessions created.
pub(crate) fn player_sessions_created(count: usize) {
    counter!(PLAYER_SESSIONS_CREATED).increment(count as u64);
}

/// What one sweep of one fleet did.
pub(crate) fn swept(swept: &SessionSweep) {
    for (name, count) in [
        (ACTIVATION_TIMED_OUT, swept.activation_timeouts),
        (FORCE_TERMINATED, swept.forced),
        (PLAYER_SESSIONS_TIMED_OUT, swept.player_timeouts),
        (EXPIRED, swept.deleted),
    ] {
        if count > 0 {
            counter!(name).increment(count);
        }
    }
}
