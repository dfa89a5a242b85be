"""RankMe / effective rank on matrices with known spectra."""
import math
import warnings

import pytest
import torch

from geoanatomy.measures.rankme import effective_rank, rankme, rankme_from_singular_values


def closed_form(s, eps=1e-7):
    tot = sum(s)
    p = [x / tot + eps for x in s]
    return math.exp(-sum(q * math.log(q) for q in p))


def test_identity_has_full_rank():
    assert rankme(torch.eye(16)) == pytest.approx(16.0, rel=1e-5)
    assert effective_rank(torch.eye(16)) == pytest.approx(16.0, rel=1e-12)


def test_rank_one_is_one():
    u, v = torch.randn(50, 1, dtype=torch.float64), torch.randn(1, 20, dtype=torch.float64)
    assert effective_rank(u @ v) == pytest.approx(1.0, abs=1e-6)
    # with eps the 19 zero singular values add 19 * 1e-7 mass: exp(entropy) just above 1
    assert rankme(u @ v) == pytest.approx(closed_form([1.0] + [0.0] * 19), rel=1e-6)


def test_known_spectrum_closed_form():
    s = [4.0, 2.0, 1.0, 1.0, 0.5]
    Z = torch.zeros(8, 5, dtype=torch.float64)
    Z[:5, :5] = torch.diag(torch.tensor(s, dtype=torch.float64))
    assert rankme(Z) == pytest.approx(closed_form(s), rel=1e-9)
    assert effective_rank(Z) == pytest.approx(closed_form(s, eps=0.0), rel=1e-9)
    assert rankme_from_singular_values(torch.tensor(s)) == pytest.approx(closed_form(s), rel=1e-9)


def test_scale_and_rotation_invariance():
    g = torch.Generator().manual_seed(0)
    Z = torch.randn(64, 12, generator=g, dtype=torch.float64) @ torch.diag(torch.linspace(0.1, 3, 12,
                                                                                          dtype=torch.float64))
    Q, _ = torch.linalg.qr(torch.randn(12, 12, generator=g, dtype=torch.float64))
    Q2, _ = torch.linalg.qr(torch.randn(64, 64, generator=g, dtype=torch.float64))
    base = rankme(Z)
    assert rankme(7.5 * Z) == pytest.approx(base, rel=1e-9)
    assert rankme(Z @ Q) == pytest.approx(base, rel=1e-9)
    assert rankme(Q2 @ Z) == pytest.approx(base, rel=1e-9)
    assert 1.0 < base < 12.0


def test_centred_variant_differs_and_constant_rows():
    Z = torch.ones(10, 4, dtype=torch.float64) * torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    assert rankme(Z) == pytest.approx(1.0, abs=1e-5)          # uncentred: a constant matrix is rank one
    assert math.isnan(rankme(Z, centred=True))                 # centred: all-zero, undefined
    W = torch.randn(100, 3, dtype=torch.float64) + 10.0        # big common offset dominates uncentred
    assert rankme(W) < 2.0 < rankme(W, centred=True)


def test_warns_when_fewer_samples_than_dims():
    with pytest.warns(UserWarning, match="capped"):
        v = rankme(torch.randn(4, 10))
    assert v <= 4.0 + 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rankme(torch.randn(10, 4))


def test_non_finite_input_gives_nan():
    Z = torch.randn(10, 4)
    Z[2, 1] = float("nan")
    assert math.isnan(rankme(Z)) and math.isnan(effective_rank(Z))
