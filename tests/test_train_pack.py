"""The packed trainer (stages.train_pack) against the single-run trainer: each run of a pack
ends where it would alone (same checkpoint steps, weights equal to float rounding), in the
same files, with its float path recorded; a resumed run joins at its own step, a diverging
run leaves the pack and the others go on, and a pack that cannot be stacked is refused by
name before any work."""
import json
from pathlib import Path

import pytest
import torch

from conftest import quiet, tiny_config
from geoanatomy.checkpoints import list_checkpoints, load_weights, read_train_log
from geoanatomy.config import resolve, run_spec
from geoanatomy.errors import ConfigError
from geoanatomy.spec import check_pack
from geoanatomy.stages.common import build
from geoanatomy.stages import train, train_pack

pytestmark = pytest.mark.slow  # every test here trains models

# Relative weight difference a packed run may have from the same run trained alone. Measured
# (tiny runs, 40 steps): at most ~1e-6; the default grid's nano runs over 1,500 steps:
# benchmarks/bench_pack.py. The key bias of attention is left out: its gradient is zero in
# exact arithmetic (softmax does not change when a constant is added to every score), so both
# trainers move it by rounding noise that AdamW scales to its learning rate; it changes no output.
TOL = 1e-4


def cfg(tasks=("add",), levels=("L1",), sizes=("nano",), **top):
    c = tiny_config()
    c = {**c, "grid": [{"tasks": list(tasks), "levels": list(levels), "sizes": list(sizes)}], **top}
    return resolve(c)


def weights(run_dir: Path, step: int, spec) -> dict:
    model, _ = build(spec)
    load_weights(run_dir / "checkpoints" / f"step_{step:06d}.safetensors", model)
    return {k: v.clone() for k, v in model.state_dict().items()}


def rel_diff(a: dict, b: dict) -> float:
    out = 0.0
    for k in a:
        x, y = a[k].flatten(), b[k].flatten()
        if k.endswith("attn.c_attn.bias"):                 # drop the key bias (see TOL)
            c = x.numel() // 3
            x, y = torch.cat([x[:c], x[2 * c:]]), torch.cat([y[:c], y[2 * c:]])
        if x.norm() > 0:
            out = max(out, float((x - y).norm() / x.norm()))
    return out


def test_each_run_of_a_pack_ends_where_it_would_alone(tmp_path):
    """Three runs of different tasks and sequence lengths (add 8 + 4 tokens, copy, and add with
    another seed): the padding and the per-run answer mask leave each one's loss its own."""
    c = {**cfg(("add", "copy")), "seed": 0}
    specs = [run_spec(c, "add_L1_nano"), run_spec(c, "copy_L1_nano"),
             run_spec(resolve({**tiny_config(), "seed": 1}), "add_L1_nano_s1")]
    assert len({s.name for s in specs}) == 3
    for s in specs:
        train.run(s, tmp_path / "single" / s.name, device="cpu", log=quiet)
    out = train_pack.run(specs, [tmp_path / "pack" / s.name for s in specs], device="cpu", log=quiet)
    for s, rec in zip(specs, out):
        alone = json.loads((tmp_path / "single" / s.name / "train.json").read_text())
        assert rec["checkpoint_steps"] == alone["checkpoint_steps"]
        assert list_checkpoints(tmp_path / "pack" / s.name / "checkpoints") == alone["checkpoint_steps"]
        assert set(alone) <= set(rec) and rec["pack"]["runs"] == [x.name for x in specs]
        for step in (alone["checkpoint_steps"][1], alone["checkpoint_steps"][-1]):
            d = rel_diff(weights(tmp_path / "single" / s.name, step, s), weights(tmp_path / "pack" / s.name, step, s))
            assert d < TOL, (s.name, step, d)
        # the float path: in every log row, in train.json and in the machine fingerprint
        assert {r["float_path"] for r in read_train_log(tmp_path / "pack" / s.name / "checkpoints")} == {
            train_pack.PACKED}
        assert rec["float_path"] == [train_pack.PACKED] and alone["float_path"] == ["single"]
        assert rec["machine"]["fingerprint"] != alone["machine"]["fingerprint"]
        assert (tmp_path / "pack" / s.name / "logs" / train_pack.RUN_LOG).read_text().count("[train]") >= len(
            alone["checkpoint_steps"])
        # the loss the log records is the run's own (not the pack's sum)
        la = read_train_log(tmp_path / "single" / s.name / "checkpoints")
        lp = read_train_log(tmp_path / "pack" / s.name / "checkpoints")
        assert [r["step"] for r in la] == [r["step"] for r in lp]
        assert max(abs(a["train_loss"] - b["train_loss"]) for a, b in zip(la, lp)) < 1e-4


