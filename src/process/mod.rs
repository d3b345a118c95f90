//! The processes kin starts (tool commands, editor-less terminals, child agents) and how none
//! of them outlives its caller or kin. Knows nothing of tools, ACP or sessions.
//!
//! - [`guard`]: kin's own copy of itself that reaps whatever a command leaves behind;
//! - [`group`]: a command in its own process group, its output collected;
//! - [`child_env`]: no secrets in the environment of started processes;
//! - [`own_env`]: no secrets readable in kin's own environment block or memory;
//! - [`sandbox`]: the kernel sandbox (Landlock) of what kin starts for the model, launched by
//!   [`sandbox_exec`] to a `sandbox_policy` whose writable set `sandbox_writable` computes;
//!   `sandbox_hint` tells its refusals from ordinary permission errors;
//! - `git_command`: the `git` kin runs for itself (worktrees), confined, with the repository's
//!   hooks, filters and other configured commands switched off;
//! - [`truncate`]: head-and-tail caps on large outputs;
//! - `stderr_tail`: the last stderr lines of a child, for the error that names its failure.

pub mod child_env;
pub(crate) mod git_command;
pub(crate) mod git_worktree;
pub mod group;
pub mod guard;
pub mod own_env;
pub mod sandbox;
pub(crate) mod sandbox_dirs;
pub mod sandbox_exec;
pub(crate) mod sandbox_hint;
pub(crate) mod sandbox_policy;
pub(crate) mod sandbox_unreadable;
pub(crate) mod sandbox_writable;
pub(crate) mod stderr_tail;
pub(crate) mod truncate;
