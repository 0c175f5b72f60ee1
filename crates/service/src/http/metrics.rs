//! `GET /metrics`: the corrected families, then the self-metrics, in the negotiated format.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

use super::{AppState, negotiate};
use crate::exposition::{Format, render};

/// Renders the corrected families of every group (from the engine's snapshot: a scrape never
/// computes rules), then the self-metrics with the engine gauges refreshed, in OpenMetrics 1.0.0
/// (ending with `# EOF`) or text 0.0.4, as [`negotiate::metrics_format`] chooses from `Accept`.
pub(crate) async fn handle(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let format = negotiate::metrics_format(headers.get(header::ACCEPT));
    let body = render_all(&state, format);
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

/// The full `/metrics` body in `format`.
pub fn render_all(state: &AppState, format: Format) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let (stats, metadata_families) = {
        let engine = state.lock_engine();
        render::render_engine(&mut out, &engine, format);
        (engine.stats(), engine.metadata_families())
    };
    state.metrics.observe_engine(&stats, metadata_families);
    // Writing into a String cannot fail.
    let _ = match format {
        Format::OpenMetrics => state.metrics.encode_openmetrics(&mut out),
        Format::Text => state.metrics.encode_text(&mut out),
    };
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}
