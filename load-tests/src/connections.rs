//! Spreads calls over several HTTP/2 connections. One connection serialises every frame through one socket and
//! one driver task, which would make the client the bottleneck; real callers are many processes, each with its
//! own connection, so the bench opens several and takes them in turn.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Clients (one per connection) handed out round-robin.
pub struct Rotation<T> {
    clients: Vec<T>,
    next: AtomicUsize,
}

impl<T: Clone> Rotation<T> {
    /// Takes `clients` in turn; there must be at least one.
    pub fn new(clients: impl IntoIterator<Item = T>) -> Rotation<T> {
        let clients: Vec<T> = clients.into_iter().collect();
        assert!(!clients.is_empty(), "a rotation needs at least one client");
        Rotation {
            clients,
            next: AtomicUsize::new(0),
        }
    }

    /// The next client; a clone, since tonic clients share their connection and each call needs its own.
    pub fn next(&self) -> T {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        self.clients[index].clone()
    }
}
