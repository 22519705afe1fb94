"""The STALLSCOPE_JOB configuration: strict parsing, every error naming the key and what was expected."""

from __future__ import annotations

import json
import os

from . import ENV, PROTOCOL

MODES = ("whole_run", "diagnostic")
START_METHODS = ("fork", "spawn", "forkserver")
REQUIRED = ("protocol", "out_dir", "mode", "warmup", "steps", "loader", "overrides", "replay", "unit")
OPTIONAL = ("overrides_loader",)
# override key -> (what is expected, checker)
OVERRIDES = {
    "num_workers": "an integer >= 0",
    "prefetch_factor": "an integer >= 1 or null (the DataLoader's default)",
    "persistent_workers": "true or false",
    "pin_memory": "true or false",
    "multiprocessing_context": "'fork', 'spawn', 'forkserver' or null (the default start method)",
    "in_order": "true or false",
    "batch_size": "an integer >= 1",
}


class ConfigError(ValueError):
    """STALLSCOPE_JOB is not a valid configuration; the message names the key."""


class Config:
    """The validated configuration (`raw` is the JSON object as given, echoed in `hello`)."""

    __slots__ = ("out_dir", "mode", "warmup", "steps", "loader", "overrides", "replay_batches",
                 "replay_max_bytes", "unit", "overrides_loader", "raw")

    def __init__(self, **values) -> None:
        for key in self.__slots__:
            setattr(self, key, values[key])

    @property
    def diagnostic(self) -> bool:
        return self.mode == "diagnostic"


def _kind(value: object) -> str:
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
    return "a list" if isinstance(value, list) else "an object"


def _int(value: object, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: expected an integer >= {minimum}, got {_kind(value)}")
    return value


def _bool_ok(value: object) -> bool:
    return isinstance(value, bool)


def _override(key: str, value: object) -> object:
    where = f"{ENV}.overrides.{key}"
    if key not in OVERRIDES:
        raise ConfigError(f"{ENV}.overrides: unknown key {key!r} (expected one of {', '.join(OVERRIDES)})")
    ok = {
        "num_workers": lambda v: not isinstance(v, bool) and isinstance(v, int) and v >= 0,
        "prefetch_factor": lambda v: v is None or (not isinstance(v, bool) and isinstance(v, int) and v >= 1),
        "persistent_workers": _bool_ok,
        "pin_memory": _bool_ok,
        "multiprocessing_context": lambda v: v is None or v in START_METHODS,
        "in_order": _bool_ok,
        "batch_size": lambda v: not isinstance(v, bool) and isinstance(v, int) and v >= 1,
    }[key]
    if not ok(value):
        raise ConfigError(f"{where}: expected {OVERRIDES[key]}, got {_kind(value)}")
    return value


def _replay(value: object) -> tuple[int | None, int | None]:
    """(batches, max_bytes) of `replay`: (None, None) for false."""
    where = f"{ENV}.replay"
    if value is False:
        return None, None
    if not isinstance(value, dict) or "batches" not in value or not set(value) <= {"batches", "max_bytes"}:
        raise ConfigError(f"{where}: expected false or {{\"batches\": M}} (and optionally \"max_bytes\"), got "
                          f"{_kind(value) if not isinstance(value, dict) else 'keys ' + repr(sorted(value))}")
    batches = _int(value["batches"], f"{where}.batches", 1)
    limit = value.get("max_bytes")
    return batches, None if limit is None else _int(limit, f"{where}.max_bytes", 1)


def _out_dir(value: object) -> str:
    where = f"{ENV}.out_dir"
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected the path of an existing folder, got {_kind(value)}")
    if not os.path.isdir(value):
        raise ConfigError(f"{where}: expected an existing folder, got {value!r} (not a folder)")
    if not os.access(value, os.W_OK | os.X_OK):
        raise ConfigError(f"{where}: expected a folder this process can write, got {value!r}")
    return os.path.abspath(value)


def parse(text: str) -> Config:
    """Parse and validate the JSON of STALLSCOPE_JOB; raise ConfigError naming the key."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{ENV}: expected a JSON object, got text that is not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{ENV}: expected a JSON object, got {_kind(obj)}")
    for key in obj:
        if key not in REQUIRED and key not in OPTIONAL:
            raise ConfigError(f"{ENV}: unknown key {key!r}")
    for key in REQUIRED:
        if key not in obj:
            raise ConfigError(f"{ENV}: missing key {key!r}")
    if isinstance(obj["protocol"], bool) or obj["protocol"] != PROTOCOL:
        raise ConfigError(f"{ENV}.protocol: expected {PROTOCOL}, got {_kind(obj['protocol'])}")
    mode = obj["mode"]
    if mode not in MODES:
        raise ConfigError(f"{ENV}.mode: expected 'whole_run' or 'diagnostic', got {_kind(mode)}")
    overrides = obj["overrides"]
    if not isinstance(overrides, dict):
        raise ConfigError(f"{ENV}.overrides: expected an object, got {_kind(overrides)}")
    unit = obj["unit"]
    if not isinstance(unit, str):
        raise ConfigError(f"{ENV}.unit: expected a string, got {_kind(unit)}")
    target = obj.get("overrides_loader")
    replay_batches, replay_max_bytes = _replay(obj["replay"])
    return Config(
        out_dir=_out_dir(obj["out_dir"]),
        mode=mode,
        warmup=_int(obj["warmup"], f"{ENV}.warmup", 0),
        steps=_int(obj["steps"], f"{ENV}.steps", 1),
        loader=_int(obj["loader"], f"{ENV}.loader", 0),
        overrides={k: _override(k, v) for k, v in overrides.items()},
        replay_batches=replay_batches,
        replay_max_bytes=replay_max_bytes,
        unit=unit,
        overrides_loader=None if target is None else _int(target, f"{ENV}.overrides_loader", 0),
        raw=obj,
    )
