//! The metrics a test's server records, read as Prometheus' text: for the tests of the ports,
//! which wait on a gauge instead of a fixed time and count what the server closed.

use std::time::Duration;

/// Prometheus' text of the metrics recorded on this thread (the tests' runtime has one) while
/// it lives.
pub struct Recorded {
    pub handle: metrics_exporter_prometheus::PrometheusHandle,
    _guard: metrics::LocalRecorderGuard<'static>,
}

impl Recorded {
    pub fn start() -> Recorded {
        let recorder = Box::leak(Box::new(
            metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder(),
        ));
        Recorded {
            handle: recorder.handle(),
            _guard: metrics::set_default_local_recorder(recorder),
        }
    }

    /// Connections the extender closed for `reason`.
    #[allow(dead_code)]
    pub fn closed(&self, reason: &str) -> u64 {
        self.value(&format!(
            r#"gangplank_server_connections_closed_total{{server="extender",reason="{reason}"}}"#
        ))
    }

    /// What the series `series` (name and labels, as rendered) reads now.
    pub fn value(&self, series: &str) -> u64 {
        let line = format!("{series} ");
        let text = self.handle.render();
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or_else(|| panic!("no {line}in {text}"))
            .parse()
            .unwrap()
    }

    /// Waits (up to 30 s) until the series `series` (name and labels, as rendered) reads
    /// `value`.
    pub async fn reaches(&self, series: &str, value: u64) {
        let line = format!("{series} {value}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !self.handle.render().lines().any(|l| l == line) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {line} within 30 s in {}",
                self.handle.render()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
