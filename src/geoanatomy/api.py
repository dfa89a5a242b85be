"""Results as Python objects, for a notebook: ``open_run`` and ``open_summary``.

    import geoanatomy
    run = geoanatomy.open_run("results/mod_L3_nano")
    run.events.acquisition_step, run.events.curves["rankme_centred"].floor_step
    run.metrics                       # metrics.csv as a DataFrame, checked against its manifest
    run.curve("rankme", layer="ln_final", position="first", variant="centred")
    model = run.model(run.steps[-1])  # the project's GPT at that checkpoint (hf=True: GPT-2)
    batch = run.eval_batch()          # the evaluation inputs and the positions the tables read
    geoanatomy.events_table("results")   # every run's events, one row per run and curve
    summary = geoanatomy.open_summary("results/summary")
    summary.verdict, summary.benchmark

Read-only: every file is read through the checks the stages use (a table against its manifest
and, for per-run tables, every row's checkpoint hash against train.json; precursor.json and
train.json against their seals; a checkpoint's weights against the hash train.json records), so
what a notebook shows is what the workflow wrote, and a refusal carries the stage's message.
The worked example: docs/python-api.md (run by tests/test_api.py).
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

RUN_TABLES = ("metrics", "measures", "probes")
NAMES = {"down": ("collapse", "floor", "recovery"), "up": ("rise", "peak", "settle")}


@dataclass(frozen=True)
class CurveEvents:
    """The events of one curve of a run (precursor.json's ``measures`` entry): onset, extreme
    and return steps under the matched detector (None: the curve did not get there)."""
    name: str
    layer: str
    position: str
    variant: str
    direction: str               # "down" (a collapse: onset = collapse, extreme = floor) or "up" (a rise)
    changed: bool
    onset_step: int | None
    extreme_step: int | None
    return_step: int | None
    precursor: bool | None
    raw: dict = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_entry(cls, name: str, e: dict) -> "CurveEvents":
        d = "down" if e.get("direction", "collapse") == "collapse" else "up"
        on, ex, ret = NAMES[d]
        return cls(name, str(e.get("layer")), str(e.get("position")), str(e.get("variant")), d,
                   bool(e.get("collapsed" if d == "down" else "risen")), e.get(f"{on}_step"), e.get(f"{ex}_step"),
                   e.get(f"{ret}_step"), e.get("precursor"), e)

    @property
    def floor_step(self) -> int | None:
        return self.extreme_step


@dataclass(frozen=True)
class Events:
    """A run's events (precursor.json): behaviour, the loss curve's, and every curve's."""
    acquired: bool
    acquisition_step: int | None
    difficulty: str
    loss_onset_step: int | None
    loss_half_step: int | None
    loss_extreme_step: int | None
    curves: dict
    settings: dict = field(repr=False)


@dataclass(frozen=True)
class EvalBatch:
    """The evaluation set a run's tables were measured on (``Run.eval_batch``): the same
    sequences, in the same order, that the metrics stage feeds the model at every checkpoint.

    ``sequences`` (N, S) int64: prompt and answer tokens; the model reads ``inputs`` =
    sequences[:, :-1] (teacher forcing). ``first``: the input position whose hidden state
    predicts the first answer token (the tables' position ``first``, the ``=``);
    ``answer_positions``: the positions that predict answer tokens (``answer_mean`` averages
    the hidden states over them; ``first`` is the first of them); ``n_answer`` answer tokens."""
    sequences: object
    first: int
    n_answer: int
    run: str
    n_samples: int

    @property
    def inputs(self):
        return self.sequences[:, :-1]

    @property
    def answer_positions(self) -> list[int]:
        return list(range(self.first, self.first + self.n_answer))

    @property
    def answers(self):
        """(N, n_answer) the answer tokens the positions predict."""
        return self.sequences[:, -self.n_answer:]


def events_of(p: dict) -> Events:
    """The ``Events`` of a parsed precursor.json."""
    le = p.get("loss_events") or {}
    return Events(bool(p["acquired"]), p.get("acquisition_step"), p["difficulty"], le.get("onset_step"),
                  le.get("half_step"), le.get("extreme_step"),
                  {k: CurveEvents.from_entry(k, v) for k, v in p["measures"].items()}, p["events_settings"])


class Run:
    """One run folder written by the workflow (module doc). Opened by ``open_run``."""

    def __init__(self, path):
        from .files import read_json
        from .precursor.seal import sealed_problem
        from .errors import CheckpointError
        self.path = Path(path)
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such run folder (results/<task>_<level>_<size>)")
        tj = self.path / "train.json"
        self.train = read_json(tj, CheckpointError, ": not a trained run folder (no train.json)", "")
        if why := sealed_problem(self.train):     # a stripped seal is refused like a broken one
            raise CheckpointError(f"{tj}: {why}; recompute the run")
        self.name = str(self.train.get("run", self.path.name))

    def __repr__(self) -> str:
        e = self.events if (self.path / "precursor.json").exists() else None
        acq = "" if e is None else f", acquisition {e.acquisition_step}"
        return f"Run({self.name!r}, {len(self.steps)} checkpoints{acq})"

    @property
    def steps(self) -> list[int]:
        """The checkpoint steps train.json records."""
        return [int(s) for s in self.train.get("checkpoint_steps", [])]

    @cached_property
    def precursor(self) -> dict:
        """precursor.json, strictly parsed, its seal and fields checked."""
        from .analysis.load import load_precursor
        return load_precursor(self.path / "precursor.json")

    @cached_property
    def events(self) -> Events:
        return events_of(self.precursor)

    def table(self, name: str):
        """A per-run table (metrics, measures, probes) as a DataFrame, read through its manifest
        and the checkpoint hashes train.json records, with a ``hook`` column: the TransformerLens
        hook name of the row's layer (``sizes.transformer_lens_hook``); example_losses,
        signal_curves and llc_traces (the LLC's SGLD chains) as plain DataFrames."""
        if name in RUN_TABLES:
            from .sizes import transformer_lens_hook
            from .table import read_table
            df = read_table(self.path / f"{name}.csv", checkpoints=self.train.get("checkpoint_sha256") or {})
            # the TransformerLens hook of each row's layer (sizes.transformer_lens_hook): joins a cache
            df["hook"] = df["layer"].fillna("").astype(str).map(transformer_lens_hook)
            return df
        if name in ("example_losses", "signal_curves", "llc_traces"):
            from .analysis.tables import read_table as read_checked_table
            p = self.path / f"{name}.csv"
            if not p.is_file():
                raise FileNotFoundError(f"{p}: not written (runs made before the precursor benchmark have none)")
            return read_checked_table(p)
        raise ValueError(f"unknown table {name!r}; a run has "
                         f"{list(RUN_TABLES) + ['example_losses', 'signal_curves', 'llc_traces']}")

    metrics = property(lambda self: self.table("metrics"))
    measures = property(lambda self: self.table("measures"))
    probes = property(lambda self: self.table("probes"))

    def curve(self, measure: str, layer: str | None = None, position: str | None = None, variant: str | None = None,
              table: str = "metrics"):
        """(steps, values) of one curve of a table (a filter left None must be unique)."""
        df = self.table(table)
        if measure not in set(df["measure"]):
            known = sorted(set(df["measure"]))
            near = difflib.get_close_matches(measure, known, n=1)
            raise ValueError(f"unknown measure {measure!r} in {table}.csv" + (f" (did you mean {near[0]!r}?)" if near
                                                                            else "") + f"; its measures: {known}")
        sel = df[df["measure"] == measure]
        for col, v in (("layer", layer), ("position", position), ("variant", variant)):
            if v is not None:
                sel = sel[sel[col].fillna("").astype(str) == v]
        keys = sel[["layer", "position", "variant"]].fillna("").drop_duplicates()
        if len(keys) != 1:
            raise ValueError(f"{measure}: {len(keys)} curves match; give layer/position/variant "
                             f"(e.g. {keys.head(3).to_dict('records')})")
        sel = sel.sort_values("step")
        return sel["step"].to_numpy(), sel["value"].to_numpy(float)

    def eval_batch(self, n_samples: int | None = None) -> EvalBatch:
        """The evaluation inputs of this run and the positions its tables read (``EvalBatch``),
        rebuilt from train.json's settings by the metrics stage's own code. ``n_samples``: the
        set's size, by default the one metrics.csv records (its RankMe rows' ``n_samples``), else
        the default eval.n_samples; a smaller n gives the first n examples of the same set."""
        from .stages.common import spec_from_record, task_data
        spec = spec_from_record(self.train)
        if n_samples is None:
            n_samples = self._recorded_n_samples()
        data = task_data(spec)
        seq = data.eval_set(int(n_samples))
        na = int(data.spec.n_answer)
        return EvalBatch(seq, int(seq.shape[1] - 1 - na), na, self.name, int(n_samples))

    def _recorded_n_samples(self) -> int:
        from .defaults import DEFAULTS
        p = self.path / "metrics.csv"
        if p.is_file():
            m = self.metrics
            r = m[(m["measure"] == "rankme") & m["n_samples"].notna()]
            if len(r):
                return int(r["n_samples"].iloc[0])
        return int(DEFAULTS["eval"]["n_samples"])

    def model(self, step: int, hf: bool = False, device: str = "cpu"):
        """The model at checkpoint ``step``: the project's GPT (weights checked against the hash
        train.json records) or, with ``hf=True``, the same weights as a transformers GPT-2."""
        from .checkpoints import checkpoint_dir, ckpt_path, load_weights, pruned_record
        from .errors import CheckpointError
        from .model import GPT, ModelConfig
        if isinstance(step, bool) or not float(step).is_integer():     # 7.9 once loaded step 7
            raise ValueError(f"{self.name}: step must be a whole number, got {step!r}")
        if int(step) not in self.steps:
            raise CheckpointError(f"{self.name}: no checkpoint at step {step}; its steps: {self.steps[:6]} ... "
                                  f"{self.steps[-1] if self.steps else ''}")
        path = ckpt_path(checkpoint_dir(self.path), int(step))
        if not path.is_file():
            why = "removed after its stages finished (keep_checkpoints: final)" if pruned_record(self.path).exists() \
                else "missing"
            raise CheckpointError(f"{path}: {why}")
        from .checkpoints import read_meta
        meta = read_meta(path)
        want = (self.train.get("checkpoint_sha256") or {}).get(str(step))
        if want and not str(meta["_sha256"]).startswith(want[:16]):
            raise CheckpointError(f"{path}: its weights' hash {meta['_sha256'][:16]} is not the one train.json "
                                  f"records ({want[:16]}); not this run's checkpoint")
        cfg = ModelConfig(**json.loads(meta["model_config"]))
        model = GPT(cfg)
        load_weights(path, model)
        model.eval()
        if not hf:
            return model.to(device)
        import transformers
        from .export import gpt2_config, gpt2_state_dict
        m = transformers.GPT2LMHeadModel(gpt2_config(model))
        sd = gpt2_state_dict(model)                 # every key, the tied head too: strict
        m.load_state_dict({**sd, "lm_head.weight": sd["transformer.wte.weight"]}, strict=True)
        m.tie_weights()
        return m.eval().to(device)


class Summary:
    """A summary folder (results/summary/): its tables read through their manifests."""

    def __init__(self, path):
        self.path = Path(path)
        if not (self.path / "verdict.csv").is_file():
            raise FileNotFoundError(f"{self.path}: no verdict.csv (run the summary first: snakemake, or "
                                    f"geoanatomy summarize all --results RESULTS)")

    def __repr__(self) -> str:
        return f"Summary({str(self.path)!r}: {', '.join(self.tables)})"

    @property
    def tables(self) -> list[str]:
        return sorted(p.stem for p in self.path.glob("*.csv"))

    def table(self, name: str):
        from .analysis.tables import read_table
        p = self.path / f"{name}.csv"
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such table; this summary has {self.tables}")
        return read_table(p)

    verdict = property(lambda self: self.table("verdict"))
    benchmark = property(lambda self: self.table("precursor_benchmark"))
    power = property(lambda self: self.table("verdict_power"))


EVENT_COLUMNS = ["run", "task", "level", "size", "seed", "control", "difficulty", "acquired", "acquisition_step",
                 "loss_onset_step", "loss_half_step", "loss_extreme_step", "curve", "layer", "position", "variant",
                 "direction", "changed", "onset_step", "extreme_step", "return_step", "precursor"]


def events_table(results):
    """Every run's events as one DataFrame: one row per run (a folder of ``results`` with a
    precursor.json, each read through its seal) and curve (precursor.json's ``measures``
    entries: RankMe of both variants, the expensive measures, the benchmark signals; probes
    left out), with the run's behavioural and loss-curve events on every row (columns
    ``EVENT_COLUMNS``; onset / extreme / return are collapse / floor / recovery for a curve
    that falls, rise / peak / settle for one that rises). The same numbers as
    ``open_run(folder).events``; for the cross-run tables the verdict reads, see
    results/summary/transitions.csv."""
    import pandas as pd
    root = Path(results)
    paths = sorted(root.glob("*/precursor.json")) + sorted(root.glob("*/*/precursor.json"))
    if not paths:
        raise FileNotFoundError(f"{root}: no run folder with a precursor.json (run the events stage first)")
    from .analysis.load import load_precursor
    rows = []
    for p in paths:
        pre = load_precursor(p)           # its seal and fields checked
        ev = events_of(pre)
        head = {"run": pre["run"], "task": pre["task"], "level": pre["level"], "size": pre["size"],
                "seed": pre.get("seed", 0), "control": pre.get("control") or "", "difficulty": ev.difficulty,
                "acquired": ev.acquired, "acquisition_step": ev.acquisition_step,
                "loss_onset_step": ev.loss_onset_step, "loss_half_step": ev.loss_half_step,
                "loss_extreme_step": ev.loss_extreme_step}
        for name, c in ev.curves.items():
            if name == "probes" or not isinstance(c.raw, dict) or "direction" not in c.raw:
                continue
            rows.append({**head, "curve": name, "layer": c.layer, "position": c.position, "variant": c.variant,
                         "direction": c.direction, "changed": c.changed, "onset_step": c.onset_step,
                         "extreme_step": c.extreme_step, "return_step": c.return_step, "precursor": c.precursor})
    df = pd.DataFrame(rows, columns=EVENT_COLUMNS)
    for c in ("acquisition_step", "loss_onset_step", "loss_half_step", "loss_extreme_step", "onset_step",
              "extreme_step", "return_step"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    return df


def open_run(path) -> Run:
    """A run folder as a ``Run`` (module doc)."""
    return Run(path)


def open_summary(path) -> Summary:
    """A summary folder as a ``Summary`` (module doc)."""
    return Summary(path)
