"""The grid: a config's single-task runs in grid order, each run's level parameters and
training settings, the pruning window, and the multi-task protocol's part of the grid.

A grid block with ``protocol: mixture`` trains one model per size and seed on every task x
level combination of the block (geoanatomy.mixture; docs/mixture.md). Its training run is
NAME_SIZE[_sN]; each combination is an analysis unit NAME_SIZE[_sN]/TASK_LEVEL[_shuffled].
"""
from __future__ import annotations

import copy
import json

from ..errors import ConfigError
from ..spec import RunSpec, combination_name, mixture_run_name, parse_mixture_name, run_name
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
    then the mixtures' training runs (``mixtures``) in grid order."""
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


# ------------------------------------------------------------- the multi-task protocol
def _combos(block: dict) -> list[str]:
    return [f"{t}_{lv}" for t in dict.fromkeys(block["tasks"]) for lv in dict.fromkeys(block["levels"])]


def mixtures(cfg: dict) -> list[dict]:
    """Every mixture training run of the grid, in grid order: {"name" (the run), "mixture",
    "size", "seed", "block" (index in grid), "components": [{task, level, level_params, control,
    weight}, ...]} (components in block order: tasks, then levels)."""
    out: dict[str, dict] = {}
    for i, block in enumerate(cfg["grid"]):
        if block.get("protocol", "single") != "mixture":
            continue
        mix = block.get("name", "mixture")
        default_control = block.get("control", "none")
        comps = []
        for combo in _combos(block):
            task, level = combo.split("_")
            control = (block.get("controls") or {}).get(combo, default_control)
            comps.append({"task": task, "level": level, "level_params": level_params(cfg, task, level),
                          "control": "" if control == "none" else control,
                          "weight": float((block.get("weights") or {}).get(combo, 1.0))})
        for size in dict.fromkeys(block["sizes"]):
            for seed in dict.fromkeys(int(x) for x in (block.get("seeds") or [cfg["seed"]])):
                name = mixture_run_name(mix, size, seed)
                out.setdefault(name, {"name": name, "mixture": mix, "size": size, "seed": seed, "block": i,
                                      "components": comps})
    return list(out.values())


def mixture_names(cfg: dict) -> list[str]:
    """The training runs of the grid's mixtures."""
    return [m["name"] for m in mixtures(cfg)]


def mixture_unit_names(cfg: dict, parent: str | None = None) -> list[str]:
    """The analysis units (one per combination) of every mixture, or of the mixture ``parent``."""
    return [f"{m['name']}/{combination_name(c['task'], c['level'], c['control'])}"
            for m in mixtures(cfg) if parent is None or m["name"] == parent for c in m["components"]]


def unit_names(cfg: dict) -> list[str]:
    """Every analysis unit of the grid: the single-task runs, then the mixtures' units (each
    gets metrics, measures, probes and a precursor.json)."""
    return run_names(cfg) + mixture_unit_names(cfg)


def mixture_spec(cfg: dict, name: str) -> RunSpec:
    """The RunSpec of a mixture's training run (``task`` empty) or of one of its units."""
    parts = parse_mixture_name(name)
    found = {m["name"]: m for m in mixtures(cfg)}
    if parts is None or parts["parent"] not in found:
        names = mixture_names(cfg)
        raise ConfigError(f"mixture run {name!r} is not in the config grid; mixtures: {names[:20]}"
                          + (f" ... ({len(names)} in all)" if len(names) > 20 else ""))
    m = found[parts["parent"]]
    base = dict(size=m["size"], train=train_settings(cfg, m["size"]), data=dict(cfg["data"]), seed=m["seed"],
                block_size=int(cfg["model"]["block_size"]), eval=eval_settings(cfg, m["size"]),
                mixture={"name": m["mixture"], "components": copy.deepcopy(m["components"])},
                numerics=numerics_settings(cfg))
    if parts["task"] is None:
        return RunSpec(task="", level="", level_params={}, control="", **base)
    for c in m["components"]:
        if (c["task"], c["level"], c["control"]) == (parts["task"], parts["level"], parts["control"]):
            return RunSpec(task=c["task"], level=c["level"], level_params=dict(c["level_params"]),
                           control=c["control"], **base)
    raise ConfigError(f"{name!r}: {parts['parent']!r} has no combination "
                      f"{combination_name(parts['task'], parts['level'], parts['control'])!r}; its units: "
                      f"{mixture_unit_names(cfg, parts['parent'])}")


def check_mixtures(cfg: dict) -> None:
    """Semantic checks of the grid's mixture blocks (the schema has checked types): mixture
    keys only in mixture blocks, at least two combinations, weights and controls only for the
    block's combinations, one block per mixture training run."""
    trained_by: dict[str, int] = {}
    for i, block in enumerate(cfg["grid"]):
        where = f"grid.{i}"
        if block.get("protocol", "single") != "mixture":
            for k in MIXTURE_KEYS:
                if k in block:
                    raise ConfigError(f"config field '{where}.{k}': only for a mixture block (protocol: mixture); "
                                      f"this block is single-task")
            continue
        combos = _combos(block)
        if len(combos) < 2:
            raise ConfigError(f"config field '{where}': protocol mixture needs at least two task x level "
                              f"combinations, got {combos}; use protocol: single for one")
        for k in ("weights", "controls"):
            for combo in (block.get(k) or {}):
                if combo not in combos:
                    raise ConfigError(f"config field '{where}.{k}.{combo}': {combo!r} is not a combination of "
                                      f"this block (TASK_LEVEL); its combinations: {combos}")
        mix = block.get("name", "mixture")
        for size in dict.fromkeys(block["sizes"]):
            for seed in dict.fromkeys(int(x) for x in (block.get("seeds") or [cfg["seed"]])):
                name = mixture_run_name(mix, size, seed)
                if name in trained_by and trained_by[name] != i:
                    raise ConfigError(f"config field '{where}': the mixture run {name!r} is also trained by "
                                      f"grid.{trained_by[name]} with other settings; give one block its own "
                                      f"name (e.g. name: {mix}2)")
                trained_by[name] = i
