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
from dataclasses import asdict, dataclass, field
from pathlib import Path


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

    @property
    def name(self) -> str:
        return f"{self.task}_{self.level}_{self.size}"

    def train_dict(self) -> dict:
        """The settings that determine the trained weights (hashed for invalidation)."""
        return {"task": self.task, "level": self.level, "size": self.size,
                "level_params": self.level_params, "train": self.train, "data": self.data,
                "seed": self.seed, "block_size": self.block_size}

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
