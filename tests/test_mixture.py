"""The multi-task protocol (geoanatomy.mixture): config and names, padded batches, the loss,
per-combination outputs, resume and determinism, a learned task beside a shuffled-label one,
the workflow and the protocol-aware summary."""
from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import REPO, quiet, smk
from geoanatomy.config import (ConfigError, job_spec, mixture_names, mixture_unit_names, mixtures, resolve, run_names,
                               run_spec, unit_names)
from geoanatomy.spec import JobSpec, parse_mixture_name

TINY_TRAIN = {"steps": 40, "warmup": 5, "checkpoints": {"n_log": 5, "log_end": 0.2, "n_uniform": 4}}


def mix_user(tasks=("copy", "mod"), levels=("L1",), **block) -> dict:
    return {"grid": [{"protocol": "mixture", "tasks": list(tasks), "levels": list(levels), "sizes": ["nano"], **block}],
            "train": copy.deepcopy(TINY_TRAIN), "eval": {"n_samples": 32}}


def mix_cfg(results_dir=None, **block) -> dict:
    u = mix_user(**block)
    if results_dir is not None:
        u["results_dir"] = str(results_dir)
    return resolve(u)


# ------------------------------------------------------------------ config and names
def test_names_specs_and_hashes():
    cfg = resolve({**mix_user(levels=("L1", "L3"), seeds=[0, 2], weights={"mod_L3": 3}),
                   "grid": mix_user(levels=("L1", "L3"), seeds=[0, 2], weights={"mod_L3": 3})["grid"]
                   + [{"tasks": ["copy"], "levels": ["L1"], "sizes": ["nano"]}]})
    assert run_names(cfg) == ["copy_L1_nano"]                       # mixture blocks train no single-task run
    assert mixture_names(cfg) == ["mixture_nano", "mixture_nano_s2"]
    assert mixture_unit_names(cfg, "mixture_nano") == ["mixture_nano/copy_L1", "mixture_nano/copy_L3",
                                                        "mixture_nano/mod_L1", "mixture_nano/mod_L3"]
    assert unit_names(cfg)[0] == "copy_L1_nano" and len(unit_names(cfg)) == 9
    parent, unit = run_spec(cfg, "mixture_nano_s2"), run_spec(cfg, "mixture_nano_s2/mod_L3")
    assert parent.task == "" and parent.name == "mixture_nano_s2" and unit.is_unit and not parent.is_unit
    assert unit.train_name == "mixture_nano_s2" and unit.train_hash() == parent.train_hash()
    assert unit.level_params == {"modulus": 97} and unit.seed == 2
    assert [c["weight"] for c in parent.mixture["components"]] == [1.0, 1.0, 1.0, 3.0]
    assert run_spec(cfg, "mixture_nano").train_hash() != parent.train_hash()        # seed
    assert parse_mixture_name("mixture_nano_s2/mod_L3")["parent"] == "mixture_nano_s2"
    assert parse_mixture_name("mod_L3_nano") is None and parse_mixture_name("mixture_nano_s02") is None
    # a single-task job's JSON (its Snakemake param) is unchanged by the new field
    j = job_spec(cfg, "copy_L1_nano", "metrics")
    assert "mixture" not in json.loads(j.to_json())["run"]
    assert JobSpec.from_json(j.to_json()) == j
    ju = job_spec(cfg, "mixture_nano/mod_L3", "events")
    assert JobSpec.from_json(ju.to_json()) == ju and ju.run_dir == Path("results/mixture_nano/mod_L3")
    with pytest.raises(ConfigError, match="train its mixture 'mixture_nano'"):
        job_spec(cfg, "mixture_nano/mod_L3", "train")
    with pytest.raises(ConfigError, match="runs on its units"):
        job_spec(cfg, "mixture_nano", "metrics")
    with pytest.raises(ConfigError, match="has no combination 'add_L1'"):
        run_spec(cfg, "mixture_nano/add_L1")
    with pytest.raises(ConfigError, match="not in the config grid"):
        run_spec(cfg, "mixture_micro")


def test_block_control_and_per_combination_controls():
    cfg = mix_cfg(controls={"mod_L1": "shuffled"})
    assert mixture_unit_names(cfg) == ["mixture_nano/copy_L1", "mixture_nano/mod_L1_shuffled"]
    assert run_spec(cfg, "mixture_nano/mod_L1_shuffled").control == "shuffled"
    cfg = mix_cfg(control="shuffled", controls={"copy_L1": "none"}, name="mixctl")
    assert mixture_unit_names(cfg) == ["mixctl_nano/copy_L1", "mixctl_nano/mod_L1_shuffled"]


