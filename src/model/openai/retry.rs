//! When to try a request again, and how long to wait first.
//!
//! Only failures before any output was streamed are retried: connect errors, HTTP 429 and 5xx.
//! The wait doubles with each attempt from a base, capped, with "equal jitter" (a random point
//! in the upper half of the window) so that many clients do not retry in step. A `Retry-After`
//! header (seconds, or an HTTP date) replaces the computed wait.

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime};

/// The longest computed wait between two attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A `Retry-After` longer than this is not waited for; the error is reported instead.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

/// Whether an HTTP status is worth another attempt.
pub(crate) fn retryable_status(status: u16) -> bool {
    status == 429 || (500..=599).contains(&status)
}

/// The wait before retry number `retry` (0 for the first retry), given the base wait.
pub(crate) fn backoff(base: Duration, retry: u32) -> Duration {
    let window = base
        .saturating_mul(1u32.checked_shl(retry.min(20)).unwrap_or(u32::MAX))
        .min(MAX_BACKOFF);
    let half = window / 2;
    half + half.mul_f64(random_fraction())
}

/// A number in [0, 1) from the standard library's per-process random hash keys; plenty for
/// spreading retries, and it needs no extra crate.
fn random_fraction() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Parses a `Retry-After` value: delta seconds, or an IMF-fixdate such as
/// `Wed, 21 Oct 2015 07:28:00 GMT` (relative to `now`; a date in the past means no wait).
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = parse_http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// IMF-fixdate only (the form RFC 9110 says senders must use).
fn parse_http_date(value: &str) -> Option<SystemTime> {
    // "Wed, 21 Oct 2015 07:28:00 GMT"
    let rest = value.split_once(", ")?.1;
    let mut parts = rest.split(' ');
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut clock = parts.next()?.split(':');
    let (h, m, s): (u64, u64, u64) = (
        clock.next()?.parse().ok()?,
        clock.next()?.parse().ok()?,
        clock.next()?.parse().ok()?,
    );
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day as i64);
    let seconds = u64::try_from(days).ok()? * 86_400 + h * 3600 + m * 60 + s;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_jittered_windows_and_is_capped() {
        let base = Duration::from_millis(100);
        for retry in 0..4 {
            let window = base * 2u32.pow(retry);
            for _ in 0..20 {
                let wait = backoff(base, retry);
                assert!(wait >= window / 2 && wait <= window, "{retry}: {wait:?}");
            }
        }
        assert!(backoff(base, 40) <= MAX_BACKOFF);
    }

    #[test]
    fn retry_after_takes_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn only_rate_limits_and_server_errors_are_retried() {
        assert!(retryable_status(429));
        assert!(retryable_status(503));
        assert!(!retryable_status(400));
        assert!(!retryable_status(401));
        assert!(!retryable_status(404));
    }
}
