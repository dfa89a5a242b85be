"""Pythia validation branch, without network: a tiny GPT-NeoX and a tiny byte-level BPE
tokenizer are built and saved here as "stepN" checkpoints (two pairs identical on
purpose), then loaded from a local directory and from a hand-built Hugging Face cache
with HF_HUB_OFFLINE=1, fingerprinted, scored and run through event detection. A fake hub
client replays the duplicate pattern of the real pythia-2.8b repository
(EleutherAI/pythia#205). Every number is checked against an independent computation
(plain forward passes, float64 references, numpy SVD, itertools enumeration, scipy's
permutation test).

Tests that need transformers/tokenizers skip one by one (``_hf()`` / the ``local_dir``
fixture); the revision, config, benchmark, deduction, duplicate-rule and statistics tests
run everywhere."""
import copy
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

from geoanatomy.config import ConfigError, resolve  # noqa: E402
from geoanatomy.config import pythia as settings  # noqa: E402
from geoanatomy.config import pythia_revisions as revisions  # noqa: E402
from geoanatomy.hf import deduction
from geoanatomy.pythia import fingerprint  # noqa: E402
from geoanatomy.hf import hub as hf_hub  # noqa: E402
from geoanatomy.hf.benchmarks import load_benchmark, load_fixed  # noqa: E402
from geoanatomy.config.pythia import FIXED_BENCHMARKS  # noqa: E402
from conftest import FakeHub, fake_hub_cache, tiny_bpe_tokenizer  # noqa: E402,F401

GRID = [{"tasks": ["mod"], "levels": ["L1"], "sizes": ["nano"]}]
STEPS = [0, 1, 2, 4, 8, 16, 32]
COPIES = {1: 0, 32: 4}                       # step -> step whose weights it repeats
E2E_BENCH = ["syntax", "deduction3"]
N_ITEMS = {"syntax": 8, "deduction3": 6, "arithmetic": 8}


def _hf():
    """Skip the calling test unless transformers and tokenizers are installed; torch."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    return pytest.importorskip("torch")


# ------------------------------------------------------------------ tiny model

def _tokenizer(texts):
    return tiny_bpe_tokenizer(texts, vocab_size=400)


def _tiny_model(vocab, seed):
    import torch
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    cfg = GPTNeoXConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=1024)
    torch.manual_seed(seed)
    return GPTNeoXForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def local_dir(tmp_path_factory):
    """root/step{N}/ for STEPS: weights interpolate between two random inits; the COPIES
    steps repeat an earlier step's weights exactly. Tokenizer saved at root/."""
    _hf()
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


@pytest.fixture
def bare_local_dir(tmp_path):
    """root/step{N}/config.json only: enough for config validation (no transformers needed)."""
    root = tmp_path / "pythia-bare"
    for s in STEPS:
        (root / f"step{s}").mkdir(parents=True)
        (root / f"step{s}" / "config.json").write_text("{}")
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
    assert revisions.select_steps({"stride": 50, "keep_early": False, "exclude": ["step0"]}) == [50000, 100000, 143000]
    assert revisions.select_steps(["step2000", 1000, "step2000"]) == [1000, 2000]
    assert revisions.select_steps("all", available=[8, 0, 4]) == [0, 4, 8]
    assert revisions.select_steps({"preset": "all"}) == revisions.published_steps()
    assert revisions.select_steps({"preset": "all", "exclude": [0]}) == revisions.published_steps()[1:]
    with pytest.raises(ValueError, match="step3"):
        revisions.select_steps(["step3"])
    with pytest.raises(ValueError, match="step16"):
        revisions.select_steps(["step16"], available=[0, 8])
    with pytest.raises(ValueError, match="not selected.*step1000"):
        revisions.select_steps({"preset": "window", "exclude": ["step1000"]})
    with pytest.raises(ValueError, match="unknown preset"):
        revisions.select_steps({"preset": "decades"})


def test_window_preset_is_17_evenly_spaced_grid_revisions():
    w = revisions.select_steps({"preset": "window"})
    assert w == [50000, 52000, 54000, 56000, 58000, 59000, 61000, 63000, 65000, 67000, 69000, 71000,
                 73000, 74000, 76000, 78000, 80000]
    # independent: nearest grid step (ties up) to 50000 + 30000 i / 16
    assert w == [1000 * math.floor((50000 + 30000 * i / 16) / 1000 + 0.5) for i in range(17)]
    assert set(w) <= set(revisions.published_steps())


def test_spread72_preset_is_log_spaced_early_then_even():
    s = revisions.select_steps({"preset": "spread72"})
    assert len(s) == 72 and len(set(s)) == 72 and set(s) <= set(revisions.published_steps())
    assert s[:11] == [0] + [2 ** i for i in range(10)]                      # log-spaced early
    late = s[11:]
    assert late[0] == 1000 and late[-1] == 143000 and len(late) == 61
    gaps = np.diff(late)
    assert set(gaps) <= {2000, 3000} and abs(gaps.mean() - 142000 / 60) < 1e-9   # even on the grid
    assert late == [1000 * math.floor(1 + 142 * j / 60 + 0.5) for j in range(61)]


# ------------------------------------------------------------------ config
def test_config_errors_name_the_field(tmp_path, bare_local_dir):
    with pytest.raises(ConfigError, match=r"pythia\.models\[0\].*does not exist"):
        _cfg(tmp_path / "nowhere", tmp_path)
    with pytest.raises(ConfigError, match=r"pythia\.revisions.*step64"):
        _cfg(bare_local_dir, tmp_path, revisions=["step0", "step64"])
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
    assert spec["delete_cache"] is True                                       # default: cache cleaned
    local = settings.extract_spec(_cfg(bare_local_dir, tmp_path), "bare")
    assert local["kind"] == "local" and local["revisions"] == [f"step{s}" for s in STEPS]
    # disabled by default: no targets, nothing checked
    assert resolve({"grid": GRID})["pythia"]["enabled"] is False
    assert resolve({"grid": GRID})["pythia"]["delete_cache"] is True


