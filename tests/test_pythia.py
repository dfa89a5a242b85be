"""Pythia validation branch, without network: a tiny GPT-NeoX and a tiny byte-level BPE
tokenizer are built and saved here as "stepN" checkpoints (two pairs identical on
purpose), then loaded from a local directory and from a hand-built Hugging Face cache
with HF_HUB_OFFLINE=1, fingerprinted, scored and run through event detection.
Every number is checked against an independent computation (plain forward passes,
numpy SVD, itertools enumeration, scipy's permutation test)."""
import itertools
import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"          # nothing may reach the network
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
import torch  # noqa: E402

from geoanatomy.config import ConfigError, resolve  # noqa: E402
from geoanatomy.pythia import deduction, revisions, settings  # noqa: E402
from geoanatomy.pythia.benchmarks import load_benchmark, load_fixed  # noqa: E402
from geoanatomy.pythia.settings import FIXED_BENCHMARKS  # noqa: E402

GRID = [{"tasks": ["mod"], "levels": ["L1"], "sizes": ["nano"]}]
STEPS = [0, 1, 2, 4, 8, 16, 32]
COPIES = {1: 0, 32: 4}                       # step -> step whose weights it repeats
E2E_BENCH = ["syntax", "deduction3"]
N_ITEMS = {"syntax": 8, "deduction3": 6, "arithmetic": 8}


# ------------------------------------------------------------------ tiny model
def _tokenizer(texts):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>")


def _tiny_model(vocab, seed):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    cfg = GPTNeoXConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=1024)
    torch.manual_seed(seed)
    return GPTNeoXForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def local_dir(tmp_path_factory):
    """root/step{N}/ for STEPS: weights interpolate between two random inits; the COPIES
    steps repeat an earlier step's weights exactly. Tokenizer saved at root/."""
    root = tmp_path_factory.mktemp("ckpt") / "pythia-tiny"
    texts = [it.prompt + o for b in N_ITEMS for it in load_benchmark(b, N_ITEMS[b]) for o in it.options]
    tok = _tokenizer(texts)
    tok.save_pretrained(root)
    a, b = _tiny_model(len(tok), 0), _tiny_model(len(tok), 1)
    sa, sb = a.state_dict(), b.state_dict()
    for s in STEPS:
        t = STEPS.index(COPIES.get(s, s)) / (len(STEPS) - 1)
        m = _tiny_model(len(tok), 0)
        m.load_state_dict({k: (1 - t) * sa[k] + t * sb[k] for k in sa})
        m.save_pretrained(root / f"step{s}")
    return root


def _cfg(source, tmp, **pythia):
    return resolve({"grid": GRID, "results_dir": str(tmp / "results"),
                    "pythia": {"enabled": True, "models": [str(source)], "device": "cpu", **pythia}})


# ------------------------------------------------------------------ revisions
def test_published_revisions_are_the_154_branches():
    revs = revisions.published_revisions()
    assert len(revs) == 154 and len(set(revs)) == 154
    assert revs[:12] == ["step0", "step1", "step2", "step4", "step8", "step16", "step32", "step64",
                         "step128", "step256", "step512", "step1000"]
    assert revs[-1] == "step143000" and revs[12] == "step2000"
    assert [int(r[4:]) for r in revs] == sorted(int(r[4:]) for r in revs)


def test_revision_selection():
    s = revisions.select_steps({"stride": 10})
    assert s[:11] == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert s[11:] == list(range(10000, 140001, 10000)) + [143000]
    assert revisions.select_steps({"stride": 50, "keep_early": False}) == [0, 50000, 100000, 143000]
    assert revisions.select_steps(["step2000", 1000, "step2000"]) == [1000, 2000]
    assert revisions.select_steps("all", available=[8, 0, 4]) == [0, 4, 8]
    with pytest.raises(ValueError, match="step3"):
        revisions.select_steps(["step3"])
    with pytest.raises(ValueError, match="step16"):
        revisions.select_steps(["step16"], available=[0, 8])


