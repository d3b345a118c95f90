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

/// What a delegated child is told about its situation, whatever its persona.
const DELEGATED_INSTRUCTION: &str = "You are a delegated agent: another agent, your parent, \
gave you this task, and it reads only your final answer. Your parent's permission mode applies \
to you, so an action you ask permission for may be refused without anyone being asked. When \
that happens, do not retry it or look for a way around it: finish what you can, and say in your \
answer what was refused and what you could not do because of it.";

pub(crate) fn system_prompt(agent: &Agent) -> String {
    let persona = agent.persona.as_deref().unwrap_or(DEFAULT_PERSONA);
    let mut text = format!("{persona}\n\nWorking directory: {}", agent.cwd.display());
    if is_delegated(agent) {
        text.push_str("\n\n");
        text.push_str(DELEGATED_INSTRUCTION);
    }
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

/// Whether `agent` works for a parent agent: a child delegated in this process, or a session
/// whose header puts it below a parent (in another kin process, say).
fn is_delegated(agent: &Agent) -> bool {
    agent.options.subagent_depth.is_some() || agent.header().delegation_depth > 0
}
