"""Top Hessian eigenvalue from Hessian-vector products: power iteration (PyHessian's method) or Lanczos.

For a scalar loss L(theta) on a fixed batch and H = d^2 L / d theta^2 (all parameters),
both methods start from the same seeded unit vector v_1 ~ N(0, I) and use one
Hessian-vector product (HVP) per iteration.

Power iteration (``method="power"``, PyHessian 0.1's ``hessian.eigenvalues``)::

    for i = 1 .. max_iter:
        w = H v_i;  lam_i = <v_i, w>;  v_{i+1} = w / ||w||

Lanczos (``method="lanczos"``): the three-term recurrence builds an orthonormal basis
v_1 .. v_k of the Krylov space span{v_1, H v_1, .., H^(k-1) v_1} (the space power
iteration explores) and the tridiagonal T_k = V_k^T H V_k::

    w = H v_k - beta_(k-1) v_(k-1);  alpha_k = <v_k, w>;  w -= alpha_k v_k
    w -= <v_k, w> v_k + <v_(k-1), w> v_(k-1)     (second Gram-Schmidt pass, cheap)
    beta_k = ||w||;  v_(k+1) = w / beta_k
    lam_k = the eigenvalue of T_k of largest magnitude (the extreme Ritz value)

lam_k is the best estimate in that Krylov space, so it is never behind power iteration's
lam_k: on trained networks, where the top eigenvalues lie close (lam_2 / lam_1 ~ 0.95),
it needs far fewer products. Only three vectors are kept (as power iteration's two), so
memory does not grow with the iterations; without full reorthogonalisation copies of a
converged Ritz value can appear, after it has converged, which does not move it.

Both stop with PyHessian's rule on the relative change of the estimate::

    stop when |lam_i - lam_(i-1)| / (|lam_(i-1)| + 1e-6) < tol

and Lanczos also when beta_k is at rounding level (the Krylov space is invariant, so
lam_k is exact). PyHessian's defaults: max_iter 100, tol 1e-3, model in eval mode. Both
methods converge to the eigenvalue of largest *magnitude*; for trained networks this is
the top (positive) eigenvalue, but a negative value is returned as is, never clipped.

The stopping rule bounds the step, not the error. Power iteration's error is ~
step / (1 - lam_2/lam_1), so with close top eigenvalues it stops far from lam_1, after a
number of products that depends on the start vector. mod_L3_nano at step 22 (lam_1 18.44,
lam_2 17.92), batch 32, tol 1e-3, 8 start vectors: power iteration (and PyHessian, which
with the same start vector takes the same products) 17.85 to 18.37 in 21 to 35 products;
Lanczos 18.39 to 18.44 in 12 to 22, 0.64 of PyHessian's CPU time. At step 1500 (lam_1 559.2,
well separated): 5 to 8 products vs 5 to 6, time ratio 0.82. A start vector with little
weight on the top eigenvector can still stop either method near lam_2 (one of 9 did, at
17.92, for Lanczos also at tol 1e-4). ``benchmarks/bench_measures.py --hessian-only``
measures this. The method is stored with every value.

Hessian-vector products by double backward, as PyHessian does: the gradient graph
g = dL/dtheta (create_graph=True) is built once per batch and every product is one extra
backward pass, Hv = d<g, v>/dtheta (retain_graph=True). ``plain=True`` (the benchmark's
reference) rebuilds the forward and gradient graph for every product. Explicit attention
is required (fused SDPA kernels have no second derivative, pytorch#116350, #117629,
#128971); ``hessian_top`` switches the model to "math" attention for the call.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import torch

METHODS = ("power", "lanczos")

HVP = Callable[[list[torch.Tensor]], list[torch.Tensor]]


def _dot(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    return sum((x * y).sum() for x, y in zip(a, b))


def _normalise(v: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    n = torch.sqrt(_dot(v, v))
    return [x / (n + 1e-12) for x in v]


def _random_unit(params: Sequence[torch.Tensor], seed: int) -> list[torch.Tensor]:
    gen = torch.Generator(device="cpu").manual_seed(int(seed) % (2**63))
    return _normalise([torch.randn(p.shape, generator=gen, dtype=p.dtype).to(p.device) for p in params])


def _check(max_iter: int, tol: float) -> None:
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")


def _stalled(lam: float, lam_prev: float | None, tol: float) -> bool:
    """PyHessian's stopping rule: relative change of the estimate below tol."""
    return lam_prev is not None and abs(lam - lam_prev) / (abs(lam_prev) + 1e-6) < tol


def _result(lam, it, converged, tol, max_iter, seed, method) -> dict:
    return {"value": lam, "iterations": it, "converged": converged, "tol": tol, "max_iter": max_iter,
            "seed": int(seed), "method": method}


