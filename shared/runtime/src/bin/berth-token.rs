//! `berth-token` mints the bearer tokens Berth's services accept, signed with the deployment's secret.
//!
//! ```text
//! berth-token --key-file /etc/berth/key --role client --subject matchmaker
//! berth-token --key-file /etc/berth/key --role game-server --fleet arena-eu --game-server gs-42 --ttl-seconds 86400
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use berth_runtime::auth::{Role, TokenKey};
use clap::Parser;

/// Mints a Berth bearer token and prints it on stdout.
#[derive(Parser, Debug)]
#[command(name = "berth-token", version)]
struct Cli {
    /// File holding the signing secret (at least 32 bytes).
    #[arg(long, env = "BERTH_AUTH_KEY_FILE", required_unless_present = "key")]
    key_file: Option<PathBuf>,
    /// The signing secret itself.
    #[arg(long, env = "BERTH_AUTH_KEY", hide_env_values = true)]
    key: Option<String>,
    /// Role of the caller.
    #[arg(long, value_enum)]
    role: Role,
    /// Who the token is for, as it will appear in logs.
    #[arg(long, default_value = "berth-token")]
    subject: String,
    /// For a game server: the fleet it belongs to.
    #[arg(long, required_if_eq("role", "game-server"))]
    fleet: Option<String>,
    /// For a game server: its own id.
    #[arg(long, required_if_eq("role", "game-server"))]
    game_server: Option<String>,
    /// How long the token is valid, in seconds.
    #[arg(long, default_value_t = 3600)]
    ttl_seconds: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let secret = match (&cli.key_file, &cli.key) {
        (Some(path), _) => match std::fs::read(path) {
            Ok(bytes) => bytes.trim_ascii().to_vec(),
            Err(err) => {
                eprintln!("cannot read {}: {err}", path.display());
                return ExitCode::FAILURE;
            }
        },
        (None, Some(key)) => key.as_bytes().to_vec(),
        (None, None) => unreachable!("clap requires one of them"),
    };
    let key = match TokenKey::new(secret) {
        Ok(key) => key,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::FAILURE;
        }
    };
    let scope = cli.fleet.as_deref().zip(cli.game_server.as_deref());
    println!("{}", key.mint(&cli.subject, cli.role, scope, cli.ttl_seconds));
    ExitCode::SUCCESS
}
