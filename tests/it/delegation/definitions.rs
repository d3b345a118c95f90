//! Agent definitions (`.kin/agents/`, `.claude/agents/`) named by a scripted parent through
//! the `subagent` tool's `agent` argument, against the real runtime with the coding tools.

use std::path::Path;
use std::sync::Arc;

use kin::agent::{Agent, StopReason};
use kin::model::{ModelCatalog, ModelChoice, ModelProfile, ModelRequest};
use kin::runtime::{Runtime, RuntimeOptions};
use kin::session::history::HistoryItem;
use kin::tools::PermissionMode;
use serde_json::{json, Value};

use super::support::{calls, last_tool_result, last_user_text, text, ScriptedModel};

/// A runtime with the coding tools, a default model and a second one, `fast`.
struct Setup {
    runtime: Arc<Runtime>,
    _home: tempfile::TempDir,
    cwd: tempfile::TempDir,
    main: Arc<ScriptedModel>,
    fast: Arc<ScriptedModel>,
}

/// The parent calls `subagent` with `args` once, then answers "done"; a child answers from
/// the model it runs on.
fn setup(args: Value) -> Setup {
    let parent_script = move |req: &ModelRequest, answer: &str| {
        if last_user_text(req).starts_with("parent:") {
            return match req.history.last() {
                Some(HistoryItem::ToolResult { .. }) => text("done"),
                _ => calls(&[("subagent", args.clone())]),
            };
        }
        text(answer)
    };
    let script = parent_script.clone();
    let main = ScriptedModel::new(move |req| script(req, "main child"));
    let fast = ScriptedModel::new(move |req| parent_script(req, "fast child"));
    let choice = |id: &str, model: Arc<ScriptedModel>| ModelChoice {
        profile: ModelProfile {
            id: id.into(),
            ..ModelProfile::default()
        },
        model,
    };
    let catalog = ModelCatalog::new(
        choice("default", main.clone()),
        vec![choice("fast", fast.clone())],
        0.9,
    );
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        models: Some(catalog),
        ..RuntimeOptions::default()
    };
    let runtime = Runtime::new(home.path(), main.clone(), kin::tools::builtin(), options).unwrap();
    Setup {
        runtime,
        _home: home,
        cwd,
        main,
        fast,
    }
}

fn define(cwd: &Path, dir: &str, file: &str, text: &str) {
    let dir = cwd.join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(file), text).unwrap();
}

impl Setup {
    fn session(&self, mode: PermissionMode) -> Arc<Agent> {
        let agent = self
            .runtime
            .host()
            .create_session(self.cwd.path().to_owned(), Vec::new(), 0)
            .unwrap();
        agent.set_permission_mode(mode).unwrap();
        agent
    }

    async fn prompt(&self, agent: &Arc<Agent>) -> StopReason {
        let prompt = super::support::prompt("parent: go");
        let cancel = tokio_util::sync::CancellationToken::new();
        self.runtime
            .host()
            .start_turn(agent.clone(), prompt, None, cancel)
            .await
            .unwrap()
    }

    /// The requests the children made (on either model).
    fn child_requests(&self, parent: &str) -> Vec<ModelRequest> {
        let mut all = self.main.requests();
        all.extend(self.fast.requests());
        all.into_iter().filter(|r| r.session_id != parent).collect()
    }

    /// The tool result the parent saw: (text, is_error).
    fn parent_result(&self, parent: &str) -> (String, bool) {
        let mut all = self.main.requests();
        all.extend(self.fast.requests());
        all.iter()
            .filter(|r| r.session_id == parent)
            .find_map(last_tool_result)
            .unwrap()
    }

    /// The permission mode the child's log records (`ask`, the default, when none).
    fn child_mode(&self, child: &str) -> String {
        let path = self
            ._home
            .path()
            .join(format!("sessions/children/{child}.jsonl"));
        let log = std::fs::read_to_string(path).unwrap();
        log.lines()
            .rev()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .find(|event| event["type"] == "permission/mode")
            .map(|event| event["data"]["mode"].as_str().unwrap().to_owned())
            .unwrap_or_else(|| "ask".into())
    }
}

