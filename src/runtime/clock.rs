//! The wall clock, read here and handed to the pure core as an argument (the core never reads
//! it itself): the admission pass's `now` and admission-on-arrival times, in Unix seconds, and
//! the times Gangplank writes into its annotations.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix seconds (0 before 1970, which a misset clock could report).
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Now, to the second, as RFC 3339 (the value of Gangplank's admission annotations).
pub fn rfc3339_now() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or(now)
        .to_string()
}

/// `at` (Unix seconds) as RFC 3339 (an admission's time, recorded in its annotation).
pub fn rfc3339(at: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(at)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admission_s_time_is_written_to_the_second_as_rfc3339() {
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
