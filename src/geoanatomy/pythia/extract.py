"""One Pythia model: plan, load, fingerprint and score every selected revision.

Outputs in ``results/pythia_<name>/`` (``<name>`` e.g. 160m):

metrics.csv      long table, ``geoanatomy.table.COLUMNS``; ``run`` = pythia_<name>_<benchmark>;
                 one step per distinct weight set, labelled by ``fingerprint.resolve``
                 (the latest revision holding it; main's = step143000); duplicates have no rows
duplicates.json  every revision's fingerprints (hub file hash, weights sha256), its holder,
                 and the duplicates (revision -> the revision or "main" it repeats)
extract.json     provenance: source, versions, model shape, layer names, items, timings, cache
partial/         one JSON per loaded revision (rows + fingerprint), so an interrupted job
                 resumes; reused only when the settings that determine the numbers are unchanged

Order of work (hub ids):

1. hub metadata for the 154 published revisions and main (LFS sha256 of the weight files,
   nothing downloaded; ``loading.hub_weight_hashes``): ``fingerprint.resolve`` over all of
   them says which selected revisions repeat a later revision's (or main's) weights; those
   are never downloaded. step0 equal to main stops the run here (``Step0IsTrained``).
2. without metadata (offline, local directories): main's weights are fingerprinted first
   (hub: revision ``main`` if it can be loaded; local: a ``main/`` sub-folder if present),
   then step143000 if selected, then the rest in step order.
3. every remaining revision is loaded in ``pythia.dtype``, fingerprinted, cast to float32
   (``loading.for_scoring``) and scored, unless its weights were already scored under an
   earlier-loaded revision (the rows are then reused) or equal main's; with
   ``delete_cache`` (the default) a revision this job downloaded leaves the hub cache as
   soon as it is measured (revisions cached before the job are left alone).
4. ``fingerprint.resolve`` over the loaded revisions' weight hashes (and main's): each
   weight set's rows go to the step of its latest holder.

Rows per (benchmark, measured revision); behaviour rows have layer "output",
layer_index -1, position "options":

accuracy           argmax-option accuracy under the setting ``pythia.scoring`` (sum or mean)
accuracy_norm      (accuracy - chance) / (1 - chance), chance = mean over items of 1/n_options
accuracy_sum       accuracy when options are scored by the sum of their token log-probs
accuracy_mean      accuracy when scored by the per-token mean
logprob            mean over items of log p(correct option | prompt), float64, nats
logprob_per_token  mean over items of that divided by the option's token count
logprob_choice     mean over items of log P(correct | options) under ``pythia.scoring``
                   (renormalised over the options; chance = mean log(1/n_options))
mean_share         per layer: ||mean row||^2 / mean ||row||^2 of the same matrix as RankMe
rankme             per layer (scoring.layer_names), position "last_prompt", variants
                   uncentred (RankMe's definition) / centred; N = items, capped at min(N, d)
                   (settings: max_rank, n_unique_last_tokens, top_last_token_share)
"""
from __future__ import annotations

import gc
import json
import platform
import time
from pathlib import Path

import numpy as np

from ..spec import settings_hash
from ..files import json_safe
from ..table import write_table
from ..files import atomic_write_json
from ..runtime import pick_device
from ..hf.benchmarks import load_benchmark
from .fingerprint import FINAL, check_step0, final_conflict, resolve, weights_sha256
from .loading import (LoadError, cached_revision_bytes, cached_weight_files, delete_cached_revision,
                      for_scoring, hub_weight_hashes, load_model, load_tokenizer)
from ..config.pythia_revisions import MAIN, parse_revision, published_revisions
from ..hf.choice import encode, layer_names

# Spec keys that do not change the numbers of one revision (excluded from the partial key).
_NOT_NUMERIC = ("revisions", "delete_cache", "results_dir", "cache_dir", "device")


def numbers_key(spec: dict) -> str:
    """Hash of the settings that determine one revision's rows (resume check)."""
    return settings_hash({k: v for k, v in spec.items() if k not in _NOT_NUMERIC})


def measure_revision(model, tokenizer_enc: dict, items: dict, spec: dict, run: str, step: int,
                     device: str) -> tuple[list[dict], dict]:
    """All rows of one revision (every benchmark) and per-benchmark timing. The measurement is
    ``hf.probes.measure_model``, the scanner's too: one code path for any folder of Hugging
    Face checkpoints and for the Pythia branch."""
    from ..hf.probes import ProbeSet, measure_model
    rows, timing = [], {}
    for bench, its in items.items():
        t0 = time.time()
        rows += measure_model(model, ProbeSet.from_items(bench, its, tokenizer_enc[bench]),
                              run=f"{run}_{bench}", step=step, batch_size=spec["batch_size"], device=device,
                              eps=float(spec["rankme_eps"]), scoring=spec["scoring"])
        timing[bench] = time.time() - t0
    return rows, timing


