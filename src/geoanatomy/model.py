"""GPT-2-style pre-LayerNorm decoder-only transformer (after karpathy/nanoGPT).

Activation naming (used in every table as ``layer``), TransformerLens-like::

    layer_index 0        "embed"        token + position embedding (residual stream input)
    layer_index i=1..L   "block{i-1}"   residual stream after block i-1 (resid_post)
    layer_index L+1      "ln_final"     after the final LayerNorm (what the unembedding reads)

``forward(idx, return_hidden=True)`` returns logits (B, T, V) and the list of
those L+2 tensors, each (B, T, d_model).

Attention: ``attn_impl="sdpa"`` uses torch's fused scaled_dot_product_attention
(fast, but its fused CPU/GPU kernels have no second derivative, pytorch#116350,
#117629, #128971); ``attn_impl="math"`` is explicit softmax(QK^T/sqrt(d))V and
must be used for Hessian-vector products, forward-mode AD and vmap(grad).
The two agree to float32 rounding; switch with ``model.set_attn_impl``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .sizes import SIZES, layer_names  # torch-free model facts
from .tasks import VOCAB_SIZE


@dataclass
class ModelConfig:
    n_layer: int = 2
    d_model: int = 128
    n_head: int = 4
    vocab_size: int = VOCAB_SIZE
    block_size: int = 64
    attn_impl: str = "sdpa"   # "sdpa" | "math"

    @classmethod
    def from_size(cls, size: str, **kw) -> "ModelConfig":
        if size not in SIZES:
            raise ValueError(f"unknown size {size!r}; allowed: {list(SIZES)}")
        n_layer, d_model, n_head = SIZES[size]
        return cls(n_layer=n_layer, d_model=d_model, n_head=n_head, **kw)

    def to_dict(self) -> dict:
        return asdict(self)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.attn_impl = cfg.attn_impl
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)                        # 3 x (B, T, C)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)              # (B, H, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if self.attn_impl == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, hs)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)             # (B, H, T, T)
            att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
            y = F.softmax(att, dim=-1) @ v                               # (B, H, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.c_proj = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying (GPT-2)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2 scaled init of residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def layer_names(self) -> list[str]:
        return layer_names(self.cfg.n_layer)

    def set_attn_impl(self, impl: str) -> None:
        if impl not in ("sdpa", "math"):
            raise ValueError(f"attn_impl must be 'sdpa' or 'math', got {impl!r}")
        self.cfg.attn_impl = impl
        for b in self.blocks:
            b.attn.attn_impl = impl

    def forward(self, idx: torch.Tensor, return_hidden: bool = False):
        """idx (B, T) int64 -> logits (B, T, V) [, hidden: list of L+2 tensors (B, T, d)]."""
        B, T = idx.shape
        if T > self.cfg.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.cfg.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)[None]                          # (B, T, d)
        hidden = [x] if return_hidden else None
        for block in self.blocks:
            x = block(x)
            if return_hidden:
                hidden.append(x)
        x = self.ln_f(x)
        if return_hidden:
            hidden.append(x)
        logits = self.lm_head(x)                                          # (B, T, V)
        return (logits, hidden) if return_hidden else logits



def answer_loss(model: GPT, seq: torch.Tensor, n_answer: int) -> torch.Tensor:
    """The training loss: mean cross-entropy over the answer tokens only (the prompt is
    given). seq (B, S) token ids; the answer is seq[:, S - n_answer:]. -> scalar."""
    x, y = seq[:, :-1], seq[:, 1:]                                       # (B, S-1)
    logits = model(x)[:, -n_answer:, :]                                   # (B, n_answer, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[:, -n_answer:].reshape(-1))


def padded_answer_loss(model: GPT, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The multi-task protocol's training loss (geoanatomy.mixture): tokens (B, S) right-padded
    rows of different tasks, mask (B, S - 1) bool, True where the model input position predicts
    an answer token of that row. Per row the mean cross-entropy over its answer tokens, then the
    mean over rows. -> scalar."""
    x, y = tokens[:, :-1], tokens[:, 1:]                                  # (B, S-1)
    logits = model(x)                                                      # (B, S-1, V)
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none").view(y.shape)
    m = mask.to(ce.dtype)
    return ((ce * m).sum(1) / m.sum(1)).mean()
