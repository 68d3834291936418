//! The capability `publish`: the `host` interface's `publish` (a record into one of the streams
//! in the subscription's `publish_to`, bounded by the call's deadline) and `seek` (restart the
//! calling shard's reading at a record it delivered, `seek.rs`). On trial both are recorded
//! (`effects`), never done; what is refused live is refused on trial too.
//!
//! `publish_to` stays a plain key that config reads into the subscription: the supervisor
//! makes the subscription's [`Publisher`](crate::publish::Publisher) from it, and every call
//! carries it (`CallContext::publisher`); this room has no table of its own.

mod seek;

use wasmtime::StoreContextMut;
use wasmtime::component::Linker;

use super::{Capability, GrantError, Host, InstanceContext, Part, Prepared, Shared};
use crate::bindings::HOST_INTERFACE;
use crate::config::{GrantTable, Grants};
use crate::handler::CallContext;
pub use seek::take_seek;
use seek::{SeekPart, seek};

/// The capability: `publish` and `seek` of `shardhost:handler/host`.
pub struct Publish;

/// None: `publish_to` is the subscription's own key (see the module's documentation).
impl GrantTable for Publish {}

impl<T: Host> Capability<T> for Publish {
    fn add_to_linker(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        let mut host = linker.instance(HOST_INTERFACE)?;
        host.func_wrap_async(
            "publish",
            |mut store: StoreContextMut<'_, T>,
             (stream, partition_key, data): (String, String, Vec<u8>)| {
                let view = store.data_mut().view::<SeekPart>();
                let (call, deadline) = (view.call.clone(), view.deadline);
                Box::new(async move {
                    Ok((publish(&call, deadline, stream, partition_key, data).await,))
                })
            },
        )?;
        host.func_wrap(
            "seek",
            |mut store: StoreContextMut<'_, T>, (sequence_number,): (String,)| {
                Ok((seek(store.data_mut().view::<SeekPart>(), sequence_number),))
            },
        )
    }

    fn provides(&self, package: &str, version: &str) -> bool {
        package == "shardhost:handler/host" && matches!(version, "0.1.0" | "0.1.1" | "0.1.2")
    }

    fn prepare(&self, _: &Grants, _: &Shared) -> Result<Box<dyn Prepared>, GrantError> {
        Ok(Box::new(Ready))
    }
}

/// Every component's: where its instances seek is theirs alone.
struct Ready;

impl Prepared for Ready {
    fn instance(&self, _: &InstanceContext<'_>) -> Option<Box<dyn Part>> {
        Some(Box::new(SeekPart::default()))
    }
}

/// `publish`: refused without a `publish_to`, or to a stream it does not list; on trial
/// recorded, not put; live bounded by the call's deadline like guest code.
async fn publish(
    call: &CallContext,
    deadline: std::time::Instant,
    stream: String,
    partition_key: String,
    data: Vec<u8>,
) -> Result<String, String> {
    let Some(publisher) = call.publisher.clone() else {
        return Err(format!(
            "publish to `{stream}` refused: this handler may not publish"
        ));
    };
    if let Some(effects) = &call.effects {
        // On trial: recorded, not put.
        publisher.check(&stream)?;
        return Ok(effects.publish(&stream, &partition_key, data.len()));
    }
    // A publish counts against the call's timeout like guest code does.
    tokio::time::timeout_at(
        deadline.into(),
        publisher.publish(&stream, &partition_key, data),
    )
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "publish to `{stream}` did not finish within the call's timeout"
        ))
    })
}
