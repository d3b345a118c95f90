//! kin's integration tests, one binary: each module drives the real `kin` binary (or the
//! library's front door) over real pipes. `common` holds the shared fixtures.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod acp_child_remote_files;
mod acp_child_terminals;
mod acp_children;
mod acp_schema;
mod acp_tree;
mod acp_wire;
mod agents_cli;
mod authority;
mod caps;
mod coding_tools;
mod common;
mod continuable_acp;
mod delegation;
mod demo_cli;
mod fan_out;
mod first_hour;
mod limits_openai;
mod local_models;
mod login;
mod mcp_bounds;
mod mcp_images;
mod mcp_listen;
mod mcp_serve;
mod mcp_servers;
mod models;
mod openai_acp;
mod openai_model;
mod outcomes;
mod reference_fixtures;
mod registry;
mod remote_ssh;
mod rich_prompts;
mod run_cli;
mod rust_version;
mod sandbox;
mod sdk_interop;
mod session_durability;
mod session_lock;
mod snapshots;
mod store_layout;
mod store_paging;
mod store_streaming;
mod tool_processes;
mod tool_schemas;
