//! The response bodies the host holds for one instance. `send.rs` reads a body whole before
//! the guest sees its response; from its first byte to the moment the guest has read it (or
//! dropped it), it counts against the instance's `limits.memory` ([`MemoryBudget`]), and a
//! body the guest has not read by the end of the call that asked for it is dropped. An
//! instance lives across calls: without this, a guest that keeps its responses would hold
//! host memory outside every bound.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use wasmtime_wasi_http::Error;

use crate::memory::{MemoryBudget, OverBudget};

/// What a guest reading a dropped body gets.
pub(super) const DROPPED: &str = "the response body was dropped: the host drops a body not read \
     by the end of the call that asked for it (read it in that call)";

/// One instance's bodies, and which call it is in.
pub(crate) struct Bodies {
    budget: Arc<MemoryBudget>,
    calls: Mutex<Calls>,
}

#[derive(Default)]
struct Calls {
    /// Counts the ends of calls: a request knows the call it was made in by this.
    call: u64,
    /// The bodies handed to the guest in this call.
    held: Vec<Weak<Mutex<Held>>>,
}

impl Bodies {
    pub(crate) fn new(budget: Arc<MemoryBudget>) -> Arc<Bodies> {
        Arc::new(Bodies {
            budget,
            calls: Mutex::new(Calls::default()),
        })
    }

    fn calls(&self) -> MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The call requests are made in now.
    pub(super) fn call(&self) -> u64 {
        self.calls().call
    }

    /// A body to be read: its frames take from the budget as they arrive, and are given back
    /// when it is dropped before [`Reading::hold`] hands it to the guest.
    pub(super) fn reading(self: &Arc<Self>) -> Reading {
        Reading {
            bodies: self.clone(),
            frames: VecDeque::new(),
            bytes: 0,
        }
    }

    /// Ends a call: every body handed out in it that the guest has not read is dropped, its
    /// bytes given back. A body still being read comes too late and is dropped at once.
    pub(crate) fn end_call(&self) {
        let held = {
            let mut calls = self.calls();
            calls.call += 1;
            std::mem::take(&mut calls.held)
        };
        for held in held.iter().filter_map(Weak::upgrade) {
            self.drop_unread(&mut lock(&held));
        }
    }

    fn drop_unread(&self, held: &mut Held) {
        if held.frames.is_empty() {
            return;
        }
        let unread: usize = held.frames.iter().map(Bytes::len).sum();
        held.frames = VecDeque::new();
        held.counted -= unread;
        held.dropped = true;
        self.budget.give_back_host(unread);
    }
}

/// A body being read into the host: its frames and the bytes they took from the budget.
pub(super) struct Reading {
    bodies: Arc<Bodies>,
    frames: VecDeque<Bytes>,
    bytes: usize,
}

impl Reading {
    /// Adds a frame, if the budget has room for it.
    pub(super) fn push(&mut self, data: Bytes) -> Result<(), OverBudget> {
        self.bodies.budget.take_host(data.len())?;
        self.bytes += data.len();
        self.frames.push_back(data);
        Ok(())
    }

    /// The body read whole, for the guest, made in call `call`.
    pub(super) fn hold(mut self, call: u64) -> HeldBody {
        let bodies = self.bodies.clone();
        let held = Arc::new(Mutex::new(Held {
            frames: std::mem::take(&mut self.frames),
            counted: std::mem::take(&mut self.bytes),
            handed: 0,
            dropped: false,
            told: false,
        }));
        let late = {
            let mut calls = bodies.calls();
            let late = calls.call != call;
            if !late {
                calls.held.retain(|h| h.strong_count() > 0);
                calls.held.push(Arc::downgrade(&held));
            }
            late
        };
        if late {
            bodies.drop_unread(&mut lock(&held));
        }
        HeldBody { held, bodies }
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.bodies.budget.give_back_host(self.bytes);
    }
}

struct Held {
    frames: VecDeque<Bytes>,
    /// Bytes counted against the budget: the frames not handed out yet, and the last one
    /// handed out (wasmtime keeps it until the guest has read all of it).
    counted: usize,
    handed: usize,
    /// Dropped before the guest read it all.
    dropped: bool,
    /// The guest was told so.
    told: bool,
}