def test_the_key_bias_is_the_only_weight_the_float_path_moves_by_more_than_rounding(tmp_path):
    """The reason TOL leaves the key bias out, shown: with it, the difference is of the order
    of the learning rate times the steps; without it, of float rounding."""
    s = run_spec(cfg(), "add_L1_nano")
    train.run(s, tmp_path / "a", device="cpu", log=quiet)
    train_pack.run([s], [tmp_path / "b"], device="cpu", log=quiet)
    a, b = weights(tmp_path / "a", 40, s), weights(tmp_path / "b", 40, s)
    key = "blocks.0.attn.c_attn.bias"
    c = a[key].numel() // 3
    assert float((a[key][c:2 * c] - b[key][c:2 * c]).abs().max()) > 1e-5
    assert rel_diff(a, b) < TOL


def test_a_resumed_run_joins_at_its_own_step(tmp_path):
    """Run A was interrupted at step 16; packed with a fresh run B it resumes there (B from 0),
    and both end as they would alone."""
    a, b = run_spec(cfg(("add", "copy")), "add_L1_nano"), run_spec(cfg(("add", "copy")), "copy_L1_nano")

    class Killed(Exception):
        pass

    def stop(step):
        if step >= 16:
            raise Killed

    with pytest.raises(Killed):
        train.run(a, tmp_path / "pack" / a.name, device="cpu", on_checkpoint=stop, log=quiet)
    msgs = []
    out = train_pack.run([a, b], [tmp_path / "pack" / a.name, tmp_path / "pack" / b.name], device="cpu",
                         log=msgs.append)
    assert out[0]["resumed_from"] == 16 and out[1]["resumed_from"] == 0
    assert any(f"{a.name}: resuming from checkpoint step 16" in m for m in msgs)
    assert out[0]["float_path"] == ["packed-vmap", "single"]       # steps of both paths, both said
    for s in (a, b):
        train.run(s, tmp_path / "single" / s.name, device="cpu", log=quiet)
        assert rel_diff(weights(tmp_path / "single" / s.name, 40, s), weights(tmp_path / "pack" / s.name, 40, s)) < TOL


def test_a_diverging_run_leaves_the_pack_and_the_others_go_on(tmp_path):
    bad = run_spec(resolve({**tiny_config(train={"lr": 1e30, "grad_clip": 0.0}), "seed": 1}), "add_L1_nano_s1")
    good = run_spec(cfg(), "add_L1_nano")
    out = train_pack.run([bad, good], [tmp_path / "bad", tmp_path / "good"], device="cpu", log=quiet)
    assert out[0]["diverged"] and out[0]["checkpoint_steps"][-1] < 40
    assert not out[1]["diverged"] and out[1]["checkpoint_steps"][-1] == 40
    train.run(good, tmp_path / "alone", device="cpu", log=quiet)
    assert rel_diff(weights(tmp_path / "alone", 40, good), weights(tmp_path / "good", 40, good)) < TOL


def test_a_pack_that_cannot_be_stacked_is_refused_by_name():
    nano, micro = run_spec(cfg(sizes=("nano", "micro")), "add_L1_nano"), run_spec(cfg(sizes=("nano", "micro")),
                                                                                  "add_L1_micro")
    with pytest.raises(ConfigError, match="'add_L1_nano' and 'add_L1_micro' cannot share a pack: size"):
        check_pack([nano, micro])
    with pytest.raises(ConfigError, match="twice"):
        check_pack([nano, nano])
    other = run_spec(resolve({**tiny_config(train={"batch_size": 16}), "seed": 1}), "add_L1_nano_s1")
    with pytest.raises(ConfigError, match="train.batch_size 64 != 16"):
        check_pack([run_spec(cfg(), "add_L1_nano"), other])
    with pytest.raises(ConfigError, match="needs at least one run"):
        check_pack([])


def test_the_answer_mask_marks_each_runs_answer_positions_only():
    """Model input position i predicts token i + 1: a run of 5 tokens with a 2-token answer
    reads inputs 2 and 3; one of 3 tokens (right-padded to 5) reads input 1 only."""
    m = train_pack._answer_mask([5, 3], [2, 1], 5, 2)
    assert m.shape == (2, 2, 4)
    assert m[0, 0].tolist() == [False, False, True, True] and m[1, 1].tolist() == [False, True, False, False]