# ------------------------------------------------------------------ config
def test_config_errors_name_the_field(tmp_path, local_dir):
    with pytest.raises(ConfigError, match=r"pythia\.models\[0\].*does not exist"):
        _cfg(tmp_path / "nowhere", tmp_path)
    with pytest.raises(ConfigError, match=r"pythia\.revisions.*step64"):
        _cfg(local_dir, tmp_path, revisions=["step0", "step64"])
    with pytest.raises(ConfigError, match=r"pythia\.revisions.*step3"):
        _cfg("EleutherAI/pythia-160m", tmp_path, revisions=["step0", "step3"])
    with pytest.raises(ConfigError, match=r"pythia\.revisions.*only 2"):
        _cfg("EleutherAI/pythia-160m", tmp_path, revisions=["step0", "step1"])
    with pytest.raises(ConfigError, match=r"pythia\.benchmarks"):
        _cfg("EleutherAI/pythia-160m", tmp_path, benchmarks=["trivia"])
    with pytest.raises(ConfigError, match=r"pythia\.models\[1\].*repeats"):
        resolve({"grid": GRID, "pythia": {"enabled": True, "models": ["EleutherAI/pythia-160m", "x/pythia-160m"]}})
    with pytest.raises(ConfigError, match=r"pythia\.(dtype|bogus)"):
        resolve({"grid": GRID, "pythia": {"dtype": "int8"}})
    cfg = _cfg("EleutherAI/pythia-2.8b", tmp_path, revisions={"stride": 71})
    spec = settings.extract_spec(cfg, "2.8b")
    assert spec["run"] == "pythia_2.8b" and spec["kind"] == "hub"
    assert spec["revisions"][-3:] == ["step71000", "step142000", "step143000"]
    assert spec["n_items"]["deduction7"] == settings.DEDUCTION_DEFAULT_ITEMS
    local = settings.extract_spec(_cfg(local_dir, tmp_path), "tiny")
    assert local["kind"] == "local" and local["revisions"] == [f"step{s}" for s in STEPS]
    # disabled by default: no targets, nothing checked
    assert resolve({"grid": GRID})["pythia"]["enabled"] is False


# ------------------------------------------------------------------ benchmarks
@pytest.mark.parametrize("name", FIXED_BENCHMARKS)
def test_fixed_sets_are_well_formed(name):
    items = load_fixed(name)
    assert 16 <= len(items) <= 200
    assert all(o.startswith(" ") for it in items for o in it.options)       # continuations
    assert len({it.prompt + "|".join(it.options) for it in items}) == len(items)
    # the correct option is not always at one index (a position bias would fake accuracy)
    assert len({it.answer for it in items}) > 1
    assert max(np.bincount([it.answer for it in items])) <= 0.75 * len(items)


def test_arithmetic_answers_are_right():
    for it in load_fixed("arithmetic"):
        a, op, b = re.fullmatch(r"(\d+) ([-+*]) (\d+) =", it.prompt).groups()
        truth = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
        assert [int(o) for o in it.options].count(truth) == 1
        assert int(it.options[it.answer]) == truth


def test_icl_rule_based_answers_are_right():
    for it in load_fixed("icl"):
        *demos, query = it.prompt.split("\n")
        q = query.rsplit(" ->", 1)[0] if "->" in query else None
        ans = it.options[it.answer].strip()
        kind = it.meta["kind"]
        if kind == "upper":
            assert ans == q.upper()
        elif kind == "next_letter":
            assert ans == chr(ord(q) + 1)
        elif kind == "next_number":
            assert int(ans) == int(q) + 1
        # every demonstration follows the same rule as the answer
        for d in demos:
            x, y = re.split(r" -> |: ", d)
            if kind == "upper":
                assert y == x.upper()
            elif kind == "next_letter":
                assert y == chr(ord(x) + 1)