def power_iteration(hvp: HVP, params: Sequence[torch.Tensor], max_iter: int = 100, tol: float = 1e-3,
                    seed: int = 0) -> dict:
    """Dominant eigenvalue of the operator ``hvp`` (list of tensors shaped like params -> same).

    Returns {"value", "iterations", "converged", "tol", "max_iter", "seed", "method"}.
    """
    _check(max_iter, tol)
    v = _random_unit(params, seed)
    lam_prev, lam, converged, it = None, math.nan, False, 0
    for it in range(1, max_iter + 1):
        w = hvp(v)
        lam = float(_dot(v, w))
        v = _normalise([x.detach() for x in w])
        if not math.isfinite(lam):
            break
        if _stalled(lam, lam_prev, tol):
            converged = True
            break
        lam_prev = lam
    return _result(lam, it, converged, tol, max_iter, seed, "power")


def _extreme_ritz(alphas: list[float], betas: list[float]) -> float:
    """Eigenvalue of largest magnitude of the symmetric tridiagonal T (diagonal alphas, off-diagonal betas)."""
    k = len(alphas)
    T = np.diag(np.asarray(alphas, dtype=np.float64))
    if k > 1:
        off = np.asarray(betas[:k - 1], dtype=np.float64)
        T += np.diag(off, 1) + np.diag(off, -1)
    ev = np.linalg.eigvalsh(T)
    return float(ev[np.argmax(np.abs(ev))])


def lanczos(hvp: HVP, params: Sequence[torch.Tensor], max_iter: int = 100, tol: float = 1e-3,
            seed: int = 0) -> dict:
    """Dominant eigenvalue of the operator ``hvp`` by Lanczos (module doc); same start vector,
    stopping rule and result keys as ``power_iteration``."""
    _check(max_iter, tol)
    v, v_prev = _random_unit(params, seed), None
    alphas: list[float] = []
    betas: list[float] = []
    rounding = 100 * torch.finfo(v[0].dtype).eps if v else 0.0
    lam_prev, lam, converged, it = None, math.nan, False, 0
    for it in range(1, max_iter + 1):
        w = [x.detach() for x in hvp(v)]
        a = float(_dot(v, w))
        if not math.isfinite(a):
            lam = a
            break
        alphas.append(a)
        w = [torch.add(wi, vi, alpha=-a) for wi, vi in zip(w, v)]
        if v_prev is not None:
            w = [torch.add(wi, pi, alpha=-betas[-1]) for wi, pi in zip(w, v_prev)]
        for u in ([v] if v_prev is None else [v, v_prev]):             # second pass: orthogonality in float32
            c = float(_dot(u, w))
            w = [torch.add(wi, ui, alpha=-c) for wi, ui in zip(w, u)]
        b = float(torch.sqrt(_dot(w, w)))
        lam = _extreme_ritz(alphas, betas)
        if _stalled(lam, lam_prev, tol):
            converged = True
            break
        if not math.isfinite(b) or b <= rounding * max(abs(x) for x in alphas + betas + [b]):
            converged = math.isfinite(b)                                 # invariant Krylov space: lam is exact
            break
        lam_prev = lam
        betas.append(b)
        v_prev, v = v, [wi / b for wi in w]
    return _result(lam, it, converged, tol, max_iter, seed, "lanczos")


SOLVERS = {"power": power_iteration, "lanczos": lanczos}


def _solve(hvp: HVP, params, max_iter, tol, seed, method) -> dict:
    if method not in SOLVERS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return SOLVERS[method](hvp, params, max_iter, tol, seed)


def top_eigenvalue(loss_fn: Callable[[], torch.Tensor], params: Sequence[torch.Tensor], max_iter: int = 100,
                   tol: float = 1e-3, seed: int = 0, method: str = "power") -> dict:
    """Top Hessian eigenvalue of the scalar ``loss_fn()`` w.r.t. ``params`` (graph built once)."""
    params = list(params)
    loss = loss_fn()
    g = torch.autograd.grad(loss, params, create_graph=True)             # graph of the gradient

    def hvp(v):
        return list(torch.autograd.grad(g, params, grad_outputs=v, retain_graph=True))

    out = _solve(hvp, params, max_iter, tol, seed, method)
    out["loss"] = float(loss.detach())
    return out


def plain_power_iteration(loss_fn: Callable[[], torch.Tensor], params: Sequence[torch.Tensor],
                          max_iter: int = 100, tol: float = 1e-3, seed: int = 0, method: str = "power") -> dict:
    """Reference: the same iteration, re-running forward + double backward for every product."""
    params = list(params)

    def hvp(v):
        g = torch.autograd.grad(loss_fn(), params, create_graph=True)
        return list(torch.autograd.grad(g, params, grad_outputs=v))

    return _solve(hvp, params, max_iter, tol, seed, method)


