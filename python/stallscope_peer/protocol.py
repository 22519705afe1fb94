"""The wire format of docs/peers-protocol.md: strict request validation and the JSON-line output channel."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from . import PROTOCOL

ENGINES = ("pytorch", "spdl", "dali", "nodes")
MODES = ("whole_run", "diagnostic")
CONTEXTS = ("fork", "spawn", "forkserver")
SPDL_WORKERS = ("threads", "processes")
WORKER_KINDS = ("threads", "processes")
DALI_DEVICES = ("cpu", "mixed")
OPTIMIZERS = ("sgd", "adam")


class RequestError(ValueError):
    """The request does not follow the protocol; the message names the key."""


class NotApplicable(RequestError):
    """A well-formed request this engine has no counterpart for; the error line says `not_applicable`."""


class StageError(Exception):
    """A failure that knows its error line's `stage` (a loader's: 'worker' or 'epoch')."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


INSTALL = "cargo xtask setup --peers"


class EngineMissing(StageError):
    """The engine's Python package is not installed; the error line carries `missing`."""

    def __init__(self, engine: str, package: str, version: str, module: str, cause: str) -> None:
        super().__init__("setup", f"engine {engine!r} needs {package} {version}, which is not installed "
                                  f"in this Python environment ({cause}); run `{INSTALL}`")
        self.missing = {"package": package, "version": version, "module": module, "install": INSTALL}


def error_line(e: BaseException, stage: str, message: str) -> dict[str, Any]:
    """The `error` line for a failure, with `missing` or `not_applicable` when they apply."""
    line: dict[str, Any] = {"type": "error", "stage": stage, "message": message}
    if isinstance(e, EngineMissing):
        line["missing"] = e.missing
    elif isinstance(e, NotApplicable):
        line["not_applicable"] = True
    return line


# --------------------------------------------------------------------------
# Output channel


class Output:
    """Writes protocol lines to the real standard output, one flushed line each.

    `claim()` moves the protocol to a private duplicate of fd 1 and points fd 1
    at stderr, so nothing else (a library's print, a C library) can corrupt the
    stream; forked children (DataLoader or SPDL workers) close the duplicate so
    they never hold the runner's pipe open after the harness dies.
    """

    def __init__(self, stream) -> None:
        self._stream = stream

    @classmethod
    def claim(cls) -> "Output":
        sys.stdout.flush()
        fd = os.dup(1)
        os.dup2(2, 1)
        stream = os.fdopen(fd, "w", encoding="utf-8", newline="\n")

        def close_in_child() -> None:
            try:
                os.close(fd)
            except OSError:
                pass

        os.register_at_fork(after_in_child=close_in_child)
        return cls(stream)

    def emit(self, line: dict[str, Any]) -> None:
        text = json.dumps(line, allow_nan=False, separators=(",", ":"))
        self._stream.write(text + "\n")
        self._stream.flush()

    def raw(self, text: str) -> None:
        """Write a line that is not a protocol object (the garbage fault)."""
        self._stream.write(text + "\n")
        self._stream.flush()

    def flush(self) -> None:
        self._stream.flush()


# --------------------------------------------------------------------------
# Request


@dataclass
class LoaderSpec:
    batch_size: int
    drop_last: bool
    workers: int
    prefetch: int | None
    persistent: bool
    pin_memory: bool
    context: str
    concurrency: int
    spdl_workers: str
    prefetch_to_device: bool
    batched_fetch: bool = False
    dali_device: str = "cpu"
    worker_kind: str = "threads"


