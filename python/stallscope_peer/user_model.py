"""The user's own model (`model.name == "python"`): built by its factory, checked on a first batch.

The factory is `module:function`, imported with the request's `path` first on `sys.path` and called
with `args` as keyword arguments. It returns a `torch.nn.Module`; or `(module, loss_fn)` or
`(module, loss_fn, optimizer)`; or a dict with the keys `model` and optionally `loss_fn` and
`optimizer`. Without a loss the step uses mean cross-entropy, and without an optimizer the request's
(SGD, lr 0.01). A factory is called once per timed mode, after `torch.manual_seed(weights_seed)`, so
each mode starts from the same weights when the factory draws them from torch's generator.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from .protocol import StageError


class ModelError(StageError):
    """The user's model cannot be built or cannot take the Dataset's batch (stage `setup`)."""

    def __init__(self, message: str) -> None:
        super().__init__("setup", message)


@dataclass
class UserModel:
    module: nn.Module
    loss_fn: Callable | None  # None: mean cross-entropy
    optimizer: torch.optim.Optimizer | None  # None: the request's optimizer


def _factory(spec: dict) -> Callable:
    for folder in reversed(spec["path"]):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    where = spec["factory"]
    module_name, _, function = where.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise ModelError(f"model {where}: cannot import {module_name!r}: {type(e).__name__}: {e}") from e
    fn = getattr(module, function, None)
    if not callable(fn):
        raise ModelError(f"model {where}: {module_name!r} has no function {function!r}")
    return fn


def _parts(made: Any, where: str) -> tuple[Any, Any, Any]:
    """(module, loss_fn, optimizer) of what the factory returned."""
    if isinstance(made, dict):
        unknown = set(made) - {"model", "loss_fn", "optimizer"}
        if "model" not in made or unknown:
            raise ModelError(f"model {where}: a returned dict needs the key 'model' and may have "
                             f"'loss_fn' and 'optimizer'; got keys {sorted(made)}")
        return made["model"], made.get("loss_fn"), made.get("optimizer")
    if isinstance(made, (tuple, list)):
        if len(made) not in (2, 3):
            raise ModelError(f"model {where}: expected a torch.nn.Module, (module, loss_fn) or "
                             f"(module, loss_fn, optimizer), got a {type(made).__name__} of {len(made)}")
        return made[0], made[1], made[2] if len(made) == 3 else None
    return made, None, None


def build(spec: dict) -> UserModel:
    """Call the factory and check what it returned."""
    where = spec["factory"]
    fn = _factory(spec)
    try:
        made = fn(**spec["args"])
    except Exception as e:
        raise ModelError(f"model {where}: the factory raised {type(e).__name__}: {e}") from e
    module, loss_fn, optimizer = _parts(made, where)
    if not isinstance(module, nn.Module):
        raise ModelError(f"model {where}: returned {type(module).__name__}, not a torch.nn.Module")
    if loss_fn is not None and not callable(loss_fn):
        raise ModelError(f"model {where}: the loss {type(loss_fn).__name__} is not callable")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise ModelError(f"model {where}: the optimizer is a {type(optimizer).__name__}, "
                         "not a torch.optim.Optimizer")
    return UserModel(module, loss_fn, optimizer)


def loss_name(loss_fn: Callable | None) -> str:
    if loss_fn is None:
        return "cross_entropy"
    return getattr(loss_fn, "__name__", None) or type(loss_fn).__name__


def describe(user: UserModel, optimizer: dict) -> dict:
    """The hello's `model`: class, loss, optimizer and its learning rate."""
    if user.optimizer is not None:
        groups = user.optimizer.param_groups
        lr = groups[0].get("lr") if groups else None
        opt = type(user.optimizer).__name__
    else:
        opt = {"sgd": "SGD", "adam": "Adam"}.get(optimizer["name"], optimizer["name"])
        lr = optimizer["lr"]
    return {"class": type(user.module).__name__, "loss": loss_name(user.loss_fn), "optimizer": opt,
            "lr": float(lr) if isinstance(lr, (int, float)) else None}


def shape(t: Any) -> str:
    """`float32[32, 3, 28, 28]`, or the type of what is not a tensor."""
    if isinstance(t, torch.Tensor):
        return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
    return type(t).__name__


def first_layer(module: nn.Module) -> str | None:
    """What the model's first layer with weights takes, when it says (Linear, ConvNd)."""
    for m in module.modules():
        if isinstance(m, nn.Linear) and m.in_features > 0:
            return f"its first layer Linear takes [N, {m.in_features}]"
        if isinstance(m, nn.modules.conv._ConvNd) and m.in_channels > 0:
            spatial = {1: "L", 2: "H, W", 3: "D, H, W"}.get(len(m.kernel_size), "...")
            return f"its first layer {type(m).__name__} takes [N, {m.in_channels}, {spatial}]"
        if any(True for _ in m.parameters(recurse=False)):
            return None
    return None


def check_takes(user: UserModel, x: torch.Tensor, y: torch.Tensor, where: str) -> None:
    """One forward and loss on the Dataset's first batch, before anything is timed.

    A model that cannot take it fails here with one message naming the model (its factory and
    class), the batch's shapes, what its first layer takes, and torch's own error.
    """
    name = f"model {where} ({type(user.module).__name__})"
    loss_fn = user.loss_fn or torch.nn.functional.cross_entropy
    with torch.no_grad():
        try:
            out = user.module(x)
        except Exception as e:
            layer = first_layer(user.module)
            raise ModelError(f"{name} cannot take the Dataset's batch: input {shape(x)}, labels "
                             f"{shape(y)}" + (f"; {layer}" if layer else "")
                             + f"; {type(e).__name__}: {e}") from e
        try:
            loss_fn(out, y)
        except Exception as e:
            raise ModelError(f"{name}: its output {shape(out)} does not fit the loss "
                             f"{loss_name(user.loss_fn)} with the Dataset's labels {shape(y)} "
                             f"(input {shape(x)}); {type(e).__name__}: {e}") from e


def first_batch(source, batch: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The Dataset's batch of indices `batch`, collated as the DataLoader does."""
    collate = source.collate_fn or torch.utils.data.default_collate
    x, y = collate([source.dataset[i] for i in batch])
    return x, y
