"""One Pythia model: load every selected revision, fingerprint it, score the benchmarks.

Outputs in ``results/pythia_<name>/`` (``<name>`` e.g. 160m):

metrics.csv      long table, ``geoanatomy.table.COLUMNS``; ``run`` = pythia_<name>_<benchmark>;
                 duplicate revisions have no rows (excluded from event detection)
duplicates.json  every revision's sha256 and the duplicates (revision -> earliest identical)
extract.json     provenance: source, versions, model shape, layer names, items, timings
partial/         one JSON per revision (rows + fingerprint), so an interrupted job resumes;
                 reused only when the settings that determine the numbers are unchanged

Rows per (benchmark, non-duplicate revision); behaviour rows have layer "output",
layer_index -1, position "options":

accuracy           argmax-option accuracy under ``pythia.scoring`` (sum or mean; settings say)
accuracy_norm      (accuracy - chance) / (1 - chance), chance = mean over items of 1/n_options
accuracy_sum       accuracy when options are scored by the sum of their token log-probs
accuracy_mean      accuracy when scored by the per-token mean
logprob            mean over items of log p(correct option | prompt), float64, nats
logprob_per_token  mean over items of that divided by the option's token count
logprob_choice     mean over items of log P(correct | options) under ``pythia.scoring``
                   (renormalised over the options; chance = mean log(1/n_options))
rankme             per layer (scoring.layer_names), position "last_prompt", variants
                   uncentred (RankMe's definition) / centred; N = items, capped at min(N, d)
"""
from __future__ import annotations

import gc
import json
import platform
import time
import warnings
from pathlib import Path

import numpy as np

from ..spec import settings_hash
from ..files import json_safe
from ..table import write_table
from ..measures.rankme import rankme
from ..files import atomic_write_json
from ..runtime import pick_device
from .benchmarks import load_benchmark
from .fingerprint import duplicates, weights_sha256
from .loading import cached_revision_bytes, delete_cached_revision, load_model, load_tokenizer
from .revisions import parse_revision
from .scoring import choice_stats, encode, layer_names, score

# Spec keys that do not change the numbers of one revision (excluded from the partial key).
_NOT_NUMERIC = ("revisions", "delete_cache", "results_dir", "cache_dir", "device")


def numbers_key(spec: dict) -> str:
    """Hash of the settings that determine one revision's rows (resume check)."""
    return settings_hash({k: v for k, v in spec.items() if k not in _NOT_NUMERIC})


