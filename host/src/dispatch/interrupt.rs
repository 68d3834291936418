//! What ends a shard worker's reading early: its lease lost, a stop, a handoff asked for. One
//! future answers which, for every place the worker waits.

use tokio_util::sync::CancellationToken;

/// Why a worker stops before its next read or batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Interrupt {
    /// The lease is gone: stop at once, write nothing.
    LeaseLost,
    /// Told to stop, or to hand the shard over: write the final checkpoint.
    Stop,
}

/// What interrupts a worker: its lease lost, the stop token, a handoff asked for.
pub(super) struct Interrupts {
    pub lost: CancellationToken,
    pub stop: CancellationToken,
    pub handoff: CancellationToken,
    /// The lease, whose fence is looked at to the instant before a handler is called (the
    /// keep-alive fires `lost` at the fence too, but a call due at that very instant must not
    /// slip in before it runs). None: no lease (a replay).
    pub lease: Option<std::sync::Arc<crate::lease::LeaseHandle>>,
}

impl Interrupts {
    /// Resolves when the worker is interrupted (a lost lease first).
    pub async fn wait(&self) -> Interrupt {
        tokio::select! {
            biased;
            _ = self.lost.cancelled() => Interrupt::LeaseLost,
            _ = self.stop.cancelled() => Interrupt::Stop,
            _ = self.handoff.cancelled() => Interrupt::Stop,
        }
    }

    /// Whether the lease is lost, or past its fence this instant (which fences it).
    pub fn lease_lost(&self) -> bool {
        self.lease.as_ref().is_some_and(|l| l.past_fence())
    }

    /// Nothing interrupts: no lease, and tokens nobody cancels (a replay).
    pub fn none() -> Interrupts {
        Interrupts {
            lost: CancellationToken::new(),
            stop: CancellationToken::new(),
            handoff: CancellationToken::new(),
            lease: None,
        }
    }

    /// Whether the worker is interrupted now.
    pub fn now(&self) -> Option<Interrupt> {
        if self.lease_lost() {
            Some(Interrupt::LeaseLost)
        } else if self.stop.is_cancelled() || self.handoff.is_cancelled() {
            Some(Interrupt::Stop)
        } else {
            None
        }
    }
}
