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
* ``train_accuracy``    exact match of every answer token on the same fixed training sample
                        (``variant`` "train"): when the training set is fitted, the event
                        grokking's delay is measured from (``train_acquisition_step``)
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

Signals of the precursor benchmark (``measures.signals`` has the formulas, the registry
``measures.signal_registry`` how each is scored), at every checkpoint:

* ``ildr``          every layer at ``first``: inter/intra-class distance ratio, classes =
                    the first answer token of the evaluation example
* ``head_erank``    layer ``block{i}.head{h}`` (each head) and ``all_heads`` (their mean),
                    position ``first``: effective rank of the head's attention output,
                    variant ``sv`` (p = s / sum s) or ``sv2`` (p = s^2 / sum s^2)
* ``stable_rank``   layer ``block{i}`` (mean over the block's four weight matrices) and
                    ``all_blocks`` (mean over every block matrix), position ``none``
* ``update_gap``    layer ``all_params``, position ``none``, variant ``window``: sigma_1/sigma_2
                    of the per-step parameter updates over the last ``DEFAULT_WINDOW``
                    checkpoint intervals (NaN before the window is full)
* ``loss_cov_heat``, ``loss_cov_pr``  layer ``output``, position ``answer``, variant
                    ``window``: heat capacity and participation ratio of the covariance of the
                    per-example held-out losses over the last ``DEFAULT_WINDOW`` checkpoints

The per-example held-out answer losses themselves (mean cross-entropy over the answer tokens
of each evaluation example, float32) go to ``example_losses.csv``: one row per checkpoint x
example (run, step, example, loss).

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

from ..baselines import training_baselines
from ..checkpoints import iter_checkpoints, read_train_log, recorded_hashes
from ..measures import signals as sig
from ..measures.geometry import matrix_rows
from ..tasks import get_task
from ..measures.signals import SignalWindow, capture_heads
from ..spec import JobSpec, RunSpec
from ..table import stamp_checkpoints, write_table
from .common import checkpoint_identity, open_run, progress, training_dir, write_timings


@torch.no_grad()
def behaviour_rows(model, seq: torch.Tensor, n_answer: int, split: str) -> tuple[list[dict], list, np.ndarray]:
    """Behaviour rows (without run/step) of sequences seq (N, S); also returns the hidden
    states and each example's mean answer cross-entropy (N,). Logits are cast to float64 before
    the softmax (float32 rounding makes fake spikes in losses near zero)."""
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
    per_example = (-logp.mean(1)).cpu().numpy()
    correct = ans_logits.argmax(-1) == target                            # (N, n_answer)
    if split != "heldout":     # the training side's exact match: when the training set is fitted
        rows.append({"measure": "train_accuracy", "layer": "output", "layer_index": -1, "position": "answer",
                     "variant": split, "n_samples": N, "value": correct.all(1).double().mean().item(),
                     "settings": {"split": split, "per": "example, every answer token right"}})
        return rows, hidden, per_example
    beh = dict(layer="output", layer_index=-1, variant="", n_samples=N)
    rows += [{**beh, "position": "answer", "measure": "accuracy", "value": correct.all(1).double().mean().item()},
             {**beh, "position": "answer", "measure": "token_accuracy", "value": correct.double().mean().item()},
             {**beh, "position": "answer", "measure": "logprob", "value": logp.sum(1).mean().item()},
             {**beh, "position": "answer", "measure": "logprob_per_token", "value": logp.mean().item()},
             {**beh, "position": "first", "measure": "accuracy", "value": correct[:, 0].double().mean().item()},
             {**beh, "position": "first", "measure": "logprob", "value": logp[:, 0].mean().item()}]
    return rows, hidden, per_example


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


# what the metrics stage hands the registry's signals (measures.signals.INPUTS): it computes
# every signal whose inputs lie within these (all the cheap ones)
SIGNAL_INPUTS = frozenset({"weights", "hidden", "labels", "heads", "losses", "window", "behaviour"})


def measure_checkpoint(model, seq: torch.Tensor, n_answer: int, eps: float = 1e-7,
                       train_seq: torch.Tensor | None = None, window: SignalWindow | None = None,
                       step: int | None = None, timings: dict | None = None) -> list[dict]:
    """All per-checkpoint rows (without run/step): behaviour, geometry and the registry's cheap
    signals on the evaluation sequences seq (N, S), the loss on the training sample train_seq
    (M, S) if given. The signals are every computation of ``measures.signals.COMPUTATIONS``
    whose inputs the stage offers (``SIGNAL_INPUTS``; the windowed ones only with ``window``,
    fed this checkpoint at ``step``). ``timings`` (optional dict): incremented with each piece's
    CPU seconds (``TIMING_KEYS``)."""
    t = timings if timings is not None else {}
    first = seq.shape[1] - 1 - n_answer
    clock = _tick(t, None, None)
    with capture_heads(model, first) as heads:
        rows, hidden, losses = behaviour_rows(model, seq, n_answer, "heldout")
    clock = _tick(t, "behaviour", clock)
    rows += geometry_rows(hidden, model.layer_names(), first, eps)
    clock = _tick(t, "geometry", clock)
    if window is not None:
        window.feed(step, model, losses)
    state = sig.SignalState(model=model, step=step, position="first",
                            layers=[(name, li, h[:, first, :]) for li, (name, h) in
                                    enumerate(zip(model.layer_names(), hidden))],
                            labels=seq[:, first + 1].cpu().numpy(), classes="first answer token",
                            heads=heads, n_head=model.cfg.n_head, losses=losses, window=window)
    offers = SIGNAL_INPUTS if window is not None else SIGNAL_INPUTS - {"window"}
    for comp in sig.COMPUTATIONS.values():
        if comp.reads <= offers:
            clock = _tick(t, None, None)
            rows += comp.rows(state)
            _tick(t, comp.cost_key, clock)
    if window is not None:          # taking the checkpoint in (the update's dot products) is the gap's cost
        t["update_gap"] = t.get("update_gap", 0.0) + window.feed_seconds
    if train_seq is not None:
        clock = _tick(t, None, None)
        rows += behaviour_rows(model, train_seq, n_answer, "train")[0]
        _tick(t, "behaviour_train", clock)
    return rows


def induction_rows(model, seq: torch.Tensor, query: int) -> list[dict]:
    """``prefix_matching`` rows (``measures.induction``) of every head at the query position (the
    task's ``induction_query``): layer ``block{i}``, variant ``head{h}``, and variant ``max`` (the
    largest over the layer's heads) whose crossing of 0.5 is the run's ``induction_head_step``."""
    from ..measures.induction import attention_patterns, prefix_matching_score, uniform_score
    tokens = seq[:, :-1].cpu().numpy()
    score = prefix_matching_score(attention_patterns(model, seq[:, :-1]), tokens, query)
    settings = {"query_position": int(query), "uniform_head": uniform_score(tokens, query),
                "meaning": "attention from the query to the token after an earlier copy of its token"}
    rows = []
    for li, per_head in enumerate(score):
        key = dict(measure="prefix_matching", layer=f"block{li}", layer_index=li + 1, position="first",
                   n_samples=int(seq.shape[0]), settings=settings)
        rows += [{**key, "variant": f"head{h}", "value": float(v)} for h, v in enumerate(per_head)]
        rows.append({**key, "variant": "max", "value": float(np.nanmax(per_head))})
    return rows


# what the metrics stage times (CPU seconds, signal_timings_metrics.json): behaviour, geometry
# and each signal computation's key (Signal.cost_key)
TIMING_KEYS = ("behaviour", "geometry", *(c.cost_key for c in sig.COMPUTATIONS.values()), "behaviour_train")


def _tick(timings: dict, key: str | None, since: float | None) -> float:
    """Add the CPU seconds since ``since`` to ``timings[key]``; the time now."""
    now = time.process_time()
    if key is not None:
        timings[key] = timings.get(key, 0.0) + now - since
    return now


def write_example_losses(path: Path, run: str, steps: list[int], losses: list[np.ndarray]) -> None:
    """example_losses.csv (run, step, example, loss; float32 values) and its manifest, atomically."""
    from ..manifest import write_with_manifest
    lines = ["run,step,example,loss"]
    for step, v in zip(steps, losses):
        lines += [f"{run},{step},{i},{repr(float(x))}" for i, x in enumerate(v)]
    write_with_manifest(Path(path), "\n".join(lines) + "\n", title="geoanatomy per-run table example_losses.csv: "
                        "per-example held-out answer losses", columns=["run", "step", "example", "loss"],
                        rows=len(lines) - 1, types={"run": "string", "step": "integer", "example": "integer",
                                                    "loss": "number"},
                        notes=["one row per checkpoint x evaluation example; loss: mean cross-entropy over the "
                               "example's answer tokens, computed in float64, stored as float32"])


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
    query = get_task(spec.task).induction_query(spec.level_params) if spec.task else None
    if n < model.cfg.d_model:
        log(f"[metrics] {spec.name}: warning: n_samples={n} < d_model={model.cfg.d_model}, "
            f"so RankMe is capped at {n}")
    t0 = time.time()
    rows: list[dict] = []
    window = SignalWindow()
    done: list[int] = []
    timings: dict = {}
    for step in progress(iter_checkpoints(ckdir, model, steps, checkpoint_identity(spec)), len(steps), "metrics",
                         spec.name, log):
        with warnings.catch_warnings():  # the N < d cap is reported once above
            warnings.simplefilter("ignore")
            ck_rows = measure_checkpoint(model, seq, na, eps, train_seq, window, step, timings)
            if query is not None:
                ck_rows += induction_rows(model, seq, query)
        done.append(step)
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
    write_example_losses(run_dir / "example_losses.csv", spec.name, done, window.example_rows)
    write_timings(run_dir / "signal_timings_metrics.json", timings, len(done))
    write_table(run_dir / "metrics.csv", stamp_checkpoints(rows, recorded_hashes(ckdir)))
    dt = time.time() - t0
    log(f"[metrics] {spec.name}: {len(steps)} checkpoints, {len(rows)} rows, {dt:.1f} s "
        f"({dt / len(steps) * 1000:.0f} ms per checkpoint) on {device}")
    return {"checkpoints": len(steps), "rows": len(rows), "seconds": dt, "chance": chance, "baselines": base}


def run_job(job: JobSpec, threads: int = 1) -> dict:
    """The stage's job as the rule passes it (``geoanatomy metrics --spec``): its run, folder,
    device and the config blocks it reads (``config.jobs.STAGE_BLOCKS``)."""
    return run(job.run, job.run_dir, device=job.device)
