//! Who a game server process is and what it offers, as it tells Berth in register_process. The provisioner hands
//! a process its identity and credentials in the environment (as GameLift Anywhere does), so
//! [`GameServerConfig::from_env`] is the usual way in; a load generator simulating many servers fills the struct
//! itself.

use std::collections::HashMap;
use std::ffi::OsString;

use berth_proto::common::v1::{Endpoint, KeyValue};
use berth_proto::health::v1::{RegisterProcess, ServerPort};

/// Everything register_process carries, plus where the health service is and the token to present. The limits
/// of each field are those of `RegisterProcess` in `berth/health/v1/sdk.proto`; the service checks them.
///
/// `resume_registration_id` is not here: the SDK fills it in itself when it resumes a broken stream, and a new
/// process always starts a new registration.
#[derive(Clone)]
pub struct GameServerConfig {
    /// Address of the health service, e.g. `http://127.0.0.1:7104`, or several replicas comma-separated
    /// (`BERTH_SDK_ENDPOINT`).
    pub sdk_endpoint: String,
    /// Bearer token with the game-server role, scoped to this fleet and server (`BERTH_SDK_TOKEN`).
    pub token: String,
    /// Fleet (`BERTH_FLEET_ID`).
    pub fleet_id: String,
    /// Id of the server (`BERTH_GAME_SERVER_ID`); empty takes the token's.
    pub game_server_id: String,
    /// Instance the process runs on (`BERTH_INSTANCE_ID`).
    pub instance_id: String,
    /// Location of the instance (`BERTH_LOCATION`).
    pub location: String,
    /// Where players connect: `BERTH_SDK_IP_ADDRESS` (or `BERTH_SDK_DNS_NAME`) and the game port `BERTH_SDK_PORT`.
    pub endpoint: Endpoint,
    /// Other ports the process listens on.
    pub ports: Vec<ServerPort>,
    /// Most game sessions hosted at once; 0 means 1.
    pub max_concurrent_game_sessions: u32,
    /// Most players per game session; 0 means 1000.
    pub max_players: u32,
    /// Labels of the server.
    pub labels: Vec<KeyValue>,
    /// SDK that speaks, as "name/version"; defaults to this SDK.
    pub sdk_version: String,
    /// Log files the process writes, for collection.
    pub log_paths: Vec<String>,
    /// Free-form game data.
    pub game_server_data: String,
}

/// Why the environment does not describe a game server process.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is unset or empty.
    #[error("{0} is not set; the provisioner passes it to every game server process")]
    Missing(&'static str),
    /// `BERTH_SDK_ENV_FILE` names a file that cannot be read, or holds a line that is not `NAME=value`.
    #[error("BERTH_SDK_ENV_FILE {path}: {problem}")]
    EnvFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A variable is set to something unusable.
    #[error("{name} is {value:?}; expected {expected}")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// Its value (lossy when not UTF-8).
        value: String,
        /// What would be right.
        expected: &'static str,
    },
}

/// Address registered when neither `BERTH_SDK_IP_ADDRESS` nor `BERTH_SDK_DNS_NAME` is set: right for a process
/// run next to a local Berth, and explicit everywhere else.
const LOCAL_ADDRESS: &str = "127.0.0.1";

/// The variable naming a file of variables that win over the environment.
const ENV_FILE: &str = "BERTH_SDK_ENV_FILE";

/// The variables of an env file: `NAME=value` lines, the value taken as it is (no quotes, no expansion).
fn read_env_file(path: &OsString) -> Result<HashMap<String, String>, ConfigError> {
    let shown = path.to_string_lossy().into_owned();
    let problem = |problem: String| ConfigError::EnvFile {
        path: shown.clone(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|err| problem(err.to_string()))?;
    let mut vars = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        match line.split_once('=') {
            Some((name, value)) if !name.trim().is_empty() => {
                vars.insert(name.trim().to_owned(), value.to_owned());
            }
            _ => return Err(problem(format!("line {} is not NAME=value", number + 1))),
        }
    }
    Ok(vars)
}

