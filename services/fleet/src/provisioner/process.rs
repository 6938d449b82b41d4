//! The `process` provisioner: an instance is a group of local OS processes, `server_processes_per_instance` of the
//! fleet's launch path, each with its own game port, its own pair of Agones SDK ports (for berth-agent) and the
//! SDK's environment. It is what `make run` and the tests
//! use, and what a studio runs on a bare-metal host with one fleet replica per machine.
//!
//! The handle of an instance lists its processes as `pid:start`, the start time (in clock ticks since boot, from
//! `/proc/<pid>/stat`) telling a process from a later one that reuses its pid. Processes outlive the replica that
//! launched them, as instances outlive a control plane: another replica on the same host finds them by their
//! handle, or, when the launching replica died before recording it, by the `BERTH_FLEET_ID` and
//! `BERTH_INSTANCE_ID` in their environment. Linux only (it reads `/proc`).
//!
//! Its parameters (`berth_domain::fleet::parameters::ProcessParameters`): `env`, extra environment variables, and
//! `working_directory`, where the processes start.

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use berth_domain::fleet::parameters::ProcessParameters;
use berth_runtime::sync::lock;
use futures::FutureExt;
use futures::future::BoxFuture;

use super::{Instance, LaunchSpec, ProvisionError, Provisioner, process_ports};

/// How many exits a provisioner remembers: those of the processes it launched that ended lately, enough for the
/// reconciler to read each before it is forgotten, bounded whatever a crash loop does.
const EXITS_KEPT: usize = 1024;

/// Launches instances as local processes.
#[derive(Clone, Debug, Default)]
pub struct ProcessProvisioner {
    /// Where each process's output goes (`<game-server id>.log`); discarded when unset.
    log_dir: Option<PathBuf>,
    /// How the processes this provisioner launched ended, newest last.
    exits: Arc<Mutex<VecDeque<(Pid, String)>>>,
}

/// A process of an instance: its pid and its start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pid {
    pid: i32,
    start: u64,
}

impl ProcessProvisioner {
    /// Launches processes writing their output to `log_dir` (discarded when `None`).
    pub fn new(log_dir: Option<PathBuf>) -> ProcessProvisioner {
        ProcessProvisioner {
            log_dir,
            exits: Arc::default(),
        }
    }

    fn launch_now(&self, spec: &LaunchSpec) -> Result<String, ProvisionError> {
        let settings = ProcessParameters::of(&spec.launch).map_err(|bad| ProvisionError(bad.to_string()))?;
        let mut started = Vec::new();
        for process in &spec.processes {
            match self.spawn(spec, &settings, &process.game_server_id, &process.env) {
                Ok(pid) => started.push(pid),
                Err(err) => {
                    for pid in &started {
                        signal(*pid, libc::SIGKILL);
                    }
                    return Err(err);
                }
            }
        }
        Ok(started
            .iter()
            .map(|p| format!("{}:{}", p.pid, p.start))
            .collect::<Vec<_>>()
            .join(","))
    }

    fn spawn(
        &self,
        spec: &LaunchSpec,
        settings: &ProcessParameters,
        game_server_id: &str,
        env: &[(String, String)],
    ) -> Result<Pid, ProvisionError> {
        let launch_path = &spec.launch.launch_path;
        let mut command = tokio::process::Command::new(launch_path);
        command
            .args(spec.launch.parameters.split_whitespace())
            .envs(&settings.env)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .envs(process_ports()?)
            .stdin(Stdio::null());
        if let Some(dir) = &settings.working_directory {
            command.current_dir(dir);
        }
        let (stdout, stderr) = match &self.log_dir {
            Some(dir) => {
                let path = dir.join(format!("{game_server_id}.log"));
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|err| ProvisionError(format!("cannot open {}: {err}", path.display())))?;
                let copy = file
                    .try_clone()
                    .map_err(|err| ProvisionError(format!("cannot open {}: {err}", path.display())))?;
                (Stdio::from(file), Stdio::from(copy))
            }
            None => (Stdio::null(), Stdio::null()),
        };
        command.stdout(stdout).stderr(stderr);
        let mut child = command
            .spawn()
            .map_err(|err| ProvisionError(format!("cannot start {launch_path}: {err}")))?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| ProvisionError(format!("{launch_path} exited as it started")))?;
        let start = start_time(pid).unwrap_or(0);
        // Reaped when it exits, so that it does not linger as a zombie counted as running; how it exited is kept for
        // the instance's events.
        let launched = Pid { pid, start };
        let exits = self.exits.clone();
        tokio::spawn(async move {
            if let Ok(status) = child.wait().await {
                let mut exits = lock(&exits);
                if exits.len() == EXITS_KEPT {
                    exits.pop_front();
                }
                exits.push_back((launched, status.to_string()));
            }
        });
        Ok(launched)
    }

    /// The processes launched for an instance, as its handle records them.
    fn recorded(instance: Instance<'_>) -> Vec<Pid> {
        instance.handle.split(',').filter_map(parse_pid).collect()
    }

    /// The processes of an instance that still run.
    fn live(instance: Instance<'_>) -> Vec<Pid> {
        let recorded = Self::recorded(instance);
        let found = if recorded.is_empty() {
            by_environment(instance)
        } else {
            recorded
        };
        found.into_iter().filter(|p| alive(*p)).collect()
    }
}

