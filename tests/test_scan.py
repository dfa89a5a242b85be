"""``geoanatomy scan``: tiny GPT-2 and GPT-NeoX models saved here as ``checkpoint-N`` and
``stepN`` folders (weights interpolated between two random inits, so the curves move), a tiny
BPE tokenizer, no network. The scanner's table, precursor.json and figure, resume, the Pythia
branch's rows from the same measurement function, and loading safety."""
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
import torch  # noqa: E402

from geoanatomy.hf.benchmarks import load_benchmark  # noqa: E402
from geoanatomy.scan import ScanError, find_checkpoints, load_probe_set, measure_model, scan  # noqa: E402
from geoanatomy.table import read_table  # noqa: E402
from conftest import FakeHub, fake_hub_cache, tiny_bpe_tokenizer  # noqa: E402

STEPS = [0, 2, 4, 8, 16, 32, 64]
PROMPTS = ["The cat sat on the mat.", "Two plus two is four.", "Paris is the capital of France.",
           "Water boils at one hundred degrees.", "The sun rises in the east.", "Birds can fly.",
           "A week has seven days.", "Snow is cold and white.", "Fish live in water.", "Trees have leaves."]
N_ITEMS = {"syntax": 8, "deduction3": 6}



def _tokenizer(texts):
    return tiny_bpe_tokenizer(texts, vocab_size=300)


def _model(arch, vocab, seed):
    torch.manual_seed(seed)
    if arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=4, n_positions=1024,
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.GPTNeoXConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=1024, bos_token_id=0, eos_token_id=0)
    return transformers.GPTNeoXForCausalLM(cfg).eval()


def _save_run(root: Path, arch: str, style: str, tok, steps=STEPS) -> Path:
    """root/{checkpoint-N | stepN}/: weights move from init a to init b along the steps."""
    tok.save_pretrained(root)
    a, b = _model(arch, len(tok), 0).state_dict(), _model(arch, len(tok), 1).state_dict()
    for s in steps:
        t = (s / steps[-1]) ** 0.5
        m = _model(arch, len(tok), 0)
        m.load_state_dict({k: (1 - t) * a[k] + t * b[k] if a[k].is_floating_point() else a[k] for k in a})
        m.save_pretrained(root / (f"checkpoint-{s}" if style == "checkpoint" else f"step{s}"))
    return root


@pytest.fixture(scope="module")
def tok():
    texts = PROMPTS + [it.prompt + o for b, n in N_ITEMS.items() for it in load_benchmark(b, n) for o in it.options]
    return _tokenizer(texts)


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("probe") / "prompts.txt"
    p.write_text("\n".join(PROMPTS[:5]) + "\n\n" + "\n".join(PROMPTS[5:]) + "\n")
    return p


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory, tok):
    return _save_run(tmp_path_factory.mktemp("gpt2") / "tiny-gpt2", "gpt2", "checkpoint", tok)


@pytest.fixture(scope="module")
def neox_dir(tmp_path_factory, tok):
    return _save_run(tmp_path_factory.mktemp("neox") / "tiny-neox", "neox", "step", tok)


def _check_outputs(out: Path, n_steps: int) -> tuple:
    df = read_table(out / "metrics.csv")
    pre = json.loads((out / "precursor.json").read_text())
    assert (out / "trajectory.png").stat().st_size > 10_000
    assert sorted(set(df["step"])) == STEPS[:n_steps]
    assert set(df[df.measure == "rankme"]["variant"]) == {"uncentred", "centred"}
    assert "mean_share" in set(df.measure)
    for name in ("rankme", "rankme_centred"):
        m = pre["measures"][name]
        assert m["layer"] == "ln_final" and m["position"] == "last_prompt"
        assert set(m["per_layer"]) == {"embed", "block0", "block1", "ln_final"}
    return df, pre


