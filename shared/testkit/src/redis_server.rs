//! Real redis-server processes for tests. Each lives in its own temporary directory and dies with its handle
//! (and, through PR_SET_PDEATHSIG, with the thread that started it if the test process is killed).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use berth_store::{Durability, RedisConfig, RedisMode};

/// A redis-server process.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// For a cluster node, its `cluster-node-timeout` in ms: how long a silent peer takes to be failed.
    cluster: Option<u32>,
    /// The port of the primary it replicates, for a replica.
    primary: Option<u16>,
    /// Whether it writes every write to its append-only file before answering (`appendfsync always`), so that a
    /// restart, even after SIGKILL, brings back everything it acknowledged.
    persistent: bool,
}

/// Offset of a cluster node's bus port from its client port, as Redis fixes it.
const CLUSTER_BUS_OFFSET: u16 = 10_000;

/// A free port; for a cluster node, one whose bus port (port + 10000) is free too, since Redis refuses to start
/// otherwise.
fn free_port(cluster: bool) -> u16 {
    crate::ports::free_port_where(|port| {
        !cluster || TcpListener::bind(("127.0.0.1", port + CLUSTER_BUS_OFFSET)).is_ok()
    })
}

fn scratch_dir(port: u16) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("berth-test-redis-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating a scratch directory");
    dir
}

fn answers(port: u16) -> bool {
    redis_cli(port, &["PING"]).is_some_and(|out| out.trim() == "PONG")
}

