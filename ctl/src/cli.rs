//! The command line: global flags (each also an environment variable), and one subcommand per thing an operator
//! does, named as kubectl and the GameLift CLI name theirs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Berth from the command line.
#[derive(Debug, Parser)]
#[command(name = "berthctl", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Where Berth is, who asks, and how answers are printed.
#[derive(Debug, Args)]
pub struct Global {
    /// The config file with named contexts [default: ~/.config/berth/config.yaml].
    #[arg(long, global = true, env = "BERTHCTL_CONFIG")]
    pub config: Option<PathBuf>,
    /// The context of the config file to use [default: its current-context].
    #[arg(long, global = true, env = "BERTH_CONTEXT")]
    pub context: Option<String>,
    /// The placement service [default: http://127.0.0.1:7101].
    #[arg(long, global = true, env = "BERTH_PLACEMENT_ENDPOINT")]
    pub placement_endpoint: Option<String>,
    /// The session service [default: http://127.0.0.1:7102].
    #[arg(long, global = true, env = "BERTH_SESSION_ENDPOINT")]
    pub session_endpoint: Option<String>,
    /// The fleet service [default: http://127.0.0.1:7103].
    #[arg(long, global = true, env = "BERTH_FLEET_ENDPOINT")]
    pub fleet_endpoint: Option<String>,
    /// The health service [default: http://127.0.0.1:7104].
    #[arg(long, global = true, env = "BERTH_HEALTH_ENDPOINT")]
    pub health_endpoint: Option<String>,
    /// The bearer token to present.
    #[arg(long, global = true, env = "BERTH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The deployment's signing secret, to mint an operator token from (a developer's own stack).
    #[arg(long, global = true, env = "BERTH_AUTH_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// How answers are printed.
    #[arg(long, short, global = true, env = "BERTH_OUTPUT", value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// How answers are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns for people.
    Table,
    /// The proto3 JSON of each record, as the contracts define it.
    Json,
    /// The same as YAML.
    Yaml,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Makes the fleets and queues that manifests declare exist as declared.
    Apply(ApplyArgs),
    /// Lists records of one kind.
    Get(Get),
    /// Shows one record whole.
    Describe(Describe),
    /// Finds a fleet's game sessions with GameLift's search expressions.
    Search(Search),
    /// Prints events as they come: a fleet's, game sessions', or a queue's placements.
    Events(Events),
    /// A live view of fleets, queues and scaling, redrawn in place.
    Top(Top),
    /// Sets a fleet location's capacity.
    Scale(Scale),
    /// Stops a fleet's scaling policies from acting (in some locations, or all).
    Suspend(Autoscaling),
    /// Lets a fleet's scaling policies act again.
    Resume(Autoscaling),
    /// Starts a placement through a queue and, unless told not to, waits for its outcome.
    Place(Place),
    /// Claims a game server of a fleet (FleetIQ ClaimGameServer).
    Claim(Claim),
    /// Creates a game session or a player session (GameLift CreateGameSession, CreatePlayerSession).
    Create(Create),
    /// Ends a game session.
    Terminate(Terminate),
    /// Mints a bearer token with the deployment's secret.
    Token(Token),
    /// Prints a shell completion script.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A manifest, or a directory of them (.yaml, .yml, .json). Repeatable.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// Print the changes and make none.
    #[arg(long)]
    pub dry_run: bool,
    /// Also delete the fleets and queues that no manifest names.
    #[arg(long)]
    pub prune: bool,
}

/// What `get` lists.
#[derive(Debug, Args)]
pub struct Get {
    #[command(subcommand)]
    pub kind: GetKind,
}

#[derive(Debug, Subcommand)]
pub enum GetKind {
    /// Fleets, in id order.
    Fleets,
    /// Queues, in name order.
    Queues,
    /// A fleet's registered game servers.
    GameServers {
        /// The fleet.
        fleet: String,
    },
    /// A fleet's game sessions.
    GameSessions {
        /// The fleet.
        fleet: String,
        /// Only those in this location.
        #[arg(long)]
        location: Option<String>,
    },
    /// A fleet's scaling policies.
    Policies {
        /// The fleet.
        fleet: String,
    },
    /// A fleet's locations: status, capacity and instances.
    Locations {
        /// The fleet.
        fleet: String,
    },
    /// The instances of a fleet's location, with their servers.
    Instances {
        /// The fleet.
        fleet: String,
        /// The location.
        location: String,
    },
    /// The player sessions of a game session, or of a player.
    PlayerSessions {
        /// The game session.
        #[arg(long, required_unless_present = "player", conflicts_with = "player")]
        game_session: Option<String>,
        /// The player.
        #[arg(long)]
        player: Option<String>,
    },
    /// A queue's PENDING placements, the longest waiting first.
    Placements {
        /// The queue.
        queue: String,
    },
}

/// What `describe` shows.
#[derive(Debug, Args)]
pub struct Describe {
    #[command(subcommand)]
    pub kind: DescribeKind,
}

#[derive(Debug, Subcommand)]
pub enum DescribeKind {
    /// A fleet, with its locations.
    Fleet { fleet: String },
    /// A queue.
    Queue { name: String },
    /// A placement.
    Placement { id: String },
    /// A game session.
    GameSession { id: String },
    /// A game server of a fleet.
    GameServer { fleet: String, id: String },
    /// A location of a fleet, with its utilization.
    Location { fleet: String, location: String },
    /// An instance of a fleet's location, with its servers.
    Instance {
        fleet: String,
        location: String,
        id: String,
    },
    /// A player session.
    PlayerSession { id: String },
    /// A scaling policy of a fleet.
    Policy { fleet: String, name: String },
}

