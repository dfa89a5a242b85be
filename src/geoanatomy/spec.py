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

    @property
    def name(self) -> str:
        return run_name(self.task, self.level, self.size, self.control, self.seed)

    def train_dict(self) -> dict:
        """The settings that determine the trained weights (hashed for invalidation)."""
        d = {"task": self.task, "level": self.level, "size": self.size,
             "level_params": self.level_params, "train": self.train, "data": self.data,
             "seed": self.seed, "block_size": self.block_size}
        if self.control:
            d["control"] = self.control
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
        return json.dumps({"stage": self.stage, "run": asdict(self.run), "results_dir": self.results_dir,
                           "device": self.device, "blocks": self.blocks}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "JobSpec":
        d = json.loads(text)
        return cls(stage=d["stage"], run=RunSpec(**d["run"]), results_dir=d["results_dir"],
                   device=d.get("device", "auto"), blocks=d.get("blocks", {}))
