"""Boot hook of `stallscope job`: start the instrumentation when STALLSCOPE_JOB is set, then chain the next sitecustomize."""

import os
import sys


def _chain_next_sitecustomize() -> None:
    """Run the sitecustomize Python would have run without this folder first on the path."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.realpath(__file__))
    later = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", later)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    if os.environ.get("STALLSCOPE_JOB"):
        from stallscope_job import start as _start

        _start.start()
finally:
    _chain_next_sitecustomize()
