//! Where Berth is and who is asking: each service's address and the bearer token, from flags, then the
//! environment, then the chosen context of the config file (named contexts, as kubectl's kubeconfig has), then the
//! ports `make run` and the README give. One channel is opened per service a command needs, and reused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use berth_runtime::auth::{Role, TokenKey};
use berth_sdk::AuthedChannel;
use serde::Deserialize;

use crate::cli::Global;
use crate::error::CtlError;

/// A Berth service a command speaks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    Placement,
    Session,
    Fleet,
    Health,
}

impl Service {
    pub fn name(self) -> &'static str {
        match self {
            Service::Placement => "placement",
            Service::Session => "session",
            Service::Fleet => "fleet",
            Service::Health => "health",
        }
    }

    /// Its address when nothing says otherwise: the port the README gives it, on this machine.
    fn default_address(self) -> &'static str {
        match self {
            Service::Placement => "http://127.0.0.1:7101",
            Service::Session => "http://127.0.0.1:7102",
            Service::Fleet => "http://127.0.0.1:7103",
            Service::Health => "http://127.0.0.1:7104",
        }
    }
}

/// The config file: named contexts and the one used when `--context` names none.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ConfigFile {
    current_context: Option<String>,
    #[serde(default)]
    contexts: BTreeMap<String, ContextEntry>,
}

/// One context: the services' addresses and how to get a token.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct ContextEntry {
    placement: Option<String>,
    session: Option<String>,
    fleet: Option<String>,
    health: Option<String>,
    /// The bearer token itself.
    token: Option<String>,
    /// A file holding the bearer token.
    token_file: Option<PathBuf>,
    /// A file holding the deployment's signing secret: an operator token is minted from it (for a developer's own
    /// stack, as `make run` writes one).
    key_file: Option<PathBuf>,
}

/// Where each service is and the token to present.
pub struct Context {
    placement: String,
    session: String,
    fleet: String,
    health: String,
    token: String,
}

/// The config file's path: `--config`, else `$XDG_CONFIG_HOME/berth/config.yaml`, else `~/.config/berth/config.yaml`.
fn config_path(global: &Global) -> Option<PathBuf> {
    if let Some(path) = &global.config {
        return Some(path.clone());
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(base.join("berth").join("config.yaml"))
}

fn read_config(path: &Path, named: bool) -> Result<ConfigFile, CtlError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_yaml::from_str(&text).map_err(|err| CtlError::Config(format!("{}: {err}", path.display()))),
        // Only a file that was asked for must exist.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && !named => Ok(ConfigFile::default()),
        Err(err) => Err(CtlError::Config(format!("cannot read {}: {err}", path.display()))),
    }
}

fn read_trimmed(path: &Path, what: &str) -> Result<Vec<u8>, CtlError> {
    std::fs::read(path)
        .map(|bytes| bytes.trim_ascii().to_vec())
        .map_err(|err| CtlError::Config(format!("cannot read the {what} {}: {err}", path.display())))
}

impl Context {
    /// The context the flags, the environment and the config file give.
    pub fn resolve(global: &Global) -> Result<Context, CtlError> {
        let path = config_path(global);
        let file = match &path {
            Some(path) => read_config(path, global.config.is_some())?,
            None => ConfigFile::default(),
        };
        let chosen = global.context.clone().or(file.current_context.clone());
        let entry = match &chosen {
            Some(name) => file.contexts.get(name).cloned().ok_or_else(|| {
                let known: Vec<&String> = file.contexts.keys().collect();
                CtlError::Config(format!("no context {name:?} in the config file (it has {known:?})"))
            })?,
            None => ContextEntry::default(),
        };
        let address = |flag: &Option<String>, from_file: &Option<String>, service: Service| {
            flag.clone()
                .or_else(|| from_file.clone())
                .unwrap_or_else(|| service.default_address().to_owned())
        };
        let token = match (&global.token, &global.key_file) {
            (Some(token), _) => token.clone(),
            (None, Some(key_file)) => mint(key_file)?,
            (None, None) => match (&entry.token, &entry.token_file, &entry.key_file) {
                (Some(token), _, _) => token.clone(),
                (None, Some(file), _) => String::from_utf8_lossy(&read_trimmed(file, "token file")?).into_owned(),
                (None, None, Some(key_file)) => mint(key_file)?,
                (None, None, None) => {
                    return Err(CtlError::Config(
                        "no token: give --token (BERTH_TOKEN), --key-file (BERTH_AUTH_KEY_FILE), or a context with \
                         token, token-file or key-file"
                            .into(),
                    ));
                }
            },
        };
        Ok(Context {
            placement: address(&global.placement_endpoint, &entry.placement, Service::Placement),
            session: address(&global.session_endpoint, &entry.session, Service::Session),
            fleet: address(&global.fleet_endpoint, &entry.fleet, Service::Fleet),
            health: address(&global.health_endpoint, &entry.health, Service::Health),
            token,
        })
    }

    /// The address of `service`.
    pub fn address(&self, service: Service) -> &str {
        match service {
            Service::Placement => &self.placement,
            Service::Session => &self.session,
            Service::Fleet => &self.fleet,
            Service::Health => &self.health,
        }
    }

    /// What a failed call to `service` means: a refusal, or the service out of reach.
    pub fn refusal(&self, service: Service) -> impl Fn(tonic::Status) -> CtlError + '_ {
        move |status| CtlError::from_status(service.name(), self.address(service), status)
    }

    /// A channel to `service` carrying the token.
    pub async fn channel(&self, service: Service) -> Result<AuthedChannel, CtlError> {
        let address = self.address(service);
        berth_sdk::connect(address, &self.token).await.map_err(|err| match err {
            berth_sdk::ClientError::BadToken => CtlError::Config(err.to_string()),
            berth_sdk::ClientError::Connect { source, .. } => CtlError::Unreachable {
                service: service.name(),
                address: address.to_owned(),
                why: source.to_string(),
            },
        })
    }
}

/// The deployment's signing secret, read from `key_file`.
pub fn signing_key(key_file: &Path) -> Result<TokenKey, CtlError> {
    TokenKey::new(read_trimmed(key_file, "key file")?).map_err(|err| CtlError::Config(err.to_string()))
}

/// An operator token for an hour, minted with the secret in `key_file`.
fn mint(key_file: &Path) -> Result<String, CtlError> {
    Ok(signing_key(key_file)?.mint("berthctl", Role::Operator, None, 3600))
}
