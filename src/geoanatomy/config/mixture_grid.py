"""The multi-task protocol's part of the grid.

A grid block with ``protocol: mixture`` trains one model per size and seed on every task x
level combination of the block (geoanatomy.mixture; docs/mixture.md). Its training run is
NAME_SIZE[_sN]; each combination is an analysis unit NAME_SIZE[_sN]/TASK_LEVEL[_shuffled].
"""
from __future__ import annotations

import copy

from ..errors import ConfigError
from ..spec import RunSpec, combination_name, mixture_run_name, parse_mixture_name
from .grid import MIXTURE_KEYS, eval_settings, level_params, numerics_settings, run_names, train_settings


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
