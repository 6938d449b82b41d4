//! Claims and allocations are made apart from the call that asks for them. tonic drops a handler when its caller
//! gives up (a deadline, a reset), and a server taken in that moment must go back to the pool rather than wait out
//! a claim timeout for nobody. The server's process is told of it only once the caller has the answer: told first,
//! it would make the claim its own (UTILIZED), and one that nobody heard of could no longer be handed back.

use std::future::Future;
use tracing::Instrument;

use berth_store::{Store, pool, processes};
use tonic::Status;

/// A server a claim or an allocation took.
pub struct Taken {
    pub fleet_id: String,
    pub game_server_id: String,
    /// The claim to hand back should nobody hear of it; `None` when it was taken without one (an allocation from
    /// ALLOCATED) or under an idempotency token (which a retry may be answered with).
    pub claim_id: Option<String>,
    /// The health replica holding its process's stream ('' for none).
    pub replica: String,
}

/// Runs `making` on a task of its own and answers what it made. What it took (`Some` beside the answer) is
/// announced to its process once the answer is handed over, or handed back when the caller is gone.
pub async fn made_apart<T, E>(
    store: Store,
    making: impl Future<Output = Result<Option<(T, Option<Taken>)>, E>> + Send + 'static,
) -> Result<Result<Option<T>, E>, Status>
where
    T: Send + 'static,
    E: Send + 'static,
{
    let (answer, answered) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (made, taken) = match making.await {
            Ok(Some((made, taken))) => (made, taken),
            Ok(None) => {
                let _ = answer.send(Ok(None));
                return;
            }
            Err(err) => {
                let _ = answer.send(Err(err));
                return;
            }
        };
        let heard = answer.send(Ok(Some(made))).is_ok();
        let Some(taken) = taken else { return };
        if heard {
            processes::announce_change(&store, taken.replica, &taken.fleet_id, &taken.game_server_id);
        } else if let Some(claim_id) = &taken.claim_id {
            let released = pool::release_claim(&store, &taken.fleet_id, &taken.game_server_id, claim_id).await;
            if let Err(err) = released {
                tracing::warn!(fleet = %taken.fleet_id, error = %err, "a claim nobody heard of lapses with its timeout");
            }
        }
    }.in_current_span());
    answered
        .await
        .map_err(|_| Status::internal("nothing was taken: the task making it ended"))
}
