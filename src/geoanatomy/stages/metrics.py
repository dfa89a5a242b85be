"""The metrics stage: behaviour and geometry at every checkpoint -> ``metrics.csv``.

Two fixed samples, the same at every checkpoint: the evaluation set (the first
``eval.n_samples`` held-out examples, never trained on) and a training sample (as many
examples of the training distribution, the inputs the model is trained on). Chance levels
and the input-blind baseline come from the training distribution (``geoanatomy.baselines``).

Rows of the per-run table ``metrics.csv`` (format: ``geoanatomy.table``)::

    run, step, measure, layer, layer_index, position, variant, n_samples, value, settings

Behaviour (``layer`` = "output"; all in float64 from the checkpoint's weights). Position
"answer" = the whole answer, "first" = the first answer token alone (what a probe of the
first position predicts, so probes are compared with the same target's behaviour):

* ``accuracy``          exact match of every answer token (position "answer") or of the
                        first token (position "first") under teacher forcing, held-out
* ``accuracy_norm``     (accuracy - chance) / (1 - chance), chance = the best constant
                        answer's (first token's) accuracy on the training distribution
* ``token_accuracy``    share of answer tokens predicted right, held-out
* ``logprob``           mean log p(whole answer) (position "answer") or log p(first token)
                        (position "first"), held-out, nats
* ``logprob_per_token`` mean per-token answer log-probability, held-out, nats
* ``loss``              mean cross-entropy per answer token at the checkpoint's weights,
                        ``variant`` "heldout" (the evaluation set) or "train" (the fixed
                        training sample); the loss-plateau exit is read from "train"
* ``train_loss``        the training loop's batch loss averaged over the steps since the
                        previous checkpoint (settings say so); kept for reference, no event
                        uses it: it lags the checkpoint by half an interval on average

Geometry, for every layer (see ``model.py``: embed, block0.., ln_final) at two positions
(``first``: the position that predicts the first answer token, the ``=``;
``answer_mean``: hidden states averaged over the positions that predict answer tokens):

* ``rankme``      ``variant`` "uncentred" (RankMe as defined) or "centred" (columns
                  centred first)
* ``mean_share``  ||mean row||^2 / mean ||row||^2 of the same matrix: how much of the
                  uncentred RankMe's picture is one shared direction

Note: at ``first`` the embedding output is the same token at the same position
for every example, so ``embed``/``first`` is rank one by construction
(``constant_by_construction`` in the settings); analyses exclude it.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import torch

from ..baselines import training_baselines
from ..checkpoints import iter_checkpoints, read_train_log, recorded_hashes
from ..measures.geometry import matrix_rows
from ..spec import RunSpec
from ..table import stamp_checkpoints, write_table
from .common import checkpoint_identity, open_run, progress, training_dir


@torch.no_grad()
def behaviour_rows(model, seq: torch.Tensor, n_answer: int, split: str) -> tuple[list[dict], list]:
    """Behaviour rows (without run/step) of sequences seq (N, S); also returns the hidden
    states. Logits are cast to float64 before the softmax (float32 rounding makes fake
    spikes in losses near zero)."""
    model.eval()
    N = seq.shape[0]
    x, y = seq[:, :-1], seq[:, 1:]
    logits, hidden = model(x, return_hidden=True)                        # (N, T, V), L+2 x (N, T, d)
    ans_logits = logits[:, -n_answer:, :].to(torch.float64)              # (N, n_answer, V)
    target = y[:, -n_answer:]                                            # (N, n_answer)
    logp = torch.log_softmax(ans_logits, -1).gather(-1, target[..., None])[..., 0]  # (N, n_answer)
    rows = [{"measure": "loss", "layer": "output", "layer_index": -1, "position": "answer", "variant": split,
             "n_samples": N, "value": -logp.mean().item(),
             "settings": {"split": split, "per": "answer token", "dtype": "float64"}}]
    if split != "heldout":
        return rows, hidden
    correct = ans_logits.argmax(-1) == target                            # (N, n_answer)
    beh = dict(layer="output", layer_index=-1, variant="", n_samples=N)
    rows += [{**beh, "position": "answer", "measure": "accuracy", "value": correct.all(1).double().mean().item()},
             {**beh, "position": "answer", "measure": "token_accuracy", "value": correct.double().mean().item()},
             {**beh, "position": "answer", "measure": "logprob", "value": logp.sum(1).mean().item()},
             {**beh, "position": "answer", "measure": "logprob_per_token", "value": logp.mean().item()},
             {**beh, "position": "first", "measure": "accuracy", "value": correct[:, 0].double().mean().item()},
             {**beh, "position": "first", "measure": "logprob", "value": logp[:, 0].mean().item()}]
    return rows, hidden


def geometry_rows(hidden, names: list[str], first: int, eps: float = 1e-7) -> list[dict]:
    """RankMe (both variants) and the mean share per layer and position, hidden L+2 x (N, T, d)
    (``measures.geometry.matrix_rows`` of each layer's matrix at each position)."""
    rows = []
    for li, (name, h) in enumerate(zip(names, hidden)):
        reps = {"first": h[:, first, :], "answer_mean": h[:, first:, :].mean(1)}  # (N, d) each
        for pos, Z in reps.items():
            const = {"constant_by_construction": True} if name == "embed" and pos == "first" else {}
            rows += matrix_rows(Z, eps=eps, key={"layer": name, "layer_index": li, "position": pos},
                                settings={"eps": eps, **const})
    return rows


def measure_checkpoint(model, seq: torch.Tensor, n_answer: int, eps: float = 1e-7,
                       train_seq: torch.Tensor | None = None) -> list[dict]:
    """All per-checkpoint rows (without run/step): behaviour and geometry on the evaluation
    sequences seq (N, S), and the loss on the training sample train_seq (M, S) if given."""
    rows, hidden = behaviour_rows(model, seq, n_answer, "heldout")
    rows += geometry_rows(hidden, model.layer_names(), seq.shape[1] - 1 - n_answer, eps)
    if train_seq is not None:
        rows += behaviour_rows(model, train_seq, n_answer, "train")[0]
    return rows


def run(spec: RunSpec, run_dir: str | Path, device: str = "auto", log=print) -> dict:
    """Measure every checkpoint of a trained run; write ``run_dir/metrics.csv`` atomically."""
    run_dir = Path(run_dir)
    model, data, ckdir, steps, device = open_run(spec, training_dir(spec, run_dir), device)  # a unit: its mixture's
    n = int(spec.eval["n_samples"])
    eps = float(spec.eval["rankme_eps"])
    seq = torch.as_tensor(data.eval_set(n), device=device)                # (n, S)
    train_seq = torch.as_tensor(data.training_sample(n, "metrics"), device=device)  # (n, S)
    na = data.spec.n_answer
    base = training_baselines(data)
    chance = {"answer": base["chance_accuracy"], "first": base["first_token_chance"]}
    train_log = {r["step"]: r for r in read_train_log(ckdir)}
    if n < model.cfg.d_model:
        log(f"[metrics] {spec.name}: warning: n_samples={n} < d_model={model.cfg.d_model}, "
            f"so RankMe is capped at {n}")
    t0 = time.time()
    rows: list[dict] = []
    for step in progress(iter_checkpoints(ckdir, model, steps, checkpoint_identity(spec)), len(steps), "metrics",
                         spec.name, log):
        with warnings.catch_warnings():  # the N < d cap is reported once above
            warnings.simplefilter("ignore")
            ck_rows = measure_checkpoint(model, seq, na, eps, train_seq)
        for r in ck_rows:
            r.update(run=spec.name, step=step)
            rows.append(r)
            if r["measure"] == "accuracy":
                c = chance[r["position"]]
                rows.append({**r, "measure": "accuracy_norm",
                             "value": (r["value"] - c) / (1.0 - c) if c < 1 else float("nan"),
                             "settings": {"chance": c, "chance_source": "training distribution",
                                          "chance_n_sample": base["n_score_heldout"]}})
        if step in train_log:
            rows.append({"run": spec.name, "step": step, "measure": "train_loss", "layer": "output",
                         "layer_index": -1, "position": "answer", "variant": "batch_average",
                         "n_samples": spec.train["batch_size"], "value": train_log[step]["train_loss"],
                         "settings": {"averaged_since_previous_checkpoint": True, "used_by_events": False}})
            if spec.is_unit:   # the mixture's batches hold every combination: say whose loss it is
                rows[-1].update(variant="mixture_batch_average", settings={
                    **rows[-1]["settings"], "mixture": spec.train_name,
                    "batch": "the mixture's batches (every combination), not this combination's alone"})
    write_table(run_dir / "metrics.csv", stamp_checkpoints(rows, recorded_hashes(ckdir)))
    dt = time.time() - t0
    log(f"[metrics] {spec.name}: {len(steps)} checkpoints, {len(rows)} rows, {dt:.1f} s "
        f"({dt / len(steps) * 1000:.0f} ms per checkpoint) on {device}")
    return {"checkpoints": len(steps), "rows": len(rows), "seconds": dt, "chance": chance, "baselines": base}

