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
SINGLE = "single"  # the float path of a run trained alone (train_log.csv column float_path)


def _print(msg: str) -> None:
    print(msg, flush=True)


class Trainee:
    """One run under training: its seeded model and data, AdamW, the state it resumes from, the
    checkpoint writer and the summary. ``run`` drives one; ``stages.train_pack`` drives several
    in one process (their forward and backward batched), each through its own Trainee, so a
    packed run writes the same files as a single one (its ``float_path`` says how it was
    trained: train_log.csv per checkpoint, train.json and its machine fingerprint).

    After ``__init__``: ``start`` (the step it continues from), ``model``, ``data``, ``opt``.
    Per update step: ``set_lr(step)``, the caller's backward, ``clip()``, ``opt.step()``, then
    ``after_update(step, loss, lr)``, which writes a checkpoint when due and returns True when
    the run stops (it diverged). ``finish()`` writes train.json."""

    def __init__(self, spec: RunSpec, run_dir: str | Path, device: str = "auto", eval_n: int | None = None,
                 on_checkpoint: Callable[[int], None] | None = None, log=None, float_path: str = SINGLE):
        self.spec, self.log, self.on_checkpoint, self.float_path = spec, log or _print, on_checkpoint, float_path
        self.run_dir = Path(run_dir)
        self.ckdir = checkpoint_dir(self.run_dir)
        self.device = device = pick_device(device)
        self.numerics = apply_numerics(spec.numerics, device)
        self.tr = tr = spec.train
        self.steps = tr["steps"]
        self.ck_steps = train_checkpoint_steps(tr)
        self.ck_set = set(self.ck_steps)
        self.hash = spec.train_hash()
        # progress line only (the metrics stage measures every checkpoint on eval.n_samples): a
        # 64-example look costs ~7 ms per checkpoint at nano, 200 examples ~22 ms
        self.eval_n = eval_n or min(PROGRESS_N, spec.eval.get("n_samples", 200))
        # build: the seeded model and data, the optimizer, the batch loss of each step
        self.model, self.data = (build_mixture if spec.mixture else build)(spec, device)
        self.opt = make_optimizer(self.model, tr)
        self.batch_loss = batch_loss_fn(self.model, self.data, tr["batch_size"], device)
        # resume: newest checkpoint that has both weights and matching optimizer state
        self.dtype = tr.get("checkpoint_dtype", "float32")
        self.compact = self.dtype != "float32"   # half-precision analysis checkpoints; exact weights ride with AdamW
        self.start, self.log_rows = resume_state(self.run_dir, self.model, self.opt, self.hash, self.compact,
                                                 spec.name, self.log)
        packed = sorted({r.get("float_path") for r in self.log_rows} - {None, SINGLE, float_path})
        if packed:
            self.log(f"[train] {spec.name}: its steps up to {self.start} were trained in a pack ({packed[0]}; "
                     "their progress lines: logs/train_pack.log)")
        self.meta_common = {"run": spec.name, "settings_hash": self.hash, "model_config": self.model.cfg.to_dict(),
                            "run_spec": spec.train_dict(), "geoanatomy_version": __version__}
        self.model.train()
        self.t0 = time.time()
        self.t_last, self.s_last = self.t0, self.start
        self.loss_acc, self.n_acc, self.gn = 0.0, 0, 0.0
        self.diverged, self.done = False, self.start

    def checkpoint(self, step: int, loss_mean: float, lr: float, gnorm: float) -> None:
        # Order matters for resuming: the optimizer state is written last, so whatever step it
        # names already has its weights and its training-log row on disk (a kill between the
        # log and the optimizer state resumes from the previous step and rewrites both).
        path = save_weights(self.ckdir, step, self.model, self.meta_common, self.dtype)
        self.log_rows.append({"step": step, "train_loss": loss_mean, "lr": lr, "grad_norm": gnorm,
                              "sha256": weights_sha256(path), "float_path": self.float_path})
        write_train_log(self.ckdir, self.log_rows)
        save_optimizer(self.ckdir, step, self.opt, self.model if self.compact else None)
        data, n = self.data, min(self.eval_n, self.data.n_heldout)
        if isinstance(data, MixtureData):
            status = quick_eval_mixture(self.model, data, n, self.device)
        else:
            acc, rm = quick_eval(self.model, data, n, self.device)
            status = f"acc(N={n}) {acc:.3f} rankme(ln_final,first,N={n}) {rm:.2f}"
        now = time.time()
        sps = (step - self.s_last) / max(now - self.t_last, 1e-9)
        self.t_last, self.s_last = now, step
        self.log(f"[train] {self.spec.name} step {step:>7d}/{self.steps} loss {loss_mean:.4f} {status} "
                 f"lr {lr:.2e} {sps:.1f} steps/s")
        if self.on_checkpoint is not None:
            self.on_checkpoint(step)

    def step_zero(self) -> None:
        """The checkpoint of the initial weights (a fresh start whose schedule has step 0)."""
        if self.start == 0 and 0 in self.ck_set:
            with torch.no_grad():
                with autocast(self.spec.numerics, self.device):
                    l0 = self.batch_loss(0).item()
            self.checkpoint(0, l0, 0.0, 0.0)

    def set_lr(self, step: int) -> float:
        tr = self.tr
        lr = lr_at(step, tr["lr"], tr["warmup"], self.steps, tr["min_lr_frac"])
        for g in self.opt.param_groups:
            g["lr"] = lr
        return lr

    def clip(self) -> None:
        if self.tr["grad_clip"] > 0:
            self.gn = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tr["grad_clip"]))

    def after_update(self, step: int, lv: float, lr: float) -> bool:
        """Book step ``step``'s loss ``lv`` (after the optimizer step); a checkpoint when one is
        due; True when the run stops here (a non-finite loss: it diverged)."""
        if not np.isfinite(lv):
            self.diverged = True
        self.loss_acc += lv
        self.n_acc += 1
        self.done = done = step + 1
        if done in self.ck_set:
            self.checkpoint(done, self.loss_acc / self.n_acc, lr, self.gn)
            self.loss_acc, self.n_acc = 0.0, 0
        if self.diverged:
            self.log(f"[train] {self.spec.name}: loss is {lv} at step {done}: run diverged; stopping")
            if done not in self.ck_set:
                self.checkpoint(done, self.loss_acc / max(self.n_acc, 1), lr, self.gn)
        return self.diverged

    def finish(self, pack: dict | None = None) -> dict:
        """train.json: only the steps this run's schedule wrote (an unscheduled file, e.g. one
        copied in, is not adopted: readers refuse it), each file's hash beside it; ``pack``: what
        the packed trainer trained it with (its runs, the batching)."""
        spec, ckdir, done, diverged = self.spec, self.ckdir, self.done, self.diverged
        written = [s for s in self.ck_steps if s <= done] + ([done] if diverged and done not in self.ck_set else [])
        have = set(list_checkpoints(ckdir))
        lost = [s for s in written if s not in have]
        if lost:
            raise CheckpointError(f"{ckdir}: checkpoints of steps {lost} were written by this run but are gone; "
                                  f"recompute with `geoanatomy clean-run --checkpoints {self.run_dir}`")
        paths = sorted({r.get("float_path") or SINGLE for r in self.log_rows})
        summary = {
            "run": spec.name, "task": spec.task, "level": spec.level, "size": spec.size,
            "n_params": self.model.n_params(), "steps": self.steps, "checkpoint_steps": written,
            "checkpoint_sha256": written_hashes(ckdir, written, {r["step"]: r.get("sha256") for r in self.log_rows}),
            "diverged": diverged, "device": self.device, "threads": torch.get_num_threads(),
            "numerics": self.numerics, "float_path": paths,
            "settings_hash": self.hash, "settings": spec.train_dict(), "geoanatomy_version": __version__,
            "code_version": code_version(), "machine": machine_fingerprint(paths),
            "torch_version": torch.__version__, "python": sys.version.split()[0],
            "wall_seconds_this_job": round(time.time() - self.t0, 2), "resumed_from": self.start,
        }
        if pack:
            summary["pack"] = pack
        if spec.mixture:   # the multi-task protocol: what was mixed, how, and the units evaluated on it
            data = self.data
            summary.update(protocol="mixture", mixture=spec.mixture, units=[f"{spec.name}/{c}" for c in data.names],
                           shares=dict(zip(data.names, data.probs.tolist())), padded_length=data.seq_len,
                           loss="per row the mean cross-entropy over its answer tokens, then the mean over rows")
        return write_sealed(self.run_dir / "train.json", summary)   # sealed like every record: a hand edit is seen


