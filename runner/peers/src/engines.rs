//! Which peer engines the Python here can run: each needs `torch`, and
//! SPDL, DALI and torchdata.nodes their own package; a missing one makes
//! only its engine not applicable, with the command that installs it.

use stallscope_core::suite::EngineName;
use stallscope_python::PythonEnv;

/// The peers' Python when `engine` can run here, else why not.
pub fn available(engine: EngineName) -> Result<&'static PythonEnv, String> {
    let env = stallscope_python::env().as_ref().map_err(Clone::clone)?;
    let module = match engine {
        EngineName::Spdl => "spdl.pipeline",
        EngineName::Dali => "nvidia.dali",
        EngineName::Nodes => "torchdata.nodes",
        EngineName::Native | EngineName::Pytorch => return Ok(env),
    };
    env.module(module).map(|_| env)
}