def measure_revision(model, tokenizer_enc: dict, items: dict, spec: dict, run: str, step: int,
                     device: str) -> tuple[list[dict], dict]:
    """All rows of one revision (every benchmark) and per-benchmark timing."""
    rows, timing = [], {}
    eps = float(spec["rankme_eps"])
    scoring = spec["scoring"]
    names = layer_names(model.config.num_hidden_layers)
    d = model.config.hidden_size
    for bench, its in items.items():
        t0 = time.time()
        res = score(model, tokenizer_enc[bench], spec["batch_size"], device)
        answers = [it.answer for it in its]
        N = len(its)
        chance = float(np.mean([it.chance for it in its]))
        stats = {sc: choice_stats(res[sc], answers) for sc in ("sum", "mean")}
        lp_sum = float(np.mean([s[a] for s, a in zip(res["sum"], answers)]))
        lp_tok = float(np.mean([s[a] for s, a in zip(res["mean"], answers)]))
        chance_lc = float(np.mean([np.log(it.chance) for it in its]))
        r_name = f"{run}_{bench}"
        beh = dict(run=r_name, step=step, layer="output", layer_index=-1, position="options", variant="",
                   n_samples=N)
        acc = stats[scoring]["accuracy"]
        defn = {"sum": "argmax over options of the sum of option-token log-probs",
                "mean": "argmax over options of the mean option-token log-prob"}
        rows += [
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
        n_unique_last = int(len(np.unique(res["last_token"])))
        for li, name in enumerate(names):
            Z = res["hidden"][name]                                     # (N, d)
            settings = {"eps": eps, "d": d, "max_rank": min(N, d), "n_unique_last_tokens": n_unique_last}
            if name == "embed" and n_unique_last == 1:
                settings["constant_by_construction"] = True             # same last token in every prompt
            for variant, centred in (("uncentred", False), ("centred", True)):
                with warnings.catch_warnings():                         # N < d is the norm here: the cap
                    warnings.simplefilter("ignore")                     # is recorded in settings.max_rank
                    v = rankme(Z, centred=centred, eps=eps)
                rows.append({"run": r_name, "step": step, "measure": "rankme", "layer": name, "layer_index": li,
                             "position": "last_prompt", "variant": variant, "n_samples": N, "value": v,
                             "settings": settings})
        timing[bench] = time.time() - t0
    return rows, timing


def _load_partial(path: Path, key: str) -> dict | None:
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if d.get("numbers_key") != key:
        return None
    for r in d["rows"]:                       # strict JSON stored NaN (e.g. a constant layer, centred) as null
        if r["value"] is None:
            r["value"] = float("nan")
    return d


def extract_model(spec: dict, out_dir: str | Path, log=print) -> dict:
    """Measure every selected revision of one model (see module doc); returns extract.json."""
    import torch
    import transformers

    out_dir = Path(out_dir)
    device = pick_device(spec["device"])
    key = numbers_key(spec)
    part_dir = out_dir / "partial"
    revisions = list(spec["revisions"])
    items = {b: load_benchmark(b, spec["n_items"].get(b), spec["deduction_seed"]) for b in spec["benchmarks"]}
    tok = load_tokenizer(spec["source"], spec["kind"], revisions[-1], spec["cache_dir"])
    enc = {b: encode(tok, its) for b, its in items.items()}

    all_rows: list[dict] = []
    fps: list[tuple[str, str]] = []
    info = {"timing": {}, "model": None, "disk_bytes": {}, "freed_bytes": 0}
    pending_delete = None
    t_all = time.time()
    for rev in revisions:
        step = parse_revision(rev)
        dup_so_far = duplicates(fps)
        known = {sha: r for r, sha in fps if r not in dup_so_far}
        part = _load_partial(part_dir / f"{rev}.json", key)
        if part is not None and (part["measured"] or part["sha256"] in known):
            fps.append((rev, part["sha256"]))
            all_rows += part["rows"] if part["sha256"] not in known else []
            info["timing"][rev] = part["timing"]
            info["model"] = info["model"] or part.get("model")
            log(f"[pythia] {spec['run']} {rev}: reused {part_dir / (rev + '.json')}")
            continue
        t0 = time.time()
        model = load_model(spec["source"], spec["kind"], rev, spec["dtype"], device, spec["cache_dir"])
        t_load = time.time() - t0
        t0 = time.time()
        sha = weights_sha256(model)
        t_hash = time.time() - t0
        c = model.config
        model_info = {"n_params": int(sum(p.numel() for p in model.parameters())), "n_layer": c.num_hidden_layers,
                      "d_model": c.hidden_size, "n_head": c.num_attention_heads, "vocab_size": c.vocab_size,
                      "layer_names": layer_names(c.num_hidden_layers)}
        info["model"] = info["model"] or model_info
        timing = {"load_s": round(t_load, 3), "hash_s": round(t_hash, 3)}
        rows = []
        if sha in known:
            log(f"[pythia] {spec['run']} {rev}: duplicate of {known[sha]} (sha256 {sha[:12]}), not measured")
        else:
            rows, bt = measure_revision(model, enc, items, spec, spec["run"], step, device)
            timing.update(measure_s=round(sum(bt.values()), 3), per_benchmark_s={b: round(t, 3) for b, t in bt.items()})
        del model
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        if spec["kind"] == "hub":
            size = cached_revision_bytes(spec["source"], rev, spec["cache_dir"])
            if size is not None:
                info["disk_bytes"][rev] = size
            if spec["delete_cache"]:
                # Delete the *previous* revision: the current one stays cached until the next is
                # loaded, so a byte-identical next revision reuses its blobs instead of downloading
                # them again (huggingface_hub stores files by content hash). Peak: two revisions.
                if pending_delete is not None:
                    info["freed_bytes"] += delete_cached_revision(spec["source"], pending_delete, spec["cache_dir"])
                pending_delete = rev
        fps.append((rev, sha))
        all_rows += rows
        info["timing"][rev] = timing
        atomic_write_json(part_dir / f"{rev}.json", json_safe({
            "numbers_key": key, "revision": rev, "step": step, "sha256": sha, "measured": sha not in known,
            "timing": timing, "model": model_info, "rows": rows}))
        if sha not in known:
            log(f"[pythia] {spec['run']} {rev}: load {t_load:.1f} s, hash {t_hash:.1f} s, "
                f"measure {timing['measure_s']:.1f} s on {device}")

    if pending_delete is not None:
        info["freed_bytes"] += delete_cached_revision(spec["source"], pending_delete, spec["cache_dir"])
    dups = duplicates(fps)
    sha_of = dict(fps)
    order = {b: i for i, b in enumerate(spec["benchmarks"])}
    all_rows.sort(key=lambda r: (order[r["run"][len(spec["run"]) + 1:]], r["step"]))
    write_table(out_dir / "metrics.csv", all_rows)
    dup_doc = {
        "run": spec["run"], "source": spec["source"], "n_revisions": len(fps),
        "n_unique": len(fps) - len(dups), "n_duplicates": len(dups),
        "rule": "a revision whose weights hash equals an earlier (smaller-step) revision's is a duplicate "
                "of the earliest one; duplicates have no rows in metrics.csv and no part in event detection",
        "hash": f"sha256 over sorted parameter names, dtype, shape and raw bytes, as loaded ({spec['dtype']})",
        "duplicates": [{"revision": r, "step": parse_revision(r), "duplicate_of": o, "sha256": sha_of[r]}
                       for r, o in dups.items()],
        "fingerprints": {r: s for r, s in fps},
    }
    atomic_write_json(out_dir / "duplicates.json", dup_doc)
    measured = [r for r, _ in fps if r not in dups]
    summary = {
        "run": spec["run"], "name": spec["name"], "source": spec["source"], "kind": spec["kind"],
        "device": device, "dtype": spec["dtype"], "batch_size": spec["batch_size"],
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "model": info["model"], "revisions": revisions, "measured_revisions": measured,
        "n_duplicates": len(dups), "max_step": max(parse_revision(r) for r in revisions),
        "benchmarks": {b: {"n_items": len(its), "chance": float(np.mean([it.chance for it in its])),
                           "n_prompt_tokens": int(sum(len(p) for p, _ in enc[b])),
                           "n_sequences": int(sum(len(o) for _, o in enc[b]))} for b, its in items.items()},
        "scoring": spec["scoring"], "rankme_eps": spec["rankme_eps"],
        "position": "last_prompt: the last prompt token (predicts the first option token)",
        "layers": "embed = token embeddings; layerK = output of block K (1-based) before the final LayerNorm; "
                  "final_ln_post = last block after the final LayerNorm",
        "timing": info["timing"], "disk_bytes": info["disk_bytes"], "freed_bytes": info["freed_bytes"],
        "wall_seconds": round(time.time() - t_all, 2), "numbers_key": key,
    }
    atomic_write_json(out_dir / "extract.json", json_safe(summary))
    log(f"[pythia] {spec['run']}: {len(revisions)} revisions, {len(dups)} duplicates, {len(all_rows)} rows, "
        f"{summary['wall_seconds']} s")
    return summary
