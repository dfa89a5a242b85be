"""Top Hessian eigenvalue by power iteration on Hessian-vector products (PyHessian's method).

For a scalar loss L(theta) on a fixed batch and H = d^2 L / d theta^2 (all parameters)::

    v_0 ~ N(0, I), normalised                   (seeded)
    for i = 1 .. max_iter:
        w       = H v_{i-1}                     (Hessian-vector product)
        lam_i   = <v_{i-1}, w>                  (Rayleigh quotient)
        v_i     = w / ||w||
        stop when |lam_i - lam_{i-1}| / (|lam_{i-1}| + 1e-6) < tol

PyHessian's defaults (Yao et al. 2020, ``hessian.eigenvalues``): max_iter 100, tol 1e-3,
model in eval mode. Power iteration converges to the eigenvalue of largest *magnitude*
(as PyHessian's does); for trained networks this is the top (positive) eigenvalue, but a
negative value is returned as is, never clipped.

Hessian-vector products by double backward, as PyHessian does: the gradient graph
g = dL/dtheta (create_graph=True) is built once per batch and every product is one extra
backward pass, Hv = d<g, v>/dtheta (retain_graph=True). ``plain_power_iteration`` (used as
the benchmark's reference) rebuilds the forward and gradient graph at every iteration.
Explicit attention is required (fused SDPA kernels have no second derivative,
pytorch#116350, #117629, #128971); ``hessian_top`` switches the model to "math"
attention for the call.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch


def _dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    return sum((x * y).sum() for x, y in zip(a, b))


def _normalise(v: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    n = torch.sqrt(_dot(v, v))
    return [x / (n + 1e-12) for x in v]


def _random_unit(params: Sequence[torch.Tensor], seed: int) -> list[torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(int(seed) % (2**63))
    return _normalise([torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device) for p in params])


def power_iteration(hvp: Callable[[list[torch.Tensor]], list[torch.Tensor]], params: Sequence[torch.Tensor],
                    max_iter: int = 100, tol: float = 1e-3, seed: int = 0) -> dict:
    """Dominant eigenvalue of the operator ``hvp`` (list of tensors shaped like params -> same).

    Returns {"value", "iterations", "converged", "tol", "max_iter", "seed"}.
    """
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    v = _random_unit(params, seed)
    lam_prev, lam, converged, it = None, math.nan, False, 0
    for it in range(1, max_iter + 1):
        w = hvp(v)
        lam = float(_dot(v, w))
        v = _normalise([x.detach() for x in w])
        if not math.isfinite(lam):
            break
        if lam_prev is not None and abs(lam - lam_prev) / (abs(lam_prev) + 1e-6) < tol:
            converged = True
            break
        lam_prev = lam
    return {"value": lam, "iterations": it, "converged": converged, "tol": tol, "max_iter": max_iter,
            "seed": int(seed)}


def top_eigenvalue(loss_fn: Callable[[], torch.Tensor], params: Sequence[torch.Tensor], max_iter: int = 100,
                   tol: float = 1e-3, seed: int = 0) -> dict:
    """Top Hessian eigenvalue of the scalar ``loss_fn()`` w.r.t. ``params`` (graph built once)."""
    params = list(params)
    loss = loss_fn()
    g = torch.autograd.grad(loss, params, create_graph=True)             # graph of the gradient

    def hvp(v):
        return list(torch.autograd.grad(g, params, grad_outputs=v, retain_graph=True))

    out = power_iteration(hvp, params, max_iter, tol, seed)
    out["loss"] = float(loss.detach())
    return out


def plain_power_iteration(loss_fn: Callable[[], torch.Tensor], params: Sequence[torch.Tensor],
                          max_iter: int = 100, tol: float = 1e-3, seed: int = 0) -> dict:
    """Reference: the same iteration, re-running forward + double backward for every product."""
    params = list(params)

    def hvp(v):
        g = torch.autograd.grad(loss_fn(), params, create_graph=True)
        return list(torch.autograd.grad(g, params, grad_outputs=v))

    return power_iteration(hvp, params, max_iter, tol, seed)


def hessian_top(model: torch.nn.Module, seq: torch.Tensor, n_answer: int, max_iter: int = 100,
                tol: float = 1e-3, seed: int = 0, plain: bool = False) -> dict:
    """Top eigenvalue of the Hessian of ``model.answer_loss`` on the batch seq (B, S), all parameters.

    Eval mode and explicit attention for the call (restored after). Returns the dict of
    ``power_iteration`` plus "batch_size", "n_params", "loss".
    """
    from ..model import answer_loss

    was_training = model.training
    impl = getattr(getattr(model, "cfg", None), "attn_impl", None)
    model.eval()
    if impl is not None:
        model.set_attn_impl("math")
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        fn = plain_power_iteration if plain else top_eigenvalue
        out = fn(lambda: answer_loss(model, seq, n_answer), params, max_iter, tol, seed)
    finally:
        if impl is not None:
            model.set_attn_impl(impl)
        model.train(was_training)
    out.update(batch_size=int(seq.shape[0]), n_params=int(sum(p.numel() for p in params)))
    return out
