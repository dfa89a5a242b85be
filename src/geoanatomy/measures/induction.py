"""The prefix-matching score of every attention head (Olsson et al. 2022, "In-context learning
and induction heads"): how much attention a query puts on the token *after* an earlier
occurrence of its own token, the signature of an induction head. A head whose pattern at query
t is one-hot on such a position scores 1; a head attending uniformly over the t + 1 causal
positions scores (number of such positions) / (t + 1).

``attention_patterns`` recomputes each block's softmax(QK^T / sqrt(d_head)) from the input its
attention receives (a forward hook), whatever kernel the model runs (sdpa or math), so the
patterns are exactly the ones whose product with V the block adds to the residual stream
(tests/measures/test_induction.py checks that product against the block's own output).
"""
from __future__ import annotations

import math

import numpy as np
import torch


@torch.no_grad()
def attention_patterns(model, seq: torch.Tensor) -> list[torch.Tensor]:
    """Per block, the attention probabilities (B, H, T, T) of ``model`` on inputs ``seq`` (B, T)."""
    got: list[torch.Tensor] = []

    def hook(mod, args):
        x = args[0]
        B, T, C = x.shape
        q, k, _ = mod.c_attn(x).split(C, dim=2)
        hs = C // mod.n_head
        q = q.view(B, T, mod.n_head, hs).transpose(1, 2)
        k = k.view(B, T, mod.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mod.mask[:T, :T], float("-inf"))
        got.append(torch.softmax(att.double(), dim=-1))

    handles = [b.attn.register_forward_pre_hook(hook) for b in model.blocks]
    try:
        model(seq)
    finally:
        for h in handles:
            h.remove()
    return got


def prefix_targets(tokens: np.ndarray, query: int) -> np.ndarray:
    """(B, T) bool: for each row, the key positions s + 1 (s + 1 <= query) where token s equals
    the query's token and s < query: the positions an induction head at ``query`` attends to."""
    tokens = np.asarray(tokens)
    B, T = tokens.shape
    same = tokens[:, :query] == tokens[:, query:query + 1]               # (B, query): s < query
    out = np.zeros((B, T), dtype=bool)
    out[:, 1:query + 1] = same
    return out


def prefix_matching_score(patterns: list[torch.Tensor], tokens: np.ndarray, query: int) -> np.ndarray:
    """(n_layer, n_head) mean over rows with at least one target of the attention the ``query``
    position puts on its targets (``prefix_targets``); NaN when no row has a target."""
    tgt = torch.as_tensor(prefix_targets(tokens, query), dtype=torch.float64)   # (B, T)
    has = tgt.sum(1) > 0
    out = np.full((len(patterns), patterns[0].shape[1] if patterns else 0), np.nan)
    if not bool(has.any()):
        return out
    for li, att in enumerate(patterns):
        mass = (att[:, :, query, :].double() * tgt[:, None, :]).sum(-1)         # (B, H)
        out[li] = mass[has].mean(0).cpu().numpy()
    return out


def uniform_score(tokens: np.ndarray, query: int) -> float:
    """The score of a head attending uniformly over the causal positions: the chance level."""
    tgt = prefix_targets(tokens, query)
    has = tgt.sum(1) > 0
    return float((tgt.sum(1)[has] / (query + 1)).mean()) if has.any() else float("nan")
