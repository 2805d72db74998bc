//! The CoPro paper's semantic message: `[header, length, type, flag, payload, checksum]` as a
//! protobuf [`Envelope`]: the kind of message, who sent it, the payload as the exact bytes
//! that were encoded, and a CRC32C over those bytes.
//!
//! Keeping the payload as bytes (rather than a nested message) makes the checksum cover what
//! was actually sent: protobuf re-encoding is not canonical, so a checksum over a re-encoded
//! message could not be verified.

use prost::Message;

use crate::proto::{Envelope, MessageKind, Origin};

/// The protocol version this build speaks. Bumped only for changes a version-1 peer would
/// misread; additive changes keep it (see the top of `worker.proto`).
pub const PROTOCOL_VERSION: u32 = 1;

/// What can be wrong with a message or a call.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// The peer speaks another protocol version.
    #[error("protocol version {got} is not supported (this side speaks {PROTOCOL_VERSION})")]
    Version {
        /// The version the peer sent.
        got: u32,
    },
    /// A message of another kind than the call expects.
    #[error("expected a {expected:?} message, got kind {got}")]
    Kind {
        /// What the call expects.
        expected: MessageKind,
        /// The raw kind received.
        got: i32,
    },
    /// The payload does not match its checksum.
    #[error("payload checksum mismatch: header says {expected:#010x}, payload has {actual:#010x}")]
    Checksum {
        /// The checksum in the envelope.
        expected: u32,
        /// The checksum of the payload received.
        actual: u32,
    },
    /// The payload is not a valid message.
    #[error("payload does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
    /// A field's value is out of range or inconsistent.
    #[error("invalid message: {0}")]
    Invalid(String),
}

impl From<RpcError> for tonic::Status {
    fn from(e: RpcError) -> Self {
        tonic::Status::invalid_argument(e.to_string())
    }
}

/// Wraps `message` in an envelope of `kind` from `origin`.
pub fn seal(kind: MessageKind, origin: Origin, message: &impl Message) -> Envelope {
    let payload = message.encode_to_vec();
    Envelope {
        version: PROTOCOL_VERSION,
        kind: kind as i32,
        origin: origin as i32,
        payload_crc32c: crc32c::crc32c(&payload),
        payload: payload.into(),
    }
}

/// Checks `envelope`'s version, kind and checksum, and decodes its payload.
pub fn open<M: Message + Default>(
    envelope: &Envelope,
    expected: MessageKind,
) -> Result<M, RpcError> {
    if envelope.version != PROTOCOL_VERSION {
        return Err(RpcError::Version {
            got: envelope.version,
        });
    }
    if envelope.kind != expected as i32 {
        return Err(RpcError::Kind {
            expected,
            got: envelope.kind,
        });
    }
    let actual = crc32c::crc32c(&envelope.payload);
    if actual != envelope.payload_crc32c {
        return Err(RpcError::Checksum {
            expected: envelope.payload_crc32c,
            actual,
        });
    }
    // A clone of `Bytes` shares the buffer: `bytes` fields decode as slices of it.
    Ok(M::decode(envelope.payload.clone())?)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::proto::{CompactionTask, TaskResult};

    fn task() -> CompactionTask {
        CompactionTask {
            job_id: 7,
            lower: Some(b"k1".to_vec()),
            snapshots: vec![3, 9],
            first_output_number: 100,
            output_numbers: 8,
            ..CompactionTask::default()
        }
    }

    #[test]
    fn round_trip() {
        let env = seal(MessageKind::CompactionTask, Origin::Host, &task());
        let back: CompactionTask = open(&env, MessageKind::CompactionTask).unwrap();
        assert_eq!(back, task());
        assert_eq!(env.origin, Origin::Host as i32);
    }

    #[test]
    fn a_flipped_payload_bit_is_caught() {
        let mut env = seal(MessageKind::CompactionTask, Origin::Host, &task());
        let mut flipped = env.payload.to_vec();
        flipped[3] ^= 0x10;
        env.payload = flipped.into();
        let err = open::<CompactionTask>(&env, MessageKind::CompactionTask).unwrap_err();
        assert!(matches!(err, RpcError::Checksum { .. }), "{err}");
    }

    #[test]
    fn wrong_version_and_kind_are_refused() {
        let mut env = seal(MessageKind::CompactionTask, Origin::Host, &task());
        assert!(matches!(
            open::<TaskResult>(&env, MessageKind::CompactionResult),
            Err(RpcError::Kind { got: 1, .. })
        ));
        env.version = 2;
        assert!(matches!(
            open::<CompactionTask>(&env, MessageKind::CompactionTask),
            Err(RpcError::Version { got: 2 })
        ));
    }

    proptest! {
        /// Any payload whose checksum matches either decodes or returns a decode error.
        #[test]
        fn random_payloads_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..512)) {
            let env = Envelope {
                version: PROTOCOL_VERSION,
                kind: MessageKind::CompactionTask as i32,
                origin: Origin::Host as i32,
                payload_crc32c: crc32c::crc32c(&payload),
                payload: payload.into(),
            };
            let _ = open::<CompactionTask>(&env, MessageKind::CompactionTask);
        }
    }
}