@pytest.mark.parametrize("block, field, words", [
    ({"protocol": "multi"}, "grid.0.protocol", "allowed values"),
    ({"weights": {"add_L1": 1.0}}, "grid.0.weights.add_L1", "not a combination of this block"),
    ({"weights": {"mod_L1": -1.0}}, "grid.0.weights.mod_L1", "minimum"),
    ({"weights": {"mod_L1": 0}}, "grid.0.weights.mod_L1", "minimum"),
    ({"controls": {"mod_L1": "reversed"}}, "grid.0.controls.mod_L1", "allowed values"),
    ({"controls": {"mod_L3": "shuffled"}}, "grid.0.controls.mod_L3", "not a combination"),
    ({"tasks": ["mod"]}, "grid.0", "at least two task x level combinations"),
    ({"name": "Mix"}, "grid.0.name", "does not match"),
    ({"name": "copy"}, "grid.0.name", "does not match"),
    ({"wieghts": {"mod_L1": 2}}, "grid.0", "wieghts"),
])
def test_bad_mixture_blocks_fail_naming_the_field(block, field, words):
    u = mix_user()
    u["grid"][0].update(block)
    with pytest.raises(ConfigError) as e:
        resolve(u)
    assert f"'{field}'" in str(e.value) and words in str(e.value), str(e.value)


def test_mixture_keys_in_single_blocks_and_clashing_mixtures_fail():
    u = mix_user()
    u["grid"].append({"tasks": ["copy"], "levels": ["L1"], "sizes": ["nano"], "weights": {"copy_L1": 2}})
    with pytest.raises(ConfigError, match=r"'grid.1.weights': only for a mixture block"):
        resolve(u)
    u = mix_user()
    u["grid"].append({**u["grid"][0], "tasks": ["cmp", "mod"]})
    with pytest.raises(ConfigError, match=r"'grid.1'.*mixture_nano.*also trained by grid.0.*name"):
        resolve(u)
    u["grid"][1]["name"] = "mix2"
    assert mixture_names(resolve(u)) == ["mixture_nano", "mix2_nano"]
    u = mix_user()
    u["grid"].append(copy.deepcopy(u["grid"][0]))                  # a repeated block is dropped, not a clash
    assert len(mixtures(resolve(u))) == 1


def test_semantic_checks_cover_mixture_combinations():
    u = mix_user(tasks=("copy", "mod"), levels=("L3",))
    u["model"] = {"block_size": 20}                                # copy L3 needs 33 positions
    with pytest.raises(ConfigError, match="model.block_size.*copy L3"):
        resolve(u)
    u = mix_user()
    u["grid"][0]["sizes"] = ["nano"]
    u["events"] = {"layer": "block5"}
    with pytest.raises(ConfigError, match="events.layer"):
        resolve(u)


def test_cli_validate_and_runs_list_the_mixture(tmp_path, monkeypatch, capsys):
    from geoanatomy.cli import main
    import yaml
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump(mix_user(controls={"mod_L1": "shuffled"})))
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "--config", str(f)]) == 0
    assert "valid; 0 runs; 1 mixture models (protocol: mixture) with 2 combinations" in capsys.readouterr().out
    assert main(["runs", "--config", str(f)]) == 0
    assert capsys.readouterr().out.split() == ["mixture_nano", "mixture_nano/copy_L1", "mixture_nano/mod_L1_shuffled"]


def test_clean_run_takes_mixture_folders(tmp_path, capsys):
    from geoanatomy.cli import clean_run
    parent = tmp_path / "mixture_nano"
    (parent / "checkpoints").mkdir(parents=True)
    (parent / "train.json").write_text("{}")
    unit = parent / "mod_L1"
    unit.mkdir()
    (unit / "metrics.csv").write_text("x")
    (unit / "precursor.json").write_text("{}")
    assert clean_run(unit) == 0 and not (unit / "metrics.csv").exists() and (parent / "train.json").exists()
    assert clean_run(unit) == 2                                    # nothing left that a run holds
    assert clean_run(parent, checkpoints=True) == 0 and not (parent / "checkpoints").exists()
    odd = tmp_path / "mixture_nano" / "notes"
    odd.mkdir()
    assert clean_run(odd) == 2


