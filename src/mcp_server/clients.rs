//! Which client of `kin mcp` a session belongs to. Each MCP client (an MCP session over HTTP;
//! the one client on stdio) sees and steers only the sessions it started or continued while it
//! is connected; once it is gone, its sessions are free for the next client that names them
//! (as after a restart). This keeps clients of one server apart; it is no security boundary:
//! every holder of the server's token is the same user (`protocol/mcp-server.md`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::sync::lock;

/// One client's place at the server; its sessions are released when it is dropped (rmcp drops
/// the client's handler when its MCP session ends).
pub(crate) struct Seat {
    pub(crate) id: u64,
    owners: Arc<Owners>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut map = lock(&self.owners.map);
        map.retain(|_, owner| *owner != self.id);
    }
}

/// The sessions of this server that a connected client holds.
#[derive(Default)]
pub(crate) struct Owners {
    map: Mutex<HashMap<String, u64>>,
    next: AtomicU64,
}

impl Owners {
    /// A place for a new client.
    pub(crate) fn seat(self: &Arc<Self>) -> Seat {
        Seat {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            owners: self.clone(),
        }
    }

    /// Whether `client` may see and act on `session`: it holds it, or no connected client does.
    pub(crate) fn allows(&self, session: &str, client: u64) -> bool {
        lock(&self.map)
            .get(session)
            .is_none_or(|owner| *owner == client)
    }

    /// Makes `session` `client`'s, unless another connected client holds it.
    pub(crate) fn claim(&self, session: &str, client: u64) -> bool {
        let mut map = lock(&self.map);
        match map.get(session) {
            Some(owner) if *owner != client => false,
            _ => {
                map.insert(session.to_owned(), client);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_its_clients_until_the_client_goes() {
        let owners = Arc::new(Owners::default());
        let (first, second) = (owners.seat(), owners.seat());
        assert!(owners.claim("s", first.id));
        assert!(owners.allows("s", first.id));
        assert!(!owners.allows("s", second.id));
        assert!(!owners.claim("s", second.id));
        assert!(owners.allows("other", second.id));
        drop(first);
        assert!(owners.claim("s", second.id));
    }
}
