"""A precursor monitor for your own training loop (and the Hugging Face ``Trainer``).

Every ``every`` steps the monitor runs a fixed probe batch you supply through the model (in
eval mode, without gradients, then puts the model back as it was), and records, in the long
table format of the pipeline's ``metrics.csv`` (``geoanatomy.table``):

* ``rankme`` per layer and probe position, variants ``uncentred`` (RankMe as defined) and
  ``centred``, and the ``mean_share`` of the same matrix (``measures.rankme``);
* ``loss`` of the probe batch (mean cross-entropy over the labelled next tokens, float64;
  ``variant`` "probe"); with labels also ``accuracy`` (every labelled token of a row right)
  and ``token_accuracy``, with a ``chance`` level also ``accuracy_norm``;
* ``train_loss`` (variant ``batch_average``) when you pass your batch losses.

It detects collapse, floor and recovery of RankMe ONLINE with the pipeline's detectors
(``events.curve_entry`` with the ``events:`` thresholds): at step t the detector sees the
curve measured up to t only (no look-ahead) and an event is reported once its persistence
window (``persist`` measurements) has been seen:

collapse (onset)  reported as soon as the curve so far has changed by ``collapse_drop`` and
                  the onset is held for ``persist`` measurements. PROVISIONAL: onset and
                  floor are measured against the lowest value so far, so they move if the
                  curve keeps falling.
floor             PROVISIONAL until a recovery confirms it: logged only then ("floor at f,
                  confirmed by the recovery at r"). A run that never recovers ends with a
                  provisional floor (``events()`` and precursor.json say so).
recovery          the curve is back by ``return_frac`` of its drop for ``persist``
                  measurements; it confirms the floor and the collapse. From then on the
                  events equal the offline detector's on the full curve, unless the curve
                  later falls below the confirmed floor: then a "revised" line is logged
                  and the events are provisional again.
acquisition       (probe with labels and chance) ``events.acquisition_step``: a fixed
                  threshold, so it is causal; reported once, with the precursor verdict
                  of the headline floor at that moment.

At every step the monitor's events are ``events.curve_entry`` of the curve so far, so its
final events are exactly the offline pipeline's on the recorded curve (tested). One log line
per event; ``close()`` writes ``metrics.csv``, ``precursor.json`` (``scan.report``: the
pipeline's ``rankme_entry`` for both variants, plus an ``online`` block with the event log)
and ``trajectory.png`` (the pipeline's figure) into ``out_dir``.

Models: (a) the project's GPT (``model(x, return_hidden=True)``), (b) any Hugging Face causal
LM (``output_hidden_states=True``, layer names of ``pythia.hf``), (c) anything else through
``forward_fn(model, input_ids, attention_mask) -> (logits, layer names, hidden states)``.

Which position's hidden state (``Probe(positions=...)``): ``"last"`` (default: the last token
of each row, the last 1 of ``attention_mask`` when given), an int index (same for every row,
negative counts from the end), a LongTensor (B,) of per-row indices, a BoolTensor (B, T) mask
(the mean over the masked positions of each row), or a dict {name: one of these} for several.

Overhead (benchmarks/bench_monitor.py, CPU, one thread, default ``every`` and a probe of
``DEFAULT_PROBE_SIZE`` rows): see docs/monitor.md.

    probe = Probe(input_ids, labels=labels)             # a fixed batch, never trained on
    mon = Monitor(probe, out_dir="runs/mine")           # every=DEFAULT_EVERY
    mon.step(model, 0)                                  # before the first update
    for step in range(1, n_steps + 1):
        ...; opt.step()
        mon.step(model, step, loss=loss.item())         # measures when step % every == 0
    pre = mon.close(model, n_steps)                     # metrics.csv, precursor.json, trajectory.png

    trainer = Trainer(..., callbacks=[mon.trainer_callback()])
"""
from __future__ import annotations

import io
import time
import warnings
from pathlib import Path
from collections.abc import Callable, Iterable

import numpy as np
import torch

from . import events as ev
from .config import DEFAULTS
from .measures.rankme import mean_share, rankme

