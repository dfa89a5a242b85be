"""The published Pythia revisions and the config's revision selection.

EleutherAI published every Pythia model at 154 git branches of its hub repository:
``step0``, ``step1``, ``step2``, ``step4``, ..., ``step512`` (powers of two), then
``step1000`` ... ``step143000`` every 1000 steps. ``main`` is meant to be ``step143000``.
Many branches hold byte-identical weights (step0 = step1 = step2 in every size,
EleutherAI/pythia#83, #198; in pythia-2.8b 86 of 154 branches, step0 and the early grid
included, serve final-era weights, #195, #205), so duplicates are resolved by
``fingerprint.resolve`` before and after loading.

Selection (config ``pythia.revisions``, or a model's own ``revisions``):

* ``"all"`` or ``{"preset": "all"}``: hub models: the 154 published revisions; local
  directories: every ``stepN`` sub-folder present.
* ``{"stride": k, "keep_early": true}``: the early log-spaced revisions step0..step512
  (only step0 with ``keep_early: false``), every ``step{1000*j}`` with j divisible by k,
  and always the final ``step143000``.
* ``{"preset": "window"}``: the study's targeted window, 17 revisions evenly spaced from
  step50000 to step80000 and rounded to the published 1000-step grid (``window_steps``):
  50000, 52000, 54000, 56000, 58000, 59000, 61000, 63000, 65000, 67000, 69000, 71000,
  73000, 74000, 76000, 78000, 80000.
* ``{"preset": "spread72"}``: the study's 72 revisions over the whole run
  (``spread72_steps``): the 11 log-spaced early revisions step0, step1, step2, ...,
  step512, then 61 revisions evenly spaced from step1000 to step143000 on the 1000-step
  grid, ``1000 * round_half_up(1 + 142 * j / 60)`` for j = 0..60.
* a list of revisions (``"step1000"`` or ``1000``): exactly those.

Every dict form takes ``exclude: [revisions]`` (each must be among the selected ones).
The result is always sorted by step and free of repeats.
"""
from __future__ import annotations

import re
from fractions import Fraction
from math import floor

FINAL_STEP = 143000
MAIN = "main"
PRESETS = ("all", "window", "spread72")
WINDOW = (50000, 80000, 17)          # first step, last step, number of revisions
SPREAD_LATE = 61                     # spread72: revisions on the 1000-step grid (+ 11 early)
_REV = re.compile(r"^step(0|[1-9][0-9]*)$")


def published_steps() -> list[int]:
    """The 154 published training steps: 0, 1, 2, 4, ..., 512, 1000, 2000, ..., 143000."""
    return [0] + [2 ** i for i in range(10)] + list(range(1000, FINAL_STEP + 1, 1000))


def published_revisions() -> list[str]:
    """The 154 published revision names ("step0", "step1", ..., "step143000")."""
    return [f"step{s}" for s in published_steps()]


def parse_revision(rev) -> int:
    """'step1000' or 1000 -> 1000; anything else raises ValueError."""
    if isinstance(rev, bool):
        raise ValueError(f"not a revision: {rev!r}")
    if isinstance(rev, int):
        if rev < 0:
            raise ValueError(f"not a revision: {rev!r}")
        return rev
    m = _REV.match(str(rev))
    if not m:
        raise ValueError(f"not a revision: {rev!r} (expected 'stepN', e.g. 'step1000')")
    return int(m.group(1))


def revision_name(step: int) -> str:
    return f"step{int(step)}"


def _round_half_up(x: Fraction) -> int:
    return floor(x + Fraction(1, 2))


def stride_steps(stride: int, keep_early: bool = True) -> list[int]:
    """Published steps kept by ``{"stride": stride, "keep_early": keep_early}``."""
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    early = [s for s in published_steps() if s < 1000] if keep_early else [0]
    late = [s for s in range(1000, FINAL_STEP + 1, 1000) if (s // 1000) % stride == 0]
    return sorted(set(early + late + [FINAL_STEP]))


def window_steps(first: int = WINDOW[0], last: int = WINDOW[1], n: int = WINDOW[2]) -> list[int]:
    """n revisions evenly spaced from ``first`` to ``last`` (both kept), each rounded half up
    to the 1000-step grid: 1000 * round_half_up((first + (last - first) * i / (n - 1)) / 1000)."""
    out = [1000 * _round_half_up(Fraction(first, 1000) + Fraction(last - first, 1000) * Fraction(i, n - 1))
           for i in range(n)]
    if len(set(out)) != n:
        raise ValueError(f"window {first}..{last} is too narrow for {n} distinct revisions")
    return out


def spread72_steps() -> list[int]:
    """The 72-revision spread: step0, step1, ..., step512 (11, log-spaced), then
    1000 * round_half_up(1 + 142 * j / 60) for j = 0..60 (61, evenly from 1000 to 143000)."""
    early = [s for s in published_steps() if s < 1000]
    late = [1000 * _round_half_up(1 + Fraction(142 * j, SPREAD_LATE - 1)) for j in range(SPREAD_LATE)]
    out = early + late
    assert len(set(out)) == 72 and late[-1] == FINAL_STEP
    return out


def _wanted(selection, avail: list[int]) -> list[int]:
    if selection == "all":
        return list(avail)
    if isinstance(selection, list):
        return sorted({parse_revision(r) for r in selection})
    if isinstance(selection, dict):
        if "stride" in selection and "preset" in selection:
            raise ValueError("give either stride or preset, not both")
        if "stride" in selection:
            return stride_steps(int(selection["stride"]), bool(selection.get("keep_early", True)))
        preset = selection.get("preset")
        if preset == "all":
            return list(avail)
        if preset == "window":
            return window_steps()
        if preset == "spread72":
            return spread72_steps()
        raise ValueError(f"unknown preset {preset!r}; presets: {list(PRESETS)}")
    raise ValueError(f"expected 'all', {{stride: N}}, {{preset: {'|'.join(PRESETS)}}} or a list of revisions, "
                     f"got {selection!r}")


def select_steps(selection, available: list[int] | None = None) -> list[int]:
    """Steps chosen by a ``pythia.revisions`` value.

    ``available``: the steps that exist (local directory); None = the published list.
    Raises ValueError naming the missing revisions when a selection asks for ones that
    do not exist, and the excluded ones that are not selected.
    """
    avail = published_steps() if available is None else sorted(set(available))
    want = _wanted(selection, avail)
    have = set(avail)
    missing = [revision_name(s) for s in want if s not in have]
    if missing:
        where = "published Pythia revisions" if available is None else "available step folders"
        raise ValueError(f"not among the {where}: {missing[:8]}" + (" ..." if len(missing) > 8 else ""))
    if isinstance(selection, dict) and selection.get("exclude"):
        drop = {parse_revision(r) for r in selection["exclude"]}
        stray = sorted(drop - set(want))
        if stray:
            raise ValueError(f"exclude names revisions that are not selected: {[revision_name(s) for s in stray]}")
        want = [s for s in want if s not in drop]
    return sorted(set(want))
