//! Tasks run as a user's agent definition (the `agent` argument): its instructions, tools,
//! model and permission, also after a restart and under `kin run --session`; its tools
//! limiting a configured MCP server's; its time limit and budget.

use serde_json::{json, Value};

use super::{header, offered, session_id, World};
use crate::common;
use crate::common::mock_openai::{hang_after, text_reply, tool_calls_reply};

/// The mode the last `permission/mode` event of a log set.
fn last_mode(log: &str) -> String {
    log.lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["type"] == "permission/mode")
        .map(|event| {
            event["data"]["mode"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_default()
}

/// A configured stdio MCP server named `t` (tests/mcp/stdio_server.py, its marks going to
/// plain files): tools `mcp__t__count`, `crash`, `echo`, `grow`, `wait`.
fn configure_mcp_server(world: &World) {
    let marks = world.home.path().join("marks");
    let go = world.home.path().join("go");
    let server = json!({
        "command": world.python,
        "args": [common::repo().join("tests/mcp/stdio_server.py"), marks, go],
    });
    let config = format!(
        "mcp_startup_timeout = \"60s\"\n\n[mcp_servers.t]\ncommand = {}\nargs = {}\n",
        server["command"], server["args"]
    );
    world.configure(&config);
}

#[tokio::test]
async fn the_agent_argument_runs_the_task_as_a_users_agent_definition() {
    let Some(world) = World::new() else { return };
    world.configure("[models.small]\nmodel = \"mock-small\"\n");
    world.define(
        "pirate",
        "---\ndescription: Reads and talks like a pirate\ntools: [Read, grep]\nmodel: small\n\
         permission: read-only\n---\nAlways answer like a pirate.\n",
    );
    world.model.push(text_reply(&["Arr, nothing to report."]));
    let result = world
        .call(
            "kin",
            r#"{"prompt": "report", "agent": "pirate", "mode": "ask"}"#,
        )
        .await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["answer"], "Arr, nothing to report.");
    // The definition's instructions, tools and model reached the model.
    let request = &world.model.requests()[0].body;
    assert_eq!(request["model"], "mock-small", "{request}");
    assert!(
        request.to_string().contains("Always answer like a pirate."),
        "{request}"
    );
    assert_eq!(offered(request), ["grep", "read"], "{request}");
    // Its permission narrowed the call's `ask` to read-only.
    let log = world.log(&session_id(&result));
    assert!(log.contains("read-only"), "{log}");
    // An unknown name is refused, listing the defined ones.
    let unknown = world
        .call("kin", r#"{"prompt": "x", "agent": "parrot"}"#)
        .await;
    assert_eq!(unknown["isError"], true, "{unknown}");
    let text = unknown["text"].as_str().unwrap();
    assert!(
        text.contains("unknown agent \"parrot\"") && text.contains("pirate"),
        "{text}"
    );
}

#[tokio::test]
async fn an_agent_definition_still_applies_after_the_server_restarted() {
    let Some(world) = World::new() else { return };
    let definition = world.define(
        "pirate",
        "---\ndescription: Reads like a pirate\ntools: [read]\npermission: read-only\n---\n\
         Always answer like a pirate.\n",
    );
    world.model.push(text_reply(&["Arr, first."]));
    let first = world
        .call(
            "kin",
            r#"{"prompt": "report", "agent": "pirate", "mode": "ask"}"#,
        )
        .await;
    let id = session_id(&first);
    // A new server reopens the session from disk: the model is offered only `read`, under the
    // definition's instructions, and the call's `ask` is narrowed to read-only again. The
    // model's `bash` is not a tool of this session, so nothing runs.
    world.model.push(tool_calls_reply(&[(
        "c1",
        "bash",
        r#"{"command":"touch made.txt"}"#,
    )]));
    world.model.push(text_reply(&["Arr, second."]));
    let result = world.reply(&id, "and now?", "ask").await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["answer"], "Arr, second.");
    let requests = world.model.requests();
    let reopened = &requests[1].body;
    assert_eq!(offered(reopened), ["read"], "{reopened}");
    assert!(
        reopened
            .to_string()
            .contains("Always answer like a pirate."),
        "{reopened}"
    );
    assert!(!world.cwd.path().join("made.txt").exists());
    assert_eq!(last_mode(&world.log(&id)), "read-only");
    let header = header(&world.log(&id));
    assert_eq!(header["agentDefinition"], "pirate", "{header}");
    // The definition deleted: the result says so, the session runs as kin, but within the
    // mode its log records (read-only), whatever the call asks for.
    std::fs::remove_file(definition).unwrap();
    world.model.push(text_reply(&["third"]));
    let result = world.reply(&id, "once more", "ask").await;
    assert_eq!(result["isError"], false, "{result}");
    let notice = result["structured"]["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("\"pirate\"") && notice.contains("no longer defined"),
        "{result}"
    );
    assert!(result["text"]
        .as_str()
        .unwrap()
        .contains("no longer defined"));
    assert_eq!(last_mode(&world.log(&id)), "read-only");
}

