//! A deadline on a request's whole body, counted from when its headers arrived: a client that
//! trickles its body a byte at a time is cut off when the deadline passes, however often bytes
//! come (a deadline between chunks, like tower-http's, would hold such a client forever).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use http_body::{Frame, SizeHint};
use tokio::time::Sleep;

/// The body did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct TooSlow(Duration);

/// `request` with a body that fails with [`TooSlow`] once `limit` has passed from now.
pub fn with_deadline(request: Request, limit: Duration) -> Request {
    request.map(|inner| {
        Body::new(Deadline {
            inner,
            deadline: Box::pin(tokio::time::sleep(limit)),
            limit,
        })
    })
}

struct Deadline {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    limit: Duration,
}

impl http_body::Body for Deadline {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        if self.inner.is_end_stream() {
            return Pin::new(&mut self.inner)
                .poll_frame(cx)
                .map_err(axum::BoxError::from);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(TooSlow(self.limit).into())));
        }
        Pin::new(&mut self.inner)
            .poll_frame(cx)
            .map_err(axum::BoxError::from)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{SinkExt, StreamExt};
    use http_body_util::{BodyExt, StreamBody};

    #[tokio::test(start_paused = true)]
    async fn a_body_trickled_past_its_deadline_fails_however_often_its_bytes_come() {
        let (mut sender, bytes) = futures::channel::mpsc::channel::<Bytes>(1);
        let body = Body::new(StreamBody::new(
            bytes.map(|b| Ok::<_, std::convert::Infallible>(Frame::data(b))),
        ));
        let request = with_deadline(Request::new(body), Duration::from_secs(10));
        let reading = tokio::spawn(request.into_body().collect());
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if sender.send(Bytes::from_static(b"x")).await.is_err() {
                break;
            }
        }
        let err = reading.await.unwrap().unwrap_err();
        assert_eq!(
            err.to_string(),
            "the request body did not arrive within 10s"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_arrives_in_time_is_read_whole() {
        let request = with_deadline(Request::new(Body::from("{}")), Duration::from_secs(10));
        let body = request.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"{}");
    }
}
