"""The monitor's probe batch (``Probe``: token ids, mask, labels, positions) and the forward
pass that turns a model into (logits, layer names, hidden states) (``model_forward``)."""
from __future__ import annotations

import numpy as np
import torch

DEFAULT_PROBE_SIZE = 200    # probe rows (the pipeline's eval.n_samples); RankMe is capped at min(rows, d_model)


# ------------------------------------------------------------------------------ probe
class Probe:
    """A fixed probe batch: token ids (B, T), optional attention mask and labels, positions.

    ``labels`` (B, T) follow the Hugging Face convention: aligned with ``input_ids`` (shifted
    inside), -100 = not scored. Without labels the loss is the next-token loss over every
    non-padding token and there is no accuracy. ``chance``: the accuracy of a model that does
    not read the input (for ``accuracy_norm`` and acquisition). ``positions``: package doc."""

    def __init__(self, input_ids, attention_mask=None, labels=None, positions="last",
                 chance: float | None = None):
        self.input_ids = torch.as_tensor(input_ids, dtype=torch.long)
        if self.input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, T), got shape {tuple(self.input_ids.shape)}")
        B, T = self.input_ids.shape
        self.attention_mask = None if attention_mask is None else torch.as_tensor(attention_mask).long()
        self.labels = None if labels is None else torch.as_tensor(labels, dtype=torch.long)
        for what, t in (("attention_mask", self.attention_mask), ("labels", self.labels)):
            if t is not None and tuple(t.shape) != (B, T):
                raise ValueError(f"{what} must have the shape of input_ids {(B, T)}, got {tuple(t.shape)}")
        self._check_scored()
        self.chance = chance
        if not isinstance(positions, dict):
            positions = {_position_name(positions): positions}
        self.positions = {str(k): self._resolve(v) for k, v in positions.items()}

    def sha256(self) -> str:
        """sha256 of what the probe measures on: its token ids, attention mask, labels and
        positions (a resumed monitor refuses a probe with another hash: one table, one probe)."""
        import hashlib
        import json
        h = hashlib.sha256()
        for t in (self.input_ids, self.attention_mask, self.labels):
            h.update(b"-" if t is None else t.cpu().contiguous().numpy().tobytes() + str(tuple(t.shape)).encode())
        h.update(json.dumps({k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in self.positions.items()},
                            sort_keys=True, default=str).encode())
        return h.hexdigest()

    def _check_scored(self) -> None:
        """Refuse a probe with no token to score: the loss is of the next token, so some row needs
        a second token (labelled, when labels are given). Rows without one still give hidden
        states; they are left out of the loss and accuracy."""
        B, T = self.input_ids.shape
        if self.labels is not None:
            scored = (self.labels[:, 1:] != -100).sum(1)
            what = "labelled token after its first position (labels are shifted inside; -100 = not scored)"
        else:
            scored = (self.input_ids[:, 1:] >= 0).sum(1) if self.attention_mask is None else \
                self.attention_mask[:, 1:].bool().sum(1)
            what = "second token (the loss is of the next token)"
        none = torch.nonzero(scored == 0).flatten().tolist()
        if T < 2:
            raise ValueError(f"probe rows of {T} token: nothing to score, every row needs a {what}; "
                             f"give rows of at least 2 tokens")
        if len(none) == B:
            raise ValueError(f"no probe row has a {what}: nothing to score")

    def _resolve(self, spec):
        """('index', LongTensor (B,)) or ('mask', BoolTensor (B, T))."""
        B, T = self.input_ids.shape
        if isinstance(spec, str):
            if spec != "last":
                raise ValueError(f"position {spec!r}: use 'last', an int, a (B,) index tensor or a (B, T) mask")
            if self.attention_mask is None:
                return "index", torch.full((B,), T - 1, dtype=torch.long)
            m = self.attention_mask.bool()
            if not m.any(1).all():
                raise ValueError("a probe row has no token (attention_mask all zero)")
            return "index", (m.long() * torch.arange(T)).argmax(1)
        if isinstance(spec, (int, np.integer)):
            i = int(spec) + (T if spec < 0 else 0)
            if not 0 <= i < T:
                raise ValueError(f"position {spec} is outside the probe's {T} tokens")
            return "index", torch.full((B,), i, dtype=torch.long)
        t = torch.as_tensor(spec)
        if t.dtype == torch.bool:
            if tuple(t.shape) != (B, T) or not t.any(1).all():
                raise ValueError(f"a position mask must be (B, T) = {(B, T)} with a True in every row")
            return "mask", t
        t = t.long()
        if tuple(t.shape) != (B,) or (t < 0).any() or (t >= T).any():
            raise ValueError(f"a position index tensor must be (B,) = ({B},) with values in [0, {T})")
        return "index", t

    @classmethod
    def from_task(cls, data, n: int = DEFAULT_PROBE_SIZE, chance: float | None = None) -> Probe:
        """The pipeline's evaluation set of a ``tasks.TaskData`` (first ``n`` held-out rows),
        answer tokens labelled, positions ``first`` (predicts the first answer token) and
        ``answer_mean`` (mean over the answer-predicting positions): the same hidden states,
        loss and accuracy as ``stages.metrics`` (``chance``: ``baselines.training_baselines``)."""
        seq = torch.as_tensor(data.eval_set(n), dtype=torch.long)           # (n, S)
        S, na = seq.shape[1], data.spec.n_answer
        labels = seq.clone()
        labels[:, :S - na] = -100
        first = data.spec.first_answer_pred_pos
        mask = torch.zeros(seq.shape, dtype=torch.bool)
        mask[:, first:S - 1] = True
        return cls(seq, labels=labels, positions={"first": first, "answer_mean": mask}, chance=chance)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


def _position_name(spec) -> str:
    if isinstance(spec, str):
        return spec
    if isinstance(spec, (int, np.integer)):
        return f"pos{int(spec)}"
    return "mask_mean" if torch.as_tensor(spec).dtype == torch.bool else "index"


# ------------------------------------------------------------------------------ forward passes
def model_forward(model, input_ids, attention_mask=None):
    """(logits (B, T, V), layer names, hidden states L+2 x (B, T, d)) of the project's GPT or
    a Hugging Face causal LM (package doc)."""
    from ..hf import forward_hidden, unwrap
    from ..model import GPT
    m = unwrap(model)
    if isinstance(m, GPT):
        logits, hidden = m(input_ids, return_hidden=True)
        return logits, m.layer_names(), hidden
    if hasattr(getattr(m, "config", None), "num_hidden_layers"):
        return forward_hidden(m, input_ids, attention_mask)
    raise TypeError(f"{type(m).__name__}: not the project's GPT nor a Hugging Face causal LM; "
                    f"pass forward_fn(model, input_ids, attention_mask) -> (logits, names, hidden states)")


def _nll64(logits: torch.Tensor, targets: torch.Tensor, chunk: int = 1 << 22) -> torch.Tensor:
    """-log p(target) in float64 for rows of logits (n, V), in chunks of ``chunk`` elements."""
    V = logits.shape[-1]
    step = max(1, chunk // V)
    return torch.cat([-torch.log_softmax(logits[i:i + step].to(torch.float64), -1)
                      .gather(-1, targets[i:i + step, None])[:, 0] for i in range(0, len(logits), step)])
