//! The `fork` provider: a child seeded with the parent's completed turns (everything up to
//! the parent's last `turn/end`; the turn in flight is never copied). A parent with no
//! completed turn forks like a spawn.

use std::sync::Weak;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::host::ChildHost;
use super::inprocess::{resume, start, upgrade};
use super::{Capabilities, Provider, ResumeRequest, Run, StartRequest, SubagentError};
use crate::session::history::completed_turn_seed;

pub struct ForkProvider {
    host: Weak<dyn ChildHost>,
}

impl ForkProvider {
    pub const NAME: &'static str = "fork";

    pub fn new(host: Weak<dyn ChildHost>) -> Self {
        Self { host }
    }
}

impl Provider for ForkProvider {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        true
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'static, Result<Run, SubagentError>> {
        let seed = request.parent.with_events(completed_turn_seed);
        let started = upgrade(&self.host).and_then(|host| start(host, request, seed));
        std::future::ready(started).boxed()
    }

    fn can_resume(&self) -> bool {
        true
    }

    /// Continues the child from its own transcript (a fork child never re-reads its parent).
    fn resume(&self, request: ResumeRequest) -> BoxFuture<'static, Result<Run, SubagentError>> {
        let resumed = upgrade(&self.host).and_then(|host| resume(host, request));
        std::future::ready(resumed).boxed()
    }
}
