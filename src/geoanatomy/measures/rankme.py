"""RankMe (Garrido et al., ICML 2023) and the effective rank of Roy & Vetterli (2007).

For a representation matrix Z (N samples x d features) with singular values
s_1..s_r (r = min(N, d))::

    p_k    = s_k / sum_j s_j + eps          (eps = 1e-7, RankMe's definition)
    RankMe = exp(-sum_k p_k log p_k)

The effective rank is the same with eps = 0 (and 0 log 0 = 0). Both lie in
[1, min(N, d)] (up to eps); with N < d the value is capped by N, so a warning
is raised. Z is *not* centred in RankMe's definition; ``centred=True``
subtracts the column means first (the "centred" variant some libraries use,
which differs most at collapse floors). Every number in this project's tables
carries its variant label ("uncentred" / "centred").
"""
from __future__ import annotations

import math
import warnings

import torch


def _spectrum(Z: torch.Tensor, centred: bool) -> torch.Tensor:
    """Singular values (r,) of Z (N, d), computed in float64."""
    if Z.ndim != 2:
        raise ValueError(f"expected a 2-D matrix (N, d), got shape {tuple(Z.shape)}")
    Z = Z.detach().to(torch.float64)
    if centred:
        Z = Z - Z.mean(dim=0, keepdim=True)
    if Z.shape[0] < Z.shape[1]:
        warnings.warn(f"RankMe on N={Z.shape[0]} < d={Z.shape[1]} samples: the value is capped at N",
                      stacklevel=3)
    return torch.linalg.svdvals(Z)


def _entropy_rank(s: torch.Tensor, eps: float) -> float:
    total = s.sum()
    if not torch.isfinite(total) or total <= 0:
        return float("nan")  # all-zero matrix (e.g. a constant layer, centred): undefined
    p = s / total + eps
    ent = -(p * torch.log(p)).nansum() if eps == 0 else -(p * torch.log(p)).sum()
    return float(math.exp(ent.item()))


def rankme(Z: torch.Tensor, centred: bool = False, eps: float = 1e-7) -> float:
    """RankMe of Z (N, d): exp of the entropy of the normalised singular values (+eps).
    NaN when Z has non-finite entries (a diverged run) or is all zero."""
    if not torch.isfinite(Z).all():
        return float("nan")
    return _entropy_rank(_spectrum(Z, centred), eps)


def effective_rank(Z: torch.Tensor, centred: bool = False) -> float:
    """Roy & Vetterli effective rank of Z (N, d): RankMe without the epsilon (NaN as rankme)."""
    if not torch.isfinite(Z).all():
        return float("nan")
    return _entropy_rank(_spectrum(Z, centred), 0.0)


def rankme_from_singular_values(s: torch.Tensor, eps: float = 1e-7) -> float:
    """RankMe from a given spectrum (singular values, or any non-negative weights)."""
    return _entropy_rank(s.to(torch.float64), eps)


def mean_share(Z: torch.Tensor) -> float:
    """Share of the squared norm of Z (N, d) carried by its mean row:
    ||mean_i z_i||^2 / mean_i ||z_i||^2, in [0, 1] (float64).

    1 when every row is the same vector, 0 when the rows average to zero. Next to the
    uncentred RankMe it tells how much of a "collapse" is one shared direction (the mean),
    which centring removes. NaN for non-finite or all-zero Z."""
    if Z.ndim != 2:
        raise ValueError(f"expected a 2-D matrix (N, d), got shape {tuple(Z.shape)}")
    Z = Z.detach().to(torch.float64)
    if not torch.isfinite(Z).all():
        return float("nan")
    total = (Z * Z).sum(1).mean()
    if total <= 0:
        return float("nan")
    m = Z.mean(0)
    return float((m @ m / total).item())
