//! Calls into the host other than logging.

/// Puts a record into a Kinesis stream through the host, and answers its sequence number.
///
/// # Errors
///
/// The host's reason, when it could not put the record (no such stream, throttled, not allowed,
/// or no host at all in a native test).
pub fn publish(stream: &str, partition_key: &str, data: &[u8]) -> Result<String, String> {
    imp::publish(stream, partition_key, data)
}

/// Asks the host to restart reading of the calling shard at this sequence number, for example
/// to read a held record (one answered with [`Outcome::Retry`](crate::Outcome::Retry)) again
/// without a restart.
///
/// # Errors
///
/// The host's reason, when it refuses the position (not a sequence number of this shard, or no
/// host at all in a native test).
pub fn seek(sequence_number: &str) -> Result<(), String> {
    imp::seek(sequence_number)
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use crate::__private::wit::host;

    pub(super) fn publish(stream: &str, key: &str, data: &[u8]) -> Result<String, String> {
        host::publish(stream, key, data)
    }

    pub(super) fn seek(sequence_number: &str) -> Result<(), String> {
        host::seek(sequence_number)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    const NO_HOST: &str = "not running inside shardhost (native build)";

    pub(super) fn publish(_stream: &str, _key: &str, _data: &[u8]) -> Result<String, String> {
        Err(NO_HOST.to_owned())
    }

    pub(super) fn seek(_sequence_number: &str) -> Result<(), String> {
        Err(NO_HOST.to_owned())
    }
}