@pytest.mark.slow
def test_scan_gpt2_checkpoint_folders_with_a_prompt_file_and_resume(gpt2_dir, prompt_file, tmp_path):
    out = tmp_path / "out"
    lines = []
    pre = scan(gpt2_dir, str(prompt_file), out, device="cpu", log=lines.append)
    df, pre2 = _check_outputs(out, len(STEPS))
    assert pre == pre2
    beh = pre["behaviour"]
    assert beh["kind"] == "loss" and pre["acquisition_step"] is None and "no accuracy" in beh["note"]
    loss = df[df.measure == "loss"].sort_values("step")
    assert len(loss) == len(STEPS) and loss["value"].notna().all()
    assert beh["loss"]["init"] == pytest.approx(loss["value"].iloc[0])
    assert pre["difficulty"] == "no accuracy" and "geometry_vs_loss" in pre
    assert (df[df.measure == "rankme"]["n_samples"] == len(PROMPTS)).all()
    # the loss is the mean next-token loss over the prompts (checked on the last checkpoint)
    from geoanatomy.hf import load_causal_lm
    m = load_causal_lm(gpt2_dir, "checkpoint-64")
    t = transformers.AutoTokenizer.from_pretrained(gpt2_dir, local_files_only=True)
    nll, n = 0.0, 0
    with torch.no_grad():
        for p in PROMPTS:
            ids = torch.tensor([t(p, add_special_tokens=False)["input_ids"]])
            lp = torch.log_softmax(m(ids).logits[0, :-1].double(), -1)
            nll -= float(lp.gather(-1, ids[0, 1:, None]).sum())
            n += ids.shape[1] - 1
    assert loss["value"].iloc[-1] == pytest.approx(nll / n, rel=1e-6)
    # resume: a rerun reuses every checkpoint and writes the same table
    before = (out / "metrics.csv").read_bytes()
    lines.clear()
    scan(gpt2_dir, str(prompt_file), out, device="cpu", log=lines.append)
    assert sum("reused" in ln for ln in lines) == len(STEPS)
    assert (out / "metrics.csv").read_bytes() == before
    # an interrupted scan (partials of the first 3 only) measures the rest, same numbers
    for f in sorted((out / "partial").iterdir())[3:]:
        f.unlink()
    lines.clear()
    scan(gpt2_dir, str(prompt_file), out, device="cpu", log=lines.append)
    assert sum("reused" in ln for ln in lines) == 3
    assert (out / "metrics.csv").read_bytes() == before
    # other settings: nothing reused
    lines.clear()
    scan(gpt2_dir, str(prompt_file), out, device="cpu", batch_size=3, n_items=9, log=lines.append)
    assert not any("reused" in ln for ln in lines)


@pytest.mark.slow
def test_scan_neox_step_folders_with_a_benchmark_uses_the_pythia_rows(neox_dir, tok, tmp_path):
    from geoanatomy.pythia.extract import measure_revision
    from geoanatomy.hf.choice import encode
    out = tmp_path / "out"
    pre = scan(neox_dir, "syntax", out, n_items=N_ITEMS["syntax"], device="cpu", log=lambda s: None)
    df, _ = _check_outputs(out, len(STEPS))
    assert pre["behaviour"]["kind"] == "accuracy" and "acquired" in pre
    assert pre["chance_accuracy"] == pytest.approx(0.5)
    assert set(df[df.layer == "output"]["measure"]) == {"accuracy", "accuracy_norm", "accuracy_sum", "accuracy_mean",
                                                        "logprob", "logprob_per_token", "logprob_choice"}
    # the Pythia branch's measure_revision is the same code path: the same rows on the same checkpoint
    from geoanatomy.hf import load_causal_lm
    model = load_causal_lm(neox_dir, "step8")
    items = load_benchmark("syntax", N_ITEMS["syntax"])
    spec = {"rankme_eps": 1e-7, "scoring": "sum", "batch_size": 16}
    ref, _ = measure_revision(model, {"syntax": encode(tok, items)}, {"syntax": items}, spec, "x", 8, "cpu")
    probe = load_probe_set("syntax", tok, N_ITEMS["syntax"])
    got = measure_model(model, probe, run="x_syntax", step=8)
    key = lambda r: (r["measure"], r["layer"], r["variant"])  # noqa: E731
    mine = {key(r): r for r in got}
    assert {key(r) for r in ref} == set(mine) and "mean_share" in {r["measure"] for r in ref}
    for r in ref:
        g = mine[key(r)]
        assert (g["run"], g["step"], g["position"], g["n_samples"], g["layer_index"]) == \
            (r["run"], r["step"], r["position"], r["n_samples"], r["layer_index"])
        assert g["value"] == pytest.approx(r["value"], rel=1e-9, abs=1e-12, nan_ok=True), key(r)
        assert g["settings"] == r["settings"]


