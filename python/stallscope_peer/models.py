"""The models, optimizers and the one training step, matching runner/torch/src/models.rs (and the user's own, user_model.py)."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn

from . import user_model

_ns = time.perf_counter_ns


def input_shape(model: dict) -> list[int] | None:
    """Shape of one input sample the model takes (None for model `none`)."""
    name = model["name"]
    if name == "fashion_cnn":
        return [1, 28, 28]
    if name == "linear":
        return [model["features"]]
    if name == "image_cnn":
        return [3, model["size"], model["size"]]
    return None


def classes(model: dict) -> int:
    return 10 if model["name"] == "fashion_cnn" else model.get("classes", 1)


def build(model: dict) -> nn.Module:
    """The module a model spec names (weights drawn from torch's global generator)."""
    name = model["name"]
    if name == "linear":
        return nn.Linear(model["features"], model["classes"])
    if name == "fashion_cnn":
        # seeds/003: 105,866 parameters.
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(1568, 64), nn.ReLU(),
            nn.Linear(64, 10),
        )
    if name == "image_cnn":
        layers: list[nn.Module] = []
        channels = [3, 32, 64, 128, 256]
        for cin, cout in zip(channels, channels[1:]):
            layers += [nn.Conv2d(cin, cout, 3, stride=2, padding=1), nn.ReLU()]
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, model["classes"])]
        return nn.Sequential(*layers)
    raise ValueError(f"model {name!r} has no module")


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


class Trainer:
    """A model on a device with its optimizer: one configuration's training step."""

    def __init__(self, model: dict, optimizer: dict, device: torch.device, weights_seed: int,
                 ranks=None) -> None:
        torch.manual_seed(weights_seed)
        # Weights are drawn on the CPU (independent of the device's generator), then moved.
        # A user's model (`python`) comes with its own loss and optimizer when its factory gives them.
        user = user_model.build(model) if model["name"] == "python" else None
        self.module = (user.module if user is not None else build(model)).to(device)
        self.loss_fn = (user.loss_fn if user is not None else None) or F.cross_entropy
        self.spec = model
        self.device = device
        # With ranks, the step runs through DistributedDataParallel (dist.Ranks).
        self.ranks = ranks
        self.net = ranks.wrap(self.module) if ranks is not None else self.module
        params = self.module.parameters()
        if user is not None and user.optimizer is not None:
            self.opt = user.optimizer
        elif optimizer["name"] == "sgd":
            self.opt = torch.optim.SGD(params, lr=optimizer["lr"])
        else:
            self.opt = torch.optim.Adam(params, lr=optimizer["lr"])

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """zero_grad (to None), forward, the loss (mean cross-entropy unless the user's), backward, step.

        Reads nothing back."""
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.net(x), y)
        loss.backward()
        self.opt.step()

    def step_apart(self, x: torch.Tensor, y: torch.Tensor, sync) -> tuple[int, int]:
        """A step with ranks, its gradient all-reduce timed apart: (compute_ns, comm_ns).

        Backward runs under DDP's `no_sync()`; the all-reduce of the gradients
        (one flat bucket, averaged) follows between synchronisations, then the
        optimizer step. Compute is the forward, backward and optimizer step.
        """
        t0 = _ns()
        self.opt.zero_grad(set_to_none=True)
        with self.net.no_sync():
            loss = self.loss_fn(self.net(x), y)
            loss.backward()
        sync()
        ta = _ns()
        self.ranks.all_reduce_grads(self.module)
        sync()
        tb = _ns()
        self.opt.step()
        sync()
        return (ta - t0) + (_ns() - tb), tb - ta

    def synthetic_batch(self, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn([batch_size, *input_shape(self.spec)], device=self.device)
        y = torch.randint(classes(self.spec), (batch_size,), device=self.device, dtype=torch.int64)
        return x, y
