"""Gradient effective rank (empirical Fisher) and gradient-covariance effective rank.

Per-sample gradients over *all* parameters, G (N samples x P parameters), row i =
d loss_i / d theta, where loss_i is the task's answer loss of example i alone
(mean cross-entropy over its answer tokens, ``model.answer_loss``). G^T G / N is the
empirical Fisher. P is far larger than N, so the spectrum is taken through the
N x N Gram matrix::

    K   = G G^T                      (N, N), accumulated in float64 per parameter tensor
    lam = eigvalsh(K) clipped at 0   (= squared singular values of G)
    s   = sqrt(lam)                  (singular values of G)

Effective ranks of the spectrum ``s`` (same formulas as ``rankme.py``)::

    p_k = s_k / sum_j s_j (+ eps)    erank = exp(-sum_k p_k log p_k)
    variant "roy_vetterli": eps = 0 (Roy & Vetterli 2007)
    variant "rankme":       eps = 1e-7 (Garrido et al. 2023)
    variant "eig":          Roy & Vetterli on lam = s^2, i.e. the effective rank of the
                            Fisher / covariance *matrix* itself (the other reading of
                            "effective rank of the empirical Fisher"; reported beside)

Gradient *covariance*: the same on the centred gradients Gc = G - mean_i G_i. Its Gram
matrix needs no second pass: Kc = H K H with H = I - 11^T / N. All parameters are
used (the paper restricted this one to the first 50K parameters; we do not).

Every value is capped by N (at most N singular values; N - 1 for the centred one), so
the sample count is stored with every number.

Per-sample gradients: ``torch.func.vmap(grad(...))`` over ``functional_call`` (the model
must use explicit attention: fused SDPA has no vmap/double-backward support,
pytorch#116350, #117629, #128971), or a plain per-example loop (``method="loop"``, also
the automatic fallback). When N x P float32 gradients exceed ``max_bytes`` the
parameters are split into groups and the per-sample gradients are recomputed per group;
the Gram matrix is a sum over parameters, so the result is the same, exactly.
"""
from __future__ import annotations

import contextlib
import math
import warnings

import torch
import torch.nn.functional as F

from .rankme import rankme_from_singular_values

VARIANTS = ("roy_vetterli", "rankme", "eig")


# ------------------------------------------------------------------ spectra
def gram_spectrum(K: torch.Tensor, scale: float = 0.0) -> torch.Tensor:
    """Singular values (N,) of G, descending, from its Gram matrix K = G G^T (N, N).

    Eigenvalues below the float64 rounding level, N * eps_64 * max(lam_max, scale), are set
    to 0 (numpy.linalg.matrix_rank's rule): the square root would otherwise lift rounding
    noise of ~1e-16 * lam_max to singular values of ~1e-8 * s_max. ``scale`` is the size of
    the matrix K was computed from (for a centred Gram, the uncentred one's lam_max).
    """
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"Gram matrix must be square (N, N), got shape {tuple(K.shape)}")
    K = K.to(torch.float64)
    K = 0.5 * (K + K.T)                                                  # exact symmetry for eigvalsh
    lam = torch.linalg.eigvalsh(K).flip(0)                               # (N,) descending
    tol = K.shape[0] * torch.finfo(torch.float64).eps * max(float(lam[0]) if len(lam) else 0.0, scale)
    lam = torch.where(lam > tol, lam, torch.zeros_like(lam))
    return lam.sqrt()


def centre_gram(K: torch.Tensor) -> torch.Tensor:
    """Gram matrix of the centred rows: Kc = H K H, H = I - 11^T/N (K (N, N) -> (N, N))."""
    K = K.to(torch.float64)
    row = K.mean(0, keepdim=True)                                        # (1, N)
    col = K.mean(1, keepdim=True)                                        # (N, 1)
    return K - row - col + K.mean()


def spectrum_ranks(s: torch.Tensor, eps: float = 1e-7) -> dict[str, float]:
    """Effective ranks of a singular-value spectrum s (r,): the three variants (module doc)."""
    s = s.to(torch.float64)
    return {"roy_vetterli": rankme_from_singular_values(s, 0.0),
            "rankme": rankme_from_singular_values(s, eps),
            "eig": rankme_from_singular_values(s * s, 0.0)}


def gram_effective_ranks(K: torch.Tensor, eps: float = 1e-7) -> dict[str, dict[str, float]]:
    """{"grad": ranks of G, "grad_cov": ranks of G - mean} from K = G G^T (N, N)."""
    s = gram_spectrum(K)
    scale = float(s[0]) ** 2 if len(s) else 0.0
    return {"grad": spectrum_ranks(s, eps), "grad_cov": spectrum_ranks(gram_spectrum(centre_gram(K), scale), eps)}


# ------------------------------------------------------- per-sample gradients
def _answer_loss_fn(n_answer: int):
    """loss(model_fn, seq (B, S)) = mean CE over the last n_answer tokens (model.answer_loss)."""
    def loss(call, seq: torch.Tensor) -> torch.Tensor:
        x, y = seq[:, :-1], seq[:, 1:]                                   # (B, S-1)
        logits = call(x)[:, -n_answer:, :]                               # (B, n_answer, V)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[:, -n_answer:].reshape(-1))
    return loss


