//! The `aiki` binary: see the crate's documentation (`aiki --help`).

use std::process::ExitCode;

fn main() -> ExitCode {
    aiki_cli::main(std::env::args_os())
}