#[tokio::test]
async fn a_definitions_tools_limit_the_configured_mcp_servers_tools_too() {
    let Some(world) = World::new() else { return };
    configure_mcp_server(&world);
    world.define(
        "echoer",
        "---\ndescription: Reads and echoes\ntools: [read, mcp__t__echo]\n---\nEcho things.\n",
    );
    world.define(
        "server-user",
        "---\ndescription: Uses the whole server\ntools: [grep, mcp__t]\n---\nUse t.\n",
    );
    // The kin tool run as a definition: its one MCP tool, named as the model sees it.
    world.model.push(text_reply(&["echoed"]));
    let result = world
        .call("kin", r#"{"prompt": "echo", "agent": "echoer"}"#)
        .await;
    assert_eq!(result["isError"], false, "{result}");
    let first = &world.model.requests()[0].body;
    assert_eq!(offered(first), ["mcp__t__echo", "read"], "{first}");
    // A session without a definition sees every tool of the server; its subagent child run
    // as a definition naming the server sees all of them and only its own kin tool.
    let call = json!({"description": "use t", "prompt": "use the server", "agent": "server-user"});
    world
        .model
        .push(tool_calls_reply(&[("c1", "subagent", &call.to_string())]));
    world.model.push(text_reply(&["child done"]));
    world.model.push(text_reply(&["parent done"]));
    let result = world.call("kin", r#"{"prompt": "delegate"}"#).await;
    assert_eq!(result["structured"]["answer"], "parent done", "{result}");
    let requests = world.model.requests();
    let parent = offered(&requests[1].body);
    assert!(
        parent.iter().any(|t| t == "mcp__t__wait") && parent.iter().any(|t| t == "bash"),
        "{parent:?}"
    );
    let child = &requests[2].body;
    assert!(child.to_string().contains("use the server"), "{child}");
    assert_eq!(
        offered(child),
        [
            "grep",
            "mcp__t__count",
            "mcp__t__crash",
            "mcp__t__echo",
            "mcp__t__grow",
            "mcp__t__picture",
            "mcp__t__wait"
        ],
        "{child}"
    );
}

#[tokio::test]
async fn a_definitions_timeout_and_budget_end_an_mcp_task_definitely() {
    let Some(world) = World::new() else { return };
    world.define(
        "hasty",
        "---\ndescription: Has one second\ntimeout: 1\n---\nBe quick.\n",
    );
    world.define(
        "frugal",
        "---\ndescription: Has twenty tokens\nbudget: 20\n---\nBe brief.\n",
    );
    // The model stalls: the definition's time limit ends the task, which settles isError
    // naming timed_out, and kin hangs up on the model.
    world.model.push(hang_after(&[]));
    let result = world
        .call("kin", r#"{"prompt": "stall", "agent": "hasty"}"#)
        .await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structured"]["state"], "failed", "{result}");
    let error = result["structured"]["error"].as_str().unwrap();
    assert!(error.starts_with("timed_out"), "{result}");
    assert!(result["text"].as_str().unwrap().contains("timed_out"));
    world.assert_model_hung_up().await;
    assert!(world.log(&session_id(&result)).contains("timed_out"));
    // A step of 25 tokens spends the budget of 20: the task stops there, budget_exhausted.
    std::fs::write(world.cwd.path().join("a.txt"), "a\n").unwrap();
    world
        .model
        .push(tool_calls_reply(&[("c1", "read", r#"{"path":"a.txt"}"#)]));
    world.model.push(text_reply(&["never asked"]));
    let result = world
        .call("kin", r#"{"prompt": "read", "agent": "frugal"}"#)
        .await;
    assert_eq!(result["isError"], true, "{result}");
    let error = result["structured"]["error"].as_str().unwrap();
    assert!(error.starts_with("budget_exhausted"), "{result}");
    assert_eq!(world.model.requests().len(), 2);
}

#[tokio::test]
async fn kin_run_session_reopens_a_definitions_session_within_its_permission() {
    let Some(world) = World::new() else { return };
    world.define(
        "reader",
        "---\ndescription: Only reads\ntools: [read, write]\npermission: read-only\n---\n\
         Only read.\n",
    );
    world.model.push(text_reply(&["hello"]));
    let first = world
        .call("kin", r#"{"prompt": "hi", "agent": "reader"}"#)
        .await;
    let id = session_id(&first);
    // Opened by a user with `--mode allow`: the definition's tools, instructions and
    // read-only ceiling apply again, so the write is refused.
    world.model.push(tool_calls_reply(&[(
        "c1",
        "write",
        r#"{"path":"made.txt","content":"x\n"}"#,
    )]));
    world.model.push(text_reply(&["could not write"]));
    let said = world
        .kin(&["run", "--mode", "allow", "--session", &id, "write made.txt"])
        .await;
    assert_eq!(said, "could not write");
    assert!(!world.cwd.path().join("made.txt").exists());
    let requests = world.model.requests();
    let reopened = &requests[1].body;
    assert_eq!(offered(reopened), ["read", "write"], "{reopened}");
    assert!(reopened.to_string().contains("Only read."), "{reopened}");
    let refused = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(refused.contains("read-only"), "{refused}");
}
