"""Training with dense checkpoints and exact resume.

Loss: mean cross-entropy over the answer tokens only (the prompt is given).
Optimizer: AdamW (decoupled weight decay on matrices only), linear warmup then
cosine decay (``schedule.lr_at``), optional global grad-norm clipping. The loss is
``model.answer_loss``.

Resume: at each checkpoint step the weights (``step_NNNNNN.safetensors``), the
AdamW state (``optim.safetensors``) and the training log (``train_log.csv``)
are written atomically. The batch of step t depends only on (seed, t), so a
job killed at any point and restarted continues from its newest complete
checkpoint and ends with the same weights as an uninterrupted run (tested).
Checkpoints written under different settings (their ``settings_hash``
metadata differs) are discarded, never mixed in.
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..version import __version__
from ..checkpoints import (checkpoint_dir, list_checkpoints, resume_state, save_optimizer, save_weights,
                           weights_sha256, write_train_log, written_hashes)
from ..errors import CheckpointError
from ..precursor.seal import write_sealed
from ..measures.rankme import rankme
from ..mixture import MixtureData
from ..model import GPT, answer_loss, padded_answer_loss
from ..runtime import apply_numerics, autocast, code_version, machine_fingerprint, pick_device
from ..schedule import lr_at, train_checkpoint_steps
from ..spec import JobSpec, RunSpec
from ..tasks import TaskData
from .common import build, seeded_model


def make_optimizer(model: GPT, tr: dict) -> torch.optim.AdamW:
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": tr["weight_decay"]},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=tr["lr"], betas=(tr["beta1"], tr["beta2"]))


@torch.no_grad()
def quick_eval(model: GPT, data: TaskData, n: int, device: str) -> tuple[float, float]:
    """(exact-match accuracy, final-layer RankMe at the first-answer position) for the progress line."""
    was = model.training
    model.eval()
    seq = torch.as_tensor(data.eval_set(n), device=device)
    na = data.spec.n_answer
    logits, hidden = model(seq[:, :-1], return_hidden=True)
    acc = (logits[:, -na:].argmax(-1) == seq[:, -na:]).all(1).float().mean().item()
    with warnings.catch_warnings():  # N < d only caps this progress-line value
        warnings.simplefilter("ignore")
        rm = rankme(hidden[-1][:, data.spec.first_answer_pred_pos])
    model.train(was)
    return acc, rm


@torch.no_grad()
def quick_eval_mixture(model: GPT, data: MixtureData, n: int, device: str) -> str:
    """Exact-match accuracy of every combination on its own evaluation set (progress line)."""
    was = model.training
    model.eval()
    accs = []
    for name, part, seq in zip(data.names, data.parts, data.eval_sets(n)):
        seq = torch.as_tensor(seq, device=device)
        na = part.spec.n_answer
        logits = model(seq[:, :-1])
        accs.append(f"{name} {(logits[:, -na:].argmax(-1) == seq[:, -na:]).all(1).float().mean().item():.2f}")
    model.train(was)
    return "acc " + " ".join(accs)


def build_mixture(spec: RunSpec, device: str = "cpu") -> tuple[GPT, MixtureData]:
    """Seeded model and padded multi-task stream of a mixture's training run (``common.build``
    for one task)."""
    return seeded_model(spec, device), MixtureData(spec)


def batch_loss_fn(model: GPT, data, batch_size: int, device: str) -> Callable[[int], torch.Tensor]:
    """loss(step): the training loss of step ``step``'s batch. One task: ``model.answer_loss``;
    a mixture: ``model.padded_answer_loss`` of its padded batch (geoanatomy.mixture)."""
    if isinstance(data, MixtureData):
        def loss(step: int) -> torch.Tensor:
            tokens, mask = data.train_batch(step, batch_size)
            return padded_answer_loss(model, torch.as_tensor(tokens, device=device), torch.as_tensor(mask,
                                                                                                     device=device))
        return loss
    na = data.spec.n_answer

    def loss(step: int) -> torch.Tensor:
        seq = torch.as_tensor(data.train_batch(step, batch_size), device=device)  # (B, S)
        return answer_loss(model, seq, na)
    return loss


PROGRESS_N = 64   # held-out examples behind the progress line's accuracy and RankMe


def _print(msg: str) -> None:
    print(msg, flush=True)


def run(spec: RunSpec, run_dir: str | Path, device: str = "auto", eval_n: int | None = None,
        on_checkpoint: Callable[[int], None] | None = None, log=None) -> dict:
    """Train one run into ``run_dir``; resume from its newest checkpoint if present.

    Writes ``run_dir/checkpoints/`` and, at the end, ``run_dir/train.json`` (summary).
    ``on_checkpoint(step)`` is called after each checkpoint is on disk (progress reporting;
    an exception it raises stops training there, and a later call resumes).
    Returns the summary dict.
    """
    log = log or _print
    run_dir = Path(run_dir)
    ckdir = checkpoint_dir(run_dir)
    device = pick_device(device)
    numerics = apply_numerics(spec.numerics, device)
    tr = spec.train
    steps = tr["steps"]
    ck_steps = train_checkpoint_steps(tr)
    ck_set = set(ck_steps)
    h = spec.train_hash()
    # progress line only (the metrics stage measures every checkpoint on eval.n_samples): a
    # 64-example look costs ~7 ms per checkpoint at nano, 200 examples ~22 ms
    eval_n = eval_n or min(PROGRESS_N, spec.eval.get("n_samples", 200))

    # ---- build: the seeded model and data, the optimizer, the batch loss of each step
    model, data = (build_mixture if spec.mixture else build)(spec, device)
    opt = make_optimizer(model, tr)
    batch_loss = batch_loss_fn(model, data, tr["batch_size"], device)

    # ---- resume: newest checkpoint that has both weights and matching optimizer state
    dtype = tr.get("checkpoint_dtype", "float32")
    compact = dtype != "float32"        # half-precision analysis checkpoints; exact weights ride with the optimizer
    start, log_rows = resume_state(run_dir, model, opt, h, compact, spec.name, log)
    meta_common = {"run": spec.name, "settings_hash": h, "model_config": model.cfg.to_dict(),
                   "run_spec": spec.train_dict(), "geoanatomy_version": __version__}

    # ---- loop: one update per step, a checkpoint at every checkpoint step
    model.train()
    t0 = time.time()
    t_last, s_last = t0, start
    loss_acc, n_acc, gn = 0.0, 0, 0.0

    def checkpoint(step: int, loss_mean: float, lr: float, gnorm: float) -> None:
        nonlocal t_last, s_last
        # Order matters for resuming: the optimizer state is written last, so whatever step it
        # names already has its weights and its training-log row on disk (a kill between the
        # log and the optimizer state resumes from the previous step and rewrites both).
        path = save_weights(ckdir, step, model, meta_common, dtype)
        log_rows.append({"step": step, "train_loss": loss_mean, "lr": lr, "grad_norm": gnorm,
                         "sha256": weights_sha256(path)})
        write_train_log(ckdir, log_rows)
        save_optimizer(ckdir, step, opt, model if compact else None)
        if isinstance(data, MixtureData):
            status = quick_eval_mixture(model, data, min(eval_n, data.n_heldout), device)
        else:
            acc, rm = quick_eval(model, data, min(eval_n, data.n_heldout), device)
            n = min(eval_n, data.n_heldout)
            status = f"acc(N={n}) {acc:.3f} rankme(ln_final,first,N={n}) {rm:.2f}"
        now = time.time()
        sps = (step - s_last) / max(now - t_last, 1e-9)
        t_last, s_last = now, step
        log(f"[train] {spec.name} step {step:>7d}/{steps} loss {loss_mean:.4f} {status} "
            f"lr {lr:.2e} {sps:.1f} steps/s")
        if on_checkpoint is not None:
            on_checkpoint(step)

    if start == 0 and 0 in ck_set:
        with torch.no_grad():
            with autocast(spec.numerics, device):
                l0 = batch_loss(0).item()
        checkpoint(0, l0, 0.0, 0.0)

    diverged = False
    for step in range(start, steps):
        lr = lr_at(step, tr["lr"], tr["warmup"], steps, tr["min_lr_frac"])
        for g in opt.param_groups:
            g["lr"] = lr
        with autocast(spec.numerics, device):
            loss = batch_loss(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if tr["grad_clip"] > 0:
            gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"]))
        opt.step()
        lv = loss.item()
        if not np.isfinite(lv):
            diverged = True
        loss_acc += lv
        n_acc += 1
        done = step + 1
        if done in ck_set:
            checkpoint(done, loss_acc / n_acc, lr, gn)
            loss_acc, n_acc = 0.0, 0
        if diverged:
            log(f"[train] {spec.name}: loss is {lv} at step {done}: run diverged; stopping")
            if done not in ck_set:
                checkpoint(done, loss_acc / max(n_acc, 1), lr, gn)
            break

    # ---- save: the run's summary. Only the steps this run's schedule wrote (an unscheduled
    # file, e.g. one copied in, is not adopted: readers refuse it), each file's hash beside it.
    done = done if start < steps else start
    written = [s for s in ck_steps if s <= done] + ([done] if diverged and done not in ck_set else [])
    have = set(list_checkpoints(ckdir))
    lost = [s for s in written if s not in have]
    if lost:
        raise CheckpointError(f"{ckdir}: checkpoints of steps {lost} were written by this run but are gone; "
                              f"recompute with `geoanatomy clean-run --checkpoints {run_dir}`")
    summary = {
        "run": spec.name, "task": spec.task, "level": spec.level, "size": spec.size,
        "n_params": model.n_params(), "steps": steps, "checkpoint_steps": written,
        "checkpoint_sha256": written_hashes(ckdir, written, {r["step"]: r.get("sha256") for r in log_rows}),
        "diverged": diverged, "device": device, "threads": torch.get_num_threads(), "numerics": numerics,
        "settings_hash": h, "settings": spec.train_dict(), "geoanatomy_version": __version__,
        "code_version": code_version(), "machine": machine_fingerprint(),
        "torch_version": torch.__version__, "python": sys.version.split()[0],
        "wall_seconds_this_job": round(time.time() - t0, 2), "resumed_from": start,
    }
    if spec.mixture:   # the multi-task protocol: what was mixed, how, and the units evaluated on it
        summary.update(protocol="mixture", mixture=spec.mixture, units=[f"{spec.name}/{c}" for c in data.names],
                       shares=dict(zip(data.names, data.probs.tolist())), padded_length=data.seq_len,
                       loss="per row the mean cross-entropy over its answer tokens, then the mean over rows")
    summary = write_sealed(run_dir / "train.json", summary)   # sealed like every record: a hand edit is seen
    return summary


def run_job(job: JobSpec, threads: int = 1) -> dict:
    """The stage's job as the rule passes it (``geoanatomy train --spec``): its run, folder,
    device and the config blocks it reads (``config.jobs.STAGE_BLOCKS``)."""
    return run(job.run, job.run_dir, device=job.device)
