//! The `spawn` provider: a fresh child that sees only its prompt.

use std::sync::Weak;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::host::ChildHost;
use super::inprocess::{resume, start, upgrade};
use super::{Capabilities, Provider, ResumeRequest, Run, StartRequest, SubagentError};

pub struct SpawnProvider {
    host: Weak<dyn ChildHost>,
}

impl SpawnProvider {
    pub const NAME: &'static str = "spawn";

    pub fn new(host: Weak<dyn ChildHost>) -> Self {
        Self { host }
    }
}

impl Provider for SpawnProvider {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'static, Result<Run, SubagentError>> {
        let started = upgrade(&self.host).and_then(|host| start(host, request, Vec::new()));
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
