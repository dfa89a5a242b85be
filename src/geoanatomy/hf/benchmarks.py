"""Benchmark items for the Pythia branch: seven fixed diagnostic sets + deduction puzzles.

Fixed sets (``data/<name>.jsonl``, written for this project, one JSON object a line:
``{"id", "prompt", "options": [...], "answer": index}``; options are continuations of
the prompt and start with a space):

=========== ===== =====================================================================
syntax       40   grammatical vs ungrammatical continuation (agreement across
                  attractors, irregular past, reflexives, auxiliaries, a/an, word order)
semantics    40   word meaning: young animals, antonyms, synonyms, hypernyms, roles
arithmetic   60   "a + b =", "a - b =", "a * b =" (operands up to 50 / 99 / 12), 4 options
icl          40   in-context learning, 3 demonstrations + query: antonyms, upper case,
                  plurals, next letter, next number, fruit/vegetable, sentiment,
                  English -> French numbers
factual      40   capitals, planets, authors, chemistry, geography, currencies
reasoning    40   syllogisms, conditionals, calendar and kinship steps, 3-person orders
general      40   everyday common sense (tools, weather, food, the body)
=========== ===== =====================================================================

Generated sets ``deduction3``, ``deduction5``, ``deduction7``: logical-deduction puzzles
(``deduction.py``), ``n_items`` each (default 50), seeded by ``pythia.deduction_seed``.

``n_items`` caps a fixed set at its first n items (file order is fixed).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources

from ..config.pythia import BENCHMARKS, DEDUCTION_BENCHMARKS, DEDUCTION_DEFAULT_ITEMS, FIXED_BENCHMARKS


class BenchmarkError(ValueError):
    """A benchmark file or item is malformed; the message names the file and line."""


@dataclass(frozen=True)
class Item:
    id: str
    prompt: str
    options: tuple[str, ...]
    answer: int
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def chance(self) -> float:
        return 1.0 / len(self.options)


def check_item(d: dict, where: str) -> Item:
    """Validate one record (prompt, options, answer index) -> Item; errors name ``where``."""
    for k in ("id", "prompt", "options", "answer"):
        if k not in d:
            raise BenchmarkError(f"{where}: missing key {k!r}")
    if not isinstance(d["prompt"], str) or not d["prompt"].strip():
        raise BenchmarkError(f"{where}: prompt must be a non-empty string")
    opts = d["options"]
    if not isinstance(opts, list) or len(opts) < 2 or not all(isinstance(o, str) and o.strip() for o in opts):
        raise BenchmarkError(f"{where}: options must be a list of >= 2 non-empty strings")
    if len(set(opts)) != len(opts):
        raise BenchmarkError(f"{where}: options repeat: {opts}")
    a = d["answer"]
    if not isinstance(a, int) or isinstance(a, bool) or not 0 <= a < len(opts):
        raise BenchmarkError(f"{where}: answer must be an index into options (0..{len(opts) - 1}), got {a!r}")
    meta = {k: v for k, v in d.items() if k not in ("id", "prompt", "options", "answer")}
    return Item(str(d["id"]), d["prompt"], tuple(opts), a, meta)


def load_fixed(name: str) -> list[Item]:
    """All items of a fixed diagnostic set, in file order."""
    if name not in FIXED_BENCHMARKS:
        raise BenchmarkError(f"unknown fixed benchmark {name!r}; known: {FIXED_BENCHMARKS}")
    res = resources.files("geoanatomy.hf") / "data" / f"{name}.jsonl"
    items = []
    for ln, line in enumerate(res.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise BenchmarkError(f"data/{name}.jsonl line {ln}: not JSON ({e})") from None
        items.append(check_item(d, f"data/{name}.jsonl line {ln}"))
    ids = [it.id for it in items]
    if len(set(ids)) != len(ids):
        raise BenchmarkError(f"data/{name}.jsonl: item ids repeat")
    return items


def load_benchmark(name: str, n_items: int | None = None, seed: int = 0) -> list[Item]:
    """Items of one benchmark: a fixed set capped at ``n_items`` or ``n_items`` puzzles."""
    if name in DEDUCTION_BENCHMARKS:
        from .deduction import generate
        n = DEDUCTION_DEFAULT_ITEMS if n_items is None else int(n_items)
        out = []
        for d in generate(DEDUCTION_BENCHMARKS[name], n, seed):
            meta = {k: d[k] for k in ("domain", "objects", "order", "question_position")}
            out.append(check_item({k: d[k] for k in ("id", "prompt", "options", "answer")},
                                  f"{name} item {d['id']}"))
            out[-1].meta.update(meta)
        return out
    if name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark {name!r}; known: {BENCHMARKS}")
    items = load_fixed(name)
    return items if n_items is None else items[:int(n_items)]