def test_revision_presets_in_the_config(tmp_path, bare_local_dir):
    cfg = _cfg("EleutherAI/pythia-2.8b", tmp_path, revisions={"preset": "window"})
    assert settings.extract_spec(cfg, "2.8b")["revisions"] == \
        [f"step{s}" for s in revisions.window_steps()]
    cfg = _cfg("EleutherAI/pythia-410m", tmp_path, revisions={"preset": "spread72", "exclude": ["step0"]})
    assert len(settings.extract_spec(cfg, "410m")["revisions"]) == 71
    # a model's own selection overrides pythia.revisions; errors name that model's field
    cfg = resolve({"grid": GRID, "results_dir": str(tmp_path / "results"), "pythia": {
        "enabled": True, "revisions": {"preset": "spread72"},
        "models": ["EleutherAI/pythia-160m",
                   {"source": "EleutherAI/pythia-2.8b", "revisions": {"preset": "window"}}]}})
    assert len(settings.extract_spec(cfg, "160m")["revisions"]) == 72
    assert len(settings.extract_spec(cfg, "2.8b")["revisions"]) == 17
    with pytest.raises(ConfigError, match=r"pythia\.revisions"):
        _cfg("EleutherAI/pythia-160m", tmp_path, revisions={"preset": "decades"})
    with pytest.raises(ConfigError, match=r"pythia\.revisions"):
        _cfg("EleutherAI/pythia-160m", tmp_path, revisions={"preset": "window", "stride": 2})
    with pytest.raises(ConfigError, match=r"pythia\.revisions.*not selected"):
        _cfg("EleutherAI/pythia-160m", tmp_path, revisions={"preset": "window", "exclude": ["step1000"]})
    with pytest.raises(ConfigError, match=r"pythia\.revisions"):
        _cfg("EleutherAI/pythia-160m", tmp_path, revisions={"preset": "window", "exclude": ["main"]})
    with pytest.raises(ConfigError, match=r"pythia\.models\[0\]\.revisions.*step64"):
        resolve({"grid": GRID, "results_dir": str(tmp_path / "results"), "pythia": {
            "enabled": True, "models": [{"source": str(bare_local_dir), "revisions": ["step0", "step64"]}]}})
    with pytest.raises(ConfigError, match=r"pythia\.models\[0\]\.revisions.*only 2"):
        resolve({"grid": GRID, "results_dir": str(tmp_path / "results"), "pythia": {
            "enabled": True, "models": [{"source": "EleutherAI/pythia-160m", "revisions": [0, 1]}]}})
    # presets on a local directory must exist there
    with pytest.raises(ConfigError, match=r"pythia\.revisions.*step50000"):
        _cfg(bare_local_dir, tmp_path, revisions={"preset": "window"})


def test_paper_and_local_configs_validate(tmp_path):
    import yaml

    from conftest import REPO
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    cfg = resolve({"grid": GRID, "pythia": paper["pythia"]})
    specs = {m["name"]: settings.extract_spec(cfg, m["name"]) for m in settings.enabled_models(cfg)}
    assert set(specs) == {"160m", "410m", "2.8b"}
    assert all(s["delete_cache"] for s in specs.values())
    assert "step0" not in specs["2.8b"]["revisions"]                    # step0 of 2.8b is main's weights
    assert len(specs["160m"]["revisions"]) == 72
    local = yaml.safe_load((REPO / "config" / "pythia_local.yaml").read_text())["pythia"]
    assert local["delete_cache"] in (True, False) and local["dtype"] == "float32"


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
# BIG-Bench Hard's position phrases (logical_deduction_{three,five,seven}_objects), start -> end
_BBH = {
    "shelf": {3: ["leftmost", "second from the left", "rightmost"],
              5: ["leftmost", "second from the left", "third from the left", "second from the right", "rightmost"],
              7: ["leftmost", "second from the left", "third from the left", "fourth from the left",
                  "third from the right", "second from the right", "rightmost"]},
    "golf": {3: ["first", "second", "last"], 5: ["first", "second", "third", "second-to-last", "last"],
             7: ["first", "second", "third", "fourth", "third-to-last", "second-to-last", "last"]},
    "antiques": {3: ["oldest", "second-newest", "newest"],
                 5: ["oldest", "second-oldest", "third-newest", "second-newest", "newest"],
                 7: ["oldest", "second-oldest", "third-oldest", "fourth-newest", "third-newest", "second-newest",
                     "newest"]},
    "fruit": {3: ["cheapest", "second-most expensive", "most expensive"],
              5: ["cheapest", "second-cheapest", "third-most expensive", "second-most expensive", "most expensive"],
              7: ["cheapest", "second-cheapest", "third-cheapest", "fourth-most expensive", "third-most expensive",
                  "second-most expensive", "most expensive"]},
}
_BBH["branch"] = _BBH["shelf"]


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


def _position_words(sentence):
    """The position phrase of an absolute statement ("second from the left", "last"), or None."""
    s = sentence.strip().rstrip(".")
    for rx in (r".+ is the (leftmost|rightmost|oldest|newest|\w+ from the (?:left|right)|\w+-oldest|\w+-newest)",
               r".+ finished (first|last|\w+-to-last|first|second|third|fourth)",
               r".+ are the (cheapest|most expensive|\w+-cheapest|\w+-most expensive)"):
        m = re.fullmatch(rx, s)
        if m and not re.search(r" (than|above|below|of) ", s):
            return m.group(1)
    return None


