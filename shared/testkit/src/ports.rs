//! Ports for the processes a test starts. A port the kernel hands out for `:0`, released for a child to bind, lies
//! in the ephemeral range, where any outgoing connection on the machine (the tests open thousands) may take it
//! before the child binds it, and the child then dies unable to listen. So a test's ports come from below that
//! range, each handed out at most once per test binary, and only while a bind shows it free.

use std::collections::BTreeSet;
use std::hash::{BuildHasher, RandomState};
use std::net::TcpListener;
use std::sync::Mutex;

/// Where the ports below the ephemeral range start: clear of the well-known and registered services a machine
/// usually runs (Redis' 6379 among them).
const LOWEST: u16 = 10_000;

/// How far above a port its partner may lie and still be below the ephemeral range: a cluster node's bus port is its
/// client port + 10,000.
const PARTNER_SPAN: u16 = 10_000;

static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A port of 127.0.0.1 that is free now and that no outgoing connection will take.
pub fn free_port() -> u16 {
    free_port_where(|_| true)
}

/// A free port, below the ephemeral range, for which `also` holds (e.g. its cluster bus port is free too), and
/// whose port + 10,000 is below that range as well.
pub(crate) fn free_port_where(also: impl Fn(u16) -> bool) -> u16 {
    let highest = ephemeral_start().saturating_sub(PARTNER_SPAN);
    assert!(
        highest > LOWEST + 1_000,
        "the ephemeral port range starts at {}: too low to keep test ports out of it",
        highest + PARTNER_SPAN
    );
    let span = u64::from(highest - LOWEST);
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let start = RandomState::new().hash_one(std::process::id()) % span;
    (0..span)
        .map(|step| LOWEST + ((start + step) % span) as u16)
        .find(|&port| !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() && also(port))
        .inspect(|&port| {
            handed_out.insert(port);
        })
        .expect("a free port below the ephemeral range")
}

/// The first port of the kernel's ephemeral range (Linux' default when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}
