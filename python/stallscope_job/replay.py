"""Replay (the free-data ceiling): each training DataLoader's batches held after warm-up and handed out again.

At the end of warm-up every DataLoader that gave the training thread its data (directly, or through
a data queue a thread fills from it) is marked; the next `next()` on any of its iterators, in
whichever thread makes it, takes up to `batches` real batches from that iterator (one thread only:
the one that calls it, so no iterator is shared), and from then on every `next()` returns them in
turn, cycling, with no loader work, and no epoch ends. The window opens at the first step boundary
after every marked DataLoader has gathered (or was not fetched again for `GIVE_UP` steps).
"""

from __future__ import annotations

import time

from .records import batch_size_and_bytes

now = time.perf_counter_ns
PENDING = "pending"
GIVE_UP = 4  # steps to wait for a marked DataLoader to be fetched again


class Replay:
    """The loaders replayed, and when the window may open."""

    def __init__(self, batches: int, max_bytes: int | None) -> None:
        self.want, self.max_bytes = batches, max_bytes
        self.loaders: list = []
        self.started_at = None  # warm-up steps when the gathering began
        self.given_up: list = []

    def start(self, loaders: list, at_step: int) -> None:
        self.loaders, self.started_at = loaders, at_step
        for info in loaders:
            info.replay = PENDING
            info.refresh()

    def ready(self, at_step: int) -> bool:
        pending = [i for i in self.loaders if i.replay is PENDING]
        if pending and at_step - self.started_at >= GIVE_UP:
            for info in pending:
                info.replay = None
                info.refresh()
                info.replay_facts = {"batches": 0, "bytes": 0, "gather_s": 0.0,
                                     "short": f"not fetched in the {GIVE_UP} steps after warm-up: "
                                              "not replayed"}
                self.given_up.append(info)
            return True
        return not pending

    def limit(self) -> int | None:
        """Each loader's share of max_bytes."""
        if self.max_bytes is None:
            return None
        return max(1, self.max_bytes // max(1, len(self.loaders)))

    def gather(self, it, info, fetch, tensor) -> None:
        """Hold up to `want` real batches of `it` (fewer when one more, as large as the mean so far,
        would pass this loader's share of max_bytes, or when the epoch ends first)."""
        start = now()
        held, nbytes, short, limit = [], 0, None, self.limit()
        while len(held) < self.want:
            if limit is not None and held and nbytes + nbytes / len(held) > limit:
                short = f"one more batch would pass max_bytes ({nbytes} bytes held, {limit} allowed)"
                break
            try:
                held.append(fetch(it))
            except StopIteration:
                if not held:
                    raise  # the epoch ended right here: the script sees it, the next epoch gathers
                short = "the epoch ended while gathering"
                break
            nbytes += batch_size_and_bytes(held[-1], tensor)[1]
        info.replay, info.replay_i = held, 0
        info.replay_facts = {"batches": len(held), "bytes": nbytes, "gather_s": (now() - start) / 1e9,
                             "short": short}

    @staticmethod
    def take(info):
        batch = info.replay[info.replay_i % len(info.replay)]
        info.replay_i += 1
        return batch

    def record(self) -> dict:
        parts = [{"loader": i.index, "iteration_index": i.iteration, **(i.replay_facts or {})}
                 for i in self.loaders]
        shorts = [p["short"] for p in parts if p.get("short")]
        return {"type": "replay", "batches": sum(p.get("batches", 0) for p in parts),
                "requested": self.want, "max_bytes": self.max_bytes,
                "bytes": sum(p.get("bytes", 0) for p in parts),
                "gather_s": sum(p.get("gather_s", 0.0) for p in parts),
                "short": shorts[0] if shorts else None, "loaders": parts}
