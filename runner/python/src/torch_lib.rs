//! Where the Pythons of this machine keep torch's `lib/` (libtorch_cuda.so
//! among it): asked of `python3` and of the GPU machines' `/opt/torch`
//! environment, for the libtorch back end's search for CUDA.

use std::ffi::OsStr;
use std::path::PathBuf;

const QUERY: &str = "import torch, os; print(os.path.join(torch.__path__[0], 'lib'))";

/// Each answering Python's torch `lib/` folder, in the order asked, once each.
pub fn torch_lib_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for python in ["python3", "/opt/torch/.venv/bin/python3"] {
        let Ok(out) = crate::process::output(OsStr::new(python), &["-c", QUERY]) else {
            continue;
        };
        if !out.status.success() {
            continue;
        }
        let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if !d.as_os_str().is_empty() && !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}