@pytest.mark.slow
def test_generic_scoring_agrees_with_pythia_scoring_and_gpt2_takes_benchmarks(neox_dir, gpt2_dir, tok, tmp_path):
    from geoanatomy.hf.choice import encode, score
    from geoanatomy.hf import load_causal_lm, score_any
    model = load_causal_lm(neox_dir, "step16")
    enc = encode(tok, load_benchmark("deduction3", N_ITEMS["deduction3"]))
    a, b = score(model, enc, 4), score_any(model, enc, 4)
    for k in ("sum", "mean"):
        np.testing.assert_allclose(np.concatenate(a[k]), np.concatenate(b[k]), rtol=1e-5, atol=1e-6)
    for name in a["hidden"]:
        torch.testing.assert_close(a["hidden"][name], b["hidden"][name], rtol=1e-5, atol=1e-6)
    out = tmp_path / "g"
    shutil.copytree(gpt2_dir, tmp_path / "g2", ignore=shutil.ignore_patterns("checkpoint-[1-9]*"))
    for s in (2, 4, 8):
        shutil.copytree(gpt2_dir / f"checkpoint-{s}", tmp_path / "g2" / f"checkpoint-{s}")
    pre = scan(tmp_path / "g2", "deduction3", out, n_items=N_ITEMS["deduction3"], device="cpu", log=lambda s: None)
    assert pre["behaviour"]["kind"] == "accuracy" and pre["n_checkpoints"] == 4
    assert read_table(out / "metrics.csv")["step"].nunique() == 4


@pytest.mark.slow
def test_cli_scan_and_folder_errors(gpt2_dir, prompt_file, tmp_path, capsys):
    from geoanatomy.cli import main
    d = tmp_path / "run"
    shutil.copytree(gpt2_dir, d, ignore=shutil.ignore_patterns("checkpoint-[1-9]*"))
    for s in (4, 8):                                         # stepN and checkpoint-N mixed
        shutil.copytree(gpt2_dir / f"checkpoint-{s}", d / f"step{s}")
    assert [s for s, _ in find_checkpoints(d)] == [0, 4, 8]
    assert main(["scan", str(d), "--probe", str(prompt_file), "--device", "cpu"]) == 0
    assert (d / "geoanatomy_scan" / "precursor.json").is_file()
    shutil.copytree(d / "step4", d / "checkpoint-4")
    with pytest.raises(ScanError, match="both step 4"):
        find_checkpoints(d)
    assert main(["scan", str(tmp_path / "nothing"), "--probe", "syntax"]) == 2
    assert main(["scan", str(gpt2_dir), "--probe", "no-such-benchmark-or-file"]) == 2
    assert "neither a shipped benchmark" in capsys.readouterr().err


def test_loading_refuses_pickled_code_and_remote_code(gpt2_dir, tmp_path):
    from geoanatomy.hf import ScanLoadError, load_causal_lm
    d = tmp_path / "bad"
    (d / "checkpoint-0").mkdir(parents=True)
    shutil.copy(gpt2_dir / "checkpoint-0" / "config.json", d / "checkpoint-0" / "config.json")
    sd = {k: v for k, v in _model("gpt2", 300, 0).state_dict().items()}
    sd["evil"] = os.system                                   # a pickled reference to code
    torch.save(sd, d / "checkpoint-0" / "pytorch_model.bin")
    with pytest.raises(ScanLoadError):
        load_causal_lm(d, "checkpoint-0")
    # a plain pickled state dict of tensors loads (torch.load(weights_only=True))
    sd.pop("evil")
    torch.save(sd, d / "checkpoint-0" / "pytorch_model.bin")
    m = load_causal_lm(d, "checkpoint-0")
    assert not m.training
    cfg = json.loads((d / "checkpoint-0" / "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "evil.Model"}  # remote code is never run
    (d / "checkpoint-0" / "config.json").write_text(json.dumps(cfg))
    m = load_causal_lm(d, "checkpoint-0")
    assert type(m).__name__ == "GPT2LMHeadModel"


@pytest.mark.parametrize("field,keys,a,b", [
    ("layers", ("n_layer",), 2, 4), ("width", ("n_embd",), 32, 64), ("attention heads", ("n_head",), 2, 4),
    ("vocabulary size", ("vocab_size",), 32, 64), ("context length", ("n_positions",), 64, 128)])
def test_scan_refuses_folders_that_differ_in_what_a_curve_means(tmp_path, field, keys, a, b):
    """Two checkpoint folders of one width and depth but 2 vs 4 heads, or a 32- vs 64-token
    vocabulary (whose loss differs by log V, not learning), were pooled into one curve: refused
    from config.json alone, naming the field and both values."""
    base = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 32, "n_positions": 64}
    for step, v in ((0, a), (4, b)):
        d = tmp_path / "run" / f"checkpoint-{step}"
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({**base, **{k: v for k in keys}}))
    with pytest.raises(ScanError, match=rf"differ in {field} \(\w+\): {a} in checkpoint-0; {b} in checkpoint-4"):
        scan(tmp_path / "run", "x", tmp_path / "o", device="cpu", log=lambda m: None)


