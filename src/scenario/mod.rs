//! Scenarios: a scripted ACP client session against `kin acp --replay DIR` (or, when
//! recording, against `kin acp` on its configured model).
//!
//! A scenario directory holds `input.json` (the client's steps), the recorded session logs that
//! serve as model scripts and as the expected logs, and `stdout.expected.jsonl` (what kin wrote).
//! The runner plays the steps through the real binary over pipes. Used by the snapshot tests,
//! `kin demo` and the benchmarks (the tests' own support makes runs comparable and collects
//! their logs). Format: `protocol/snapshot-format.md`.

mod client;
pub mod demo;
mod input;
mod runner;

pub use client::{PermissionAnswerEntry, PermissionScript};
pub use input::{Input, Step};
pub use runner::{RunEvent, RunOptions, Runner, ScenarioError};
