"""The task registry: one ``Task`` object per task name, and ``make_task``."""
from __future__ import annotations

from .base import Task, TaskSpec
from .catalogue import Add, Cmp, Copy, Grok, Ind, Mod, Mul, Parity, Rev, Sort
from .tokens import add_task_token

# Task name -> its object, in the order runs, tables and checks list tasks.
REGISTRY: dict[str, Task] = {t.name: t for t in (Copy(), Rev(), Cmp(), Parity(), Add(), Mod(), Sort(), Mul(),
                                                Grok(), Ind())}
for _t in REGISTRY.values():      # a task beyond the vocabulary's eight takes a reserved slot (tokens doc)
    add_task_token(_t.token)
TASKS = list(REGISTRY)
LEVELS = ["L1", "L2", "L3"]
# Default level parameters per task (config.yaml repeats them; config wins).
DEFAULT_LEVELS: dict[str, dict[str, dict]] = {name: t.levels for name, t in REGISTRY.items()}


def get_task(name: str) -> Task:
    """The registered task ``name`` (ValueError naming the allowed ones otherwise)."""
    if name not in REGISTRY:
        raise ValueError(f"unknown task {name!r}; allowed: {TASKS}")
    return REGISTRY[name]


def make_task(task: str, level: str, params: dict | None = None) -> TaskSpec:
    """Build the TaskSpec for ``task`` at ``level`` with level ``params`` (defaults if None)."""
    t = get_task(task)
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; allowed: {LEVELS}")
    return t.spec(level, dict(t.levels[level] if params is None else params))


def level_hardness(task: str, params: dict) -> int:
    """Scalar hardness of a level used to check L1 < L2 < L3 (``Task.hardness``)."""
    return REGISTRY[task].hardness(params)
