"""Start-up in every Python process that has STALLSCOPE_JOB: validate the config, then wait for torch.utils.data."""

from __future__ import annotations

import os
import sys

from . import ENV, hook
from .config import ConfigError, parse


def _report_bad_config(error: ConfigError, text: str) -> None:
    """One line on stderr and, when out_dir names a usable folder, an `error` record."""
    message = str(error)
    sys.stderr.write(f"stallscope: {message}\n")
    sys.stderr.flush()
    out_dir = _out_dir_of(text)
    if out_dir is None:
        return
    from .records import Writer

    try:
        Writer(out_dir, os.getpid()).write({"type": "error", "where": "config", "message": message,
                                             "pid": os.getpid()})
    except OSError as e:
        sys.stderr.write(f"stallscope: could not write the error record in {out_dir}: {e}\n")
        sys.stderr.flush()


def _out_dir_of(text: str) -> str | None:
    import json

    try:
        obj = json.loads(text)
    except ValueError:
        return None
    out_dir = obj.get("out_dir") if isinstance(obj, dict) else None
    return out_dir if isinstance(out_dir, str) and os.path.isdir(out_dir) else None


def start() -> None:
    """Parse the config (a bad one ends the process with status 2) and install the import hook."""
    text = os.environ[ENV]
    try:
        config = parse(text)
    except ConfigError as e:
        _report_bad_config(e, text)
        os._exit(2)
    cwd = os.getcwd()  # the script's sys.argv[0] is relative to it

    def on_load(module) -> None:
        from . import runtime

        runtime.init(config, cwd)
        runtime.on_dataloader_module(module)

    hook.install(on_load)
