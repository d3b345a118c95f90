//! Durations as kin's configuration writes them: seconds (`60`, `0.5`) or with a unit
//! (`"200ms"`, `"60s"`, `"2m"`), in the config file, the environment and on the command line.

use std::time::Duration;

use serde::Deserialize;

/// A duration written as seconds (`60`, `0.5`) or with a unit (`"200ms"`, `"60s"`, `"2m"`).
/// Checked as it is read, so a bad one is reported with its line.
#[derive(Debug, Clone)]
pub(crate) enum DurationValue {
    Seconds(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for DurationValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = DurationValue;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a duration: seconds (60, 0.5) or a string with a unit (\"200ms\", \"60s\", \"2m\")")
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                self.visit_f64(v as f64)
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                self.visit_f64(v as f64)
            }

            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
                let value = DurationValue::Seconds(v);
                duration_value(&value).map_err(E::custom)?;
                Ok(value)
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                let value = DurationValue::Text(v.to_owned());
                duration_value(&value).map_err(E::custom)?;
                Ok(value)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A duration as the config file writes it.
pub(super) fn duration_value(value: &DurationValue) -> Result<Duration, String> {
    match value {
        DurationValue::Seconds(seconds) => seconds_to_duration(*seconds),
        DurationValue::Text(text) => parse_duration(text),
    }
}

fn seconds_to_duration(seconds: f64) -> Result<Duration, String> {
    if seconds.is_finite() && seconds > 0.0 && seconds < 1e9 {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(format!("{seconds} is not a positive number of seconds"))
    }
}

/// `60`, `1.5`, `60s`, `200ms`, `2m`: a positive duration (bare numbers are seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (try 60, 60s, 500ms or 2m)"))?;
    seconds_to_duration(value * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("fast").is_err());
    }
}
