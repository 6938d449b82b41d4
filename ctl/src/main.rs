//! `berthctl`: Berth from the command line, as `kubectl` and the GameLift CLI are for theirs. It speaks the same
//! gRPC contracts as any client, with the address and token from flags, the environment or a config file of named
//! contexts; prints tables for people and JSON or YAML for scripts; and fails with one line and an exit code a script
//! can test (1 refused or an apply stopped part way, 2 bad usage, configuration or manifest, 3 a service out of
//! reach, 4 a placement not fulfilled).

mod cli;
mod commands {
    pub mod act;
    pub mod apply;
    pub mod describe;
    pub mod events;
    pub mod get;
    pub mod top;
}
mod context;
mod error;
mod lists;
mod manifest;
mod output;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command, Token};
use crate::context::Context;
use crate::error::CtlError;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            err.exit_code()
        }
    }
}

async fn run(cli: Cli) -> Result<(), CtlError> {
    let output = cli.global.output;
    match cli.command {
        Command::Completion { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "berthctl", &mut std::io::stdout());
            Ok(())
        }
        Command::Token(token) => mint(&cli.global, token),
        command => {
            let ctx = Context::resolve(&cli.global)?;
            match command {
                Command::Apply(args) => {
                    let apply = commands::apply::Apply {
                        files: args.files,
                        dry_run: args.dry_run,
                        prune: args.prune,
                    };
                    commands::apply::apply(&ctx, apply).await
                }
                Command::Get(get) => commands::get::get(&ctx, get.kind, output).await,
                Command::Describe(describe) => commands::describe::describe(&ctx, describe.kind, output).await,
                Command::Search(search) => commands::get::search(&ctx, search, output).await,
                Command::Events(events) => commands::events::events(&ctx, events.kind, events.follow, output).await,
                Command::Top(top) => commands::top::top(&ctx, top, output).await,
                Command::Scale(scale) => commands::act::scale(&ctx, scale, output).await,
                Command::Suspend(which) => commands::act::autoscaling(&ctx, which, true, output).await,
                Command::Resume(which) => commands::act::autoscaling(&ctx, which, false, output).await,
                Command::Place(place) => commands::act::place(&ctx, place, output).await,
                Command::Claim(claim) => commands::act::claim(&ctx, claim, output).await,
                Command::Create(create) => commands::act::create(&ctx, create.kind, output).await,
                Command::Terminate(terminate) => commands::act::terminate(&ctx, terminate.kind, output).await,
                Command::Completion { .. } | Command::Token(_) => unreachable!("answered above"),
            }
        }
    }
}

/// Prints a token minted with the secret in `--key-file`.
fn mint(global: &cli::Global, token: Token) -> Result<(), CtlError> {
    let path = global
        .key_file
        .as_ref()
        .ok_or_else(|| CtlError::Config("minting a token takes --key-file (BERTH_AUTH_KEY_FILE)".into()))?;
    let key = context::signing_key(path)?;
    let scope = token.fleet.as_deref().zip(token.game_server.as_deref());
    println!("{}", key.mint(&token.subject, token.role, scope, token.ttl_seconds));
    Ok(())
}