# An independent reader of the rendered puzzles: regexes for each sentence form, then
# all orderings enumerated with itertools (no code shared with deduction.py).
_ORD = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "sixth": 5, "seventh": 6}
_PATTERNS = [  # (regex, kind); kind: lt = A before B, gt = A after B, s = k-th from start, e = from end
    (r"(.+) is to the left of (.+)", "lt"), (r"(.+) is to the right of (.+)", "gt"),
    (r"(.+) finished above (.+)", "lt"), (r"(.+) finished below (.+)", "gt"),
    (r"(.+) is older than (.+)", "lt"), (r"(.+) is newer than (.+)", "gt"),
    (r"(.+) are less expensive than (.+)", "lt"), (r"(.+) are more expensive than (.+)", "gt"),
    (r"(.+) is the leftmost", "s0"), (r"(.+) is the rightmost", "e0"),
    (r"(.+) is the (\w+) from the left", "s"), (r"(.+) is the (\w+) from the right", "e"),
    (r"(.+) finished first", "s0"), (r"(.+) finished last", "e0"),
    (r"(.+) finished (\w+)-to-last", "e"), (r"(.+) finished (\w+)", "s"),
    (r"(.+) is the oldest", "s0"), (r"(.+) is the newest", "e0"),
    (r"(.+) is the (\w+)-oldest", "s"), (r"(.+) is the (\w+)-newest", "e"),
    (r"(.+) are the cheapest", "s0"), (r"(.+) are the most expensive", "e0"),
    (r"(.+) are the (\w+)-cheapest", "s"), (r"(.+) are the (\w+)-most expensive", "e"),
]


def _parse(sentence, names, n):
    norm = lambda s: s.strip().lower().removeprefix("the ")  # noqa: E731
    for rx, kind in _PATTERNS:
        m = re.fullmatch(rx, sentence.strip().rstrip("."))
        if not m:
            continue
        a = names.index(norm(m.group(1)))
        if kind in ("lt", "gt"):
            b = names.index(norm(m.group(2)))
            return (lambda p: p[a] < p[b]) if kind == "lt" else (lambda p: p[a] > p[b])
        k = 0 if kind in ("s0", "e0") else _ORD[m.group(2)]
        k = k if kind.startswith("s") else n - 1 - k
        return lambda p: p[a] == k
    raise AssertionError(f"unparsed sentence: {sentence!r}")


@pytest.mark.parametrize("n", [3, 5, 7])
def test_deduction_puzzles_have_exactly_one_solution(n):
    items = deduction.generate(n, 40, seed=3)
    assert deduction.generate(n, 40, seed=3) == items                    # seeded
    assert [it["prompt"] for it in deduction.generate(n, 5, seed=4)] != [it["prompt"] for it in items[:5]]
    for it in items:
        body = it["prompt"].split("paragraph. ", 1)[1].split("\nQuestion:")[0]
        intro, rest = body.split(": ", 1)
        listed, clues = rest.split(". ", 1) if ". " in rest else (rest.rstrip("."), "")
        names = [re.sub(r"^(and )?(an? )?", "", x.strip()) for x in listed.split(",")]
        names = [x.lower() for x in names]
        assert len(names) == n and f"{deduction.NUMBER_WORDS[n]} " in intro
        preds = [_parse(s, names, n) for s in clues.split(". ") if s]
        sols = [p for p in itertools.permutations(range(n)) if all(f(p) for f in preds)]
        assert len(sols) == 1, it["prompt"]
        truth = [_parse(o, names, n)(sols[0]) for o in it["options"]]
        assert truth.count(True) == 1 and truth.index(True) == it["answer"]
        # the asked-about position is never stated outright in the clues
        assert it["options"][it["answer"]].strip() not in clues
    assert len({it["answer"] for it in items}) > 1