def test_scan_refuses_folders_with_different_tokenizers(tmp_path):
    base = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 32, "n_positions": 64}
    for step, vocab in ((0, {"a": 0}), (4, {"b": 0})):
        d = tmp_path / "run" / f"checkpoint-{step}"
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps(base))
        (d / "vocab.json").write_text(json.dumps(vocab))
    with pytest.raises(ScanError, match=r"differ in tokenizer \(tokenizer\): '[0-9a-f]{12}' in checkpoint-0"):
        scan(tmp_path / "run", "x", tmp_path / "o", device="cpu", log=lambda m: None)


@pytest.mark.slow
def test_scan_refuses_mixed_architectures_and_oversized_configs_before_building(tmp_path, tok, prompt_file):
    root = tmp_path / "mixed"
    _save_run(root, "gpt2", "checkpoint", tok, steps=[0, 4])
    _save_run(root, "neox", "checkpoint", tok, steps=[8])
    with pytest.raises(ScanError, match=r"differ in model type \(model_type\): 'gpt2' in checkpoint-0, checkpoint-4;"
                                        r" 'gpt_neox' in checkpoint-8"):
        scan(root, str(prompt_file), tmp_path / "o1", device="cpu", log=lambda m: None)
    big = tmp_path / "big"
    _save_run(big, "gpt2", "checkpoint", tok, steps=[0, 2])
    cfg = json.loads((big / "checkpoint-0" / "config.json").read_text())
    (big / "checkpoint-0" / "config.json").write_text(json.dumps({**cfg, "n_layer": 200000, "n_embd": 4096}))
    import time
    t0 = time.time()
    with pytest.raises(ScanError, match=r"checkpoint-0/config.json describes a model of up to .* refusing to build"):
        scan(big, str(prompt_file), tmp_path / "o2", device="cpu", log=lambda m: None)
    assert time.time() - t0 < 60                                  # refused from config.json, nothing built


@pytest.mark.slow
def test_scan_names_skipped_folders_flags_non_finite_and_keys_its_cache_on_content(tmp_path, tok, prompt_file):
    import shutil
    from safetensors.torch import load_file, save_file
    root = _save_run(tmp_path / "run", "gpt2", "checkpoint", tok, steps=[0, 2, 4, 8])
    (root / "checkpoint-abc").mkdir()
    (root / "step-5").mkdir()
    (root / "checkpoint-16").mkdir()                              # no config.json
    w = root / "checkpoint-4" / "model.safetensors"
    t = load_file(w)
    k = next(k for k in t if t[k].is_floating_point())
    t[k][0] = float("nan")
    save_file(t, w, metadata={"format": "pt"})
    lines = []
    out = tmp_path / "out"
    pre = scan(root, str(prompt_file), out, device="cpu", log=lines.append)
    for name in ("checkpoint-abc", "step-5", "checkpoint-16"):
        assert any(f"skipped {name}/" in ln for ln in lines), lines
    info = json.loads((out / "scan.json").read_text())
    assert {d["folder"] for d in info["skipped_folders"]} == {"checkpoint-abc", "step-5", "checkpoint-16"}
    assert info["non_finite_checkpoints"] == ["checkpoint-4"] == pre["non_finite_checkpoints"]
    assert sorted(set(read_table(out / "metrics.csv")["step"])) == [0, 2, 8]
    # a copy of the folder (new mtimes, same bytes) reuses every partial
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    shutil.copytree(out / "partial", tmp_path / "out2" / "partial")
    lines.clear()
    scan(copy, str(prompt_file), tmp_path / "out2", device="cpu", log=lines.append)
    assert sum("reused" in ln for ln in lines) == 3
    # an edited partial is measured again, not reused
    part = tmp_path / "out2" / "partial" / "checkpoint-8.json"
    d = json.loads(part.read_text())
    d["rows"][0]["value"] = 123.0
    part.write_text(json.dumps(d))
    lines.clear()
    scan(copy, str(prompt_file), tmp_path / "out2", device="cpu", log=lines.append)
    assert sum("reused" in ln for ln in lines) == 2
    assert 123.0 not in set(read_table(tmp_path / "out2" / "metrics.csv")["value"])


