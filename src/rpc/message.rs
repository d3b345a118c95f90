//! Classifying one incoming line into request, notification or response.

use serde_json::{Map, Value};

use super::RpcError;

/// What one well-formed line turned out to be.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: Value,
        result: Result<Value, RpcError>,
    },
}

/// Classifies a line. `Ok(None)` is a blank line (ignored); an `Err` carries the id to answer
/// with (always `null` here, since a line we cannot classify has no trustworthy id).
pub fn classify(line: &[u8]) -> Result<Option<Incoming>, RpcError> {
    let text = std::str::from_utf8(line).map_err(|e| {
        RpcError::parse_error(format!("parse error: line is not valid UTF-8 ({e})"))
    })?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| RpcError::parse_error(format!("parse error: invalid JSON ({e})")))?;
    match value {
        Value::Object(object) => classify_object(object).map(Some),
        Value::Array(_) => Err(RpcError::invalid_request(
            "invalid request: JSON-RPC batches are not supported",
        )),
        _ => Err(RpcError::invalid_request(
            "invalid request: a message must be a JSON object",
        )),
    }
}

fn classify_object(mut object: Map<String, Value>) -> Result<Incoming, RpcError> {
    if let Some(version) = object.get("jsonrpc") {
        if version != "2.0" {
            return Err(RpcError::invalid_request(
                "invalid request: `jsonrpc` must be \"2.0\"",
            ));
        }
    }
    let params = match object.remove("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(params @ (Value::Object(_) | Value::Array(_))) => params,
        Some(_) => {
            return Err(RpcError::invalid_request(
                "invalid request: `params` must be an object or an array",
            ))
        }
    };
    let id = object.remove("id");
    if let Some(id) = &id {
        check_id(id)?;
    }
    match object.remove("method") {
        Some(Value::String(method)) => Ok(match id {
            Some(id) => Incoming::Request { id, method, params },
            None => Incoming::Notification { method, params },
        }),
        Some(_) => Err(RpcError::invalid_request(
            "invalid request: `method` must be a string",
        )),
        None => {
            let id = id.ok_or_else(|| {
                RpcError::invalid_request(
                    "invalid request: not a request, notification or response",
                )
            })?;
            let result = match (object.remove("result"), object.remove("error")) {
                (Some(result), None) => Ok(result),
                (None, Some(error)) => Err(serde_json::from_value(error).map_err(|_| {
                    RpcError::invalid_request("invalid response: malformed `error` object")
                })?),
                _ => {
                    return Err(RpcError::invalid_request(
                        "invalid response: needs exactly one of `result` and `error`",
                    ))
                }
            };
            Ok(Incoming::Response { id, result })
        }
    }
}

/// Ids are strings, integers or null; fractional numbers are refused.
fn check_id(id: &Value) -> Result<(), RpcError> {
    match id {
        Value::Null | Value::String(_) => Ok(()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(()),
        _ => Err(RpcError::invalid_request(
            "invalid request: `id` must be a string or an integer",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(line: &str) -> i32 {
        classify(line.as_bytes()).unwrap_err().code
    }

    #[test]
    fn classifies_the_three_kinds() {
        let req = classify(br#"{"jsonrpc":"2.0","id":"a","method":"m"}"#).unwrap();
        assert_eq!(
            req,
            Some(Incoming::Request {
                id: json!("a"),
                method: "m".into(),
                params: json!({})
            })
        );
        let note = classify(br#"{"jsonrpc":"2.0","method":"n","params":{"x":1}}"#).unwrap();
        assert!(matches!(note, Some(Incoming::Notification { .. })));
        let resp = classify(br#"{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}"#);
        assert!(matches!(
            resp,
            Ok(Some(Incoming::Response { result: Err(_), .. }))
        ));
    }

    #[test]
    fn bad_input_codes() {
        assert_eq!(code("{not json"), RpcError::PARSE_ERROR);
        assert_eq!(
            classify(b"{\"id\":1,\"method\":\"\xff\"}")
                .unwrap_err()
                .code,
            RpcError::PARSE_ERROR
        );
        assert_eq!(code("[1,2]"), RpcError::INVALID_REQUEST);
        assert_eq!(code("42"), RpcError::INVALID_REQUEST);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","foo":1}"#),
            RpcError::INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#),
            RpcError::INVALID_REQUEST
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#),
            RpcError::INVALID_REQUEST
        );
        assert_eq!(classify(b"   ").unwrap(), None);
    }
}
