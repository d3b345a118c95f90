//! The cap on background activations running at once: per delegation tree (its root session,
//! `[delegation] max_running`) and per process (`max_running_per_process`). An activation is
//! admitted at once when both caps have room and nobody waits; otherwise it joins one queue,
//! in arrival order, shows as `queued`, and is handed a slot as soon as one frees that its
//! tree may use. Leaving the queue (a kill) is dropping the ticket. A foreground child never
//! takes a slot, so it never waits behind background ones.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::sync::lock;

/// The slots of one process.
pub(super) struct RunQueue {
    inner: Arc<Inner>,
}

struct Inner {
    per_tree: usize,
    per_process: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: usize,
    /// Running activations per tree (a tree with none is removed).
    trees: HashMap<String, usize>,
    waiting: VecDeque<(String, oneshot::Sender<Slot>)>,
    /// Waiting activations per tree: a tree with one waiting admits nobody past it.
    waiting_in: HashMap<String, usize>,
}

/// A running activation's slots, given back (to the next in line) on drop.
pub(super) struct Slot {
    inner: Arc<Inner>,
    root: String,
    /// False for a slot handed back inside `release` (already counted there).
    armed: bool,
}

/// Whether an activation got a slot at once or waits for one.
pub(super) enum Admission {
    Now(Slot),
    /// Resolves with the slot when it is this one's turn.
    Queued(oneshot::Receiver<Slot>),
}

impl RunQueue {
    pub(super) fn new(per_tree: usize, per_process: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                per_tree: per_tree.max(1),
                per_process: per_process.max(1),
                state: Mutex::default(),
            }),
        }
    }

    pub(super) fn per_tree(&self) -> usize {
        self.inner.per_tree
    }

    /// A slot now if both caps have room and nobody waits, else a place in the line.
    pub(super) fn admit(&self, root: &str) -> Admission {
        let mut state = lock(&self.inner.state);
        // Another tree may pass a full one, never a waiter of its own tree (nor, since slots
        // are handed out as they free, one waiting for the process cap).
        if !state.waiting_in.contains_key(root) && self.inner.has_room(&state, root) {
            return Admission::Now(self.inner.take(&mut state, root));
        }
        let (ticket, slot) = oneshot::channel();
        state.waiting.push_back((root.to_owned(), ticket));
        *state.waiting_in.entry(root.to_owned()).or_insert(0) += 1;
        Admission::Queued(slot)
    }

    /// How many activations wait (for figures and tests).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        lock(&self.inner.state).waiting.len()
    }
}

impl Inner {
    fn has_room(&self, state: &State, root: &str) -> bool {
        state.running < self.per_process
            && state.trees.get(root).copied().unwrap_or(0) < self.per_tree
    }

    fn take(self: &Arc<Self>, state: &mut State, root: &str) -> Slot {
        state.running += 1;
        *state.trees.entry(root.to_owned()).or_insert(0) += 1;
        Slot {
            inner: self.clone(),
            root: root.to_owned(),
            armed: true,
        }
    }

    /// Gives `root`'s slot back and hands free slots to the first waiters that may use them.
    fn release(self: &Arc<Self>, root: &str) {
        let mut state = lock(&self.state);
        state.running = state.running.saturating_sub(1);
        leave(&mut state.trees, root);
        let mut index = 0;
        while state.running < self.per_process && index < state.waiting.len() {
            let fits = {
                let (tree, ticket) = &state.waiting[index];
                if ticket.is_closed() {
                    None
                } else {
                    Some(state.trees.get(tree).copied().unwrap_or(0) < self.per_tree)
                }
            };
            match fits {
                // Killed while waiting: it has left the line.
                None => {
                    if let Some((tree, _)) = state.waiting.remove(index) {
                        leave(&mut state.waiting_in, &tree);
                    }
                }
                Some(false) => index += 1,
                Some(true) => {
                    let Some((tree, ticket)) = state.waiting.remove(index) else {
                        break;
                    };
                    leave(&mut state.waiting_in, &tree);
                    let slot = self.take(&mut state, &tree);
                    if let Err(mut unused) = ticket.send(slot) {
                        // Gone in the meantime: give the slot back here, not by its drop
                        // (that would take this lock again).
                        unused.armed = false;
                        state.running -= 1;
                        leave(&mut state.trees, &tree);
                    }
                }
            }
        }
    }
}

/// One less of `tree` in `counts` (removed at zero).
fn leave(counts: &mut HashMap<String, usize>, tree: &str) {
    if let Some(count) = counts.get_mut(tree) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(tree);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.armed {
            self.inner.release(&self.root);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now(admission: Admission) -> Slot {
        match admission {
            Admission::Now(slot) => slot,
            Admission::Queued(_) => panic!("expected a free slot"),
        }
    }

    fn queued(admission: Admission) -> oneshot::Receiver<Slot> {
        match admission {
            Admission::Queued(waiting) => waiting,
            Admission::Now(_) => panic!("expected to queue"),
        }
    }

    #[tokio::test]
    async fn a_tree_runs_at_most_its_cap_and_waiters_start_in_order() {
        let queue = RunQueue::new(2, 64);
        let first = now(queue.admit("root"));
        let _second = now(queue.admit("root"));
        let third = queued(queue.admit("root"));
        let fourth = queued(queue.admit("root"));
        // Another tree has slots of its own.
        let _other = now(queue.admit("other"));
        drop(first);
        let third = third.await.unwrap();
        assert_eq!(queue.waiting(), 1);
        drop(third);
        let _fourth = fourth.await.unwrap();
        assert_eq!(queue.waiting(), 0);
    }

    #[tokio::test]
    async fn the_process_cap_holds_across_trees_and_a_killed_waiter_is_skipped() {
        let queue = RunQueue::new(8, 1);
        let only = now(queue.admit("a"));
        let killed = queued(queue.admit("b"));
        let next = queued(queue.admit("c"));
        drop(killed);
        drop(only);
        let _next = next.await.unwrap();
        assert_eq!(queue.waiting(), 0);
    }
}
