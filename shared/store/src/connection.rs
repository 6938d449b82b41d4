//! Connections to Redis, a single node or a cluster as configured.
//!
//! Both kinds are multiplexed: one connection carries many requests in flight, so no request opens its own. A
//! handful of them are used round-robin so that a busy service is not held back by one socket's driver task.
//! They are opened on first use, so a service starts (and reports NOT_SERVING) while Redis is still down, and
//! every command is bounded by the response timeout, so a Redis that stops answering turns into `UNAVAILABLE`
//! well within a client's deadline instead of a hang.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::io::tcp::TcpSettings;
use redis::{Cmd, FromRedisValue, IntoConnectionInfo, Pipeline, RedisFuture, Value};

use crate::StoreError;
use crate::scripts::{FunctionCall, library};

/// Whether Redis is one node or a Redis Cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RedisMode {
    /// One redis-server (it may have replicas behind a proxy or Sentinel-managed address).
    Single,
    /// A Redis Cluster; the URLs are seed nodes and the topology is discovered.
    Cluster,
}

/// When a write a caller is told of counts as made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// Once its primary has made it. Replication is asynchronous, so a failover can lose the last writes the
    /// promoted replica had not received.
    #[default]
    None,
    /// Once a replica of its primary has it too (`WAIT 1`): a write no replica confirms within the durability
    /// timeout is answered UNAVAILABLE, saying it may or may not have landed.
    Replica,
}

/// How to reach Redis.
#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// `redis://` or `rediss://` URLs (with ACL user and password when needed). One for a single node; for a
    /// cluster, one or more seed nodes.
    pub urls: Vec<String>,
    /// Single node or cluster.
    pub mode: RedisMode,
    /// Multiplexed connections to keep (per node, for a cluster).
    pub connections: usize,
    /// How long to wait for a connection to be set up.
    pub connect_timeout: Duration,
    /// How long to wait for an answer to one command before calling Redis unavailable.
    pub response_timeout: Duration,
    /// When an acknowledged write counts as made, and how long a replica has to confirm it.
    pub durability: Durability,
    pub durability_timeout: Duration,
}

#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(conn) => conn.req_packed_command(cmd),
            Connection::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(conn) => conn.req_packed_commands(cmd, offset, count),
            Connection::Cluster(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(conn) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
        }
    }
}

/// A shared handle on Redis. Cheap to clone; every clone uses the same connections.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    config: RedisConfig,
    /// The open connections, replaced whole when a cluster stayed unreachable through them (see `ping`).
    connections: RwLock<Option<Arc<[Connection]>>>,
    /// Held while they are opened, so that the calls that find none open wait for one set; it holds when the last
    /// attempt failed, so that the calls that waited for it fail at once rather than each making its own in turn.
    opening: tokio::sync::Mutex<Option<Instant>>,
    next: AtomicUsize,
    /// Held while the library is loaded after Redis lost it, so that the calls that found it missing at once wait
    /// for one load instead of each making its own.
    reloading: tokio::sync::Mutex<()>,
    /// How many such loads were made.
    reloads: AtomicU64,
    /// With [`Durability::Replica`], connections of their own for the acknowledged writes: a WAIT holds its
    /// connection until a replica confirms, and reads and health probes must not queue behind it.
    acknowledging: Option<Store>,
}

impl Store {
    /// A store that connects on first use; until Redis answers, every call fails with `Unavailable`.
    pub fn new(config: RedisConfig) -> Store {
        let acknowledging = (config.durability == Durability::Replica).then(|| {
            Store::new(RedisConfig {
                durability: Durability::None,
                ..config.clone()
            })
        });
        Store {
            inner: Arc::new(Inner {
                acknowledging,
                config,
                connections: RwLock::new(None),
                opening: tokio::sync::Mutex::new(None),
                next: AtomicUsize::new(0),
                reloading: tokio::sync::Mutex::new(()),
                reloads: AtomicU64::new(0),
            }),
        }
    }

    /// A store whose connections are open already; `Unavailable` when Redis cannot be reached within the
    /// connect timeout.
    pub async fn connect(config: &RedisConfig) -> Result<Store, StoreError> {
        let store = Store::new(config.clone());
        store.connections().await?;
        Ok(store)
    }

