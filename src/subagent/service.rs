//! `SubagentService`: the provider registry, request validation and lifecycle reporting.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::FutureExt;

use super::{Provider, ResumeRequest, Run, StartRequest, StopReason, SubagentError};
use crate::agent::StructuredCapture;
use crate::session::AssistantBlock;

/// Who a run is: reported with both lifecycle events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIdentity {
    /// Fresh for every start, even when provider and child id repeat.
    pub run_id: String,
    pub provider: String,
    /// The child session id.
    pub id: String,
    pub local: bool,
    /// The delegating session.
    pub parent: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Lifecycle {
    /// The child is published (its agent is live).
    Start(RunIdentity),
    /// The run's result settled.
    End {
        identity: RunIdentity,
        stop_reason: StopReason,
        last_message: Vec<AssistantBlock>,
    },
}

type Listener = Arc<dyn Fn(&Lifecycle) + Send + Sync>;

#[derive(Default)]
pub struct SubagentService {
    providers: Mutex<Vec<Arc<dyn Provider>>>,
    listeners: Mutex<Vec<Listener>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl SubagentService {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&self, provider: Arc<dyn Provider>) -> Result<(), SubagentError> {
        let mut providers = lock(&self.providers);
        if providers.iter().any(|p| p.name() == provider.name()) {
            return Err(SubagentError::DuplicateProvider(provider.name().to_owned()));
        }
        providers.push(provider);
        Ok(())
    }

    /// Removes a provider: new starts fail, runs already returned are unaffected.
    pub fn unregister(&self, name: &str) -> bool {
        let mut providers = lock(&self.providers);
        let before = providers.len();
        providers.retain(|p| p.name() != name);
        providers.len() != before
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Provider>> {
        lock(&self.providers)
            .iter()
            .find(|p| p.name() == name)
            .cloned()
    }

    /// Provider names in registration order.
    pub fn list(&self) -> Vec<String> {
        lock(&self.providers)
            .iter()
            .map(|p| p.name().to_owned())
            .collect()
    }

    /// Observes every run's lifecycle. A listener that panics is logged and skipped.
    pub fn subscribe(&self, listener: impl Fn(&Lifecycle) + Send + Sync + 'static) {
        lock(&self.listeners).push(Arc::new(listener));
    }

    fn emit(&self, event: &Lifecycle) {
        let listeners = lock(&self.listeners).clone();
        for listener in listeners {
            if std::panic::catch_unwind(AssertUnwindSafe(|| listener(event))).is_err() {
                tracing::error!(?event, "a subagent lifecycle listener panicked");
            }
        }
    }

    /// Validates the request against the provider, in a fixed order, then starts the child.
    pub async fn start(
        self: &Arc<Self>,
        provider: &str,
        request: StartRequest,
    ) -> Result<Run, SubagentError> {
        let found = self
            .get(provider)
            .ok_or_else(|| SubagentError::NoProvider(provider.to_owned()))?;
        let caps = found.capabilities();
        let wanted = [
            (
                "outputSchema",
                request.output_schema.is_some(),
                caps.output_schema,
            ),
            ("depthLimit", request.max_depth.is_some(), caps.depth_limit),
            (
                "toolFilter",
                request.tool_filter.is_some(),
                caps.tool_filter,
            ),
            ("persona", request.persona.is_some(), caps.persona),
        ];
        if let Some((capability, _, _)) = wanted.iter().find(|(_, asked, has)| *asked && !*has) {
            return Err(SubagentError::Unsupported {
                provider: provider.to_owned(),
                capability,
            });
        }
        if let Some(schema) = &request.output_schema {
            StructuredCapture::new(schema.clone())
                .map_err(|e| SubagentError::Schema(e.to_string()))?;
        }
        let parent = request.parent.id.clone();
        let run = found.start(request).await?;
        self.observe(provider, &run, parent);
        Ok(run)
    }

    /// Cold-resumes a stored child through the provider that made it.
    pub async fn resume(
        self: &Arc<Self>,
        provider: &str,
        request: ResumeRequest,
    ) -> Result<Run, SubagentError> {
        let found = self
            .get(provider)
            .ok_or_else(|| SubagentError::NoProvider(provider.to_owned()))?;
        if !found.can_resume() {
            return Err(SubagentError::NoResume(provider.to_owned()));
        }
        let parent = request.parent.id.clone();
        let run = found.resume(request).await?;
        self.observe(provider, &run, parent);
        Ok(run)
    }

    fn observe(self: &Arc<Self>, provider: &str, run: &Run, parent: String) {
        let identity = RunIdentity {
            run_id: uuid::Uuid::new_v4().to_string(),
            provider: provider.to_owned(),
            id: run.id.clone(),
            local: run.local_agent.is_some(),
            parent,
        };
        self.emit(&Lifecycle::Start(identity.clone()));
        let service = Arc::clone(self);
        // The result only: holding the run would keep the child alive past its disposal.
        let settled = run.settled();
        tokio::spawn(
            async move {
                let result = settled.await;
                service.emit(&Lifecycle::End {
                    identity,
                    stop_reason: result.stop_reason,
                    last_message: result.output,
                });
            }
            .boxed(),
        );
    }
}