def test_prompt_completion_probe_scores_only_the_completion_like_masked_labels(gpt2_dir, tok, tmp_path):
    """A .jsonl probe file of prompt/completion pairs: the loss equals transformers' own loss
    with the prompt's labels set to -100, the accuracy is the exact match of the completion
    under teacher forcing (from the logits by hand), the geometry is at the prompt's last
    token; the plain prompt file of the same texts scores every token instead."""
    pairs = [("The cat sat on", " the mat."), ("Two plus two is", " four."), ("Paris is the capital", " of France."),
             ("Birds can", " fly."), ("Fish live in", " water.")]
    f = tmp_path / "pairs.jsonl"
    f.write_text("\n".join(json.dumps({"prompt": p, "completion": c}) for p, c in pairs) + "\n")
    ps = load_probe_set(str(f), tok)
    assert ps.kind == "completions" and len(ps.encoded) == 5
    model = transformers.GPT2LMHeadModel.from_pretrained(gpt2_dir / "checkpoint-64").eval()
    rows = measure_model(model, ps, run="r", step=64, batch_size=2)
    by = {r["measure"]: r for r in rows if r["layer"] == "output"}
    nll, n_tok, exact, right = 0.0, 0, [], 0
    for p, c in ps.encoded:
        ids = torch.tensor([p + c])
        labels = ids.clone()
        labels[0, :len(p)] = -100
        with torch.no_grad():
            out = model(ids, labels=labels)
        nll += float(out.loss) * len(c)
        n_tok += len(c)
        hit = out.logits[0, len(p) - 1:-1].argmax(-1) == ids[0, len(p):]
        exact.append(bool(hit.all()))
        right += int(hit.sum())
    assert by["loss"]["position"] == "completion" and by["loss"]["settings"]["n_tokens"] == n_tok
    assert by["loss"]["value"] == pytest.approx(nll / n_tok, rel=1e-5)
    assert by["accuracy"]["value"] == pytest.approx(np.mean(exact))
    assert by["token_accuracy"]["value"] == pytest.approx(right / n_tok)
    assert by["accuracy_norm"]["value"] == by["accuracy"]["value"]
    # the geometry: the prompt's last token (not the completion's)
    with torch.no_grad():
        hs = [model(torch.tensor([p]), output_hidden_states=True).hidden_states[0][0, -1] for p, _ in ps.encoded]
    from geoanatomy.measures.rankme import rankme
    emb = next(r for r in rows if r["measure"] == "rankme" and r["layer"] == "embed" and r["variant"] == "uncentred")
    with pytest.warns(UserWarning, match="capped"):                 # 5 rows < d = 32
        ref = rankme(torch.stack(hs).double(), centred=False)
    assert emb["value"] == pytest.approx(ref, rel=1e-6)
    # the whole scan: behaviour is the completion accuracy, with the pipeline's acquisition rule
    pre = scan(gpt2_dir, str(f), tmp_path / "out", device="cpu", log=lambda m: None)
    assert pre["behaviour"]["kind"] == "accuracy" and pre["probe_set"]["kind"] == "completions"
    assert json.loads((tmp_path / "out" / "scan.json").read_text())["probe_set"]["unknown_token_share"] is None
    # every token scored with the plain prompt file of the joined texts: another loss
    g = tmp_path / "joined.txt"
    g.write_text("\n".join(p + c for p, c in pairs) + "\n")
    plain = {r["measure"]: r for r in measure_model(model, load_probe_set(str(g), tok), run="r", step=64)
             if r["layer"] == "output"}
    assert plain["loss"]["settings"]["n_tokens"] > n_tok and "accuracy" not in plain


def test_probe_file_errors_name_the_file_and_unknown_tokens_are_warned(tmp_path, tok):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\u00e9 au lait\nna\u00efve\n".encode("latin-1"))
    with pytest.raises(ScanError, match=r"latin1.txt: not UTF-8 text \(byte 3, line 1"):
        load_probe_set(str(bad), tok)
    j = tmp_path / "p.jsonl"
    j.write_text('{"prompt": "a", "completion": "b"}\n{"prompt": "a"}\n')
    with pytest.raises(ScanError, match=r"p.jsonl line 2: needs string fields"):
        load_probe_set(str(j), tok)
    j.write_text('{"prompt": "a", "completion": "b"}\nnot json\n')
    with pytest.raises(ScanError, match=r"p.jsonl line 2: not a JSON object"):
        load_probe_set(str(j), tok)
    from tokenizers import Tokenizer, models, pre_tokenizers
    wl = Tokenizer(models.WordLevel({"[UNK]": 0, "the": 1, "cat": 2}, unk_token="[UNK]"))
    wl.pre_tokenizer = pre_tokenizers.Whitespace()
    word_tok = transformers.PreTrainedTokenizerFast(tokenizer_object=wl, unk_token="[UNK]")
    f = tmp_path / "words.txt"
    f.write_text("the cat sat\nthe dog ran far\n")
    said = []
    ps = load_probe_set(str(f), word_tok, log=said.append)
    assert ps.unknown_share == pytest.approx(4 / 7)
    assert len(said) == 1 and "57% of the tokens" in said[0] and "words.txt" in said[0] and "[UNK]" in said[0]
    f.write_text("the cat\ncat the\n")
    said.clear()
    assert load_probe_set(str(f), word_tok, log=said.append).unknown_share == 0 and not said


