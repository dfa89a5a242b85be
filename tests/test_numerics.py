"""The numerics block (TF32, mixed precision, fused attention on GPUs): off by default, a run
made with the defaults hashes and passes exactly what it did before the block existed, a run
that turns one on is a different run, and train.json names every setting."""
import json

import pytest
import torch

from conftest import quiet, tiny_config
from geoanatomy.config import job_spec, resolve, run_spec
from geoanatomy.errors import ConfigError
from geoanatomy.runtime import NUMERICS, apply_numerics
from geoanatomy.spec import settings_hash
from geoanatomy.stages.train import run as train_run


def test_default_numerics_leave_the_hash_and_the_job_json_as_they_were():
    cfg = tiny_config()
    spec = run_spec(cfg, "add_L1_nano")
    assert cfg["numerics"] == NUMERICS and spec.numerics == {}
    assert "numerics" not in spec.train_dict() and "numerics" not in json.loads(job_spec(cfg, "add_L1_nano",
                                                                                         "train").to_json())["run"]
    # the hash of the settings as every run before the block hashed them
    before = {k: v for k, v in spec.train_dict().items()}
    assert spec.train_hash() == settings_hash(before)
    on = run_spec(tiny_config(numerics={"tf32": True}), "add_L1_nano")
    assert on.numerics == {"tf32": True} and on.train_hash() != spec.train_hash()
    assert json.loads(job_spec(tiny_config(numerics={"tf32": True}), "add_L1_nano",
                               "train").to_json())["run"]["numerics"] == {"tf32": True}
    # a key set to its default is no change
    assert run_spec(tiny_config(numerics={"tf32": False}), "add_L1_nano").train_hash() == spec.train_hash()


@pytest.mark.parametrize("block, field", [({"mixed_precision": "float16"}, "mixed_precision"),
                                          ({"tf32": "yes"}, "tf32"), ({"fused": True}, "fused")])
def test_bad_numerics_are_refused_naming_the_field(block, field):
    with pytest.raises(ConfigError, match=field):
        resolve({**tiny_config(), "numerics": block})


def test_apply_numerics_on_cpu_records_every_key_and_switches_tf32_off():
    rec = apply_numerics({}, "cpu")
    assert {k: rec[k] for k in NUMERICS} == NUMERICS
    assert rec["tf32_in_effect"] is False and "CPU" in rec["attention_kernel"] and rec["autocast"] == "none"
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False
    with pytest.raises(ValueError, match=r"unknown keys \['tf33'\]"):
        apply_numerics({"tf33": True}, "cpu")


@pytest.mark.slow
def test_bfloat16_training_is_another_run_and_train_json_says_so(tmp_path):
    off = train_run(run_spec(tiny_config(), "add_L1_nano"), tmp_path / "off", device="cpu", log=quiet)
    spec = run_spec(tiny_config(numerics={"mixed_precision": "bfloat16"}), "add_L1_nano")
    bf = train_run(spec, tmp_path / "bf16", device="cpu", log=quiet)
    assert off["numerics"]["mixed_precision"] == "off" and bf["numerics"]["mixed_precision"] == "bfloat16"
    assert bf["numerics"]["autocast"] == "bfloat16 forward and loss"
    assert bf["settings_hash"] != off["settings_hash"]
    log_off = (tmp_path / "off" / "checkpoints").glob("*.safetensors")
    assert sorted(p.name for p in log_off) == sorted(p.name for p in (tmp_path / "bf16" /
                                                                      "checkpoints").glob("*.safetensors"))
    from safetensors.torch import load_file
    from geoanatomy.checkpoints import ckpt_path
    last = off["checkpoint_steps"][-1]
    w_off = load_file(ckpt_path(tmp_path / "off" / "checkpoints", last))
    w_bf = load_file(ckpt_path(tmp_path / "bf16" / "checkpoints", last))
    # bfloat16 forward passes (8-bit mantissa) give other updates: the weights differ, in float32
    diff = max(float((w_off[k] - w_bf[k]).abs().max()) for k in w_off)
    assert w_bf[next(iter(w_bf))].dtype == torch.float32 and diff > 1e-4
