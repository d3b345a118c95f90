//! The system prompt of a session: its persona, where it works, and any per-run instructions.

use super::structured::STRUCTURED_INSTRUCTION;
use super::Agent;

pub(crate) const DEFAULT_PERSONA: &str =
    "You are kin, a coding agent working inside a software project on \
the user's machine. Be direct and precise. Use the tools you are given when they help; say \
plainly when something failed or could not be done.";

/// When to keep a plan (the `update_plan` tool); said to every session that has the tool.
const PLAN_INSTRUCTION: &str = "For work of three or more steps, call update_plan with the \
whole list of steps first, then again whenever a step starts or finishes, so the user can see \
where you are. Skip it for quick questions and one-step changes.";

pub(crate) fn system_prompt(agent: &Agent) -> String {
    let persona = agent.persona.as_deref().unwrap_or(DEFAULT_PERSONA);
    let mut text = format!("{persona}\n\nWorking directory: {}", agent.cwd.display());
    if agent.tools.get(crate::tools::plan::NAME).is_some() {
        text.push_str("\n\n");
        text.push_str(PLAN_INSTRUCTION);
    }
    if agent.structured.is_some() {
        text.push_str("\n\n");
        text.push_str(STRUCTURED_INSTRUCTION);
    }
    text
}
