//! The `shardhost` binary: glue between the command line and the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
