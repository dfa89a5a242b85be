"""Model sizes (parameter counts pinned), attention paths, hidden-state naming."""
import pytest
import torch

from geoanatomy.model import GPT, ModelConfig
from geoanatomy.sizes import SIZES, n_params
from geoanatomy.tasks import VOCAB_SIZE

PINNED = {"nano": 409_088, "micro": 1_353_408, "small": 4_763_648, "medium": 19_358_080,
          "large": 85_129_728, "xlarge": 151_255_040}


def test_size_table_is_pinned():
    assert set(SIZES) == set(PINNED)
    for name, n in PINNED.items():
        assert n_params(name, VOCAB_SIZE) == n
    assert abs(PINNED["nano"] / 405e3 - 1) < 0.05        # paper: ~405K
    assert abs(PINNED["large"] / 85e6 - 1) < 0.05        # paper: ~85M
    assert abs(PINNED["xlarge"] / 151e6 - 1) < 0.05      # paper: ~151M
    vals = [PINNED[k] for k in ["nano", "micro", "small", "medium", "large", "xlarge"]]
    ratios = [b / a for a, b in zip(vals, vals[1:])]
    assert all(1.5 < r < 6 for r in ratios)              # roughly geometric, increasing


@pytest.mark.parametrize("size", ["nano", "micro", "small"])
def test_instantiated_count_matches_formula(size):
    assert GPT(ModelConfig.from_size(size)).n_params() == PINNED[size]


def test_math_and_sdpa_attention_agree_and_hidden_names():
    torch.manual_seed(0)
    m = GPT(ModelConfig.from_size("nano"))
    x = torch.randint(0, 32, (3, 17))
    a, ha = m(x, return_hidden=True)
    m.set_attn_impl("math")
    b, hb = m(x, return_hidden=True)
    assert torch.allclose(a, b, atol=1e-5)
    assert m.layer_names() == ["embed", "block0", "block1", "ln_final"]
    assert len(ha) == len(hb) == 4 and ha[0].shape == (3, 17, 128)


def test_causality():
    torch.manual_seed(0)
    m = GPT(ModelConfig.from_size("nano"))
    x = torch.randint(0, 32, (1, 10))
    y = x.clone()
    y[0, 7] = (y[0, 7] + 1) % 32
    assert torch.allclose(m(x)[0, :7], m(y)[0, :7], atol=1e-6)
    assert not torch.allclose(m(x)[0, 7], m(y)[0, 7])


def test_math_path_has_second_derivatives():
    torch.manual_seed(0)
    m = GPT(ModelConfig(n_layer=1, d_model=16, n_head=2))
    m.set_attn_impl("math")
    x = torch.randint(0, 32, (2, 6))
    loss = m(x).logsumexp(-1).mean()
    g = torch.autograd.grad(loss, list(m.parameters()), create_graph=True)
    hv = torch.autograd.grad(sum((gi * gi).sum() for gi in g), list(m.parameters()), allow_unused=True)
    assert any(h is not None and h.abs().sum() > 0 for h in hv)
