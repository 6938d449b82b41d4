//! An example dedicated game server on the Berth SDK, small enough to read in one go and real enough to run under
//! a provisioner or in tests: it shows the whole life of a process — register, ready, host the game sessions Berth
//! places on it, admit players by their player session ids, end a match when its last player leaves, and wind down
//! when told to.
//!
//! Configured from the environment the provisioner sets (see [`GameServerConfig::from_env`]); the game port is
//! `BERTH_SDK_PORT`. A player connects over TCP and sends one line, `JOIN <game_session_id> <player_session_id>`;
//! the server answers `WELCOME` and keeps the connection as the player's presence, or `REFUSED <reason>` and
//! closes it. Exits 0 after a termination (or Ctrl-C), non-zero when Berth has declared the server lost.

use std::collections::{HashMap, HashSet};
use std::error::Error;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use berth_proto::health::v1::GameSessionUpdateReason;
use berth_sdk::game_server::{Event, GameServer, GameServerConfig, SdkError};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tracing::{error, info, warn};
use tracing_subscriber::EnvFilter;

/// How long a new connection may take to send its JOIN line.
const JOIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest JOIN line read: two ids of at most 128 characters and the keyword, with room to spare.
const MAX_JOIN_LINE: u64 = 512;
/// Time given to process_ending when the termination carries no deadline.
const ENDING_TIMEOUT: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .init();
    match run().await {
        Ok(code) => code,
        Err(err) => {
            error!("{err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<ExitCode, Box<dyn Error>> {
    let config = GameServerConfig::from_env()?;
    let port = u16::try_from(config.endpoint.port)?;
    let listener = TcpListener::bind(("0.0.0.0", port)).await?;
    info!(port, "listening for players");

    let (server, mut events) = GameServer::connect(config).await?;
    server.ready().await?;
    info!(game_server_id = %server.game_server_id(), "ready for game sessions");

    let game = Game {
        server: server.clone(),
        sessions: Arc::default(),
    };
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let (reason, deadline) = loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    info!(%peer, "player connected");
                    tokio::spawn(game.clone().serve_player(stream));
                }
                Err(err) => warn!("accept failed: {err}"),
            },
            event = events.recv() => match event {
                Some(Event::Terminate { reason, deadline, force }) => {
                    info!(reason = reason.as_str_name(), force, "asked to terminate");
                    break (format!("terminated: {}", reason.as_str_name()), deadline);
                }
                Some(Event::Lost { status }) => {
                    error!(code = ?status.code(), message = status.message(), "Berth declared this server lost");
                    return Ok(ExitCode::FAILURE);
                }
                Some(event) => game.on_event(event),
                None => {
                    error!("the SDK stopped without a reason");
                    return Ok(ExitCode::FAILURE);
                }
            },
            _ = &mut interrupted => {
                info!("interrupted");
                break ("interrupted".to_owned(), None);
            }
        }
    };

    // New players are refused by the closed port; those connected go with the process.
    drop(listener);
    let budget = deadline
        .and_then(|deadline| deadline.duration_since(SystemTime::now()).ok())
        .unwrap_or(ENDING_TIMEOUT);
    match tokio::time::timeout(budget, server.process_ending(reason)).await {
        Ok(Ok(())) => info!("process ending acknowledged; exiting"),
        Ok(Err(err)) => warn!("process_ending failed: {err}; exiting anyway"),
        Err(_) => warn!("process_ending not acknowledged before the deadline; exiting anyway"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The game's own state: the activated game sessions and the players in each.
#[derive(Clone)]
struct Game {
    server: GameServer,
    sessions: Arc<Mutex<HashMap<String, HashSet<String>>>>,
}

impl Game {
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, HashSet<String>>> {
        // The map stays consistent across a panic elsewhere: each change is a single insert or remove.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn on_event(&self, event: Event) {
        match event {
            Event::StartGameSession { game_session, .. } => {
                let game = self.clone();
                tokio::spawn(async move {
                    let id = game_session.game_session_id;
                    match game.server.activate_game_session(id.as_str()).await {
                        Ok(_) => {
                            info!(game_session_id = %id, "game session active");
                            game.sessions().entry(id).or_default();
                        }
                        Err(err) => warn!(game_session_id = %id, "could not activate: {err}"),
                    }
                });
            }
            Event::UpdateGameSession {
                game_session, reason, ..
            } => {
                let id = game_session.game_session_id;
                info!(game_session_id = %id, reason = reason.as_str_name(), "game session updated");
                match reason {
                    GameSessionUpdateReason::TerminationRequested => {
                        self.forget(&id);
                        let server = self.server.clone();
                        tokio::spawn(async move {
                            if let Err(err) = server.end_game_session(id.as_str()).await {
                                warn!(game_session_id = %id, "could not end: {err}");
                            }
                        });
                    }
                    GameSessionUpdateReason::ForceTerminated => self.forget(&id),
                    _ => {}
                }
            }
            Event::ServerChanged { server } => {
                let claim = server.game_server.map(|record| record.claim_status().as_str_name());
                info!(claim = claim.unwrap_or_default(), "the server's record changed");
            }
            // Handled by the main loop, which ends the process.
            Event::Terminate { .. } | Event::Lost { .. } => {}
        }
    }

    /// Stops hosting a session: its players are refused from now on.
    fn forget(&self, game_session_id: &str) {
        let mut sessions = self.sessions();
        sessions.remove(game_session_id);
        self.publish_players(&sessions);
    }

    fn publish_players(&self, sessions: &HashMap<String, HashSet<String>>) {
        self.server.set_connected_players(sessions.values().flatten().cloned());
    }

    async fn serve_player(self, stream: TcpStream) {
        let (reader, mut writer) = stream.into_split();
        let mut reader = BufReader::new(reader.take(MAX_JOIN_LINE));
        let mut line = String::new();
        let read = tokio::time::timeout(JOIN_TIMEOUT, reader.read_line(&mut line)).await;
        let join = match read {
            Ok(Ok(_)) => parse_join(&line),
            _ => None,
        };
        let Some((game_session_id, player_session_id)) = join else {
            let _ = writer
                .write_all(b"REFUSED expected JOIN <game_session_id> <player_session_id>\n")
                .await;
            return;
        };
        if let Err(reason) = self.join(game_session_id, player_session_id).await {
            info!(game_session_id, player_session_id, %reason, "player refused");
            // The player may already be gone; nothing more to do for them either way.
            let _ = writer.write_all(format!("REFUSED {reason}\n").as_bytes()).await;
            return;
        }
        info!(game_session_id, player_session_id, "player joined");
        if writer.write_all(b"WELCOME\n").await.is_ok() {
            // The connection is the player's presence: they are in the game until it closes.
            let mut rest = reader.into_inner().into_inner();
            let _ = tokio::io::copy(&mut rest, &mut tokio::io::sink()).await;
        }
        self.leave(game_session_id, player_session_id).await;
    }

    async fn join(&self, game_session_id: &str, player_session_id: &str) -> Result<(), String> {
        if !self.sessions().contains_key(game_session_id) {
            return Err(format!("game session {game_session_id} is not active on this server"));
        }
        self.server
            .accept_player_session(game_session_id, player_session_id)
            .await
            .map_err(|err| match err {
                SdkError::Refused { code, message, .. } => format!("{} ({code:?})", message.replace('\n', " ")),
                other => other.to_string(),
            })?;
        let mut sessions = self.sessions();
        let Some(players) = sessions.get_mut(game_session_id) else {
            return Err(format!("game session {game_session_id} ended"));
        };
        players.insert(player_session_id.to_owned());
        self.publish_players(&sessions);
        Ok(())
    }

    async fn leave(&self, game_session_id: &str, player_session_id: &str) {
        info!(game_session_id, player_session_id, "player left");
        if let Err(err) = self
            .server
            .remove_player_session(game_session_id, player_session_id)
            .await
        {
            warn!(
                game_session_id,
                player_session_id, "could not remove the player session: {err}"
            );
        }
        let match_over = {
            let mut sessions = self.sessions();
            let emptied = sessions.get_mut(game_session_id).is_some_and(|players| {
                players.remove(player_session_id);
                players.is_empty()
            });
            if emptied {
                sessions.remove(game_session_id);
            }
            self.publish_players(&sessions);
            emptied
        };
        if match_over {
            match self.server.end_game_session(game_session_id).await {
                Ok(_) => info!(game_session_id, "last player left; game session ended"),
                Err(err) => warn!(game_session_id, "could not end the game session: {err}"),
            }
        }
    }
}

/// `JOIN <game_session_id> <player_session_id>`, nothing more.
fn parse_join(line: &str) -> Option<(&str, &str)> {
    let mut words = line.split_whitespace();
    match (words.next(), words.next(), words.next(), words.next()) {
        (Some("JOIN"), Some(game_session_id), Some(player_session_id), None) => {
            Some((game_session_id, player_session_id))
        }
        _ => None,
    }
}