def _param_groups(named: list[tuple[str, torch.Tensor]], n: int, max_bytes: int) -> list[list[str]]:
    """Split parameter names into groups whose per-sample gradients (n x P_g float32) fit max_bytes."""
    budget = max(1, max_bytes // (4 * n))
    groups, cur, size = [], [], 0
    for name, p in named:
        if cur and size + p.numel() > budget:
            groups.append(cur)
            cur, size = [], 0
        cur.append(name)
        size += p.numel()
    if cur:
        groups.append(cur)
    return groups


def _gram_vmap(model, seq, loss, names_group, params, buffers, chunk):
    from torch.func import functional_call, grad, vmap

    fixed = {k: v for k, v in params.items() if k not in names_group}
    sub = {k: params[k] for k in names_group}

    def one(sub_p, s):                                                   # s (S,)
        call = lambda x: functional_call(model, ({**fixed, **sub_p}, buffers), (x,))  # noqa: E731
        return loss(call, s[None])

    g_fn = vmap(grad(one), in_dims=(None, 0))
    N = seq.shape[0]
    rows = []
    for i in range(0, N, chunk):
        g = g_fn(sub, seq[i:i + chunk])                                  # name -> (c, *shape)
        rows.append(torch.cat([g[k].reshape(g[k].shape[0], -1) for k in names_group], 1))  # (c, P_g)
    G = torch.cat(rows, 0)                                               # (N, P_g) float32
    return _gram64(G)


def _gram64(G: torch.Tensor, col_block: int = 65536) -> torch.Tensor:
    """G G^T (N, N) accumulated in float64 over column blocks of G (N, P)."""
    N = G.shape[0]
    K = torch.zeros(N, N, dtype=torch.float64, device=G.device)
    for j in range(0, G.shape[1], col_block):
        b = G[:, j:j + col_block].to(torch.float64)                      # (N, <=col_block)
        K += b @ b.T
    return K


def _gram_loop(model, seq, loss, names_group, named_params):
    plist = [named_params[k] for k in names_group]
    rows = []
    for i in range(seq.shape[0]):
        li = loss(model, seq[i:i + 1])
        gs = torch.autograd.grad(li, plist, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1)
                               for g, p in zip(gs, plist)]))
    return _gram64(torch.stack(rows))                                    # (N, N)


def per_sample_gram(model: torch.nn.Module, seq: torch.Tensor, n_answer: int, method: str = "vmap",
                    max_bytes: int = 256 * 2**20, chunk: int = 64) -> tuple[torch.Tensor, dict]:
    """Gram matrix K = G G^T (N, N) float64 of per-sample answer-loss gradients over all parameters.

    seq (N, S) int64 token sequences. ``method`` "vmap" (torch.func) or "loop"; vmap falls
    back to the loop with a warning if the model does not support it. Returns (K, info) with
    info = {method, n_params, param_groups}.
    """
    if method not in ("vmap", "loop"):
        raise ValueError(f"method must be 'vmap' or 'loop', got {method!r}")
    with _math_eval(model):
        return _per_sample_gram(model, seq, n_answer, method, max_bytes, chunk)


@contextlib.contextmanager
def _math_eval(model):
    """Eval mode and explicit attention (vmap/double-backward need it) for the block; restored after."""
    was_training = model.training
    impl = getattr(getattr(model, "cfg", None), "attn_impl", None)
    model.eval()
    if impl is not None:
        model.set_attn_impl("math")
    try:
        yield model
    finally:
        if impl is not None:
            model.set_attn_impl(impl)
        model.train(was_training)


def _per_sample_gram(model, seq, n_answer, method, max_bytes, chunk):
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    params = {n: p.detach() for n, p in named}
    buffers = {n: b for n, b in model.named_buffers()}
    N = seq.shape[0]
    groups = _param_groups(named, N, max_bytes)
    loss = _answer_loss_fn(n_answer)
    K = torch.zeros(N, N, dtype=torch.float64, device=seq.device)
    used = method
    if method == "vmap":
        try:
            for grp in groups:
                K += _gram_vmap(model, seq, loss, grp, params, buffers, chunk)
        except (RuntimeError, NotImplementedError) as e:
            warnings.warn(f"per-sample gradients: vmap failed ({str(e).splitlines()[0]}); "
                          f"falling back to the per-example loop", stacklevel=2)
            K.zero_()
            used = "loop"
    if used == "loop":
        for grp in groups:                                               # the model itself is the callable
            K += _gram_loop(model, seq, loss, grp, dict(named))
    return K, {"method": used, "n_params": int(sum(p.numel() for _, p in named)),
               "param_groups": len(groups)}


def grad_ranks(model: torch.nn.Module, seq: torch.Tensor, n_answer: int, eps: float = 1e-7,
               method: str = "vmap", max_bytes: int = 256 * 2**20) -> dict:
    """Gradient and gradient-covariance effective ranks of a model on sequences seq (N, S).

    The model is put in eval mode with explicit ("math") attention for the call and
    restored afterwards (``per_sample_gram`` does this). Returns {"grad": {variant: value}, "grad_cov": {variant:
    value},
    "n_samples", "n_params", "method", "param_groups", "top_singular_value", "eps"}.
    """
    if seq.shape[0] < 2:
        raise ValueError(f"gradient ranks need at least 2 samples, got {seq.shape[0]}")
    K, info = per_sample_gram(model, seq, n_answer, method=method, max_bytes=max_bytes)
    ranks = gram_effective_ranks(K, eps)
    s = gram_spectrum(K)
    return {**ranks, "n_samples": int(seq.shape[0]), "eps": eps,
            "top_singular_value": float(s[0]) if len(s) else math.nan, **info}
