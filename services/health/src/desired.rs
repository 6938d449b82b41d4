//! A process's desired state as the contract speaks it: what the store keeps (a version, a termination, the open
//! game sessions as placed) turned into the DesiredState of acks and into the pushes of a stream.

use berth_domain::game_server::timestamp;
use berth_proto::health::v1 as pb;
use berth_store::processes::Desired;

/// The terminate push of a desired state, if it asks for one.
pub(crate) fn terminate_process(desired: &Desired) -> Option<pb::TerminateProcess> {
    desired.termination.as_ref().map(|termination| pb::TerminateProcess {
        reason: termination
            .reason
            .map_or(pb::TerminationReason::Unspecified, |reason| reason.reason().to_proto()) as i32,
        termination_deadline: Some(timestamp(termination.deadline_ms)),
        force: termination.force,
        state_version: desired.version,
    })
}

/// The open game sessions of a desired state, by id, each with the player sessions reserved in it.
pub(crate) fn assignments(desired: &Desired) -> Vec<(String, pb::GameSessionAssignment)> {
    desired
        .sessions
        .iter()
        .map(|hosted| {
            let assignment = pb::GameSessionAssignment {
                game_session: Some(hosted.session.clone().into()),
                player_sessions: hosted.players.iter().cloned().map(Into::into).collect(),
            };
            (hosted.session.game_session_id.clone(), assignment)
        })
        .collect()
}

/// The whole desired state, for an ack or a registration.
pub(crate) fn desired_state(desired: &Desired) -> pb::DesiredState {
    let termination = terminate_process(desired);
    let game_sessions: Vec<_> = assignments(desired)
        .into_iter()
        .map(|(_, assignment)| assignment)
        .collect();
    let operation = if termination.is_some() {
        pb::ProcessOperation::Terminate
    } else if !game_sessions.is_empty() {
        pb::ProcessOperation::Active
    } else {
        pb::ProcessOperation::Continue
    };
    pb::DesiredState {
        version: desired.version,
        operation: operation as i32,
        game_sessions,
        termination,
    }
}