fn redis_cli(port: u16, args: &[&str]) -> Option<String> {
    let output = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// How long a test's store waits for a reply: short, so that an outage shows within a test's patience, yet long
/// enough that a machine loaded by the tests' own processes (fleet replicas, game servers, other tests) is not read
/// as one.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(1500);

fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ready() {
        assert!(Instant::now() < deadline, "{what} not ready within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl RedisServer {
    /// Starts a single-node redis-server on a free port.
    pub fn start() -> RedisServer {
        RedisServer::start_with(None, None)
    }

    /// Starts a single-node redis-server on a free port that persists every write before acknowledging it, as an
    /// operator running Redis with `appendonly yes` and `appendfsync always` has it: see [`RedisServer::restart`].
    pub fn persistent() -> RedisServer {
        let mut server = RedisServer::unstarted(None, None);
        server.persistent = true;
        server.spawn();
        server
    }

    /// Starts a replica of `primary` on a free port, and waits until it has the primary's data and follows it.
    pub fn replica_of(primary: &RedisServer) -> RedisServer {
        let replica = RedisServer::start_with(None, Some(primary.port));
        let port = replica.port;
        wait_until("the replica's link to its primary", Duration::from_secs(10), || {
            redis_cli(port, &["INFO", "replication"]).is_some_and(|info| info.contains("master_link_status:up"))
        });
        replica
    }

    fn start_with(cluster: Option<u32>, primary: Option<u16>) -> RedisServer {
        let mut server = RedisServer::unstarted(cluster, primary);
        server.spawn();
        server
    }

    fn unstarted(cluster: Option<u32>, primary: Option<u16>) -> RedisServer {
        let port = free_port(cluster.is_some());
        RedisServer {
            port,
            dir: scratch_dir(port),
            child: None,
            cluster,
            primary,
            persistent: false,
        }
    }

    fn spawn(&mut self) {
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.persistent {
            command.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            command.args(["--appendonly", "no"]);
        }
        if let Some(primary) = self.primary {
            command.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        if let Some(node_timeout) = self.cluster {
            command.args([
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                &node_timeout.to_string(),
            ]);
            command.arg("--cluster-config-file").arg(self.dir.join("nodes.conf"));
        }
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        self.child = Some(
            command
                .spawn()
                .expect("redis-server must be installed (apt-get install redis-server)"),
        );
        let port = self.port;
        wait_until("redis-server", Duration::from_secs(10), || answers(port));
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills it, as an outage would.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes it (SIGSTOP): connections stay open and data is kept, but nothing answers, as in a network
    /// partition or a long stall.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Thaws it after [`RedisServer::pause`].
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    fn signal(&self, signal: libc::c_int) {
        let child = self.child.as_ref().expect("redis-server is running");
        // SAFETY: kill(2) on our own child's pid has no memory effects.
        unsafe {
            libc::kill(child.id() as libc::pid_t, signal);
        }
    }

    /// Starts it again on the same port: empty, or, when it is [`RedisServer::persistent`], with everything it
    /// acknowledged, read back from its append-only file.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Store settings that reach this server, with short timeouts so outages show quickly (see [`RESPONSE_TIMEOUT`]).
    pub fn config(&self) -> RedisConfig {
        RedisConfig {
            urls: vec![self.url()],
            mode: RedisMode::Single,
            connections: 2,
            connect_timeout: Duration::from_millis(500),
            response_timeout: RESPONSE_TIMEOUT,
            durability: Durability::None,
            durability_timeout: Duration::from_millis(300),
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster of 3 primaries, with or without a replica each.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    durability: Durability,
}

/// How long a cluster node with replicas waits before failing a silent peer: short, so that a failover test's
/// replica takes over within a few seconds.
const FAILOVER_NODE_TIMEOUT_MS: u32 = 1000;

impl RedisCluster {
    /// Starts three cluster-enabled nodes and joins them into one cluster covering all 16384 slots.
    pub fn start() -> RedisCluster {
        RedisCluster::create(3, 2000, 0, Durability::None)
    }

    /// Starts three primaries each followed by a replica, and waits until every replica holds its primary's data;
    /// the store's settings ask for `durability`.
    pub fn replicated(durability: Durability) -> RedisCluster {
        let cluster = RedisCluster::create(6, FAILOVER_NODE_TIMEOUT_MS, 1, durability);
        cluster.wait_for_replicas();
        cluster
    }

    fn create(nodes: usize, node_timeout_ms: u32, replicas: u8, durability: Durability) -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..nodes)
            .map(|_| RedisServer::start_with(Some(node_timeout_ms), None))
            .collect();
        let addresses: Vec<String> = nodes.iter().map(|node| format!("127.0.0.1:{}", node.port)).collect();
        let replicas = replicas.to_string();
        let mut args = vec!["--cluster", "create"];
        args.extend(addresses.iter().map(String::as_str));
        args.extend(["--cluster-replicas", &replicas, "--cluster-yes"]);
        redis_cli(nodes[0].port, &args).expect("redis-cli --cluster create");
        let cluster = RedisCluster { nodes, durability };
        cluster.wait_until_ok();
        cluster
    }

    fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|node| node.child.is_some())
            .map(|node| node.port)
            .collect()
    }

    fn wait_until_ok(&self) {
        let ports = self.live_ports();
        wait_until("redis cluster", Duration::from_secs(30), || {
            ports.iter().all(|port| {
                redis_cli(*port, &["CLUSTER", "INFO"]).is_some_and(|info| info.contains("cluster_state:ok"))
            })
        });
    }

    /// Waits until every live replica's link to its primary is up and it has caught up with it.
    fn wait_for_replicas(&self) {
        let ports = self.live_ports();
        wait_until("the cluster's replicas", Duration::from_secs(30), || {
            ports.iter().all(|port| {
                redis_cli(*port, &["INFO", "replication"])
                    .is_some_and(|info| info.contains("role:master") || info.contains("master_link_status:up"))
            })
        });
    }

    /// The index in `nodes` of the live primary that serves `key`'s hash slot, as the live nodes see it.
    pub fn primary_of(&self, key: &str) -> usize {
        self.serving(key).expect("a live primary serves every slot")
    }

    /// The index in `nodes` of the primary not known to have failed that serves `key`'s slot, if any.
    fn serving(&self, key: &str) -> Option<usize> {
        let port = self.live_ports()[0];
        let slot: u16 = redis_cli(port, &["CLUSTER", "KEYSLOT", key])?.trim().parse().ok()?;
        let nodes = redis_cli(port, &["CLUSTER", "NODES"])?;
        let serving = nodes.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = fields.get(2)?;
            if !flags.contains("master") || flags.contains("fail") {
                return None;
            }
            let serves = fields.get(8..)?.iter().any(|range| {
                let (low, high) = range.split_once('-').unwrap_or((range, range));
                matches!((low.parse::<u16>(), high.parse::<u16>()), (Ok(low), Ok(high)) if (low..=high).contains(&slot))
            });
            let port: u16 = fields[1].split(['@', ':']).nth(1)?.parse().ok()?;
            serves.then_some(port)
        })?;
        self.nodes.iter().position(|node| node.port == serving)
    }

    /// SIGKILLs the primary that serves `key`, as a crash would, and waits until its replica has taken its slots
    /// over and the cluster is whole again. Answers the killed node's index and how long the takeover took.
    pub fn kill_primary_of(&mut self, key: &str) -> (usize, Duration) {
        let killed = self.primary_of(key);
        let started = Instant::now();
        self.nodes[killed].stop();
        wait_until("the replica's takeover", Duration::from_secs(30), || {
            self.serving(key).is_some_and(|primary| primary != killed)
        });
        self.wait_until_ok();
        (killed, started.elapsed())
    }

    /// Starts node `index` again on its port, empty but with its view of the cluster, so that it rejoins as the
    /// replica of whoever took its slots over, and waits until it has caught up with it.
    pub fn rejoin(&mut self, index: usize) {
        self.nodes[index].spawn();
        self.wait_until_ok();
        let port = self.nodes[index].port;
        wait_until("the rejoined node's replication", Duration::from_secs(30), || {
            redis_cli(port, &["INFO", "replication"]).is_some_and(|info| info.contains("master_link_status:up"))
        });
    }

    /// Kills every node, as an outage would.
    pub fn stop(&mut self) {
        self.nodes.iter_mut().for_each(RedisServer::stop);
    }

    /// Starts every node again on its port, empty but with its slots (its nodes.conf is kept), and waits until
    /// the cluster has formed again.
    pub fn restart(&mut self) {
        self.stop();
        self.nodes.iter_mut().for_each(RedisServer::spawn);
        self.wait_until_ok();
    }

    /// Store settings that reach the cluster through its seed nodes.
    pub fn config(&self) -> RedisConfig {
        RedisConfig {
            urls: self.nodes.iter().map(RedisServer::url).collect(),
            mode: RedisMode::Cluster,
            connections: 2,
            connect_timeout: Duration::from_millis(500),
            response_timeout: RESPONSE_TIMEOUT,
            durability: self.durability,
            durability_timeout: Duration::from_millis(300),
        }
    }
}

