"""Measuring a Hugging Face causal LM on a probe set: the rows of one checkpoint.

The one code path for the Pythia extraction (``pythia.extract``) and the checkpoint scanner
(``geoanatomy.scan``). A probe set is a shipped benchmark (accuracy by option
log-likelihood, ``hf.choice``) or a list of prompts (the probe-set loss); the geometry
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
    encoded: list                       # benchmark: [(prompt ids, [option ids])]; prompts: [ids];
                                        # completions: [(prompt ids, completion ids)]
    items: list = field(default_factory=list)
    texts: list = field(default_factory=list)
    unknown_share: float | None = None  # share of the probe's tokens that are the tokenizer's unknown token

    def identity(self) -> str:
        """sha256 of the probe set's content (tokens, answers): part of the resume key."""
        h = hashlib.sha256()
        h.update(json.dumps([self.name, self.kind, self.encoded,
                             [it.answer for it in self.items]]).encode())
        return h.hexdigest()

    def longest(self) -> int:
        """Tokens in the longest sequence the model reads (prompt + option for benchmarks,
        prompt + completion for completions)."""
        if self.kind == "benchmark":
            return max(len(p) + len(o) for p, opts in self.encoded for o in opts)
        if self.kind == "completions":
            return max(len(p) + len(c) for p, c in self.encoded)
        return max(len(x) for x in self.encoded)

    @classmethod
    def from_items(cls, name: str, items, encoded) -> ProbeSet:
        """A benchmark probe set from ``hf.benchmarks`` items and ``hf.choice.encode``."""
        return cls(name, "benchmark", [(list(p), [list(o) for o in opts]) for p, opts in encoded], list(items))


UNKNOWN_WARN_SHARE = 0.05   # warn when more than this share of a probe file's tokens are the unknown token


def _read_probe_lines(path: Path) -> list[str]:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        line = path.read_bytes()[:e.start].count(b"\n") + 1
        raise ScanError(f"probe file {path}: not UTF-8 text (byte {e.start}, line {line}: "
                        f"{e.reason}); save it as UTF-8") from None
    except OSError as e:
        raise ScanError(f"probe file {path} cannot be read ({e.strerror or e})") from None
    return [ln.rstrip("\r") for ln in text.splitlines()]


def _completion_pairs(path: Path, lines: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for i, ln in enumerate(lines, 1):
        if not ln.strip():
            continue
        try:
            rec = json.loads(ln)
        except json.JSONDecodeError as e:
            raise ScanError(f"probe file {path} line {i}: not a JSON object ({e.msg}); a .jsonl probe file "
                            f"holds one {{\"prompt\": ..., \"completion\": ...}} per line") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("prompt"), str) \
                or not isinstance(rec.get("completion"), str):
            raise ScanError(f"probe file {path} line {i}: needs string fields \"prompt\" and \"completion\" "
                            f"(got {sorted(rec) if isinstance(rec, dict) else type(rec).__name__})")
        pairs.append((rec["prompt"], rec["completion"]))
    return pairs


def _unknown_share(tokenizer, seqs: list[list[int]]) -> float | None:
    unk = getattr(tokenizer, "unk_token_id", None)
    n = sum(len(x) for x in seqs)
    if unk is None or not n:
        return None
    return float(sum(t == unk for x in seqs for t in x) / n)


