"""RankMe's sample-size (N) sensitivity on a trained run: its RankMe curves at several N (each
a prefix of the held-out pool, cut to the pool), and a check of the N = eval.n_samples curve
against the run's metrics.csv. The tool ``tools/rankme_sample_size.py`` prints the table over
runs; this module is what it and its test call.
"""
from __future__ import annotations

import warnings
from pathlib import Path

VARIANTS = (("uncentred", False), ("centred", True))
LAYER, POSITION = "ln_final", "first"


def run_curves(spec, run_dir: Path, n_list: list[int]) -> dict:
    """RankMe curves of one run at every checkpoint for each N (module doc)."""
    import numpy as np
    import torch

    from ..checkpoints import iter_checkpoints
    from ..measures.rankme import rankme
    from .common import checkpoint_identity, open_run, training_dir

    model, data, ckdir, steps, device = open_run(spec, training_dir(spec, run_dir), "cpu")
    pool = int(data.heldout.shape[0])
    used = [min(n, pool) for n in n_list]
    n_max = max(used)
    seq = torch.as_tensor(data.eval_set(n_max))                                 # (n_max, S)
    first = seq.shape[1] - 1 - data.spec.n_answer                               # predicts answer token 1
    x = seq[:, :first + 1]                                                      # causal: later tokens unused
    li = model.layer_names().index(LAYER)
    eps = float(spec.eval["rankme_eps"])
    distinct = [int(np.unique(data.heldout_inputs[:n], axis=0).shape[0]) for n in used]
    values = {v: {n: [] for n in used} for v, _ in VARIANTS}
    model.eval()
    for _ in iter_checkpoints(ckdir, model, steps, checkpoint_identity(spec)):
        with torch.no_grad():
            _, hidden = model(x, return_hidden=True)
        Z = hidden[li][:, first, :]                                             # (n_max, d)
        with warnings.catch_warnings():                                         # the N < d cap is the point here
            warnings.simplefilter("ignore")
            for variant, centred in VARIANTS:
                for n in used:
                    values[variant][n].append(rankme(Z[:n], centred=centred, eps=eps))
    return {"steps": [int(s) for s in steps], "width": int(model.cfg.d_model), "pool": pool,
            "n_requested": n_list, "n_used": used, "distinct_inputs": distinct, "values": values}


def metrics_check(run_dir: Path, curves: dict, n_eval: int, cfg_events: dict) -> dict | None:
    """The N = n_eval curves against the run's metrics.csv: largest |ours - metrics.csv| over
    checkpoints and variants, and whether floor, floor step and collapse step (floor to 1e-3)
    agree (None: no metrics.csv, or n_eval not among the N)."""
    import numpy as np

    from ..detectors import curve_entry
    from ..table import curve, read_table
    path = run_dir / "metrics.csv"
    if n_eval not in curves["n_used"] or not path.exists():
        return None
    df = read_table(path)
    worst, same = 0.0, True
    for variant, _ in VARIANTS:
        s, v = curve(df, "rankme", layer=LAYER, position=POSITION, variant=variant)
        ours = curves["values"][variant][n_eval]
        if list(s) != curves["steps"]:
            raise SystemExit(f"{path}: its steps differ from the checkpoints")
        worst = max(worst, float(np.nanmax(np.abs(v - np.asarray(ours)))))
        a, b = (curve_entry(s, x, "down", cfg_events) for x in (v, ours))
        same &= (a["floor_step"], a["collapse_step"]) == (b["floor_step"], b["collapse_step"])
        same &= abs(a["floor"] - b["floor"]) < 1e-3
    return {"max_abs_diff": worst, "events_agree": bool(same)}