impl Default for GameServerConfig {
    fn default() -> Self {
        GameServerConfig {
            sdk_endpoint: String::new(),
            token: String::new(),
            fleet_id: String::new(),
            game_server_id: String::new(),
            instance_id: String::new(),
            location: String::new(),
            endpoint: Endpoint::default(),
            ports: Vec::new(),
            max_concurrent_game_sessions: 0,
            max_players: 0,
            labels: Vec::new(),
            sdk_version: concat!("berth-rust/", env!("CARGO_PKG_VERSION")).to_owned(),
            log_paths: Vec::new(),
            game_server_data: String::new(),
        }
    }
}

impl GameServerConfig {
    /// Reads the variables the provisioner sets: `BERTH_SDK_ENDPOINT`, `BERTH_SDK_TOKEN`, `BERTH_FLEET_ID`,
    /// `BERTH_GAME_SERVER_ID`, `BERTH_INSTANCE_ID`, `BERTH_LOCATION` and `BERTH_SDK_PORT` (the game port players
    /// connect to) are required; `BERTH_SDK_IP_ADDRESS` and `BERTH_SDK_DNS_NAME` say where players reach it
    /// (127.0.0.1 when neither is set). Other fields keep their defaults for the game to set.
    ///
    /// When `BERTH_SDK_ENV_FILE` names a file, its `NAME=value` lines (blank lines and `#` comments aside) are read
    /// first and win over the environment: a provisioner that restarts a container, whose environment was fixed
    /// when it was created, hands each launch its new identity that way.
    pub fn from_env() -> Result<GameServerConfig, ConfigError> {
        GameServerConfig::from_lookup(|name| std::env::var_os(name))
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<GameServerConfig, ConfigError> {
        let file = match lookup(ENV_FILE).filter(|path| !path.is_empty()) {
            Some(path) => read_env_file(&path)?,
            None => HashMap::new(),
        };
        let lookup = |name: &str| file.get(name).map(OsString::from).or_else(|| lookup(name));
        let optional = |name: &'static str| -> Result<Option<String>, ConfigError> {
            match lookup(name) {
                None => Ok(None),
                Some(value) if value.is_empty() => Ok(None),
                Some(value) => value.into_string().map(Some).map_err(|value| ConfigError::Invalid {
                    name,
                    value: value.to_string_lossy().into_owned(),
                    expected: "UTF-8 text",
                }),
            }
        };
        let required = |name: &'static str| optional(name)?.ok_or(ConfigError::Missing(name));
        let port = required("BERTH_SDK_PORT")?;
        let port = match port.parse::<u16>() {
            Ok(port) if port > 0 => u32::from(port),
            _ => {
                return Err(ConfigError::Invalid {
                    name: "BERTH_SDK_PORT",
                    value: port,
                    expected: "a port number from 1 to 65535",
                });
            }
        };
        let dns_name = optional("BERTH_SDK_DNS_NAME")?.unwrap_or_default();
        let ip_address = match optional("BERTH_SDK_IP_ADDRESS")? {
            Some(address) => address,
            None if dns_name.is_empty() => LOCAL_ADDRESS.to_owned(),
            None => String::new(),
        };
        Ok(GameServerConfig {
            sdk_endpoint: required("BERTH_SDK_ENDPOINT")?,
            token: required("BERTH_SDK_TOKEN")?,
            fleet_id: required("BERTH_FLEET_ID")?,
            game_server_id: required("BERTH_GAME_SERVER_ID")?,
            instance_id: required("BERTH_INSTANCE_ID")?,
            location: required("BERTH_LOCATION")?,
            endpoint: Endpoint {
                ip_address,
                dns_name,
                port,
            },
            ..GameServerConfig::default()
        })
    }