def _load_partial(path: Path, key: str) -> dict | None:
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if d.get("numbers_key") != key:
        return None
    for r in d.get("rows") or []:             # strict JSON stored NaN (e.g. a constant layer, centred) as null
        if r["value"] is None:
            r["value"] = float("nan")
    return d


def _model_info(model) -> dict:
    c = model.config
    return {"n_params": int(sum(p.numel() for p in model.parameters())), "n_layer": c.num_hidden_layers,
            "d_model": c.hidden_size, "n_head": c.num_attention_heads, "vocab_size": c.vocab_size,
            "layer_names": layer_names(c.num_hidden_layers)}


class _Cache:
    """Hub cache bookkeeping: which revisions this job downloaded (kept in partial/ so a
    resumed job still deletes them) and their deletion once measured."""

    def __init__(self, spec: dict, part_dir: Path, log):
        self.on = spec["kind"] == "hub"
        self.delete = bool(spec["delete_cache"]) and self.on
        self.source, self.cache_dir, self.log = spec["source"], spec["cache_dir"], log
        self.path = part_dir / "downloads.json"
        try:
            self.downloaded = set(json.loads(self.path.read_text()))
        except (OSError, json.JSONDecodeError):
            self.downloaded = set()
        self.disk, self.freed, self.kept = {}, 0, []

    def before_load(self, rev: str) -> None:
        if self.on and not cached_weight_files(self.source, rev, self.cache_dir):
            self.downloaded.add(rev)
            atomic_write_json(self.path, sorted(self.downloaded))

    def forget(self, rev: str) -> None:
        if rev in self.downloaded:
            self.downloaded.discard(rev)
            atomic_write_json(self.path, sorted(self.downloaded))

    def after_use(self, rev: str) -> None:
        if not self.on:
            return
        size = cached_revision_bytes(self.source, rev, self.cache_dir)
        if size is not None:
            self.disk[rev] = size
        if not self.delete:
            return
        if rev in self.downloaded:
            self.freed += delete_cached_revision(self.source, rev, self.cache_dir)
            self.downloaded.discard(rev)
            atomic_write_json(self.path, sorted(self.downloaded))
        elif size is not None:
            self.kept.append(rev)
            self.log(f"[pythia] {self.source} {rev}: was in the hub cache before this job; left there")


def _main_fingerprint(spec: dict, part_dir: Path, key: str, cache: _Cache, log) -> dict:
    """Weights sha256 of revision main (hub) or of a ``main/`` folder (local) when there is no
    hub metadata; {"sha256": None, "reason": ...} when it cannot be loaded. Loaded on the CPU
    (only hashed)."""
    src, kind = spec["source"], spec["kind"]
    if kind == "local" and not (Path(src).expanduser() / MAIN / "config.json").is_file():
        return {"sha256": None, "reason": f"no {MAIN}/ folder in {src}"}
    part = _load_partial(part_dir / f"{MAIN}.json", key)
    if part is not None:
        return {"sha256": part["sha256"], "reason": "weights sha256 after loading (reused from partial/)"}
    try:
        cache.before_load(MAIN)
        model = load_model(src, kind, MAIN, spec["dtype"], "cpu", spec["cache_dir"])
    except LoadError as e:
        log(f"[pythia] {src}: main not loadable ({e}); step0 is compared with step143000 only")
        cache.forget(MAIN)
        return {"sha256": None, "reason": f"not loadable: {e}"[:300]}
    sha = weights_sha256(model)
    del model
    gc.collect()
    cache.after_use(MAIN)
    atomic_write_json(part_dir / f"{MAIN}.json", {"numbers_key": key, "revision": MAIN, "sha256": sha, "rows": None})
    return {"sha256": sha, "reason": "weights sha256 after loading"}


