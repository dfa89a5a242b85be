"""Fingerprints of Pythia revisions and which revision a weight set is measured as.

Two fingerprints, one rule.

* **Before downloading** (hub ids, where the hub answers): the LFS sha256 of each
  revision's weight files as the hub lists them (``hf.hub.hub_weight_hashes``), folded
  into one hash per revision by ``hf.hub.files_fingerprint``::

      sha256( for path in sorted(weight files): path, 0x00, lfs sha256, 0x0A )

  Weight files are the ``*.safetensors`` files when every listed revision has them, else
  the ``pytorch_model*.bin`` files when every revision has those (``common_format``: like
  is compared with like); in a mixed repository, per revision what transformers loads
  (safetensors where present).
* **After loading** (every source): ``weights_sha256`` over the parameters as loaded::

      sha256( for name in sorted(parameter names):
                  name, 0x00, dtype, shape, 0x00, raw little-endian bytes )

  It catches what file hashes cannot (the same weights saved as .bin in one revision and
  .safetensors in another; local directories; no hub metadata offline).

The rule (``resolve``): the published branch names are not trustworthy labels. In
pythia-2.8b (EleutherAI/pythia#205) main's weights appear under 76 branches (step0, the
whole early grid, step1000..step53000 and later round steps) and a second weight set
under step54000..step64000 and step143000; step0 = step1 = step2 in every size (#83,
#198). A weight set is therefore measured as the *latest* revision holding it, and
main's weight set as ``step143000`` (main is the final checkpoint):

* weights equal to main's: measured as ``step143000`` if that branch holds them, else not
  measured at all (holder ``main``); every other revision holding them is a duplicate;
* otherwise: the latest (largest-step) revision holding them is measured, every earlier
  one is a duplicate of it;
* step0 holding main's (or step143000's) weights is not an initialisation: the run stops
  (``Step0IsTrained``) instead of measuring trained weights as step 0.

A revision whose weights equal a later revision's (or main's) is never measured as its own
step. The latest holder may be a revision the selection does not include: its weights
are then not measured at all (recorded in duplicates.json).
"""
from __future__ import annotations

import hashlib
from collections import defaultdict

from ..config.pythia_revisions import FINAL_STEP, MAIN, parse_revision, revision_name

FINAL = revision_name(FINAL_STEP)


class Step0IsTrained(RuntimeError):
    """step0 of a repository holds the final checkpoint's weights."""


def weights_sha256(model) -> str:
    """sha256 hex digest of a module's parameters (see module doc)."""
    import torch
    h = hashlib.sha256()
    params = dict(model.named_parameters(remove_duplicate=False))
    for name in sorted(params):
        t = params[name].detach().contiguous().cpu()
        h.update(name.encode())
        h.update(b"\0" + str(t.dtype).encode() + str(tuple(t.shape)).encode() + b"\0")
        h.update(t.reshape(-1).view(torch.uint8).numpy())      # raw bytes, no copy
    return h.hexdigest()


def resolve(hashes: dict[str, str | None]) -> dict[str, str]:
    """{revision: holder} for every step revision in ``hashes`` ({revision or "main": hash}).

    holder = the revision itself (measured as its own step), a later revision with the same
    weights, or "main" (main's weights, which step143000 does not hold: not measured).
    Revisions with an unknown hash (None) are their own holders."""
    main = hashes.get(MAIN)
    groups: dict[str, list[str]] = defaultdict(list)
    out = {}
    for rev, h in hashes.items():
        if rev == MAIN:
            continue
        if h is None:
            out[rev] = rev
        else:
            groups[h].append(rev)
    for h, revs in groups.items():
        revs.sort(key=parse_revision)
        if main is not None and h == main:
            holder = FINAL if FINAL in revs else MAIN
        else:
            holder = revs[-1]
        for r in revs:
            out[r] = holder
    return out


def duplicates(fingerprints: list[tuple[str, str]] | dict[str, str | None]) -> dict[str, str]:
    """{duplicate revision: the revision (or "main") its weights are measured as}."""
    hashes = dict(fingerprints)
    return {r: h for r, h in resolve(hashes).items() if h != r}


def final_conflict(hashes: dict[str, str | None]) -> str | None:
    """A warning when main and step143000 are both known and hold different weights."""
    m, f = hashes.get(MAIN), hashes.get(FINAL)
    if m is not None and f is not None and m != f:
        n = sum(1 for r, h in hashes.items() if r != MAIN and h == m)
        return (f"main's weights differ from step143000's: step143000 is measured as step 143000 and main's "
                f"weight set (held by {n} step branches) is not measured as any step")
    return None


def check_step0(hashes: dict[str, str | None], source: str, how: str) -> None:
    """Raise Step0IsTrained when step0's hash equals main's or step143000's."""
    s0 = hashes.get("step0")
    if s0 is None:
        return
    same = [r for r in (MAIN, FINAL) if hashes.get(r) is not None and hashes[r] == s0]
    if same:
        raise Step0IsTrained(
            f"{source}: step0 holds the same weights as {' and '.join(same)} ({how}); it is not an initialisation, "
            f"and measuring it as step 0 would put trained weights at the start of every curve "
            f"(EleutherAI/pythia#205 reports this for pythia-2.8b). Leave step0 out of the selection, e.g. "
            f"pythia.revisions: {{preset: all, exclude: [step0]}} or a model's own "
            f"{{source: {source}, revisions: {{preset: spread72, exclude: [step0]}}}}")
