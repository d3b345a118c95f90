//! The system prompt of a session (its persona and per-run instructions) and the preamble that
//! says where it works.

use super::context::tool_schema_bytes;
use super::lean::{lean_specs, FixedCost};
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

/// The system prompt: only text that is the same in every session of its kind (persona and
/// instructions), so that it and the tool schemas after it make a prefix the server's cache
/// keeps between sessions. What varies goes in [`workspace_preamble`]. `lean`: for a small
/// window, without what the lean request leaves out (the plan tool).
pub(crate) fn system_prompt(agent: &Agent, lean: bool) -> String {
    let plan = agent.tools.get(crate::tools::plan::NAME).is_some() && !lean;
    let persona = agent.persona.as_deref().unwrap_or(DEFAULT_PERSONA);
    compose(
        persona,
        is_delegated(agent),
        plan,
        agent.structured.is_some(),
    )
}

/// The system prompt of a top-level session with the `update_plan` tool when `plan`.
pub(crate) fn top_level_prompt(plan: bool) -> String {
    compose(DEFAULT_PERSONA, false, plan, false)
}

fn compose(persona: &str, delegated: bool, plan: bool, structured: bool) -> String {
    let mut text = persona.to_owned();
    for (wanted, instruction) in [
        (delegated, DELEGATED_INSTRUCTION),
        (plan, PLAN_INSTRUCTION),
        (structured, STRUCTURED_INSTRUCTION),
    ] {
        if wanted {
            text.push_str("\n\n");
            text.push_str(instruction);
        }
    }
    text
}

/// What the fixed part of a top-level session's request costs with `tools` (`kin config`
/// shows it): the system prompt and the tool schemas, whole and lean, without the short
/// workspace preamble.
pub fn fixed_cost(tools: &crate::tools::ToolRegistry) -> FixedCost {
    let specs = tools.specs();
    let plan = tools.get(crate::tools::plan::NAME).is_some();
    FixedCost {
        full_bytes: top_level_prompt(plan).len() + tool_schema_bytes(&specs),
        lean_bytes: top_level_prompt(false).len() + tool_schema_bytes(&lean_specs(&specs)),
    }
}

/// What a session is told about where it works, which differs between sessions: the working
/// directory and what its tools found there (the agent definitions `subagent` can run). Sent
/// at the start of the request's first user message, after the stable prefix.
pub(crate) fn workspace_preamble(agent: &Agent, notes: &[String]) -> String {
    let mut text = format!("<workspace>\nWorking directory: {}", agent.cwd.display());
    for note in notes {
        text.push_str("\n\n");
        text.push_str(note);
    }
    text.push_str("\n</workspace>");
    text
}

/// Whether `agent` works for a parent agent: a child delegated in this process, or a session
/// whose header puts it below a parent (in another kin process, say).
fn is_delegated(agent: &Agent) -> bool {
    agent.options.subagent_depth.is_some() || agent.header().delegation_depth > 0
}
