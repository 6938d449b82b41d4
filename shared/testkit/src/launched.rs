//! Cleaning up after the `process` provisioner: the game servers it launches outlive the replica that launched
//! them (as instances outlive a control plane), so a test or a bench that launched some kills them itself.

/// Kills, when dropped, every process launched for the fleets it names, found by the `BERTH_FLEET_ID` the
/// provisioner puts in their environment, so that no run leaves game servers behind.
pub struct Reaper(pub Vec<String>);

impl Drop for Reaper {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        let pids: Vec<i32> = entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .collect();
        for fleet_id in &self.0 {
            let wanted = format!("BERTH_FLEET_ID={fleet_id}");
            for pid in &pids {
                let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                if environ.split(|b| *b == 0).any(|var| var == wanted.as_bytes()) {
                    // SAFETY: kill(2) of a game server launched for this run's fleet; no memory is involved.
                    unsafe {
                        libc::kill(*pid, libc::SIGKILL);
                    }
                }
            }
        }
    }
}
