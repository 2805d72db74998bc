//! Compiles proto/worker.proto with protox (pure Rust: no system `protoc` is needed) and hands
//! the descriptors to tonic's generator.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/worker.proto");
    let descriptors = protox::compile(["proto/worker.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // A request that does not decode is the caller's error: INVALID_ARGUMENT.
        .codec_path("crate::codec::WireCodec")
        // Megabytes each: decoded as slices of the received buffer rather than copied.
        .bytes(".sluice.worker.v1.Envelope.payload")
        .bytes(".sluice.worker.v1.TaskResult.drop_log")
        .compile_fds(descriptors)?;
    Ok(())
}