    fn opened(&self) -> Option<Arc<[Connection]>> {
        self.inner
            .connections
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    async fn connections(&self) -> Result<Arc<[Connection]>, StoreError> {
        if let Some(connections) = self.opened() {
            return Ok(connections);
        }
        let mut failed = self.inner.opening.lock().await;
        if let Some(connections) = self.opened() {
            return Ok(connections);
        }
        let config = &self.inner.config;
        if failed.is_some_and(|at| at.elapsed() < config.connect_timeout) {
            return Err(StoreError::Unavailable(
                "redis could not be reached a moment ago".into(),
            ));
        }
        let mut connections = Vec::with_capacity(config.connections.max(1));
        for _ in 0..config.connections.max(1) {
            match open(config).await {
                Ok(connection) => connections.push(connection),
                Err(err) => {
                    *failed = Some(Instant::now());
                    return Err(err);
                }
            }
        }
        *failed = None;
        let connections: Arc<[Connection]> = connections.into();
        *self.inner.connections.write().unwrap_or_else(PoisonError::into_inner) = Some(connections.clone());
        Ok(connections)
    }

    /// How this store reaches Redis.
    pub fn config(&self) -> &RedisConfig {
        &self.inner.config
    }

    /// Whether Redis is one node or a cluster.
    pub fn mode(&self) -> RedisMode {
        self.inner.config.mode
    }

    async fn connection(&self) -> Result<Connection, StoreError> {
        let connections = self.connections().await?;
        let index = self.inner.next.fetch_add(1, Ordering::Relaxed) % connections.len();
        Ok(connections[index].clone())
    }

    /// Runs one command, bounded by the response timeout.
    pub async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T, StoreError> {
        let mut conn = self.connection().await?;
        self.bounded(cmd.query_async(&mut conn)).await
    }

    /// Runs a pipeline, bounded by the response timeout. On a cluster every command of the pipeline must hash
    /// to one slot.
    pub async fn query_pipeline<T: FromRedisValue>(&self, pipe: &Pipeline) -> Result<T, StoreError> {
        let mut conn = self.connection().await?;
        self.bounded(pipe.query_async(&mut conn)).await
    }

    /// Runs a function of the library, bounded by the response timeout. When Redis answers that the function is
    /// missing (it restarted, failed over, or is a new node), the library is loaded and the call made once more.
    pub async fn invoke<T: FromRedisValue>(&self, call: &FunctionCall<'_>) -> Result<T, StoreError> {
        let cmd = call.command();
        let reloads = self.inner.reloads.load(Ordering::Acquire);
        let mut conn = self.connection().await?;
        match self.within_timeout(Duration::ZERO, cmd.query_async(&mut conn)).await? {
            Err(err) if is_missing_function(&err) => {
                self.reload_library(reloads).await?;
                self.bounded(cmd.query_async(&mut conn)).await
            }
            result => result.map_err(StoreError::from),
        }
    }

    /// Runs several calls of the library in one round trip on one connection, so that Redis runs them in order; each
    /// is answered apart (one that fails does not fail the others). They must be safe to run twice: when Redis
    /// answers that the library is missing, it is loaded and every call is sent once more.
    pub async fn invoke_each(&self, calls: &[FunctionCall<'_>]) -> Result<Vec<Result<Value, StoreError>>, StoreError> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for call in calls {
            pipe.add_command(call.command());
        }
        let reloads = self.inner.reloads.load(Ordering::Acquire);
        let mut conn = self.connection().await?;
        let mut answers: Vec<redis::RedisResult<Value>> = self.bounded(pipe.query_async(&mut conn)).await?;
        if answers
            .iter()
            .any(|answer| answer.as_ref().is_err_and(is_missing_function))
        {
            self.reload_library(reloads).await?;
            answers = self.bounded(pipe.query_async(&mut conn)).await?;
        }
        Ok(answers
            .into_iter()
            .map(|answer| answer.map_err(StoreError::from))
            .collect())
    }

    /// Runs a function whose success a caller is told of (a claim, a placement started or ended, a game or player
    /// session created, a fleet changed), as [`Store::invoke`] does. With [`Durability::Replica`] the call goes in one
    /// round trip with `WAIT 1`, and is answered only once a replica holds what it wrote: `Unconfirmed` when none
    /// confirms within the durability timeout (the write stays on the primary, where a retry finds it).
    pub async fn invoke_acknowledged<T: FromRedisValue>(&self, call: &FunctionCall<'_>) -> Result<T, StoreError> {
        let config = &self.inner.config;
        if config.durability == Durability::None {
            return self.invoke(call).await;
        }
        let wait_ms = u64::try_from(config.durability_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut pipe = redis::pipe();
        pipe.add_command(call.command()).cmd("WAIT").arg(1).arg(wait_ms);
        let reloads = self.inner.reloads.load(Ordering::Acquire);
        let mut conn = self.inner.acknowledging.as_ref().unwrap_or(self).connection().await?;
        let sent = async |conn: &mut Connection| pipe.query_async(conn).await.map_err(failure_of_call);
        let (made, confirmed): (T, i64) = match self.within_timeout(config.durability_timeout, sent(&mut conn)).await? {
            Err(err) if is_missing_function(&err) => {
                self.reload_library(reloads).await?;
                self.within_timeout(config.durability_timeout, sent(&mut conn))
                    .await??
            }
            result => result?,
        };
        if confirmed < 1 {
            return Err(StoreError::Unconfirmed(wait_ms));
        }
        Ok(made)
    }

    /// Loads the library once for every call that found it missing since `seen` reloads.
    async fn reload_library(&self, seen: u64) -> Result<(), StoreError> {
        let _one_at_a_time = self.inner.reloading.lock().await;
        if self.inner.reloads.load(Ordering::Acquire) == seen {
            self.load_library().await?;
            self.inner.reloads.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Loads the library: on a cluster, on every primary. A library of the same name is the same code (the name
    /// carries a digest of it), so where it is loaded already nothing is compiled again.
    pub async fn load_library(&self) -> Result<(), StoreError> {
        let mut load = redis::cmd("FUNCTION");
        load.arg("LOAD").arg(&library().source);
        match self.query::<redis::Value>(&load).await {
            Err(StoreError::Unexpected(message)) if message.contains("already exists") => Ok(()),
            result => result.map(|_| ()),
        }
    }

    /// Checks that Redis answers on every connection, so that "reachable" means every request can get through,
    /// not just the one that happened to be probed. A cluster's connections that do not are let go, and the next
    /// call opens new ones: one that lost every node can stay without a route to a node after the nodes are back,
    /// while a new one learns the topology from the seed nodes.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let connections = self.connections().await?;
        let pings = connections.iter().map(|connection| {
            let mut connection = connection.clone();
            async move {
                let _: String = self.bounded(redis::cmd("PING").query_async(&mut connection)).await?;
                Ok::<_, StoreError>(())
            }
        });
        let pinged = futures::future::try_join_all(pings).await;
        if pinged.is_err() && self.mode() == RedisMode::Cluster {
            let mut open = self.inner.connections.write().unwrap_or_else(PoisonError::into_inner);
            if open.as_ref().is_some_and(|open| Arc::ptr_eq(open, &connections)) {
                *open = None;
            }
        }
        pinged.map(|_| ())
    }

    async fn bounded<T>(&self, call: impl Future<Output = redis::RedisResult<T>>) -> Result<T, StoreError> {
        self.within_timeout(Duration::ZERO, call)
            .await?
            .map_err(StoreError::from)
    }

    /// Redis' answer, or UNAVAILABLE when none came within the response timeout and `waited` (what the call itself
    /// asks Redis to wait, a WAIT's timeout).
    async fn within_timeout<T>(
        &self,
        waited: Duration,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<redis::RedisResult<T>, StoreError> {
        let timeout = self.inner.config.response_timeout + waited;
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| StoreError::Unavailable(format!("no answer within {} ms", timeout.as_millis())))
    }
}

/// A pipeline's failure as the failure of the call it carries (its first command), so that it reads as that call's
/// own would: a missing function, a Redis out of memory, a cluster moving.
fn failure_of_call(err: redis::RedisError) -> redis::RedisError {
    match err
        .clone()
        .into_server_errors()
        .and_then(|failed| failed.first().cloned())
    {
        Some((0, failure)) => redis::RedisError::from(failure),
        _ => err,
    }
}

/// Whether Redis refused a call because the function is not loaded there.
fn is_missing_function(err: &redis::RedisError) -> bool {
    err.code() == Some("ERR")
        && err
            .detail()
            .is_some_and(|detail| detail.starts_with("Function not found"))
}

/// Requests are small and latency-bound: Nagle's algorithm would hold a script call back waiting for more.
fn tcp_settings() -> TcpSettings {
    TcpSettings::default().set_nodelay(true)
}

async fn open(config: &RedisConfig) -> Result<Connection, StoreError> {
    let connect = async {
        match config.mode {
            RedisMode::Single => {
                let url = config
                    .urls
                    .first()
                    .ok_or_else(|| StoreError::Unexpected("no redis url configured".into()))?;
                let info = url.as_str().into_connection_info()?.set_tcp_settings(tcp_settings());
                let client = redis::Client::open(info)?;
                let manager_config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(config.connect_timeout))
                    .set_response_timeout(Some(config.response_timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(500));
                Ok(Connection::Single(
                    client.get_connection_manager_with_config(manager_config).await?,
                ))
            }
            RedisMode::Cluster => {
                let client = ClusterClientBuilder::new(config.urls.iter().map(String::as_str))
                    .connection_timeout(config.connect_timeout)
                    .response_timeout(config.response_timeout)
                    .tcp_settings(tcp_settings())
                    .retries(2)
                    .max_retry_wait(200)
                    .build()?;
                Ok(Connection::Cluster(client.get_async_connection().await?))
            }
        }
    };
    match tokio::time::timeout(config.connect_timeout * 2, connect).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::Unavailable("connecting to redis timed out".into())),
    }
}
