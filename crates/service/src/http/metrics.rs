//! `GET /metrics`: the page of [`crate::exposition::page`] in the negotiated format, streamed in
//! its chunks as the client reads, within a render slot (`super::renders`).

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::renders::{Chunks, RenderKind};
use super::{AppState, HttpError, negotiate};
use crate::exposition::Format;
pub use crate::exposition::page::Page;

/// Renders the corrected families of every group (their current outputs: a scrape never
/// computes rules), then `vllm_corrector_family_info`, then the self-metrics with the engine
/// gauges refreshed, in OpenMetrics 1.0.0 (ending with `# EOF`) or text 0.0.4, as
/// [`negotiate::metrics_format`] chooses from `Accept`, in chunks ([`Page`]). Errors:
/// [`HttpError::TooManyScrapes`] when no render slot frees in time.
pub(crate) async fn handle(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, HttpError> {
    let format = negotiate::metrics_format(headers.get(header::ACCEPT));
    let slot = state.renders.acquire(RenderKind::Scrape).await?;
    let chunks = page(&state, format);
    Ok((
        [(header::CONTENT_TYPE, format.content_type())],
        slot.body(chunks),
    )
        .into_response())
}

/// The `/metrics` page of `state`'s engine in `format`, its order of groups taken now.
pub fn page(state: &AppState, format: Format) -> Page {
    Page::new(state.core.clone(), state.live_cell().clone(), format)
}

/// The full `/metrics` body in `format`: every chunk of the [`Page`], joined.
pub fn render_all(state: &AppState, format: Format) -> String {
    let mut chunks = page(state, format);
    let mut out = String::new();
    while let Some(chunk) = chunks.next_chunk() {
        out.push_str(std::str::from_utf8(&chunk).expect("rendered as a String"));
    }
    out
}

impl Chunks for Page {
    fn next_chunk(&mut self) -> Option<Bytes> {
        Page::next_chunk(self)
    }
}

#[cfg(test)]
mod tests;
