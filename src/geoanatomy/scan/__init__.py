"""``geoanatomy scan DIR``: the geometric events of any folder of Hugging Face causal-LM
checkpoints.

Input: ``DIR/stepN/`` or ``DIR/checkpoint-N/`` sub-folders (as the Pythia hub revisions and
the ``transformers.Trainer`` write them), each with ``config.json`` and weights
(``model.safetensors`` / ``pytorch_model.bin``, sharded or not); the tokenizer in the
checkpoint folder, in ``DIR`` or given with ``--tokenizer``. A probe set:

* a shipped benchmark by name (``pythia.settings.BENCHMARKS``: syntax, deduction3, ...):
  multiple-choice items scored by option log-likelihood (``pythia.scoring``), so there is an
  accuracy and an acquisition step;
* a text file, one prompt a line (blank lines skipped): no answers, so no accuracy; the
  behaviour curve is the probe-set loss, the mean next-token loss over the prompts.

Per checkpoint, ``measure_model`` (the function the Pythia extraction can call, module
``pythia.extract`` keeps its own loop) gives the rows of the long table (``geoanatomy.table``):

benchmark  accuracy, accuracy_norm, accuracy_sum, accuracy_mean, logprob, logprob_per_token,
           logprob_choice (exactly the Pythia branch's rows), layer "output", position "options"
prompts    loss: mean next-token loss over every prompt token after the first (float64),
           layer "output", position "tokens", variant "probe"
both       rankme (variants uncentred / centred) and mean_share at every layer (``scan.hf``
           names: embed, layer1..layerL, final_ln_post), position "last_prompt" (each
           prompt's last token), N = prompts / items (RankMe is capped at min(N, d))

Outputs in ``OUT`` (default ``DIR/geoanatomy_scan``): ``metrics.csv``, ``precursor.json``
(``scan.report``), ``trajectory.png``, ``scan.json`` (provenance and timings) and
``partial/<checkpoint>.json``, one per measured checkpoint: a rerun reuses every partial
whose settings (probe set content, dtype, batch size, eps, scoring) and weight files (names,
sizes, modification times) are unchanged, so an interrupted scan resumes where it stopped.

Precision: weights load in ``--dtype`` and are cast to float32 for measuring
(``pythia.loading.for_scoring``); log-probabilities and losses are float64 (the output
embedding applied in float64, ``scan.hf.logits64``), RankMe in float64.

Safety: local files only (``HF_HUB_OFFLINE=1`` is set), ``trust_remote_code=False``,
safetensors or ``torch.load(weights_only=True)`` only (``scan.hf.load_causal_lm``).
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import platform
import re
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..files import atomic_write_json, json_safe
from ..spec import settings_hash
from ..table import read_table, write_table

CKPT_DIR = re.compile(r"^(?:step|checkpoint-)(0|[1-9][0-9]*)$")
SCAN_VERSION = 1


class ScanError(RuntimeError):
    """The folder or the probe set cannot be scanned; the message says what to fix."""


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
    from ..pythia.settings import BENCHMARKS
    if probe in BENCHMARKS:
        from ..pythia.benchmarks import load_benchmark
        from ..pythia.scoring import encode
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
    """RankMe (both variants) and mean share of every layer's (N, d) matrix at one position,
    with the Pythia branch's settings (eps, d, max_rank, n_unique_last_tokens,
    top_last_token_share)."""
    from ..measures.rankme import mean_share, rankme
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
        base = {"run": run, "step": step, "layer": name, "layer_index": li, "position": position,
                "n_samples": int(N)}
        with warnings.catch_warnings():                                # N < d is the norm: max_rank says so
            warnings.simplefilter("ignore")
            for variant, centred in (("uncentred", False), ("centred", True)):
                rows.append({**base, "measure": "rankme", "variant": variant,
                             "value": rankme(Z, centred=centred, eps=eps), "settings": settings})
        rows.append({**base, "measure": "mean_share", "variant": "", "value": mean_share(Z),
                     "settings": {"definition": "||mean row||^2 / mean ||row||^2",
                                  **{k: v for k, v in settings.items() if k != "eps"}}})
    return rows


def benchmark_rows(res: dict, items, run: str, step: int, scoring: str) -> list[dict]:
    """The Pythia branch's behaviour rows of one benchmark from a ``score`` result."""
    from ..pythia.scoring import choice_stats
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
    from .hf import for_scoring, hidden_names, prompt_states, score_items
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


# ---------------------------------------------------------------------------- the folder
def find_checkpoints(root: str | Path) -> list[tuple[int, str]]:
    """[(step, folder name)] of ``root``'s ``stepN`` / ``checkpoint-N`` sub-folders holding a
    config.json, by step. Two folders with one step (``step5`` and ``checkpoint-5``) are an error."""
    root = Path(root)
    if not root.is_dir():
        raise ScanError(f"{root}: no such folder")
    found: dict[int, str] = {}
    for d in sorted(root.iterdir()):
        m = CKPT_DIR.match(d.name)
        if not (m and d.is_dir() and (d / "config.json").is_file()):
            continue
        s = int(m.group(1))
        if s in found:
            raise ScanError(f"{root}: {found[s]}/ and {d.name}/ are both step {s}; keep one")
        found[s] = d.name
    if not found:
        raise ScanError(f"{root}: no checkpoint sub-folders (stepN/ or checkpoint-N/ with a config.json)")
    return sorted(found.items())


def _determines_weights(name: str) -> bool:
    return name == "config.json" or name.endswith((".safetensors", ".index.json")) or name.startswith("pytorch_model")


