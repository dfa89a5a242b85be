"""The ``Monitor``: measures a fixed probe every few steps of a training loop, records the
pipeline's long table and reports the events online (package doc). Its settings (schedules,
events, signals): ``monitor.settings``; the rows of one measurement: ``monitor.rows``."""
from __future__ import annotations

import io
import json
import logging
import math
import time
import warnings
from pathlib import Path
from collections.abc import Callable, Iterable

import numpy as np
import torch

from ..defaults import events_settings  # the events: block, its defaults filled in, frozen
from ..measures.geometry import matrix_rows
from ..precursor import precursor_verdict
from .callback import trainer_callback
from .online import PROVISIONAL_NOTE, OnlineAcquisition, OnlineCollapse
from .probe import Probe, model_forward
from .settings import DEFAULT_EVERY, LogThenEvery, check_events, check_signals, log_then_every  # noqa: F401


# ------------------------------------------------------------------------------ the monitor
class Monitor:
    """Records RankMe per layer and the probe loss every ``every`` steps and reports the
    collapse, floor and recovery online (package doc).

    probe        a ``Probe`` (or a (B, T) tensor of token ids: last position, no labels)
    every        int k (measure when step % k == 0), an iterable of steps, or a callable
                 step -> bool (``log_then_every(k)``: a dense start, then every k)
    out_dir      where ``close()`` (and every ``flush_every`` measurements) writes the table
    run          the ``run`` column of the table
    events       the ``events:`` block (``defaults.events_settings``: the defaults for missing keys);
                 ``layer`` "final"/"ln_final" = the model's last layer
    track        "headline" (events of the headline layer and position, both variants) or
                 "all" (every layer and position)
    forward_fn   for models that are neither the project's GPT nor a HF causal LM
    resume       continue the table already in ``out_dir`` (rows at steps >= the first
                 step measured now are dropped), e.g. after restarting from a checkpoint;
                 refused when that table is another run's or another probe's
    log          one line per event (None: silent)
    signals      names from the signal registry (those whose inputs the monitor offers:
                 ``monitor.rows.signal_inputs``; ``geoanatomy.monitor.monitor_signals()`` lists them)
                 computed at every measurement besides RankMe and the mean share: ildr,
                 head_erank_sv / head_erank_sv2 (GPT-style ``attn.c_proj`` modules),
                 stable_rank, update_gap, loss_cov_heat / loss_cov_pr (a trailing window of
                 measurements); ildr and the loss covariance need a labelled probe
    figure       True (default): close() draws trajectory.png (matplotlib: its import is most
                 of close()'s time in a fresh process; False leaves the figure out)
    strict       False (default): the monitor never raises into the training loop: a failed
                 measurement (the probe's forward pass, a hidden size that changed) or a failed
                 write becomes a warning (``warnings`` and the ``geoanatomy.monitor`` logger),
                 rows stay in memory and the write is retried at ``close()``; True: raise
    """

    def __init__(self, probe, every: int | Iterable[int] | Callable[[int], bool] = DEFAULT_EVERY, out_dir: str | Path
                 | None = None,
                 run: str = "monitor", events: dict | None = None, track: str = "headline", eps: float = 1e-7,
                 forward_fn: Callable | None = None, flush_every: int = 10, resume: bool = False,
                 log: Callable[[str], None] | None = None, strict: bool = False, signals: Iterable[str] = (),
                 figure: bool = True, train_probe=None):
        self.strict = bool(strict)
        # a labelled batch of *training* examples (grokking: the fixed training set): its exact
        # match is recorded as ``train_accuracy`` and its crossing logged as "training set fitted",
        # so the delay to the held-out probe's acquisition is seen while training
        self.train_probe = None if train_probe is None else (
            train_probe if isinstance(train_probe, Probe) else Probe(train_probe))
        if self.train_probe is not None and self.train_probe.labels is None:
            raise ValueError("Monitor(train_probe=...) needs labels: its accuracy is what the training-fit event reads")
        self.fit: OnlineAcquisition | None = None
        self.figure = bool(figure)
        self.close_parts: dict = {}                   # CPU seconds of close()'s parts (report, files, figure)
        self.signals = check_signals(signals, probe)
        self._window = None
        self.problems: list[str] = []                 # what went wrong and was warned about
        self._warned_order = False
        self._d: int | None = None
        events = check_events(events)
        self.probe = probe if isinstance(probe, Probe) else Probe(probe)
        if isinstance(every, (str, bytes, float, bool)) or (isinstance(every, np.floating)):
            # a string would be iterated character by character, a float would fail at the modulo
            raise ValueError(f"Monitor(every=...) must be an int >= 1, an iterable of int steps or a callable "
                             f"step -> bool, got {every!r} ({type(every).__name__})")
        if isinstance(every, (int, np.integer)):
            if every < 1:
                raise ValueError(f"every must be >= 1, got {every}")
            every = int(every)
            self._due = lambda s: s % every == 0
        elif callable(every):
            self._due = every
        else:
            items = list(every)
            bad = [x for x in items if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0]
            if bad:
                raise ValueError(f"Monitor(every=...): the steps must be non-negative ints, got {bad[:3]!r}")
            steps = {int(s) for s in items}
            self._due = steps.__contains__
        self.every = every if isinstance(every, int) else (repr(every) if callable(every) else sorted(steps))
        if track not in ("headline", "all"):
            raise ValueError(f"track must be 'headline' or 'all', got {track!r}")
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.run, self.track, self.eps = run, track, float(eps)
        self.e = events_settings(events)
        self.forward_fn = forward_fn or model_forward
        self.flush_every = int(flush_every)
        self.log = log                                # an extra sink besides the logger (e.g. print)
        self.rows: list[dict] = []
        self.event_log: list[dict] = []
        self.trackers: dict[tuple, OnlineCollapse] = {}
        self.acq: OnlineAcquisition | None = None
        self.names: list[str] | None = None
        self.n_params: int | None = None
        self.measured: list[int] = []
        self.cpu_seconds = 0.0                        # in measure()
        self.wall_seconds = 0.0
        self.close_cpu_seconds = 0.0                  # in close(): report, files, figure
        self.close_wall_seconds = 0.0
        self._loss_sum, self._loss_n = 0.0, 0
        self._loss_rows: dict[int, dict] = {}         # measurement step -> its train_loss row
        self._warned_cap = False
        self.diverged_step: int | None = None         # the first step with non-finite weights, loss or measure
        self._resumed_rows = self._load_existing() if resume else self._refuse_existing()

    # -------------------------------------------------------------- schedule
    def due(self, step: int) -> bool:
        """Whether ``step`` is a measurement step (never one at or before the last measured:
        a step counter that goes back, e.g. one restarting each epoch, is warned about once)."""
        if self.measured and step <= self.measured[-1]:
            if step < self.measured[-1] and not self._warned_order:
                self._warned_order = True
                self._problem(f"step {step} comes after step {self.measured[-1]} was measured: the step counter "
                              f"went back (one that restarts each epoch?); pass the global step (updates done "
                              f"so far); steps up to {self.measured[-1]} are not measured again")
            return False
        return bool(self._due(int(step)))

    def _problem(self, msg: str, exc: BaseException | None = None) -> None:
        """Warn (warnings and logging) about something that went wrong; raise when strict."""
        if self.strict and exc is not None:
            raise exc
        text = f"[monitor] {self.run}: {msg}"
        self.problems.append(text)
        warnings.warn(text, RuntimeWarning, stacklevel=3)
        logging.getLogger("geoanatomy.monitor").warning(text)

    def _say(self, msg: str) -> None:
        """One log line: to the ``geoanatomy.monitor`` logger (INFO) and to ``log`` when given."""
        logging.getLogger("geoanatomy.monitor").info(msg)
        if self.log:
            self.log(msg)

    def add_train_loss(self, loss: float, step: int | None = None) -> None:
        """A training loss logged at ``step`` (the updates done when it was logged; None: the
        next measurement). The ``train_loss`` row of measurement m averages the losses logged at
        steps in (previous measurement, m]: a loss that arrives after m was measured but belongs
        to it (a Trainer logs after its step callbacks run) updates m's row. A non-finite loss
        marks the run diverged."""
        loss = float(loss)
        if self.diverged_step is None and not math.isfinite(loss):
            self._mark_diverged(int(step) if step is not None else (self.measured[-1] if self.measured else 0),
                                "training loss")
        if step is not None and self.measured and int(step) <= self.measured[-1]:
            later = [m for m in self.measured if m >= int(step)]
            self._add_loss_to(later[0], loss)
            return
        self._loss_sum += loss
        self._loss_n += 1

    def _add_loss_to(self, m: int, loss: float) -> None:
        """Add one loss to measurement ``m``'s train_loss row (made if it has none)."""
        acc = self._loss_rows.get(m)
        if acc is None:
            acc = {"run": self.run, "step": m, "measure": "train_loss", "layer": "output", "layer_index": -1,
                   "position": "answer", "variant": "batch_average", "n_samples": 0, "value": 0.0,
                   "settings": {"definition": "mean of the training losses logged at steps in (previous "
                                              "measurement, this step]", "used_by_events": False}}
            self._loss_rows[m] = acc
            self.rows.append(acc)
        n = acc["n_samples"]
        acc["value"] = (acc["value"] * n + loss) / (n + 1)
        acc["n_samples"] = n + 1

    def step(self, model, step: int, loss: float | None = None) -> bool:
        """Call once before training (step 0) and after every update (step = updates done).
        Measures when the step is due; returns whether it measured."""
        if loss is not None:
            self.add_train_loss(loss, step)
        if not self.due(step):
            return False
        try:
            self.measure(model, step)
        except Exception as e:          # noqa: BLE001 (never into the user's loop unless strict)
            self._problem(f"measurement at step {step} failed ({type(e).__name__}: {e}); training goes on, "
                          f"this step is not in the table (Monitor(strict=True) raises instead)", e)
            return False
        return True

    # -------------------------------------------------------------- measuring
    def measure(self, model, step: int) -> list[dict]:
        """Measure now (whatever the schedule); returns the new rows."""
        c0, w0 = time.process_time(), time.perf_counter()
        if self._resumed_rows is not None and self._resumed_rows:
            self._replay([r for r in self._resumed_rows if r["step"] < step])
        self._resumed_rows = None
        rows = self._rows(model, int(step))
        self._check_finite(model, rows, int(step))
        self.rows += rows
        self.measured.append(int(step))
        self._track(rows, log=True)
        if self.out_dir is not None and self.flush_every > 0 and len(self.measured) % self.flush_every == 0:
            self._write_or_keep()
        self.cpu_seconds += time.process_time() - c0
        self.wall_seconds += time.perf_counter() - w0
        return rows

    @torch.no_grad()
    def _check_finite(self, model, rows: list[dict], step: int) -> None:
        """Non-finite weights or probe loss mark the run diverged (once, a warning): the
        report then says diverged and gives no final value, never the last finite one."""
        if self.diverged_step is not None:
            return
        what = []
        if any(not bool(torch.isfinite(p).all()) for p in model.parameters()):
            what.append("weights")
        # a RankMe row can be NaN by construction (a constant layer), the probe loss cannot
        if any(r["measure"] == "loss" and not math.isfinite(float(r["value"])) for r in rows):
            what.append("probe loss")
        if what:
            self._mark_diverged(step, " and ".join(what))

    def _mark_diverged(self, step: int, what: str) -> None:
        self.diverged_step = int(step)
        self._problem(f"{self.run} diverged at step {step}: non-finite {what}; the run is marked diverged and its"
                      " report gives no final value (the last finite one would not be the model's)")

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
        from ..measures import signals as sig
        idx_pos = next(((n, w) for n, (k, w) in p.positions.items() if k == "index"), None)
        heads_wanted = any("heads" in x.reads for x in self.signals) and idx_pos is not None
        try:
            if heads_wanted:
                with sig.capture_heads(model, idx_pos[1].to(device)) as heads:
                    logits, names, hidden = self.forward_fn(model, ids, am)
            else:
                heads = {}
                logits, names, hidden = self.forward_fn(model, ids, am)
        finally:
            model.train(was)
        d_now = int(hidden[0].shape[-1])
        if self._d is not None and d_now != self._d:
            raise ValueError(f"the hidden size changed from {self._d} to {d_now}: one monitor follows one model "
                             f"(a new model needs its own Monitor and out_dir)")
        self._d = d_now
        self.names = list(names)
        B = ids.shape[0]
        base = {"run": self.run, "step": step}
        rows = self._behaviour_rows(logits, ids, am, base)
        if self.train_probe is not None:
            rows += self._train_rows(model, device, base)
        if self._loss_n:
            row = {**base, "measure": "train_loss", "layer": "output", "layer_index": -1, "position": "answer",
                   "variant": "batch_average", "n_samples": self._loss_n, "value": self._loss_sum / self._loss_n,
                   "settings": {"definition": "mean of the training losses logged at steps in (previous "
                                              "measurement, this step]", "used_by_events": False}}
            self._loss_rows[step] = row
            rows.append(row)
            self._loss_sum, self._loss_n = 0.0, 0
        d = hidden[0].shape[-1]
        if B < d and not self._warned_cap:
            self._say(f"[monitor] {self.run}: probe of {B} rows < d_model {d}: RankMe is capped at {B}")
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
                rows += matrix_rows(Z, eps=self.eps, key={**base, "layer": name, "layer_index": li, "position": pos},
                                    settings={"eps": self.eps, "max_rank": min(B, d), "source": "monitor", **flag},
                                    share_settings=flag, quiet=True)               # the N < d cap, logged once
        if self.signals:
            rows += [{**base, **r} for r in self._signal_rows(model, step, logits, hidden, heads, idx_pos, ids)]
        return rows

    def _signal_rows(self, model, step, logits, hidden, heads, idx_pos, ids) -> list[dict]:
        from .rows import signal_rows
        if self._window is None and any("window" in x.reads for x in self.signals):
            from ..measures.signals import SignalWindow
            self._window = SignalWindow()
        return signal_rows(self.signals, self.probe, self._window, self.names, model, step, logits, hidden, heads,
                           idx_pos, ids)

    def _train_rows(self, model, device, base) -> list[dict]:
        """``train_accuracy`` (and ``train_accuracy_norm`` with a chance level) of the training
        probe, variant "train"."""
        from .rows import behaviour_rows
        tp = self.train_probe
        ids = tp.input_ids.to(device)
        am = None if tp.attention_mask is None else tp.attention_mask.to(device)
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                logits = self.forward_fn(model, ids, am)[0]
        finally:
            model.train(was)
        return [{**r, "measure": f"train_{r['measure']}", "variant": "train"}
                for r in behaviour_rows(tp, logits, ids, am, base) if r["measure"] in ("accuracy", "accuracy_norm")]

    def _behaviour_rows(self, logits, ids, am, base) -> list[dict]:
        from .rows import behaviour_rows
        return behaviour_rows(self.probe, logits, ids, am, base)

    def headline(self) -> tuple[str, str]:
        """(layer, position) whose events are logged (``events.layer``; "final" = the last layer)."""
        from ..sizes import canonical_layer
        names = self.names or []
        layer = canonical_layer(self.e["layer"])          # final_ln_post, layerK: ln_final, block{K-1}
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
                    st = r.get("settings") or {}
                    st = json.loads(st) if isinstance(st, str) else st
                    self.trackers[key] = OnlineCollapse(f"RankMe {key[0]}/{key[1]} ({key[2]})", self.e,
                                                        constant=bool(st.get("constant_by_construction")))
                new += self.trackers[key].update(r["step"], r["value"])
            elif r["measure"] == "accuracy_norm":
                if self.acq is None:
                    self.acq = OnlineAcquisition("accuracy_norm", self.e)
                new += self.acq.update(r["step"], r["value"])
            elif r["measure"] == "train_accuracy_norm":
                if self.fit is None:
                    self.fit = OnlineAcquisition("train_accuracy_norm", self.e)
                new += [{**rec, "event": "training set fitted"} for rec in self.fit.update(r["step"], r["value"])]
        for rec in new:
            if rec["event"] == "acquisition":
                rec["precursor"] = self._verdict(rec["step"])
                if self.fit is not None:
                    fit = self.fit.step_found
                    rec["detail"] += (f"; {rec['step'] - fit} steps after the training set was fitted (step {fit})"
                                      if fit is not None else "; the training set is not fitted yet")
            self.event_log.append(rec)
            if log:
                self._say(self.format(rec))

    def _verdict(self, t_acq: int) -> dict:
        layer, pos = self.headline()
        tr = self.trackers.get((layer, pos, self.e["variant"]))
        if tr is None:
            return {}
        st = tr.state()
        v = precursor_verdict(st, t_acq, self.e["transition"], self.e["precursor_min_gap_frac"])
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
                "train_acquisition_step": self.fit.step_found if self.fit else None,
                "log": list(self.event_log), "note": PROVISIONAL_NOTE}

    def _replay(self, rows: list[dict]) -> None:
        """Rebuild the table and the trackers from earlier rows (resume), without logging."""
        self.rows = list(rows)
        self._loss_rows = {int(r["step"]): r for r in self.rows if r["measure"] == "train_loss"}
        self.measured = sorted({int(r["step"]) for r in rows})
        for s in self.measured:
            step_rows = [r for r in rows if r["step"] == s]
            if self.names is None:
                geo = sorted({(r["layer_index"], r["layer"]) for r in step_rows if r["measure"] == "rankme"})
                self.names = [n for _, n in geo]
            self._track(step_rows, log=False)
        if self.measured:
            self._say(f"[monitor] {self.run}: resumed {len(self.measured)} measurements "
                     f"(steps {self.measured[0]}..{self.measured[-1]}) from {self.out_dir / 'metrics.csv'}")

    PROBE_RECORD = "monitor_probe.json"      # {"run", "probe_sha256"} beside the table

    def _refuse_existing(self) -> list[dict]:
        """A fresh monitor never writes over a table already in ``out_dir`` (another run's, or
        this run's rows before a resume point): refuse, naming it and the two ways on."""
        path = None if self.out_dir is None else self.out_dir / "metrics.csv"
        if path is not None and path.is_file():
            from ..table import read_table
            df = read_table(path)
            runs = sorted(set(df["run"].astype(str)))
            steps = sorted(set(int(x) for x in df["step"]))
            what = (f"already holds {len(df)} rows of run(s) {runs} (steps {steps[0]}..{steps[-1]})" if steps
                    else "already exists")
            raise ValueError(
                f"Monitor: {path} {what}; nothing was written over it. Give this monitor its own out_dir, or"
                " resume=True to continue"
                " that table (a Trainer resumed from a checkpoint needs resume=True)")
        return []

    def _probe_record(self) -> Path | None:
        return None if self.out_dir is None else self.out_dir / self.PROBE_RECORD

    def _load_existing(self) -> list[dict]:
        if self.out_dir is None or not (self.out_dir / "metrics.csv").is_file():
            return []
        rec = self._probe_record()
        if rec is not None and rec.is_file():
            import json
            want = json.loads(rec.read_text()).get("probe_sha256")
            if want and want != self.probe.sha256():
                raise ValueError(f"Monitor(resume=True): {self.out_dir / 'metrics.csv'} was measured on another probe"
                                 f" (sha256 {want[:12]}..., this probe's {self.probe.sha256()[:12]}...): one table,"
                                 " one probe (give the new probe its own out_dir)")
        from ..table import COLUMNS, read_table
        path = self.out_dir / "metrics.csv"
        df = read_table(path)
        runs = sorted(set(df["run"].astype(str)))
        if runs and runs != [self.run]:
            raise ValueError(f"Monitor(resume=True): {path} is the table of run(s) {runs}, not of {self.run!r}; "
                             f"give this run its own out_dir")
        n = sorted(set(int(x) for x in df.loc[df["measure"] == "rankme", "n_samples"]))
        if n and n != [len(self.probe)]:
            raise ValueError(f"Monitor(resume=True): {path} was measured on a probe of {n} rows, this probe has "
                             f"{len(self.probe)}: one table, one probe (give the new probe its own out_dir)")
        rows = []
        for rec in df[COLUMNS].to_dict("records"):
            rec["step"], rec["layer_index"], rec["n_samples"] = (int(rec["step"]), int(rec["layer_index"]),
                                                                int(rec["n_samples"]))
            rec["value"] = float(rec["value"])
            rows.append(rec)
        return rows

    # -------------------------------------------------------------- outputs
    def table(self):
        """The rows so far as the DataFrame ``table.read_table`` would return, with a ``hook``
        column: the TransformerLens hook of each row's layer (``sizes.transformer_lens_hook``;
        "" for rows that are not a residual-stream layer), as ``open_run(...).table`` gives."""
        import pandas as pd

        from ..sizes import transformer_lens_hook
        from ..table import to_csv
        df = pd.read_csv(io.StringIO(to_csv(self.rows)), keep_default_na=False, na_values=["NaN", "nan"],
                         dtype={"layer": str, "position": str, "variant": str, "checkpoint": str})
        df["hook"] = df["layer"].fillna("").astype(str).map(transformer_lens_hook)
        return df

    def write_table(self) -> Path | None:
        """Write ``out_dir/metrics.csv`` (atomically) now."""
        if self.out_dir is None:
            return None
        import json

        from ..files import atomic_write_text
        from ..table import write_table
        write_table(self.out_dir / "metrics.csv", self.rows)
        atomic_write_text(self._probe_record(), json.dumps({"run": self.run, "probe_sha256": self.probe.sha256()}))
        return self.out_dir / "metrics.csv"

    def _write_or_keep(self) -> bool:
        """Write the table; on failure keep the rows in memory, warn, and retry at close()."""
        try:
            self.write_table()
            return True
        except OSError as e:
            self._problem(f"could not write {self.out_dir / 'metrics.csv'} ({e}); the rows stay in memory and "
                          f"close() tries again", e)
            return False

    def overhead(self) -> dict:
        """Seconds spent in the monitor, CPU seconds of this process and wall seconds: the
        measurements (with their periodic table writes) plus ``close()`` (the final report,
        files and figure), each also given apart."""
        return {"measurements": len(self.measured),
                "cpu_seconds": round(self.cpu_seconds + self.close_cpu_seconds, 4),
                "wall_seconds": round(self.wall_seconds + self.close_wall_seconds, 4),
                "measure_wall_seconds": round(self.wall_seconds, 4),
                "close_wall_seconds": round(self.close_wall_seconds, 4)}

    @staticmethod
    def final_line(name: str, st: dict) -> str:
        """The closing log line of one tracked curve: only the events that happened."""
        if not st.get("collapsed"):
            return f"[monitor] final: RankMe {name}: no collapse (the curve did not fall by collapse_drop)"
        parts = [f"collapse at {st['collapse_step']}"]
        if st.get("floor_step") is not None:
            parts.append(f"floor at {st['floor_step']}")
        parts.append(f"recovery at {st['recovery_step']}" if st.get("recovery_step") is not None else "no recovery")
        status = {k: v for k, v in (st.get("status") or {}).items() if v}
        said = ", ".join(f"{k} {v}" for k, v in status.items())
        return f"[monitor] final: RankMe {name}: {', '.join(parts)} ({said})"

    def scalars(self) -> dict:
        """The latest measurement as flat scalars for a logger (Trainer, TensorBoard, W&B,
        MLflow): headline layer/position RankMe of both variants and its mean share, probe
        loss and accuracy, and the step of each headline event that has happened so far."""
        if not self.measured:
            return {}
        m = self.measured[-1]
        layer, pos = self.headline()
        out = {}
        for r in self.rows:
            if r["step"] != m:
                continue
            if r["measure"] in ("rankme", "mean_share") and r["layer"] == layer and r["position"] == pos:
                key = r["measure"] if r["measure"] == "mean_share" else f"rankme_{r['variant']}"
                out[f"geoanatomy/{key}"] = float(r["value"])
            elif r["measure"] in ("loss", "accuracy", "accuracy_norm") and r["layer"] == "output":
                out[f"geoanatomy/probe_{r['measure']}"] = float(r["value"])
        tr = self.trackers.get((layer, pos, self.e["variant"]))
        if tr is not None:
            st = tr.state()
            if st.get("collapsed"):
                for e in OnlineCollapse.KEYS:
                    if st.get(f"{e}_step") is not None:
                        out[f"geoanatomy/{e}_step"] = int(st[f"{e}_step"])
        if self.acq is not None and self.acq.step_found is not None:
            out["geoanatomy/acquisition_step"] = int(self.acq.step_found)
        if self.diverged_step is not None:
            out["geoanatomy/diverged_step"] = int(self.diverged_step)
        return out

    def report(self) -> dict:
        """The precursor.json dict of the rows so far (``precursor.record.report_record``)."""
        from ..precursor.record import report_record
        layer, pos = self.headline()
        final = {}
        for k, t in self.trackers.items():
            st = t.state()
            final[f"{k[0]}/{k[1]}/{k[2]}"] = {**{f"{e}_step": st.get(f"{e}_step") for e in OnlineCollapse.KEYS},
                                              "collapsed": st.get("collapsed"), "status": st["status"]}
        online = {"every": self.every, "measured_steps": list(self.measured), "track": self.track, "note":
                  PROVISIONAL_NOTE,
                  "log": list(self.event_log), "final": final, "overhead": self.overhead(),
                  "probe": {"rows": len(self.probe), "tokens": int(self.probe.input_ids.shape[1]),
                            "positions": list(self.probe.positions), "labels": self.probe.labels is not None,
                            "chance": self.probe.chance}}
        pre = report_record(self.table(), run=self.run, kind="monitor", n_params=self.n_params,
                           cfg_events=self.e, layer=layer, position=pos, eps=self.eps,
                           extra={"online": online, "diverged": self.diverged_step is not None,
                                  "diverged_step": self.diverged_step})
        if self.diverged_step is not None:       # no value after divergence is the model's
            for m in pre.get("measures", {}).values():
                if isinstance(m, dict) and "final" in m:
                    m["final"] = None
            for k in ("final_accuracy",):
                if k in pre:
                    pre[k] = None
        return pre

    def close(self, model=None, step: int | None = None) -> dict | None:
        """Measure ``step`` if it was not (with ``model``), log the final events of the tracked
        headline curves, write metrics.csv, precursor.json and trajectory.png to ``out_dir``;
        returns the precursor dict (None when nothing was measured). Its time is part of
        ``overhead()``."""
        c0, w0 = time.process_time(), time.perf_counter()
        mc0, mw0 = self.cpu_seconds, self.wall_seconds      # a final measurement counts as one
        try:
            return self._close(model, step)
        finally:
            self.close_cpu_seconds += time.process_time() - c0 - (self.cpu_seconds - mc0)
            self.close_wall_seconds += time.perf_counter() - w0 - (self.wall_seconds - mw0)

    def _close(self, model, step):
        if model is not None and step is not None and (not self.measured or self.measured[-1] < step):
            try:
                self.measure(model, step)
            except Exception as e:      # noqa: BLE001
                self._problem(f"the final measurement at step {step} failed ({type(e).__name__}: {e})", e)
        if not self.rows:
            return None
        c = time.process_time()
        pre = self.report()
        self.close_parts["report"] = time.process_time() - c
        for w in pre.get("warnings") or []:
            self._problem(w)
        for name, st in pre["online"]["final"].items():
            self._say(self.final_line(name, st))
        if self.out_dir is not None and self._write_or_keep():
            from ..precursor.seal import write_sealed
            from ..plots import plot_report
            try:
                c = time.process_time()
                pre = write_sealed(self.out_dir / "precursor.json", pre)
                self.close_parts["precursor_json"] = time.process_time() - c
                if self.figure:
                    c = time.process_time()
                    plot_report(self.table(), pre, self.out_dir / "trajectory.png")
                    self.close_parts["figure"] = time.process_time() - c
            except OSError as e:
                self._problem(f"could not write the report into {self.out_dir} ({e}); monitor.report() returns it", e)
        return pre

    # -------------------------------------------------------------- Hugging Face Trainer
    def trainer_callback(self, trainer=None):
        """A ``transformers.TrainerCallback`` running this monitor (``callback`` module doc);
        with ``trainer`` its scalars go through ``trainer.log`` to every reporter."""
        return trainer_callback(self, trainer)

    def attach(self, trainer, save_step_zero: bool = False):
        """Add this monitor's callback to a built ``transformers.Trainer`` (scalars and events
        reach ``log_history`` and every ``report_to`` integration, not the console); returns the
        callback. ``save_step_zero``: also save ``checkpoint-0`` before the first update, so a
        scan of the run's checkpoints sees the early collapse (``callback.step_zero_callback``)."""
        cb = trainer_callback(self, trainer)
        trainer.add_callback(cb)
        if save_step_zero:
            from .callback import step_zero_callback
            trainer.add_callback(step_zero_callback(trainer))
        return cb
