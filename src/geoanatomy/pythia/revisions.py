"""The published Pythia revisions and the config's revision selection.

EleutherAI published every Pythia model at 154 git branches of its hub repository:
``step0``, ``step1``, ``step2``, ``step4``, ..., ``step512`` (powers of two), then
``step1000`` ... ``step143000`` every 1000 steps. ``main`` is ``step143000``.
Many of these branches hold byte-identical weights (step0 = step1 = step2 in every size,
EleutherAI/pythia#83, #198), so every loaded checkpoint is fingerprinted.

Selection (config ``pythia.revisions``):

* ``"all"``: hub models: the 154 published revisions; local directories: every
  ``stepN`` sub-folder present.
* ``{"stride": k, "keep_early": true}``: the early log-spaced revisions step0..step512
  (only step0 with ``keep_early: false``), every ``step{1000*j}`` with j divisible by k,
  and always the final ``step143000``.
* a list of revisions (``"step1000"`` or ``1000``): exactly those.

The result is always sorted by step and free of repeats.
"""
from __future__ import annotations

import re

FINAL_STEP = 143000
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


def stride_steps(stride: int, keep_early: bool = True) -> list[int]:
    """Published steps kept by ``{"stride": stride, "keep_early": keep_early}``."""
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    early = [s for s in published_steps() if s < 1000] if keep_early else [0]
    late = [s for s in range(1000, FINAL_STEP + 1, 1000) if (s // 1000) % stride == 0]
    return sorted(set(early + late + [FINAL_STEP]))


def select_steps(selection, available: list[int] | None = None) -> list[int]:
    """Steps chosen by a ``pythia.revisions`` value.

    ``available``: the steps that exist (local directory); None = the published list.
    Raises ValueError naming the missing revisions when a stride/list asks for ones that
    do not exist.
    """
    avail = published_steps() if available is None else sorted(set(available))
    if selection == "all":
        return list(avail)
    if isinstance(selection, dict):
        want = stride_steps(int(selection["stride"]), bool(selection.get("keep_early", True)))
    elif isinstance(selection, list):
        want = sorted({parse_revision(r) for r in selection})
    else:
        raise ValueError(f"expected 'all', {{stride: N}} or a list of revisions, got {selection!r}")
    have = set(avail)
    missing = [revision_name(s) for s in want if s not in have]
    if missing:
        where = "published Pythia revisions" if available is None else "available step folders"
        raise ValueError(f"not among the {where}: {missing[:8]}" + (" ..." if len(missing) > 8 else ""))
    return want