def _split_puzzle(it, n):
    body = it["prompt"].split("paragraph. ", 1)[1].split("\nQuestion:")[0]
    intro, rest = body.split(": ", 1)
    listed, clues = rest.split(". ", 1) if ". " in rest else (rest.rstrip("."), "")
    names = [re.sub(r"^(and )?(an? )?", "", x.strip()) for x in listed.split(",")]
    return intro, [x.lower() for x in names], [s for s in clues.split(". ") if s]


@pytest.mark.parametrize("n", [3, 5, 7])
def test_deduction_puzzles_have_exactly_one_solution(n):
    items = deduction.generate(n, 40, seed=3)
    assert deduction.generate(n, 40, seed=3) == items                    # seeded
    assert [it["prompt"] for it in deduction.generate(n, 5, seed=4)] != [it["prompt"] for it in items[:5]]
    for it in items:
        assert it["prompt"].startswith(f"The following paragraphs each describe a set of {deduction.NUMBER_WORDS[n]} "
                                       f"objects arranged in a fixed order. The statements are logically "
                                       f"consistent within each paragraph. ")
        intro, names, clues = _split_puzzle(it, n)
        assert len(names) == n and f"{deduction.NUMBER_WORDS[n]} " in intro
        preds = [_parse(s, names, n) for s in clues]
        sols = [p for p in itertools.permutations(range(n)) if all(f(p) for f in preds)]
        assert len(sols) == 1, it["prompt"]
        truth = [_parse(o, names, n)(sols[0]) for o in it["options"]]
        assert truth.count(True) == 1 and truth.index(True) == it["answer"]
    assert len({it["answer"] for it in items}) > 1


@pytest.mark.slow
@pytest.mark.parametrize("n", [3, 5, 7])
def test_deduction_wording_follows_big_bench_hard(n):
    """Every absolute statement (clue or option) names its position with BIG-Bench Hard's
    phrase for that position; absolute clues may concern the asked position, as in BBH."""
    items = deduction.generate(n, 60, seed=5)
    seen, stated, n_abs, n_clues = set(), 0, 0, 0
    for it in items:
        _, names, clues = _split_puzzle(it, n)
        sol = [p for p in itertools.permutations(range(n)) if all(_parse(s, names, n)(p) for s in clues)][0]
        table = _BBH[it["domain"]][n]
        for s in clues + [o.strip() for o in it["options"]]:
            words = _position_words(s)
            if words is None:
                continue
            obj = names.index(re.sub(r"^the ", "", s.split(" is ")[0].split(" are ")[0]
                                     .split(" finished ")[0].lower()))
            assert words == table[sol[obj]] if s in clues else words == table[it["question_position"]], s
            seen.add(words)
        abs_clues = [s for s in clues if _position_words(s) is not None]
        n_abs += len(abs_clues)
        n_clues += len(clues)
        stated += any(_position_words(s) == table[it["question_position"]] for s in abs_clues)
        assert len(clues) >= n - 1
    assert "fifth from the left" not in seen and "fifth-oldest" not in seen
    assert 0 < stated < len(items)                         # the asked position is sometimes stated (BBH)
    assert 0.2 < n_abs / n_clues < 0.75                    # a mix of absolute and relative clues


# ------------------------------------------------------------------ scoring
def test_hidden_state_labels_and_scores_match_plain_forward_passes(local_dir):
    torch = _hf()
    from transformers import AutoTokenizer

    from geoanatomy.hf.choice import encode, layer_names, score
    tok = AutoTokenizer.from_pretrained(local_dir)
    model = _tiny_model(len(tok), 5)
    items = load_benchmark("syntax", 4) + load_benchmark("deduction3", 2)
    enc = encode(tok, items)
    res = score(model, enc, batch_size=3)             # padded batches of mixed lengths
    assert layer_names(2) == ["embed", "block0", "block1", "ln_final"]
    hooks = {}
    nx = model.gpt_neox
    nx.embed_in.register_forward_hook(lambda m, i, o: hooks.__setitem__("embed", o))
    nx.layers[0].register_forward_hook(lambda m, i, o: hooks.__setitem__("block0", o[0] if isinstance(o, tuple) else o))
    nx.layers[1].register_forward_hook(lambda m, i, o: hooks.__setitem__("block1", o[0] if isinstance(o, tuple) else o))
    nx.final_layer_norm.register_forward_hook(lambda m, i, o: hooks.__setitem__("ln_final", o))
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
    # hidden_states[-1] is after the final LayerNorm; block1 (hooked) is before it
    assert not torch.allclose(res["hidden"]["block1"], res["hidden"]["ln_final"])


def _reference(model, enc, torch):
    """Per-option summed log-probs and last-prompt-token final hidden states from plain
    forward passes, one sequence at a time, logits as the model computes them."""
    sums, hid = [], []
    with torch.no_grad():
        for p, opts in enc:
            row = []
            for j, o in enumerate(opts):
                out = model(torch.tensor([p + o]), output_hidden_states=True)
                logp = torch.log_softmax(out.logits[0].to(torch.float64), -1)
                row.append(sum(float(logp[len(p) - 1 + k, t]) for k, t in enumerate(o)))
                if j == 0:
                    hid.append(out.hidden_states[-1][0, len(p) - 1].to(torch.float64))
            sums.append(np.array(row))
    return sums, torch.stack(hid)


