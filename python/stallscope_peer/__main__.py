"""Entry point: read one request on stdin, run it, write JSON lines; an error line and a non-zero exit on any failure."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import signal
import sys
import traceback
from dataclasses import dataclass

from . import PROTOCOL, faults
from .protocol import Output, RequestError, StageError, error_line, parse_request

MAX_MESSAGE = 4000


@dataclass
class State:
    stage: str = "setup"


# The hello's key for the version of each engine's own package. `spdl` is on every hello (null on
# the other engines); `dali` and `torchdata` only on their engine's, so a runner that predates them
# still reads the pytorch and spdl engines' hellos.
VERSION_KEYS = {"spdl": "spdl", "dali": "dali", "nodes": "torchdata"}


def _versions(engine_name: str, engine) -> dict:
    import torch

    try:  # the installed version, without paying torchvision's import when no image source needs it
        tv = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        tv = None
    versions = {"python": platform.python_version(), "torch": torch.__version__, "torchvision": tv,
                "spdl": None}
    if engine_name in VERSION_KEYS:
        versions[VERSION_KEYS[engine_name]] = engine.version
    return versions


def _check_user_model(req, source, batches, device):
    """The user's model, built once before anything is timed: (parameters, the hello's `model`, the
    Dataset's first batch), after one forward and loss on that batch checked that the model takes it."""
    import torch

    from . import models, user_model

    torch.manual_seed(req.weights_seed)
    user = user_model.build(req.model)
    where = req.model["factory"]
    first = next((b for b in batches[0] if b), None) if batches else None
    if first is None:
        raise user_model.ModelError(f"model {where}: the Dataset gives no batch in epoch 0 to check "
                                    "the model on")
    x, y = user_model.first_batch(source, first)
    user.module.to(device)
    user_model.check_takes(user, x.to(device), y.to(device, dtype=torch.int64), where)
    return (models.parameter_count(user.module), user_model.describe(user, req.optimizer), (x, y))


def run(out: Output, state: State) -> None:
    fault = faults.from_env()
    req = parse_request(sys.stdin.read())

    from . import engines

    Engine = engines.load(req.engine)  # first: a missing package fails before any other work

    import torch

    from . import models
    from .loop import DeviceCtx, run_modes
    from .sources import SourceError, check_indices, epoch_batches, open_source

    if req.torch_threads is not None:
        torch.set_num_threads(req.torch_threads)
    device = torch.device(req.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {req.device!r} requested but torch.cuda.is_available() is False")

    source = open_source(req.source, req.engine)
    want = models.input_shape(req.model)
    if want is not None and list(source.sample_shape) != want:
        raise SourceError(f"model {req.model['name']!r} takes samples of shape {want}, but the "
                          f"{req.source['kind']} source gives {source.sample_shape}")
    if req.batches is not None:
        batches = req.batches
        check_indices(batches, source.samples)
    else:
        if source.samples is None:
            raise SourceError("the python source's Dataset has no __len__, so 'batches' must be given")
        generator = torch.Generator()
        generator.manual_seed(req.shuffle_seed)
        batches = [epoch_batches(source.samples, req.loader.batch_size, req.loader.drop_last,
                                 req.shuffle, generator) for _ in range(req.epochs)]

    engine = Engine(req, source, device)

    parameters, built, warm_batch = 0, None, None
    if req.model["name"] == "python":
        parameters, built, warm_batch = _check_user_model(req, source, batches, device)
    elif req.model["name"] != "none":
        parameters = models.parameter_count(models.build(req.model))
    out.emit({
        "type": "hello",
        "protocol": PROTOCOL,
        "engine": req.engine,
        **_versions(req.engine, engine),
        "parameters": parameters,
        "samples": source.samples if source.samples is not None else sum(len(b) for b in batches[0]),
        "sample_shape": list(source.sample_shape),
        "batch_bytes": req.loader.batch_size * (source.sample_bytes + 8),
        **({"model": built} if built is not None else {}),
    })
    ranks = None
    if req.dist is not None:
        from .dist import DistSpec, Ranks

        state.stage = "setup"
        ranks = Ranks(DistSpec(**req.dist), device)
    trainers = run_modes(req, engine, batches, DeviceCtx(device, req.non_blocking), out, fault,
                         state, ranks, warm_batch)
    done = {"type": "done"}
    if ranks is not None:
        from .dist import weights_digest

        # Equal on every rank when the gradients were averaged: the tests compare them.
        done["weights"] = [weights_digest(t.module) for t in trainers]
        ranks.close()
    out.emit(done)


def _stop_children() -> None:
    """Terminate loader worker processes (DataLoader's, SPDL's process pool) so none outlives us."""
    import multiprocessing

    for child in multiprocessing.active_children():
        try:
            child.terminate()
        except Exception:
            pass


def main() -> None:
    # The runner stops the harness by killing it; Ctrl-C in a terminal goes to the runner.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = Output.claim()
    state = State()
    try:
        run(out, state)
    except BaseException as e:  # noqa: BLE001 (every failure becomes an error line)
        stage = e.stage if isinstance(e, StageError) else state.stage
        if isinstance(e, (StageError, RequestError)) or type(e).__name__ == "SourceError":
            message = str(e)
        else:
            message = f"{type(e).__name__}: {e}"
        traceback.print_exc(file=sys.stderr)
        try:
            out.emit(error_line(e, stage, message[:MAX_MESSAGE]))
        finally:
            sys.stderr.flush()
            _stop_children()
            os._exit(1)
    sys.stderr.flush()
    sys.exit(0)


if __name__ == "__main__":
    main()
