//! The one `Runtime` a process holds: session store, model, tools and the registry of live
//! agents. Passed around as `Arc<Runtime>`; there are no globals.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::agent::{Agent, TurnDeps};
use crate::model::Model;
use crate::session::{Header, SessionStore, StoreError};
use crate::time::now_ms;
use crate::tools::ToolRegistry;

/// Steps (model calls) one turn may take before it is stopped.
pub const DEFAULT_MAX_STEPS: u32 = 100;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("session {id} is already open in this process")]
    AlreadyLive { id: String },
}

pub struct Runtime {
    pub store: SessionStore,
    pub model: Arc<dyn Model>,
    pub tools: Arc<ToolRegistry>,
    pub max_steps: u32,
    agents: Mutex<HashMap<String, Arc<Agent>>>,
}

impl Runtime {
    pub fn new(
        home: &Path,
        model: Arc<dyn Model>,
        tools: ToolRegistry,
    ) -> Result<Arc<Self>, StoreError> {
        Ok(Arc::new(Self {
            store: SessionStore::open(home)?,
            model,
            tools: Arc::new(tools),
            max_steps: DEFAULT_MAX_STEPS,
            agents: Mutex::new(HashMap::new()),
        }))
    }

    fn agents(&self) -> MutexGuard<'_, HashMap<String, Arc<Agent>>> {
        self.agents.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn turn_deps(&self, agent: &Agent) -> TurnDeps {
        TurnDeps {
            model: self.model.clone(),
            tools: self.tools.clone(),
            system: crate::agent::system_prompt(&agent.cwd),
            max_steps: self.max_steps,
            client: None,
        }
    }

    /// Creates, stores and publishes a new top-level session.
    pub fn create_session(
        &self,
        cwd: PathBuf,
        additional_directories: Vec<String>,
    ) -> Result<Arc<Agent>, RuntimeError> {
        let header = Header::new(
            uuid::Uuid::new_v4().to_string(),
            now_ms(),
            cwd.to_string_lossy().into_owned(),
            additional_directories,
        );
        let log = self.store.create(&header)?;
        let agent = Arc::new(Agent::new(header, cwd, log, Vec::new()));
        self.publish(agent.clone())?;
        Ok(agent)
    }

    /// The live agent of a stored session, opening it from disk if it is not live yet.
    /// `cwd` is where the client runs it now (it may have moved since it was created).
    pub fn open_session(&self, id: &str, cwd: PathBuf) -> Result<Arc<Agent>, RuntimeError> {
        self.open_session_in(id, cwd, None)
    }

    /// [`Runtime::open_session`] with the additional directories the client sent now (`None`:
    /// those recorded at creation).
    pub fn open_session_in(
        &self,
        id: &str,
        cwd: PathBuf,
        additional: Option<Vec<PathBuf>>,
    ) -> Result<Arc<Agent>, RuntimeError> {
        if let Some(agent) = self.live(id) {
            return Ok(agent);
        }
        let (loaded, log) = self.store.open_for_append(id)?;
        let mut agent = Agent::new(loaded.header, cwd, log, loaded.events);
        if let Some(additional) = additional {
            agent = agent.with_additional_directories(additional);
        }
        let agent = Arc::new(agent);
        match self.publish(agent.clone()) {
            Ok(()) => Ok(agent),
            // Another request opened it meanwhile: use theirs, drop our handle.
            Err(RuntimeError::AlreadyLive { .. }) => self
                .live(id)
                .ok_or_else(|| RuntimeError::Store(StoreError::NotFound { id: id.to_owned() })),
            Err(error) => Err(error),
        }
    }

    /// Publishes an agent; the registry is the collision boundary for session ids.
    pub fn publish(&self, agent: Arc<Agent>) -> Result<(), RuntimeError> {
        let mut agents = self.agents();
        if agents.contains_key(&agent.id) {
            return Err(RuntimeError::AlreadyLive {
                id: agent.id.clone(),
            });
        }
        agents.insert(agent.id.clone(), agent);
        Ok(())
    }

    pub fn live(&self, id: &str) -> Option<Arc<Agent>> {
        self.agents().get(id).cloned()
    }

    /// Removes a live agent from the registry (after cancelling its turn).
    pub fn unpublish(&self, id: &str) -> Option<Arc<Agent>> {
        let agent = self.agents().remove(id);
        if let Some(agent) = &agent {
            agent.cancel();
        }
        agent
    }

    /// Cancels every running turn (shutdown).
    pub fn cancel_all(&self) {
        for agent in self.agents().values() {
            agent.cancel();
        }
    }
}
