"""Measuring a Hugging Face causal LM on a probe set: the rows of one checkpoint.

The one code path for the Pythia extraction (``pythia.extract``) and the checkpoint scanner
(``geoanatomy.scan``). A probe set is a shipped benchmark (accuracy by option
log-likelihood, ``pythia.scoring``) or a list of prompts (the probe-set loss); the geometry
is RankMe (both variants) and the mean share of every layer at the last prompt token.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


class ScanError(RuntimeError):
    """The folder or the probe set cannot be measured; the message says what to fix."""


# ---------------------------------------------------------------------------- probe sets
@dataclass
class ProbeSet:
    """What every checkpoint is measured on: benchmark items (``kind`` "benchmark") or
    prompts (``kind`` "prompts"), with their token ids."""

    name: str
    kind: str
    encoded: list                       # benchmark: [(prompt ids, [option ids])]; prompts: [ids]
    items: list = field(default_factory=list)
    texts: list = field(default_factory=list)

    def identity(self) -> str:
        """sha256 of the probe set's content (tokens, answers): part of the resume key."""
        h = hashlib.sha256()
        h.update(json.dumps([self.name, self.kind, self.encoded,
                             [it.answer for it in self.items]]).encode())
        return h.hexdigest()

    def longest(self) -> int:
        """Tokens in the longest sequence the model reads (prompt + option for benchmarks)."""
        if self.kind == "benchmark":
            return max(len(p) + len(o) for p, opts in self.encoded for o in opts)
        return max(len(x) for x in self.encoded)

    @classmethod
    def from_items(cls, name: str, items, encoded) -> ProbeSet:
        """A benchmark probe set from ``pythia.benchmarks`` items and ``pythia.scoring.encode``."""
        return cls(name, "benchmark", [(list(p), [list(o) for o in opts]) for p, opts in encoded], list(items))


