"""Top Hessian eigenvalue (power iteration on HVPs) against closed forms and an explicit Hessian."""
import numpy as np
import pytest
import torch

from geoanatomy.measures.hessian import hessian_top, plain_power_iteration, top_eigenvalue
from geoanatomy.model import GPT, ModelConfig
from geoanatomy.model import answer_loss


def _rotated(eigs, seed=0):
    """Symmetric matrix Q diag(eigs) Q^T with a seeded random orthogonal Q (float64)."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(len(eigs), len(eigs), generator=g, dtype=torch.float64))
    return q @ torch.diag(torch.tensor(eigs, dtype=torch.float64)) @ q.T


def test_quadratic_top_eigenvalue():
    # L(w) = 0.5 w^T A w has Hessian A exactly; top eigenvalue 5.
    A = _rotated([5.0, 3.0, 1.0, 0.5, -0.2])
    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    r = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=100, tol=1e-3, seed=1)
    assert r["converged"] and r["iterations"] < 100
    assert r["value"] == pytest.approx(5.0, rel=5e-3)
    # a tighter tolerance reaches the eigenvalue to high precision
    r = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=2000, tol=1e-10, seed=1)
    assert r["value"] == pytest.approx(5.0, rel=1e-8)


def test_dominant_negative_eigenvalue_is_returned_as_is():
    # PyHessian's power iteration finds the eigenvalue of largest magnitude, sign included.
    A = _rotated([-7.0, 2.0, 1.0], seed=3)
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    r = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=500, tol=1e-10, seed=0)
    assert r["value"] == pytest.approx(-7.0, rel=1e-6)


def test_linear_regression_hessian_is_xtx_over_n():
    # MSE/2 of a linear model: H = X^T X / n, independent of the weights and targets.
    g = torch.Generator().manual_seed(0)
    n, d = 50, 6
    X = torch.randn(n, d, generator=g, dtype=torch.float64) * torch.linspace(0.5, 3.0, d, dtype=torch.float64)
    y = torch.randn(n, generator=g, dtype=torch.float64)
    lin = torch.nn.Linear(d, 1, bias=False).double()
    want = float(np.linalg.eigvalsh((X.T @ X / n).numpy()).max())
    loss = lambda: 0.5 * ((lin(X)[:, 0] - y) ** 2).mean()  # noqa: E731
    for fn in (top_eigenvalue, plain_power_iteration):
        r = fn(loss, list(lin.parameters()), max_iter=1000, tol=1e-10, seed=2)
        assert r["value"] == pytest.approx(want, rel=1e-6), fn.__name__


def test_tiny_transformer_matches_explicit_hessian():
    # d_model 8, one layer: the full Hessian (autograd.functional.hessian over all parameters,
    # tied embedding included) has the same dominant eigenvalue as our power iteration.
    torch.manual_seed(0)
    model = GPT(ModelConfig(n_layer=1, d_model=8, n_head=2, vocab_size=12, block_size=8)).double()
    for p in model.parameters():                           # move away from the tiny init scale
        p.data.add_(0.3 * torch.randn_like(p))
    seq = torch.randint(0, 12, (6, 8))
    n_answer = 3
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]
    sizes = [p.numel() for _, p in model.named_parameters()]
    flat0 = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    model.set_attn_impl("math")

    def f(flat):
        parts = dict(zip(names, (t.reshape(s) for t, s in zip(torch.split(flat, sizes), shapes))))
        call = lambda x: torch.func.functional_call(model, parts, (x,))  # noqa: E731
        x, y = seq[:, :-1], seq[:, 1:]
        logits = call(x)[:, -n_answer:]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 12), y[:, -n_answer:].reshape(-1))

    assert float(f(flat0).detach()) == pytest.approx(float(answer_loss(model, seq, n_answer).detach()), rel=1e-12)
    H = torch.autograd.functional.hessian(f, flat0, vectorize=True)        # (P, P)
    ev = np.linalg.eigvalsh(H.numpy())
    want = ev[np.argmax(np.abs(ev))]
    model.set_attn_impl("sdpa")
    model.train()
    r = hessian_top(model, seq, n_answer, max_iter=3000, tol=1e-10, seed=0)
    assert r["value"] == pytest.approx(want, rel=1e-5)
    assert r["batch_size"] == 6 and r["n_params"] == flat0.numel()
    # the call restores the model's attention implementation and training mode
    assert model.cfg.attn_impl == "sdpa" and model.training
    # PyHessian defaults (tol 1e-3) land within a few per mille
    r = hessian_top(model, seq, n_answer, seed=0)
    assert r["max_iter"] == 100 and r["tol"] == 1e-3
    assert r["value"] == pytest.approx(want, rel=2e-2)


def test_bad_settings_rejected():
    w = torch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="max_iter"):
        top_eigenvalue(lambda: (w ** 2).sum(), [w], max_iter=0)
    with pytest.raises(ValueError, match="tol"):
        top_eigenvalue(lambda: (w ** 2).sum(), [w], tol=0)