def test_shipped_mixture_configs_validate():
    from geoanatomy.config import load_config
    cfg = load_config(str(REPO / "config" / "mixture.yaml"), workdir=REPO)
    assert mixture_names(cfg) == ["mixture_nano"] and len(mixture_unit_names(cfg)) == 6
    assert sorted(n.split("/")[1] + "_nano" for n in mixture_unit_names(cfg)) == sorted(run_names(cfg))
    # its single-task runs are the default grid's runs of the same names (shared results)
    default = load_config(str(REPO / "config.yaml"), workdir=REPO)
    for name in set(run_names(cfg)) & set(run_names(default)):
        assert run_spec(cfg, name).train_hash() == run_spec(default, name).train_hash(), name
    paper = load_config([str(REPO / "config" / "paper.yaml"), str(REPO / "config" / "paper_mixture.yaml")],
                        workdir=REPO)
    sizes = ("nano", "micro", "small", "medium", "large", "xlarge")
    assert mixture_names(paper) == [f"mixture_{s}" for s in sizes]
    assert len(mixture_unit_names(paper)) == 6 * 24 and len(run_names(paper)) == 144
    assert run_spec(paper, "mixture_xlarge").train["lr"] == 2.0e-4          # paper.yaml's size_overrides


def test_cluster_resources_of_mixture_jobs():
    from geoanatomy.cost import cost_proxy, job_resources
    cfg = mix_cfg(tasks=("copy", "mod"), levels=("L1", "L3"))
    assert cost_proxy(cfg, "mixture_nano") == "copy_L3_nano"        # the longest sequence sets the step cost
    assert cost_proxy(cfg, "mixture_nano/mod_L1") == "mod_L1_nano"
    r = job_resources(cfg, "train", "mixture_nano")
    assert r["runtime"] >= 15 and r["mem_mb"] > 0 and r["disk_mb"] > 0
    assert job_resources(cfg, "metrics", "mixture_nano/mod_L1")["runtime"] >= 15


# ------------------------------------------------------------------ batches and loss
def test_padded_batches_depend_only_on_seed_and_step():
    from geoanatomy.mixture import PAD_ID, MixtureData
    from geoanatomy.tasks import SEP
    cfg = mix_cfg(tasks=("copy", "mod"), levels=("L1", "L3"), weights={"copy_L3": 4})
    spec = run_spec(cfg, "mixture_nano")
    a, b = MixtureData(spec), MixtureData(spec)
    t5, m5 = a.train_batch(5, 256)
    a.train_batch(6, 256)
    assert np.array_equal(t5, b.train_batch(5, 256)[0]) and np.array_equal(m5, b.train_batch(5, 256)[1])
    assert not np.array_equal(t5, a.train_batch(7, 256)[0])
    rows = np.concatenate([a.train_rows(s, 256) for s in range(20)])
    share = np.bincount(rows, minlength=4) / len(rows)
    assert np.allclose(share, a.probs, atol=0.03) and a.probs[1] == pytest.approx(4 / 7)   # copy_L1, copy_L3, ...
    rows = a.train_rows(5, 256)
    assert t5.shape == (256, a.seq_len) and a.seq_len == max(p.spec.seq_len for p in a.parts)
    for k, part in enumerate(a.parts):
        sel = rows == k
        s = part.spec
        seq = t5[sel]
        # task token first, '=' right before the answer, PAD after the row's own sequence
        assert (seq[:, 0] == seq[0, 0]).all() and (seq[:, s.first_answer_pred_pos] == SEP).all()
        assert (seq[:, s.seq_len:] == PAD_ID).all()
        want = np.zeros(a.seq_len - 1, dtype=bool)
        want[s.first_answer_pred_pos:s.first_answer_pred_pos + s.n_answer] = True
        assert (m5[sel] == want).all()
        # the rows are that combination's training side: no held-out input, answers by the rule
        inputs = a.component_inputs(k, 5, int(sel.sum()))
        assert not part.is_heldout(inputs).any()
        assert np.array_equal(part.encode(inputs), seq[:, :s.seq_len])