def test_bf16_load_is_scored_in_float32_and_float64(tmp_path, local_dir):
    """Weights loaded in bfloat16 (pythia.dtype), scored by the branch: within 2e-4 nats of
    a float64 forward pass over the same weights, where the old path (bf16 forward, bf16
    logits cast afterwards) is off by more than 0.01 nats (and 100x more than the new one). The unembedding is scaled so
    logits have Pythia's magnitude (std ~ 10), where bf16 rounding costs 0.05-0.1 nats."""
    torch = _hf()
    from transformers import AutoTokenizer

    from geoanatomy.pythia.loading import for_scoring, load_model
    from geoanatomy.hf.choice import encode, score
    tok = AutoTokenizer.from_pretrained(local_dir)
    m = _tiny_model(len(tok), 11)
    with torch.no_grad():
        m.get_output_embeddings().weight.mul_(200.0)                   # embed_out (lm_head in transformers 5)
    m.save_pretrained(tmp_path / "m" / "step0")
    items = load_benchmark("syntax", 6) + load_benchmark("deduction3", 3)
    enc = encode(tok, items)

    m16 = load_model(str(tmp_path / "m"), "local", "step0", dtype="bfloat16")
    assert next(m16.parameters()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="float32"):
        score(m16, enc)                                                     # half precision refused
    ref64 = copy.deepcopy(m16).to(torch.float64)                           # same weights, float64 everywhere
    ref, ref_h = _reference(ref64, enc, torch)
    with torch.no_grad():
        logits = ref64(torch.tensor([enc[0][0]])).logits
    assert 5 < float(logits.std()) < 40                                     # Pythia-scale logits

    new = score(for_scoring(copy.deepcopy(m16)), enc, batch_size=4)
    # bf16 forward, bf16 logits; the math attention kernel: torch's fused bf16 CPU kernel needs
    # AVX-512 and fails on an AVX-512 machine whose kernels are pinned to the default (scalar)
    # instruction set, as CI's second float path pins them
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        old, old_h = _reference(m16, enc, torch)
    err_new = max(float(np.abs(a - b).max()) for a, b in zip(new["sum"], ref))
    err_old = max(float(np.abs(a - b).max()) for a, b in zip(old, ref))
    print(f"max |error| vs float64, nats: new {err_new:.2e}, old {err_old:.2e}")
    assert err_new < 2e-4, err_new
    assert err_old > 0.01 and err_old > 100 * err_new, (err_old, err_new)
    # accuracy-relevant differences: the new path reproduces the reference's option margins
    for a, b in zip(new["sum"], ref):
        np.testing.assert_allclose(a - a.max(), b - b.max(), atol=2e-4)
    # hidden states for RankMe: float32, without bf16 quantisation
    h = new["hidden"]["ln_final"]
    assert h.dtype == torch.float32
    assert float((h.double() - ref_h).abs().max()) < 1e-4
    assert float((old_h.double() - ref_h).abs().max()) > 1e-3


# ------------------------------------------------------------------ duplicates
def test_weights_fingerprint(local_dir):
    torch = _hf()
    from geoanatomy.pythia.fingerprint import weights_sha256
    m = _tiny_model(50, 0)
    h = weights_sha256(m)
    assert h == weights_sha256(_tiny_model(50, 0)) and len(h) == 64
    with torch.no_grad():
        m.gpt_neox.layers[1].mlp.dense_4h_to_h.weight[3, 7] += 1e-6
    assert weights_sha256(m) != h


A_STEPS = ([0] + [2 ** i for i in range(10)] + list(range(1000, 54000, 1000))
           + [55000, 60000, 65000, 70000, 80000, 90000, 100000, 103000, 110000, 120000, 130000, 140000])
B_STEPS = [54000, 56000, 57000, 58000, 59000, 61000, 62000, 63000, 64000, 143000]


def _hashes_2p8b():
    """Branch -> weight-file sha256 as EleutherAI/pythia#205 reports for pythia-2.8b: main's
    file under 76 branches (step0, the early grid, 1000..53000, round later steps), a second
    file under 54000..64000 and 143000, the 68 other branches unique."""
    assert len(A_STEPS) == 76 and len(B_STEPS) == 10
    out = {"main": "A" * 64}
    for s in revisions.published_steps():
        out[f"step{s}"] = "A" * 64 if s in A_STEPS else "B" * 64 if s in B_STEPS else f"{s:064d}"
    assert sum(v not in ("A" * 64, "B" * 64) for v in out.values()) == 68
    return out


def test_duplicate_rule_latest_holder_and_main():
    # every size: step0 = step1 = step2 (#83, #198); main = step143000
    h = {"step0": "x", "step1": "x", "step2": "x", "step4": "y", "step143000": "z", "main": "z"}
    assert fingerprint.resolve(h) == {"step0": "step2", "step1": "step2", "step2": "step2", "step4": "step4",
                                      "step143000": "step143000"}
    assert fingerprint.duplicates(h) == {"step0": "step2", "step1": "step2"}
    assert fingerprint.final_conflict(h) is None
    fingerprint.check_step0(h, "EleutherAI/pythia-160m", "test")              # step0 is not main: fine
    # later weights under an earlier label are measured at the latest label, never earlier
    assert fingerprint.duplicates([("step0", "a"), ("step1", "a"), ("step2", "b"), ("step4", "a"),
                                   ("step8", "b")]) == {"step0": "step4", "step1": "step4", "step2": "step8"}
    # the pythia-2.8b pattern over all 154 branches
    h = _hashes_2p8b()
    res = fingerprint.resolve(h)
    assert res["step143000"] == "step143000"                                  # kept
    assert all(res[f"step{s}"] == "main" for s in A_STEPS)                    # main's weights: never a step
    assert all(res[f"step{s}"] == "step143000" for s in B_STEPS)
    assert sum(r == v for r, v in res.items()) == 69                          # 68 unique + step143000
    assert "step143000" in fingerprint.final_conflict(h)
    with pytest.raises(fingerprint.Step0IsTrained, match=r"step0 holds the same weights as main"):
        fingerprint.check_step0(h, "EleutherAI/pythia-2.8b", "hub LFS sha256")
    # files: safetensors preferred; an index file or config does not count
    files = {"config.json": "git:1", "model.safetensors": "lfs:a", "pytorch_model.bin": "lfs:b"}
    assert hf_hub.weight_files(files) == {"model.safetensors": "lfs:a"}
    assert hf_hub.files_fingerprint({"pytorch_model.bin": "lfs:b", "pytorch_model.bin.index.json": "git:2"}) \
        == hf_hub.files_fingerprint({"pytorch_model.bin": "lfs:b"})
    assert hf_hub.files_fingerprint({"config.json": "git:1"}) is None
    # one format for the whole repository where one covers every revision
    lists = {"main": {"model.safetensors": "lfs:a", "pytorch_model.bin": "lfs:b"},
             "step143000": {"pytorch_model.bin": "lfs:b"}}
    assert hf_hub.common_format(lists) == "bin"
    assert hf_hub.files_fingerprint(lists["main"], "bin") == hf_hub.files_fingerprint(lists["step143000"])
    assert hf_hub.common_format({"a": {"model.safetensors": "x"}, "b": {"pytorch_model.bin": "y"}}) is None


