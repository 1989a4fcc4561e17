//! A service's own binary, as a user writes one: `aiki_check_app aiki …` runs the `aiki`
//! commands with the workflows of `aiki_tests::check_app`'s next build compiled in (with
//! `AIKI_CHECK_APP_BARE` set, none: as the generic `aiki` binary).

use std::process::ExitCode;

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() != Some("aiki") {
        eprintln!("usage: aiki_check_app aiki COMMAND ...");
        return ExitCode::from(2);
    }
    let app = if std::env::var_os("AIKI_CHECK_APP_BARE").is_some() {
        aiki_cli::App::new()
    } else {
        aiki_cli::App::new().registry(aiki_tests::check_app::next())
    };
    app.main(std::env::args_os().skip(1))
}