def test_padded_rows_match_unpadded_and_loss_matches_single_task():
    from geoanatomy.mixture import MixtureData
    from geoanatomy.model import GPT, ModelConfig, answer_loss, padded_answer_loss
    cfg = mix_cfg(tasks=("cmp", "copy"), levels=("L1", "L3"))
    data = MixtureData(run_spec(cfg, "mixture_nano"))
    torch.manual_seed(0)
    model = GPT(ModelConfig.from_size("nano")).eval()
    tokens, mask = data.train_batch(3, 64)
    rows = data.train_rows(3, 64)
    with torch.no_grad():
        lp, hp = model(torch.as_tensor(tokens[:, :-1]), return_hidden=True)
        for k, part in enumerate(data.parts):
            sel = np.flatnonzero(rows == k)
            S = part.spec.seq_len
            lu, hu = model(torch.as_tensor(tokens[sel, :S - 1]), return_hidden=True)
            # causal attention: real positions never see the padding on their right
            assert torch.allclose(lp[sel, :S - 1], lu, atol=1e-5)
            assert torch.allclose(hp[-1][sel, part.spec.first_answer_pred_pos], hu[-1][:,
                                                                                       part.spec.first_answer_pred_pos],
                                  atol=1e-5)
    # rows of one task: the padded loss is the single-task loss
    part = data.parts[0]
    seq = torch.as_tensor(part.train_batch(0, 32))
    m = torch.zeros(32, seq.shape[1] - 1, dtype=torch.bool)
    m[:, part.spec.first_answer_pred_pos:part.spec.first_answer_pred_pos + part.spec.n_answer] = True
    with torch.no_grad():
        assert padded_answer_loss(model, seq, m).item() == pytest.approx(answer_loss(model, seq,
                                                                                     part.spec.n_answer).item(),
                                                                          rel=1e-6)
        # every row counts once: the mean over rows of each row's mean answer cross-entropy
        tk, mk = torch.as_tensor(tokens), torch.as_tensor(mask)
        logits = model(tk[:, :-1])
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tk[:, 1:], reduction="none")
        want = torch.stack([ce[i][mk[i]].mean() for i in range(64)]).mean()
        assert padded_answer_loss(model, tk, mk).item() == pytest.approx(want.item(), rel=1e-6)


# ------------------------------------------------------------------ training and stages
def _train(cfg, name, run_dir, **kw):
    from geoanatomy.stages.train import run as train_run
    return train_run(run_spec(cfg, name), run_dir, device="cpu", log=quiet, **kw)


def _unit_stages(cfg, unit, stages=("metrics", "events")):
    from geoanatomy.cli import run_stage
    out = {}
    for st in stages:
        j = job_spec(cfg, unit, st)
        j = JobSpec(j.stage, j.run, j.results_dir, "cpu", j.blocks)
        out[st] = run_stage(j)
    return out


def _weights(ckdir: Path, step: int):
    from safetensors.torch import load_file
    return load_file(str(ckdir / f"step_{step:06d}.safetensors"))


class Killed(Exception):
    pass


@pytest.mark.slow
def test_tiny_mixture_trains_resumes_and_is_deterministic(tmp_path):
    cfg = mix_cfg(tmp_path / "a", tasks=("copy", "mod"), levels=("L1",), weights={"mod_L1": 2})
    d = tmp_path / "a" / "mixture_nano"
    s = _train(cfg, "mixture_nano", d)
    assert s["protocol"] == "mixture" and s["units"] == ["mixture_nano/copy_L1", "mixture_nano/mod_L1"]
    assert s["shares"] == {"copy_L1": pytest.approx(1 / 3), "mod_L1": pytest.approx(2 / 3)}
    # per-combination outputs from the mixture's checkpoints
    for unit in mixture_unit_names(cfg):
        _unit_stages(cfg, unit, ("metrics", "measures", "probes", "events"))
        u = tmp_path / "a" / unit
        pre = json.loads((u / "precursor.json").read_text())
        assert pre["run"] == unit and pre["protocol"] == "mixture" and pre["model"] == "mixture_nano"
        assert pre["mixture"]["share"] == pytest.approx(1 / 3 if "copy" in unit else 2 / 3)
        assert pre["n_checkpoints"] == len(s["checkpoint_steps"])
        for m in ("rankme", "rankme_centred"):
            assert set(pre["measures"][m]["per_layer"]) == {"embed", "block0", "block1", "ln_final"}
        df = pd.read_csv(u / "metrics.csv")
        assert set(df["run"]) == {unit}
        assert set(df.loc[df["measure"] == "train_loss", "variant"]) == {"mixture_batch_average"}
        rm = df[(df["measure"] == "rankme") & (df["layer"] == "ln_final") & (df["position"] == "first")]
        assert set(rm["variant"]) == {"uncentred", "centred"} and (rm["n_samples"] == 32).all()
        assert (u / "measures.csv").exists() and (u / "probes.csv").exists() and (u / "trajectory.png").exists()
        assert not (u / "checkpoints").exists()
    # the unit's evaluation set is its single-task run's (same held-out pool)
    from geoanatomy.stages.common import task_data
    single = resolve({"grid": [{"tasks": ["mod"], "levels": ["L1"], "sizes": ["nano"]}], "eval": {"n_samples": 32}})
    assert np.array_equal(task_data(run_spec(cfg, "mixture_nano/mod_L1")).eval_set(32),
                          task_data(run_spec(single, "mod_L1_nano")).eval_set(32))
    # resume: killed after checkpoint 16, restarted -> bit-identical weights and training log
    cfg_b = mix_cfg(tmp_path / "b", tasks=("copy", "mod"), levels=("L1",), weights={"mod_L1": 2})
    e = tmp_path / "b" / "mixture_nano"

    def stop(step):
        if step >= 16:
            raise Killed(step)
    with pytest.raises(Killed):
        _train(cfg_b, "mixture_nano", e, on_checkpoint=stop)
    assert _train(cfg_b, "mixture_nano", e)["resumed_from"] == 16
    for step in (16, 40):
        a, b = _weights(d / "checkpoints", step), _weights(e / "checkpoints", step)
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert (d / "checkpoints/train_log.csv").read_bytes() == (e / "checkpoints/train_log.csv").read_bytes()
    # determinism: the same config and seed give the same numbers (metrics table byte for byte)
    _unit_stages(cfg_b, "mixture_nano/mod_L1", ("metrics",))
    assert ((tmp_path / "a/mixture_nano/mod_L1/metrics.csv").read_bytes()
            == (tmp_path / "b/mixture_nano/mod_L1/metrics.csv").read_bytes())
    # a unit refuses checkpoints of another mixture's settings
    from geoanatomy.checkpoints import CheckpointError
    other = mix_cfg(tmp_path / "a", tasks=("copy", "mod"), levels=("L1",))           # uniform weights: other hash
    with pytest.raises(CheckpointError, match="settings_hash"):
        _unit_stages(other, "mixture_nano/mod_L1", ("metrics",))


