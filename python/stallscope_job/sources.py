"""What the training thread takes batches from: DataLoaders and data queues, and how each was classified.

A **source** is one DataLoader (all its iterators, across epochs) or one data queue (a `queue.Queue`
that a thread iterating a DataLoader puts into). The training thread's fetches from a source are
classified in bursts (training.py); each source counts the batches of each classification and why,
for the `done` record's `loaders` and `queues`.
"""

from __future__ import annotations

import weakref

# Why a burst of fetches is not the training step's data (docs/job-protocol.md, "Classification").
NO_GRAD = "taken with gradients disabled (torch.no_grad or inference_mode)"
SEVERAL = "several batches with no backward or optimizer step between them, then another source's"
ENDED = "its iterator ended (or was freed) before any backward or optimizer step"
FALLBACK = "not the DataLoader whose loop the fallback times"
TRAINED = "a backward or optimizer step followed it"
ONLY = "the only data before a backward or optimizer step (the other rules would have left none)"
TRAINING_FALLBACK = "the DataLoader whose loop the fallback times"


class Source:
    """Counts of classified batches: (phase, role, why) -> [bursts, batches]."""

    kind = "source"

    def __init__(self) -> None:
        self.roles: dict[tuple[str, str, str], list[int]] = {}
        # A weak reference whose death ends the source (its newest iterator, or the queue itself);
        # None: not ended (see `ended`).
        self.it_ref = None

    def note(self, phase: str, role: str, why: str, batches: int) -> None:
        self.note_many(phase, role, why, 1, batches)

    def note_many(self, phase: str, role: str, why: str, bursts: int, batches: int) -> None:
        """`bursts` notes at once, of `batches` batches in all."""
        got = self.roles.get((phase, role, why))
        if got is None:
            self.roles[(phase, role, why)] = [bursts, batches]
        else:
            got[0] += bursts
            got[1] += batches

    def training_batches(self, phase: str | None = None) -> int:
        return sum(n for (p, role, _), (_, n) in self.roles.items()
                   if role == "training" and (phase is None or p == phase))

    def role(self) -> str:
        """"training", "validation", "both" or "unused", over the window when it has any, else overall."""
        phases = {p for p, _, _ in self.roles}
        phase = "window" if "window" in phases else None
        kinds = {role for (p, role, _) in self.roles if phase is None or p == phase}
        if not kinds:
            return "unused"
        return kinds.pop() if len(kinds) == 1 else "both"

    def classification(self) -> list[dict]:
        return [{"phase": p, "role": role, "why": why, "bursts": b, "batches": n}
                for (p, role, why), (b, n) in sorted(self.roles.items())]

    def ended(self) -> bool:
        """Its newest iterator (a queue: the queue) was freed (a StopIteration is the burst's to see)."""
        return self.it_ref is not None and self.it_ref() is None


class LoaderInfo(Source):
    """One DataLoader object: its construction and iteration indices, epochs, replay, window counts."""

    kind = "loader"

    def __init__(self, loader, index: int | None, decisions: list) -> None:
        super().__init__()
        self.ref = weakref.ref(loader) if loader is not None else None
        self.index = index
        self.iteration = None
        self.decisions = decisions
        self.epoch = -1
        self.first_pending = False
        self.plain = True  # no first batch pending, no replay: the training thread's fast path
        self.iter_start = self.iter_ns = 0
        self.delivered = 0  # batches returned, any thread
        self.window = [0, 0, 0]  # batches, samples, bytes delivered inside the window (any thread)
        self.since_uss = [0, 0]  # batches, samples delivered since the workers' USS was read
        self.replay = None  # None, PENDING, or the held batches
        self.replay_i = 0
        self.replay_facts = None
        self.threads = set()  # "training" / "other": who iterated it
        # Its batches are counted where the training thread gets them from its queue, not by its
        # feeder thread (see `count_at_gets`).
        self.counted_at_get = False

    def label(self) -> str:
        return f"DataLoader #{self.index}" if self.index is not None else "a DataLoader built unseen"

    def count(self, samples: int | None, nbytes: int, window: bool) -> None:
        """One batch delivered (any thread), from the workers' USS read on (and in the window)."""
        self.count_many(1, samples or 0, nbytes, window)

    def count_many(self, batches: int, samples: int, nbytes: int, window: bool) -> None:
        """`batches` batches at once, `samples` (unknown ones as 0) and `nbytes` in all."""
        self.since_uss[0] += batches
        self.since_uss[1] += samples
        if window:
            w = self.window
            w[0] += batches
            w[1] += samples
            w[2] += nbytes

    def refresh(self) -> None:
        self.plain = not self.first_pending and self.replay is None


class QueueInfo(Source):
    """One `queue.Queue` the training thread took from, or a feeder thread put into."""

    kind = "queue"

    def __init__(self, q, index: int) -> None:
        super().__init__()
        self.ref = self.it_ref = weakref.ref(q)
        self.index = index
        self.kind_name = f"{type(q).__module__}.{type(q).__qualname__}"
        self.data = False  # a thread that iterates a DataLoader put into it
        self.loaders: list = []  # the LoaderInfo of each feeder that put into it
        self.pending = None  # [event, first start, ns, synced ns] of gets before it became a data queue
        self.gets = 0
        self.last_feeder = None  # the feeder's loader of the last put seen (a put by it again: nothing new)
        self.fed_note = f"fed queue #{index}"
        self.counts_for = None  # the one loader whose batches its gets count (see count_at_gets)

    def label(self) -> str:
        return f"queue #{self.index}"

    def fed_by(self, loader) -> None:
        self.last_feeder = loader
        if loader is not None and loader not in self.loaders:
            self.loaders.append(loader)
            if self.counts_for is not None:  # a second loader: each feeder counts its own again
                self.uncount()
            if loader.counted_at_get:  # a new queue of the same feeding (MONAI's, each epoch)
                if len(self.loaders) == 1:
                    self.counts_for = loader
                else:
                    loader.counted_at_get = False

    def uncount(self) -> None:
        """Its gets stop counting its loader's batches (a second loader feeds it, or a thread other
        than the training thread takes from it): the loader's feeder counts them again."""
        self.counts_for.counted_at_get = False
        self.counts_for = None


def count_at_gets(queues: list) -> None:
    """Where a loader's batches are counted once counting starts (the memory record's samples and
    the window's counts): a loader whose feeder thread puts only into data queues that the training
    thread gets from, each fed by that loader alone, is counted at those gets (the get reads each
    batch's size anyway); any other, by its feeder as it takes each batch. Decided when counting
    starts, before anyone counts: no batch is counted twice or missed at the switch."""
    fed: dict[int, list] = {}
    for q in queues:
        for loader in q.loaders:
            fed.setdefault(id(loader), []).append(q)
    for q in queues:
        if q.data and q.gets and len(q.loaders) == 1 and all(
                o.data and o.gets and len(o.loaders) == 1 for o in fed[id(q.loaders[0])]):
            q.counts_for = q.loaders[0]
            q.counts_for.counted_at_get = True
