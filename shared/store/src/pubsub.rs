//! Announcements between service replicas: plain pub/sub on a single node, sharded pub/sub on a cluster (the
//! channel's hash tag puts it on one node, so an announcement is not broadcast to every node). Announcements a
//! script makes are plain pub/sub everywhere (a script may reach no channel outside its slot), which a cluster
//! broadcasts to every node. Announcements are a fast path only: what they announce is always written as state
//! first, so one lost on a reconnect costs a delay, never a command.

use redis::aio::ConnectionManagerConfig;
use redis::cluster::ClusterClientBuilder;
use redis::{IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use crate::{RedisConfig, RedisMode, Store, StoreError};

impl Store {
    /// Announces `payload` on `channel`.
    pub async fn publish(&self, channel: &str, payload: &str) -> Result<(), StoreError> {
        let command = match self.mode() {
            RedisMode::Single => "PUBLISH",
            RedisMode::Cluster => "SPUBLISH",
        };
        let _: i64 = self.query(redis::cmd(command).arg(channel).arg(payload)).await?;
        Ok(())
    }
}

/// A plain subscription to `channel` on the first node configured, its messages sent to `tx`.
async fn plain(
    config: &RedisConfig,
    channel: &str,
    tx: mpsc::UnboundedSender<PushInfo>,
) -> Result<redis::aio::ConnectionManager, StoreError> {
    let url = config
        .urls
        .first()
        .ok_or_else(|| StoreError::Unexpected("no redis url configured".into()))?;
    let info = url.as_str().into_connection_info()?;
    let settings = info.redis_settings().clone().set_protocol(ProtocolVersion::RESP3);
    let client = redis::Client::open(info.set_redis_settings(settings))?;
    let manager_config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(Some(config.response_timeout))
        .set_push_sender(tx)
        .set_automatic_resubscription();
    let mut manager = client.get_connection_manager_with_config(manager_config).await?;
    manager.subscribe(channel).await?;
    Ok(manager)
}

/// A subscription to one channel. It resubscribes on its own after a reconnect.
pub struct Subscription {
    // Held for its lifetime: dropping the connection ends the subscription.
    _connection: Box<dyn std::any::Any + Send>,
    pushes: mpsc::UnboundedReceiver<PushInfo>,
}

impl Subscription {
    /// Subscribes to `channel`.
    pub async fn open(config: &RedisConfig, channel: &str) -> Result<Subscription, StoreError> {
        let (tx, pushes) = mpsc::unbounded_channel();
        let connection: Box<dyn std::any::Any + Send> = match config.mode {
            RedisMode::Single => Box::new(plain(config, channel, tx).await?),
            RedisMode::Cluster => {
                let client = ClusterClientBuilder::new(config.urls.iter().map(String::as_str))
                    .connection_timeout(config.connect_timeout)
                    .response_timeout(config.response_timeout)
                    .use_protocol(ProtocolVersion::RESP3)
                    .push_sender(tx)
                    .build()?;
                let mut connection = client.get_async_connection().await?;
                connection.ssubscribe(channel).await?;
                Box::new(connection)
            }
        };
        Ok(Subscription {
            _connection: connection,
            pushes,
        })
    }

    /// Subscribes to `channel` by plain pub/sub, for what scripts announce: on a cluster, on its first node, which
    /// hears every node's announcements.
    pub async fn open_broadcast(config: &RedisConfig, channel: &str) -> Result<Subscription, StoreError> {
        let (tx, pushes) = mpsc::unbounded_channel();
        let connection = plain(config, channel, tx).await?;
        Ok(Subscription {
            _connection: Box::new(connection),
            pushes,
        })
    }

    /// The next message's payload; `None` once the connection is gone for good.
    pub async fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            let push = self.pushes.recv().await?;
            if !matches!(push.kind, PushKind::Message | PushKind::SMessage) {
                continue;
            }
            // A message push carries [channel, payload].
            if let Some(Value::BulkString(payload)) = push.data.into_iter().nth(1) {
                return Some(payload);
            }
        }
    }
}
