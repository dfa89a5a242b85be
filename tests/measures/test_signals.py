"""Known answers of the precursor benchmark's signals (geoanatomy.measures.signals), each on a
hand-made case whose value is known in closed form, and the registry's conformance: every
entry names a curve some stage writes, with a direction."""
import math

import numpy as np
import pytest
import torch

from geoanatomy.measures import signals as sig
from geoanatomy.measures.registry import MEASURES


def test_loss_covariance_one_mode_and_two_modes():
    # one shared mode over the window: the covariance has rank one -> PR 1, heat capacity 0
    t = np.arange(6.0)
    L = np.outer(t, np.linspace(1, 2, 50))
    r = sig.loss_covariance(L)
    assert r["participation_ratio"] == pytest.approx(1.0)
    assert r["heat_capacity"] == pytest.approx(0.0, abs=1e-12)
    # two orthogonal modes of known variance: X = [a u, b v] over 4 checkpoints
    # eigenvalues of X X^T / (W - 1) are a^2 |c1|^2 / 3 and b^2 |c2|^2 / 3
    c1, c2 = np.array([1.0, -1, 1, -1]), np.array([1.0, 1, -1, -1])
    u, v = np.zeros(10), np.zeros(10)
    u[0], v[1] = 1.0, 1.0
    a, b = 2.0, 1.0
    L = a * np.outer(c1, u) + b * np.outer(c2, v) + 5.0          # a constant offset is centred away
    lam = np.array([a * a * 4 / 3, b * b * 4 / 3])
    p = lam / lam.sum()
    r = sig.loss_covariance(L)
    assert r["participation_ratio"] == pytest.approx(lam.sum() ** 2 / (lam ** 2).sum())
    e = -np.log(p)
    assert r["heat_capacity"] == pytest.approx((p * e * e).sum() - (p * e).sum() ** 2)
    # a flat spectrum: every energy equal -> heat capacity 0, PR = number of modes
    flat = sig.spectrum_stats([1.0, 1.0, 1.0])
    assert flat["participation_ratio"] == pytest.approx(3.0) and flat["heat_capacity"] == pytest.approx(0.0)


def test_ildr_two_classes():
    # class 0 at (+-1, 0) around (0, 0); class 1 at (10 +- 1, 0) around (10, 0):
    # centroid distance 10, every point 1 from its centroid -> ILDR 10
    Z = np.array([[-1.0, 0], [1, 0], [9, 0], [11, 0]])
    assert sig.ildr(Z, [0, 0, 1, 1]) == pytest.approx(10.0)
    # three classes on a line at 0, 3, 6, spread 0.5: mean pair distance (3 + 6 + 3) / 3 = 4
    Z = np.array([[x + d, 0.0] for x in (0, 3, 6) for d in (-0.5, 0.5)])
    assert sig.ildr(Z, [0, 0, 1, 1, 2, 2]) == pytest.approx(4.0 / 0.5)
    # one class only: undefined
    assert math.isnan(sig.ildr(Z, [0] * 6))


def test_update_gap_known_spectra():
    # parallel updates (one direction) -> infinite gap; orthogonal equal ones -> 1
    d = np.zeros(8)
    d[0] = 1.0
    thetas = np.stack([k * d for k in range(5)])
    assert sig.update_gap(thetas, [0, 1, 2, 3, 4]) == math.inf
    e = np.eye(8)
    thetas = np.cumsum(np.vstack([np.zeros(8), e[:3]]), axis=0)
    assert sig.update_gap(thetas, [0, 1, 2, 3]) == pytest.approx(1.0)
    # updates are per step: the same path recorded at uneven steps gives the same per-step rates
    # when the spacing is undone, so two updates 3 e0 (over 3 steps) and 1 e1 (over 1) -> gap 1
    thetas = np.vstack([np.zeros(8), 3 * e[0], 3 * e[0] + e[1]])
    assert sig.update_gap(thetas, [0, 3, 4]) == pytest.approx(1.0)
    # two orthogonal per-step updates of sizes 2 and 1 -> gap 2
    thetas = np.vstack([np.zeros(8), 2 * e[0], 2 * e[0] + e[1]])
    assert sig.update_gap(thetas, [0, 1, 2]) == pytest.approx(2.0)


