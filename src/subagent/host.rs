//! The session host as children see it: [`ChildHost`]. Providers and the in-process driver
//! hold it (weakly: the host's tools hold the providers); [`AgentHost`] is the real one.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::agent::host::{AgentHost, HostError, HostEvent, HostEvents};
use crate::agent::{Agent, TurnError, TurnOutcome};
use crate::session::{SessionStore, UserPart};
use crate::tools::{ClientBridge, ToolRegistry};

pub trait ChildHost: Send + Sync {
    /// Where child sessions are written.
    fn store(&self) -> &SessionStore;
    /// The tools a top-level session offers (a child gets a filtered copy).
    fn tools(&self) -> &Arc<ToolRegistry>;
    /// Publishes a child; the first report carrying its id is [`ChildHost::announce`]'s.
    fn publish(&self, child: Arc<Agent>) -> Result<(), HostError>;
    /// Reports a published child (before its turn starts).
    fn announce(&self, parent: &str, child: &Agent, label: Option<&str>);
    /// Removes exactly this child from the live sessions.
    fn unpublish(&self, child: &Arc<Agent>);
    /// The live session with this id, if any.
    fn live(&self, id: &str) -> Option<Arc<Agent>>;
    /// What the host reports (a child's turn ends arrive as [`HostEvent::TurnEnded`]).
    fn events(&self) -> &Arc<HostEvents>;
    /// Runs one turn of the child (see [`AgentHost::start_turn`]).
    fn start_turn(
        &self,
        child: Arc<Agent>,
        prompt: Vec<UserPart>,
        client: Option<Arc<dyn ClientBridge>>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<TurnOutcome, TurnError>>;
}

impl ChildHost for AgentHost {
    fn store(&self) -> &SessionStore {
        AgentHost::store(self)
    }

    fn tools(&self) -> &Arc<ToolRegistry> {
        AgentHost::tools(self)
    }

    fn publish(&self, child: Arc<Agent>) -> Result<(), HostError> {
        AgentHost::publish(self, child)
    }

    fn announce(&self, parent: &str, child: &Agent, label: Option<&str>) {
        self.events().emit(&HostEvent::ChildStarted {
            parent,
            child,
            label,
        });
    }

    fn unpublish(&self, child: &Arc<Agent>) {
        self.unpublish_agent(child);
    }

    fn live(&self, id: &str) -> Option<Arc<Agent>> {
        AgentHost::live(self, id)
    }

    fn events(&self) -> &Arc<HostEvents> {
        AgentHost::events(self)
    }

    fn start_turn(
        &self,
        child: Arc<Agent>,
        prompt: Vec<UserPart>,
        client: Option<Arc<dyn ClientBridge>>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<TurnOutcome, TurnError>> {
        AgentHost::start_turn(self, child, prompt, client, cancel)
    }
}
