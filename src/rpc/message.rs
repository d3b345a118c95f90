//! Classifying one incoming line into request, notification or response.
//!
//! Parsing a line builds a tree of JSON values, each tens of bytes, from as little as two
//! bytes of input (`[0,0,...]`, `[{},{},...]`): a 32 MiB line of tiny values would cost
//! gigabytes. A cheap scan first counts the values a line holds and refuses one with more than
//! [`MAX_JSON_VALUES`], so the parse costs at most a bounded multiple of that, whatever the
//! line's shape.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::RpcError;

/// Most JSON values (objects, arrays and the members and elements in them) one line may hold:
/// far beyond any message kin exchanges (a prompt of 10,000 blocks holds ~100,000), and a
/// parse of this many tiny values stays around 100 MB.
pub(crate) const MAX_JSON_VALUES: usize = 1 << 20;

/// Whether `line` holds more than `max` JSON values, counted without parsing: every `[`, `{`
/// and `,` outside strings starts one (strings are skipped whole; a malformed line is left
/// to the parser to report).
fn holds_more_values_than(line: &[u8], max: usize) -> bool {
    let mut count = 0usize;
    let mut at = 0;
    while let Some(pos) = memchr::memchr3(b'"', b'[', b'{', &line[at..]).map(|pos| pos + at) {
        // The commas between here and the next string or container.
        count += memchr::memchr_iter(b',', &line[at..pos]).count();
        at = pos + 1;
        if line[pos] == b'"' {
            loop {
                match memchr::memchr2(b'"', b'\\', &line[at..]) {
                    None => return count > max,
                    Some(end) if line[at + end] == b'\\' => at += end + 2,
                    Some(end) => {
                        at += end + 1;
                        break;
                    }
                }
                if at >= line.len() {
                    return count > max;
                }
            }
        } else {
            count += 1;
        }
        if count > max {
            return true;
        }
    }
    count + memchr::memchr_iter(b',', &line[at.min(line.len())..]).count() > max
}

/// What one well-formed line turned out to be.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
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

/// A line kin will not serve, and the id its error reply carries.
#[derive(Debug, PartialEq)]
pub(crate) struct Rejected {
    /// The request's own id when the line is a request (it has a `method`) whose id is valid;
    /// `null` otherwise. A message without `method` is never answered with its id: that id
    /// names one of the other side's requests (or ours), and an error under it would be taken
    /// as an answer to that request.
    pub(crate) id: Value,
    pub(crate) error: RpcError,
}

impl Rejected {
    fn anonymous(error: RpcError) -> Box<Self> {
        Box::new(Self {
            id: Value::Null,
            error,
        })
    }
}

/// Classifies a line: the one place an incoming line is parsed. `Ok(None)` is a blank line
/// (ignored). A rejection is boxed: it is the rare path, and boxing keeps the common result
/// small.
pub(crate) fn classify(line: &[u8]) -> Result<Option<Incoming>, Box<Rejected>> {
    let text = std::str::from_utf8(line).map_err(|e| {
        Rejected::anonymous(RpcError::parse_error(format!(
            "parse error: line is not valid UTF-8 ({e})"
        )))
    })?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    if holds_more_values_than(line, MAX_JSON_VALUES) {
        return Err(Rejected::anonymous(RpcError::parse_error(format!(
            "parse error: the line holds more than {MAX_JSON_VALUES} JSON values"
        ))));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        Rejected::anonymous(RpcError::parse_error(format!(
            "parse error: invalid JSON ({e})"
        )))
    })?;
    match value {
        Value::Object(object) => classify_object(object, text).map(Some),
        Value::Array(_) => Err(Rejected::anonymous(RpcError::invalid_request(
            "invalid request: JSON-RPC batches are not supported",
        ))),
        _ => Err(Rejected::anonymous(RpcError::invalid_request(
            "invalid request: a message must be a JSON object",
        ))),
    }
}

fn classify_object(mut object: Map<String, Value>, text: &str) -> Result<Incoming, Box<Rejected>> {
    let id = object.remove("id");
    let id_valid = id.as_ref().is_none_or(|id| is_valid_id(id, text));
    // From here on, a request's errors carry its id when that id is one we can echo.
    let reply_id = match (&id, object.contains_key("method") && id_valid) {
        (Some(id), true) => id.clone(),
        _ => Value::Null,
    };
    let reject = |message: &str| {
        Box::new(Rejected {
            id: reply_id.clone(),
            error: RpcError::invalid_request(message),
        })
    };
    if !id_valid {
        return Err(reject(
            "invalid request: `id` must be a string or an integer",
        ));
    }
    if let Some(version) = object.get("jsonrpc") {
        if version != "2.0" {
            return Err(reject("invalid request: `jsonrpc` must be \"2.0\""));
        }
    }
    let params = match object.remove("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(params @ (Value::Object(_) | Value::Array(_))) => params,
        Some(_) => {
            return Err(reject(
                "invalid request: `params` must be an object or an array",
            ))
        }
    };
    match object.remove("method") {
        Some(Value::String(method)) => Ok(match id {
            Some(id) => Incoming::Request { id, method, params },
            None => Incoming::Notification { method, params },
        }),
        Some(_) => Err(reject("invalid request: `method` must be a string")),
        None => {
            let id = id.ok_or_else(|| {
                reject("invalid request: not a request, notification or response")
            })?;
            let result = match (object.remove("result"), object.remove("error")) {
                (Some(result), None) => Ok(result),
                (None, Some(error)) => Err(serde_json::from_value(error)
                    .map_err(|_| reject("invalid response: malformed `error` object"))?),
                _ => {
                    return Err(reject(
                        "invalid response: needs exactly one of `result` and `error`",
                    ))
                }
            };
            Ok(Incoming::Response { id, result })
        }
    }
}