    pub(super) fn register_process(&self) -> RegisterProcess {
        RegisterProcess {
            fleet_id: self.fleet_id.clone(),
            game_server_id: self.game_server_id.clone(),
            instance_id: self.instance_id.clone(),
            location: self.location.clone(),
            endpoint: Some(self.endpoint.clone()),
            ports: self.ports.clone(),
            max_concurrent_game_sessions: self.max_concurrent_game_sessions,
            max_players: self.max_players,
            labels: self.labels.clone(),
            sdk_version: self.sdk_version.clone(),
            log_paths: self.log_paths.clone(),
            game_server_data: self.game_server_data.clone(),
            resume_registration_id: String::new(),
            attempt: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launched_with(vars: &[(&str, &str)]) -> Result<GameServerConfig, ConfigError> {
        let vars: HashMap<String, OsString> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).into())).collect();
        GameServerConfig::from_lookup(|name| vars.get(name).cloned())
    }

    const FULL: &[(&str, &str)] = &[
        ("BERTH_SDK_ENDPOINT", "http://127.0.0.1:7104"),
        ("BERTH_SDK_TOKEN", "t0k3n"),
        ("BERTH_FLEET_ID", "arena-eu"),
        ("BERTH_GAME_SERVER_ID", "gs-1"),
        ("BERTH_INSTANCE_ID", "i-1"),
        ("BERTH_LOCATION", "eu-west-1"),
        ("BERTH_SDK_PORT", "7777"),
    ];

    #[test]
    fn reads_every_variable_and_defaults_the_address_to_loopback() {
        let config = launched_with(FULL).unwrap();
        assert_eq!(config.sdk_endpoint, "http://127.0.0.1:7104");
        assert_eq!(config.token, "t0k3n");
        assert_eq!(config.fleet_id, "arena-eu");
        assert_eq!(config.game_server_id, "gs-1");
        assert_eq!(config.instance_id, "i-1");
        assert_eq!(config.location, "eu-west-1");
        assert_eq!(config.endpoint.port, 7777);
        assert_eq!(config.endpoint.ip_address, "127.0.0.1");
        assert!(config.sdk_version.starts_with("berth-rust/"));
    }

    #[test]
    fn a_dns_name_alone_registers_no_address() {
        let mut vars = FULL.to_vec();
        vars.push(("BERTH_SDK_DNS_NAME", "gs-1.example.net"));
        let config = launched_with(&vars).unwrap();
        assert_eq!(config.endpoint.dns_name, "gs-1.example.net");
        assert_eq!(config.endpoint.ip_address, "");
    }

    #[test]
    fn names_the_missing_variable() {
        for missing in FULL.iter().map(|(name, _)| *name) {
            let vars: Vec<_> = FULL.iter().copied().filter(|(name, _)| *name != missing).collect();
            match launched_with(&vars) {
                Err(ConfigError::Missing(name)) => assert_eq!(name, missing),
                other => panic!("without {missing}: {:?}", other.err()),
            }
            let mut empty = vars.clone();
            empty.push((missing, ""));
            assert!(matches!(launched_with(&empty), Err(ConfigError::Missing(name)) if name == missing));
        }
    }

    #[test]
    fn rejects_a_port_out_of_range() {
        for port in ["0", "65536", "http"] {
            let mut vars = FULL.to_vec();
            vars.retain(|(name, _)| *name != "BERTH_SDK_PORT");
            vars.push(("BERTH_SDK_PORT", port));
            let err = launched_with(&vars).err().unwrap();
            assert!(
                matches!(
                    err,
                    ConfigError::Invalid {
                        name: "BERTH_SDK_PORT",
                        ..
                    }
                ),
                "{err}"
            );
        }
    }

    #[test]
    fn an_env_file_wins_over_the_environment() {
        let path = std::env::temp_dir().join(format!("berth-sdk-env-{}", std::process::id()));
        std::fs::write(
            &path,
            "# written by the provisioner before the container starts\n\nBERTH_GAME_SERVER_ID=gs-2\nBERTH_SDK_TOKEN=a=b\n",
        )
        .unwrap();
        let mut vars = FULL.to_vec();
        let named = path.display().to_string();
        vars.push(("BERTH_SDK_ENV_FILE", &named));
        let config = launched_with(&vars).unwrap();
        assert_eq!(config.game_server_id, "gs-2", "the file's value wins");
        assert_eq!(config.token, "a=b", "a value is everything after the first =");
        assert_eq!(
            config.fleet_id, "arena-eu",
            "what the file leaves out comes from the environment"
        );

        std::fs::write(&path, "BERTH_FLEET_ID=arena\nnot a variable\n").unwrap();
        let err = launched_with(&vars).err().unwrap();
        assert!(
            matches!(&err, ConfigError::EnvFile { problem, .. } if problem == "line 2 is not NAME=value"),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();
        assert!(
            matches!(launched_with(&vars), Err(ConfigError::EnvFile { .. })),
            "a missing file is an error"
        );
    }
}
