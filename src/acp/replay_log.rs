//! `session/load`'s replay read straight from the log, each event sent as it is read (the
//! store's replay read: a step's streamed text only when the step has no message).

use std::path::Path;
use std::sync::Arc;

use crate::session::{Event, SessionStore, StoreError};
use crate::tools::ToolRegistry;

use super::updates::Replayed;

/// The registry an event's tool is described by (MCP tools have their own).
pub(super) type ToolsOf<'a> = &'a dyn Fn(&Event) -> Arc<ToolRegistry>;

/// Replays session `id`'s log through `replay`, handing each event to `also` too.
pub(super) fn replay_log(
    store: &SessionStore,
    id: &str,
    replay: &mut Replayed<'_>,
    (tools, blob_dir): (ToolsOf<'_>, Option<&Path>),
    mut also: impl FnMut(&Event),
) -> Result<(), StoreError> {
    // The whole log is read here, in one go: off the worker, so the writer task (woken on
    // this worker by each update) sends the updates as they are made instead of after.
    off_the_worker(|| {
        store.read_for_replay(id, |event| {
            replay.push(&event, &tools(&event), blob_dir);
            also(&event);
        })
    })?;
    Ok(())
}

/// Runs `work`, which blocks for long, with this worker's other tasks handed to another
/// thread meanwhile (on a multi-threaded runtime; elsewhere it just runs).
fn off_the_worker<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}