def weights_identity(folder: Path) -> list:
    """(name, size, mtime_ns) of the files that determine a checkpoint: config.json and the
    weight files (``*.safetensors``, ``pytorch_model*``, shard indexes)."""
    out = []
    for f in sorted(folder.iterdir()):
        if f.is_file() and _determines_weights(f.name):
            st = f.stat()
            out.append([f.name, st.st_size, st.st_mtime_ns])
    return out


def _load_partial(path: Path, key: str, ident: list) -> dict | None:
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if d.get("numbers_key") != key or d.get("weights") != ident:
        return None
    for r in d["rows"]:                 # strict JSON stored NaN as null
        if r["value"] is None:
            r["value"] = float("nan")
    return d


def scan(root: str | Path, probe: str, out_dir: str | Path | None = None, *, run: str | None = None,
         tokenizer: str | None = None, n_items: int | None = None, seed: int = 0, device: str = "auto",
         dtype: str = "float32", batch_size: int = 16, eps: float = 1e-7, scoring: str = "sum",
         layer: str | None = None, cfg_events: dict | None = None, log=print) -> dict:
    """Scan a checkpoint folder (module doc); returns the precursor dict."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    import transformers

    from ..runtime import pick_device
    from .hf import for_scoring, load_causal_lm, load_tokenizer_for
    from .report import build_report, plot_report

    root = Path(root)
    out_dir = Path(out_dir) if out_dir is not None else root / "geoanatomy_scan"
    run = run or root.resolve().name
    device = pick_device(device)
    ckpts = find_checkpoints(root)
    tok = load_tokenizer_for(root, ckpts[-1][1], tokenizer)
    probe_set = load_probe_set(probe, tok, n_items, seed)
    key = settings_hash({"probe": probe_set.identity(), "dtype": dtype, "batch_size": batch_size, "eps": eps,
                         "scoring": scoring, "version": SCAN_VERSION})
    part_dir = out_dir / "partial"
    log(f"[scan] {run}: {len(ckpts)} checkpoints in {root}, probe set {probe_set.name} ({probe_set.kind}, "
        f"{len(probe_set.encoded)} {'items' if probe_set.kind == 'benchmark' else 'prompts'}), device {device}")
    rows: list[dict] = []
    timing: dict = {}
    model_info = None
    t_all = time.time()
    for step, folder in ckpts:
        ident = weights_identity(root / folder)
        part = _load_partial(part_dir / f"{folder}.json", key, ident)
        if part is not None:
            rows += part["rows"]
            timing[folder] = part["timing"]
            model_info = model_info or part.get("model")
            log(f"[scan] {run} {folder}: reused {part_dir / (folder + '.json')}")
            continue
        t0 = time.time()
        model = for_scoring(load_causal_lm(root, folder, dtype, device))     # float32 at least
        t_load = time.time() - t0
        c = model.config
        from .hf import hidden_names
        info = {"model_type": c.model_type, "n_params": int(sum(p.numel() for p in model.parameters())),
                "n_layer": int(c.num_hidden_layers), "d_model": int(c.hidden_size),
                "layer_names": hidden_names(model)}
        model_info = model_info or info
        t0 = time.time()
        r = measure_model(model, probe_set, run=run, step=step, batch_size=batch_size, device=device, eps=eps,
                          scoring=scoring)
        t_meas = time.time() - t0
        del model
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        tm = {"load_s": round(t_load, 3), "measure_s": round(t_meas, 3)}
        atomic_write_json(part_dir / f"{folder}.json", json_safe({
            "numbers_key": key, "folder": folder, "step": step, "weights": ident, "timing": tm,
            "model": info, "rows": r}))
        rows += r
        timing[folder] = tm
        log(f"[scan] {run} {folder}: load {t_load:.1f} s, measure {t_meas:.1f} s")
    rows.sort(key=lambda x: x["step"])                 # stable: the row order within a step is kept
    write_table(out_dir / "metrics.csv", rows)
    df = read_table(out_dir / "metrics.csv")
    pre = build_report(df, run=run, kind="scan", n_params=model_info["n_params"], cfg_events=cfg_events,
                       layer=layer, position="last_prompt", eps=eps,
                       extra={"source": str(root), "probe_set": {"name": probe_set.name, "kind": probe_set.kind,
                                                                  "n": len(probe_set.encoded)},
                              "scoring": scoring if probe_set.kind == "benchmark" else None,
                              "model": model_info})
    atomic_write_json(out_dir / "precursor.json", pre)
    plot_report(df, pre, out_dir / "trajectory.png")
    atomic_write_json(out_dir / "scan.json", json_safe({
        "run": run, "source": str(root.resolve()), "checkpoints": [f for _, f in ckpts],
        "steps": [s for s, _ in ckpts], "probe_set": {"name": probe_set.name, "kind": probe_set.kind,
                                                       "n": len(probe_set.encoded), "sha256": probe_set.identity()},
        "device": device, "dtype": dtype, "batch_size": batch_size, "eps": eps, "scoring": scoring,
        "numbers_key": key, "model": model_info, "timing": timing, "wall_seconds": round(time.time() - t_all, 2),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "safety": "local files only, trust_remote_code=False, safetensors or torch.load(weights_only=True)"}))
    rm = pre["measures"]["rankme"]
    beh = pre["behaviour"]
    what = (f"acquisition {pre['acquisition_step']}" if beh["kind"] == "accuracy"
            else f"probe loss {beh['loss']['init']:.3f} -> {beh['loss']['final']:.3f} (no accuracy)")
    log(f"[scan] {run}: {what}; RankMe {rm['layer']} collapse {rm.get('collapse_step')}, floor "
        f"{rm.get('floor_step')}, recovery {rm.get('recovery_step')}; wrote {out_dir}")
    return pre