# ------------------------------------------------------------------ scoring
def test_hidden_state_labels_and_scores_match_plain_forward_passes(local_dir):
    from transformers import AutoTokenizer

    from geoanatomy.pythia.scoring import encode, layer_names, score
    tok = AutoTokenizer.from_pretrained(local_dir)
    model = _tiny_model(len(tok), 5)
    items = load_benchmark("syntax", 4) + load_benchmark("deduction3", 2)
    enc = encode(tok, items)
    res = score(model, enc, batch_size=3)             # padded batches of mixed lengths
    assert layer_names(2) == ["embed", "layer1", "layer2", "final_ln_post"]
    hooks = {}
    nx = model.gpt_neox
    nx.embed_in.register_forward_hook(lambda m, i, o: hooks.__setitem__("embed", o))
    nx.layers[0].register_forward_hook(lambda m, i, o: hooks.__setitem__("layer1", o[0] if isinstance(o, tuple) else o))
    nx.layers[1].register_forward_hook(lambda m, i, o: hooks.__setitem__("layer2", o[0] if isinstance(o, tuple) else o))
    nx.final_layer_norm.register_forward_hook(lambda m, i, o: hooks.__setitem__("final_ln_post", o))
    with torch.no_grad():
        for i, (p, opts) in enumerate(enc):
            for j, o in enumerate(opts):
                ids = torch.tensor([p + o])
                logp = torch.log_softmax(model(ids).logits[0].double(), -1)      # (T, V)
                want = sum(float(logp[len(p) - 1 + k, t]) for k, t in enumerate(o))
                assert res["sum"][i][j] == pytest.approx(want, abs=1e-4)
                assert res["mean"][i][j] == pytest.approx(want / len(o), abs=1e-4)
                if j == 0:
                    for name in layer_names(2):
                        torch.testing.assert_close(res["hidden"][name][i], hooks[name][0, len(p) - 1],
                                                   atol=1e-5, rtol=1e-4)
    # hidden_states[-1] is after the final LayerNorm; layer2 (hooked) is before it
    assert not torch.allclose(res["hidden"]["layer2"], res["hidden"]["final_ln_post"])


def test_fingerprints_and_duplicates(local_dir):
    from geoanatomy.pythia.fingerprint import duplicates, weights_sha256
    m = _tiny_model(50, 0)
    h = weights_sha256(m)
    assert h == weights_sha256(_tiny_model(50, 0)) and len(h) == 64
    with torch.no_grad():
        m.gpt_neox.layers[1].mlp.dense_4h_to_h.weight[3, 7] += 1e-6
    assert weights_sha256(m) != h
    assert duplicates([("step0", "a"), ("step1", "a"), ("step2", "b"), ("step4", "a"), ("step8", "b")]) == \
        {"step1": "step0", "step4": "step0", "step8": "step2"}


# ------------------------------------------------------------------ the branch on local dirs
def _rankme_np(Z):
    s = np.linalg.svd(np.asarray(Z, dtype=np.float64), compute_uv=False)
    p = s / s.sum() + 1e-7
    return math.exp(-(p * np.log(p)).sum())


