"""What the stages that read a trained run share: the seeded model and data of a run,
and opening its checkpoints."""
from __future__ import annotations

from pathlib import Path

import torch

from ..checkpoints import CheckpointError, checkpoint_dir, list_checkpoints
from ..model import GPT, ModelConfig
from ..runtime import pick_device
from ..spec import RunSpec
from ..tasks import TaskData, make_task, stable_seed


def build(spec: RunSpec, device: str = "cpu") -> tuple[GPT, TaskData]:
    """Seeded model and data for a run spec (same seed -> same initial weights)."""
    task = make_task(spec.task, spec.level, spec.level_params)
    data = TaskData(task, spec.seed, spec.data["n_heldout"], spec.data["heldout_frac"])
    torch.manual_seed(stable_seed(spec.seed, spec.name, "init") % (2**63))
    model = GPT(ModelConfig.from_size(spec.size, block_size=spec.block_size)).to(device)
    return model, data


def open_run(spec: RunSpec, run_dir: str | Path, device: str = "auto"):
    """(model, data, checkpoint folder, checkpoint steps, device) of a trained run.

    Raises CheckpointError naming the folder when the run has no checkpoints."""
    ckdir = checkpoint_dir(run_dir)
    steps = list_checkpoints(ckdir)
    if not steps:
        raise CheckpointError(f"no checkpoints in {ckdir}: run the training job first")
    device = pick_device(device)
    model, data = build(spec, device)
    return model, data, ckdir, steps, device
