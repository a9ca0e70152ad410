//! `cuparquet doctor`: [`cuparquet::doctor`]'s checks, printed as lines or JSON.

use std::path::Path;
use std::process::ExitCode;

use cuparquet::doctor::{run, DoctorOptions, Status};

/// Exit 0 unless a check fails (no GPU is a warning, not a failure).
pub(crate) fn doctor(
    path: &Path,
    remote: &cuparquet::config::RemoteSettings,
    bench: bool,
    json: bool,
) -> ExitCode {
    let checks = run(&DoctorOptions {
        path: path.to_path_buf(),
        bench,
        remote: remote.clone(),
    });
    if json {
        match serde_json::to_string_pretty(&checks) {
            Ok(s) => out!("{s}\n"),
            Err(e) => {
                eprintln!("cuparquet: error: doctor: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        for c in &checks {
            out!("{c}\n");
        }
    }
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    if failed > 0 {
        eprintln!("cuparquet: error: doctor: {failed} check(s) failed");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
