//! The system prompt of a session: its persona, where it works, and any per-run instructions.

use super::structured::STRUCTURED_INSTRUCTION;
use super::Agent;

const DEFAULT_PERSONA: &str = "You are kin, a coding agent working inside a software project on \
the user's machine. Be direct and precise. Use the tools you are given when they help; say \
plainly when something failed or could not be done.";

pub fn system_prompt(agent: &Agent) -> String {
    let persona = agent.persona.as_deref().unwrap_or(DEFAULT_PERSONA);
    let mut text = format!("{persona}\n\nWorking directory: {}", agent.cwd.display());
    if agent.structured.is_some() {
        text.push_str("\n\n");
        text.push_str(STRUCTURED_INSTRUCTION);
    }
    text
}
