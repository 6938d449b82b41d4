//! The states Berth stores, each a Rust enum with its stored name (the contract's name without its prefix, as the
//! Lua scripts write it) and its contract value. Conversions are exhaustive matches, so a state added to a contract
//! or to the store fails to compile until both sides know it: no name is built by string surgery, and none is
//! silently replaced by another.

use berth_proto::fleet::v1 as fleet;
use berth_proto::health::v1 as health;
use berth_proto::placement::v1 as placement;
use berth_proto::session::v1 as session;

/// Declares a stored enum: its variants with their stored names and contract values, and either the contract value
/// that stands for "not set" (which no stored value has; every other contract value is a variant) or, for an enum
/// that is only part of a contract's (`part of`), nothing more; or, for a state no contract shows (`stored only`),
/// its stored names alone.
macro_rules! stored {
    (
        $(#[$meta:meta])*
        $name:ident: $proto:ty, unset $unset:ident {
            $($(#[$vmeta:meta])* $variant:ident = $stored:literal => $contract:ident,)+
        }
    ) => {
        stored!(@contract $(#[$meta])* $name: $proto { $($(#[$vmeta])* $variant = $stored => $contract,)+ });

        impl $name {
            /// The value of a contract's; `None` for the value that means "not set".
            pub fn from_proto(value: $proto) -> Option<$name> {
                match value {
                    <$proto>::$unset => None,
                    $(<$proto>::$contract => Some($name::$variant),)+
                }
            }
        }
    };
    (
        $(#[$meta:meta])*
        $name:ident: part of $proto:ty {
            $($(#[$vmeta:meta])* $variant:ident = $stored:literal => $contract:ident,)+
        }
    ) => {
        stored!(@contract $(#[$meta])* $name: $proto { $($(#[$vmeta])* $variant = $stored => $contract,)+ });
    };
    (
        @contract $(#[$meta:meta])* $name:ident: $proto:ty {
            $($(#[$vmeta:meta])* $variant:ident = $stored:literal => $contract:ident,)+
        }
    ) => {
        stored!($(#[$meta])* $name: stored only { $($(#[$vmeta])* $variant = $stored,)+ });

        impl $name {
            /// The contract's value.
            pub fn to_proto(self) -> $proto {
                match self {
                    $($name::$variant => <$proto>::$contract,)+
                }
            }
        }
    };
    (
        $(#[$meta:meta])*
        $name:ident: stored only {
            $($(#[$vmeta:meta])* $variant:ident = $stored:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in the contract's order where it has one.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The stored name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $stored,)+
                }
            }

            /// The value a stored name stands for; `None` for a name the store never writes.
            pub fn parse(stored: &str) -> Option<$name> {
                match stored {
                    $($stored => Some($name::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

stored! {
    /// What a process says it is doing (PlayFab game state), as last reported.
    GameState: health::GameState, unset Unspecified {
        Initializing = "INITIALIZING" => Initializing,
        StandingBy = "STANDING_BY" => StandingBy,
        Active = "ACTIVE" => Active,
        Terminating = "TERMINATING" => Terminating,
        Terminated = "TERMINATED" => Terminated,
    }
}

stored! {
    /// Why a process is asked to end.
    TerminationReason: health::TerminationReason, unset Unspecified {
        ScaleIn = "SCALE_IN" => ScaleIn,
        Unhealthy = "UNHEALTHY" => Unhealthy,
        ReadyTimeout = "READY_TIMEOUT" => ReadyTimeout,
        GameSessionTerminated = "GAME_SESSION_TERMINATED" => GameSessionTerminated,
        InstanceInterrupted = "INSTANCE_INTERRUPTED" => InstanceInterrupted,
        InstanceDrained = "INSTANCE_DRAINED" => InstanceDrained,
        FleetDeleted = "FLEET_DELETED" => FleetDeleted,
        Maintenance = "MAINTENANCE" => Maintenance,
    }
}

stored! {
    /// How a process that did not end by itself was declared lost: the fleet event recorded, kept as its
    /// termination reason when it had not been asked to end.
    ProcessLoss: part of fleet::FleetEventCode {
        /// Not ready within the ready timeout.
        ReadyTimeout = "SERVER_PROCESS_READY_TIMEOUT" => ServerProcessReadyTimeout,
        /// UNHEALTHY for the failure threshold, or silent with its stream open.
        TerminatedUnhealthy = "SERVER_PROCESS_TERMINATED_UNHEALTHY" => ServerProcessTerminatedUnhealthy,
        /// Silent, its stream gone.
        Crashed = "SERVER_PROCESS_CRASHED" => ServerProcessCrashed,
        /// No ProcessEnding within the termination grace period.
        ForceTerminated = "SERVER_PROCESS_FORCE_TERMINATED" => ServerProcessForceTerminated,
    }
}

impl ProcessLoss {
    /// What a process lost this way is told, as the reason to end.
    pub fn termination_reason(self) -> TerminationReason {
        match self {
            ProcessLoss::ReadyTimeout => TerminationReason::ReadyTimeout,
            ProcessLoss::TerminatedUnhealthy | ProcessLoss::Crashed => TerminationReason::Unhealthy,
            // Only a process asked to end is forced, and it keeps the reason it was asked with.
            ProcessLoss::ForceTerminated => TerminationReason::ScaleIn,
        }
    }
}

/// Why a process must end, as its record keeps it: the reason it was asked with, or how it was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// Asked to end.
    Asked(TerminationReason),
    /// Declared lost without having been asked.
    Lost(ProcessLoss),
}

impl Termination {
    /// Reads a stored termination reason; `None` for a name the store never writes.
    pub fn parse(stored: &str) -> Option<Termination> {
        TerminationReason::parse(stored)
            .map(Termination::Asked)
            .or_else(|| ProcessLoss::parse(stored).map(Termination::Lost))
    }

    /// The reason the process is told.
    pub fn reason(self) -> TerminationReason {
        match self {
            Termination::Asked(reason) => reason,
            Termination::Lost(loss) => loss.termination_reason(),
        }
    }
}

stored! {
    /// Why a game session is in its status.
    GameSessionStatusReason: session::GameSessionStatusReason, unset Unspecified {
        EndedByServer = "ENDED_BY_SERVER" => EndedByServer,
        TriggeredOnProcessTerminate = "TRIGGERED_ON_PROCESS_TERMINATE" => TriggeredOnProcessTerminate,
        ForceTerminated = "FORCE_TERMINATED" => ForceTerminated,
        ActivationTimeout = "ACTIVATION_TIMEOUT" => ActivationTimeout,
        Interrupted = "INTERRUPTED" => Interrupted,
        FleetDeleted = "FLEET_DELETED" => FleetDeleted,
        ServerUnhealthy = "SERVER_UNHEALTHY" => ServerUnhealthy,
        ServerCrashed = "SERVER_CRASHED" => ServerCrashed,
        ServerRejected = "SERVER_REJECTED" => ServerRejected,
        PlacementAbandoned = "PLACEMENT_ABANDONED" => PlacementAbandoned,
    }
}

stored! {
    /// Where a game session placement is in its life.
    PlacementStatus: placement::PlacementStatus, unset Unspecified {
        /// Looking for a server, or waiting for the chosen one to activate the session.
        Pending = "PENDING" => Pending,
        /// The session is ACTIVE and the players' slots reserved. Final.
        Fulfilled = "FULFILLED" => Fulfilled,
        /// Stopped, or its queue deleted with force. Final.
        Cancelled = "CANCELLED" => Cancelled,
        /// No server found, or none activated the session, before the deadline. Final.
        TimedOut = "TIMED_OUT" => TimedOut,
        /// Cannot be completed. Final.
        Failed = "FAILED" => Failed,
    }
}

stored! {
    /// Why a placement is in its status.
    PlacementStatusReason: placement::PlacementStatusReason, unset Unspecified {
        Stopped = "STOPPED" => Stopped,
        QueueDeleted = "QUEUE_DELETED" => QueueDeleted,
        NoCapacity = "NO_CAPACITY" => NoCapacity,
        NoCandidate = "NO_CANDIDATE" => NoCandidate,
        ActivationFailed = "ACTIVATION_FAILED" => ActivationFailed,
        Unsatisfiable = "UNSATISFIABLE" => Unsatisfiable,
        Internal = "INTERNAL" => Internal,
    }
}

stored! {
    /// How a fulfilled placement's first choice fared.
    FirstChoiceOutcome: placement::FirstChoiceOutcome, unset Unspecified {
        Taken = "TAKEN" => Taken,
        OutOfCapacity = "OUT_OF_CAPACITY" => OutOfCapacity,
        NotViable = "NOT_VIABLE" => NotViable,
    }
}

stored! {
    /// What a placement event tells of.
    PlacementEventType: placement::PlacementEventType, unset Unspecified {
        Fulfilled = "FULFILLED" => Fulfilled,
        Cancelled = "CANCELLED" => Cancelled,
        TimedOut = "TIMED_OUT" => TimedOut,
        Failed = "FAILED" => Failed,
    }
}

stored! {
    /// What a queue counts per minute besides its placements' ends (the statuses above).
    QueueCount: stored only {
        /// A placement started: GetQueueMetrics' placements_started.
        Started = "STARTED",
    }
}

stored! {
    /// What a session event tells of.
    SessionEventType: session::SessionEventType, unset Unspecified {
        GameSessionActivated = "GAME_SESSION_ACTIVATED" => GameSessionActivated,
        GameSessionUpdated = "GAME_SESSION_UPDATED" => GameSessionUpdated,
        GameSessionTerminating = "GAME_SESSION_TERMINATING" => GameSessionTerminating,
        GameSessionTerminated = "GAME_SESSION_TERMINATED" => GameSessionTerminated,
        GameSessionError = "GAME_SESSION_ERROR" => GameSessionError,
        PlayerSessionTimedOut = "PLAYER_SESSION_TIMED_OUT" => PlayerSessionTimedOut,
    }
}

stored! {
    /// The state of the instance a game server runs on.
    InstanceStatus: health::InstanceStatus, unset Unspecified {
        /// Normal: claimed first.
        Active = "ACTIVE" => Active,
        /// Being drained: claimed last.
        Draining = "DRAINING" => Draining,
        /// About to be interrupted: never claimed.
        SpotTerminating = "SPOT_TERMINATING" => SpotTerminating,
    }
}

stored! {
    /// Whether a game server is free for a new game.
    Utilization: health::UtilizationStatus, unset Unspecified {
        /// Free: it may be claimed.
        Available = "AVAILABLE" => Available,
        /// Hosting a game, for good.
        Utilized = "UTILIZED" => Utilized,
    }
}

stored! {
    /// The health a process last reported.
    ProcessHealth: health::ProcessHealth, unset Unspecified {
        Healthy = "HEALTHY" => Healthy,
        Unhealthy = "UNHEALTHY" => Unhealthy,
    }
}

stored! {
    /// Where an instance a provisioner runs for a fleet is in its life, as its reconciler records it (shown by
    /// DescribeInstances; the counts of the contract group instances by what their servers do instead).
    InstanceState: fleet::InstanceState, unset Unspecified {
        /// Recorded before the provisioner was asked to launch it, so that a reconciler that dies in between leaves
        /// a record for the next one to find.
        Launching = "LAUNCHING" => Launching,
        /// The provisioner launched it.
        Running = "RUNNING" => Running,
        /// Its instance type is not viable: its servers are used last and it goes once it holds no protected
        /// gameplay and its replacements run.
        Draining = "DRAINING" => Draining,
        /// Being stopped: its processes were told to end, and it is killed when its deadline passes.
        Terminating = "TERMINATING" => Terminating,
    }
}

stored! {
    /// Where an SDK process is in its life (shown by DescribeInstances; the other contracts show it through other
    /// fields: utilization, the game sessions it hosts, fleet events).
    ProcessState: fleet::ProcessState, unset Unspecified {
        /// Registered, not ready yet.
        Initializing = "INITIALIZING" => Initializing,
        /// Ready and idle: in the pool.
        StandingBy = "STANDING_BY" => StandingBy,
        /// Hosting game sessions.
        Active = "ACTIVE" => Active,
        /// Told to end; ProcessEnding is due.
        Terminating = "TERMINATING" => Terminating,
        /// Declared lost; its record is kept a while so that a process coming back learns why.
        Lost = "LOST" => Lost,
    }
}

stored! {
    /// Where a game session is in its life.
    GameSessionStatus: session::GameSessionStatus, unset Unspecified {
        /// Placed on a process, which is starting it.
        Activating = "ACTIVATING" => Activating,
        /// Running; players may join.
        Active = "ACTIVE" => Active,
        /// Asked to end; its server is winding it down.
        Terminating = "TERMINATING" => Terminating,
        /// Ended. Final.
        Terminated = "TERMINATED" => Terminated,
        /// Ended because its server failed. Final.
        Error = "ERROR" => Error,
    }
}

stored! {
    /// Where a player session is in its life.
    PlayerSessionStatus: session::PlayerSessionStatus, unset Unspecified {
        /// The slot is held; the player has not connected yet.
        Reserved = "RESERVED" => Reserved,
        /// The game server accepted the player.
        Active = "ACTIVE" => Active,
        /// The player left, or the game session ended. Final.
        Completed = "COMPLETED" => Completed,
        /// The player never connected in time. Final.
        TimedOut = "TIMEDOUT" => Timedout,
    }
}

stored! {
    /// A process that ended by itself (ProcessEnding), as the fleet's events record it.
    ProcessEnd: part of fleet::FleetEventCode {
        Terminated = "SERVER_PROCESS_TERMINATED" => ServerProcessTerminated,
    }
}

stored! {
    /// Where a fleet is in its life.
    FleetStatus: fleet::FleetStatus, unset Unspecified {
        New = "NEW" => New,
        Activating = "ACTIVATING" => Activating,
        Active = "ACTIVE" => Active,
        Error = "ERROR" => Error,
        Deleting = "DELETING" => Deleting,
        Terminated = "TERMINATED" => Terminated,
    }
}

stored! {
    /// Where one location of a fleet is in its life (PlayFab build region).
    LocationStatus: fleet::LocationStatus, unset Unspecified {
        Initialized = "INITIALIZED" => Initialized,
        Deploying = "DEPLOYING" => Deploying,
        Deployed = "DEPLOYED" => Deployed,
        Unhealthy = "UNHEALTHY" => Unhealthy,
        Deleting = "DELETING" => Deleting,
    }
}

stored! {
    /// What a fleet event reports.
    FleetEventCode: fleet::FleetEventCode, unset Unspecified {
        FleetCreated = "FLEET_CREATED" => FleetCreated,
        FleetUpdated = "FLEET_UPDATED" => FleetUpdated,
        FleetActivating = "FLEET_ACTIVATING" => FleetActivating,
        FleetActive = "FLEET_ACTIVE" => FleetActive,
        FleetError = "FLEET_ERROR" => FleetError,
        FleetDeleting = "FLEET_DELETING" => FleetDeleting,
        FleetTerminated = "FLEET_TERMINATED" => FleetTerminated,
        LocationAdded = "LOCATION_ADDED" => LocationAdded,
        LocationDeploying = "LOCATION_DEPLOYING" => LocationDeploying,
        LocationDeployed = "LOCATION_DEPLOYED" => LocationDeployed,
        LocationUnhealthy = "LOCATION_UNHEALTHY" => LocationUnhealthy,
        LocationDeleting = "LOCATION_DELETING" => LocationDeleting,
        LocationRemoved = "LOCATION_REMOVED" => LocationRemoved,
        CapacityChanged = "CAPACITY_CHANGED" => CapacityChanged,
        ScalingAction = "SCALING_ACTION" => ScalingAction,
        ScalingPolicyFailed = "SCALING_POLICY_FAILED" => ScalingPolicyFailed,
        AutoscalingSuspended = "AUTOSCALING_SUSPENDED" => AutoscalingSuspended,
        AutoscalingResumed = "AUTOSCALING_RESUMED" => AutoscalingResumed,
        InstanceLaunched = "INSTANCE_LAUNCHED" => InstanceLaunched,
        InstanceLaunchFailed = "INSTANCE_LAUNCH_FAILED" => InstanceLaunchFailed,
        InstanceDraining = "INSTANCE_DRAINING" => InstanceDraining,
        InstanceInterrupted = "INSTANCE_INTERRUPTED" => InstanceInterrupted,
        InstanceTerminated = "INSTANCE_TERMINATED" => InstanceTerminated,
        InstanceTypeNotViable = "INSTANCE_TYPE_NOT_VIABLE" => InstanceTypeNotViable,
        InstanceTypeViable = "INSTANCE_TYPE_VIABLE" => InstanceTypeViable,
        ServerProcessRegistrationRejected = "SERVER_PROCESS_REGISTRATION_REJECTED" => ServerProcessRegistrationRejected,
        ServerProcessRegisterTimeout = "SERVER_PROCESS_REGISTER_TIMEOUT" => ServerProcessRegisterTimeout,
        ServerProcessReadyTimeout = "SERVER_PROCESS_READY_TIMEOUT" => ServerProcessReadyTimeout,
        ServerProcessTerminatedUnhealthy = "SERVER_PROCESS_TERMINATED_UNHEALTHY" => ServerProcessTerminatedUnhealthy,
        ServerProcessCrashed = "SERVER_PROCESS_CRASHED" => ServerProcessCrashed,
        ServerProcessForceTerminated = "SERVER_PROCESS_FORCE_TERMINATED" => ServerProcessForceTerminated,
        GameSessionActivationTimeout = "GAME_SESSION_ACTIVATION_TIMEOUT" => GameSessionActivationTimeout,
        ServerProcessTerminated = "SERVER_PROCESS_TERMINATED" => ServerProcessTerminated,
        InstanceStopFailed = "INSTANCE_STOP_FAILED" => InstanceStopFailed,
    }
}

/// Every name the store writes for a state, of every enum above: what a Lua function may compare a field with.
pub fn stored_names() -> Vec<&'static str> {
    let mut names = Vec::new();
    names.extend(GameState::ALL.iter().map(|v| v.as_str()));
    names.extend(TerminationReason::ALL.iter().map(|v| v.as_str()));
    names.extend(ProcessLoss::ALL.iter().map(|v| v.as_str()));
    names.extend(ProcessEnd::ALL.iter().map(|v| v.as_str()));
    names.extend(GameSessionStatusReason::ALL.iter().map(|v| v.as_str()));
    names.extend(SessionEventType::ALL.iter().map(|v| v.as_str()));
    names.extend(InstanceStatus::ALL.iter().map(|v| v.as_str()));
    names.extend(Utilization::ALL.iter().map(|v| v.as_str()));
    names.extend(ProcessHealth::ALL.iter().map(|v| v.as_str()));
    names.extend(ProcessState::ALL.iter().map(|v| v.as_str()));
    names.extend(InstanceState::ALL.iter().map(|v| v.as_str()));
    names.extend(GameSessionStatus::ALL.iter().map(|v| v.as_str()));
    names.extend(PlayerSessionStatus::ALL.iter().map(|v| v.as_str()));
    names.extend(FleetStatus::ALL.iter().map(|v| v.as_str()));
    names.extend(LocationStatus::ALL.iter().map(|v| v.as_str()));
    names.extend(FleetEventCode::ALL.iter().map(|v| v.as_str()));
    names.extend(PlacementStatus::ALL.iter().map(|v| v.as_str()));
    names.extend(PlacementStatusReason::ALL.iter().map(|v| v.as_str()));
    names.extend(FirstChoiceOutcome::ALL.iter().map(|v| v.as_str()));
    names.extend(PlacementEventType::ALL.iter().map(|v| v.as_str()));
    names.extend(QueueCount::ALL.iter().map(|v| v.as_str()));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored name of every value is the contract's name without its prefix, and both round-trip.
    fn round_trips<T: Copy + PartialEq + std::fmt::Debug>(
        all: &[T],
        prefix: &str,
        stored: impl Fn(T) -> &'static str,
        parse: impl Fn(&str) -> Option<T>,
        contract: impl Fn(T) -> &'static str,
    ) {
        for value in all {
            assert_eq!(parse(stored(*value)), Some(*value));
            assert_eq!(format!("{prefix}{}", stored(*value)), contract(*value));
        }
    }

    #[test]
    fn stored_names_are_the_contract_names_without_their_prefix() {
        round_trips(
            GameState::ALL,
            "GAME_STATE_",
            GameState::as_str,
            GameState::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            TerminationReason::ALL,
            "TERMINATION_REASON_",
            TerminationReason::as_str,
            TerminationReason::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            ProcessLoss::ALL,
            "FLEET_EVENT_CODE_",
            ProcessLoss::as_str,
            ProcessLoss::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            GameSessionStatusReason::ALL,
            "GAME_SESSION_STATUS_REASON_",
            GameSessionStatusReason::as_str,
            GameSessionStatusReason::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            SessionEventType::ALL,
            "SESSION_EVENT_TYPE_",
            SessionEventType::as_str,
            SessionEventType::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            FleetStatus::ALL,
            "FLEET_STATUS_",
            FleetStatus::as_str,
            FleetStatus::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            LocationStatus::ALL,
            "LOCATION_STATUS_",
            LocationStatus::as_str,
            LocationStatus::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            FleetEventCode::ALL,
            "FLEET_EVENT_CODE_",
            FleetEventCode::as_str,
            FleetEventCode::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            PlacementStatus::ALL,
            "PLACEMENT_STATUS_",
            PlacementStatus::as_str,
            PlacementStatus::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            PlacementStatusReason::ALL,
            "PLACEMENT_STATUS_REASON_",
            PlacementStatusReason::as_str,
            PlacementStatusReason::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            FirstChoiceOutcome::ALL,
            "FIRST_CHOICE_OUTCOME_",
            FirstChoiceOutcome::as_str,
            FirstChoiceOutcome::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            PlacementEventType::ALL,
            "PLACEMENT_EVENT_TYPE_",
            PlacementEventType::as_str,
            PlacementEventType::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            ProcessEnd::ALL,
            "FLEET_EVENT_CODE_",
            ProcessEnd::as_str,
            ProcessEnd::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            InstanceStatus::ALL,
            "INSTANCE_STATUS_",
            InstanceStatus::as_str,
            InstanceStatus::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            Utilization::ALL,
            "UTILIZATION_STATUS_",
            Utilization::as_str,
            Utilization::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            ProcessHealth::ALL,
            "PROCESS_HEALTH_",
            ProcessHealth::as_str,
            ProcessHealth::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            GameSessionStatus::ALL,
            "GAME_SESSION_STATUS_",
            GameSessionStatus::as_str,
            GameSessionStatus::parse,
            |v| v.to_proto().as_str_name(),
        );
        round_trips(
            PlayerSessionStatus::ALL,
            "PLAYER_SESSION_STATUS_",
            PlayerSessionStatus::as_str,
            PlayerSessionStatus::parse,
            |v| v.to_proto().as_str_name(),
        );
        for state in ProcessState::ALL {
            assert_eq!(ProcessState::parse(state.as_str()), Some(*state));
        }
        assert_eq!(GameState::from_proto(health::GameState::Unspecified), None);
    }

    #[test]
    fn a_lost_process_is_told_why_and_an_unknown_reason_is_not_guessed() {
        assert_eq!(
            Termination::parse("SERVER_PROCESS_CRASHED").map(Termination::reason),
            Some(TerminationReason::Unhealthy)
        );
        assert_eq!(
            Termination::parse("MAINTENANCE").map(Termination::reason),
            Some(TerminationReason::Maintenance)
        );
        assert_eq!(Termination::parse("SCALE_OUT"), None);
    }
}
