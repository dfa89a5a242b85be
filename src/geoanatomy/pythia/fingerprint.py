"""Fingerprints of loaded checkpoints and duplicate revisions.

Many published Pythia revisions hold byte-identical weights: step0 = step1 = step2 in
every size (EleutherAI/pythia#83, #198), and 86 of 154 branches of pythia-2.8b are
copies (#195, #205). Each loaded checkpoint gets

    sha256( for name in sorted(parameter names):
                name, 0x00, dtype, shape, 0x00, raw little-endian bytes )

over the parameters as loaded (``pythia.dtype``; float16 hub weights loaded in float32
convert exactly, so equal files give equal hashes). A revision whose hash equals an
earlier revision's (smaller step) is a duplicate of the earliest one with that hash.
"""
from __future__ import annotations

import hashlib


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


def duplicates(fingerprints: list[tuple[str, str]]) -> dict[str, str]:
    """[(revision, sha256)] in step order -> {duplicate revision: earliest identical revision}."""
    first: dict[str, str] = {}
    out = {}
    for rev, sha in fingerprints:
        if sha in first:
            out[rev] = first[sha]
        else:
            first[sha] = rev
    return out
