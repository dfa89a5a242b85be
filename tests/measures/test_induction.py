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


def _induction_weights(V: int, T: int, beta: float = 40.0) -> GPT:
    """A two-layer, one-head GPT whose weights are set by hand to the induction circuit (Olsson
    et al.): residual = [token one-hot (V) | position one-hot (T) | previous token (V)].
    Block 0's head attends from position p to p - 1 (its query reads p, its key reads p' + 1)
    and writes the attended token's identity into the previous-token slot; block 1's head
    queries with the current token and keys on that slot, so it attends to the position after
    an earlier copy of its token. MLPs are zero; LayerNorms keep their unit gains (the patterns
    survive them: every position has the same number of active dimensions)."""
    d = 2 * V + T
    m = GPT(ModelConfig(n_layer=2, d_model=d, n_head=1, vocab_size=V, block_size=T, attn_impl="math"))
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        for b in m.blocks:
            b.ln_1.weight.fill_(1.0)
            b.ln_2.weight.fill_(1.0)
        m.ln_f.weight.fill_(1.0)
        m.wte.weight[:, :V] = torch.eye(V)                     # (tied head: reads the token slot)
        m.wpe.weight[:, V:V + T] = torch.eye(T)
        a0 = m.blocks[0].attn
        Wq, Wk, Wv = (a0.c_attn.weight[i * d:(i + 1) * d] for i in range(3))   # (out, in) each
        for p in range(T):
            Wq[p, V + p] = beta                               # query: my position
            if p + 1 < T:
                Wk[p + 1, V + p] = beta                       # key: position p' announces p' + 1
        for v in range(V):
            Wv[v, v] = 1.0                                    # value: the token
            a0.c_proj.weight[V + T + v, v] = 1.0              # written to the previous-token slot
        a1 = m.blocks[1].attn
        Wq, Wk = (a1.c_attn.weight[i * d:(i + 1) * d] for i in range(2))
        for v in range(V):
            Wq[v, v] = beta                                   # query: my token
            Wk[v, V + T + v] = beta                           # key: the token before me
    return m.eval()


def test_hand_built_induction_weights_score_one_at_the_induction_head_and_zero_at_the_previous_token_head():
    """The weight-level known answer: on sequences BOS, a segment of distinct tokens, the segment
    again, the hand-built induction head (block 1) puts almost all of a repeated token's
    attention on the token after its first copy (prefix-matching score > 0.95), the
    previous-token head (block 0) almost none (< 0.05: it attends to the position before);
    knocking out block 0's output takes the induction head's score down to about uniform."""
    V, T, L = 12, 15, 7                                       # token 0 = BOS, never repeated
    g = np.random.default_rng(0)
    segs = [g.permutation(np.arange(1, V))[:L] for _ in range(32)]
    rows = np.stack([np.concatenate([[0], seg, seg]) for seg in segs])
    m = _induction_weights(V, T)
    pats = attention_patterns(m, torch.as_tensor(rows))
    for query in range(L + 2, 2 * L + 1):                   # every repeated token but the first
        s = prefix_matching_score(pats, rows, query)
        assert s[1, 0] > 0.95 and s[0, 0] < 0.05, (query, s)
    # block 0 is a previous-token head: position p attends to p - 1
    prev = pats[0][:, 0]
    assert float(prev[:, 5, 4].min()) > 0.95
    # with the previous-token head's output removed (block 0 zeroed), the induction head has no
    # key to match and its score falls to about the uniform share
    with torch.no_grad():
        m.blocks[0].attn.c_proj.weight.zero_()
    s = prefix_matching_score(attention_patterns(m, torch.as_tensor(rows)), rows, L + 3)
    assert s[1, 0] < 0.5