def load_probe_set(probe: str, tokenizer, n_items: int | None = None, seed: int = 0) -> ProbeSet:
    """A shipped benchmark by name or a text file of prompts (module doc)."""
    from .settings import BENCHMARKS
    if probe in BENCHMARKS:
        from .benchmarks import load_benchmark
        from .scoring import encode
        items = load_benchmark(probe, n_items, seed)
        return ProbeSet.from_items(probe, items, encode(tokenizer, items))
    path = Path(probe)
    if not path.is_file():
        raise ScanError(f"probe set {probe!r} is neither a shipped benchmark ({', '.join(BENCHMARKS)}) "
                        f"nor a file")
    texts = [ln.rstrip("\r") for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if n_items is not None:
        texts = texts[:int(n_items)]
    if len(texts) < 2:
        raise ScanError(f"{path}: {len(texts)} prompt(s); a probe file needs at least 2 non-blank lines "
                        f"(RankMe of one row is 1 by construction)")
    ids = [list(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    empty = [i + 1 for i, x in enumerate(ids) if not x]
    if empty:
        raise ScanError(f"{path}: prompts {empty[:5]} encode to no tokens")
    return ProbeSet(path.name, "prompts", ids, texts=texts)


# ---------------------------------------------------------------------------- measurement
def geometry_rows_of(hidden: dict, names: list[str], last_token, run: str, step: int, eps: float,
                     position: str = "last_prompt") -> list[dict]:
    """RankMe (both variants) and mean share of every layer's (N, d) matrix at one position
    (``measures.geometry.matrix_rows``), with the Pythia branch's settings (eps, d, max_rank,
    n_unique_last_tokens, top_last_token_share)."""
    from ..measures.geometry import matrix_rows
    rows = []
    _, counts = np.unique(np.asarray(last_token), return_counts=True)
    n_unique_last = int(len(counts))
    for li, name in enumerate(names):
        Z = hidden[name]                                               # (N, d)
        N, d = Z.shape
        settings = {"eps": eps, "d": int(d), "max_rank": int(min(N, d)), "n_unique_last_tokens": n_unique_last,
                    "top_last_token_share": float(counts.max() / N)}
        if name == "embed" and n_unique_last == 1:
            settings["constant_by_construction"] = True                # same last token in every prompt
        key = {"run": run, "step": step, "layer": name, "layer_index": li, "position": position}
        rows += matrix_rows(Z, eps=eps, key=key, settings=settings, quiet=True)  # N < d: max_rank says so
    return rows


def benchmark_rows(res: dict, items, run: str, step: int, scoring: str) -> list[dict]:
    """The Pythia branch's behaviour rows of one benchmark from a ``score`` result."""
    from .scoring import choice_stats
    answers = [it.answer for it in items]
    N = len(items)
    chance = float(np.mean([it.chance for it in items]))
    stats = {sc: choice_stats(res[sc], answers) for sc in ("sum", "mean")}
    lp_sum = float(np.mean([s[a] for s, a in zip(res["sum"], answers)]))
    lp_tok = float(np.mean([s[a] for s, a in zip(res["mean"], answers)]))
    chance_lc = float(np.mean([np.log(it.chance) for it in items]))
    beh = dict(run=run, step=step, layer="output", layer_index=-1, position="options", variant="", n_samples=N)
    acc = stats[scoring]["accuracy"]
    defn = {"sum": "argmax over options of the sum of option-token log-probs",
            "mean": "argmax over options of the mean option-token log-prob"}
    return [
        {**beh, "measure": "accuracy", "value": acc, "settings": {"scoring": scoring, "definition": defn[scoring]}},
        {**beh, "measure": "accuracy_norm", "value": (acc - chance) / (1 - chance),
         "settings": {"scoring": scoring, "chance": chance}},
        {**beh, "measure": "accuracy_sum", "value": stats["sum"]["accuracy"], "settings": {"definition": defn["sum"]}},
        {**beh, "measure": "accuracy_mean", "value": stats["mean"]["accuracy"], "settings": {"definition": defn["mean"]}},
        {**beh, "measure": "logprob", "value": lp_sum, "settings": {"of": "correct option, summed over its tokens"}},
        {**beh, "measure": "logprob_per_token", "value": lp_tok, "settings": {"of": "correct option, per-token mean"}},
        {**beh, "measure": "logprob_choice", "value": stats[scoring]["logprob_choice"],
         "settings": {"scoring": scoring, "chance": chance_lc}},
    ]


def measure_model(model, probe: ProbeSet, *, run: str, step: int, batch_size: int = 16, device: str = "cpu",
                  eps: float = 1e-7, scoring: str = "sum") -> list[dict]:
    """Every row of one checkpoint on one probe set (module doc): behaviour, then RankMe (both
    variants) and the mean share per layer at the last prompt token. ``model`` is any HF causal
    LM in eval mode on ``device`` (half precision is cast to float32 first); GPT-NeoX is scored
    by ``pythia.scoring.score`` itself."""
    from ..hf import for_scoring, hidden_names, prompt_states, score_items
    if scoring not in ("sum", "mean"):
        raise ValueError(f"scoring must be 'sum' or 'mean', got {scoring!r}")
    model = for_scoring(model)                       # half precision -> float32 (no-op otherwise)
    limit = getattr(model.config, "max_position_embeddings", None)
    longest = probe.longest()
    if isinstance(limit, int) and longest > limit:
        raise ScanError(f"probe set {probe.name}: a sequence of {longest} tokens exceeds the model's "
                        f"{limit} positions; use shorter prompts or fewer items (--n-items)")
    if probe.kind == "benchmark":
        res = score_items(model, probe.encoded, batch_size, device)
        rows = benchmark_rows(res, probe.items, run, step, scoring)
    elif probe.kind == "prompts":
        res = prompt_states(model, probe.encoded, batch_size, device)
        n = len(probe.encoded)
        rows = [{"run": run, "step": step, "measure": "loss", "layer": "output", "layer_index": -1,
                 "position": "tokens", "variant": "probe", "n_samples": n,
                 "value": res["nll_sum"] / res["n_tokens"] if res["n_tokens"] else float("nan"),
                 "settings": {"definition": "mean next-token loss over the prompts (every token after each "
                                            "prompt's first, token-weighted), float64, nats",
                              "n_tokens": int(res["n_tokens"]),
                              "mean_of_prompt_means": float(np.nanmean(res["per_prompt"]))
                              if np.isfinite(res["per_prompt"]).any() else None}}]
    else:
        raise ValueError(f"unknown probe kind {probe.kind!r}")
    names = [n for n in hidden_names(model) if n in res["hidden"]]
    return rows + geometry_rows_of(res["hidden"], names, res["last_token"], run, step, eps)