impl Provisioner for ProcessProvisioner {
    fn launch<'a>(&'a self, spec: &'a LaunchSpec) -> BoxFuture<'a, Result<String, ProvisionError>> {
        async move { self.launch_now(spec) }.boxed()
    }

    fn running<'a>(&'a self, instance: Instance<'a>) -> BoxFuture<'a, Result<u32, ProvisionError>> {
        async move { Ok(Self::live(instance).len() as u32) }.boxed()
    }

    fn exits<'a>(&'a self, instance: Instance<'a>) -> BoxFuture<'a, Vec<String>> {
        let exits = lock(&self.exits);
        let found = Self::recorded(instance)
            .iter()
            .filter_map(|pid| {
                exits
                    .iter()
                    .find(|(exited, _)| exited == pid)
                    .map(|(_, how)| how.clone())
            })
            .collect();
        async move { found }.boxed()
    }

    fn stop<'a>(&'a self, instance: Instance<'a>, kill: bool) -> BoxFuture<'a, Result<(), ProvisionError>> {
        async move {
            let sig = if kill { libc::SIGKILL } else { libc::SIGTERM };
            for pid in Self::live(instance) {
                signal(pid, sig);
            }
            Ok(())
        }
        .boxed()
    }
}

fn parse_pid(text: &str) -> Option<Pid> {
    let (pid, start) = text.split_once(':')?;
    Some(Pid {
        pid: pid.parse().ok()?,
        start: start.parse().ok()?,
    })
}

/// A process's state letter and start time, from `/proc/<pid>/stat` (fields 3 and 22; the command name, field 2,
/// is in parentheses and may hold spaces, so fields are counted after its closing one).
fn stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

fn start_time(pid: i32) -> Option<u64> {
    stat(pid).map(|(_, start)| start)
}

fn alive(pid: Pid) -> bool {
    stat(pid.pid).is_some_and(|(state, start)| state != 'Z' && state != 'X' && (pid.start == 0 || start == pid.start))
}

fn signal(pid: Pid, sig: i32) {
    if alive(pid) {
        // SAFETY: kill(2) with a pid checked just now to be the process launched; no memory is involved.
        unsafe {
            libc::kill(pid.pid, sig);
        }
    }
}

/// The processes of an instance found by their environment, for an instance whose handle was never recorded.
fn by_environment(instance: Instance<'_>) -> Vec<Pid> {
    let fleet = format!("BERTH_FLEET_ID={}", instance.fleet_id);
    let id = format!("BERTH_INSTANCE_ID={}", instance.instance_id);
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
                vars.contains(&fleet.as_bytes()) && vars.contains(&id.as_bytes())
            })
        })
        .filter_map(|pid| {
            Some(Pid {
                pid,
                start: start_time(pid)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_start_time_and_state() {
        let me = std::process::id() as i32;
        let (state, start) = stat(me).expect("own stat");
        assert_ne!(state, 'Z');
        assert!(alive(Pid { pid: me, start }));
        assert!(
            !alive(Pid {
                pid: me,
                start: start + 1
            }),
            "a reused pid is another process"
        );
    }

    #[test]
    fn handles_round_trip() {
        assert_eq!(parse_pid("42:1234"), Some(Pid { pid: 42, start: 1234 }));
        assert_eq!(parse_pid("42"), None);
        assert_eq!(parse_pid(""), None);
    }
}
