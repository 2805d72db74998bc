//! How a command fails, and the exit status each failure maps to.
//!
//! | status | meaning                                                                 |
//! |--------|-------------------------------------------------------------------------|
//! | 0      | success (also when stdout is closed early, as by `sluice scan \| head`) |
//! | 1      | the answer is "no": `get` found no value, `check` found damage          |
//! | 2      | the command could not run: bad arguments, I/O errors, and so on         |

use std::io;
use std::process::ExitCode;

/// Why a command did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// The command could not do its job. Printed as `error: <message>`; exit status 2.
    Error(String),
    /// The command ran and the answer is negative. The message is printed as is; status 1.
    Negative(String),
    /// stdout was closed by the reader; stop quietly with status 0.
    BrokenPipe,
}

/// What commands return.
pub type CmdResult = Result<(), Failure>;

impl From<sluice::Error> for Failure {
    fn from(e: sluice::Error) -> Self {
        Failure::Error(e.to_string())
    }
}

/// Errors of the format layer (`sluice sst`, `sluice manifest` read files directly).
impl From<sluice_sst::Error> for Failure {
    fn from(e: sluice_sst::Error) -> Self {
        Failure::Error(e.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::BrokenPipe
        } else {
            Failure::Error(format!("writing output: {e}"))
        }
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Self {
        Failure::Error(format!("encoding JSON: {e}"))
    }
}

impl Failure {
    /// Prints the failure on stderr and returns the exit status.
    pub fn report(self) -> ExitCode {
        match self {
            Failure::Error(message) => {
                eprintln!("error: {message}");
                ExitCode::from(2)
            }
            Failure::Negative(message) => {
                eprintln!("{message}");
                ExitCode::from(1)
            }
            Failure::BrokenPipe => ExitCode::SUCCESS,
        }
    }
}
