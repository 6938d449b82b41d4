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
    /// Places a game session on a process.
    pub assign_game_session: LuaScript,
    /// Activates a game session.
    pub activate_game_session: LuaScript,
    /// Reads a process's desired state.
    pub desired_state: LuaScript,
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
    let process_lib = format!("{lib}\n{}", include_str!("processes/lib.lua"));
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
        process_ready: process(include_str!("processes/ready.lua")),
        heartbeats: process(include_str!("processes/heartbeats.lua")),
        sweep_processes: process(include_str!("processes/sweep.lua")),
        terminate_process: process(include_str!("processes/terminate.lua")),
        process_ending: process(include_str!("processes/ending.lua")),
        assign_game_session: process(include_str!("processes/assign_session.lua")),
        activate_game_session: process(include_str!("processes/activate_session.lua")),
        desired_state: process(include_str!("processes/desired.lua")),
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
        &s.process_ready,
        &s.heartbeats,
        &s.sweep_processes,
        &s.terminate_process,
        &s.process_ending,
        &s.assign_game_session,
        &s.activate_game_session,
        &s.desired_state,
    ] {
        let mut load = redis::cmd("SCRIPT");
        load.arg("LOAD").arg(&script.source);
        let _: redis::Value = store.query(&load).await?;
    }
    Ok(())
}
