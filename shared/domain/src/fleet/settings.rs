//! The settings of a fleet that the session and health scripts apply as they act: game-session activation and
//! player-session reservation deadlines, the creator limit, new-session protection, and its processes' heartbeat
//! and deadlines. They are resolved from its configuration and kept in its record as one field (`set`), which each
//! script reads in the step it acts in (`fleet_settings` in `fleets/lib.lua`). A script thus always applies the
//! fleet's current settings, with no cache to refresh and no extra round trip, and a change of the fleet reaches
//! every replica at once.

use berth_proto::fleet::v1 as pb;

use super::defaults;

/// A fleet's settings, in ms where a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FleetSettings {
    /// From a game session's creation to its activation.
    pub activation_ms: u64,
    /// From a player session's reservation to the player's arrival.
    pub reservation_ms: u64,
    /// Most game sessions one creator may create per period; 0 for no limit.
    pub creator_limit: u32,
    /// The creator limit's sliding period.
    pub creator_period_ms: u64,
    /// Whether a game session created without a protection policy of its own is protected from scale-in.
    pub protect_new_sessions: bool,
    /// How often a process sends a heartbeat.
    pub heartbeat_ms: u64,
    /// Heartbeat periods a process may be UNHEALTHY or silent.
    pub unhealthy_after: u32,
    /// From a process's registration to its ProcessReady.
    pub ready_ms: u64,
    /// From telling a process to terminate to its ProcessEnding.
    pub termination_grace_ms: u64,
    /// From ProcessEnding to the process's exit.
    pub exit_ms: u64,
}

impl FleetSettings {
    /// The settings of a fleet's configuration (its defaults already resolved; a missing part takes the contract's).
    pub fn of(config: &pb::Fleet) -> FleetSettings {
        let timeouts = config.process_timeouts.unwrap_or(pb::ProcessTimeouts {
            register_timeout_seconds: defaults::REGISTER_TIMEOUT_S,
            ready_timeout_seconds: defaults::READY_TIMEOUT_S,
            heartbeat_interval_ms: defaults::HEARTBEAT_INTERVAL_MS,
            unhealthy_after_missed_heartbeats: defaults::UNHEALTHY_AFTER,
            termination_grace_seconds: defaults::TERMINATION_GRACE_S,
            exit_timeout_seconds: defaults::EXIT_TIMEOUT_S,
            location_first_heartbeat_timeout_seconds: defaults::FIRST_HEARTBEAT_TIMEOUT_S,
            location_ready_timeout_seconds: defaults::LOCATION_READY_TIMEOUT_S,
        });
        let limit = config.resource_creation_limit_policy.unwrap_or_default();
        let ms = |seconds: u32| u64::from(seconds) * 1000;
        FleetSettings {
            activation_ms: ms(nonzero(
                config.game_session_activation_timeout_seconds,
                defaults::ACTIVATION_TIMEOUT_S,
            )),
            reservation_ms: ms(nonzero(
                config.player_session_reservation_timeout_seconds,
                defaults::RESERVATION_TIMEOUT_S,
            )),
            creator_limit: limit.new_game_sessions_per_creator,
            creator_period_ms: u64::from(limit.policy_period_minutes) * 60_000,
            protect_new_sessions: config.new_game_session_protection_policy() == pb::ProtectionPolicy::FullProtection,
            heartbeat_ms: u64::from(nonzero(timeouts.heartbeat_interval_ms, defaults::HEARTBEAT_INTERVAL_MS)),
            unhealthy_after: nonzero(timeouts.unhealthy_after_missed_heartbeats, defaults::UNHEALTHY_AFTER),
            ready_ms: ms(nonzero(timeouts.ready_timeout_seconds, defaults::READY_TIMEOUT_S)),
            termination_grace_ms: ms(nonzero(
                timeouts.termination_grace_seconds,
                defaults::TERMINATION_GRACE_S,
            )),
            exit_ms: ms(nonzero(timeouts.exit_timeout_seconds, defaults::EXIT_TIMEOUT_S)),
        }
    }

    /// How long a process may go without a heartbeat (or stay UNHEALTHY) before it is declared lost.
    pub fn heartbeat_window_ms(&self) -> u64 {
        self.heartbeat_ms * u64::from(self.unhealthy_after)
    }

    /// The record's form: the numbers in the order `fleet_settings` (fleets/lib.lua) reads them, space-separated.
    pub fn encode(&self) -> String {
        [
            self.activation_ms,
            self.reservation_ms,
            u64::from(self.creator_limit),
            self.creator_period_ms,
            u64::from(self.protect_new_sessions),
            self.heartbeat_ms,
            u64::from(self.unhealthy_after),
            self.ready_ms,
            self.termination_grace_ms,
            self.exit_ms,
        ]
        .map(|n| n.to_string())
        .join(" ")
    }

    /// Reads the record's form back; `None` when it is not one.
    pub fn decode(text: &str) -> Option<FleetSettings> {
        let numbers: Vec<u64> = text.split(' ').map(str::parse).collect::<Result<_, _>>().ok()?;
        let [
            activation,
            reservation,
            limit,
            period,
            protect,
            heartbeat,
            unhealthy,
            ready,
            grace,
            exit,
        ] = numbers[..]
        else {
            return None;
        };
        Some(FleetSettings {
            activation_ms: activation,
            reservation_ms: reservation,
            creator_limit: u32::try_from(limit).ok()?,
            creator_period_ms: period,
            protect_new_sessions: protect == 1,
            heartbeat_ms: heartbeat,
            unhealthy_after: u32::try_from(unhealthy).ok()?,
            ready_ms: ready,
            termination_grace_ms: grace,
            exit_ms: exit,
        })
    }
}

/// `value`, or `default` when it is 0 (the contract's "unset").
fn nonzero(value: u32, default: u32) -> u32 {
    if value == 0 { default } else { value }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unset_configuration_takes_the_contract_defaults() {
        let settings = FleetSettings::of(&pb::Fleet::default());
        assert_eq!(settings.activation_ms, 300_000);
        assert_eq!(settings.reservation_ms, 60_000);
        assert_eq!((settings.creator_limit, settings.creator_period_ms), (0, 0));
        assert!(!settings.protect_new_sessions);
        assert_eq!((settings.heartbeat_ms, settings.unhealthy_after), (5000, 3));
        assert_eq!(settings.heartbeat_window_ms(), 15_000);
        assert_eq!(
            (settings.ready_ms, settings.termination_grace_ms, settings.exit_ms),
            (300_000, 300_000, 30_000)
        );
    }

    #[test]
    fn settings_round_trip_through_the_record() {
        let config = pb::Fleet {
            game_session_activation_timeout_seconds: 20,
            player_session_reservation_timeout_seconds: 15,
            new_game_session_protection_policy: pb::ProtectionPolicy::FullProtection as i32,
            resource_creation_limit_policy: Some(pb::ResourceCreationLimitPolicy {
                new_game_sessions_per_creator: 3,
                policy_period_minutes: 2,
            }),
            process_timeouts: Some(pb::ProcessTimeouts {
                heartbeat_interval_ms: 1000,
                unhealthy_after_missed_heartbeats: 2,
                ready_timeout_seconds: 10,
                ..Default::default()
            }),
            ..Default::default()
        };
        let settings = FleetSettings::of(&config);
        assert_eq!(settings.encode(), "20000 15000 3 120000 1 1000 2 10000 300000 30000");
        assert_eq!(FleetSettings::decode(&settings.encode()), Some(settings));
        assert_eq!(FleetSettings::decode("1 2 3"), None);
        assert_eq!(FleetSettings::decode(""), None);
    }
}
