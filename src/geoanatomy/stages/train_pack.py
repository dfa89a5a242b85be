"""Training several runs of one size in one process (a pack), each as if trained alone.

Every run keeps its own ``train.Trainee``: its seeded model and data stream, AdamW state,
learning-rate schedule, gradient clipping, checkpoints, resume state, log and train.json, in
its own folder and in the same formats as a run trained alone. What the runs share is the
arithmetic of a step: one forward and one backward compute all of them at once, with
``torch.func.functional_call`` on the runs' parameters stacked along a new leading axis,
under ``torch.func.vmap``.

Why vmap over stacked parameters, not hand-written batched matrix products: the model is the
one GPT class every stage reads, and each op (attention, LayerNorm, GELU, the tied
unembedding) is batched by torch's own rules, so there is no second model to keep in step
with it. The stack is rebuilt each step from each run's own ``nn.Parameter`` tensors
(``torch.stack``, whose backward hands every run exactly its own gradient: the runs' losses
are summed and no run's loss depends on another's weights), so the optimizer, clipping,
divergence and checkpoint code is the single trainer's, unchanged. Attention is the explicit
softmax form (``attn_impl="math"``): torch's fused CPU attention kernel has no batching rule
and would be run one run at a time.

What must match across a pack (the stacked shapes and one autocast context): the model size,
block size, batch size and ``numerics``. What may differ: task, level, seed, control, steps,
learning-rate settings, weight decay, clipping, the checkpoint schedule. Sequences of
different lengths go through one vmapped forward per length (padding a 9-token run to a
34-token one would do 4x its work); a run's loss is the mean cross-entropy over its own answer
tokens (a mask, ``_answer_mask``, which also allows right padding: with causal attention a pad
after a sequence never reaches the positions its loss reads). A run resumed at a later step
joins the loop at that step; a run that ends (its steps done, or diverged: a non-finite loss)
leaves it, and the others go on.

The float path is not a single run's: batched kernels sum in another order. Each checkpoint's
training-log row and the run's train.json say ``float_path: packed-vmap``, and it enters the
run's machine fingerprint (a packed run compares with a single one like a run from another
CPU). ``benchmarks/bench_pack.py`` measures how close the two are and what packing saves.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import CheckpointError, ConfigError
from ..runtime import autocast
from ..spec import JobSpec, RunSpec, check_pack
from .common import run_record
from .train import Trainee

PACKED = "packed-vmap"     # the float path a packed run's steps are computed on


RUN_LOG = "train_pack.log"   # a packed run's own training log, RUN/logs/ (train.log is its train job's)


def _run_log(run_dir: Path, echo: Callable[[str], None]) -> Callable[[str], None]:
    """A run's own log (RUN/logs/train_pack.log, appended: the lines a run trained alone writes to
    its train.log, which the workflow's train job then writes) and the pack's log (``echo``)."""
    path = Path(run_dir) / "logs" / RUN_LOG
    path.parent.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        with open(path, "a") as f:
            f.write(msg + "\n")
        echo(msg)
    return log


def _answer_mask(lengths: list[int], n_answer: list[int], width: int, batch: int) -> torch.Tensor:
    """(K, B, width - 1) bool: True where model input position i predicts an answer token of
    run k's sequences (length lengths[k], the last n_answer[k] tokens the answer)."""
    pos = torch.arange(width - 1)
    rows = [(pos >= n - 1 - a) & (pos < n - 1) for n, a in zip(lengths, n_answer)]
    return torch.stack(rows)[:, None, :].expand(len(lengths), batch, width - 1)


def _loss_of_one(base: torch.nn.Module):
    """loss(params, x, y, mask) of one run (vmapped over the pack): the mean cross-entropy over
    the answer positions ``mask`` marks, i.e. ``model.answer_loss`` of the unpadded sequences."""
    def loss(params, x, y, mask):
        logits = torch.func.functional_call(base, params, (x,))
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        m = mask.reshape(-1).to(ce.dtype)
        return (ce * m).sum() / m.sum()
    return loss


def run(specs: list[RunSpec], run_dirs: list, device: str = "auto", log=None) -> list[dict]:
    """Train the runs ``specs`` together, run k into ``run_dirs[k]``; each resumes from its own
    newest checkpoint. Returns each run's train.json summary, in order."""
    echo = log or (lambda m: print(m, flush=True))
    check_pack(specs)
    trainees = [Trainee(s, d, device, log=_run_log(d, echo), float_path=PACKED) for s, d in zip(specs, run_dirs)]
    for t in trainees:
        t.step_zero()
    base = trainees[0].model.__class__(trainees[0].model.cfg).to(trainees[0].device)
    base.set_attn_impl("math")
    names = [n for n, _ in base.named_parameters()]
    loss_fn = torch.func.vmap(_loss_of_one(base))
    numerics, dev = specs[0].numerics, trainees[0].device
    batch = int(specs[0].train["batch_size"])
    active = [t for t in trainees if t.start < t.steps]
    step = min((t.start for t in active), default=0)
    t0 = time.time()
    while active:
        now = [t for t in active if t.start <= step]
        lrs = [t.set_lr(step) for t in now]
        seqs = [t.data.train_batch(step, batch) for t in now]                      # each (B, S_k)
        for t in now:
            t.opt.zero_grad(set_to_none=True)
        # one vmapped forward per sequence length (runs of other lengths are not padded to the
        # longest: a 9-token run beside a 34-token one would do 4x its work)
        losses = [None] * len(now)
        with autocast(numerics, dev):
            for width in sorted({s.shape[1] for s in seqs}):
                ix = [i for i, s in enumerate(seqs) if s.shape[1] == width]
                tokens = torch.as_tensor(np.stack([seqs[i] for i in ix])).to(dev)      # (k, B, S)
                mask = _answer_mask([width] * len(ix), [now[i].data.spec.n_answer for i in ix], width,
                                    batch).to(dev)
                params = {n: torch.stack([dict(now[i].model.named_parameters())[n] for i in ix]) for n in names}
                group = loss_fn(params, tokens[:, :, :-1], tokens[:, :, 1:], mask)
                for j, i in enumerate(ix):
                    losses[i] = group[j]
        losses = torch.stack(losses)
        losses.sum().backward()
        values = losses.detach().cpu().tolist()
        for t, lr, lv in zip(now, lrs, values):
            t.clip()
            t.opt.step()
            if t.after_update(step, lv, lr) or t.done >= t.steps:
                active.remove(t)
        step += 1
    names_all = [s.name for s in specs]
    pack = {"runs": names_all, "k": len(specs), "batching": "torch.func.vmap over stacked parameters",
            "wall_seconds_pack": round(time.time() - t0, 2)}
    return [_kept(t) or t.finish(pack) for t in trainees]


def _kept(t: Trainee) -> dict | None:
    """A run that was already complete before this pack (nothing trained now) keeps its valid
    train.json, unrewritten: packing a trained grid reruns nothing downstream."""
    if t.start < t.steps or not (t.run_dir / "train.json").exists():
        return None
    try:
        rec = run_record(t.spec, t.run_dir)
    except CheckpointError:
        return None
    return rec if rec.get("checkpoint_steps") == [s for s in t.ck_steps if s <= t.done] else None


def run_jobs(jobs: list[JobSpec]) -> list[dict]:
    """The pack's jobs as the rule passes them (one train job spec per run, one device)."""
    devices = sorted({j.device for j in jobs})
    if len(devices) > 1:
        raise ConfigError(f"a pack runs on one device; its jobs name {devices}")
    return run([j.run for j in jobs], [j.run_dir for j in jobs], device=jobs[0].device)