def extract_model(spec: dict, out_dir: str | Path, log=print, hub=None) -> dict:
    """Measure every selected revision of one model (see module doc); returns extract.json.
    ``hub``: an ``HfApi``-like client for the metadata (None: ``loading.default_hub_api()``)."""
    import torch
    import transformers

    out_dir = Path(out_dir)
    device = pick_device(spec["device"])
    key = numbers_key(spec)
    part_dir = out_dir / "partial"
    src, kind = spec["source"], spec["kind"]
    revisions = sorted(spec["revisions"], key=parse_revision)
    items = {b: load_benchmark(b, spec["n_items"].get(b), spec["deduction_seed"]) for b in spec["benchmarks"]}
    tok = load_tokenizer(src, kind, revisions[-1], spec["cache_dir"])
    enc = {b: encode(tok, its) for b, its in items.items()}
    cache = _Cache(spec, part_dir, log)
    t_all = time.time()

    # 1. the plan from hub metadata (nothing downloaded)
    meta_hashes, meta = {}, {"used": False, "reason": "local directory: no hub metadata"}
    if kind == "hub":
        listed = list(dict.fromkeys(published_revisions() + revisions + [MAIN]))
        meta_hashes, meta = hub_weight_hashes(src, listed, api=hub, log=log)
    plan = resolve(meta_hashes) if meta["used"] else {}
    warnings_ = []
    if meta["used"]:
        if "step0" in revisions:
            check_step0(meta_hashes, src, "hub LFS sha256 of the weight files, before downloading")
        w = final_conflict(meta_hashes)
        if w:
            warnings_.append(w + " (hub metadata)")
    skipped = {r: plan[r] for r in revisions if plan.get(r, r) != r}
    for r, h in skipped.items():
        log(f"[pythia] {spec['run']} {r}: same weight files as {h} (hub metadata): not downloaded, not measured")

    # 2. main's weights, when the hub gave no metadata
    main_fp = {"sha256": None, "reason": "hub metadata used instead"} if meta["used"] else \
        _main_fingerprint(spec, part_dir, key, cache, log)
    main_sha = main_fp["sha256"]

    # 3. load, fingerprint, measure (step143000 first: step0 is checked against it at once)
    todo = [r for r in revisions if r not in skipped]
    todo = ([FINAL] if FINAL in todo else []) + [r for r in todo if r != FINAL]
    loaded: dict[str, str] = {}
    rows_by_sha: dict[str, tuple[list, str]] = {}
    info = {"timing": {}, "model": None}

    def _check():
        known = {**loaded, **({MAIN: main_sha} if main_sha else {})}
        check_step0(known, src, "weights sha256 after loading")

    for rev in todo:
        step = parse_revision(rev)
        part = _load_partial(part_dir / f"{rev}.json", key)
        if part is not None and (part["rows"] is not None or part["sha256"] in rows_by_sha
                                 or part["sha256"] == main_sha):
            loaded[rev] = part["sha256"]
            _check()
            if part["rows"] is not None:
                rows_by_sha.setdefault(part["sha256"], (part["rows"], rev))
            info["timing"][rev] = part["timing"]
            info["model"] = info["model"] or part.get("model")
            log(f"[pythia] {spec['run']} {rev}: reused {part_dir / (rev + '.json')}")
            continue
        t0 = time.time()
        cache.before_load(rev)
        model = load_model(src, kind, rev, spec["dtype"], device, spec["cache_dir"])
        t_load = time.time() - t0
        t0 = time.time()
        sha = weights_sha256(model)
        t_hash = time.time() - t0
        loaded[rev] = sha
        _check()                                  # raises before anything of step0 is measured
        model_info = _model_info(model)
        info["model"] = info["model"] or model_info
        timing = {"load_s": round(t_load, 3), "hash_s": round(t_hash, 3)}
        rows = None
        if sha in rows_by_sha:
            log(f"[pythia] {spec['run']} {rev}: same weights as {rows_by_sha[sha][1]} (sha256 {sha[:12]}), "
                f"rows reused")
        elif main_sha is not None and sha == main_sha and rev != FINAL:
            log(f"[pythia] {spec['run']} {rev}: main's weights (sha256 {sha[:12]}), not measured as {rev}")
        else:
            model = for_scoring(model)
            rows, bt = measure_revision(model, enc, items, spec, spec["run"], step, device)
            rows_by_sha[sha] = (rows, rev)
            timing.update(measure_s=round(sum(bt.values()), 3), per_benchmark_s={b: round(t, 3) for b, t in bt.items()})
            log(f"[pythia] {spec['run']} {rev}: load {t_load:.1f} s, hash {t_hash:.1f} s, "
                f"measure {timing['measure_s']:.1f} s on {device}")
        del model
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        cache.after_use(rev)
        info["timing"][rev] = timing
        atomic_write_json(part_dir / f"{rev}.json", json_safe({
            "numbers_key": key, "revision": rev, "step": step, "sha256": sha, "timing": timing,
            "model": model_info, "rows": rows}))

    # 4. which loaded revision each weight set is measured as
    post_hashes = {**loaded, **({MAIN: main_sha} if main_sha else {})}
    post = resolve(post_hashes)
    w = final_conflict(post_hashes)
    if w and not meta["used"]:
        warnings_.append(w + " (weights sha256)")
    holder = {}
    for r in revisions:
        h = skipped.get(r, post.get(r, r))
        while h in post and post[h] != h:         # a metadata holder that is itself a duplicate
            h = post[h]
        holder[r] = h
    measured = [r for r in revisions if holder[r] == r]
    all_rows = []
    for r in measured:
        rows, _ = rows_by_sha[loaded[r]]
        all_rows += [{**row, "step": parse_revision(r)} for row in rows]
    order = {b: i for i, b in enumerate(spec["benchmarks"])}
    all_rows.sort(key=lambda r: (order[r["run"][len(spec["run"]) + 1:]], r["step"]))
    write_table(out_dir / "metrics.csv", all_rows)

    dup_list = []
    for r in revisions:
        if holder[r] == r:
            continue
        how = ("hub LFS sha256 of the weight files (not downloaded)" if r in skipped
               else "weights sha256 after loading")
        dup_list.append({"revision": r, "step": parse_revision(r), "duplicate_of": holder[r],
                         "holder_measured": holder[r] in measured, "detected_by": how,
                         "sha256": loaded.get(r), "files_sha256": meta_hashes.get(r)})
        if holder[r] not in measured:
            log(f"[pythia] {spec['run']} {r}: its weights belong to {holder[r]}, which is "
                f"{'main (not a measured step)' if holder[r] == MAIN else 'not selected'}: not measured")
    for w in warnings_:
        log(f"[pythia] {spec['run']}: WARNING {w}")
    dup_doc = {
        "run": spec["run"], "source": src, "n_revisions": len(revisions),
        "n_measured": len(measured), "n_unique": len(measured), "n_duplicates": len(dup_list),
        "rule": "a weight set is measured as the latest revision holding it; main's weights as step143000 "
                "(not at all if that branch holds other weights); every other revision holding it is a "
                "duplicate, without rows in metrics.csv; step0 equal to main or step143000 stops the run",
        "hash": f"weights: sha256 over sorted parameter names, dtype, shape and raw bytes, as loaded "
                f"({spec['dtype']}); files: sha256 over the weight files' paths and hub LFS sha256",
        "hub_metadata": {k: v for k, v in meta.items() if k != "files"},
        "main": {"files_sha256": meta_hashes.get(MAIN), **main_fp},
        "warnings": warnings_,
        "duplicates": dup_list,
        "measured_revisions": measured,
        "fingerprints": {r: loaded.get(r) for r in revisions},
        "files_fingerprints": {r: meta_hashes.get(r) for r in revisions} if meta["used"] else {},
    }
    atomic_write_json(out_dir / "duplicates.json", json_safe(dup_doc))
    if info["model"] is None:
        raise RuntimeError(f"{src}: no selected revision was loaded (all {len(revisions)} repeat other weights); "
                           f"see {out_dir / 'duplicates.json'}")
    summary = {
        "run": spec["run"], "name": spec["name"], "source": src, "kind": kind,
        "device": device, "dtype": spec["dtype"], "compute_dtype": "float32 forward, float64 unembedding",
        "batch_size": spec["batch_size"],
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "model": info["model"], "revisions": revisions, "measured_revisions": measured,
        "n_duplicates": len(dup_list), "max_step": max(parse_revision(r) for r in revisions),
        "benchmarks": {b: {"n_items": len(its), "chance": float(np.mean([it.chance for it in its])),
                           "n_prompt_tokens": int(sum(len(p) for p, _ in enc[b])),
                           "n_sequences": int(sum(len(o) for _, o in enc[b]))} for b, its in items.items()},
        "scoring": spec["scoring"], "rankme_eps": spec["rankme_eps"],
        "position": "last_prompt: the last prompt token (predicts the first option token)",
        "layers": "embed = token embeddings; block{i} = output of block i (0-based) before the final LayerNorm; "
                  "ln_final = last block after the final LayerNorm",
        "timing": info["timing"], "disk_bytes": cache.disk, "freed_bytes": cache.freed,
        "cache": {"delete_cache": cache.delete, "kept_preexisting": cache.kept,
                  "still_downloaded": sorted(cache.downloaded)},
        "hub_metadata_used": meta["used"], "warnings": warnings_,
        "wall_seconds": round(time.time() - t_all, 2), "numbers_key": key,
    }
    atomic_write_json(out_dir / "extract.json", json_safe(summary))
    log(f"[pythia] {spec['run']}: {len(revisions)} revisions, {len(measured)} measured, {len(dup_list)} duplicates, "
        f"{len(all_rows)} rows, {summary['wall_seconds']} s")
    return summary
