//! `seek`: the guest asks its shard to restart reading at a record this reader delivered. The
//! request is kept in the instance's [`SeekPart`] and taken by the runtime when the call
//! returns ([`take_seek`]); on trial it is recorded and the records go on in order.

use crate::capability::{Host, Part, View};
use crate::effects::Effect;

/// Where the guest asked its shard to seek during the current call.
#[derive(Default)]
pub(super) struct SeekPart {
    seek: Option<String>,
}

impl Part for SeekPart {
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The seek the guest asked for in the call that just returned (none: read on), forgotten
/// once taken.
pub fn take_seek<T: Host>(store: &mut T) -> Option<String> {
    store.view::<SeekPart>().part.seek.take()
}

/// Checks `sequence_number` (digits, and only back to what this reader delivered), then keeps
/// it for the end of the call.
pub(super) fn seek(view: View<'_, SeekPart>, sequence_number: String) -> Result<(), String> {
    let ok = !sequence_number.is_empty()
        && sequence_number.len() <= 128
        && sequence_number.bytes().all(|b| b.is_ascii_digit());
    if !ok {
        return Err(format!(
            "seek: `{sequence_number}` is not a sequence number (digits only)"
        ));
    }
    // Only back to what this reader delivered: a seek anywhere else would read records
    // this reader never had, or none at all, over and over.
    if let Some(delivered) = &view.call.delivered
        && let Err(why) = delivered.check(&sequence_number)
    {
        view.call.contained("seek-refused");
        return Err(format!("seek: {sequence_number} refused: {why}"));
    }
    if let Some(effects) = &view.call.effects {
        // On trial: recorded; the records go on in order.
        effects.record(Effect::Seek { sequence_number });
        return Ok(());
    }
    // Applied when the call returns: the rest of the batch is not settled, and reading
    // restarts at this record.
    view.part.seek = Some(sequence_number);
    Ok(())
}
