"""The prefix-matching score against hand-made attention patterns (one-hot induction, uniform,
previous-token) and the extracted patterns against the model's own attention output."""
import numpy as np
import pytest
import torch

from geoanatomy.measures.induction import (attention_patterns, prefix_matching_score, prefix_targets,
                                           uniform_score)
from geoanatomy.model import GPT, ModelConfig


def _patterns(B, H, T, rows):
    att = torch.zeros(B, H, T, T, dtype=torch.float64)
    for (b, h, t), w in rows.items():
        att[b, h, t] = torch.as_tensor(w, dtype=torch.float64)
    return att


def test_targets_are_the_tokens_after_earlier_copies():
    tok = np.array([[5, 7, 9, 5, 7, 9, 5]])
    assert np.flatnonzero(prefix_targets(tok, 6)[0]).tolist() == [1, 4]     # after the 5s at 0 and 3
    assert np.flatnonzero(prefix_targets(tok, 2)[0]).tolist() == []         # no earlier 9


def test_a_hand_built_induction_head_scores_one_and_others_their_closed_form():
    tok = np.array([[3, 1, 4, 1, 5, 9, 3, 1, 4], [2, 6, 5, 3, 5, 8, 2, 6, 5]])
    T, q = tok.shape[1], 6                          # query: the second 3 / 2, its target position 1
    induction = np.zeros(T)
    induction[1] = 1.0
    previous = np.zeros(T)
    previous[q - 1] = 1.0
    uniform = np.r_[np.full(q + 1, 1 / (q + 1)), np.zeros(T - q - 1)]
    att = torch.zeros(2, 3, T, T, dtype=torch.float64)
    for b in range(2):
        att[b, 0, q], att[b, 1, q], att[b, 2, q] = (torch.as_tensor(w) for w in (induction, previous, uniform))
    s = prefix_matching_score([att], tok, q)
    assert s.shape == (1, 3)
    assert s[0, 0] == pytest.approx(1.0) and s[0, 1] == pytest.approx(0.0)
    assert s[0, 2] == pytest.approx(1 / 7) == pytest.approx(uniform_score(tok, q))


def test_extracted_patterns_reproduce_each_blocks_attention_output():
    torch.manual_seed(0)
    m = GPT(ModelConfig.from_size("nano", block_size=16)).eval()
    seq = torch.randint(0, 32, (4, 12))
    pats = attention_patterns(m, seq)
    assert len(pats) == 2 and pats[0].shape == (4, 4, 12, 12)
    assert torch.allclose(pats[0].sum(-1), torch.ones(4, 4, 12, dtype=torch.float64))
    assert torch.all(pats[0].triu(1) == 0)                                  # causal
    block = m.blocks[0]
    with torch.no_grad():
        x = block.ln_1(m.wte(seq) + m.wpe(torch.arange(12))[None])
        v = block.attn.c_attn(x).split(128, dim=2)[2].view(4, 12, 4, 32).transpose(1, 2).double()
        y = (pats[0] @ v).transpose(1, 2).reshape(4, 12, 128)
        want = block.attn(x).double()
    assert torch.allclose(block.attn.c_proj.double()(y), want, atol=1e-5)
