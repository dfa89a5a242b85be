"""Checkpoint files: safetensors weights with their config, optimizer state for resume.

Layout of ``<run_dir>/checkpoints/``::

    step_000100.safetensors   model weights at step 100 (metadata: run, step, model config)
    optim.safetensors         AdamW moments of the newest checkpoint (metadata: step)
                              (with compact analysis checkpoints, train.checkpoint_dtype float16 or
                              bfloat16, it also holds that checkpoint's full-precision weights,
                              so a resumed run continues exactly; one file, so the two agree)
    train_log.csv             step, train_loss, lr, grad_norm at every checkpoint so far

Resume (``resume_state``): the newest checkpoint that has both its weights and the optimizer
state; checkpoints of other settings, or of a pruned run, are removed first.

Every file is written to a temporary name and renamed, so a killed job leaves
either the old file or the new one, never a half-written one. Loading uses
safetensors only (no pickle), so a checkpoint cannot execute code.
"""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path
from typing import Callable

import torch
from safetensors import SafetensorError
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from .files import atomic_write_bytes, atomic_write_text

_STEP_RE = re.compile(r"^step_(\d{6,})\.safetensors$")


from .errors import CheckpointError  # noqa: E402  (defined torch-free; imported from here too)


def ckpt_path(ckpt_dir: Path, step: int) -> Path:
    return Path(ckpt_dir) / f"step_{step:06d}.safetensors"


def checkpoint_dir(run_dir: Path) -> Path:
    """A run's checkpoint folder: ``<run_dir>/checkpoints``."""
    return Path(run_dir) / "checkpoints"


def pruned_record(run_dir: Path) -> Path:
    """Where a run records that its analysis checkpoints were removed (``stages.prune``,
    keep_checkpoints: final): readers refuse the run, the trainer retrains it from step 0."""
    return Path(run_dir) / "pruned.json"


def list_checkpoints(ckpt_dir: Path) -> list[int]:
    """Steps of the weight files present in ``ckpt_dir``, sorted."""
    d = Path(ckpt_dir)
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for p in d.iterdir() if (m := _STEP_RE.match(p.name)))


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def save_weights(ckpt_dir: Path, step: int, model: torch.nn.Module, meta: dict, dtype: str = "float32",
                 path: Path | None = None) -> Path:
    """Save model weights (tied tensors stored once) with ``meta`` as safetensors metadata,
    floating tensors in ``dtype`` (``meta["dtype"]`` says which); to ``path`` if given, else
    the step's checkpoint file."""
    sd = {k: v.detach().to("cpu", DTYPES[dtype] if v.is_floating_point() else v.dtype).contiguous()
          for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied to wte.weight
    md = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in meta.items()}
    md["step"] = str(step)
    md["dtype"] = dtype
    p = path or ckpt_path(ckpt_dir, step)
    atomic_write_bytes(p, st_save(sd, metadata=md))
    return p


def _read(path: Path) -> tuple[dict, dict]:
    from safetensors import safe_open
    try:
        data = Path(path).read_bytes()
        tensors = st_load(data)
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(
            f"checkpoint {path} is unreadable ({e}). Delete it and rerun the training job to "
            f"resume from the previous checkpoint, or recompute the run with "
            f"`geoanatomy clean-run <run_dir>` (see docs/bad-input.md, 'Recovering a run').") from e
    return tensors, meta


def load_weights(path: Path, model: torch.nn.Module) -> dict:
    """Load weights into ``model`` (strict); returns the file's metadata."""
    tensors, meta = _read(path)
    tensors["lm_head.weight"] = tensors["wte.weight"]
    p0 = next(model.parameters())
    try:   # compact (half-precision) checkpoints are cast to the model's dtype
        model.load_state_dict({k: v.to(p0.device, p0.dtype if v.is_floating_point() else v.dtype)
                               for k, v in tensors.items()}, strict=True)
    except RuntimeError as e:
        raise CheckpointError(f"checkpoint {path} does not fit the model: {e}") from e
    return meta


def read_meta(path: Path) -> dict:
    return _read(path)[1]


def save_optimizer(ckpt_dir: Path, step: int, opt: torch.optim.Optimizer, model: torch.nn.Module | None = None) -> None:
    """AdamW state as flat tensors ``{i}.exp_avg``, ``{i}.exp_avg_sq``, ``{i}.step``; with
    ``model``, also its full-precision weights as ``weights.{name}`` (compact checkpoints)."""
    sd = opt.state_dict()
    flat = {}
    for i, st in sd["state"].items():
        for k, v in st.items():
            flat[f"{i}.{k}"] = (v if torch.is_tensor(v) else torch.tensor(v)).detach().to("cpu").contiguous()
    if model is not None:
        for k, v in model.state_dict().items():
            if k != "lm_head.weight":                                   # tied to wte.weight
                flat[f"weights.{k}"] = v.detach().to("cpu").contiguous()
    meta = {"step": str(step), "param_groups": json.dumps(sd["param_groups"])}
    atomic_write_bytes(Path(ckpt_dir) / "optim.safetensors", st_save(flat, metadata=meta))


def load_optimizer(ckpt_dir: Path, opt: torch.optim.Optimizer) -> int:
    """Restore AdamW state; returns the step it belongs to."""
    tensors, meta = _read(Path(ckpt_dir) / "optim.safetensors")
    state: dict[int, dict] = {}
    for key, v in tensors.items():
        if key.startswith("weights."):
            continue
        i, k = key.split(".", 1)
        state.setdefault(int(i), {})[k] = v
    sd = opt.state_dict()
    dev = opt.param_groups[0]["params"][0].device
    for i, st in state.items():
        for k in st:
            if k != "step":
                st[k] = st[k].to(dev)
    sd["state"] = state
    sd["param_groups"] = json.loads(meta["param_groups"])
    opt.load_state_dict(sd)
    return int(meta["step"])


