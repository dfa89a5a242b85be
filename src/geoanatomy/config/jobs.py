"""Per-run and per-job specs of a resolved config (``RunSpec``, ``JobSpec``): what a
Snakemake rule passes to its stage."""
from __future__ import annotations

import copy

from ..errors import ConfigError
from ..spec import JobSpec, RunSpec, pack_key, parse_mixture_name, parse_run_name
from .grid import (
    eval_settings,
    level_params,
    mixture_spec,
    mixture_unit_names,
    numerics_settings,
    run_names,
    runs,
    train_settings,
)


def run_spec(cfg: dict, name: str) -> RunSpec:
    """The RunSpec of run ``name`` (a single-task run, a mixture or a mixture's unit)."""
    if parse_mixture_name(name) is not None:
        return mixture_spec(cfg, name)
    parts = parse_run_name(name)
    if parts is None:
        raise ConfigError(f"run name {name!r} is not task_level_size[_shuffled][_sSEED]") from None
    key = (parts["task"], parts["level"], parts["size"], parts["control"], parts["seed"])
    if key not in set(runs(cfg)):
        names = run_names(cfg)
        raise ConfigError(f"run {name!r} is not in the config grid; runs: {names[:20]}"
                          + (f" ... ({len(names)} in all)" if len(names) > 20 else ""))
    task, level, size, control, seed = key
    return RunSpec(task=task, level=level, size=size, level_params=level_params(cfg, task, level),
                   train=train_settings(cfg, size), data=dict(cfg["data"]), seed=seed,
                   block_size=int(cfg["model"]["block_size"]), eval=eval_settings(cfg, size), control=control,
                   numerics=numerics_settings(cfg))


def train_packs(cfg: dict) -> dict[str, list[str]]:
    """{pack name: its runs}: with ``pack: {train: K}`` (K > 1) the single-task runs that can be
    stacked (one model size, block size, batch size and numerics: ``spec.check_pack``), in grid
    order, in packs of at most K, named SIZE_pNN; each pack trains in one job
    (``stages.train_pack``, rule train_pack). Empty with K = 1 (every run trains alone).
    Mixtures always train alone."""
    k = int((cfg.get("pack") or {}).get("train", 1))
    if k <= 1:
        return {}
    groups: dict[tuple, list[str]] = {}
    for name in run_names(cfg):
        groups.setdefault(pack_key(run_spec(cfg, name)), []).append(name)
    out, count = {}, {}
    for (size, *_), names in groups.items():
        for i in range(0, len(names), k):
            n = count[size] = count.get(size, -1) + 1
            out[f"{size}_p{n:02d}"] = names[i:i + k]
    return out


def pack_of(cfg: dict) -> dict[str, str]:
    """{run: its training pack} (``train_packs``); a run not in it trains alone."""
    return {r: p for p, rs in train_packs(cfg).items() for r in rs}


# Config blocks each stage reads besides the run itself (the job's Snakemake params carry
# them, so changing a block reruns exactly the stages that read it).
STAGE_BLOCKS = {"train": (), "metrics": (), "measures": ("measures",), "probes": ("probes",),
                "events": ("events",), "prune": ("keep_checkpoints",)}


def job_spec(cfg: dict, name: str, stage: str) -> JobSpec:
    """The JobSpec of ``stage`` for run ``name`` of a resolved config.

    train gets no evaluation settings (they do not change the weights, so editing them must
    not retrain)."""
    if stage not in STAGE_BLOCKS:
        raise ConfigError(f"unknown stage {stage!r}; stages: {list(STAGE_BLOCKS)}")
    spec = run_spec(cfg, name)
    if spec.mixture and (stage in ("train", "prune")) == spec.is_unit:
        raise ConfigError(f"{name!r} is a mixture's {'unit' if spec.is_unit else 'training run'}: "
                          + (f"{stage} its mixture {spec.train_name!r}" if spec.is_unit else
                             f"the {stage} stage runs on its units {mixture_unit_names(cfg, name)}"))
    if stage == "train":
        spec = RunSpec(**{**spec.__dict__, "eval": {}})
    blocks = {b: copy.deepcopy(cfg[b]) for b in STAGE_BLOCKS[stage]}
    return JobSpec(stage=stage, run=spec, results_dir=cfg["results_dir"], device=cfg["device"], blocks=blocks)
