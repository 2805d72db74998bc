//! The gRPC codec of the worker service: prost's, except that a message that does not
//! decode is `INVALID_ARGUMENT`, not `INTERNAL`. A garbage request is the caller's fault, and
//! `INTERNAL` would tell a host that the worker itself is broken.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// prost's codec with decode errors reported as `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct WireCodec<T, U> {
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for WireCodec<T, U> {
    fn default() -> Self {
        WireCodec { _pd: PhantomData }
    }
}

impl<T, U> Codec for WireCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = WireDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        WireDecoder(ProstDecoder::new(BufferSettings::default()))
    }
}

/// prost's decoder, with its errors made `INVALID_ARGUMENT`.
#[derive(Debug)]
pub struct WireDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for WireDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|e| {
            Status::invalid_argument(format!(
                "the message is not a valid {}: {}",
                std::any::type_name::<U>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("message"),
                e.message()
            ))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
