"""Events of a Pythia run (one model x one benchmark): the algorithmic runs' detection.

Reads ``results/pythia_<name>/metrics.csv`` (duplicates already excluded), writes
``results/pythia_<name>/<benchmark>/precursor.json`` and ``trajectory.png``.

Same functions and thresholds (config ``events``) as the algorithmic runs:
acquisition = ``events.acquisition_step`` on ``accuracy_norm`` (chance-normalised
multiple-choice accuracy >= threshold for ``persist`` consecutive measured revisions);
collapse / floor / recovery = ``events.curve_entry`` (the configured detector) of RankMe at the last prompt token
(layer ``pythia.layer``, variant ``events.variant``); precursor and gaps =
``precursor.precursor_verdict`` (gaps in training steps); ``difficulty`` =
``precursor.difficulty``. Where a key of the algorithmic
precursor.json has no Pythia counterpart it is null and ``not_applicable`` says why:

* ``logprob_emergence_step``: first revision where ``logprob_choice`` (log P(correct |
  options)) exceeds chance, mean log(1/n_options), by ``events.logprob_margin`` for
  ``persist`` revisions (the counterpart of exceeding the input-blind predictor);
* ``loss_plateau_exit_step``: null (no training loss at the revisions);
* ``difficulty``: easy if acquired by ``easy_max_frac`` x the last selected step
  (143000 for the full hub list), hard if later, unlearned if never.

Fields for comparisons across benchmarks and sizes (``pythia.scale``), since raw values
differ between benchmarks by construction:

* ``final_accuracy_norm`` = (final accuracy - chance) / (1 - chance): chance ranges from
  1/2 (syntax) to 1/7 (deduction7), so raw accuracy ranks benchmarks by their option
  count in every model;
* ``measures.rankme.floor_norm`` = floor / max_rank, max_rank = min(N, d): RankMe at the
  last prompt token is capped by the number of items N (40, 50 or 60 here);
* ``measures.rankme.last_token_stratum``: "shared" when at least half of a benchmark's
  prompts end in the same token (arithmetic " =", icl " ->", the deduction sets
  "Answer:"), else "diverse". A shared last token lowers uncentred RankMe in every model
  alike, so benchmarks are compared within strata (``analysis.stats.spearman_within_strata``).

``fair_quantities`` is the helper ``pythia.scale`` uses.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .. import detectors as ev
from ..files import json_safe
from ..precursor import SCHEMA_VERSION, difficulty, easy_max_of_budget, headline_entry, layer_events
from ..table import select


def _curve(df, measure: str, **match):
    """(steps, values, rows) of one curve (the rows carry each point's settings)."""
    sub = select(df, measure, **match)
    return sub["step"].to_numpy(np.int64), sub["value"].to_numpy(np.float64), sub


SHARED_LAST_TOKEN = 0.5      # top last-token share at or above which a benchmark's stratum is "shared"


def _ratio(a, b):
    if a is None or b in (None, 0):
        return None
    a = float(a)
    return a / float(b) if math.isfinite(a) else None


def build_precursor(df, run: str, bench: str, extract: dict, dups: dict, e: dict) -> dict:
    """precursor.json dict for one model x benchmark; ``df`` = that run's rows only."""
    from ..errors import ConfigError

    p = e["persist"]
    steps, acc_norm, sub = _curve(df, "accuracy_norm")
    if len(steps) == 0:
        raise ValueError(f"{run}: no accuracy rows for benchmark {bench!r} in metrics.csv")
    chance = float(json.loads(sub["settings"].iloc[0])["chance"])
    _, acc, _ = _curve(df, "accuracy")
    t_acq = ev.acquisition_step(steps, acc_norm, e["acquisition_threshold"], p)
    s_lc, lc, sub_lc = _curve(df, "logprob_choice")
    chance_lc = float(json.loads(sub_lc["settings"].iloc[0])["chance"])
    t_lp = ev.emergence_step(s_lc, lc, chance_lc, e["logprob_margin"], p)

    rm = df[(df["measure"] == "rankme") & (df["position"] == "last_prompt") & (df["variant"] == e["variant"])]
    layers = list(dict.fromkeys(rm.sort_values("layer_index")["layer"]))
    if e["layer"] not in layers:
        raise ConfigError(f"config field 'pythia.layer': {e['layer']!r} is not a layer of {run}; "
                          f"layers: {layers}")

    def layer_facts(name, cev):                    # what the rows' settings say of each layer
        st = json.loads(select(rm, "rankme", layer=name)["settings"].iloc[0])
        return {"constant_by_construction": bool(st.get("constant_by_construction", False)),
                "max_rank": st.get("max_rank"), "floor_norm": _ratio(cev.get("floor"), st.get("max_rank"))}
    per_layer = layer_events(rm, e, "last_prompt", e["variant"], layer_facts)
    head = headline_entry(per_layer, e["layer"], t_acq, e)
    st_head = json.loads(rm[rm["layer"] == e["layer"]]["settings"].iloc[0])
    n_last = st_head.get("n_unique_last_tokens")
    top = st_head.get("top_last_token_share")
    head.update(n_unique_last_tokens=n_last, top_last_token_share=top,
                last_token_stratum=None if top is None else ("shared" if top >= SHARED_LAST_TOKEN else "diverse"))
    n_items = int(sub["n_samples"].iloc[0])
    total = int(extract["max_step"])
    out = {
        "schema_version": SCHEMA_VERSION, "kind": "pythia",
        "run": f"{run}_{bench}", "task": bench, "level": None, "size": extract["name"],
        "model_source": extract["source"], "benchmark": bench,
        "n_params": extract["model"]["n_params"], "steps": total,
        "n_checkpoints": int(len(steps)), "n_duplicates_excluded": int(dups["n_duplicates"]),
        "duplicates_excluded": [d["revision"] for d in dups["duplicates"]],
        "diverged": False, "acquired": t_acq is not None, "acquisition_step": t_acq,
        "logprob_emergence_step": t_lp, "loss_plateau_exit_step": None,
        "difficulty": difficulty(t_acq, easy_max_of_budget(total, e["easy_max_frac"])),
        "final_accuracy": float(acc[-1]), "max_accuracy": float(np.nanmax(acc)),
        "final_accuracy_norm": float((acc[-1] - chance) / (1 - chance)),
        "chance_accuracy": chance, "chance_logprob_choice": chance_lc,
        "scoring": e["scoring"],
        "eval": {"n_samples": n_items, "split": f"benchmark items ({bench})", "positions": {
            "last_prompt": "last prompt token (predicts the first option token)"}},
        "not_applicable": {"loss_plateau_exit_step": "no training loss is measured at Pythia revisions",
                           "marginal_logprob_per_token": "replaced by chance_logprob_choice"},
        "events_settings": dict(e),
        "measures": {"rankme": {"layer": e["layer"], "position": "last_prompt", "variant": e["variant"],
                                "n_samples": n_items, "eps": float(extract["rankme_eps"]), **head,
                                "per_layer": per_layer}},
    }
    return json_safe(out)


def run_events(run_dir: str | Path, benchmarks: list[str], e: dict, log=print) -> dict[str, dict]:
    """precursor.json + trajectory.png for every benchmark of one model."""
    from ..table import read_table
    from ..precursor.seal import write_sealed
    from .plot import plot_pythia_run

    run_dir = Path(run_dir)
    extract = json.loads((run_dir / "extract.json").read_text())
    dups = json.loads((run_dir / "duplicates.json").read_text())
    df = read_table(run_dir / "metrics.csv")
    run = extract["run"]
    out = {}
    for bench in benchmarks:
        sub = df[df["run"] == f"{run}_{bench}"]
        pre = build_precursor(sub, run, bench, extract, dups, e)
        pre = write_sealed(run_dir / bench / "precursor.json", pre)
        plot_pythia_run(sub, pre, run_dir / bench / "trajectory.png", [d["step"] for d in dups["duplicates"]])
        rm = pre["measures"]["rankme"]
        log(f"[pythia events] {pre['run']}: acquisition {pre['acquisition_step']}, final accuracy "
            f"{pre['final_accuracy']:.3f} (chance {pre['chance_accuracy']:.3f}), RankMe {rm['layer']} floor "
            f"{rm['floor']} @ {rm['floor_step']}, precursor {rm['precursor']}, gap {rm['gap_steps']}")
        out[bench] = pre
    return out


# ------------------------------------------------------------------ helpers for pythia.scale
FAIR_QUANTITIES = {  # name -> (path in precursor.json, stratify by last-token stratum, description)
    "rankme_floor_norm": (("measures", "rankme", "floor_norm"), True,
                          "RankMe floor / min(N, d) (headline layer, last prompt token), within last-token strata"),
    "rankme_floor_step": (("measures", "rankme", "floor_step"), True, "training step of the RankMe floor"),
    "acquisition_step": (("acquisition_step",), False,
                         "first step of sustained chance-normalised accuracy >= threshold"),
    "final_accuracy_norm": (("final_accuracy_norm",), False,
                            "(final accuracy - chance) / (1 - chance) at the last measured revision"),
}


def _get(d: dict, path: tuple):
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def fair_quantities(pre: dict) -> dict:
    """{quantity: value} of one precursor.json for cross-size comparison (FAIR_QUANTITIES),
    plus "stratum" (the last-token stratum of the headline RankMe). Older precursor files
    without the normalised fields get them computed from the raw ones where possible."""
    out = {q: _get(pre, path) for q, (path, _, _) in FAIR_QUANTITIES.items()}
    rm = _get(pre, ("measures", "rankme")) or {}
    if out["rankme_floor_norm"] is None:
        out["rankme_floor_norm"] = _ratio(rm.get("floor"), (rm.get("per_layer") or {}).get(rm.get("layer"), {})
                                          .get("max_rank") or rm.get("n_samples"))
    if out["final_accuracy_norm"] is None and pre.get("final_accuracy") is not None and pre.get("chance_accuracy"):
        c = float(pre["chance_accuracy"])
        out["final_accuracy_norm"] = (float(pre["final_accuracy"]) - c) / (1 - c)
    out["stratum"] = rm.get("last_token_stratum")
    return out