@dataclass
class Request:
    engine: str
    device: str
    torch_threads: int | None
    weights_seed: int
    model: dict[str, Any]
    optimizer: dict[str, Any] | None
    source: dict[str, Any]
    loader: LoaderSpec
    non_blocking: bool
    epochs: int
    modes: list[str]
    batches: list[list[list[int]]] | None
    shuffle: bool
    shuffle_seed: int
    augment_seed: int
    dist: dict[str, Any] | None = None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _keys(obj: Any, where: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    if not isinstance(obj, dict):
        raise RequestError(f"{where}: expected an object, got {_kind(obj)}")
    for key in obj:
        if key not in required and key not in optional:
            raise RequestError(f"{where}: unknown key {key!r}")
    for key in required:
        if key not in obj:
            raise RequestError(f"{where}: missing key {key!r}")
    return obj


def _int(obj: dict, key: str, where: str, minimum: int | None = 0, nullable: bool = False):
    value = obj[key]
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{where}.{key}: expected an integer, got {_kind(value)}")
    if minimum is not None and value < minimum:
        raise RequestError(f"{where}.{key}: expected an integer >= {minimum}, got {value}")
    return value


def _bool(obj: dict, key: str, where: str) -> bool:
    value = obj[key]
    if not isinstance(value, bool):
        raise RequestError(f"{where}.{key}: expected true or false, got {_kind(value)}")
    return value


def _number(obj: dict, key: str, where: str, positive: bool = False) -> float:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"{where}.{key}: expected a number, got {_kind(value)}")
    if positive and not value > 0:
        raise RequestError(f"{where}.{key}: expected a number > 0, got {value}")
    return float(value)


def _str(obj: dict, key: str, where: str, choices: tuple[str, ...] | None = None) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise RequestError(f"{where}.{key}: expected a string, got {_kind(value)}")
    if choices is not None and value not in choices:
        raise RequestError(
            f"{where}.{key}: expected one of {', '.join(repr(c) for c in choices)}, got {value!r}"
        )
    return value


def _model(obj: Any) -> dict:
    where = "request.model"
    if not isinstance(obj, dict):
        raise RequestError(f"{where}: expected an object, got {_kind(obj)}")
    if "name" not in obj:
        raise RequestError(f"{where}: missing key 'name'")
    name = _str(obj, "name", where, ("linear", "fashion_cnn", "image_cnn", "none", "python"))
    if name == "python":
        _keys(obj, where, ("name", "factory", "path", "args"))
        factory = _str(obj, "factory", where)
        module, sep, function = factory.partition(":")
        if not sep or not module or not function:
            raise RequestError(f"{where}.factory: expected 'module:function', got {factory!r}")
        if not isinstance(obj["args"], dict):
            raise RequestError(f"{where}.args: expected an object, got {_kind(obj['args'])}")
        return {"name": name, "factory": factory, "path": _str_list(obj, "path", where),
                "args": obj["args"]}
    if name == "linear":
        _keys(obj, where, ("name", "features", "classes"))
        return {"name": name, "features": _int(obj, "features", where, 1),
                "classes": _int(obj, "classes", where, 1)}
    if name == "image_cnn":
        _keys(obj, where, ("name", "size", "classes"))
        return {"name": name, "size": _int(obj, "size", where, 1),
                "classes": _int(obj, "classes", where, 1)}
    _keys(obj, where, ("name",))
    return {"name": name}


def _optimizer(obj: Any) -> dict:
    where = "request.optimizer"
    _keys(obj, where, ("name", "lr"))
    return {"name": _str(obj, "name", where, OPTIMIZERS), "lr": _number(obj, "lr", where, True)}