@pytest.mark.slow
def test_learned_task_beside_shuffled_labels(tmp_path):
    """copy L1 and shuffled-label mod L1 in one model: the first is acquired, the second never."""
    u = mix_user(controls={"mod_L1": "shuffled"})
    u.update(results_dir=str(tmp_path), eval={"n_samples": 64},
             train={"steps": 150, "warmup": 10, "checkpoints": {"n_log": 6, "log_end": 0.1, "n_uniform": 10}})
    cfg = resolve(u)
    _train(cfg, "mixture_nano", tmp_path / "mixture_nano")
    pres = {}
    for unit in ("mixture_nano/copy_L1", "mixture_nano/mod_L1_shuffled"):
        pres[unit] = _unit_stages(cfg, unit)["events"]
    learned, ctrl = pres["mixture_nano/copy_L1"], pres["mixture_nano/mod_L1_shuffled"]
    assert learned["acquired"] and learned["acquisition_step"] <= 150 and learned["final_accuracy"] > 0.9
    assert not ctrl["acquired"] and ctrl["control"] == "shuffled" and ctrl["final_accuracy"] < 0.2
    assert learned["model"] == ctrl["model"] == "mixture_nano"


# ------------------------------------------------------------------ workflow
MIX_YAML = """
results_dir: results
grid:
  - {tasks: [copy], levels: [L1], sizes: [nano]}
  - {protocol: mixture, tasks: [copy, mod], levels: [L1], sizes: [nano], controls: {mod_L1: shuffled}}
train:
  steps: 30
  warmup: 5
  checkpoints: {n_log: 5, log_end: 0.2, n_uniform: 4}
eval: {n_samples: 32}
"""


def _smk_out(workdir: Path, *args) -> str:
    p = smk(workdir, *args)
    return p.stdout + p.stderr


@pytest.mark.slow
def test_dry_run_plans_one_training_per_mixture(tmp_path):
    (tmp_path / "mix.yaml").write_text(MIX_YAML)
    out = _smk_out(tmp_path, "-n", "--configfile", "mix.yaml")
    counts = {ln.split()[0]: int(ln.split()[1]) for ln in out.splitlines()
              if len(ln.split()) == 2 and ln.split()[1].isdigit()}
    assert counts["train"] == 2 and counts["metrics"] == 3 and counts["events"] == 3
    assert counts["summary_protocols"] == 1
    assert "results/mixture_nano/mod_L1_shuffled/precursor.json" in out


@pytest.mark.slow
def test_workflow_builds_one_unit_from_its_mixture(tmp_path):
    (tmp_path / "mix.yaml").write_text(MIX_YAML)
    smk(tmp_path, "--cores", "2", "--configfile=mix.yaml", "results/mixture_nano/copy_L1/precursor.json")
    r = tmp_path / "results"
    assert (r / "mixture_nano/train.json").exists() and (r /
                                                         "mixture_nano/checkpoints/step_000030.safetensors").exists()
    assert (r / "mixture_nano/copy_L1/precursor.json").exists()
    assert not (r / "mixture_nano/mod_L1_shuffled").exists() and not (r / "copy_L1_nano").exists()
    assert "Nothing to be done" in _smk_out(tmp_path, "--cores", "2", "--configfile=mix.yaml",
                                       "results/mixture_nano/copy_L1/precursor.json")


