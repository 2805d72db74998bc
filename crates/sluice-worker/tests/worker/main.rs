//! The worker as a real process on 127.0.0.1, started and stopped by each test: results
//! against a local run of the same executor, refusals, failures that must leave nothing
//! behind, the decision component, and the process's life (signals, pinning).

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod harness;
mod inputs;

mod execute;
mod lifecycle;
mod refuse;