def test_scan_adds_the_weight_signals_of_the_registry(gpt2_dir, prompt_file, tmp_path):
    """--signals: every signal of the registry whose inputs a scan offers (the signal conformance
    battery's scan consumer: a new weight-only signal is checked here unasked) is written at every
    checkpoint; the stable ranks of the blocks' weights equal the formula on the loaded model and
    the update gap is finite once the window is full; a signal a scan cannot compute is refused
    before any model is loaded."""
    from geoanatomy.hf import load_causal_lm
    from geoanatomy.measures import signals as sig
    from geoanatomy.measures.signal_registry import SIGNAL_BY_NAME, offered
    from geoanatomy.measures.signals import DEFAULT_WINDOW
    from geoanatomy.scan import SIGNAL_INPUTS
    out = tmp_path / "out"
    names = offered(SIGNAL_INPUTS)
    assert {"stable_rank", "update_gap"} <= set(names)
    scan(gpt2_dir, str(prompt_file), out, device="cpu", log=lambda *a: None, signals=names)
    got = read_table(out / "metrics.csv")
    for n in names:
        s = SIGNAL_BY_NAME[n]
        rows = got[(got.measure == s.measure) & (got.variant.fillna("").astype(str) == s.variant)]
        assert sorted(set(rows.step)) == STEPS, f"the scan offers {n} but wrote it at {sorted(set(rows.step))}"
    df = read_table(out / "metrics.csv")
    sr = df[(df.measure == "stable_rank") & (df.layer == "all_blocks")].sort_values("step")
    assert len(sr) == len(STEPS)
    m = load_causal_lm(gpt2_dir, "checkpoint-64")
    want = [r for r in sig.stable_rank_rows(m) if r["layer"] == "all_blocks"][0]["value"]
    assert sr["value"].iloc[-1] == pytest.approx(want, rel=1e-6)
    gap = df[df.measure == "update_gap"].sort_values("step")["value"].to_numpy()
    assert np.isnan(gap[:DEFAULT_WINDOW]).all() and np.isfinite(gap[DEFAULT_WINDOW:]).all()
    with pytest.raises(ScanError, match=r"\['ildr'\] cannot be computed by it \(ildr reads hidden, labels"):
        scan(gpt2_dir, str(prompt_file), tmp_path / "x", device="cpu", log=lambda *a: None, signals=["ildr"])


# ------------------------------------------------------------------ hub revisions as sources
REPO = "org/tiny-gpt2"


def _revision_files(run_dir: Path, s: int) -> list:
    """What hub revision step{s} holds: checkpoint-{s}'s files and the run's tokenizer."""
    return list((run_dir / f"checkpoint-{s}").iterdir()) + [f for f in run_dir.iterdir() if f.is_file()]


def _listing(run_dir: Path, steps, wrong: int | None = None) -> FakeHub:
    """The hub's listing of revisions step{s}: LFS sha256 of the weights (a wrong one for ``wrong``)."""
    import hashlib
    table = {}
    for s in steps:
        table[f"step{s}"] = {f.name: (hashlib.sha256(f.read_bytes()).hexdigest() if f.suffix == ".safetensors"
                                      else None) for f in _revision_files(run_dir, s)}
        if s == wrong:
            table[f"step{s}"]["model.safetensors"] = "0" * 64
    return FakeHub(table)


def _downloading(monkeypatch, run_dir: Path, cache: Path, calls: list):
    """scan.hub.fetch_revision that "downloads" (writes into the fake cache) what is not there."""
    from geoanatomy.pythia.loading import cached_weight_files
    from geoanatomy.scan import hub as scan_hub
    real = scan_hub.fetch_revision

    def fetch(repo, revision, cache_dir=None, *, weights=True):
        calls.append((revision, bool(weights)))
        if not cached_weight_files(repo, revision, cache_dir):
            fake_hub_cache(cache, repo, {revision: _revision_files(run_dir, int(revision[4:]))})
        return real(repo, revision, cache_dir, weights=weights)
    monkeypatch.setattr(scan_hub, "fetch_revision", fetch)