def _str_list(obj: dict, key: str, where: str) -> list[str]:
    value = obj[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RequestError(f"{where}.{key}: expected a list of strings, got {_kind(value)}")
    return list(value)


def _source(obj: Any, engine: str) -> dict:
    where = "request.source"
    if not isinstance(obj, dict):
        raise RequestError(f"{where}: expected an object, got {_kind(obj)}")
    if "kind" not in obj:
        raise RequestError(f"{where}: missing key 'kind'")
    kind = _str(obj, "kind", where, ("tensor", "synthetic", "images", "fashionmnist", "python"))
    out: dict[str, Any] = {"kind": kind}
    if kind == "tensor":
        _keys(obj, where, ("kind", "inputs", "labels", "samples", "features"))
        out.update(inputs=_str(obj, "inputs", where), labels=_str(obj, "labels", where),
                   samples=_int(obj, "samples", where, 1), features=_int(obj, "features", where, 1))
    elif kind == "synthetic":
        _keys(obj, where, ("kind", "samples", "features", "classes", "latency_us", "cpu_work_rounds"))
        out.update(samples=_int(obj, "samples", where, 1), features=_int(obj, "features", where, 1),
                   classes=_int(obj, "classes", where, 1),
                   latency_us=_int(obj, "latency_us", where, 0),
                   cpu_work_rounds=_int(obj, "cpu_work_rounds", where, 0))
    elif kind == "images":
        _keys(obj, where, ("kind", "files", "resize", "crop", "random_crop", "flip"))
        files = obj["files"]
        if not isinstance(files, list) or not files:
            raise RequestError(f"{where}.files: expected a non-empty list of [path, label], got {_kind(files)}")
        parsed = []
        for i, entry in enumerate(files):
            if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str)
                    or isinstance(entry[1], bool) or not isinstance(entry[1], int) or entry[1] < 0):
                raise RequestError(f"{where}.files[{i}]: expected [path, label >= 0], got {entry!r}")
            parsed.append((entry[0], entry[1]))
        out.update(files=parsed, resize=_int(obj, "resize", where, 1), crop=_int(obj, "crop", where, 1),
                   random_crop=_bool(obj, "random_crop", where), flip=_bool(obj, "flip", where))
        if out["resize"] < out["crop"]:
            raise RequestError(
                f"{where}.resize: must be at least crop ({out['crop']}), got {out['resize']}")
    elif kind == "fashionmnist":
        _keys(obj, where, ("kind", "images", "labels", "samples"))
        out.update(images=_str(obj, "images", where), labels=_str(obj, "labels", where),
                   samples=_int(obj, "samples", where, 1))
    else:
        if engine not in ("pytorch", "nodes"):
            raise NotApplicable(f"{where}.kind: 'python' sources need a map-style Dataset engine, "
                                f"pytorch or nodes (engine is {engine!r})")
        _keys(obj, where, ("kind", "factory", "path", "args"))
        factory = _str(obj, "factory", where)
        module, sep, function = factory.partition(":")
        if not sep or not module or not function:
            raise RequestError(f"{where}.factory: expected 'module:function', got {factory!r}")
        args = obj["args"]
        if not isinstance(args, dict):
            raise RequestError(f"{where}.args: expected an object, got {_kind(args)}")
        out.update(module=module, function=function, path=_str_list(obj, "path", where), args=args)
    return out


COMMON_KEYS = ("batch_size", "drop_last")
PYTORCH_KEYS = ("workers", "prefetch", "persistent", "pin_memory", "context")
SPDL_KEYS = ("concurrency", "spdl_workers")
LOADER_KEYS = PYTORCH_KEYS + SPDL_KEYS + ("prefetch_to_device", "batched_fetch", "dali_device", "worker_kind")
# Each engine's required loader keys beyond COMMON_KEYS; every other loader key is accepted and unused.
REQUIRED_KEYS = {
    "pytorch": PYTORCH_KEYS,
    "spdl": SPDL_KEYS,
    "dali": ("workers", "prefetch", "dali_device"),
    "nodes": ("workers", "prefetch", "pin_memory", "worker_kind"),
}


