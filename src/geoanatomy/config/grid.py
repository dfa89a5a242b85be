"""The grid: a config's single-task runs in grid order, each run's level parameters and
training settings, and the pruning window."""
from __future__ import annotations

import json

from ..spec import run_name
from .reading import deep_merge

# Keys only a mixture block (``protocol: mixture``) has (geoanatomy.config.mixtures).
MIXTURE_KEYS = ("name", "weights", "controls")


def level_params(cfg: dict, task: str, level: str) -> dict:
    """A task level's parameters: the config's ``tasks:`` entry, else the task's default."""
    from ..tasks import DEFAULT_LEVELS
    return dict((cfg.get("tasks", {}).get(task, {}) or {}).get(level) or DEFAULT_LEVELS[task][level])


def eval_settings(cfg: dict, size: str) -> dict:
    """The ``eval`` block a run of ``size`` reads: ``n_samples`` (RankMe's N and the
    behavioural evaluation set) from ``eval.n_samples_by_size`` where it names the size, else
    ``eval.n_samples``; the mapping itself stays out (a change for one size reruns that size
    only)."""
    e = dict(cfg["eval"])
    by_size = e.pop("n_samples_by_size", None) or {}
    if size in by_size:
        e["n_samples"] = int(by_size[size])
    return e


def numerics_settings(cfg: dict) -> dict:
    """The ``numerics`` keys that differ from their defaults (what a run hashes)."""
    from ..runtime import NUMERICS
    got = cfg.get("numerics") or {}
    return {k: got[k] for k in sorted(got) if k in NUMERICS and got[k] != NUMERICS[k]}


def train_settings(cfg: dict, size: str) -> dict:
    """The ``train`` block with the size's ``size_overrides`` merged in."""
    return deep_merge(cfg["train"], cfg.get("size_overrides", {}).get(size, {}) or {})


def runs(cfg: dict) -> list[tuple[str, str, str, str, int]]:
    """(task, level, size, control, seed) of every run, in grid order, without duplicates.
    A block's ``seeds`` default to [the top-level seed]; ``control`` to "" (the task itself)."""
    seen: dict[tuple, None] = {}
    for block in cfg["grid"]:
        if block.get("protocol", "single") == "mixture":   # mixtures(cfg) enumerates those
            continue
        sizes, levels = list(dict.fromkeys(block["sizes"])), list(dict.fromkeys(block["levels"]))
        seeds = [int(x) for x in dict.fromkeys(block.get("seeds") or [cfg["seed"]])]
        control = block.get("control", "none")
        control = "" if control == "none" else control
        for t in dict.fromkeys(block["tasks"]):
            for lv in levels:
                for s in sizes:
                    for seed in seeds:
                        seen[(t, lv, s, control, seed)] = None
    return list(seen)


def run_names(cfg: dict) -> list[str]:
    """The single-task runs of the grid, in grid order."""
    return [run_name(*r) for r in runs(cfg)]


def training_runs_by_size(cfg: dict) -> dict[str, list[str]]:
    """{size: every run that trains a model of that size}: the single-task runs in grid order,
    then the mixtures' training runs (geoanatomy.config.mixture_grid) in grid order."""
    from .mixture_grid import mixtures
    by_size: dict[str, list[str]] = {}
    for r in runs(cfg):
        by_size.setdefault(r[2], []).append(run_name(*r))
    for m in mixtures(cfg):
        by_size.setdefault(m["size"], []).append(m["name"])
    return by_size


def prune_window(cfg: dict) -> dict[str, str]:
    """{run: the run whose pruning it waits for before training}: with ``keep_checkpoints:
    final`` and ``max_unpruned_runs: J``, the training runs of each size (single-task runs,
    then mixtures: ``training_runs_by_size``) train in that order with at most J of them
    holding their analysis checkpoints at once (run i waits for run i - J of its size to be
    pruned), so a grid's checkpoint disk never exceeds what is kept plus J runs of every size
    (geoanatomy.cost.peak_disk_mb). Empty otherwise."""
    j = cfg.get("max_unpruned_runs")
    if cfg.get("keep_checkpoints", "all") != "final" or not j:
        return {}
    return {names[i]: names[i - j] for names in training_runs_by_size(cfg).values() for i in range(j, len(names))}


def pack_slots(cfg: dict) -> dict[str, int]:
    """{training run: its batch}: runs of one batch never wait for each other, so their jobs
    (a mixture's: those of its units) may share a GPU in one group job
    (geoanatomy.cost.pack_group). Without a prune window every run is in batch 0; with one
    (``prune_window``), the runs of a size come in batches of J in training order (run i waits
    only for run i - J), numbered across sizes."""
    j = cfg.get("max_unpruned_runs") if cfg.get("keep_checkpoints", "all") == "final" else None
    by_size = training_runs_by_size(cfg)
    if not j:
        return {n: 0 for names in by_size.values() for n in names}
    out, base = {}, 0
    for names in by_size.values():
        out.update({n: base + i // j for i, n in enumerate(names)})
        base += -(-len(names) // j)
    return out


def dedupe_grid(user: dict) -> dict:
    """Each grid block's lists without repeats, and repeated blocks dropped: the run
    product stays small whatever the file repeats."""
    if "grid" not in user:
        return user
    blocks, seen = [], set()
    for b in user["grid"]:
        nb = {**b, **{k: list(dict.fromkeys(b[k])) for k in ("tasks", "levels", "sizes", "seeds") if k in b}}
        key = (tuple(tuple(nb[k]) for k in ("tasks", "levels", "sizes")), tuple(nb.get("seeds", ())),
               nb.get("control", ""))
        if "protocol" in nb or any(k in nb for k in MIXTURE_KEYS):   # a mixture block is its own run
            key += (json.dumps({k: nb.get(k) for k in ("protocol",) + MIXTURE_KEYS}, sort_keys=True),)
        if key not in seen:
            seen.add(key)
            blocks.append(nb)
    return {**user, "grid": blocks}
