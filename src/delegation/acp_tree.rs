//! Links an ACP child into kin's tree: its passed-on traffic (see `acp_client::forward`)
//! becomes host events, which the editor-facing side sends as the client can take them.

use std::sync::Arc;

use serde_json::Value;

use crate::acp_client::{ChildLink, ChildSink};
use crate::agent::host::{HostEvent, HostEvents};
use crate::tools::ClientBridge;

/// Emits a child's traffic on the host's event stream.
struct HostSink(Arc<HostEvents>);

impl ChildSink for HostSink {
    fn update(&self, session: &str, update: &Value) {
        self.0.emit(&HostEvent::ChildUpdate { session, update });
    }

    fn summary(&self, parent: &str, call_id: &str, text: &str) {
        self.0.emit(&HostEvent::ChildSummary {
            parent,
            call_id,
            text,
        });
    }
}

/// The link of child `child` (kin's id) of session `parent`.
pub(super) fn link(
    events: &Arc<HostEvents>,
    parent: &str,
    child: &str,
    call_id: Option<String>,
    title: Option<String>,
    client: Option<Arc<dyn ClientBridge>>,
) -> ChildLink {
    ChildLink {
        parent: parent.to_owned(),
        child: child.to_owned(),
        call_id,
        title,
        sink: Arc::new(HostSink(events.clone())),
        client,
    }
}
