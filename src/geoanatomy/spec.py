"""What one run is, and what one job of a stage is given (torch-free).

``RunSpec``: everything that determines one training run (task, level, size, level
parameters, training and data settings, seed, context length) plus the evaluation
settings. ``JobSpec``: a RunSpec plus the results folder, the device, the stage and the
config blocks that stage reads (events, measures, probes). A Snakemake rule passes a
JobSpec as JSON (``geoanatomy STAGE --spec JSON``), so a job reruns exactly when
something it reads changes; ``config.job_spec`` builds it from a resolved config.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import ConfigError


RUN_NAME = re.compile(r"^(?P<task>[a-z]+)_(?P<level>L[0-9]+)_(?P<size>[a-z]+)"
                      r"(?:_(?P<control>shuffled))?(?:_s(?P<seed>[0-9]+))?$")


def run_name(task: str, level: str, size: str, control: str = "", seed: int = 0) -> str:
    """``{task}_{level}_{size}``, then ``_shuffled`` for the shuffled-label control and
    ``_s{seed}`` for seeds other than 0 (seed 0 keeps the short name)."""
    return f"{task}_{level}_{size}" + (f"_{control}" if control else "") + (f"_s{seed}" if seed else "")


def parse_run_name(name: str) -> dict | None:
    """{task, level, size, control, seed} of a run name, or None when it is not one."""
    m = RUN_NAME.match(name)
    if m is None:
        return None
    return {"task": m["task"], "level": m["level"], "size": m["size"], "control": m["control"] or "",
            "seed": int(m["seed"] or 0)}


# The multi-task protocol (``protocol: mixture`` grid blocks): one model per size and seed
# trained on every task x level combination of its block. Its training run is
# ``{name}_{size}[_sN]`` (name: ``mixture`` unless the block names it; always ``mix...``) and
# each combination is an analysis unit ``{name}_{size}[_sN]/{task}_{level}[_shuffled]`` whose
# results live in a sub-folder of the training run's (geoanatomy.mixture).
MIXTURE_NAME = re.compile(r"^(?P<mix>mix[a-z0-9]*)_(?P<size>[a-z]+)(?:_s(?P<seed>[0-9]+))?"
                          r"(?:/(?P<task>[a-z]+)_(?P<level>L[0-9]+)(?:_(?P<control>shuffled))?)?$")


def mixture_run_name(mixture: str, size: str, seed: int = 0) -> str:
    """The training run of a mixture: ``{mixture}_{size}``, ``_s{seed}`` for seeds other than 0."""
    return f"{mixture}_{size}" + (f"_s{seed}" if seed else "")


def combination_name(task: str, level: str, control: str = "") -> str:
    """A combination of a mixture: ``{task}_{level}``, then ``_shuffled`` for the control."""
    return f"{task}_{level}" + (f"_{control}" if control else "")


def parse_mixture_name(name: str) -> dict | None:
    """{mixture, size, seed, task, level, control, parent} of a mixture training run (task None)
    or of one of its units, or None when ``name`` is neither."""
    m = MIXTURE_NAME.match(name)
    if m is None:
        return None
    if m["seed"] is not None and m["seed"].startswith("0"):
        return None                                     # seed 0 has the short name; no leading zeros
    parent = mixture_run_name(m["mix"], m["size"], int(m["seed"] or 0))
    return {"mixture": m["mix"], "size": m["size"], "seed": int(m["seed"] or 0), "task": m["task"],
            "level": m["level"], "control": m["control"] or "", "parent": parent}


def settings_hash(obj) -> str:
    """Short stable hash of a JSON-able object (keys sorted)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines one training run (and its evaluation settings)."""

    task: str
    level: str
    size: str
    level_params: dict
    train: dict
    data: dict
    seed: int
    block_size: int
    eval: dict = field(default_factory=dict)
    control: str = ""
    # multi-task protocol: {"name": ..., "components": [{task, level, level_params, control,
    # weight}, ...]}; empty for a single-task run. With an empty ``task`` the spec is the
    # mixture's training run, with a task one of its units (one combination).
    mixture: dict = field(default_factory=dict)
    # the numerics block's keys that differ from the defaults (runtime.NUMERICS): empty for a
    # run made as every run before the block existed, so its hash and job JSON are unchanged
    numerics: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        if self.mixture:
            return self.train_name + (f"/{combination_name(self.task, self.level, self.control)}"
                                      if self.task else "")
        return run_name(self.task, self.level, self.size, self.control, self.seed)

    @property
    def train_name(self) -> str:
        """The training run whose checkpoints this spec reads: itself, or a unit's mixture."""
        if self.mixture:
            return mixture_run_name(self.mixture["name"], self.size, self.seed)
        return self.name

    @property
    def is_unit(self) -> bool:
        """One combination of a mixture (evaluated on the mixture model's checkpoints)."""
        return bool(self.mixture) and bool(self.task)

    def train_dict(self) -> dict:
        """The settings that determine the trained weights (hashed for invalidation); a
        mixture unit's are its mixture's."""
        if self.mixture:
            d = {"protocol": "mixture", "mixture": self.mixture, "size": self.size, "train": self.train,
                 "data": self.data, "seed": self.seed, "block_size": self.block_size}
            if self.numerics:
                d["numerics"] = dict(sorted(self.numerics.items()))
            return d
        d = {"task": self.task, "level": self.level, "size": self.size,
             "level_params": self.level_params, "train": self.train, "data": self.data,
             "seed": self.seed, "block_size": self.block_size}
        if self.control:
            d["control"] = self.control
        if self.numerics:
            d["numerics"] = dict(sorted(self.numerics.items()))
        return d

    def train_hash(self) -> str:
        return settings_hash(self.train_dict())