#[derive(Debug, Args)]
pub struct Search {
    /// The fleet.
    pub fleet: String,
    /// Only this location's game sessions.
    #[arg(long)]
    pub location: Option<String>,
    /// Which game sessions, e.g. "playerSessionCount < 4 AND gameSessionProperties.map = 'dust'".
    #[arg(long)]
    pub filter: Option<String>,
    /// Their order, e.g. "creationTimeMillis DESC".
    #[arg(long)]
    pub sort: Option<String>,
}

#[derive(Debug, Args)]
pub struct Events {
    #[command(subcommand)]
    pub kind: EventsKind,
    /// Keep printing events as they happen (reconnecting and resuming from the last one seen when the connection
    /// breaks) rather than ending once the retained ones are printed.
    #[arg(long, short = 'f', global = true)]
    pub follow: bool,
}

#[derive(Debug, Subcommand)]
pub enum EventsKind {
    /// A fleet's events (launches, terminations, scaling actions, …).
    Fleet { fleet: String },
    /// The game and player session events of a fleet.
    Sessions { fleet: String },
    /// The outcomes of a queue's placements.
    Placements { queue: String },
}

#[derive(Debug, Args)]
pub struct Top {
    /// Seconds between two frames.
    #[arg(long, default_value_t = 2)]
    pub interval_seconds: u64,
    /// Print one frame and end.
    #[arg(long)]
    pub once: bool,
}

#[derive(Debug, Args)]
pub struct Autoscaling {
    /// The fleet.
    pub fleet: String,
    /// Only these locations [default: all of them].
    #[arg(long = "location")]
    pub locations: Vec<String>,
}

#[derive(Debug, Args)]
pub struct Scale {
    /// The fleet.
    pub fleet: String,
    /// The location whose capacity changes.
    #[arg(long)]
    pub location: String,
    /// Instances wanted.
    #[arg(long)]
    pub desired: Option<u32>,
    /// Fewest instances.
    #[arg(long)]
    pub min: Option<u32>,
    /// Most instances.
    #[arg(long)]
    pub max: Option<u32>,
}

#[derive(Debug, Args)]
pub struct Place {
    /// The queue.
    #[arg(long)]
    pub queue: String,
    /// The placement's id (idempotent: the same id starts it once) [default: a new one].
    #[arg(long)]
    pub id: Option<String>,
    /// Most players in the game session.
    #[arg(long, default_value_t = 10)]
    pub max_players: u32,
    /// Players to reserve a slot for, by id.
    #[arg(long = "player", value_name = "PLAYER_ID")]
    pub players: Vec<String>,
    /// The game session's name.
    #[arg(long)]
    pub name: Option<String>,
    /// Game properties, as KEY=VALUE.
    #[arg(long = "property", value_name = "KEY=VALUE", value_parser = key_value)]
    pub properties: Vec<(String, String)>,
    /// Start it and print it without waiting for its outcome.
    #[arg(long)]
    pub no_wait: bool,
    /// Longest wait for the outcome, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_seconds: u64,
}

#[derive(Debug, Args)]
pub struct Claim {
    /// The fleet.
    pub fleet: String,
    /// The game server to claim [default: any free one].
    #[arg(long)]
    pub game_server: Option<String>,
}

#[derive(Debug, Args)]
pub struct Create {
    #[command(subcommand)]
    pub kind: CreateKind,
}

#[derive(Debug, Subcommand)]
pub enum CreateKind {
    /// A game session on a ready game server of a fleet's location.
    GameSession {
        /// The fleet.
        fleet: String,
        /// The location [default: the fleet's home location].
        #[arg(long)]
        location: Option<String>,
        /// Most players.
        #[arg(long, default_value_t = 10)]
        max_players: u32,
        /// Its name.
        #[arg(long)]
        name: Option<String>,
        /// Game properties, as KEY=VALUE.
        #[arg(long = "property", value_name = "KEY=VALUE", value_parser = key_value)]
        properties: Vec<(String, String)>,
    },
    /// A player's slot in a game session, RESERVED until the game server accepts it.
    PlayerSession {
        /// The game session.
        game_session: String,
        /// The player.
        #[arg(long)]
        player: String,
        /// Data for the game server about the player.
        #[arg(long)]
        data: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct Terminate {
    #[command(subcommand)]
    pub kind: TerminateKind,
}

#[derive(Debug, Subcommand)]
pub enum TerminateKind {
    /// A game session: its server is asked to end it, or with --force it ends at once.
    GameSession {
        /// The game session.
        id: String,
        /// End it now rather than letting the server end it.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Args)]
pub struct Token {
    /// The role.
    #[arg(long, value_enum)]
    pub role: berth_runtime::auth::Role,
    /// Who the token is for, as logs show it.
    #[arg(long, default_value = "berthctl")]
    pub subject: String,
    /// For a game server: its fleet.
    #[arg(long, required_if_eq("role", "game-server"))]
    pub fleet: Option<String>,
    /// For a game server: its id.
    #[arg(long, required_if_eq("role", "game-server"))]
    pub game_server: Option<String>,
    /// How long it is valid, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub ttl_seconds: u64,
}

fn key_value(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))
}