def test_branch_end_to_end_on_local_checkpoints(tmp_path, local_dir):
    from transformers import AutoTokenizer, GPTNeoXForCausalLM

    from geoanatomy.table import COLUMNS, read_table
    from geoanatomy.pythia.events import run_events
    from geoanatomy.pythia.extract import extract_model
    cfg = _cfg(local_dir, tmp_path, benchmarks=E2E_BENCH, n_items={b: N_ITEMS[b] for b in E2E_BENCH},
               batch_size=7)
    spec = settings.extract_spec(cfg, "tiny")
    out = tmp_path / "results" / "pythia_tiny"
    logs = []
    summary = extract_model(spec, out, log=logs.append)

    dups = json.loads((out / "duplicates.json").read_text())
    assert {d["revision"]: d["duplicate_of"] for d in dups["duplicates"]} == {"step1": "step0", "step32": "step4"}
    assert dups["fingerprints"]["step1"] == dups["fingerprints"]["step0"]
    assert len(set(dups["fingerprints"].values())) == len(STEPS) - len(COPIES)
    df = read_table(out / "metrics.csv")
    assert list(df.columns) == COLUMNS
    unique_steps = [s for s in STEPS if s not in COPIES]
    assert sorted(df["step"].unique()) == unique_steps                       # duplicates excluded
    assert summary["model"]["layer_names"] == ["embed", "layer1", "layer2", "final_ln_post"]
    for b in E2E_BENCH:
        sub = df[(df["run"] == f"pythia_tiny_{b}") & (df["measure"] == "rankme")]
        assert set(sub["layer"]) == {"embed", "layer1", "layer2", "final_ln_post"}
        assert len(sub) == len(unique_steps) * 4 * 2                          # steps x layers x variants
    # deduction prompts all end in "Answer:": the embedding row is rank one by construction
    emb = df[(df["run"] == "pythia_tiny_deduction3") & (df["layer"] == "embed") & (df["variant"] == "uncentred")]
    assert emb["value"].to_numpy() == pytest.approx(1.0, abs=1e-5)
    assert all(json.loads(s).get("constant_by_construction") for s in emb["settings"])

    # independent recomputation at step8: accuracy (sum scoring), answer log-prob, RankMe
    tok = AutoTokenizer.from_pretrained(local_dir)
    model = GPTNeoXForCausalLM.from_pretrained(local_dir / "step8").eval()
    items = load_benchmark("syntax", N_ITEMS["syntax"])
    correct, lp_correct, last = 0, [], []
    with torch.no_grad():
        for it in items:
            p = tok(it.prompt, add_special_tokens=False)["input_ids"]
            scores = []
            for o in it.options:
                oi = tok(o, add_special_tokens=False)["input_ids"]
                out_ = model(torch.tensor([p + oi]), output_hidden_states=True)
                lpm = torch.log_softmax(out_.logits[0].double(), -1)
                scores.append(sum(float(lpm[len(p) - 1 + k, t]) for k, t in enumerate(oi)))
                if len(scores) == 1:
                    last.append(out_.hidden_states[-1][0, len(p) - 1].numpy())
            correct += int(np.argmax(scores) == it.answer)
            lp_correct.append(scores[it.answer])
    row = lambda m, **kw: df[(df["run"] == "pythia_tiny_syntax") & (df["step"] == 8) & (df["measure"] == m)  # noqa: E731
                             & np.logical_and.reduce([df[k] == v for k, v in kw.items()] or [True])]["value"]
    assert float(row("accuracy").iloc[0]) == pytest.approx(correct / len(items))
    assert float(row("logprob").iloc[0]) == pytest.approx(np.mean(lp_correct), abs=1e-4)
    assert float(row("rankme", layer="final_ln_post", variant="uncentred").iloc[0]) == \
        pytest.approx(_rankme_np(np.stack(last)), rel=1e-4)

    # events: precursor.json per benchmark, with the algorithmic runs' keys
    e = settings.events_settings(cfg)
    pres = run_events(out, E2E_BENCH, e, log=logs.append)
    for b in E2E_BENCH:
        pre = json.loads((out / b / "precursor.json").read_text())
        assert pre == pres[b] and (out / b / "trajectory.png").stat().st_size > 10_000
        for k in ("run", "task", "size", "n_params", "steps", "n_checkpoints", "acquired", "acquisition_step",
                  "logprob_emergence_step", "difficulty", "final_accuracy", "chance_accuracy", "events_settings"):
            assert k in pre
        rm = pre["measures"]["rankme"]
        for k in ("layer", "position", "variant", "n_samples", "init", "floor", "floor_step", "collapsed",
                  "collapse_step", "recovery_step", "transition_step", "precursor", "gap_steps", "per_layer"):
            assert k in rm
        assert pre["n_checkpoints"] == len(unique_steps) and pre["duplicates_excluded"] == ["step1", "step32"]
        assert rm["layer"] == "final_ln_post" and rm["position"] == "last_prompt"
        vals = df[(df["run"] == f"pythia_tiny_{b}") & (df["measure"] == "rankme") & (df["layer"] == "final_ln_post")
                  & (df["variant"] == "uncentred")].sort_values("step")
        assert rm["floor"] == pytest.approx(vals["value"].min())
        assert rm["floor_step"] == int(vals["step"].iloc[int(np.argmin(vals["value"].to_numpy()))])

    # rerun: every revision is reused from partial/, the table is byte-identical
    before = (out / "metrics.csv").read_bytes()
    logs.clear()
    extract_model(spec, out, log=logs.append)
    assert sum("reused" in m for m in logs) == len(STEPS)
    assert (out / "metrics.csv").read_bytes() == before


