"""What the stages that read a trained run share: the seeded model and data of a run,
and opening its checkpoints. Torch is imported only by the functions that build a model,
so the stages that read tables only (events, prune) start without it."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CheckpointError
from ..files import read_json
from ..spec import RunSpec
from ..tasks import TaskData, make_task, stable_seed

if TYPE_CHECKING:
    from ..model import GPT


def task_data(spec: RunSpec) -> TaskData:
    """The run's data: held-out split, training stream, samples (``tasks.TaskData``)."""
    return TaskData(make_task(spec.task, spec.level, spec.level_params), spec.seed, spec.data["n_heldout"],
                    spec.data["heldout_frac"], spec.data.get("heldout_symmetric", True), spec.control)


def seeded_model(spec: RunSpec, device: str = "cpu") -> GPT:
    """The run's model at initialisation: seeded by (seed, run name), so the same spec gives the
    same initial weights (single-task runs and mixtures alike)."""
    import torch

    from ..model import GPT, ModelConfig
    torch.manual_seed(stable_seed(spec.seed, spec.name, "init") % (2**63))
    return GPT(ModelConfig.from_size(spec.size, block_size=spec.block_size)).to(device)


def build(spec: RunSpec, device: str = "cpu") -> tuple[GPT, TaskData]:
    """Seeded model and data for a run spec (same seed -> same initial weights)."""
    data = task_data(spec)
    return seeded_model(spec, device), data


def run_record(spec: RunSpec, run_dir: str | Path) -> dict:
    """The run's train.json, checked against the spec (run name, settings hash)."""
    path = Path(run_dir) / "train.json"
    fix = f"recompute the run with `geoanatomy clean-run {run_dir}` and rerun snakemake"
    rec = read_json(path, CheckpointError, ": run the training job first", f"; {fix}")
    from ..precursor.seal import sealed_problem
    if why := sealed_problem(rec):               # a stripped seal is refused like a broken one
        raise CheckpointError(f"{path}: {why}; {fix}")
    for key, want in (("run", spec.train_name), ("settings_hash", spec.train_hash())):
        if rec.get(key) != want:
            raise CheckpointError(f"{path}: {key} is {rec.get(key)!r}, this run's is {want!r} "
                                  f"(results of another run or of other settings); {fix}")
    return rec


def open_run(spec: RunSpec, run_dir: str | Path, device: str = "auto"):
    """(model, data, checkpoint folder, checkpoint steps, device) of a trained run.

    The checkpoint files must be exactly the steps its train.json records: an extra file (a
    checkpoint copied in from elsewhere) or a missing one is an error naming it. Iterate with
    ``checkpoints.iter_checkpoints(..., expect=checkpoint_identity(spec))``."""
    from ..checkpoints import checkpoint_dir, ckpt_path, list_checkpoints, pruned_record
    from ..runtime import apply_numerics, pick_device
    ckdir = checkpoint_dir(run_dir)
    pruned = pruned_record(run_dir)
    if pruned.exists():
        raise CheckpointError(
            f"the analysis checkpoints of {spec.name} were removed after its stages finished "
            f"(keep_checkpoints: final; {pruned}); to recompute from them, retrain the run: "
            f"`snakemake --forcerun train {Path(run_dir) / 'train.json'}` (training is deterministic: "
            f"the same checkpoints come back)")
    steps = list_checkpoints(ckdir)
    if not steps:
        raise CheckpointError(f"no checkpoints in {ckdir}: run the training job first")
    recorded = [int(s) for s in run_record(spec, run_dir).get("checkpoint_steps", [])]
    extra = sorted(set(steps) - set(recorded))
    missing = sorted(set(recorded) - set(steps))
    if extra or missing:
        raise CheckpointError(
            f"{ckdir} does not match {Path(run_dir) / 'train.json'}: "
            + (f"files not written by this run's training: {[ckpt_path(ckdir, s).name for s in extra]}; " if extra
               else "")
            + (f"missing: {[ckpt_path(ckdir, s).name for s in missing]}; " if missing else "")
            + f"remove the extra files, or recompute with `geoanatomy clean-run {run_dir}`")
    device = pick_device(device)
    apply_numerics(spec.numerics, device)       # the switches training ran with (TF32, attention kernel)
    model, data = build(spec, device)
    return model, data, ckdir, steps, device


def spec_from_record(train: dict) -> RunSpec:
    """The RunSpec a single-task run's train.json was written for: its ``settings`` are
    ``RunSpec.train_dict()`` (so ``train_hash`` gives its settings_hash back); the evaluation
    settings are not part of it. ValueError for a mixture's training run."""
    st = train.get("settings") or {}
    if st.get("protocol") == "mixture" or not st.get("task"):
        raise ValueError(f"{train.get('run')}: a mixture's training run has one data set per combination; open the "
                         "combination's unit folder instead")
    spec = RunSpec(st["task"], st["level"], st["size"], st.get("level_params") or {}, st.get("train") or {},
                   st.get("data") or {}, int(st.get("seed", 0)), int(st.get("block_size", 64)),
                   control=st.get("control") or "", numerics=st.get("numerics") or {})
    if train.get("settings_hash") and spec.train_hash() != train["settings_hash"]:
        raise ValueError(f"{train.get('run')}: train.json's settings do not hash to its settings_hash "
                         f"({spec.train_hash()} vs {train['settings_hash']}): an edited train.json")
    return spec


def checkpoint_identity(spec: RunSpec) -> dict:
    """Metadata every checkpoint of this run carries (written by the train stage)."""
    return {"run": spec.train_name, "settings_hash": spec.train_hash()}


def training_dir(spec: RunSpec, run_dir: str | Path) -> Path:
    """The folder holding the checkpoints and train.json a spec reads (what ``open_run`` and
    ``run_record`` take): the run's own, or for a mixture's unit (``results/mixture_nano/mod_L3``)
    its mixture's training run (``results/mixture_nano``; geoanatomy.mixture)."""
    return Path(run_dir).parent if spec.is_unit else Path(run_dir)


def progress(steps, n: int, stage: str, name: str, log):
    """Yield ``steps`` (a checkpoint iterator) and log one line as each is done: its step, how
    many of ``n``, and the seconds so far (a job's log shows where it is)."""
    import time
    t0 = time.time()
    for i, step in enumerate(steps, 1):
        yield step
        log(f"[{stage}] {name}: checkpoint step {step} done ({i}/{n}, {time.time() - t0:.1f} s)")


def write_timings(path: Path, timings: dict, n_checkpoints: int) -> None:
    """A stage's CPU seconds per checkpoint of each piece it times (a side file, not a table:
    timings differ from run to run, tables must not)."""
    from ..files import atomic_write_json
    atomic_write_json(path, {"what": "CPU seconds per checkpoint (process time), mean over the checkpoints",
                             "checkpoints": int(n_checkpoints),
                             "cpu_seconds_per_checkpoint": {k: v / max(n_checkpoints, 1) for k, v in timings.items()}})