fn lock(held: &Mutex<Held>) -> MutexGuard<'_, Held> {
    held.lock().unwrap_or_else(|p| p.into_inner())
}

/// A response body as the guest reads it, a frame at a time.
pub(super) struct HeldBody {
    held: Arc<Mutex<Held>>,
    bodies: Arc<Bodies>,
}

impl Body for HeldBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let mut held = lock(&self.held);
        // Asked for the next frame, wasmtime is done with the one before.
        let read = std::mem::take(&mut held.handed);
        held.counted -= read;
        self.bodies.budget.give_back_host(read);
        if held.dropped {
            if std::mem::replace(&mut held.told, true) {
                return Poll::Ready(None);
            }
            return Poll::Ready(Some(Err(Error::InternalError(Some(DROPPED.to_owned())))));
        }
        match held.frames.pop_front() {
            Some(data) => {
                held.handed = data.len();
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        let held = lock(&self.held);
        held.frames.is_empty() && (!held.dropped || held.told)
    }

    fn size_hint(&self) -> SizeHint {
        let held = lock(&self.held);
        match held.dropped {
            true => SizeHint::default(),
            false => SizeHint::with_exact(held.frames.iter().map(|f| f.len() as u64).sum()),
        }
    }
}

impl Drop for HeldBody {
    fn drop(&mut self) {
        let counted = std::mem::take(&mut lock(&self.held).counted);
        self.bodies.budget.give_back_host(counted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn body(bodies: &Arc<Bodies>, call: u64, frames: &[usize]) -> HeldBody {
        let mut reading = bodies.reading();
        for &n in frames {
            reading.push(Bytes::from(vec![b'x'; n])).unwrap();
        }
        reading.hold(call)
    }

    #[tokio::test]
    async fn a_body_counts_until_the_guest_has_read_it() {
        let budget = MemoryBudget::new(1000);
        let bodies = Bodies::new(budget.clone());
        let mut held = body(&bodies, 0, &[300, 200]);
        assert_eq!(budget.host(), 500);
        assert_eq!(held.size_hint().exact(), Some(500));
        let first = held.frame().await.unwrap().unwrap();
        assert_eq!(first.data_ref().unwrap().len(), 300);
        assert_eq!(budget.host(), 500, "the frame handed out is still held");
        held.frame().await.unwrap().unwrap();
        assert_eq!(budget.host(), 200);
        assert!(held.frame().await.is_none());
        assert_eq!(budget.host(), 0);
        drop(held);
        assert_eq!(budget.host(), 0);
    }

    #[tokio::test]
    async fn a_body_past_the_budget_is_refused_and_a_dropped_reading_gives_back() {
        let budget = MemoryBudget::new(1000);
        let bodies = Bodies::new(budget.clone());
        let mut reading = bodies.reading();
        reading.push(Bytes::from(vec![0; 800])).unwrap();
        let over = reading.push(Bytes::from(vec![0; 201])).unwrap_err();
        assert_eq!((over.limit, over.host), (1000, 800));
        drop(reading);
        assert_eq!(budget.host(), 0);
    }

    #[tokio::test]
    async fn a_body_not_read_by_the_end_of_its_call_is_dropped() {
        let budget = MemoryBudget::new(1000);
        let bodies = Bodies::new(budget.clone());
        let mut kept = body(&bodies, bodies.call(), &[100, 100]);
        kept.frame().await.unwrap().unwrap();
        let untouched = body(&bodies, bodies.call(), &[300]);
        assert_eq!(budget.host(), 500);
        bodies.end_call();
        assert_eq!(budget.host(), 100, "only the frame wasmtime holds is left");
        let error = kept.frame().await.unwrap().unwrap_err();
        assert!(
            error
                .to_string()
                .contains("not read by the end of the call")
        );
        assert!(kept.frame().await.is_none());
        assert_eq!(budget.host(), 0);
        drop(untouched);

        // A request of a call that has ended answers an empty, dropped body.
        let late = body(&bodies, bodies.call() - 1, &[400]);
        assert_eq!(budget.host(), 0);
        assert!(late.size_hint().exact().is_none());
    }
}