# ------------------------------------------------------------------ hub path, offline
def _fake_hub_cache(cache, repo_id, local_dir, steps):
    """A Hugging Face hub cache as huggingface_hub lays it out: blobs/, refs/<branch>
    (commit hash), snapshots/<commit>/<file> -> ../../blobs/<sha256>."""
    import hashlib
    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    for d in ("blobs", "refs", "snapshots"):
        (repo / d).mkdir(parents=True, exist_ok=True)
    for s in steps:
        commit = hashlib.sha1(f"{repo_id}@step{s}".encode()).hexdigest()
        (repo / "refs" / f"step{s}").write_text(commit)
        snap = repo / "snapshots" / commit
        snap.mkdir()
        files = list((local_dir / f"step{s}").iterdir()) + [f for f in local_dir.iterdir() if f.is_file()]
        for f in files:
            data = f.read_bytes()
            blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
            blob.write_bytes(data)
            (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    return repo


def test_hub_revision_loading_and_cache_deletion_offline(tmp_path, local_dir):
    from geoanatomy.pythia.fingerprint import weights_sha256
    from geoanatomy.pythia.loading import (LoadError, cached_revision_bytes, delete_cached_revision, load_model,
                                           load_tokenizer)
    cache = tmp_path / "hub"
    repo_id = "EleutherAI/pythia-tiny"
    _fake_hub_cache(cache, repo_id, local_dir, [0, 2, 4])
    hub = load_model(repo_id, "hub", "step2", cache_dir=str(cache))
    local = load_model(str(local_dir), "local", "step2")
    assert weights_sha256(hub) == weights_sha256(local)
    assert weights_sha256(load_model(repo_id, "hub", "step4", cache_dir=str(cache))) != weights_sha256(hub)
    assert load_tokenizer(repo_id, "hub", "step2", str(cache))("hello world")["input_ids"]
    size = cached_revision_bytes(repo_id, "step2", str(cache))
    assert size is not None and size > 0
    freed = delete_cached_revision(repo_id, "step2", str(cache))
    assert freed > 0 and cached_revision_bytes(repo_id, "step2", str(cache)) is None
    assert cached_revision_bytes(repo_id, "step0", str(cache)) is not None      # others untouched
    load_model(repo_id, "hub", "step0", cache_dir=str(cache))
    with pytest.raises(LoadError, match="step2"):
        load_model(repo_id, "hub", "step2", cache_dir=str(cache))
    assert delete_cached_revision(repo_id, "step2", str(cache)) == 0


def test_hub_extraction_deletes_each_revision_after_use(tmp_path, local_dir):
    """The whole extraction through the hub code path (fake cache, offline), with
    delete_cache: duplicates flagged as on local dirs, the cache left without revisions."""
    from geoanatomy.pythia.extract import extract_model
    from geoanatomy.pythia.loading import cached_revision_bytes
    cache = tmp_path / "hub"
    repo_id = "EleutherAI/pythia-tiny"
    steps = [0, 1, 2, 4, 8]
    _fake_hub_cache(cache, repo_id, local_dir, steps)
    cfg = _cfg(repo_id, tmp_path, revisions=[f"step{s}" for s in steps], benchmarks=["syntax"],
               n_items={"syntax": 4}, delete_cache=True, cache_dir=str(cache))
    spec = settings.extract_spec(cfg, "tiny")
    assert spec["kind"] == "hub"
    summary = extract_model(spec, tmp_path / "results" / "pythia_tiny", log=lambda *a: None)
    dups = json.loads((tmp_path / "results" / "pythia_tiny" / "duplicates.json").read_text())
    assert [d["revision"] for d in dups["duplicates"]] == ["step1"]
    assert set(summary["disk_bytes"]) == {f"step{s}" for s in steps} and summary["freed_bytes"] > 0
    assert all(cached_revision_bytes(repo_id, f"step{s}", str(cache)) is None for s in steps)


# ------------------------------------------------------------------ cross-size statistics
def test_spearman_exact_matches_scipy_permutation_test():
    from scipy import stats

    from geoanatomy.pythia.scale import spearman_exact
    r = spearman_exact([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5])
    assert r["p_value"] == pytest.approx(
        stats.permutation_test(([2, 1, 4, 3, 6, 5],), lambda y: stats.spearmanr([1, 2, 3, 4, 5, 6], y)[0],
                               permutation_type="pairings", alternative="two-sided").pvalue)
    perfect = spearman_exact(range(6), [10, 20, 30, 40, 50, 60])
    assert perfect["rho"] == pytest.approx(1.0) and perfect["p_value"] == pytest.approx(2 / 720)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=6), rng.normal(size=6)
    y[2] = y[4]                                                              # a tie
    got = spearman_exact(x, y)
    ref = stats.permutation_test((y,), lambda yy: stats.spearmanr(x, yy)[0], permutation_type="pairings",
                                 alternative="two-sided")
    assert got["rho"] == pytest.approx(stats.spearmanr(x, y)[0])
    assert got["p_value"] == pytest.approx(ref.pvalue)
    assert spearman_exact([1, 2], [2, 1])["rho"] is None


