"""The geometry rows of one representation matrix, the same for every writer of a table
(metrics stage, Pythia extraction and checkpoint scan, monitor).

For Z (N, d), the rows of one layer at one position, in this order::

    rankme      variant "uncentred"   RankMe of Z as defined (measures.rankme)
    rankme      variant "centred"     RankMe of Z minus its column means
    mean_share  variant ""            ||mean row||^2 / mean ||row||^2 of Z

``n_samples`` = N. The RankMe rows carry ``settings`` (the writer's: eps, max_rank, ...);
the mean-share row carries its definition and ``share_settings`` (by default the RankMe
settings without eps).
"""
from __future__ import annotations

import contextlib
import warnings

from .rankme import mean_share, rankme

SHARE_DEFINITION = "||mean row||^2 / mean ||row||^2"
VARIANTS = (("uncentred", False), ("centred", True))


def matrix_rows(Z, *, eps: float, key: dict, settings: dict, share_settings: dict | None = None,
                quiet: bool = False) -> list[dict]:
    """The three rows of Z (N, d) (module doc). ``key``: the row's identifying columns
    (run, step, layer, layer_index, position: those the writer fills at this point).
    ``quiet``: no warning for N < d (the writer reports the cap itself)."""
    base = {**key, "n_samples": int(Z.shape[0])}
    if share_settings is None:
        share_settings = {k: v for k, v in settings.items() if k != "eps"}
    with warnings.catch_warnings() if quiet else contextlib.nullcontext():
        if quiet:
            warnings.simplefilter("ignore")
        rows = [{**base, "measure": "rankme", "variant": variant, "value": rankme(Z, centred=centred, eps=eps),
                 "settings": dict(settings)} for variant, centred in VARIANTS]
    rows.append({**base, "measure": "mean_share", "variant": "", "value": mean_share(Z),
                 "settings": {"definition": SHARE_DEFINITION, **share_settings}})
    return rows