def load_resume_weights(ckpt_dir: Path, model: torch.nn.Module) -> None:
    """Load the full-precision weights stored with the optimizer state (compact checkpoints)."""
    path = Path(ckpt_dir) / "optim.safetensors"
    tensors, _ = _read(path)
    w = {k[len("weights."):]: v for k, v in tensors.items() if k.startswith("weights.")}
    if not w:
        raise CheckpointError(f"{path} holds no full-precision weights (written by a run with float32 "
                              f"checkpoints?); recompute with `geoanatomy clean-run --checkpoints {Path(ckpt_dir).parent}`")
    w["lm_head.weight"] = w["wte.weight"]
    p0 = next(model.parameters())
    model.load_state_dict({k: v.to(p0.device) for k, v in w.items()}, strict=True)


def iter_checkpoints(ckpt_dir: Path, model: torch.nn.Module, steps=None, expect: dict | None = None):
    """Load each checkpoint of ``steps`` (default: all present, in order) into ``model``
    and yield its step; the model holds that checkpoint's weights until the next one.

    ``expect`` (e.g. {"run": ..., "settings_hash": ...}): metadata every checkpoint must
    carry; a checkpoint of another run or other settings is refused by name."""
    for step in (list_checkpoints(ckpt_dir) if steps is None else steps):
        path = ckpt_path(ckpt_dir, step)
        meta = load_weights(path, model)
        for key, want in (expect or {}).items():
            if meta.get(key) != want:
                raise CheckpointError(
                    f"checkpoint {path} belongs to another run or other settings ({key} is "
                    f"{meta.get(key)!r}, this run's is {want!r}); remove it, or recompute the run with "
                    f"`geoanatomy clean-run {Path(ckpt_dir).parent}`")
        yield step


# --------------------------------------------------------------- training log
LOG_FIELDS = ["step", "train_loss", "lr", "grad_norm"]
LOG_NAME = "train_log.csv"


def write_train_log(ckpt_dir: Path, rows: list[dict]) -> None:
    """The training log (one row per checkpoint so far), written atomically."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=LOG_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{r[k]:.9g}" if isinstance(r[k], float) else r[k]) for k in LOG_FIELDS})
    atomic_write_text(Path(ckpt_dir) / LOG_NAME, buf.getvalue())


def read_train_log(ckpt_dir: Path) -> list[dict]:
    """Rows of the training log; empty when there is none yet."""
    path = Path(ckpt_dir) / LOG_NAME
    if not path.exists():
        return []
    with open(path) as f:
        return [{"step": int(r["step"]), "train_loss": float(r["train_loss"]), "lr": float(r["lr"]),
                 "grad_norm": float(r["grad_norm"])} for r in csv.DictReader(f)]


# --------------------------------------------------------------- resume
def resume_state(run_dir: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, settings_hash: str,
                 compact: bool, name: str, log: Callable[[str], None]) -> tuple[int, list[dict]]:
    """Load the newest resumable state of ``run_dir``'s checkpoints into ``model`` and ``opt``;
    returns (the step to continue from, the training-log rows up to it); (0, []) for a fresh start.

    Resumable: the step the optimizer state names, when its weights are present (``compact``:
    the full-precision weights stored with the optimizer state). Before that: a pruned run
    (``pruned_record``) loses its checkpoints and retrains from step 0, temporary files of
    killed writes are removed, checkpoints of another ``settings_hash`` are discarded, and
    weights written after the last optimizer save are deleted. ``name`` and ``log``: the
    progress lines."""
    ckdir = checkpoint_dir(run_dir)
    pruned = pruned_record(run_dir)  # stages.prune removed the analysis checkpoints: none to resume
    if pruned.exists():
        log(f"[train] {name}: {pruned} says its analysis checkpoints were removed; retraining from step 0")
        shutil.rmtree(ckdir, ignore_errors=True)
        pruned.unlink()
    if ckdir.is_dir():  # temporary files of writes killed before their rename
        for tmp in ckdir.glob(".*.tmp"):
            tmp.unlink()
    have = list_checkpoints(ckdir)
    if not have:
        return 0, []
    try:
        meta = read_meta(ckdir / "optim.safetensors") if (ckdir / "optim.safetensors").exists() else {}
        wmeta = read_meta(ckpt_path(ckdir, have[-1]))
    except CheckpointError as e:
        log(f"[train] {e}")
        raise
    if wmeta.get("settings_hash") != settings_hash:
        log(f"[train] {name}: checkpoints in {ckdir} were made with other settings "
            f"(hash {wmeta.get('settings_hash')} != {settings_hash}); starting afresh")
        shutil.rmtree(ckdir)
        return 0, []
    if not (meta and int(meta["step"]) in have):
        return 0, []
    s = int(meta["step"])
    if compact:
        load_resume_weights(ckdir, model)
    else:
        load_weights(ckpt_path(ckdir, s), model)
    load_optimizer(ckdir, opt)
    log_rows = [r for r in read_train_log(ckdir) if r["step"] <= s]
    for extra in (c for c in have if c > s):  # weights written after the last optimizer save
        ckpt_path(ckdir, extra).unlink()
    log(f"[train] {name}: resuming from checkpoint step {s}")
    return s, log_rows