def test_effective_ranks_both_conventions():
    # singular values 3, 1: sv p = (3/4, 1/4); sv2 p = (9/10, 1/10)
    Z = torch.tensor([[3.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    r = sig.effective_ranks(Z)
    H = lambda p: math.exp(-sum(x * math.log(x) for x in p))   # noqa: E731
    assert r["sv"] == pytest.approx(H([0.75, 0.25]))
    assert r["sv2"] == pytest.approx(H([0.9, 0.1]))
    # an isotropic matrix has full rank in both
    r = sig.effective_ranks(torch.eye(4))
    assert r["sv"] == pytest.approx(4.0) and r["sv2"] == pytest.approx(4.0)


def test_stable_rank():
    assert sig.stable_rank(np.diag([2.0, 1.0, 1.0])) == pytest.approx(6.0 / 4.0)
    assert sig.stable_rank(np.outer([1.0, 2.0], [3.0, 4.0, 5.0])) == pytest.approx(1.0)


@pytest.mark.parametrize("eta", [1e-3, 1e-1])
def test_commutator_defect_of_quadratics(eta):
    # L_A = theta^T A theta / 2, L_B likewise: gradients A theta, B theta, and
    # theta_AB - theta_BA = eta^2 (BA - AB) theta exactly -> defect ||(BA - AB) theta|| / (||A theta|| ||B theta||)
    g = torch.Generator().manual_seed(0)
    A = torch.randn(5, 5, generator=g, dtype=torch.float64)
    B = torch.randn(5, 5, generator=g, dtype=torch.float64)
    A, B = A @ A.T, B @ B.T
    theta = torch.randn(5, generator=g, dtype=torch.float64)
    grad = lambda which, th: (A if which == "A" else B) @ th    # noqa: E731
    want = float(torch.linalg.vector_norm((B @ A - A @ B) @ theta)
                 / (torch.linalg.vector_norm(A @ theta) * torch.linalg.vector_norm(B @ theta)))
    assert sig.commutator_defect(grad, theta, eta)["value"] == pytest.approx(want, rel=1e-9)
    # commuting matrices (both diagonal): no defect
    D1, D2 = torch.diag(torch.arange(1.0, 6, dtype=torch.float64)), torch.diag(torch.ones(5, dtype=torch.float64))
    grad = lambda which, th: (D1 if which == "A" else D2) @ th   # noqa: E731
    assert sig.commutator_defect(grad, theta, eta)["value"] == pytest.approx(0.0, abs=1e-12)


def test_commutator_measure_on_a_model_restores_the_weights():
    from geoanatomy.model import GPT, ModelConfig
    torch.manual_seed(0)
    model = GPT(ModelConfig(n_layer=1, d_model=16, n_head=2, vocab_size=12, block_size=8))
    before = [p.detach().clone() for p in model.parameters()]
    pool = torch.randint(0, 12, (8, 8))
    rows = MEASURES["commutator"].rows(model, pool, 2, MEASURES["commutator"].tiny_settings(), None)
    assert rows[0]["measure"] == "commutator" and rows[0]["value"] > 0 and math.isfinite(rows[0]["value"])
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_metrics_window_equals_the_formula_on_the_same_checkpoints():
    """The metrics stage keeps the update Gram one row at a time and the losses of a trailing
    window: its rows equal update_gap and loss_covariance on the last checkpoints."""
    from geoanatomy.model import GPT, ModelConfig
    from geoanatomy.stages.metrics import SignalWindow
    torch.manual_seed(0)
    model = GPT(ModelConfig(n_layer=1, d_model=16, n_head=2, vocab_size=12, block_size=8))
    w = SignalWindow(3)
    steps, thetas, losses = [0, 1, 3, 7, 15, 31], [], []
    rng = np.random.default_rng(0)
    for s in steps:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.01 * torch.randn_like(p) * (1 + s % 3))
        thetas.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double().numpy())
        losses.append(rng.random(20))
        rows = {r["measure"]: r["value"] for r in w.rows(s, model, losses[-1])}
    assert rows["update_gap"] == pytest.approx(sig.update_gap(np.stack(thetas[-4:]), steps[-4:]), rel=1e-4)
    cov = sig.loss_covariance(np.stack(losses[-3:]))
    assert rows["loss_cov_heat"] == pytest.approx(cov["heat_capacity"])
    assert rows["loss_cov_pr"] == pytest.approx(cov["participation_ratio"])