def load_probe_set(probe: str, tokenizer, n_items: int | None = None, seed: int = 0, log=None) -> ProbeSet:
    """A shipped benchmark by name or a probe file: ``.jsonl`` with one ``{"prompt": ...,
    "completion": ...}`` per line (kind "completions": only the completion is scored, the
    prompt is context, as a model trained with prompt labels masked was trained), any other
    file one prompt a line (kind "prompts": every token after the first is scored). ``log``:
    where the unknown-token warning goes (more than ``UNKNOWN_WARN_SHARE`` of the tokens are
    the tokenizer's unknown token)."""
    from ..config.pythia import BENCHMARKS
    if probe in BENCHMARKS:
        from .benchmarks import load_benchmark
        from .choice import encode
        items = load_benchmark(probe, n_items, seed)
        return ProbeSet.from_items(probe, items, encode(tokenizer, items))
    path = Path(probe)
    if not path.is_file():
        raise ScanError(f"probe set {probe!r} is neither a shipped benchmark ({', '.join(BENCHMARKS)}) "
                        f"nor a file")
    lines = _read_probe_lines(path)
    enc = lambda t: list(tokenizer(t, add_special_tokens=False)["input_ids"])  # noqa: E731
    if path.suffix.lower() == ".jsonl":
        pairs = _completion_pairs(path, lines)
        if n_items is not None:
            pairs = pairs[:int(n_items)]
        if len(pairs) < 2:
            raise ScanError(f"{path}: {len(pairs)} prompt/completion pair(s); a probe file needs at least 2 "
                            f"(RankMe of one row is 1 by construction)")
        encoded = [(enc(p), enc(c)) for p, c in pairs]
        bad = [i + 1 for i, (p, c) in enumerate(encoded) if not p or not c]
        if bad:
            raise ScanError(f"{path}: pairs {bad[:5]} have a prompt or a completion that encodes to no tokens")
        ps = ProbeSet(path.name, "completions", encoded, texts=[p + c for p, c in pairs])
        seqs = [p + c for p, c in encoded]
    else:
        texts = [t for t in lines if t.strip()]
        if n_items is not None:
            texts = texts[:int(n_items)]
        if len(texts) < 2:
            raise ScanError(f"{path}: {len(texts)} prompt(s); a probe file needs at least 2 non-blank lines "
                            f"(RankMe of one row is 1 by construction)")
        ids = [enc(t) for t in texts]
        empty = [i + 1 for i, x in enumerate(ids) if not x]
        if empty:
            raise ScanError(f"{path}: prompts {empty[:5]} encode to no tokens")
        ps = ProbeSet(path.name, "prompts", ids, texts=texts)
        seqs = ids
    ps.unknown_share = _unknown_share(tokenizer, seqs)
    if ps.unknown_share is not None and ps.unknown_share > UNKNOWN_WARN_SHARE and log:
        log(f"[scan] WARNING: {ps.unknown_share:.0%} of the tokens of {path} are the tokenizer's unknown token "
            f"{getattr(tokenizer, 'unk_token', None)!r}: the tokenizer does not cover this text (is it the "
            f"model's tokenizer?); the loss and geometry then measure the unknown token")
    return ps


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
    from .choice import choice_stats
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
        {**beh, "measure": "accuracy_mean", "value": stats["mean"]["accuracy"], "settings": {"definition":
                                                                                             defn["mean"]}},
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
    by ``hf.choice.score`` itself."""
    from . import for_scoring, hidden_names, prompt_states, score_items
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
    elif probe.kind == "completions":
        seqs = [p + c for p, c in probe.encoded]
        res = prompt_states(model, seqs, batch_size, device, starts=[len(p) for p, _ in probe.encoded],
                            state_at=[len(p) - 1 for p, _ in probe.encoded])
        n = len(seqs)
        beh = {"run": run, "step": step, "layer": "output", "layer_index": -1, "position": "completion",
               "n_samples": n}
        acc = float(res["exact"].mean())
        rows = [{**beh, "measure": "loss", "variant": "probe",
                 "value": res["nll_sum"] / res["n_tokens"] if res["n_tokens"] else float("nan"),
                 "settings": {"definition": "mean next-token loss over the completion tokens (the prompt is "
                                            "context only, as with prompt labels of -100), token-weighted, "
                                            "float64, nats", "n_tokens": int(res["n_tokens"])}},
                {**beh, "measure": "accuracy", "variant": "", "value": acc,
                 "settings": {"definition": "every completion token the argmax given the prompt and the "
                                            "completion so far (exact match under teacher forcing)"}},
                {**beh, "measure": "token_accuracy", "variant": "",
                 "value": res["n_right_tokens"] / res["n_tokens"] if res["n_tokens"] else float("nan")},
                {**beh, "measure": "accuracy_norm", "variant": "", "value": acc,
                 "settings": {"chance": 0.0, "note": "a free completion has no chance level: chance taken as 0, "
                                                     "so accuracy_norm = accuracy"}}]
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
