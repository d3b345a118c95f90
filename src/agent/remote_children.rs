//! The child agent processes running now, by kin's session id for them: the editor may cancel
//! one (`session/cancel` on the child's id) as it cancels an in-process child's turn.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use crate::sync::lock;

#[derive(Default)]
pub(crate) struct RemoteChildren {
    running: Mutex<HashMap<String, CancellationToken>>,
}

impl RemoteChildren {
    /// `id` runs until [`RemoteChildren::remove`]; `stop` cancels its activation only.
    pub(crate) fn insert(&self, id: &str, stop: CancellationToken) {
        lock(&self.running).insert(id.to_owned(), stop);
    }

    pub(crate) fn remove(&self, id: &str) {
        lock(&self.running).remove(id);
    }

    /// Cancels the activation of `id`; false if none runs.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        match lock(&self.running).get(id) {
            Some(stop) => {
                stop.cancel();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancels_only_the_named_child_while_it_runs() {
        let children = RemoteChildren::default();
        let (a, b) = (CancellationToken::new(), CancellationToken::new());
        children.insert("a", a.clone());
        children.insert("b", b.clone());
        assert!(children.cancel("a"));
        assert!(a.is_cancelled() && !b.is_cancelled());
        children.remove("b");
        assert!(!children.cancel("b"));
    }
}