def _loader(obj: Any, engine: str, device: str, source_kind: str) -> LoaderSpec:
    where = "request.loader"
    required = COMMON_KEYS + REQUIRED_KEYS[engine]
    _keys(obj, where, required, tuple(k for k in LOADER_KEYS if k not in required))
    get = obj.get
    spec = LoaderSpec(
        batch_size=_int(obj, "batch_size", where, 1),
        drop_last=_bool(obj, "drop_last", where),
        workers=_int(obj, "workers", where, 0) if "workers" in obj else 0,
        prefetch=_int(obj, "prefetch", where, 1, nullable=True) if "prefetch" in obj else None,
        persistent=_bool(obj, "persistent", where) if "persistent" in obj else False,
        pin_memory=_bool(obj, "pin_memory", where) if "pin_memory" in obj else False,
        context=_str(obj, "context", where, CONTEXTS) if "context" in obj else "fork",
        concurrency=_int(obj, "concurrency", where, 1) if "concurrency" in obj else 1,
        spdl_workers=(_str(obj, "spdl_workers", where, SPDL_WORKERS)
                      if "spdl_workers" in obj else "threads"),
        prefetch_to_device=_bool(obj, "prefetch_to_device", where) if get("prefetch_to_device") is not None else False,
        batched_fetch=_bool(obj, "batched_fetch", where) if "batched_fetch" in obj else False,
        dali_device=_str(obj, "dali_device", where, DALI_DEVICES) if "dali_device" in obj else "cpu",
        worker_kind=_str(obj, "worker_kind", where, WORKER_KINDS) if "worker_kind" in obj else "threads",
    )
    if engine == "pytorch" and spec.workers > 0 and spec.prefetch is None:
        raise RequestError(f"{where}.prefetch: expected an integer >= 1 when workers > 0, got null")
    if engine in ("dali", "nodes") and spec.prefetch is None:
        raise RequestError(f"{where}.prefetch: expected an integer >= 1 for engine {engine!r}, got null")
    if spec.prefetch_to_device and not device.startswith("cuda"):
        raise RequestError(
            f"{where}.prefetch_to_device: copying on a side stream needs a CUDA device (device is {device!r})")
    _check_applicable(spec, engine, device, source_kind)
    return spec


def _check_applicable(spec: LoaderSpec, engine: str, device: str, source_kind: str) -> None:
    """Refuse, as not applicable, the knob combinations an engine has no counterpart for."""
    where = "request.loader"
    if spec.batched_fetch and engine != "pytorch":
        raise NotApplicable(f"{where}.batched_fetch: only the pytorch engine fetches a batch through the "
                            f"Dataset's __getitems__ (engine is {engine!r})")
    if spec.batched_fetch and source_kind == "python":
        raise NotApplicable(f"{where}.batched_fetch: a python source's own Dataset decides (torch calls its "
                            "__getitems__ when it defines one)")
    if engine != "dali":
        return
    if spec.workers < 1:
        raise NotApplicable(f"{where}.workers: dali runs its operators on num_threads >= 1 threads; "
                            "workers 0 has no dali counterpart")
    if spec.dali_device == "mixed" and not device.startswith("cuda"):
        raise NotApplicable(f"{where}.dali_device: 'mixed' decodes with nvJPEG and runs the operators on "
                            f"the GPU, so it needs a CUDA device (device is {device!r})")
    if spec.dali_device == "mixed" and source_kind != "images":
        raise NotApplicable(f"{where}.dali_device: 'mixed' is the image decoder's placement; a "
                            f"{source_kind!r} source has no image to decode")
    if spec.dali_device == "mixed" and spec.prefetch_to_device:
        raise NotApplicable(f"{where}.prefetch_to_device: dali_device 'mixed' already gives batches on the GPU")


def _batches(value: Any, epochs: int) -> list[list[list[int]]]:
    where = "request.batches"
    if not isinstance(value, list):
        raise RequestError(f"{where}: expected a list (one entry per epoch), got {_kind(value)}")
    if len(value) != epochs:
        raise RequestError(f"{where}: expected {epochs} epochs of batches, got {len(value)}")
    for e, epoch in enumerate(value):
        if not isinstance(epoch, list):
            raise RequestError(f"{where}[{e}]: expected a list of batches, got {_kind(epoch)}")
        for b, batch in enumerate(epoch):
            if not isinstance(batch, list) or not batch:
                raise RequestError(f"{where}[{e}][{b}]: expected a non-empty list of sample indices")
            for i in batch:
                if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                    raise RequestError(f"{where}[{e}][{b}]: expected sample indices >= 0, got {i!r}")
    return value