def hessian_top(model: torch.nn.Module, seq: torch.Tensor, n_answer: int, max_iter: int = 100,
                tol: float = 1e-3, seed: int = 0, plain: bool = False, method: str = "power") -> dict:
    """Top eigenvalue of the Hessian of ``model.answer_loss`` on the batch seq (B, S), all parameters.

    ``method`` "power" (power iteration) or "lanczos" (module doc). Eval mode and explicit
    attention for the call (restored after). Returns the dict of ``power_iteration`` plus
    "batch_size", "n_params", "loss".
    """
    from ..model import answer_loss

    if method not in SOLVERS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    was_training = model.training
    impl = getattr(getattr(model, "cfg", None), "attn_impl", None)
    model.eval()
    if impl is not None:
        model.set_attn_impl("math")
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        fn = plain_power_iteration if plain else top_eigenvalue
        out = fn(lambda: answer_loss(model, seq, n_answer), params, max_iter, tol, seed, method)
    finally:
        if impl is not None:
            model.set_attn_impl(impl)
        model.train(was_training)
    out.update(batch_size=int(seq.shape[0]), n_params=int(sum(p.numel() for p in params)))
    return out


# ------------------------------------------------------------ reference: PyHessian
class _AnswerLogits(torch.nn.Module):
    """``model(x)[:, -n_answer:]`` as a module: PyHessian calls ``criterion(module(inputs), targets)``."""

    def __init__(self, model: torch.nn.Module, n_answer: int):
        super().__init__()
        self.model, self.n_answer = model, n_answer

    def forward(self, x: torch.Tensor) -> torch.Tensor:                  # (B, S-1) -> (B, n_answer, V)
        return self.model(x)[:, -self.n_answer:, :]


def _answer_criterion(n_answer: int):
    """criterion(answer logits (B, n_answer, V), targets (B, S-1)) = ``model.answer_loss``."""
    def criterion(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[:, -n_answer:].reshape(-1))
    return criterion


def pyhessian_top(model: torch.nn.Module, seq: torch.Tensor, n_answer: int, max_iter: int = 100,
                  tol: float = 1e-3, seed: int = 0) -> dict:
    """PyHessian 0.1's top eigenvalue of the same loss and batch, for comparisons (needs ``pyhessian``).

    ``hessian(module, criterion, data=(seq[:, :-1], seq[:, 1:])).eigenvalues(top_n=1)`` on
    an adapter whose output is the answer logits. Its start vector is ``torch.randn`` per
    parameter after ``torch.manual_seed(seed)``, the same as ours for that seed (the global
    RNG state is restored afterwards). PyHessian returns the estimate *before* the last
    product, ours the last one. The number of products is counted by wrapping PyHessian's
    ``hessian_vector_product`` for the call. Returns {"value", "iterations", "tol",
    "max_iter", "seed", "method": "pyhessian", "loss"}.
    """
    import sys
    import warnings

    import pyhessian  # noqa: F401
    ph = sys.modules["pyhessian.hessian"]                                 # the module (the package exports the class)
    adapter, crit = _AnswerLogits(model, n_answer), _answer_criterion(n_answer)
    was_training = model.training
    impl = getattr(getattr(model, "cfg", None), "attn_impl", None)
    if impl is not None:
        model.set_attn_impl("math")
    params = [p for p in model.parameters() if p.requires_grad]
    saved = [p.grad for p in params]
    count = [0]
    hv = ph.hessian_vector_product

    def counted(*a, **k):
        count[0] += 1
        return hv(*a, **k)

    ph.hessian_vector_product = counted
    try:
        for p in params:
            p.grad = None
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")                              # backward(create_graph=True) warns
            torch.manual_seed(int(seed) % (2**63))
            h = ph.hessian(adapter, crit, data=(seq[:, :-1], seq[:, 1:]), cuda=seq.is_cuda)
            ev, _ = h.eigenvalues(maxIter=max_iter, tol=tol, top_n=1)
            loss = float(crit(adapter(seq[:, :-1]), seq[:, 1:]).detach())
    finally:
        ph.hessian_vector_product = hv
        for p, g in zip(params, saved):
            p.grad = g
        if impl is not None:
            model.set_attn_impl(impl)
        model.train(was_training)
    return {"value": float(ev[0]), "iterations": count[0], "tol": tol, "max_iter": max_iter, "seed": int(seed),
            "method": "pyhessian", "loss": loss}
