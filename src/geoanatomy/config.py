"""Configuration: defaults, schema validation, semantic checks, per-run specs.

No torch import here: the Snakefile imports this module at parse time.

A config is validated in two passes, both before any job runs:
1. JSON schema (``workflow/schemas/config.schema.yaml``; unknown keys and wrong
   types are rejected, the message names the field path);
2. semantic checks a schema cannot express (``check_semantics``): levels graded
   L1 < L2 < L3 by their own parameter, sequences fit the context, evaluation
   samples fit in the held-out set, warmup and checkpoint schedule fit the steps,
   the events layer exists for every size.
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from .errors import ConfigError
from .pythia.settings import BENCHMARKS as PYTHIA_BENCHMARKS
from .sizes import SIZES, layer_names
from .spec import JobSpec, RunSpec

SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")

DEFAULTS: dict = {
    "seed": 0,
    "device": "auto",
    "results_dir": "results",
    "tasks": {},
    "model": {"block_size": 64},
    "train": {
        "steps": 2000, "batch_size": 64, "lr": 1e-3, "warmup": 100, "min_lr_frac": 0.1,
        "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.98, "grad_clip": 1.0,
        "checkpoints": {"n_log": 30, "log_end": 0.1, "n_uniform": 50},
    },
    "size_overrides": {},
    "data": {"n_heldout": 1024, "heldout_frac": 0.25},
    "eval": {"n_samples": 200, "rankme_eps": 1e-7},
    "events": {
        "layer": "ln_final", "position": "first", "variant": "uncentred",
        "acquisition_threshold": 0.5, "persist": 3,
        "collapse_drop": 0.3, "collapse_half": 0.5, "recovery_rise": 0.25,
        "transition": "floor", "precursor_min_gap_frac": 0.25,
        "logprob_margin": 0.1, "easy_max_frac": 0.1,
    },
    # Expensive measures on a checkpoint subset (geoanatomy.expensive documents every key).
    "measures": {
        "which": ["grad_rank", "hessian", "llc"],
        "sizes": ["nano", "micro", "small", "medium", "large", "xlarge"],
        "every_k": 25, "around_events": 0,
        "events": ["acquisition", "rankme_floor", "rankme_recovery"],
        "grad": {"n_samples": 64, "method": "vmap", "max_mbytes": 256, "rankme_eps": 1e-7},
        "hessian": {"batch_size": 32, "max_iter": 100, "tol": 1e-3},
        "llc": {"eps": 3e-5, "gamma": 1e4, "n_beta": 30.0, "chains": 2, "draws": 20, "burnin": 5,
                "batch_size": 32, "n_data": 512, "disagree_threshold": 0.5},
    },
    # Linear probes per layer and checkpoint (geoanatomy.probes documents every key).
    "probes": {"sizes": ["nano", "micro", "small", "medium", "large", "xlarge"],
               "n_samples": 200, "test_frac": 0.5, "positions": "first", "every_k": 2,
               "C": 0.1, "max_iter": 100, "standardize": True},
    "threads": {"train": 1, "metrics": 1, "events": 1, "measures": 1, "probes": 1},
    # Cross-run analysis -> results/summary/ (geoanatomy.analysis documents every key).
    "summary": {"coincide_log10_tol": 0.1, "exact_max_n": 9, "n_resamples": 20000, "seed": 0,
                "alpha": 0.05, "topdown_require_collapse": True},
    # Pythia validation branch (geoanatomy.pythia.settings documents every key).
    "pythia": {
        "enabled": False, "models": [], "revisions": "all", "benchmarks": list(PYTHIA_BENCHMARKS),
        "n_items": {}, "deduction_seed": 0, "scoring": "sum", "layer": "final_ln_post",
        "delete_cache": False, "cache_dir": None, "dtype": "float32", "batch_size": 16,
        "device": "auto", "threads": 1,
    },
}


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_schema() -> dict:
    """The JSON schema of a config, with the allowed task, level, size and Pythia benchmark
    names filled in from the library (their one home)."""
    from .tasks import LEVELS, TASKS
    # libyaml's loader when present: the pure-Python one took ~0.1 s of every Snakefile parse
    schema = yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    for name, values in (("task", TASKS), ("level", LEVELS), ("size", list(SIZES)),
                         ("pythia_benchmark", PYTHIA_BENCHMARKS)):
        schema["$defs"][name]["enum"] = list(values)
    return schema


def _field(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def validate_schema(cfg: dict) -> None:
    """Raise ConfigError naming the first offending field (JSON schema pass)."""
    import jsonschema
    v = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(v.iter_errors(cfg), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if not errors:
        return
    e = errors[0]
    where = _field(e.absolute_path)
    msg = e.message
    if e.validator == "enum":
        msg = f"{e.instance!r} is not allowed; allowed values: {e.validator_value}"
    elif e.validator == "additionalProperties":
        allowed = sorted((e.schema.get("properties") or {}).keys())
        msg = f"{e.message}; allowed keys: {allowed}"
    elif e.validator == "propertyNames":
        msg = f"{e.instance!r} is not allowed; allowed values: {e.validator_value.get('enum', e.validator_value)}"
        if "$ref" in e.validator_value:
            ref = e.validator_value["$ref"].split("/")[-1]
            msg = f"{e.instance!r} is not allowed; allowed values: {load_schema()['$defs'][ref]['enum']}"
    raise ConfigError(f"config field '{where}': {msg}" + (f" (got {e.instance!r})" if e.validator not in ("enum", "additionalProperties", "propertyNames") else ""))


def load_config(path: str | Path | None = None, overrides: dict | None = None) -> dict:
    """Read a YAML config file, validate it, and return it merged over DEFAULTS."""
    user: dict = {}
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise ConfigError(f"config file {p}: cannot be read ({e.strerror or e})") from e
        try:
            user = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {p}: not valid YAML ({e})") from e
        if not isinstance(user, dict):
            raise ConfigError(f"config file {p}: top level must be a mapping, got {type(user).__name__}")
    user = deep_merge(user, overrides or {})
    return resolve(user)


def resolve(user: dict) -> dict:
    """Validate a user config dict (schema + semantics) and merge it over DEFAULTS."""
    validate_schema(user)
    cfg = deep_merge(DEFAULTS, user)
    check_semantics(cfg)
    return cfg


# ----------------------------------------------------------------- run specs
def level_params(cfg: dict, task: str, level: str) -> dict:
    from .tasks import DEFAULT_LEVELS
    return dict((cfg.get("tasks", {}).get(task, {}) or {}).get(level) or DEFAULT_LEVELS[task][level])


def train_settings(cfg: dict, size: str) -> dict:
    return deep_merge(cfg["train"], cfg.get("size_overrides", {}).get(size, {}) or {})


def runs(cfg: dict) -> list[tuple[str, str, str]]:
    """(task, level, size) of every run, in grid order, without duplicates."""
    seen: dict[tuple, None] = {}
    for block in cfg["grid"]:
        for t in block["tasks"]:
            for lv in block["levels"]:
                for s in block["sizes"]:
                    seen[(t, lv, s)] = None
    return list(seen)


def run_names(cfg: dict) -> list[str]:
    return [f"{t}_{lv}_{s}" for t, lv, s in runs(cfg)]


def run_spec(cfg: dict, name: str) -> RunSpec:
    try:
        task, level, size = name.split("_")
    except ValueError:
        raise ConfigError(f"run name {name!r} is not task_level_size") from None
    if (task, level, size) not in runs(cfg):
        raise ConfigError(f"run {name!r} is not in the config grid; runs: {run_names(cfg)}")
    return RunSpec(task=task, level=level, size=size, level_params=level_params(cfg, task, level),
                   train=train_settings(cfg, size), data=dict(cfg["data"]), seed=int(cfg["seed"]),
                   block_size=int(cfg["model"]["block_size"]), eval=dict(cfg["eval"]))


# Config blocks each stage reads besides the run itself (the job's Snakemake params carry
# them, so changing a block reruns exactly the stages that read it).
STAGE_BLOCKS = {"train": (), "metrics": (), "measures": ("measures", "events"), "probes": ("probes",),
                "events": ("events",)}


def job_spec(cfg: dict, name: str, stage: str) -> JobSpec:
    """The JobSpec of ``stage`` for run ``name`` of a resolved config.

    train gets no evaluation settings (they do not change the weights, so editing them must
    not retrain); measures reads the events block only when ``measures.events`` picks
    checkpoints around events."""
    if stage not in STAGE_BLOCKS:
        raise ConfigError(f"unknown stage {stage!r}; stages: {list(STAGE_BLOCKS)}")
    spec = run_spec(cfg, name)
    if stage == "train":
        spec = RunSpec(**{**spec.__dict__, "eval": {}})
    blocks = {b: copy.deepcopy(cfg[b]) for b in STAGE_BLOCKS[stage]}
    if stage == "measures" and not cfg["measures"]["events"]:
        del blocks["events"]
    return JobSpec(stage=stage, run=spec, results_dir=cfg["results_dir"], device=cfg["device"], blocks=blocks)


# ------------------------------------------------------------ semantic checks
def check_semantics(cfg: dict) -> None:
    from .tasks import LEVEL_PARAM, LEVELS, TASKS, level_hardness, make_task
    from .schedule import checkpoint_steps

    for task, levels in (cfg.get("tasks") or {}).items():
        for lv, p in (levels or {}).items():
            want = LEVEL_PARAM[task]
            extra = sorted(set(p) - {want})
            if want not in p or extra:
                raise ConfigError(f"config field 'tasks.{task}.{lv}': task {task!r} takes exactly "
                                  f"the parameter {want!r}, got {sorted(p)}")
            if task == "mul" and not isinstance(p[want], list):
                raise ConfigError(f"config field 'tasks.mul.{lv}.digits': give [digits_a, digits_b], got {p[want]!r}")
            if task != "mul" and isinstance(p[want], list):
                raise ConfigError(f"config field 'tasks.{task}.{lv}.{want}': give one integer, got {p[want]!r}")
    for task in TASKS:
        hard = [level_hardness(task, level_params(cfg, task, lv)) for lv in LEVELS]
        for i in range(2):
            if not hard[i] < hard[i + 1]:
                raise ConfigError(
                    f"config field 'tasks.{task}': {LEVELS[i + 1]} must be harder than {LEVELS[i]} by its "
                    f"'{LEVEL_PARAM[task]}' ({level_params(cfg, task, LEVELS[i])} vs "
                    f"{level_params(cfg, task, LEVELS[i + 1])})")

    used_sizes = sorted({s for _, _, s in runs(cfg)})
    for size in ["<train>"] + used_sizes:
        tr = cfg["train"] if size == "<train>" else train_settings(cfg, size)
        where = "train" if size == "<train>" else f"size_overrides.{size}"
        if tr["warmup"] >= tr["steps"]:
            raise ConfigError(f"config field '{where}.warmup': {tr['warmup']} must be smaller than steps ({tr['steps']})")
        ck = tr["checkpoints"]
        if ck["n_log"] + ck["n_uniform"] < 1:
            raise ConfigError(f"config field '{where}.checkpoints': n_log + n_uniform must be >= 1")
        if ck["n_uniform"] > tr["steps"]:
            raise ConfigError(f"config field '{where}.checkpoints.n_uniform': {ck['n_uniform']} checkpoints "
                              f"do not fit in steps={tr['steps']}")
        n = len(checkpoint_steps(tr["steps"], ck["n_log"], ck["log_end"], ck["n_uniform"]))
        if n < cfg["events"]["persist"] + 2:
            raise ConfigError(f"config field '{where}.checkpoints': only {n} distinct checkpoint steps; "
                              f"event detection needs at least events.persist + 2 = {cfg['events']['persist'] + 2}")

    n_eval = cfg["eval"]["n_samples"]
    for task, lv, size in runs(cfg):
        spec = make_task(task, lv, level_params(cfg, task, lv))
        if spec.seq_len - 1 > cfg["model"]["block_size"]:
            raise ConfigError(f"config field 'model.block_size': {task} {lv} needs {spec.seq_len - 1} positions, "
                              f"block_size is {cfg['model']['block_size']}")
        space = 10 ** spec.space_log10
        n_held = min(cfg["data"]["n_heldout"], int(cfg["data"]["heldout_frac"] * space + 1e-9))
        if n_eval > n_held:
            raise ConfigError(f"config field 'eval.n_samples': {n_eval} exceeds the held-out set of {task} {lv} "
                              f"({n_held} = min(data.n_heldout, data.heldout_frac x {space:.0f} inputs))")
        n_probe = cfg["probes"]["n_samples"]
        if n_probe > n_held:
            raise ConfigError(f"config field 'probes.n_samples': {n_probe} exceeds the held-out set of {task} {lv} "
                              f"({n_held} = min(data.n_heldout, data.heldout_frac x {space:.0f} inputs))")
    llc = cfg["measures"]["llc"]
    if llc["batch_size"] > llc["n_data"]:
        raise ConfigError(f"config field 'measures.llc.batch_size': {llc['batch_size']} exceeds the SGLD data pool "
                          f"measures.llc.n_data = {llc['n_data']}")

    layer = cfg["events"]["layer"]
    for size in used_sizes:
        names = layer_names(SIZES[size][0])
        if layer not in names + ["final"]:
            raise ConfigError(f"config field 'events.layer': {layer!r} does not exist in size {size!r}; "
                              f"allowed: {names + ['final']}")

    from .pythia.settings import check_pythia
    check_pythia(cfg)