/// Either kind, so that one test body runs on both.
pub enum TestRedis {
    /// One node.
    Single(RedisServer),
    /// A cluster.
    Cluster(RedisCluster),
}

impl TestRedis {
    /// A single node.
    pub fn single() -> TestRedis {
        TestRedis::Single(RedisServer::start())
    }

    /// A 3-master cluster.
    pub fn cluster() -> TestRedis {
        TestRedis::Cluster(RedisCluster::start())
    }

    /// Store settings that reach it.
    pub fn config(&self) -> RedisConfig {
        match self {
            TestRedis::Single(server) => server.config(),
            TestRedis::Cluster(cluster) => cluster.config(),
        }
    }

    /// Kills it (every node of a cluster), as an outage would.
    pub fn stop(&mut self) {
        match self {
            TestRedis::Single(server) => server.stop(),
            TestRedis::Cluster(cluster) => cluster.stop(),
        }
    }

    /// Starts it again: empty (without the store's library), as after a restart without persistence, unless it is
    /// a [`RedisServer::persistent`] single node.
    pub fn restart(&mut self) {
        match self {
            TestRedis::Single(server) => server.restart(),
            TestRedis::Cluster(cluster) => cluster.restart(),
        }
    }

    fn nodes(&self) -> &[RedisServer] {
        match self {
            TestRedis::Single(server) => std::slice::from_ref(server),
            TestRedis::Cluster(cluster) => cluster.nodes.as_slice(),
        }
    }

    /// Holds every client's commands on every node for `pause` (`CLIENT PAUSE … ALL`): connections stay open and
    /// commands queue, then run once it lapses, as with a Redis slower than any timeout.
    pub fn client_pause(&self, pause: Duration) {
        let ms = pause.as_millis().to_string();
        for node in self.nodes() {
            let answer = redis_cli(node.port, &["CLIENT", "PAUSE", &ms, "ALL"]);
            assert_eq!(answer.as_deref().map(str::trim), Some("OK"), "CLIENT PAUSE {ms}");
        }
    }

    /// Sets a configuration parameter on every node (`CONFIG SET`), as an operator would.
    pub fn config_set(&self, parameter: &str, value: &str) {
        for node in self.nodes() {
            let answer = redis_cli(node.port, &["CONFIG", "SET", parameter, value]);
            assert_eq!(
                answer.as_deref().map(str::trim),
                Some("OK"),
                "CONFIG SET {parameter} {value}"
            );
        }
    }
}