# ------------------------------------------------------------------ the branch on local dirs
def _rankme_np(Z):
    s = np.linalg.svd(np.asarray(Z, dtype=np.float64), compute_uv=False)
    p = s / s.sum() + 1e-7
    return math.exp(-(p * np.log(p)).sum())


@pytest.mark.slow
def test_branch_end_to_end_on_local_checkpoints(tmp_path, local_dir):
    torch = _hf()
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
    # the latest revision holding a weight set is the one measured (step1 and step32 repeat
    # step0's and step4's weights: those are measured as step1 and step32)
    assert {d["revision"]: d["duplicate_of"] for d in dups["duplicates"]} == {"step0": "step1", "step4": "step32"}
    assert dups["fingerprints"]["step1"] == dups["fingerprints"]["step0"]
    assert len(set(dups["fingerprints"].values())) == len(STEPS) - len(COPIES)
    df = read_table(out / "metrics.csv")
    assert list(df.columns) == COLUMNS
    unique_steps = [s for s in STEPS if s not in COPIES.values()]
    assert unique_steps == [1, 2, 8, 16, 32] and dups["measured_revisions"] == [f"step{s}" for s in unique_steps]
    assert sorted(df["step"].unique()) == unique_steps                       # duplicates excluded
    assert summary["model"]["layer_names"] == ["embed", "block0", "block1", "ln_final"]
    for b in E2E_BENCH:
        sub = df[(df["run"] == f"pythia_tiny_{b}") & (df["measure"] == "rankme")]
        assert set(sub["layer"]) == {"embed", "block0", "block1", "ln_final"}
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
    assert float(row("rankme", layer="ln_final", variant="uncentred").iloc[0]) == \
        pytest.approx(_rankme_np(np.stack(last)), rel=1e-4)

    # step1 holds step0's weights: its rows are those of that weight set, labelled step 1
    s1 = df[(df["step"] == 1) & (df["measure"] == "accuracy_sum") & (df["run"] == "pythia_tiny_syntax")]
    assert len(s1) == 1 and 0 not in set(df["step"])

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
        assert pre["n_checkpoints"] == len(unique_steps) and pre["duplicates_excluded"] == ["step0", "step4"]
        assert pre["final_accuracy_norm"] == pytest.approx(
            (pre["final_accuracy"] - pre["chance_accuracy"]) / (1 - pre["chance_accuracy"]))
        assert rm["floor_norm"] == pytest.approx(rm["floor"] / rm["per_layer"]["ln_final"]["max_rank"])
        assert rm["last_token_stratum"] == ("shared" if b == "deduction3" else "diverse")
        assert rm["layer"] == "ln_final" and rm["position"] == "last_prompt"
        vals = df[(df["run"] == f"pythia_tiny_{b}") & (df["measure"] == "rankme") & (df["layer"] == "ln_final")
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
def _fake_hub_cache(cache, repo_id, local_dir, revs):
    """``fake_hub_cache`` (conftest) with revision -> ``local_dir/step{N}`` plus the root's files
    (``revs``: {revision: step}, or a list of steps: each revision ``step{N}`` holds its own)."""
    if not isinstance(revs, dict):
        revs = {f"step{s}": s for s in revs}
    root_files = [f for f in local_dir.iterdir() if f.is_file()]
    return fake_hub_cache(cache, repo_id, {rev: list((local_dir / f"step{s}").iterdir()) + root_files
                                           for rev, s in revs.items()})


def _hub_table(weights: dict[str, str]):
    return {rev: {"config.json": None, "model.safetensors": sha, "tokenizer.json": None}
            for rev, sha in weights.items()}


def test_hub_revision_loading_and_cache_deletion_offline(tmp_path, local_dir):
    from geoanatomy.pythia.fingerprint import weights_sha256
    from geoanatomy.pythia.loading import (LoadError, cached_revision_bytes, cached_weight_files,
                                           delete_cached_revision, load_model, load_tokenizer)
    cache = tmp_path / "hub"
    repo_id = "EleutherAI/pythia-tiny"
    _fake_hub_cache(cache, repo_id, local_dir, [0, 2, 4])
    hub = load_model(repo_id, "hub", "step2", cache_dir=str(cache))
    local = load_model(str(local_dir), "local", "step2")
    assert weights_sha256(hub) == weights_sha256(local)
    assert weights_sha256(load_model(repo_id, "hub", "step4", cache_dir=str(cache))) != weights_sha256(hub)
    assert load_tokenizer(repo_id, "hub", "step2", str(cache))("hello world")["input_ids"]
    assert cached_weight_files(repo_id, "step2", str(cache)) == ["model.safetensors"]
    size = cached_revision_bytes(repo_id, "step2", str(cache))
    assert size is not None and size > 0
    freed = delete_cached_revision(repo_id, "step2", str(cache))
    assert freed > 0 and cached_revision_bytes(repo_id, "step2", str(cache)) is None
    assert cached_weight_files(repo_id, "step2", str(cache)) == []
    assert cached_revision_bytes(repo_id, "step0", str(cache)) is not None      # others untouched
    load_model(repo_id, "hub", "step0", cache_dir=str(cache))
    with pytest.raises(LoadError, match="step2"):
        load_model(repo_id, "hub", "step2", cache_dir=str(cache))
    assert delete_cached_revision(repo_id, "step2", str(cache)) == 0


@pytest.mark.slow
def test_hub_extraction_deletes_what_it_downloaded(tmp_path, local_dir, monkeypatch):
    """The whole extraction through the hub code path (offline: no metadata), delete_cache
    left at its default (true): every revision the job downloads (here: copied into the
    cache when it is first loaded, as a download would) leaves the cache once measured;
    a revision that was cached before the job is left there."""
    from geoanatomy.pythia import extract as ex
    from geoanatomy.pythia.loading import cached_revision_bytes, cached_weight_files
    cache = tmp_path / "hub"
    repo_id = "EleutherAI/pythia-tiny"
    steps = [0, 1, 2, 4, 8]
    _fake_hub_cache(cache, repo_id, local_dir, [8])                         # cached before the job
    real_load = ex.load_model
    downloads = []

    def downloading_load(source, kind, revision, *a, **kw):
        if revision.startswith("step") and not cached_weight_files(repo_id, revision, str(cache)):
            _fake_hub_cache(cache, repo_id, local_dir, {revision: int(revision[4:])})   # "download"
            downloads.append(revision)
        return real_load(source, kind, revision, *a, **kw)
    monkeypatch.setattr(ex, "load_model", downloading_load)
    cfg = _cfg(repo_id, tmp_path, revisions=[f"step{s}" for s in steps], benchmarks=["syntax"],
               n_items={"syntax": 4}, cache_dir=str(cache))
    spec = settings.extract_spec(cfg, "tiny")
    assert spec["kind"] == "hub" and spec["delete_cache"] is True
    summary = ex.extract_model(spec, tmp_path / "results" / "pythia_tiny", log=lambda *a: None)
    dups = json.loads((tmp_path / "results" / "pythia_tiny" / "duplicates.json").read_text())
    assert [d["revision"] for d in dups["duplicates"]] == ["step0"] and dups["hub_metadata"]["used"] is False
    assert dups["main"]["sha256"] is None                                     # main not in the cache: skipped
    assert downloads == ["step0", "step1", "step2", "step4"]
    assert set(summary["disk_bytes"]) == {f"step{s}" for s in steps} and summary["freed_bytes"] > 0
    assert all(cached_weight_files(repo_id, r, str(cache)) == [] for r in downloads)
    assert cached_revision_bytes(repo_id, "step8", str(cache)) is not None   # pre-existing: kept
    assert summary["cache"]["kept_preexisting"] == ["step8"] and summary["cache"]["still_downloaded"] == []


def _extract_hub(tmp_path, local_dir, revs, cache_revs, hub, name="tiny", **kw):
    from geoanatomy.pythia.extract import extract_model
    cache = tmp_path / "hub"
    repo_id = f"EleutherAI/pythia-{name}"
    _fake_hub_cache(cache, repo_id, local_dir, cache_revs)
    cfg = _cfg(repo_id, tmp_path, revisions=revs, benchmarks=["syntax"], n_items={"syntax": 4},
               cache_dir=str(cache), **kw)
    spec = settings.extract_spec(cfg, name)
    out = tmp_path / "results" / f"pythia_{name}"
    logs = []
    summary = extract_model(spec, out, log=logs.append, hub=hub)
    return summary, json.loads((out / "duplicates.json").read_text()), out, logs


@pytest.mark.slow
def test_fake_hub_with_the_2p8b_duplicate_pattern(tmp_path, local_dir):
    """pythia-2.8b as the hub lists it (EleutherAI/pythia#205): main's weights under step0,
    the early grid and later round steps; a second weight set under step54000..64000 and
    step143000. Only the revisions whose weights are genuinely theirs are downloaded (the
    fake cache holds nothing else), step0 is never measured, step143000 is kept."""
    from geoanatomy.pythia.fingerprint import Step0IsTrained
    from geoanatomy.pythia.fingerprint import weights_sha256
    from geoanatomy.pythia.loading import load_model
    hashes = _hashes_2p8b()
    genuine = {"step66000": 2, "step67000": 8, "step142000": 16, "step143000": 32}   # hub rev -> local weights
    selected = ["step1", "step512", "step1000", "step54000", "step60000", "step66000", "step67000",
                "step100000", "step140000", "step142000", "step143000"]
    # step0 = main: the run stops before anything is downloaded
    hub = FakeHub(_hub_table(hashes))
    with pytest.raises(Step0IsTrained, match=r"step0 .*main.*exclude: \[step0\]"):
        _extract_hub(tmp_path, local_dir, ["step0"] + selected, genuine, hub, name="2.8b")
    assert not list((tmp_path / "results" / "pythia_2.8b").glob("partial/step*.json"))

    # without step0: measured = the weight sets whose latest holder is selected
    hub = FakeHub(_hub_table(hashes))
    summary, dups, out, logs = _extract_hub(tmp_path, local_dir, selected, genuine, hub, name="2.8b")
    assert {r for _, r in hub.calls} == set(revisions.published_revisions()) | {"main"}   # metadata only
    assert dups["hub_metadata"]["used"] is True
    assert dups["measured_revisions"] == ["step66000", "step67000", "step142000", "step143000"]
    got = {d["revision"]: d["duplicate_of"] for d in dups["duplicates"]}
    assert got == {"step1": "main", "step512": "main", "step1000": "main", "step54000": "step143000",
                   "step60000": "main", "step100000": "main", "step140000": "main"}
    assert all(d["detected_by"].startswith("hub LFS") for d in dups["duplicates"])
    assert any("main's weights differ from step143000's" in w for w in dups["warnings"])
    from geoanatomy.table import read_table
    df = read_table(out / "metrics.csv")
    assert sorted(df["step"].unique()) == [66000, 67000, 142000, 143000]
    assert 0 not in set(df["step"]) and 1 not in set(df["step"])
    # step143000's rows are those of the weights the step143000 branch holds
    assert dups["fingerprints"]["step143000"] == weights_sha256(load_model(str(local_dir), "local", "step32"))
    assert summary["measured_revisions"] == dups["measured_revisions"]

    # step0 holding a later (non-final) weight set: a duplicate of that step, never step 0
    hashes2 = dict(hashes, step0=hashes["step66000"])
    hub = FakeHub(_hub_table(hashes2))
    shutil.rmtree(tmp_path / "results")
    _, dups, out, _ = _extract_hub(tmp_path, local_dir, ["step0", "step66000", "step67000", "step142000", "step143000"],
                                   genuine, hub, name="2.8b")
    assert {d["revision"]: d["duplicate_of"] for d in dups["duplicates"]} == {"step0": "step66000"}
    assert 0 not in set(read_table(out / "metrics.csv")["step"])


@pytest.mark.slow
def test_2p8b_pattern_found_after_loading_without_hub_metadata(tmp_path, local_dir):
    """The same pattern offline (no metadata): main and every selected revision are loaded
    and fingerprinted; step0 holding step66000's weights is measured as step66000, main's
    weights are measured as no step, step143000 is kept; step0 = main stops the run
    before step0 is measured."""
    from geoanatomy.pythia.fingerprint import Step0IsTrained
    from geoanatomy.table import read_table
    cache_revs = {"main": 2, "step0": 8, "step1": 2, "step1000": 2, "step54000": 32, "step66000": 8,
                  "step143000": 32}
    sel = ["step0", "step1", "step1000", "step54000", "step66000", "step143000"]
    summary, dups, out, logs = _extract_hub(tmp_path, local_dir, sel, cache_revs, None, name="2.8b",
                                            delete_cache=False)
    assert dups["hub_metadata"]["used"] is False and dups["main"]["sha256"] is not None
    assert {d["revision"]: d["duplicate_of"] for d in dups["duplicates"]} == \
        {"step0": "step66000", "step1": "main", "step1000": "main", "step54000": "step143000"}
    assert dups["measured_revisions"] == ["step66000", "step143000"]
    assert sorted(read_table(out / "metrics.csv")["step"].unique()) == [66000, 143000]
    assert any("main's weights differ" in w for w in dups["warnings"])
    # main's weight set was never scored (only hashed); step54000 reused step143000's rows
    assert "measure_s" not in summary["timing"]["step1"] and "measure_s" not in summary["timing"]["step54000"]

    # step0 = main: stops before step0 is measured
    shutil.rmtree(tmp_path / "results")
    shutil.rmtree(tmp_path / "hub")
    with pytest.raises(Step0IsTrained, match="step0"):
        _extract_hub(tmp_path, local_dir, sel, dict(cache_revs, step0=2), None, name="2.8b", delete_cache=False)
    part = tmp_path / "results" / "pythia_2.8b" / "partial"
    assert (part / "step143000.json").exists() and not (part / "step0.json").exists()


# ------------------------------------------------------------------ fair cross-size quantities
def test_fair_quantities_normalise_chance_and_cap():
    from geoanatomy.pythia.events import fair_quantities
    pre = {"final_accuracy": 0.6, "chance_accuracy": 0.2, "acquisition_step": 5000,
           "measures": {"rankme": {"floor": 12.0, "floor_step": 3000, "layer": "ln_final", "n_samples": 60,
                                   "last_token_stratum": "shared",
                                   "per_layer": {"ln_final": {"max_rank": 60}}}}}
    q = fair_quantities(pre)                                    # an older file: computed from raw fields
    assert q["final_accuracy_norm"] == pytest.approx(0.5) and q["rankme_floor_norm"] == pytest.approx(0.2)
    assert q["stratum"] == "shared" and q["acquisition_step"] == 5000 and q["rankme_floor_step"] == 3000
    pre["final_accuracy_norm"] = 0.25
    assert fair_quantities(pre)["final_accuracy_norm"] == 0.25  # the stored field wins


@pytest.mark.slow
def test_stratified_spearman_removes_a_shared_stratum_offset():
    """Two strata (shared / diverse last token) with a large offset in both variables and
    no association within strata: the pooled Spearman is high by construction, the
    within-strata one is not, and its stratified permutation p matches a brute-force count."""
    from geoanatomy.analysis.stats import spearman_within_strata as stratified_spearman
    rng = np.random.default_rng(1)
    strata = ["shared"] * 5 + ["diverse"] * 5
    x = np.r_[rng.normal(0, 1, 5), rng.normal(10, 1, 5)]
    y = np.r_[rng.normal(0, 1, 5), rng.normal(10, 1, 5)]
    r = stratified_spearman(x, y, strata)
    assert r.pooled > 0.5 and r.n == 10 and r.strata == {"shared": 5, "diverse": 5}
    assert r.n_permutations == 120 * 120 and r.null == "exact stratified permutation"

    # independent brute force: ranks, centred within strata, all within-strata permutations
    def rk(v):
        from scipy.stats import rankdata
        return rankdata(v)
    g = [np.arange(5), np.arange(5, 10)]

    def centred(v):
        v = v.astype(float).copy()
        for ix in g:
            v[ix] -= v[ix].mean()
        return v
    cx, cy = centred(rk(x)), centred(rk(y))
    rho = float(np.corrcoef(cx, cy)[0, 1])
    assert r.statistic == pytest.approx(rho)
    count = 0
    for p1 in itertools.permutations(range(5)):
        for p2 in itertools.permutations(range(5, 10)):
            idx = np.array(list(p1) + list(p2))
            count += abs(np.corrcoef(cx, cy[idx])[0, 1]) >= abs(rho) - 1e-12
    assert r.p == pytest.approx(count / 14400)
    assert r.p > 0.05 or abs(r.statistic) > 0.8
    # a genuine within-stratum association is found
    y2 = np.r_[x[:5] * 2, x[5:] * 2 + 3]
    r2 = stratified_spearman(x, y2, strata)
    assert r2.statistic == pytest.approx(1.0) and r2.p == pytest.approx(2 / 14400)
    assert stratified_spearman([1, 2], [2, 1], ["a", "b"]).statistic is None
    assert stratified_spearman([1, 2, 3, None], [3, 1, 2, 5], ["a", "a", "a", "b"]).n == 3


# ------------------------------------------------------------------ cross-size statistics
def test_spearman_exact_matches_scipy_permutation_test():
    from scipy import stats

    from geoanatomy.pythia.scale import pair_correlation
    r = pair_correlation([1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5])
    assert r["p_value"] == pytest.approx(
        stats.permutation_test(([2, 1, 4, 3, 6, 5],), lambda y: stats.spearmanr([1, 2, 3, 4, 5, 6], y)[0],
                               permutation_type="pairings", alternative="two-sided").pvalue)
    perfect = pair_correlation(range(6), [10, 20, 30, 40, 50, 60])
    assert perfect["rho"] == pytest.approx(1.0) and perfect["p_value"] == pytest.approx(2 / 720)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=6), rng.normal(size=6)
    y[2] = y[4]                                                              # a tie
    got = pair_correlation(x, y)
    ref = stats.permutation_test((y,), lambda yy: stats.spearmanr(x, yy)[0], permutation_type="pairings",
                                 alternative="two-sided")
    assert got["rho"] == pytest.approx(stats.spearmanr(x, y)[0])
    assert got["p_value"] == pytest.approx(ref.pvalue)
    assert pair_correlation([1, 2], [2, 1])["rho"] is None


