//! `protocol/schemas/acp.json` is the JSON Schema (draft 2020-12) of every ACP v1 message, as
//! typed by the pinned `agent-client-protocol-schema` crate, with the crate's `x-side` and
//! `x-method` annotations; the tests validate kin's output against it. It must equal what the
//! crate generates: `KIN_SCHEMAS=refresh cargo test --test it acp_schema` rewrites it from the crate.

use crate::common;

use agent_client_protocol_schema::v1;
use schemars::generate::SchemaSettings;
use serde_json::Value;

// Any ACP v1 message, by sender and kind: the root of the generated schema (a plain comment,
// as a doc comment would become the schema's description).
#[derive(schemars::JsonSchema)]
#[schemars(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // never built: only its schema is used
enum AnyMessage {
    AgentRequest(v1::Request<v1::AgentRequest>),
    AgentResponse(v1::Response<v1::AgentResponse>),
    AgentNotification(v1::Notification<v1::AgentNotification>),
    ClientRequest(v1::Request<v1::ClientRequest>),
    ClientResponse(v1::Response<v1::ClientResponse>),
    ClientNotification(v1::Notification<v1::ClientNotification>),
    ProtocolLevelNotification(v1::Notification<v1::ProtocolLevelNotification>),
}

fn generated() -> Value {
    SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<AnyMessage>()
        .to_value()
}

fn shipped() -> Value {
    let path = common::acp_schema_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_shipped_acp_schema_is_what_the_pinned_crate_generates() {
    let generated = generated();
    if std::env::var("KIN_SCHEMAS").is_ok_and(|v| v == "refresh") {
        let text = serde_json::to_string_pretty(&generated).unwrap() + "\n";
        std::fs::write(common::acp_schema_path(), text).unwrap();
    }
    assert!(
        shipped() == generated,
        "{} is out of date: `KIN_SCHEMAS=refresh cargo test --test it acp_schema` rewrites it",
        common::acp_schema_path().display()
    );
    // What the validation in tests/common relies on: typed messages by method and side.
    let defs = &generated["$defs"];
    assert_eq!(defs["PromptResponse"]["x-method"], "session/prompt");
    assert_eq!(defs["PromptResponse"]["x-side"], "agent");
    assert_eq!(defs["SessionNotification"]["x-side"], "client");
}

#[test]
fn the_shipped_acp_schema_matches_the_shared_reference_copy() {
    let Some(reference) = common::shared_reference("acp_schema shared reference copy") else {
        return;
    };
    let path = reference.join("acp-schema/schema.json");
    let copy: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        shipped() == copy,
        "{} differs from {}",
        common::acp_schema_path().display(),
        path.display()
    );
}