DEFAULT_EVERY = 100         # steps between measurements (overhead <= 5%: docs/monitor.md)
DEFAULT_PROBE_SIZE = 200    # probe rows (the pipeline's eval.n_samples); RankMe is capped at min(rows, d_model)
PROVISIONAL_NOTE = ("online events: at step t only the curve measured up to t is used; the collapse and the "
                    "floor are provisional (measured against the lowest value so far) until a recovery, held "
                    "for `persist` measurements, confirms them; a run that never recovers ends with a "
                    "provisional floor. The final events equal the offline detectors' on the recorded curve.")


# ------------------------------------------------------------------------------ schedules
class LogThenEvery:
    """A measurement schedule: step 0, log-spaced steps below ``k`` (floor(ratio^i): 1, 2, 3,
    5, 7, 11, 17, 25, 38, 57, 86 for ratio 1.5 and k 100), then every ``k`` steps. Events
    early in training (the project's tasks collapse within the first 50 steps) need the dense
    start; it costs a fixed number of extra measurements per run."""

    def __init__(self, k: int = DEFAULT_EVERY, ratio: float = 1.5):
        if k < 1 or ratio <= 1:
            raise ValueError(f"need k >= 1 and ratio > 1, got k={k}, ratio={ratio}")
        self.k, self.ratio = int(k), float(ratio)
        self.early, i = set(), 0
        while int(self.ratio ** i) < self.k:
            self.early.add(int(self.ratio ** i))
            i += 1

    def __call__(self, step: int) -> bool:
        return step % self.k == 0 or step in self.early

    def __repr__(self) -> str:
        return f"LogThenEvery(k={self.k}, ratio={self.ratio:g})"


def log_then_every(k: int = DEFAULT_EVERY, ratio: float = 1.5) -> LogThenEvery:
    """``LogThenEvery(k, ratio)``: pass it as ``Monitor(every=...)``."""
    return LogThenEvery(k, ratio)


# ------------------------------------------------------------------------------ probe
class Probe:
    """A fixed probe batch: token ids (B, T), optional attention mask and labels, positions.

    ``labels`` (B, T) follow the Hugging Face convention: aligned with ``input_ids`` (shifted
    inside), -100 = not scored. Without labels the loss is the next-token loss over every
    non-padding token and there is no accuracy. ``chance``: the accuracy of a model that does
    not read the input (for ``accuracy_norm`` and acquisition). ``positions``: module doc."""

    def __init__(self, input_ids, attention_mask=None, labels=None, positions="last",
                 chance: float | None = None):
        self.input_ids = torch.as_tensor(input_ids, dtype=torch.long)
        if self.input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, T), got shape {tuple(self.input_ids.shape)}")
        B, T = self.input_ids.shape
        self.attention_mask = None if attention_mask is None else torch.as_tensor(attention_mask).long()
        self.labels = None if labels is None else torch.as_tensor(labels, dtype=torch.long)
        for what, t in (("attention_mask", self.attention_mask), ("labels", self.labels)):
            if t is not None and tuple(t.shape) != (B, T):
                raise ValueError(f"{what} must have the shape of input_ids {(B, T)}, got {tuple(t.shape)}")
        self.chance = chance
        if not isinstance(positions, dict):
            positions = {_position_name(positions): positions}
        self.positions = {str(k): self._resolve(v) for k, v in positions.items()}

    def _resolve(self, spec):
        """('index', LongTensor (B,)) or ('mask', BoolTensor (B, T))."""
        B, T = self.input_ids.shape
        if isinstance(spec, str):
            if spec != "last":
                raise ValueError(f"position {spec!r}: use 'last', an int, a (B,) index tensor or a (B, T) mask")
            if self.attention_mask is None:
                return "index", torch.full((B,), T - 1, dtype=torch.long)
            m = self.attention_mask.bool()
            if not m.any(1).all():
                raise ValueError("a probe row has no token (attention_mask all zero)")
            return "index", (m.long() * torch.arange(T)).argmax(1)
        if isinstance(spec, (int, np.integer)):
            i = int(spec) + (T if spec < 0 else 0)
            if not 0 <= i < T:
                raise ValueError(f"position {spec} is outside the probe's {T} tokens")
            return "index", torch.full((B,), i, dtype=torch.long)
        t = torch.as_tensor(spec)
        if t.dtype == torch.bool:
            if tuple(t.shape) != (B, T) or not t.any(1).all():
                raise ValueError(f"a position mask must be (B, T) = {(B, T)} with a True in every row")
            return "mask", t
        t = t.long()
        if tuple(t.shape) != (B,) or (t < 0).any() or (t >= T).any():
            raise ValueError(f"a position index tensor must be (B,) = ({B},) with values in [0, {T})")
        return "index", t

    @classmethod
    def from_task(cls, data, n: int = DEFAULT_PROBE_SIZE, chance: float | None = None) -> Probe:
        """The pipeline's evaluation set of a ``tasks.TaskData`` (first ``n`` held-out rows),
        answer tokens labelled, positions ``first`` (predicts the first answer token) and
        ``answer_mean`` (mean over the answer-predicting positions): the same hidden states,
        loss and accuracy as ``stages.metrics`` (``chance``: ``baselines.training_baselines``)."""
        seq = torch.as_tensor(data.eval_set(n), dtype=torch.long)           # (n, S)
        S, na = seq.shape[1], data.spec.n_answer
        labels = seq.clone()
        labels[:, :S - na] = -100
        first = data.spec.first_answer_pred_pos
        mask = torch.zeros(seq.shape, dtype=torch.bool)
        mask[:, first:S - 1] = True
        return cls(seq, labels=labels, positions={"first": first, "answer_mean": mask}, chance=chance)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