# ------------------------------------------------------------------ summary
def _synthetic(tmp_path):
    from test_analysis import make_pre, write
    pres = []
    for size in ("nano", "micro", "small", "medium", "large", "xlarge"):
        for t, acq, tr in (("copy", 50, 10), ("cmp", 400, 20), ("mod", 900, 30), ("add", None, 40)):
            pres.append(make_pre(t, "L3", size, acq=acq, tr=tr, plateau=acq and acq // 2, logprob=acq and acq // 3))
            m = make_pre(t, "L3", size, acq=acq and acq + 100, tr=tr, plateau=acq, logprob=acq and acq // 2)
            m.update(run=f"mixture_{size}/{t}_L3", protocol="mixture", model=f"mixture_{size}",
                     mixture={"share": 0.25})
            pres.append(m)
    return pres, write(tmp_path, pres)


@pytest.mark.slow
def test_summary_sets_protocols_side_by_side_with_models_as_units(tmp_path):
    from geoanatomy.analysis.summarize import run
    from geoanatomy.cli.summarize import make_settings
    st = make_settings({"n_bootstrap": 200, "n_permutations": 500})
    pres, paths = _synthetic(tmp_path)
    out = tmp_path / "summary"
    for part in ("tables", "scale", "prediction", "verdict", "protocols", "html"):
        run(part, paths, out, st, log=quiet)
    # the single-task tables hold single-task runs only
    tr = pd.read_csv(out / "transitions.csv")
    assert len(tr) and not tr["run"].str.startswith("mixture").any()
    v = pd.read_csv(out / "verdict.csv")
    assert set(v["protocol"]) == {"single-task", "mixture"}
    mix = v[v["protocol"] == "mixture"]
    acq = mix[mix["claim"] == "acquisition rate"].iloc[0]
    assert acq["n_units"] == 6 and acq["n_runs"] == 24 and acq["value"] == pytest.approx(0.75)
    assert "models" in acq["null"]
    single = v[(v["protocol"] == "single-task") & (v["claim"] == "acquisition rate")].iloc[0]
    assert single["n_units"] == 24                                 # cells
    hard = mix[(mix["claim"] == "precursor rate on hard cells (descriptive)") & (mix["measure"] == "rankme")].iloc[0]
    assert hard["n_units"] == 6 and hard["n_runs"] == 24 and "across models" in hard["null"]
    assert all(f.endswith("(mixture)") for f in mix["family"])     # Holm families never mix protocols
    assert {"top-down propagation", "floors task-specific", "acquisition order scale-invariant"} <= set(mix["claim"])
    from geoanatomy.analysis.tables import header_lines
    assert any("protocol = mixture" in ln for ln in header_lines(out / "verdict.csv"))
    p = pd.read_csv(out / "protocols.csv")
    row = p[(p["task"] == "cmp") & (p["size"] == "nano") & (p["measure"] == "rankme")].iloc[0]
    assert float(row["single_acquisition_step"]) == 400 and float(row["mixture_acquisition_step"]) == 500
    assert row["acquisition_step_mixture_over_single"] == pytest.approx(1.25)
    assert row["single_runs"] == row["mixture_runs"] == 1 and row["mixture_share"] == 0.25
    never = p[(p["task"] == "add") & (p["measure"] == "rankme")].iloc[0]
    assert pd.isna(never["single_acquisition_step"]) and bool(never["single_acquisition_censored"])
    assert never["mixture_acquired_k_of_n"] == "0/1"
    assert pd.api.types.is_numeric_dtype(p["single_acquisition_step"])       # numbers only; censoring apart
    assert set(p["variant"]) == {"uncentred", "centred"}
    r = pd.read_csv(out / "protocol_rates.csv")
    assert set(r["protocol"]) == {"single-task", "mixture"}
    m_all = r[(r["protocol"] == "mixture") & (r["measure"] == "rankme") & (r["difficulty"] == "hard")
              & (r["size"] == "all")].iloc[0]
    assert m_all["n_units"] == 6 and m_all["rate_k_of_n"] == "18/18"
    assert "protocols.csv" in (out / "tables.html").read_text()


def test_cluster_bootstrap_resamples_models_not_combinations():
    """One model whose 10 combinations all acquired and 9 models with none: by models the
    interval of the acquisition share reaches 0 (a tenth of the models could be the whole
    effect); counted as 19 independent units it would not."""
    from geoanatomy.analysis.stats import cluster_bootstrap
    df = pd.DataFrame({"model": ["m0"] * 10 + [f"m{i}" for i in range(1, 10)],
                       "task": [f"t{i}" for i in range(19)], "level": "L1", "size": "nano"})
    x = np.array([1.0] * 10 + [0.0] * 9)
    lo, hi = cluster_bootstrap(df, lambda i: float(x[i].mean()), 2000, 0, ("model",))
    lo_c, _ = cluster_bootstrap(df, lambda i: float(x[i].mean()), 2000, 0)
    assert lo == 0.0 and lo_c > 0.25


@pytest.mark.slow
def test_slurm_profile_dry_run_places_mixture_jobs(tmp_path):
    """`snakemake -n --profile <site-edited slurm profile>` on a mixture grid: one job per unit and
    stage, each with its resources; a micro unit's measures go to the GPU partition, packed (micro is
    one of geoanatomy.cost.PACK_SIZES): a group job gpupack_measures_<batch> holding --gres=gpu:1."""
    from test_slurm import SNAKEMAKE, _need_plugin, site_profile
    _need_plugin()
    prof = site_profile(tmp_path / "profile", cpu_partition="cpu", gpu_partition="gpu", account="proj")
    (tmp_path / "mix.yaml").write_text(MIX_YAML.replace("sizes: [nano], controls", "sizes: [micro], controls"))
    p = subprocess.run(SNAKEMAKE + ["-n", "-s", str(REPO / "Snakefile"), "--configfile=mix.yaml", "--profile",
                                    str(prof), "results/mixture_micro/mod_L1_shuffled/precursor.json"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    job = out[out.index("rule measures:"):]
    job = job.split("\n[")[0]                  # up to the next job's timestamp line
    assert "wildcards: run=mixture_micro/mod_L1_shuffled" in job and "slurm_partition=gpu" in job, job
    assert "gres=gpu:1" in job and "Group job gpupack_measures_0" in out[:out.index("rule measures:")], out
    train = out[out.index("rule train:"):]
    assert "run=mixture_micro" in train[:train.index("\n\n")] and "slurm_partition=cpu" in train[:train.index("\n\n")]


@pytest.mark.slow
def test_summary_of_a_grid_with_mixtures_only(tmp_path):
    from geoanatomy.analysis.summarize import run
    from geoanatomy.cli.summarize import make_settings
    st = make_settings({"n_bootstrap": 100, "n_permutations": 100})
    pres, paths = _synthetic(tmp_path)
    mix = [p for p, pre in zip(paths, pres) if pre.get("protocol") == "mixture"]
    out = tmp_path / "summary"
    for part in ("tables", "scale", "prediction", "verdict", "protocols", "html"):
        run(part, mix, out, st, log=quiet)
    v = pd.read_csv(out / "verdict.csv")
    assert set(v["protocol"]) == {"mixture"}
    p = pd.read_csv(out / "protocols.csv")
    assert p["single_runs"].isna().all() and (p["mixture_runs"] == 1).all()
    assert "empty table" in (out / "tables.html").read_text()


@pytest.mark.slow          # trains, prunes and retrains a mixture (26 s)
def test_a_pruned_mixture_refuses_its_units_and_retraining_rebuilds_it_identically(tmp_path):
    """keep_checkpoints: final for a mixture: the prune stage runs on the mixture's training run
    (not on a unit), keeps the newest weights, a unit's metrics stops naming the fix, and
    retraining (what `--forcerun train` runs) rebuilds every checkpoint bit for bit."""
    from geoanatomy.checkpoints import CheckpointError, list_checkpoints
    from geoanatomy.cli import run_stage
    cfg = {**mix_cfg(tmp_path, tasks=("copy", "mod"), levels=("L1",)), "keep_checkpoints": "final"}
    d = tmp_path / "mixture_nano"
    _train(cfg, "mixture_nano", d)
    ck = d / "checkpoints"
    steps = list_checkpoints(ck)
    before = {s: _weights(ck, s) for s in steps}
    with pytest.raises(ConfigError, match="prune its mixture 'mixture_nano'"):
        job_spec(cfg, "mixture_nano/copy_L1", "prune")
    j = job_spec(cfg, "mixture_nano", "prune")
    # its units read its checkpoints: refused (nothing removed) until every unit's readers finished
    with pytest.raises(ConfigError, match=r"have not finished: .*mixture_nano/copy_L1/metrics\.csv"):
        run_stage(JobSpec(j.stage, j.run, j.results_dir, "cpu", j.blocks))
    assert list_checkpoints(ck) == steps
    for unit in ("mixture_nano/copy_L1", "mixture_nano/mod_L1"):
        _unit_stages(cfg, unit, ("metrics", "measures", "probes"))
    run_stage(JobSpec(j.stage, j.run, j.results_dir, "cpu", j.blocks))
    assert list_checkpoints(ck) == steps[-1:] and json.loads((d / "pruned.json").read_text())["complete"]
    with pytest.raises(CheckpointError, match="removed after its stages finished.*--forcerun train"):
        _unit_stages(cfg, "mixture_nano/copy_L1", ("metrics",))
    _train(cfg, "mixture_nano", d)
    assert list_checkpoints(ck) == steps and not (d / "pruned.json").exists()
    for s in steps:
        w = _weights(ck, s)
        assert all(torch.equal(w[k], before[s][k]) for k in before[s]), s


@pytest.mark.slow
def test_dry_run_prunes_a_mixture_after_all_its_units_and_costs_it(tmp_path):
    """keep_checkpoints final: one prune job per training run (single-task and mixture), the
    mixture's waiting for every unit's metrics, measures and probes; the cost table and the
    peak-disk bound count the mixture (its proxy's checkpoints) and its units."""
    from geoanatomy.config import load_config
    from geoanatomy.cost import checkpoint_disk_mb, cost_name, cost_table, kept_disk_mb, peak_disk_mb
    (tmp_path / "mix.yaml").write_text(MIX_YAML + "keep_checkpoints: final\nmax_unpruned_runs: 1\n")
    out = _smk_out(tmp_path, "-n", "--configfile", "mix.yaml")
    counts = {ln.split()[0]: int(ln.split()[1]) for ln in out.splitlines()
              if len(ln.split()) == 2 and ln.split()[1].isdigit()}
    assert counts["prune"] == 2, counts
    cfg = load_config(str(tmp_path / "mix.yaml"))
    rows = cost_table(cfg)
    assert [(r["runs"], r["mixtures"], r["analysis_units"]) for r in rows] == [(2, 1, 3)]
    runs = ["copy_L1_nano", cost_name(cfg, "mixture_nano")]
    extra = [checkpoint_disk_mb(cfg, r) - kept_disk_mb(cfg, r) for r in runs]
    assert peak_disk_mb(cfg) == sum(kept_disk_mb(cfg, r) for r in runs) + max(extra)
    from geoanatomy.config import prune_window
    assert prune_window(cfg) == {"mixture_nano": "copy_L1_nano"}     # the mixture waits in its size's window


def test_protocols_figure_draws_the_rows_of_protocols_csv(tmp_path):
    """figures/protocols.png: every drawn point is its protocols.csv value (acquisition step and
    floor of each protocol per cell, headline variant); a median beyond the run is a '>' at
    the edge, never a number."""
    import matplotlib
    matplotlib.use("Agg")
    from geoanatomy.analysis import figures_summary
    from geoanatomy.analysis.summarize import run
    from geoanatomy.cli.summarize import make_settings
    st = make_settings({"n_bootstrap": 100, "n_permutations": 100})
    pres, paths = _synthetic(tmp_path)
    out = tmp_path / "summary"
    run("protocols", paths, out, st, log=quiet)
    assert (out / "figures" / "protocols.png").stat().st_size > 0
    table = pd.read_csv(out / "protocols.csv")
    rows = figures_summary.protocol_rows(table, "centred")
    assert len(rows) == 24 and set(rows["variant"]) == {"centred"}
    fig = figures_summary.draw_protocols(table, "centred")
    drawn = {ln.get_gid(): ln for ax in fig.axes for ln in ax.lines if ln.get_gid()}
    n_cens = 0
    for i, r in rows.iterrows():
        for side in ("single", "mixture"):
            for q, _, _ in figures_summary.PROTOCOL_QUANTITIES:
                v = r[f"{side}_{q}"]
                if pd.notna(v):
                    assert drawn[f"{side}:{q}:{i}"].get_xdata()[0] == pytest.approx(float(v))
                elif q == "acquisition_step" and str(r[f"{side}_acquisition_censored"]) == "True":
                    assert f"{side}:{q}:{i}:censored" in drawn
                    n_cens += 1
                else:
                    assert f"{side}:{q}:{i}" not in drawn
    assert n_cens >= 12          # add never acquires, at every size, in both protocols
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [f"{r.task} {r.level} {r['size']}" for _, r in rows.iterrows()]     # no control in this grid
