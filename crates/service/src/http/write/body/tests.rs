//! Tests of `body.rs`: what reading a body holds, and how each way it fails is answered.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::HttpBody;
use hyper::body::Frame;

use super::*;
use crate::config::Limits;
use crate::web::WebSettings;

/// A body of `frames`, then its end, or (with `stall`) no end ever.
struct Frames {
    frames: VecDeque<Bytes>,
    stall: bool,
}

impl HttpBody for Frames {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.frames.pop_front() {
            Some(frame) => Poll::Ready(Some(Ok(Frame::data(frame)))),
            None if self.stall => Poll::Pending,
            None => Poll::Ready(None),
        }
    }
}

fn live(limits: Limits) -> Arc<Live> {
    Arc::new(Live::new(limits, Arc::new(WebSettings::default())))
}

/// `frames` as a body [`BodyLimit`] would hand over under `live`'s limits, `announced` long.
fn capped(live: &Arc<Live>, frames: &[Bytes], stall: bool, announced: Option<usize>) -> Capped {
    let body = Body::new(Frames {
        frames: frames.iter().cloned().collect(),
        stall,
    });
    Capped {
        live: Arc::clone(live),
        announced,
        body: DeadlineBody::new(
            live.limits.request_body_timeout,
            Limited::new(body, live.limits.max_body_bytes),
        ),
    }
}

fn held_kib(live: &Live) -> usize {
    crate::live::kib(live.limits.max_inflight_bytes) as usize
        - live.inflight_kib.available_permits()
}

#[tokio::test]
async fn a_body_of_one_frame_is_kept_as_that_frame_without_a_copy() {
    let live = live(Limits::default());
    let frame = Bytes::from(vec![7u8; 3000]);
    let body = read(capped(
        &live,
        std::slice::from_ref(&frame),
        false,
        Some(3000),
    ))
    .await
    .unwrap();
    assert_eq!(
        body.bytes.as_ptr(),
        frame.as_ptr(),
        "the frame itself, not a copy"
    );
    assert_eq!(body.bytes.len(), 3000);
    // Charged its length, in whole KiB.
    assert_eq!(body.charge.bytes(), 3 * 1024);
    assert_eq!(held_kib(&live), 3);
    drop(body);
    assert_eq!(held_kib(&live), 0, "released with the body");
}

#[tokio::test]
async fn a_body_of_many_frames_is_joined_and_charged_its_buffer() {
    let live = live(Limits::default());
    let frames: Vec<Bytes> = (0..5u8).map(|i| Bytes::from(vec![i; 1500])).collect();
    let body = read(capped(&live, &frames, false, None)).await.unwrap();
    let want: Vec<u8> = frames.iter().flat_map(|f| f.iter().copied()).collect();
    assert_eq!(&body.bytes[..], &want[..]);
    // The buffer doubled from 3000 (the first two frames) to 6000 and 12000: at most twice the
    // body, never the frames besides.
    assert!(body.charge.bytes() >= 7500, "{}", body.charge.bytes());
    assert!(body.charge.bytes() <= 2 * 7500, "{}", body.charge.bytes());
    assert_eq!(held_kib(&live) * 1024, body.charge.bytes());
}

#[tokio::test]
async fn a_body_past_the_cap_is_413_naming_it() {
    let live = live(Limits {
        max_body_bytes: 64,
        ..Limits::default()
    });
    let frames = [Bytes::from(vec![0u8; 40]), Bytes::from(vec![0u8; 25])];
    let error = read(capped(&live, &frames, false, None)).await.unwrap_err();
    assert!(
        matches!(error, HttpError::BodyTooLarge { limit: 64 }),
        "{error:?}"
    );
    // Exactly at the cap is read.
    let frames = [Bytes::from(vec![0u8; 40]), Bytes::from(vec![0u8; 24])];
    let body = read(capped(&live, &frames, false, None)).await.unwrap();
    assert_eq!(body.bytes.len(), 64);
}

#[tokio::test]
async fn a_body_that_stalls_is_503_at_its_deadline_and_releases_its_charge() {
    let live = live(Limits {
        request_body_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let started = tokio::time::Instant::now();
    let frames = [Bytes::from_static(b"xx")];
    let error = read(capped(&live, &frames, true, Some(1000)))
        .await
        .unwrap_err();
    assert!(matches!(error, HttpError::BodyTimeout), "{error:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(held_kib(&live), 0);
}

#[tokio::test]
async fn a_body_finding_the_budget_spent_is_503_at_once() {
    let live = live(Limits::default());
    let all = live.inflight_kib.available_permits() as u32;
    let _others = Arc::clone(&live.inflight_kib)
        .try_acquire_many_owned(all)
        .unwrap();
    let frames = [Bytes::from_static(b"xx")];
    let error = read(capped(&live, &frames, true, None)).await.unwrap_err();
    assert!(matches!(error, HttpError::OverBudget), "{error:?}");
}

#[tokio::test]
async fn an_empty_body_is_400() {
    let live = live(Limits::default());
    let error = read(capped(&live, &[Bytes::new()], false, Some(0)))
        .await
        .unwrap_err();
    assert!(matches!(error, HttpError::EmptyBody), "{error:?}");
}
