//! A remote write read whole is admitted to the engine by two layers: a request slot ([`Slot`],
//! `limits.max_concurrent_requests`), then the charge for what decoding it will hold
//! ([`DecodeCharge`], `limits.max_inflight_bytes`). Each waits at most the permit wait
//! ([`super::super::DEFAULT_PERMIT_WAIT`]), then answers 503: well within the 30 s timeout of
//! Prometheus' remote-write client, so a sender never times out on a queue. What they take is kept
//! in the request's [`WriteBody`] and released when the engine is done with it.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::response::IntoResponse;
use tower::ServiceExt;

use super::super::HttpError;
use super::super::layer::{Handle, Inner, Step, layers, take_ready};
use super::body::WriteBody;

/// Layer: a free request slot now, else the first to free within `wait`; 503
/// ([`HttpError::Overloaded`]) when none does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub(crate) wait: Duration,
}

impl<S: Inner<Request<WriteBody>>> Handle<Request<WriteBody>, S> for Slot
where
    S::Future: Send,
{
    type Next = Request<WriteBody>;

    fn handle(&self, inner: &mut S, mut request: Request<WriteBody>) -> Step<S::Future> {
        let slots = Arc::clone(&request.body().live.permits);
        if let Ok(slot) = Arc::clone(&slots).try_acquire_owned() {
            request.body_mut().slot = Some(slot);
            return Step::inner(inner.call(request));
        }
        let (inner, wait) = (take_ready(inner), self.wait);
        Step::waiting(async move {
            match tokio::time::timeout(wait, slots.acquire_owned()).await {
                Ok(Ok(slot)) => {
                    request.body_mut().slot = Some(slot);
                    inner.oneshot(request).await
                }
                _ => Ok(HttpError::Overloaded.into_response()),
            }
        })
    }
}

/// Layer: charges the request for the decoded size its snappy header declares (capped at
/// `limits.max_decoded_bytes`: a larger declaration is answered 413 by the decoder before it
/// allocates) and its decoded structures ([`crate::config::decode_charge`]): at once when the
/// budget has it free, else as soon as others release theirs within `wait`; 503
/// ([`HttpError::OverBudget`]) when it stays spent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecodeCharge {
    pub(crate) wait: Duration,
}

impl<S: Inner<Request<WriteBody>>> Handle<Request<WriteBody>, S> for DecodeCharge
where
    S::Future: Send,
{
    type Next = Request<WriteBody>;

    fn handle(&self, inner: &mut S, mut request: Request<WriteBody>) -> Step<S::Future> {
        let body = request.body_mut();
        body.decoded = snap::raw::decompress_len(&body.bytes)
            .unwrap_or(0)
            .min(body.live.limits.max_decoded_bytes);
        let wanted = body.charge.bytes() + crate::config::decode_charge(body.decoded);
        if body.charge.try_grow_to(wanted) {
            return Step::inner(inner.call(request));
        }
        let (inner, wait) = (take_ready(inner), self.wait);
        Step::waiting(async move {
            if request.body_mut().charge.grow_to(wanted, wait).await {
                inner.oneshot(request).await
            } else {
                Ok(HttpError::OverBudget.into_response())
            }
        })
    }
}

layers!(Slot, DecodeCharge);