def test_source_lists_parse_and_errors_name_the_entry(tmp_path, gpt2_dir):
    import yaml
    from geoanatomy.scan.sources import read_sources_file, source_list
    y = tmp_path / "r.yaml"
    y.write_text(yaml.safe_dump({"cache_dir": "hub", "sources": [
        f"{REPO}@step8", {"repo": REPO, "revision": "step16-tokens33B"},
        {"repo": "allenai/OLMo", "revision": "main", "step": 5}, {"folder": str(gpt2_dir)}]}))
    sl = read_sources_file(y)
    assert [(s.kind, s.step) for s in sl.sources] == [("hub", 8), ("hub", 16), ("hub", 5), ("folder", None)]
    assert sl.cache_dir == str(tmp_path / "hub") and sl.default_run() == "r"
    assert sl.default_out() == tmp_path / "r_geoanatomy_scan"
    assert source_list(str(gpt2_dir)).single_folder == gpt2_dir
    for doc, msg in [({"sources": [f"{REPO}@main"]}, r"sources\[0\]: cannot read a step from revision 'main'"),
                     ({"sources": [{"repo": REPO, "revision": "step1", "stepp": 2}]}, r"unknown key\(s\) \['stepp'\]"),
                     ({"source": []}, r"unknown key\(s\) \['source'\]"),
                     ({"sources": ["no/such/folder"]}, "neither a folder nor a hub revision"),
                     ({"sources": []}, "non-empty list")]:
        y.write_text(yaml.safe_dump(doc))
        with pytest.raises(ScanError, match=msg):
            read_sources_file(y)
    with pytest.raises(ScanError, match="give the output folder"):
        source_list([f"{REPO}@step0", f"{REPO}@step2"]).default_out()


@pytest.mark.slow
def test_scan_of_hub_revisions_in_a_yaml_gives_the_events_of_the_same_folder(gpt2_dir, prompt_file, tmp_path):
    """The issue's check: a YAML of fake-hub revisions (offline, the fake hub's listing for the
    integrity check) and the same checkpoints as a folder give the same table and events."""
    import yaml
    cache = tmp_path / "hub"
    fake_hub_cache(cache, REPO, {f"step{s}": _revision_files(gpt2_dir, s) for s in STEPS})
    y = tmp_path / "revisions.yaml"
    y.write_text(yaml.safe_dump({"run": "tiny", "cache_dir": "hub", "sources": [
        *[f"{REPO}@step{s}" for s in STEPS[:4]], *[{"repo": REPO, "revision": f"step{s}"} for s in STEPS[4:]]]}))
    hub = _listing(gpt2_dir, STEPS)
    pre_h = scan(y, str(prompt_file), device="cpu", hub=hub, log=lambda *a: None)
    pre_f = scan(gpt2_dir, str(prompt_file), tmp_path / "folder", run="tiny", device="cpu", log=lambda *a: None)
    out_h = tmp_path / "revisions_geoanatomy_scan"
    assert (out_h / "metrics.csv").read_bytes() == (tmp_path / "folder" / "metrics.csv").read_bytes()
    for k in ("acquisition_step", "behaviour", "measures", "difficulty", "geometry_vs_loss"):
        assert pre_h[k] == pre_f[k], k
    info = json.loads((out_h / "scan.json").read_text())
    assert info["steps"] == STEPS and info["source"] == [f"{REPO}@step{s}" for s in STEPS]
    assert set(info["hub"]["integrity"].values()) == {"checked: every weight file's sha256 equals the hub's LFS sha256"}
    assert info["hub"]["kept_preexisting"] == [f"{REPO}@step{s}" for s in STEPS] and info["hub"]["evicted"] == []
    assert sorted(r for _, r in hub.calls) == sorted(f"step{s}" for s in STEPS)