def run(spec: RunSpec, run_dir: str | Path, device: str = "auto", eval_n: int | None = None,
        on_checkpoint: Callable[[int], None] | None = None, log=None) -> dict:
    """Train one run into ``run_dir``; resume from its newest checkpoint if present.

    Writes ``run_dir/checkpoints/`` and, at the end, ``run_dir/train.json`` (summary).
    ``on_checkpoint(step)`` is called after each checkpoint is on disk (progress reporting;
    an exception it raises stops training there, and a later call resumes).
    Returns the summary dict.
    """
    t = Trainee(spec, run_dir, device, eval_n, on_checkpoint, log)
    t.step_zero()
    opt = t.opt
    # the loop: one update per step, a checkpoint at every checkpoint step
    for step in range(t.start, t.steps):
        lr = t.set_lr(step)
        with autocast(spec.numerics, t.device):
            loss = t.batch_loss(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t.clip()
        opt.step()
        if t.after_update(step, loss.item(), lr):
            break
    return t.finish()


def run_job(job: JobSpec, threads: int = 1) -> dict:
    """The stage's job as the rule passes it (``geoanatomy train --spec``): its run, folder,
    device and the config blocks it reads (``config.jobs.STAGE_BLOCKS``)."""
    return run(job.run, job.run_dir, device=job.device)