def test_pythia_spearman_is_the_analysis_one_and_bounded_at_n10():
    """One Spearman implementation: the Pythia branch imports geoanatomy.analysis.stats; at n = 10
    it is exact without building the 10! x 10 permutation array (the old copy peaked near 0.66 GB)."""
    import itertools
    import tracemalloc

    from scipy import stats

    from geoanatomy.analysis import stats as astats
    from geoanatomy.pythia.scale import spearman_exact
    x = np.array([1, 1, 2, 3, 3, 3, 5.0])
    y = np.array([2, 0, 2, 7, 1, 7, 3.0])
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    null = np.array([np.corrcoef(rx, ry[list(p)])[0, 1] for p in itertools.permutations(range(7))])
    obs = np.corrcoef(rx, ry)[0, 1]
    assert spearman_exact(x, y)["p_value"] == pytest.approx(np.mean(np.abs(null) >= abs(obs) - 1e-12))
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=10), rng.normal(size=10)
    if hasattr(astats, "_perm_table"):
        astats._perm_table.cache_clear()
    tracemalloc.start()
    got = spearman_exact(x, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50e6 and got["n_permutations"] == 3628800
    ref = astats.spearman_exact(x, y)
    assert (got["rho"], got["p_value"]) == (ref["rho"], ref["p"])


# ------------------------------------------------------------------ through Snakemake
@pytest.mark.slow
def test_pythia_rules_through_snakemake(tmp_path, local_dir):
    import subprocess
    import sys

    from conftest import REPO
    second = tmp_path / "pythia-tiny-b"
    shutil.copytree(local_dir, second, symlinks=True)
    (tmp_path / "cfg.yaml").write_text(json.dumps({
        "results_dir": "results", "grid": GRID,
        "pythia": {"enabled": True, "models": [str(local_dir), {"source": str(second), "name": "tinyb"}],
                   "benchmarks": ["syntax", "arithmetic", "deduction3"], "n_items": N_ITEMS, "device": "cpu"}}))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    target = "results/summary/pythia_scale.json"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
           target, "--cores", "1", "--configfile", str(tmp_path / "cfg.yaml")]
    p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    summ = json.loads((tmp_path / target).read_text())
    assert [m["name"] for m in summ["models"]] == ["tiny", "tinyb"]
    floors = [q for q in summ["pairs"] if q["quantity"] == "rankme_floor"][0]
    assert floors["n"] == 3 and floors["rho"] == pytest.approx(1.0)         # identical checkpoints
    for name in ("tiny", "tinyb"):
        assert (tmp_path / f"results/pythia_{name}/deduction3/precursor.json").exists()
        assert (tmp_path / f"results/pythia_{name}/duplicates.json").exists()
    p2 = subprocess.run(cmd + ["-n"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "Nothing to be done" in p2.stdout + p2.stderr
