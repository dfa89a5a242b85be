"""Checkpoint and learning-rate schedules."""
from __future__ import annotations

import math

import numpy as np


def checkpoint_steps(steps: int, n_log: int, log_end: float, n_uniform: int) -> list[int]:
    """Dense-early checkpoint steps: 0, ``n_log`` log-spaced steps in [1, log_end*steps],
    then ``n_uniform`` evenly spaced steps in (log_end*steps, steps]; rounded, de-duplicated,
    always ending at ``steps``.

    Example: steps=1000, n_log=10, log_end=0.1, n_uniform=9 ->
    [0, 1, 2, 3, 5, 8, 13, 22, 36, 60, 100, 200, 300, ..., 1000] (log part is rounded so
    adjacent small steps merge; the count can be below n_log + n_uniform + 1).
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    log_stop = max(1, int(round(log_end * steps)))
    parts = [np.array([0, steps], dtype=np.int64)]
    # np.rint rounds half to even like round(); vectorised, so 10^5 checkpoints cost milliseconds
    if n_log > 0:
        parts.append(np.rint(np.geomspace(1, log_stop, n_log)).astype(np.int64))
    if n_uniform > 0:
        parts.append(np.rint(np.linspace(log_stop, steps, n_uniform + 1)[1:]).astype(np.int64))
    pts = np.unique(np.concatenate(parts))
    return [int(p) for p in pts if 0 <= p <= steps]


def train_checkpoint_steps(train: dict) -> list[int]:
    """``checkpoint_steps`` of a ``train`` settings block (its ``steps`` and ``checkpoints``:
    n_log, log_end, n_uniform): the steps training writes a checkpoint at."""
    ck = train["checkpoints"]
    return checkpoint_steps(int(train["steps"]), int(ck["n_log"]), float(ck["log_end"]), int(ck["n_uniform"]))


def lr_at(step: int, lr: float, warmup: int, steps: int, min_lr_frac: float) -> float:
    """Linear warmup from 0 to ``lr`` over ``warmup`` steps, then cosine decay to
    ``min_lr_frac * lr`` at ``steps``: lr_t = lr_min + (lr - lr_min) * (1 + cos(pi * u)) / 2,
    u = (t - warmup) / (steps - warmup). ``step`` is the 0-based index of the update.
    """
    if warmup > 0 and step < warmup:
        return lr * (step + 1) / warmup
    if steps <= warmup:
        return lr
    u = min(1.0, (step - warmup) / (steps - warmup))
    lo = min_lr_frac * lr
    return lo + (lr - lo) * 0.5 * (1.0 + math.cos(math.pi * u))


def measure_steps(steps: list[int], n_points: int) -> list[int]:
    """The checkpoints an expensive measure is taken at: ``n_points`` checkpoints evenly
    spaced in checkpoint *index* (so as dense as the checkpoint schedule itself: log-dense
    early, uniform later), always the first and the last; every checkpoint when there are
    no more than ``n_points``. Chosen from the schedule alone, never from an event, so two
    runs of one size and budget are measured at the same steps whatever they learn.

    Example: 76 checkpoints, n_points=24 -> indices 0, 3, 7, 10, ..., 75 (rint of
    linspace(0, 75, 24))."""
    if n_points < 2:
        raise ValueError(f"measures.n_points must be >= 2, got {n_points}")
    steps = sorted(int(s) for s in steps)
    if len(steps) <= n_points:
        return steps
    idx = np.unique(np.rint(np.linspace(0, len(steps) - 1, n_points)).astype(np.int64))
    return [steps[i] for i in idx]
