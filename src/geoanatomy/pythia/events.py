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
from pathlib import Path

from ..precursor.record import SHARED_LAST_TOKEN, pythia_record, safe_ratio  # noqa: F401 (the stratum's threshold)


def run_events(run_dir: str | Path, benchmarks: list[str], e: dict, log=print) -> dict[str, dict]:
    """precursor.json + trajectory.png for every benchmark of one model."""
    from ..table import read_table
    from ..precursor.seal import write_sealed
    from ..plots import plot_pythia_run

    run_dir = Path(run_dir)
    extract = json.loads((run_dir / "extract.json").read_text())
    dups = json.loads((run_dir / "duplicates.json").read_text())
    df = read_table(run_dir / "metrics.csv")
    run = extract["run"]
    out = {}
    for bench in benchmarks:
        sub = df[df["run"] == f"{run}_{bench}"]
        pre = pythia_record(sub, run, bench, extract, dups, e)
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
        out["rankme_floor_norm"] = safe_ratio(rm.get("floor"), (rm.get("per_layer") or {}).get(rm.get("layer"), {})
                                          .get("max_rank") or rm.get("n_samples"))
    if out["final_accuracy_norm"] is None and pre.get("final_accuracy") is not None and pre.get("chance_accuracy"):
        c = float(pre["chance_accuracy"])
        out["final_accuracy_norm"] = (float(pre["final_accuracy"]) - c) / (1 - c)
    out["stratum"] = rm.get("last_token_stratum")
    return out
