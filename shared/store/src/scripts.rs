//! The registry of Lua scripts. Each script is a `.lua` file beside the Rust that calls it, compiled into the
//! binary, run by EVALSHA (redis-rs loads it again when a restarted Redis answers NOSCRIPT) and preloaded on
//! every primary at start-up so that the first requests do not pay for loading.

use std::sync::LazyLock;

use redis::Script;

use crate::{Store, StoreError};

/// Every script of the store.
pub struct Scripts {
    /// Registers a game server as AVAILABLE.
    pub register_game_server: LuaScript,
    /// Updates a game server's utilization, health or data.
    pub update_game_server: LuaScript,
    /// Removes a game server.
    pub deregister_game_server: LuaScript,
    /// Reads one game server and Redis' clock.
    pub describe_game_server: LuaScript,
    /// Reads a page of a fleet's game servers.
    pub list_game_servers: LuaScript,
    /// Sets an instance's status and its servers' places in the pool.
    pub set_instance_status: LuaScript,
    /// Claims one game server.
    pub claim_game_server: LuaScript,
    /// Hands lapsed claims back to the pool.
    pub expire_claims: LuaScript,
    /// Registers or resumes an SDK process.
    pub attach_process: LuaScript,
    /// Unlinks a process whose stream closed.
    pub detach_process: LuaScript,
    /// Marks a process ready.
    pub process_ready: LuaScript,
    /// Records a batch of heartbeats.
    pub heartbeats: LuaScript,
    /// Declares late processes lost.
    pub sweep_processes: LuaScript,
    /// Tells a process to end.
    pub terminate_process: LuaScript,
    /// Ends a process on its own ProcessEnding.
    pub process_ending: LuaScript,
    /// Reads a process's desired state.
    pub desired_state: LuaScript,
    /// Creates a game session on a process.
    pub create_game_session: LuaScript,
    /// Activates a game session.
    pub activate_game_session: LuaScript,
    /// Changes a game session.
    pub update_game_session: LuaScript,
    /// Ends a game session on request.
    pub terminate_game_session: LuaScript,
    /// Ends a game session on its server's word.
    pub end_game_session: LuaScript,
    /// Reserves player sessions.
    pub create_player_sessions: LuaScript,
    /// Lets a player in.
    pub accept_player_session: LuaScript,
    /// Lets a player go.
    pub remove_player_session: LuaScript,
    /// Times out, forces and expires sessions.
    pub sweep_sessions: LuaScript,
    /// Reads sessions by id.
    pub read_sessions: LuaScript,
    /// Reads a page of a session listing.
    pub page_sessions: LuaScript,
    /// Reads a chunk of a search index.
    pub search_sessions: LuaScript,
    /// Reads a fleet's session events with its node's clock.
    pub read_events: LuaScript,
    /// Reads the fleets with their node's clock.
    pub fleets_now: LuaScript,
}

/// One script, with its source kept for preloading.
pub struct LuaScript {
    source: String,
    script: Script,
}

impl LuaScript {
    /// Starts an invocation: add keys and arguments, then hand it to [`Store::invoke`].
    pub fn prepare(&self) -> redis::ScriptInvocation<'_> {
        self.script.prepare_invoke()
    }
}

/// Joins a script with the helpers of its area, so that helpers are written once.
fn with_lib(lib: &str, body: &str) -> LuaScript {
    let source = format!("{lib}\n{body}");
    LuaScript {
        script: Script::new(&source),
        source,
    }
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let lib = include_str!("game_servers/lib.lua");
    // Process scripts end sessions, and session scripts change processes: both areas share one set of helpers.
    let process_lib = [
        lib,
        include_str!("processes/lib.lua"),
        include_str!("sessions/lib.lua"),
        include_str!("processes/lose.lua"),
    ]
    .join("\n");
    let process = |body: &str| with_lib(&process_lib, body);
    Scripts {
        register_game_server: with_lib(lib, include_str!("game_servers/register.lua")),
        update_game_server: with_lib(lib, include_str!("game_servers/update.lua")),
        deregister_game_server: with_lib(lib, include_str!("game_servers/deregister.lua")),
        describe_game_server: with_lib(lib, include_str!("game_servers/describe.lua")),
        list_game_servers: with_lib(lib, include_str!("game_servers/list.lua")),
        set_instance_status: with_lib(lib, include_str!("game_servers/set_instance_status.lua")),
        claim_game_server: with_lib(lib, include_str!("game_servers/claim.lua")),
        expire_claims: with_lib(lib, include_str!("game_servers/expire_claims.lua")),
        attach_process: process(include_str!("processes/attach.lua")),
        detach_process: process(include_str!("processes/detach.lua")),
        process_ready: process(include_str!("processes/ready.lua")),
        heartbeats: process(include_str!("processes/heartbeats.lua")),
        sweep_processes: process(include_str!("processes/sweep.lua")),
        terminate_process: process(include_str!("processes/terminate.lua")),
        process_ending: process(include_str!("processes/ending.lua")),
        desired_state: process(include_str!("processes/desired.lua")),
        create_game_session: process(include_str!("sessions/create.lua")),
        activate_game_session: process(include_str!("sessions/activate.lua")),
        update_game_session: process(include_str!("sessions/update.lua")),
        terminate_game_session: process(include_str!("sessions/terminate.lua")),
        end_game_session: process(include_str!("sessions/end_session.lua")),
        create_player_sessions: process(include_str!("sessions/create_players.lua")),
        accept_player_session: process(include_str!("sessions/accept_player.lua")),
        remove_player_session: process(include_str!("sessions/remove_player.lua")),
        sweep_sessions: process(include_str!("sessions/sweep.lua")),
        read_sessions: process(include_str!("sessions/read.lua")),
        page_sessions: process(include_str!("sessions/page.lua")),
        search_sessions: process(include_str!("sessions/search.lua")),
        read_events: with_lib("", include_str!("sessions/read_events.lua")),
        fleets_now: with_lib("", include_str!("sessions/fleets_now.lua")),
    }
});

/// The scripts.
pub fn scripts() -> &'static Scripts {
    &SCRIPTS
}

/// Loads every script into Redis (on a cluster, into every primary).
pub async fn preload(store: &Store) -> Result<(), StoreError> {
    let s = scripts();
    for script in [
        &s.register_game_server,
        &s.update_game_server,
        &s.deregister_game_server,
        &s.describe_game_server,
        &s.list_game_servers,
        &s.set_instance_status,
        &s.claim_game_server,
        &s.expire_claims,
        &s.attach_process,
        &s.detach_process,
        &s.process_ready,
        &s.heartbeats,
        &s.sweep_processes,
        &s.terminate_process,
        &s.process_ending,
        &s.desired_state,
        &s.create_game_session,
        &s.activate_game_session,
        &s.update_game_session,
        &s.terminate_game_session,
        &s.end_game_session,
        &s.create_player_sessions,
        &s.accept_player_session,
        &s.remove_player_session,
        &s.sweep_sessions,
        &s.read_sessions,
        &s.page_sessions,
        &s.search_sessions,
        &s.read_events,
        &s.fleets_now,
    ] {
        let mut load = redis::cmd("SCRIPT");
        load.arg("LOAD").arg(&script.source);
        let _: redis::Value = store.query(&load).await?;
    }
    Ok(())
}