@dataclass(frozen=True)
class JobSpec:
    """One stage's job for one run: the run, where results go, the device, the config
    blocks the stage reads (``blocks``: name -> resolved block)."""

    stage: str
    run: RunSpec
    results_dir: str
    device: str = "auto"
    blocks: dict = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return Path(self.results_dir) / self.run.name

    def to_json(self) -> str:
        run = asdict(self.run)
        if not run["mixture"]:        # a single-task job's JSON (its Snakemake param) stays as it was
            del run["mixture"]
        if not run["numerics"]:       # likewise for a run with the default numerics
            del run["numerics"]
        return json.dumps({"stage": self.stage, "run": run, "results_dir": self.results_dir,
                           "device": self.device, "blocks": self.blocks}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "JobSpec":
        """The job of a ``--spec`` JSON (what the rules pass); ValueError naming what is wrong."""
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"--spec is not valid JSON ({e}); the rules pass it, or use --config and --run") from None
        if not isinstance(d, dict):
            raise ValueError(f"--spec must be a JSON object, got {type(d).__name__}")
        missing = [k for k in ("stage", "run", "results_dir") if k not in d]
        if missing:
            raise ValueError(f"--spec lacks {missing}; the rules pass a complete one, or use --config and --run")
        try:
            run = RunSpec(**d["run"])
        except TypeError as e:
            raise ValueError(f"--spec: field 'run' is not a run spec ({e})") from None
        return cls(stage=d["stage"], run=run, results_dir=d["results_dir"],
                   device=d.get("device", "auto"), blocks=d.get("blocks", {}))


PACK_FIELDS = ("size", "block_size", "train.batch_size", "numerics")   # what runs of a pack share


def pack_key(spec: RunSpec) -> tuple:
    """The values of ``PACK_FIELDS`` of a run: runs with equal keys can be stacked in one pack."""
    return (spec.size, spec.block_size, spec.train["batch_size"], json.dumps(spec.numerics or {}, sort_keys=True))


def check_pack(specs: list[RunSpec]) -> None:
    """Refuse a pack (runs trained together, ``stages.train_pack``) that cannot be stacked, naming
    the runs and the field, before any work (torch-free: the workflow checks its packs at parse time)."""
    if not specs:
        raise ConfigError("a pack needs at least one run")
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"a pack lists run {dup[0]!r} twice")
    mixed = [s.name for s in specs if s.mixture]
    if mixed:
        raise ConfigError(f"run {mixed[0]!r} is a mixture's training run; mixtures train alone (not packed)")
    first = specs[0]
    for s in specs[1:]:
        for what, a, b in zip(PACK_FIELDS, pack_key(first), pack_key(s)):
            if a != b:
                raise ConfigError(f"runs {first.name!r} and {s.name!r} cannot share a pack: {what} {a!r} != {b!r} "
                                  "(a pack stacks runs of one model size, block size, batch size and numerics)")
