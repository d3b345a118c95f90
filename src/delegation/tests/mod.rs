//! The providers' own tests, beside the code: a child's run held, steered and disposed, the
//! depth cap, the model options a child inherits, structured output and the capability
//! checks. They start children on the path every route shares (`Delegation::start`); the
//! routes themselves are tested through `Delegation::delegate` in `tests/it/delegation/`.

// The scripted model and in-process world the integration catalogue uses (it names the
// crate `kin`, as the integration tests do).
#[path = "../../../tests/it/delegation/support.rs"]
mod support;

mod capabilities;
mod inprocess;
mod structured;

use super::{Delegation, DelegationError, Run, StartRequest};

/// Starts a child through the provider named, after the service's checks.
async fn start_child(
    delegation: &Delegation,
    provider: &str,
    request: StartRequest,
) -> Result<Run, DelegationError> {
    let provider = delegation.provider(provider)?;
    delegation.start(&provider, request).await
}