/// Ids are strings, integers or null (the ACP `RequestId`); fractional numbers are refused.
fn is_valid_id(id: &Value, text: &str) -> bool {
    match id {
        Value::Null | Value::String(_) => true,
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || (is_negative_zero(id) && id_is_minus_zero(text))
        }
        _ => false,
    }
}

/// Whether `id` is what serde_json makes of `-0`. That is an integer in JSON's grammar, but
/// serde_json (without arbitrary precision) holds it as the float -0.0, which it would write
/// back as `-0.0`; the peer writes such an id as `-0`, so it is echoed as sent.
pub(crate) fn is_negative_zero(id: &Value) -> bool {
    id.as_f64()
        .is_some_and(|f| f == 0.0 && f.is_sign_negative())
}

/// Whether the line's `id` is written `-0` (not `-0.0` or `-0e0`, which are fractional
/// spellings and refused like `1.0`). Reads the line a second time, so only asked for -0.0.
fn id_is_minus_zero(text: &str) -> bool {
    #[derive(Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow)]
        id: &'a RawValue,
    }
    serde_json::from_str::<IdOnly>(text).is_ok_and(|line| line.id.get() == "-0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_counted_outside_strings_only() {
        let count = |line: &str| (0..20).find(|max| !holds_more_values_than(line.as_bytes(), *max));
        assert_eq!(count(r#"{"a":[1,2,3],"b":{}}"#), Some(6));
        assert_eq!(count(r#"["a,[{", "b\\\",{", 1]"#), Some(3));
        assert_eq!(count(r#"[1,2,"unterminated,,,"#), Some(3));
        assert_eq!(count("7"), Some(0));
        let many = format!("[{}0]", "0,".repeat(MAX_JSON_VALUES));
        let rejected = classify(many.as_bytes()).unwrap_err();
        assert_eq!(rejected.error.code, -32700, "{:?}", rejected.error);
    }

    fn code(line: &str) -> i32 {
        classify(line.as_bytes()).unwrap_err().error.code
    }

    /// The id the error reply to `line` carries.
    fn reply_id(line: &str) -> Value {
        classify(line.as_bytes()).unwrap_err().id
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
                .error
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

    #[test]
    fn a_malformed_request_is_answered_under_its_own_id() {
        for (id, text) in [
            (json!(7), "7"),
            (json!("s"), "\"s\""),
            (json!(-3), "-3"),
            (json!(u64::MAX), "18446744073709551615"),
        ] {
            for params in ["\"text\"", "true", "false", "12", "-1.5"] {
                let line =
                    format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"m","params":{params}}}"#);
                let rejected = classify(line.as_bytes()).unwrap_err();
                assert_eq!(rejected.id, id, "{line}");
                assert_eq!(rejected.error.code, RpcError::INVALID_REQUEST, "{line}");
            }
            let bad_method = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":5}}"#);
            assert_eq!(reply_id(&bad_method), id);
            let bad_version = format!(r#"{{"jsonrpc":"1.0","id":{text},"method":"m"}}"#);
            assert_eq!(reply_id(&bad_version), id);
        }
    }

    #[test]
    fn minus_zero_is_an_integer_id_and_other_zero_spellings_are_not() {
        let Ok(Some(Incoming::Request { id, .. })) =
            classify(br#"{"jsonrpc":"2.0","id":-0,"method":"m"}"#)
        else {
            panic!("`-0` is a request id");
        };
        assert!(is_negative_zero(&id));
        let rejected =
            classify(br#"{"jsonrpc":"2.0","id":-0,"method":"m","params":"x"}"#).unwrap_err();
        assert!(is_negative_zero(&rejected.id));
        for spelling in ["-0.0", "-0e0", "0.0", "-0E+0"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{spelling},"method":"m"}}"#);
            assert_eq!(reply_id(&line), Value::Null, "{line}");
        }
    }

    #[test]
    fn unreadable_ids_and_non_requests_are_answered_with_null() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m","params":"x"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#,
            // A notification has no id to echo.
            r#"{"jsonrpc":"2.0","method":"m","params":7}"#,
            // A malformed response's id names a request of the other side, not this line.
            r#"{"jsonrpc":"2.0","id":4,"result":1,"error":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"error":"no"}"#,
            r#"{"jsonrpc":"2.0","id":4}"#,
        ] {
            assert_eq!(reply_id(line), Value::Null, "{line}");
        }
    }
}