def _position_name(spec) -> str:
    if isinstance(spec, str):
        return spec
    if isinstance(spec, (int, np.integer)):
        return f"pos{int(spec)}"
    return "mask_mean" if torch.as_tensor(spec).dtype == torch.bool else "index"


# ------------------------------------------------------------------------------ forward passes
def model_forward(model, input_ids, attention_mask=None):
    """(logits (B, T, V), layer names, hidden states L+2 x (B, T, d)) of the project's GPT or
    a Hugging Face causal LM (module doc)."""
    from .model import GPT
    from .pythia.hf import forward_hidden, unwrap
    m = unwrap(model)
    if isinstance(m, GPT):
        logits, hidden = m(input_ids, return_hidden=True)
        return logits, m.layer_names(), hidden
    if hasattr(getattr(m, "config", None), "num_hidden_layers"):
        return forward_hidden(m, input_ids, attention_mask)
    raise TypeError(f"{type(m).__name__}: not the project's GPT nor a Hugging Face causal LM; "
                    f"pass forward_fn(model, input_ids, attention_mask) -> (logits, names, hidden states)")


def _nll64(logits: torch.Tensor, targets: torch.Tensor, chunk: int = 1 << 22) -> torch.Tensor:
    """-log p(target) in float64 for rows of logits (n, V), in chunks of ``chunk`` elements."""
    V = logits.shape[-1]
    step = max(1, chunk // V)
    return torch.cat([-torch.log_softmax(logits[i:i + step].to(torch.float64), -1)
                      .gather(-1, targets[i:i + step, None])[:, 0] for i in range(0, len(logits), step)])


# ------------------------------------------------------------------------------ online events
class OnlineCollapse:
    """Causal collapse / floor / recovery of one falling curve (module doc): ``update`` feeds
    one point and returns the newly reported events."""

    KEYS = ("collapse", "floor", "recovery")

    def __init__(self, label: str, cfg_events: dict):
        self.label, self.e = label, cfg_events
        self.steps: list[int] = []
        self.values: list[float] = []
        self.entry: dict = ev.curve_entry([], [], "down", cfg_events)
        self.confirmed: dict | None = None
        self.reported: dict = {}

    def current(self) -> dict:
        """{collapse, floor, recovery} steps of the curve so far (None where not an event)."""
        e = self.entry
        if not e.get("collapsed"):
            return {k: None for k in self.KEYS}
        return {k: e.get(f"{k}_step") for k in self.KEYS}

    def update(self, step: int, value: float) -> list[dict]:
        self.steps.append(int(step))
        self.values.append(float(value))
        self.entry = ev.curve_entry(self.steps, self.values, "down", self.e)
        now, out = self.current(), []
        ext = self.entry.get("floor")
        if self.confirmed is not None and now != self.confirmed:
            out.append(self._rec(step, "revised", now["floor"], "provisional",
                                 f"the curve fell below the confirmed floor ({self.confirmed}); now {now}; "
                                 f"the events are provisional again"))
            self.confirmed = None
        if self.confirmed is None:
            if now["recovery"] is not None:
                if now["collapse"] != self.reported.get("collapse"):
                    moved = self.reported.get("collapse")
                    out.append(self._rec(step, "collapse", now["collapse"], "confirmed",
                                         "confirmed by the recovery" + (f" (first reported at step {moved})"
                                                                        if moved is not None else "")))
                out.append(self._rec(step, "floor", now["floor"], "confirmed",
                                     f"value {ext:.4g}, confirmed by the recovery at step {now['recovery']}"))
                out.append(self._rec(step, "recovery", now["recovery"], "confirmed",
                                     f"back by {self.e['return_frac']:g} of the drop for {self.e['persist']} "
                                     f"measurements"))
                self.confirmed = dict(now)
                self.reported.update(now)
            elif now["collapse"] is not None and "collapse" not in self.reported:
                out.append(self._rec(step, "collapse", now["collapse"], "provisional",
                                     f"held for {self.e['persist']} measurements; provisional: measured against "
                                     f"the lowest value so far ({ext:.4g}), it moves if the curve falls further"))
                self.reported["collapse"] = now["collapse"]
        return out

    def _rec(self, t, event, step, status, detail) -> dict:
        return {"reported_at": int(t), "curve": self.label, "event": event, "step": step, "status": status,
                "detail": detail}

    def state(self) -> dict:
        """The curve's events now: ``curve_entry`` of the curve so far plus a status per event."""
        now = self.current()
        conf = self.confirmed is not None
        status = {k: (None if now[k] is None else ("confirmed" if conf else "provisional")) for k in self.KEYS}
        return {**self.entry, "status": status, "n_points": len(self.steps)}


class OnlineAcquisition:
    """Causal acquisition (``events.acquisition_step``, a fixed threshold): reported once."""

    def __init__(self, label: str, cfg_events: dict):
        self.label, self.e = label, cfg_events
        self.steps: list[int] = []
        self.values: list[float] = []
        self.step_found: int | None = None

    def update(self, step: int, value: float) -> list[dict]:
        self.steps.append(int(step))
        self.values.append(float(value))
        if self.step_found is not None:
            return []
        t = ev.acquisition_step(self.steps, self.values, self.e["acquisition_threshold"], self.e["persist"])
        if t is None:
            return []
        self.step_found = t
        return [{"reported_at": int(step), "curve": self.label, "event": "acquisition", "step": t,
                 "status": "confirmed", "detail": f"chance-normalised accuracy >= {self.e['acquisition_threshold']:g} "
                                                  f"for {self.e['persist']} measurements"}]


# ------------------------------------------------------------------------------ the monitor
class Monitor:
    """Records RankMe per layer and the probe loss every ``every`` steps and reports the
    collapse, floor and recovery online (module doc).

    probe        a ``Probe`` (or a (B, T) tensor of token ids: last position, no labels)
    every        int k (measure when step % k == 0), an iterable of steps, or a callable
                 step -> bool (``log_then_every(k)``: a dense start, then every k)
    out_dir      where ``close()`` (and every ``flush_every`` measurements) writes the table
    run          the ``run`` column of the table
    events       the ``events:`` block (``config.DEFAULTS["events"]`` for missing keys);
                 ``layer`` "final"/"ln_final" = the model's last layer
    track        "headline" (events of the headline layer and position, both variants) or
                 "all" (every layer and position)
    forward_fn   for models that are neither the project's GPT nor a HF causal LM
    resume       continue the table already in ``out_dir`` (rows at steps >= the first
                 step measured now are dropped), e.g. after restarting from a checkpoint
    log          one line per event (None: silent)
    """

    def __init__(self, probe, every: int | Iterable[int] | Callable[[int], bool] = DEFAULT_EVERY, out_dir: str | Path | None = None,
                 run: str = "monitor", events: dict | None = None, track: str = "headline", eps: float = 1e-7,
                 forward_fn: Callable | None = None, flush_every: int = 10, resume: bool = False,
                 log: Callable[[str], None] | None = print):
        self.probe = probe if isinstance(probe, Probe) else Probe(probe)
        if isinstance(every, (int, np.integer)):
            if every < 1:
                raise ValueError(f"every must be >= 1, got {every}")
            every = int(every)
            self._due = lambda s: s % every == 0
        elif callable(every):
            self._due = every
        else:
            steps = {int(s) for s in every}
            self._due = steps.__contains__
        self.every = every if isinstance(every, int) else (repr(every) if callable(every) else sorted(steps))
        if track not in ("headline", "all"):
            raise ValueError(f"track must be 'headline' or 'all', got {track!r}")
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.run, self.track, self.eps = run, track, float(eps)
        self.e = {**DEFAULTS["events"], **(events or {})}
        self.forward_fn = forward_fn or model_forward
        self.flush_every = int(flush_every)
        self.log = log
        self.rows: list[dict] = []
        self.event_log: list[dict] = []
        self.trackers: dict[tuple, OnlineCollapse] = {}
        self.acq: OnlineAcquisition | None = None
        self.names: list[str] | None = None
        self.n_params: int | None = None
        self.measured: list[int] = []
        self.cpu_seconds = 0.0
        self.wall_seconds = 0.0
        self._loss_sum, self._loss_n = 0.0, 0
        self._warned_cap = False
        self._resumed_rows = self._load_existing() if resume else []

    # -------------------------------------------------------------- schedule
    def due(self, step: int) -> bool:
        """Whether ``step`` is a measurement step."""
        if self.measured and step <= self.measured[-1]:
            return False
        return bool(self._due(int(step)))

    def add_train_loss(self, loss: float) -> None:
        """A training batch loss, averaged into the next measurement's ``train_loss`` row."""
        self._loss_sum += float(loss)
        self._loss_n += 1

    def step(self, model, step: int, loss: float | None = None) -> bool:
        """Call once before training (step 0) and after every update (step = updates done).
        Measures when the step is due; returns whether it measured."""
        if loss is not None:
            self.add_train_loss(loss)
        if not self.due(step):
            return False
        self.measure(model, step)
        return True

    # -------------------------------------------------------------- measuring
    def measure(self, model, step: int) -> list[dict]:
        """Measure now (whatever the schedule); returns the new rows."""
        c0, w0 = time.process_time(), time.perf_counter()
        if self._resumed_rows is not None and self._resumed_rows:
            self._replay([r for r in self._resumed_rows if r["step"] < step])
        self._resumed_rows = None
        rows = self._rows(model, int(step))
        self.rows += rows
        self.measured.append(int(step))
        self._track(rows, log=True)
        if self.out_dir is not None and self.flush_every > 0 and len(self.measured) % self.flush_every == 0:
            self.write_table()
        self.cpu_seconds += time.process_time() - c0
        self.wall_seconds += time.perf_counter() - w0
        return rows

    @torch.no_grad()
    def _rows(self, model, step: int) -> list[dict]:
        p = self.probe
        params = list(model.parameters())
        device = params[0].device if params else torch.device("cpu")
        if self.n_params is None:
            self.n_params = int(sum(x.numel() for x in params))
        ids = p.input_ids.to(device)
        am = None if p.attention_mask is None else p.attention_mask.to(device)
        was = model.training
        model.eval()
        try:
            logits, names, hidden = self.forward_fn(model, ids, am)
        finally:
            model.train(was)
        self.names = list(names)
        B = ids.shape[0]
        base = {"run": self.run, "step": step}
        rows = self._behaviour_rows(logits, ids, am, base)
        if self._loss_n:
            rows.append({**base, "measure": "train_loss", "layer": "output", "layer_index": -1, "position": "answer",
                         "variant": "batch_average", "n_samples": self._loss_n,
                         "value": self._loss_sum / self._loss_n,
                         "settings": {"averaged_since_previous_measurement": True, "used_by_events": False}})
            self._loss_sum, self._loss_n = 0.0, 0
        d = hidden[0].shape[-1]
        if B < d and not self._warned_cap and self.log:
            self.log(f"[monitor] {self.run}: probe of {B} rows < d_model {d}: RankMe is capped at {B}")
            self._warned_cap = True
        ar = torch.arange(B, device=device)
        for pos, (kind, where) in p.positions.items():
            where = where.to(device)
            const = False
            if kind == "index":
                tok = ids[ar, where]
                const = bool((tok == tok[0]).all() and (where == where[0]).all())
            for li, (name, h) in enumerate(zip(names, hidden)):
                if kind == "index":
                    Z = h[ar, where]                                            # (B, d)
                else:
                    w = where.to(h.dtype)[..., None]
                    Z = (h * w).sum(1) / w.sum(1)                               # (B, d)
                flag = {"constant_by_construction": True} if (const and li == 0) else {}
                common = {**base, "layer": name, "layer_index": li, "position": pos, "n_samples": B}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")                            # the N < d cap, logged once
                    for variant, centred in (("uncentred", False), ("centred", True)):
                        rows.append({**common, "measure": "rankme", "variant": variant,
                                     "value": rankme(Z, centred=centred, eps=self.eps),
                                     "settings": {"eps": self.eps, "max_rank": min(B, d), "source": "monitor",
                                                  **flag}})
                rows.append({**common, "measure": "mean_share", "variant": "", "value": mean_share(Z),
                             "settings": {"definition": "||mean row||^2 / mean ||row||^2", **flag}})
        return rows

    def _behaviour_rows(self, logits, ids, am, base) -> list[dict]:
        p = self.probe
        B = ids.shape[0]
        labelled = p.labels is not None
        if labelled:
            tgt = p.labels.to(ids.device)[:, 1:]
        else:
            tgt = ids[:, 1:].clone()
            if am is not None:
                tgt[am[:, 1:] == 0] = -100
        lg = logits[:, :-1]
        sel = tgt != -100                                                       # (B, T-1)
        nll = _nll64(lg[sel], tgt[sel])
        pos = "answer" if labelled else "tokens"
        beh = {**base, "layer": "output", "layer_index": -1, "n_samples": B}
        rows = [{**beh, "measure": "loss", "position": pos, "variant": "probe", "value": float(nll.mean()),
                 "settings": {"definition": ("mean cross-entropy over the labelled tokens" if labelled else
                                             "mean next-token loss over every non-padding token")
                              + " of the probe batch", "dtype": "float64", "n_tokens": int(sel.sum())}}]
        if not labelled:
            return rows
        right = (lg.argmax(-1) == tgt) | ~sel                                   # (B, T-1)
        has = sel.any(1)
        acc = float(right.all(1)[has].double().mean())
        rows += [{**beh, "measure": "accuracy", "position": "answer", "variant": "", "value": acc,
                  "settings": {"definition": "every labelled token of a row predicted right (argmax)"}},
                 {**beh, "measure": "token_accuracy", "position": "answer", "variant": "",
                  "value": float((lg.argmax(-1) == tgt)[sel].double().mean())}]
        if p.chance is not None:
            c = float(p.chance)
            rows.append({**beh, "measure": "accuracy_norm", "position": "answer", "variant": "",
                         "value": (acc - c) / (1 - c) if c < 1 else float("nan"), "settings": {"chance": c}})
        return rows

    # -------------------------------------------------------------- events
    def headline(self) -> tuple[str, str]:
        """(layer, position) whose events are logged (``events.layer``; "final" = the last layer)."""
        names = self.names or []
        layer = self.e["layer"]
        if layer in ("final", "ln_final") and layer not in names and names:
            layer = names[-1]
        positions = list(self.probe.positions)
        pos = self.e["position"] if self.e["position"] in positions else positions[0]
        return layer, pos

    def _track(self, rows: list[dict], log: bool) -> None:
        layer, pos = self.headline()
        new = []
        for r in rows:
            if r["measure"] == "rankme" and (self.track == "all" or (r["layer"] == layer and r["position"] == pos)):
                key = (r["layer"], r["position"], r["variant"])
                if key not in self.trackers:
                    self.trackers[key] = OnlineCollapse(f"RankMe {key[0]}/{key[1]} ({key[2]})", self.e)
                new += self.trackers[key].update(r["step"], r["value"])
            elif r["measure"] == "accuracy_norm":
                if self.acq is None:
                    self.acq = OnlineAcquisition("accuracy_norm", self.e)
                new += self.acq.update(r["step"], r["value"])
        for rec in new:
            if rec["event"] == "acquisition":
                rec["precursor"] = self._verdict(rec["step"])
            self.event_log.append(rec)
            if log and self.log:
                self.log(self.format(rec))

    def _verdict(self, t_acq: int) -> dict:
        layer, pos = self.headline()
        tr = self.trackers.get((layer, pos, self.e["variant"]))
        if tr is None:
            return {}
        st = tr.state()
        v = ev.precursor(st, t_acq, self.e["transition"], self.e["precursor_min_gap_frac"])
        v["transition_status"] = st["status"].get(self.e["transition"])
        return v

    def format(self, rec: dict) -> str:
        """The log line of an event record."""
        line = (f"[monitor] {self.run} step {rec['reported_at']}: {rec['curve']}: {rec['event']} at step "
                f"{rec['step']} ({rec['status']}; {rec['detail']})")
        v = rec.get("precursor")
        if v:
            status = v["transition_status"] or "no collapse so far"
            line += (f"; headline {v['transition']} at {v['transition_step']} ({status}): precursor "
                     f"{v['precursor']}, gap {v['gap_steps']}")
        return line

    def events(self) -> dict:
        """The events now: {"layer/position/variant": state} (``curve_entry`` of the curve so far
        with a status per event), plus "acquisition_step" and the event "log"."""
        out = {f"{k[0]}/{k[1]}/{k[2]}": t.state() for k, t in self.trackers.items()}
        return {"curves": out, "acquisition_step": self.acq.step_found if self.acq else None,
                "log": list(self.event_log), "note": PROVISIONAL_NOTE}

    def _replay(self, rows: list[dict]) -> None:
        """Rebuild the table and the trackers from earlier rows (resume), without logging."""
        self.rows = list(rows)
        self.measured = sorted({int(r["step"]) for r in rows})
        for s in self.measured:
            step_rows = [r for r in rows if r["step"] == s]
            if self.names is None:
                geo = sorted({(r["layer_index"], r["layer"]) for r in step_rows if r["measure"] == "rankme"})
                self.names = [n for _, n in geo]
            self._track(step_rows, log=False)
        if self.log and self.measured:
            self.log(f"[monitor] {self.run}: resumed {len(self.measured)} measurements "
                     f"(steps {self.measured[0]}..{self.measured[-1]}) from {self.out_dir / 'metrics.csv'}")

    def _load_existing(self) -> list[dict]:
        if self.out_dir is None or not (self.out_dir / "metrics.csv").is_file():
            return []
        from .table import COLUMNS, read_table
        df = read_table(self.out_dir / "metrics.csv")
        rows = []
        for rec in df[COLUMNS].to_dict("records"):
            rec["step"], rec["layer_index"], rec["n_samples"] = (int(rec["step"]), int(rec["layer_index"]),
                                                                int(rec["n_samples"]))
            rec["value"] = float(rec["value"])
            rows.append(rec)
        return rows

    # -------------------------------------------------------------- outputs
    def table(self):
        """The rows so far as the DataFrame ``table.read_table`` would return."""
        import pandas as pd

        from .table import to_csv
        return pd.read_csv(io.StringIO(to_csv(self.rows)), comment="#", keep_default_na=False, na_values=["nan"],
                           dtype={"layer": str, "position": str, "variant": str})

    def write_table(self) -> Path | None:
        """Write ``out_dir/metrics.csv`` (atomically) now."""
        if self.out_dir is None:
            return None
        from .table import write_table
        write_table(self.out_dir / "metrics.csv", self.rows)
        return self.out_dir / "metrics.csv"

    def overhead(self) -> dict:
        """Seconds spent in the monitor (CPU seconds of this process and wall seconds)."""
        return {"measurements": len(self.measured), "cpu_seconds": round(self.cpu_seconds, 4),
                "wall_seconds": round(self.wall_seconds, 4)}

    def report(self) -> dict:
        """The precursor.json dict of the rows so far (``scan.report.build_report``)."""
        from .scan.report import build_report
        layer, pos = self.headline()
        final = {}
        for k, t in self.trackers.items():
            st = t.state()
            final[f"{k[0]}/{k[1]}/{k[2]}"] = {**{f"{e}_step": st.get(f"{e}_step") for e in OnlineCollapse.KEYS},
                                              "collapsed": st.get("collapsed"), "status": st["status"]}
        online = {"every": self.every, "measured_steps": list(self.measured), "track": self.track, "note": PROVISIONAL_NOTE,
                  "log": list(self.event_log), "final": final, "overhead": self.overhead(),
                  "probe": {"rows": len(self.probe), "tokens": int(self.probe.input_ids.shape[1]),
                            "positions": list(self.probe.positions), "labels": self.probe.labels is not None,
                            "chance": self.probe.chance}}
        return build_report(self.table(), run=self.run, kind="monitor", n_params=self.n_params,
                            cfg_events=self.e, layer=layer, position=pos, eps=self.eps, extra={"online": online})

    def close(self, model=None, step: int | None = None) -> dict | None:
        """Measure ``step`` if it was not (with ``model``), log the final events of the tracked
        headline curves, write metrics.csv, precursor.json and trajectory.png to ``out_dir``;
        returns the precursor dict (None when nothing was measured)."""
        if model is not None and step is not None and (not self.measured or self.measured[-1] < step):
            self.measure(model, step)
        if not self.rows:
            return None
        pre = self.report()
        if self.log:
            for name, st in pre["online"]["final"].items():
                self.log(f"[monitor] {self.run} final: RankMe {name}: collapse {st['collapse_step']}, floor "
                         f"{st['floor_step']}, recovery {st['recovery_step']} ({st['status']})")
        if self.out_dir is not None:
            from .files import atomic_write_json
            from .scan.report import plot_report
            self.write_table()
            atomic_write_json(self.out_dir / "precursor.json", pre)
            plot_report(self.table(), pre, self.out_dir / "trajectory.png")
        return pre

    # -------------------------------------------------------------- Hugging Face Trainer
    def trainer_callback(self):
        """A ``transformers.TrainerCallback`` running this monitor (module doc)."""
        return trainer_callback(self)


def trainer_callback(monitor: Monitor):
    """A ``transformers.TrainerCallback``: measures at the start of training (step
    ``state.global_step``), after every optimizer step when due, collects the logged training
    loss, and closes the monitor (writes its files) at the end. Only the main process measures."""
    from transformers import TrainerCallback

    class GeoanatomyMonitorCallback(TrainerCallback):
        def __init__(self, mon: Monitor):
            self.monitor = mon

        def on_train_begin(self, args, state, control, model=None, **kw):
            if state.is_world_process_zero and model is not None:
                self.monitor.step(model, state.global_step)

        def on_step_end(self, args, state, control, model=None, **kw):
            if state.is_world_process_zero and model is not None:
                self.monitor.step(model, state.global_step)

        def on_log(self, args, state, control, logs=None, **kw):
            if state.is_world_process_zero and logs and "loss" in logs:
                self.monitor.add_train_loss(logs["loss"])

        def on_train_end(self, args, state, control, model=None, **kw):
            if state.is_world_process_zero:
                self.monitor.close(model, state.global_step)

    return GeoanatomyMonitorCallback(monitor)
