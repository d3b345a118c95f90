//! The size of what a `kin mcp --listen` request may make kin hold. A body is read up to a
//! byte cap, then counted (values, keys) by a pass that builds nothing, before rmcp parses it
//! into JSON trees: a body of many tiny values (`[0,0,0,...]`) would otherwise cost tens of
//! bytes of memory for each byte sent.

use std::cell::Cell;
use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The most a request body may hold.
pub(crate) const MAX_BYTES: usize = 4 * 1024 * 1024;
/// The most JSON values (object keys included) a request body may hold: a tool call's
/// arguments are a few strings; rmcp's tree of this many values is a few megabytes.
pub(crate) const MAX_VALUES: usize = 100_000;

/// Why a body was refused before parsing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    #[error("the request body holds more than {MAX_VALUES} JSON values")]
    TooManyValues,
    #[error("the request body is not JSON: {0}")]
    NotJson(String),
}

/// Checks that `body` is one JSON document of at most [`MAX_VALUES`] values.
pub(crate) fn check(body: &[u8]) -> Result<(), BodyError> {
    let left = Cell::new(MAX_VALUES);
    let mut reader = serde_json::Deserializer::from_slice(body);
    let counted = Counter { left: &left }
        .deserialize(&mut reader)
        .and_then(|()| reader.end());
    match counted {
        Ok(()) => Ok(()),
        Err(_) if left.get() == 0 => Err(BodyError::TooManyValues),
        Err(error) => Err(BodyError::NotJson(error.to_string())),
    }
}

/// Counts the values of one JSON value down from `left`, keeping nothing.
#[derive(Clone, Copy)]
struct Counter<'a> {
    left: &'a Cell<usize>,
}

impl Counter<'_> {
    fn tick<E: serde::de::Error>(self) -> Result<(), E> {
        match self.left.get() {
            0 => Err(E::custom("too many values")),
            n => {
                self.left.set(n - 1);
                Ok(())
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, from: D) -> Result<(), D::Error> {
        from.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.tick()
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.tick()
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.tick()
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.tick()
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.tick()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.tick()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        self.tick()?;
        while items.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
        self.tick()?;
        while entries.next_key::<IgnoredAny>()?.is_some() {
            self.tick()?;
            entries.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordinary_request_passes() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"kin","arguments":{"prompt":"hi \"there\"","background":true}}}"#;
        assert!(check(call).is_ok());
    }

    #[test]
    fn many_tiny_values_are_refused_before_any_tree_is_built() {
        let mut body = b"[".to_vec();
        for _ in 0..MAX_VALUES {
            body.extend_from_slice(b"0,");
        }
        body.extend_from_slice(b"0]");
        assert!(matches!(check(&body), Err(BodyError::TooManyValues)));
        let keys: String = (0..MAX_VALUES).map(|i| format!("\"k{i}\":1,")).collect();
        let body = format!("{{{keys}\"z\":1}}");
        assert!(matches!(
            check(body.as_bytes()),
            Err(BodyError::TooManyValues)
        ));
    }

    #[test]
    fn broken_json_says_so() {
        assert!(matches!(check(b"{\"a\":"), Err(BodyError::NotJson(_))));
        assert!(matches!(check(b"{} {}"), Err(BodyError::NotJson(_))));
    }
}