fn tool_names(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

#[tokio::test]
async fn a_kin_definition_gives_the_child_its_instructions_tools_model_and_a_clamped_mode() {
    let world = setup(json!({"description": "review", "prompt": "look", "agent": "reviewer"}));
    define(
        world.cwd.path(),
        ".kin/agents",
        "reviewer.md",
        "---\nname: reviewer\ndescription: Reviews changes\ntools: [read, grep]\nmodel: fast\n\
         permission: allow\n---\nYou review diffs and say only what is wrong.\n",
    );
    let parent = world.session(PermissionMode::Ask);
    assert_eq!(world.prompt(&parent).await, StopReason::Completed);

    let children = world.child_requests(&parent.id);
    assert_eq!(children.len(), 1, "the child ran once, on `fast`");
    assert_eq!(world.fast.requests().len(), 1);
    let child = &children[0];
    assert!(child
        .system
        .contains("You review diffs and say only what is wrong."));
    assert_eq!(tool_names(child), ["grep", "read"]);
    assert_eq!(
        world.parent_result(&parent.id),
        ("fast child".into(), false)
    );
    // `allow` asked for, under an `ask` parent: the child asks too.
    assert_eq!(world.child_mode(&child.session_id), "ask");

    // The parent was told which agents there are: in its workspace preamble, so that the
    // tool schemas stay the same in every session.
    let parent_request = world
        .main
        .requests()
        .into_iter()
        .find(|r| r.session_id == parent.id)
        .unwrap();
    assert!(parent_request
        .preamble
        .contains("Agents you can name in `agent`:\n- reviewer: Reviews changes"));
    let subagent = parent_request
        .tools
        .iter()
        .find(|t| t.name == "subagent")
        .unwrap();
    assert!(!subagent.description.contains("reviewer"));
}

#[tokio::test]
async fn a_stricter_definition_narrows_the_child_below_its_parent() {
    let world = setup(json!({"description": "look", "prompt": "look", "agent": "looker"}));
    define(
        world.cwd.path(),
        ".kin/agents",
        "looker.md",
        "---\ndescription: Only looks\npermission: read-only\n---\nLook only.\n",
    );
    let parent = world.session(PermissionMode::Allow);
    assert_eq!(world.prompt(&parent).await, StopReason::Completed);
    let children = world.child_requests(&parent.id);
    assert_eq!(world.child_mode(&children[0].session_id), "read-only");
}

#[tokio::test]
async fn a_claude_definition_maps_its_fields_and_notices_what_kin_ignores() {
    let world = setup(json!({"description": "x", "prompt": "x", "agent": "explorer"}));
    define(
        world.cwd.path(),
        ".claude/agents",
        "explorer.md",
        "---\nname: explorer\ndescription: Explores code\ntools: Read, Grep, WebFetch\n\
         model: sonnet\ncolor: blue\nhooks: none\n---\nExplore.\n",
    );
    let parent = world.session(PermissionMode::Ask);
    assert_eq!(world.prompt(&parent).await, StopReason::Completed);
    let children = world.child_requests(&parent.id);
    assert_eq!(tool_names(&children[0]), ["grep", "read"]);
    assert!(children[0].system.contains("Explore."));
    let (answer, is_error) = world.parent_result(&parent.id);
    assert!(!is_error);
    assert!(answer.starts_with("main child"), "{answer}");
    assert!(answer.contains("unknown field `hooks` ignored"), "{answer}");
    assert!(
        answer.contains("model `sonnet` is not configured"),
        "{answer}"
    );
    assert!(
        answer.contains("tool `WebFetch` is not a kin tool"),
        "{answer}"
    );
    assert!(!answer.contains("color"), "{answer}");
}

#[tokio::test]
async fn a_bad_or_unknown_definition_is_a_model_facing_error_not_a_failed_session() {
    let world = setup(json!({"description": "x", "prompt": "x", "agent": "broken"}));
    define(
        world.cwd.path(),
        ".kin/agents",
        "broken.md",
        "---\nname: [broken\n---\nbody\n",
    );
    define(
        world.cwd.path(),
        ".kin/agents",
        "fine.md",
        "---\ndescription: Fine\n---\n",
    );
    let parent = world.session(PermissionMode::Ask);
    assert_eq!(world.prompt(&parent).await, StopReason::Completed);
    let (error, is_error) = world.parent_result(&parent.id);
    assert!(is_error);
    assert!(
        error.starts_with("Error: unknown agent \"broken\" (available: fine)"),
        "{error}"
    );
    assert!(error.contains("not valid YAML"), "{error}");
    assert!(world.child_requests(&parent.id).is_empty());

    let world = setup(json!({"description": "x", "prompt": "x", "agent": "nobody"}));
    let parent = world.session(PermissionMode::Ask);
    assert_eq!(world.prompt(&parent).await, StopReason::Completed);
    let (error, is_error) = world.parent_result(&parent.id);
    assert!(is_error);
    assert_eq!(error, "Error: unknown agent \"nobody\" (available: none)");
}
