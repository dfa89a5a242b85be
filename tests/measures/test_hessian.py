"""Top Hessian eigenvalue (power iteration and Lanczos on HVPs) against closed forms, an explicit
Hessian and PyHessian 0.1 (a test dependency) on small GPTs of this project."""
import numpy as np
import pytest
import torch

from geoanatomy.measures.hessian import METHODS, hessian_top, plain_power_iteration, pyhessian_top, top_eigenvalue
from geoanatomy.model import GPT, ModelConfig
from geoanatomy.model import answer_loss


def _rotated(eigs, seed=0):
    """Symmetric matrix Q diag(eigs) Q^T with a seeded random orthogonal Q (float64)."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(len(eigs), len(eigs), generator=g, dtype=torch.float64))
    return q @ torch.diag(torch.tensor(eigs, dtype=torch.float64)) @ q.T


@pytest.mark.parametrize("method", METHODS)
def test_quadratic_top_eigenvalue(method):
    # L(w) = 0.5 w^T A w has Hessian A exactly; top eigenvalue 5.
    A = _rotated([5.0, 3.0, 1.0, 0.5, -0.2])
    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    r = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=100, tol=1e-3, seed=1, method=method)
    assert r["converged"] and r["iterations"] < 100 and r["method"] == method
    assert r["value"] == pytest.approx(5.0, rel=5e-3)
    # a tighter tolerance reaches the eigenvalue to high precision
    r = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=2000, tol=1e-10, seed=1, method=method)
    assert r["value"] == pytest.approx(5.0, rel=1e-8)
    if method == "lanczos":                  # a 5-dimensional Krylov space is the whole space: exact
        assert r["iterations"] <= 5 and r["converged"]


@pytest.mark.parametrize("method", METHODS)
def test_dominant_negative_eigenvalue_is_returned_as_is(method):
    # PyHessian's power iteration finds the eigenvalue of largest magnitude, sign included.
    A = _rotated([-7.0, 2.0, 1.0], seed=3)
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    r = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=500, tol=1e-10, seed=0, method=method)
    assert r["value"] == pytest.approx(-7.0, rel=1e-6)


def test_lanczos_needs_fewer_products_on_close_top_eigenvalues():
    # 200 eigenvalues, the top two 3% apart (as on trained nano checkpoints): at the same tolerance
    # power iteration stops far from the top (its step shrinks before its error does), Lanczos does not.
    eigs = list(np.linspace(0.0, 10.0, 199)) + [10.3]
    A = _rotated(eigs, seed=5)
    w = torch.zeros(200, dtype=torch.float64, requires_grad=True)
    pw = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=1000, tol=1e-3, seed=1, method="power")
    lz = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=1000, tol=1e-3, seed=1, method="lanczos")
    assert lz["iterations"] < pw["iterations"]
    assert abs(lz["value"] - 10.3) < 1e-3 * 10.3 < abs(pw["value"] - 10.3)
    # same start vector: after k products the Ritz value is never below power iteration's estimate
    for k in range(1, 12):
        a = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=k, tol=1e-14, seed=1, method="power")
        b = top_eigenvalue(lambda: 0.5 * w @ A @ w, [w], max_iter=k, tol=1e-14, seed=1, method="lanczos")
        assert a["iterations"] == b["iterations"] == k
        assert b["value"] >= a["value"] - 1e-12


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
        for method in METHODS:
            r = fn(loss, list(lin.parameters()), max_iter=1000, tol=1e-10, seed=2, method=method)
            assert r["value"] == pytest.approx(want, rel=1e-6), (fn.__name__, method)


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
    assert r["batch_size"] == 6 and r["n_params"] == flat0.numel() and r["method"] == "power"
    r = hessian_top(model, seq, n_answer, max_iter=3000, tol=1e-10, seed=0, method="lanczos")
    assert r["value"] == pytest.approx(want, rel=1e-8) and r["method"] == "lanczos"
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
    with pytest.raises(ValueError, match="tol"):
        top_eigenvalue(lambda: (w ** 2).sum(), [w], tol=0, method="lanczos")
    with pytest.raises(ValueError, match="method"):
        top_eigenvalue(lambda: (w ** 2).sum(), [w], method="arnoldi")
    with pytest.raises(ValueError, match="method"):
        hessian_top(GPT(ModelConfig(n_layer=1, d_model=8, n_head=2, block_size=8)), torch.zeros(2, 4, dtype=torch.long),
                    1, method="arnoldi")


# ---------------------------------------------------------------- PyHessian 0.1 (the reference)
def _jittered_gpt(n_layer, d_model, vocab_size=None, block_size=8, seed=0):
    """A small GPT of this project (float32) moved away from the tiny init scale."""
    torch.manual_seed(seed)
    kw = {} if vocab_size is None else {"vocab_size": vocab_size}
    model = GPT(ModelConfig(n_layer=n_layer, d_model=d_model, n_head=2, block_size=block_size, **kw))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def test_power_iteration_is_pyhessians():
    # Two layers, a fixed batch: with the same start vector (torch.manual_seed(seed) + randn per
    # parameter, PyHessian's) and stopping rule, PyHessian stops after the same number of products
    # and returns the estimate one product before ours, so the two differ by less than tol.
    model = _jittered_gpt(2, 16)
    seq = torch.randint(0, model.cfg.vocab_size, (8, 8), generator=torch.Generator().manual_seed(1))
    tol = 1e-3
    for seed in range(3):
        ours = hessian_top(model, seq, 3, max_iter=100, tol=tol, seed=seed, method="power")
        ref = pyhessian_top(model, seq, 3, max_iter=100, tol=tol, seed=seed)
        assert ours["converged"] and ours["iterations"] == ref["iterations"] > 2, seed
        assert abs(ours["value"] - ref["value"]) < 1.01 * tol * (abs(ref["value"]) + 1e-6), seed
        assert ours["loss"] == pytest.approx(ref["loss"], rel=1e-6)
    # the call restores the model: training mode, attention, no gradients left behind
    assert model.training and model.cfg.attn_impl == "sdpa"
    assert all(p.grad is None for p in model.parameters())


def test_lanczos_pyhessian_and_explicit_hessian_agree():
    # A tiny float32 GPT: the full Hessian (autograd.functional.hessian in float64) and, converged,
    # PyHessian's power iteration, ours and our Lanczos give the same dominant eigenvalue.
    model = _jittered_gpt(1, 8, vocab_size=12)
    seq = torch.randint(0, 12, (6, 8), generator=torch.Generator().manual_seed(2))
    n_answer = 3
    m64 = GPT(ModelConfig(n_layer=1, d_model=8, n_head=2, vocab_size=12, block_size=8, attn_impl="math")).double()
    m64.load_state_dict(model.state_dict())
    names = [n for n, _ in m64.named_parameters()]
    shapes = [p.shape for _, p in m64.named_parameters()]
    sizes = [p.numel() for _, p in m64.named_parameters()]
    flat0 = torch.cat([p.detach().reshape(-1) for p in m64.parameters()])

    def f(flat):
        parts = dict(zip(names, (t.reshape(s) for t, s in zip(torch.split(flat, sizes), shapes))))
        return answer_loss(lambda x: torch.func.functional_call(m64, parts, (x,)), seq, n_answer)

    ev = np.linalg.eigvalsh(torch.autograd.functional.hessian(f, flat0, vectorize=True).numpy())
    want = ev[np.argmax(np.abs(ev))]
    lz = hessian_top(model, seq, n_answer, max_iter=500, tol=1e-7, seed=0, method="lanczos")
    pw = hessian_top(model, seq, n_answer, max_iter=5000, tol=1e-7, seed=0, method="power")
    ph = pyhessian_top(model, seq, n_answer, max_iter=5000, tol=1e-7, seed=0)
    for r in (lz, pw, ph):
        assert r["value"] == pytest.approx(want, rel=1e-4), r
    assert lz["iterations"] < pw["iterations"]
    # at PyHessian's default tolerance, Lanczos is within that tolerance of the explicit answer
    lz3 = hessian_top(model, seq, n_answer, tol=1e-3, seed=0, method="lanczos")
    assert lz3["value"] == pytest.approx(want, rel=1e-3) and lz3["converged"]