def test_pythia_spearman_is_the_analysis_one_and_bounded_at_n10():
    """One Spearman implementation: the Pythia branch imports geoanatomy.analysis.stats; at n = 10
    it is exact without building the 10! x 10 permutation array (the old copy peaked near 0.66 GB)."""
    import itertools
    import tracemalloc

    from scipy import stats

    from geoanatomy.analysis.stats import correlation as astats
    from geoanatomy.pythia.scale import pair_correlation
    x = np.array([1, 1, 2, 3, 3, 3, 5.0])
    y = np.array([2, 0, 2, 7, 1, 7, 3.0])
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    null = np.array([np.corrcoef(rx, ry[list(p)])[0, 1] for p in itertools.permutations(range(7))])
    obs = np.corrcoef(rx, ry)[0, 1]
    assert pair_correlation(x, y)["p_value"] == pytest.approx(np.mean(np.abs(null) >= abs(obs) - 1e-12))
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=10), rng.normal(size=10)
    astats._perm_table.cache_clear()
    tracemalloc.start()
    got = pair_correlation(x, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50e6 and got["n_permutations"] == 3628800
    ref = astats.spearman_exact(x, y)
    assert (got["rho"], got["p_value"]) == (ref.statistic, ref.p)


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
    floors = [q for q in summ["pairs"] if q["quantity"] == "rankme_floor_norm"][0]
    assert floors["n"] == 3 and floors["rho"] == pytest.approx(1.0)         # identical checkpoints
    for name in ("tiny", "tinyb"):
        assert (tmp_path / f"results/pythia_{name}/deduction3/precursor.json").exists()
        assert (tmp_path / f"results/pythia_{name}/duplicates.json").exists()
    p2 = subprocess.run(cmd + ["-n"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "Nothing to be done" in p2.stdout + p2.stderr


def test_one_layer_vocabulary_and_the_earlier_names_read_as_theirs(tmp_path):
    """Every table names layers the pipeline's way (embed, block{i}, ln_final); a config or a
    call that says the Hugging Face path's earlier names (layerK, final_ln_post) means the same
    layer; anything else is refused naming the field and both vocabularies."""
    from geoanatomy.config.pythia import events_settings
    from geoanatomy.hf import layer_names as hf_names
    from geoanatomy.sizes import canonical_layer, layer_names
    assert hf_names(3) == layer_names(3) == ["embed", "block0", "block1", "block2", "ln_final"]
    assert [canonical_layer(x) for x in ("final_ln_post", "layer1", "layer12", "embed", "block3", "output",
                                         "layer0", "layerx")] == \
        ["ln_final", "block0", "block11", "embed", "block3", "output", "layer0", "layerx"]
    for old, new in (("final_ln_post", "ln_final"), ("layer2", "block1"), ("block1", "block1")):
        assert events_settings(_cfg("EleutherAI/pythia-160m", tmp_path, layer=old))["layer"] == new
    for bad in ("layer0", "final", "block01"):
        with pytest.raises(ConfigError, match=r"pythia\.layer"):
            _cfg("EleutherAI/pythia-160m", tmp_path, layer=bad)