def parse_request(text: str) -> Request:
    """Parse and validate one request; raise RequestError naming the offending key."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(f"request: not JSON: {e}") from None
    where = "request"
    _keys(obj, where,
          ("protocol", "engine", "device", "weights_seed", "model", "source", "loader",
           "non_blocking", "epochs", "modes"),
          ("torch_threads", "optimizer", "batches", "shuffle", "shuffle_seed", "augment_seed",
           "dist"))
    protocol = _int(obj, "protocol", where, None)
    if protocol != PROTOCOL:
        raise RequestError(f"request.protocol: this harness speaks protocol {PROTOCOL}, got {protocol}")
    engine = _str(obj, "engine", where, ENGINES)
    device = _str(obj, "device", where)
    if not (device == "cpu" or device == "cuda" or
            (device.startswith("cuda:") and device[5:].isdigit())):
        raise RequestError(f"request.device: expected 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    model = _model(obj["model"])
    if "optimizer" in obj and obj["optimizer"] is not None:
        optimizer = _optimizer(obj["optimizer"])
    elif model["name"] == "none":
        optimizer = None
    elif "optimizer" in obj:
        raise RequestError(f"request.optimizer: expected an object for model {model['name']!r}, got null")
    else:
        raise RequestError("request: missing key 'optimizer'")
    source = _source(obj["source"], engine)
    epochs = _int(obj, "epochs", where, 1)
    modes = obj["modes"]
    if (not isinstance(modes, list) or not modes
            or not all(isinstance(m, str) and m in MODES for m in modes)):
        raise RequestError(f"request.modes: expected a non-empty list of 'whole_run' / 'diagnostic', got {modes!r}")
    batches = None
    shuffle, shuffle_seed = False, 0
    if obj.get("batches") is not None:
        batches = _batches(obj["batches"], epochs)
    elif source["kind"] == "python":
        if "shuffle" not in obj:
            raise RequestError("request: missing key 'shuffle' (needed when 'batches' is absent)")
        shuffle = _bool(obj, "shuffle", where)
        if shuffle:
            if "shuffle_seed" not in obj:
                raise RequestError("request: missing key 'shuffle_seed' (needed when 'shuffle' is true)")
            shuffle_seed = _int(obj, "shuffle_seed", where, 0)
    else:
        raise RequestError(f"request: missing key 'batches' (required for a {source['kind']!r} source)")
    return Request(
        engine=engine,
        device=device,
        torch_threads=_int(obj, "torch_threads", where, 1, nullable=True) if "torch_threads" in obj else None,
        weights_seed=_int(obj, "weights_seed", where, 0),
        model=model,
        optimizer=optimizer,
        source=source,
        loader=_loader(obj["loader"], engine, device, source["kind"]),
        non_blocking=_bool(obj, "non_blocking", where),
        epochs=epochs,
        modes=list(modes),
        batches=batches,
        shuffle=shuffle,
        shuffle_seed=shuffle_seed,
        augment_seed=_int(obj, "augment_seed", where, 0) if "augment_seed" in obj else 0,
        dist=_dist(obj["dist"], model) if obj.get("dist") is not None else None,
    )


def _dist(obj: Any, model: dict) -> dict[str, Any]:
    """`dist`: this rank's place and the runner's c10d store to build the process group on."""
    where = "request.dist"
    _keys(obj, where, ("rank", "world_size", "master_addr", "master_port", "prefix", "timeout_s"))
    world = _int(obj, "world_size", where, 1)
    rank = _int(obj, "rank", where, 0)
    if rank >= world:
        raise RequestError(f"{where}.rank: expected below world_size {world}, got {rank}")
    port = _int(obj, "master_port", where, 1)
    if port > 65535:
        raise RequestError(f"{where}.master_port: expected at most 65535, got {port}")
    timeout = obj["timeout_s"]
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise RequestError(f"{where}.timeout_s: expected a positive number, got {timeout!r}")
    if model["name"] == "none":
        raise RequestError(f"{where}: model 'none' has no gradients to all-reduce")
    return {"rank": rank, "world_size": world, "master_addr": _str(obj, "master_addr", where),
            "master_port": port, "prefix": _str(obj, "prefix", where), "timeout_s": float(timeout)}
