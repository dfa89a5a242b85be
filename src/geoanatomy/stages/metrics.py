"""Per-checkpoint measurement: one forward pass over the fixed evaluation set.

Evaluation set: the first ``eval.n_samples`` held-out examples of the run's
task and level (never seen in training), identical at every checkpoint.

Rows of the per-run table ``metrics.csv`` (format: ``geoanatomy.table``)::

    run, step, measure, layer, layer_index, position, variant, n_samples, value, settings

Behaviour measures (``layer`` = "output", ``position`` = "answer"):

* ``accuracy``          exact match of every answer token under teacher forcing
                        (equivalent to greedy decoding being entirely right)
* ``accuracy_norm``     (accuracy - chance) / (1 - chance); chance = accuracy of the
                        best input-blind constant answer on the evaluation set
* ``token_accuracy``    share of answer tokens predicted right
* ``logprob``           mean over examples of log p(whole answer), float64, nats
* ``logprob_per_token`` the same divided by the answer length
* ``train_loss``        mean training loss over the steps since the previous checkpoint
                        (``position`` = "answer", on training batches)

Geometry (``measure`` = "rankme"; ``variant`` "uncentred" = RankMe's definition,
"centred" = columns centred first), for every layer (see ``model.py``:
embed, block0.., ln_final) at two positions:

* ``first``        the position that predicts the first answer token (the ``=``)
* ``answer_mean``  hidden states averaged over the positions that predict answer
                   tokens, then RankMe (equals ``first`` for one-token answers)

Note: at ``first`` the embedding output is the same token at the same position
for every example, so ``embed``/``first`` is rank one by construction
(``constant_by_construction`` in the settings); analyses exclude it.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
import torch

from ..checkpoints import iter_checkpoints, read_train_log
from ..measures.rankme import rankme
from ..spec import RunSpec
from ..table import write_table
from .common import checkpoint_identity, open_run


def chance_accuracy(answers: np.ndarray) -> float:
    """Exact-match accuracy of the most frequent whole answer (N, n_answer) -> float."""
    _, counts = np.unique(answers, axis=0, return_counts=True)
    return float(counts.max() / len(answers))


@torch.no_grad()
def measure_checkpoint(model, seq: torch.Tensor, n_answer: int, eps: float = 1e-7) -> list[dict]:
    """All per-checkpoint rows (without run/step) for eval sequences seq (N, S)."""
    model.eval()
    N = seq.shape[0]
    x, y = seq[:, :-1], seq[:, 1:]
    logits, hidden = model(x, return_hidden=True)                        # (N, T, V), L+2 x (N, T, d)
    ans_logits = logits[:, -n_answer:, :].to(torch.float64)              # (N, n_answer, V)
    target = y[:, -n_answer:]                                            # (N, n_answer)
    logp = torch.log_softmax(ans_logits, -1).gather(-1, target[..., None])[..., 0]  # (N, n_answer)
    correct = ans_logits.argmax(-1) == target                            # (N, n_answer)
    rows = []
    beh = dict(layer="output", layer_index=-1, position="answer", variant="", n_samples=N)
    rows.append({**beh, "measure": "accuracy", "value": correct.all(1).double().mean().item()})
    rows.append({**beh, "measure": "token_accuracy", "value": correct.double().mean().item()})
    rows.append({**beh, "measure": "logprob", "value": logp.sum(1).mean().item()})
    rows.append({**beh, "measure": "logprob_per_token", "value": logp.mean().item()})
    first = x.shape[1] - n_answer                                         # index predicting answer 0
    names = model.layer_names()
    for li, (name, h) in enumerate(zip(names, hidden)):
        reps = {"first": h[:, first, :], "answer_mean": h[:, first:, :].mean(1)}  # (N, d) each
        for pos, Z in reps.items():
            for variant, centred in (("uncentred", False), ("centred", True)):
                settings = {"eps": eps}
                if name == "embed" and pos == "first":
                    settings["constant_by_construction"] = True
                rows.append({"measure": "rankme", "layer": name, "layer_index": li, "position": pos,
                             "variant": variant, "n_samples": N, "value": rankme(Z, centred=centred, eps=eps),
                             "settings": settings})
    return rows


def run(spec: RunSpec, run_dir: str | Path, device: str = "auto", log=print) -> dict:
    """Measure every checkpoint of a trained run; write ``run_dir/metrics.csv`` atomically."""
    run_dir = Path(run_dir)
    model, data, ckdir, steps, device = open_run(spec, run_dir, device)
    n = int(spec.eval["n_samples"])
    eps = float(spec.eval["rankme_eps"])
    seq = torch.as_tensor(data.eval_set(n), device=device)                # (n, S)
    na = data.spec.n_answer
    chance = chance_accuracy(data.eval_set(n)[:, -na:])
    train_log = {r["step"]: r for r in read_train_log(ckdir)}
    if n < model.cfg.d_model:
        log(f"[metrics] {spec.name}: warning: n_samples={n} < d_model={model.cfg.d_model}, "
            f"so RankMe is capped at {n}")
    t0 = time.time()
    rows: list[dict] = []
    for step in iter_checkpoints(ckdir, model, steps, checkpoint_identity(spec)):
        with warnings.catch_warnings():  # the N < d cap is reported once above
            warnings.simplefilter("ignore")
            ck_rows = measure_checkpoint(model, seq, na, eps)
        for r in ck_rows:
            r.update(run=spec.name, step=step)
            rows.append(r)
            if r["measure"] == "accuracy":
                rows.append({**r, "measure": "accuracy_norm",
                             "value": (r["value"] - chance) / (1.0 - chance) if chance < 1 else float("nan"),
                             "settings": {"chance": chance}})
        if step in train_log:
            rows.append({"run": spec.name, "step": step, "measure": "train_loss", "layer": "output",
                         "layer_index": -1, "position": "answer", "variant": "",
                         "n_samples": spec.train["batch_size"], "value": train_log[step]["train_loss"],
                         "settings": {"averaged_since_previous_checkpoint": True}})
    write_table(run_dir / "metrics.csv", rows)
    dt = time.time() - t0
    log(f"[metrics] {spec.name}: {len(steps)} checkpoints, {len(rows)} rows, {dt:.1f} s "
        f"({dt / len(steps) * 1000:.0f} ms per checkpoint) on {device}")
    return {"checkpoints": len(steps), "rows": len(rows), "seconds": dt, "chance": chance}