@pytest.mark.slow
def test_scan_evicts_what_it_downloaded_checks_hashes_and_refuses_mixed_sources(gpt2_dir, prompt_file, tok, tmp_path,
                                                                                monkeypatch):
    from geoanatomy.pythia.loading import cached_revision_bytes, cached_weight_files
    cache = tmp_path / "hub"
    fake_hub_cache(cache, REPO, {"step0": _revision_files(gpt2_dir, 0)})       # in the cache before the scan
    calls: list = []
    _downloading(monkeypatch, gpt2_dir, cache, calls)
    srcs = [f"{REPO}@step{s}" for s in (0, 2, 4)]
    out = tmp_path / "out"
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    scan(srcs, str(prompt_file), out, cache_dir=str(cache), hub=_listing(gpt2_dir, [0, 2, 4]), device="cpu",
         log=lambda *a: None)
    scan(gpt2_dir, str(prompt_file), tmp_path / "folder", device="cpu", log=lambda *a: None)
    assert "TRANSFORMERS_OFFLINE" not in os.environ     # huggingface_hub reads it as offline: never set
    info = json.loads((out / "scan.json").read_text())["hub"]
    assert info["evicted"] == srcs[1:] and info["kept_preexisting"] == srcs[:1] and info["freed_bytes"] > 0
    assert [cached_weight_files(REPO, f"step{s}", str(cache)) for s in (0, 2, 4)] == [["model.safetensors"], [], []]
    assert json.loads((out / "partial" / "downloads.json").read_text()) == []
    # resumed: every checkpoint reused (identity from the cache or the hub's listing), evicted again
    before = (out / "metrics.csv").read_bytes()
    lines: list = []
    calls.clear()
    scan(srcs, str(prompt_file), out, cache_dir=str(cache), hub=_listing(gpt2_dir, [0, 2, 4]), device="cpu",
         log=lines.append)
    assert sum("reused" in ln for ln in lines) == 3 and (out / "metrics.csv").read_bytes() == before
    assert cached_revision_bytes(REPO, "step2", str(cache)) is None
    # a weight file whose sha256 is not the hub's: refused, naming the file, and evicted
    with pytest.raises(ScanError, match=r"org/tiny-gpt2@step4: model.safetensors: sha256 .* the hub lists sha256 0000"):
        scan(srcs, str(prompt_file), tmp_path / "o2", cache_dir=str(cache), hub=_listing(gpt2_dir, [0, 2, 4], wrong=4),
             device="cpu", log=lambda *a: None)
    assert cached_revision_bytes(REPO, "step4", str(cache)) is None
    # sources of two architectures: refused from the configs, before any weights are fetched
    neox = _save_run(tmp_path / "neox", "neox", "step", tok, steps=[128])
    calls.clear()
    with pytest.raises(ScanError, match=r"differ in model type \(model_type\): 'gpt2' in org/tiny-gpt2@step0, "
                                        r"org/tiny-gpt2@step2; 'gpt_neox' in .*neox/step128"):
        scan([*srcs[:2], str(neox)], str(prompt_file), tmp_path / "o3", cache_dir=str(cache), device="cpu",
             hub=_listing(gpt2_dir, [0, 2]), log=lambda *a: None)
    assert calls and not any(w for _, w in calls)
    # one step from two sources
    with pytest.raises(ScanError, match=r"step 0 is given twice: by .*/checkpoint-0 and by org/tiny-gpt2@step0"):
        scan([str(gpt2_dir), srcs[0]], str(prompt_file), tmp_path / "o4", cache_dir=str(cache), device="cpu",
             log=lambda *a: None)


def test_a_training_probe_gives_the_scan_its_training_fit_event(gpt2_dir, tok, tmp_path):
    """--train-probe: the training probe's accuracy rows become train_accuracy(_norm), variant
    "train", equal to what the same pairs give as the held-out probe; precursor.json gets the
    training-fit step the acquisition rule gives on that curve and the delay; a prompt file
    (no answers) is refused naming the option."""
    from geoanatomy import detectors as ev
    from geoanatomy.defaults import events_settings
    pairs = [("The cat sat on", " the mat."), ("Two plus two is", " four."), ("Birds can", " fly.")]
    f = tmp_path / "pairs.jsonl"
    f.write_text("\n".join(json.dumps({"prompt": p, "completion": c}) for p, c in pairs) + "\n")
    pre = scan(gpt2_dir, str(f), tmp_path / "out", device="cpu", log=lambda m: None, train_probe=str(f))
    df = read_table(tmp_path / "out" / "metrics.csv")
    tr = df[df.measure == "train_accuracy_norm"].sort_values("step")
    held = df[(df.measure == "accuracy_norm") & (df.layer == "output")].sort_values("step")
    assert (tr["variant"] == "train").all() and list(tr["value"]) == list(held["value"]) and len(tr) > 3
    e = events_settings(None)
    want = ev.acquisition_step(tr["step"].to_numpy(), tr["value"].to_numpy(float), e["acquisition_threshold"],
                               e["persist"])
    assert pre["train_acquisition_step"] == want == pre["acquisition_step"]
    assert pre["generalisation_delay"] == (None if want is None else 0)
    assert pre["train_probe_set"]["n"] == 3
    g = tmp_path / "prompts.txt"
    g.write_text("one line\nanother line\n")
    with pytest.raises(ScanError, match="--train-probe"):
        scan(gpt2_dir, str(f), tmp_path / "out2", device="cpu", log=lambda m: None, train_probe=str(g))
