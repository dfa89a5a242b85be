"""The SLURM profile (slurm/config.yaml) and the cluster resource model.

Integration test: start a real single-node SLURM on this machine (.ci/slurm-setup.sh:
Debian's slurm-wlm + munge), run a tiny grid (1 nano run, 40 steps, 9 checkpoints, all
five per-run stages: train, metrics, measures, probes, events)
through ``snakemake --profile <copy of slurm/config.yaml with the three site edits>``
and check that every table equals, byte for byte, the one a local ``--cores`` run of
the same grid writes (training on CPU is deterministic). It skips only where SLURM
cannot run at all (not root, no binaries and no apt-get); a daemon that fails to come
up is a failure. Unit tests: the profile's GPU expressions against
geoanatomy.cost.GPU_SIZES, resources scaling with size, steps and retries, and the
job count / dry-run of the paper grid.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from conftest import REPO, safetensors_content, same_safetensors

PROFILE = REPO / "slurm" / "config.yaml"
SETUP = REPO / ".ci" / "slurm-setup.sh"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
SIZES = ["nano", "micro", "small", "medium", "large", "xlarge"]

TINY = """\
seed: 0
device: cpu
results_dir: results
grid:
  - {tasks: [mod], levels: [L1], sizes: [nano]}
train:
  steps: 40
  warmup: 5
  checkpoints: {n_log: 4, log_end: 0.25, n_uniform: 4}
eval: {n_samples: 64}
measures:
  sizes: [nano]
  n_points: 3
  grad_rank: {n_samples: 16}
  hessian: {batch_size: 16, max_iter: 5}
  llc: {chains: 1, draws: 5, burnin: 0, batch_size: 16, n_data: 64}
probes: {sizes: [nano], n_samples: 64}
"""
RUNS = ["mod_L1_nano"]   # one run: 5 jobs, 4 levels deep (measures and probes side by side)
STAGES = ["train", "metrics", "measures", "probes", "events"]   # jobs per run
TABLES = ["metrics.csv", "measures.csv", "probes.csv", "precursor.json"]


def render_profile(text: str) -> dict:
    """The profile as Snakemake reads it (yte template -> plain mapping)."""
    import yte
    import io
    return yte.process_yaml(io.StringIO(text), require_use_yte=True)


def site_profile(dest: Path, no_gpus: bool = False, **variables) -> Path:
    """Copy slurm/config.yaml to dest/config.yaml with __variables__ and top-level keys
    replaced (the "three edits" of docs/slurm.md, done by a test; each key must occur once).
    ``no_gpus``: every list under gpu_sizes becomes [] and pythia_gpu and train_pack_gpu false."""
    text = PROFILE.read_text()
    if no_gpus:
        block = re.search(r"^  gpu_sizes:\n((?:    \w+: \[[^\]]*\].*\n)+)", text, flags=re.M)
        assert block, "slurm/config.yaml: no gpu_sizes block of per-rule lists"
        text = text.replace(block.group(1), re.sub(r"\[[^\]]*\]", "[]", block.group(1)))
        variables.setdefault("pythia_gpu", "false")
        variables.setdefault("train_pack_gpu", "false")
    for key, value in variables.items():
        name = key.replace("__", "-")
        text, n = re.subn(rf"^(\s*{re.escape(name)}:)[^\n]*$", lambda m: f"{m.group(1)} {value}", text, flags=re.M)
        assert n == 1, f"slurm/config.yaml: expected one line '{name}:', found {n}"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(text)
    return dest


def prof_variables() -> dict:
    """The profile's __variables__ block (the site's settings)."""
    return yaml.safe_load(PROFILE.read_text())["__variables__"]


def _eval_resource(expr, run: str):
    """Evaluate a set-resources value the way Snakemake does (a Python expression over
    the job's wildcards; a value that is not one stays a string)."""
    if not isinstance(expr, str):
        return expr
    try:
        return eval(expr, {"wildcards": SimpleNamespace(run=run), "attempt": 1})  # noqa: S307 - our own file
    except (NameError, SyntaxError):
        return expr


# --------------------------------------------------------------------- profile (unit)
def test_profile_is_found_by_name_and_has_the_settings():
    prof = render_profile(PROFILE.read_text())
    assert prof["executor"] == "slurm"
    assert prof["scheduler"] == "greedy"
    assert int(prof["retries"]) >= 1 and int(prof["latency-wait"]) >= 30 and int(prof["jobs"]) >= 10
    dr = prof["default-resources"]
    assert "EDIT_ME" in str(dr["slurm_partition"]) and "EDIT_ME" in str(dr["slurm_account"])
    # no profiles/default folder: it would silently override --profile (Snakemake applies profiles/default to every run)
    assert not (REPO / "profiles" / "default").exists()
    # `--profile slurm` resolves to ./slurm/config.yaml
    from snakemake.cli import get_profile_dir
    cwd = os.getcwd()
    try:
        os.chdir(REPO)
        d, f = get_profile_dir("slurm")
    finally:
        os.chdir(cwd)
    assert Path(f).resolve() == PROFILE.resolve()


def test_gpus_only_in_profile_and_match_cluster_gpu_sizes():
    from geoanatomy.cost import GPU_SIZES
    prof = render_profile(PROFILE.read_text())
    sr = prof["set-resources"]
    gpu_rules = {r for r, v in sr.items() if "gpu" in v} - {"pythia_extract", "train_pack"}
    assert sr["train_pack"]["gpu"] == int(prof_variables()["train_pack_gpu"]) == 1     # a pack: one GPU
    assert gpu_rules == set(GPU_SIZES), f"profile gives GPUs to {gpu_rules}, cluster.GPU_SIZES to {set(GPU_SIZES)}"
    from geoanatomy.cost import PACK_SIZES
    assert {r: tuple(v) for r, v in prof_variables()["gpu_pack_sizes"].items()} == PACK_SIZES
    from geoanatomy.cost import PACK_SLOTS, pack_group
    n = prof_variables()["gpu_pack_per_gpu"]
    named = {g.split("=")[0]: int(g.split("=")[1]) for g in prof["group-components"]}
    for r, sizes in PACK_SIZES.items():       # every group name the workflow gives, packed n per GPU
        assert all(named[pack_group(r, s, k)] == n for s in sizes for k in range(PACK_SLOTS))

    def gpus(rule, run):      # a whole GPU (gpu: 1) or a share of one (gres gpu:1 in a packed group)
        res = sr[rule]
        return int(_eval_resource(res["gpu"], run)) + (_eval_resource(res["gres"], run) == "gpu:1" if "gres" in res
                                                       else 0)
    for rule, sizes in GPU_SIZES.items():
        got = [s for s in SIZES if gpus(rule, f"mod_L3_{s}")]
        assert tuple(got) == sizes, f"profile gives {rule} a GPU for {got}, cluster.GPU_SIZES has {sizes}"
        packed = [s for s in SIZES if "gres" in sr[rule] and _eval_resource(sr[rule]["gres"], f"mod_L3_{s}")]
        assert tuple(packed) == tuple(s for s in sizes if s in PACK_SIZES.get(rule, ())), (rule, packed)
        assert not any(_eval_resource(sr[rule]["gpu"], f"mod_L3_{s}") for s in packed)   # never both
        parts = {s: _eval_resource(sr[rule]["slurm_partition"], f"mod_L3_{s}") for s in SIZES}
        assert {parts[s] for s in sizes} == {"EDIT_ME_gpu_partition"}
        assert {parts[s] for s in SIZES if s not in sizes} <= {"EDIT_ME_cpu_partition"}
        # seeds, controls and the mixture protocol's names find their size too
        for name in ("mod_L3_{}_s2", "mod_L3_{}_shuffled", "mixture_{}", "mixture_{}_s1/mod_L3",
                     "mixture_{}/mod_L1_shuffled"):
            got = [s for s in SIZES if gpus(rule, name.format(s))]
            assert tuple(got) == sizes, (rule, name, got)
    assert sr["pythia_extract"]["gpu"] == 1
    # the rules themselves never ask for a GPU (rejected on clusters without one)
    for f in (REPO / "workflow" / "rules").glob("*.smk"):
        code = "\n".join(line.split("#")[0] for line in f.read_text().splitlines())
        assert not re.search(r"\b(gpu|gres|slurm_extra)\s*=", code), f"{f.name} requests a GPU itself"


def test_site_edits_render_cpu_only_profile(tmp_path):
    d = site_profile(tmp_path / "p", no_gpus=True, cpu_partition="ci", gpu_partition="ci", account='""')
    prof = render_profile((d / "config.yaml").read_text())
    assert "slurm_account" not in prof["default-resources"]            # account "" -> no -A
    assert _eval_resource(prof["default-resources"]["slurm_partition"], "x") == "ci"
    for rule, v in prof["set-resources"].items():
        if rule not in ("pythia_extract", "train_pack"):
            assert all(_eval_resource(v["gpu"], f"mod_L1_{s}") == 0 for s in SIZES)
            assert all(_eval_resource(v["slurm_partition"], f"mod_L1_{s}") == "ci" for s in SIZES)
    assert prof["set-resources"]["pythia_extract"]["gpu"] == 0
    tp = prof["set-resources"]["train_pack"]
    assert tp["gpu"] == 0 and _eval_resource(tp["slurm_partition"], "nano_p00") == "ci"


def test_job_log_line_states_device_and_slurm_allocation(monkeypatch):
    import torch
    from geoanatomy.runtime import describe_device
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    line = describe_device("cpu")
    assert line.startswith("device cpu (requested cpu)") and "SLURM" not in line
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    line = describe_device("cpu")
    assert "SLURM job 4242 (GPUs allocated: 0)" in line and "WARNING" in line   # GPU paid for, unused
    auto = describe_device("auto")
    assert ("WARNING" in auto) == (not torch.cuda.is_available())
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            describe_device("cuda")


# --------------------------------------------------------------- resources (unit)
def _cfg(**over):
    from geoanatomy.config import resolve
    user = yaml.safe_load(TINY)
    user["grid"] = [{"tasks": ["mod", "copy"], "levels": ["L3"], "sizes": SIZES}]
    user.update(over)
    return resolve(user)


def test_resources_scale_with_size_steps_and_attempt():
    from geoanatomy.cost import job_resources, train_step_flops
    cfg = _cfg(train={"steps": 2000, "checkpoints": {"n_log": 20, "log_end": 0.1, "n_uniform": 40}}, device="cpu")
    rt = [job_resources(cfg, "train", f"mod_L3_{s}")["runtime"] for s in SIZES]
    mem = [job_resources(cfg, "train", f"mod_L3_{s}")["mem_mb"] for s in SIZES]
    disk = [job_resources(cfg, "train", f"mod_L3_{s}")["disk_mb"] for s in SIZES]
    assert rt == sorted(rt) and rt[-1] > rt[0] and mem == sorted(mem) and disk == sorted(disk)
    # checkpoint disk: (checkpoints x 4 + 16) bytes per parameter (two resume states)
    from geoanatomy.cost import n_params, run_shape
    from geoanatomy.tasks import VOCAB_SIZE
    n_ck = run_shape(cfg, "mod_L3_xlarge")["checkpoints"]
    assert abs(disk[-1] - (n_ck * 4 + 16) * n_params("xlarge", VOCAB_SIZE) / 1e6) <= 1
    # a longer sequence (copy L3: 33 positions vs mod L3: 8) costs more per step
    assert train_step_flops("small", 64, 33) > 4 * train_step_flops("small", 64, 8)
    assert job_resources(cfg, "train", "copy_L3_small")["runtime"] > job_resources(cfg, "train",
                                                                                   "mod_L3_small")["runtime"]
    # more steps -> more time; a retry gets more time and memory
    cfg10 = _cfg(train={"steps": 20000, "checkpoints": {"n_log": 20, "log_end": 0.1, "n_uniform": 40}}, device="cpu")
    assert job_resources(cfg10, "train", "copy_L3_small")["runtime"] > 5 * job_resources(cfg, "train",
                                                                                         "copy_L3_small")["runtime"]
    r1, r2 = job_resources(cfg, "train", "copy_L3_small", 1), job_resources(cfg, "train", "copy_L3_small", 2)
    assert r2["runtime"] == 2 * r1["runtime"] and r2["mem_mb"] > r1["mem_mb"]
    # GPU sizes are estimated for the GPU unless the config pins the CPU
    gpu_cfg = _cfg(train={"steps": 2000, "checkpoints": {"n_log": 20, "log_end": 0.1, "n_uniform": 40}}, device="auto")
    assert job_resources(gpu_cfg, "train", "mod_L3_xlarge")["runtime"] < job_resources(cfg, "train",
                                                                                       "mod_L3_xlarge")["runtime"]
    assert job_resources(gpu_cfg, "train", "mod_L3_nano") == job_resources(cfg, "train", "mod_L3_nano")
    # measures: only sizes in measures.sizes do work; more Hessian iterations -> more time
    few = _cfg(measures={"sizes": ["nano"], "hessian": {"max_iter": 10}}, device="cpu")
    many = _cfg(measures={"sizes": ["nano"], "hessian": {"max_iter": 400}}, device="cpu")
    assert job_resources(many, "measures", "copy_L3_nano")["runtime"] > job_resources(few, "measures",
                                                                                      "copy_L3_nano")["runtime"]
    assert job_resources(many, "measures", "copy_L3_small")["runtime"] == 15     # not measured: minimum
    with pytest.raises(ValueError, match="unknown stage"):
        job_resources(cfg, "trian", "mod_L3_nano")


def _need_plugin():
    pytest.importorskip("snakemake_executor_plugin_slurm",
                        reason="snakemake-executor-plugin-slurm not installed (pip install -e '.[slurm]')")


THREE_EDITS = ("cpu_partition", "gpu_partition", "account")


def _assert_names_the_three_edits(out: str):
    assert "three site edits" in out and "slurm/config.yaml" in out and "docs/slurm.md" in out, out
    for i, name in enumerate(THREE_EDITS, 1):
        assert re.search(rf"EDIT {i}\s+{name}\b", out), f"message does not name EDIT {i} {name}:\n{out}"


@pytest.mark.slow
def test_unedited_profile_fails_naming_the_three_edits():
    """`snakemake -n --profile slurm` with the placeholders still in: stops at parse time."""
    _need_plugin()
    p = subprocess.run(SNAKEMAKE + ["-n", "--profile", "slurm"], cwd=REPO, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    _assert_names_the_three_edits(out)
    for placeholder in ("EDIT_ME_cpu_partition", "EDIT_ME_gpu_partition", "EDIT_ME_account"):
        assert placeholder in out, out
    assert "Job stats" not in out and "Building DAG" not in out, out


@pytest.mark.slow
def test_placeholders_stop_a_real_run_before_sbatch(tmp_path):
    """A real (not dry) run with placeholders left (here: the account only) submits nothing:
    a fake sbatch/sinfo/squeue/sacct on PATH records every call."""
    _need_plugin()
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    for tool in ("sbatch", "sinfo", "squeue", "sacct", "scontrol", "scancel"):
        (bin_dir / tool).write_text(f"#!/bin/sh\necho {tool} \"$@\" >> '{calls}'\necho 1\n")
        (bin_dir / tool).chmod(0o755)
    prof = site_profile(tmp_path / "profile", cpu_partition="cpu", gpu_partition="gpu")  # account left
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "cfg.yaml").write_text(TINY)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    p = subprocess.run(SNAKEMAKE + ["-s", str(REPO / "Snakefile"), "--configfile=cfg.yaml", "--profile", str(prof)],
                       cwd=wd, capture_output=True, text=True, timeout=120, env=env)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    _assert_names_the_three_edits(out)
    assert "EDIT_ME_account" in out and "EDIT_ME_cpu_partition" not in out, out
    assert not calls.exists() or "sbatch" not in calls.read_text(), calls.read_text()
    assert not (wd / "results").exists()


@pytest.mark.parametrize("edits", [
    dict(cpu_partition="cpu", gpu_partition="gpu", account='""'),
    dict(cpu_partition="cpu", gpu_partition="gpu", account="proj"),
    dict(no_gpus=True, cpu_partition="cpu", account='""'),   # CPU-only site: gpu_partition unused, left
])
@pytest.mark.slow
def test_site_edited_profile_dry_run_passes(tmp_path, edits):
    _need_plugin()
    prof = site_profile(tmp_path / "profile", **edits)
    (tmp_path / "cfg.yaml").write_text(TINY)
    p = subprocess.run(SNAKEMAKE + ["-n", "-s", str(REPO / "Snakefile"), "--configfile=cfg.yaml",
                                    "--profile", str(prof)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "EDIT_ME" not in p.stdout + p.stderr and "Job stats" in p.stdout + p.stderr


@pytest.mark.slow
def test_paper_grid_dry_run_job_count(tmp_path):
    """`snakemake -n --profile slurm --configfile config/paper.yaml` (profile with the three
    site edits): one job per run and stage. How long the plan takes is a benchmark
    (benchmarks/bench_dry_run.py), not a timed test."""
    _need_plugin()
    paper = REPO / "config" / "paper.yaml"
    if not paper.exists():
        pytest.skip("config/paper.yaml not present")
    prof = site_profile(tmp_path / "profile", cpu_partition="cpu", gpu_partition="gpu", account="proj")
    p = subprocess.run(SNAKEMAKE + ["-n", "--profile", str(prof), "--configfile", str(paper)],
                       cwd=REPO, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout + p.stderr
    counts = {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", out[out.index("Job stats:"):], flags=re.M)}
    from geoanatomy.config import load_config, run_names
    n_runs = len(run_names(load_config(paper)))
    assert n_runs == 144
    for stage in STAGES:                       # one job per run and stage, never per checkpoint
        assert counts[stage] == n_runs, (stage, counts)
    assert max(v for k, v in counts.items() if k != "total") == n_runs
    assert counts["total"] < 1000, counts


# ------------------------------------------------------------ real SLURM (integration)
def _slurm_up() -> str | None:
    """None when SLURM answers after .ci/slurm-setup.sh; else why it cannot run here."""
    if os.geteuid() != 0 and shutil.which("sinfo") is None:
        return "SLURM not installed and not root (cannot install or start it)"
    p = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=600)
    if p.returncode == 77:
        return f"SLURM cannot run here: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else 'setup exit 77'}"
    assert p.returncode == 0, f".ci/slurm-setup.sh failed (exit {p.returncode}):\n{p.stdout}\n{p.stderr}"
    return None


def _partition() -> str:
    out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, check=True).stdout.split()
    default = [p for p in out if p.endswith("*")]
    return (default or out)[0].rstrip("*")


@pytest.mark.slow
def test_slurm_profile_runs_grid_identical_to_local(tmp_path):
    _need_plugin()
    why = _slurm_up()
    if why:
        pytest.skip(why)
    part = _partition()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SLURM_JOB_ID", None)

    # the shipped profile with the three site edits (+ no GPUs on this machine, squeue for
    # status since there is no accounting database, short waits for a fast test)
    prof = site_profile(tmp_path / "profile", no_gpus=True, cpu_partition=part, gpu_partition=part, account='""',
                        slurm__status__command="squeue",
                        slurm__init__seconds__before__status__checks="1", latency__wait="5", jobs="4")
    wd_slurm, wd_local = tmp_path / "slurm_run", tmp_path / "local_run"
    for wd in (wd_slurm, wd_local):
        wd.mkdir()
        (wd / "cfg.yaml").write_text(TINY)

    targets = [f"results/{r}/precursor.json" for r in RUNS]      # every per-run stage, no summaries
    common = ["-s", str(REPO / "Snakefile"), "--configfile=cfg.yaml"]   # (--configfile takes nargs+)
    # the local run (1 core) goes alongside the SLURM run: same config, other folder
    local = subprocess.Popen(SNAKEMAKE + targets + common + ["--cores", "1", "-q"], cwd=wd_local, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    p = subprocess.run(SNAKEMAKE + targets + common + ["--profile", str(prof), "--verbose"], cwd=wd_slurm, env=env,
                       capture_output=True, text=True, timeout=900)
    t_slurm = time.time() - t0
    local_out, _ = local.communicate(timeout=900)
    assert local.returncode == 0, local_out[-3000:]
    assert p.returncode == 0, p.stderr[-5000:]

    # every job went through sbatch on the right partition, one job per run and stage
    calls = [line for line in p.stderr.splitlines() if line.startswith("sbatch call:")]
    ids = re.findall(r"has been submitted with SLURM jobid (\d+)", p.stderr)
    assert len(calls) == len(ids) == len(STAGES) * len(RUNS), p.stderr[-3000:]
    assert all(f"-p {part} " in c and "--gpus" not in c and "--gres" not in c for c in calls)
    assert all(" -A " not in c for c in calls)
    for c in calls:  # wall time and memory come from the rules' resources
        assert re.search(r" -t \d+ ", c) and re.search(r" --mem \d+ ", c), c
    states = subprocess.run(["scontrol", "show", "job", ids[-1]], capture_output=True, text=True).stdout
    assert "JobState=COMPLETED" in states or not states.strip()  # (a site may purge it at once)

    for run in RUNS:
        a, b = wd_slurm / "results" / run, wd_local / "results" / run
        for f in TABLES:
            assert (a / f).read_bytes() == (b / f).read_bytes(), f"{run}/{f} differs between SLURM and local"
        assert len((a / "measures.csv").read_text().splitlines()) > 1      # the measures really ran
        # final weights bit-identical (the files' metadata order is not fixed by safetensors)
        last = sorted((a / "checkpoints").glob("step_*.safetensors"))[-1]
        wa, wb = safetensors_content(last), safetensors_content(b / "checkpoints" / last.name)
        assert same_safetensors(wa, wb), f"{run}: final weights differ"
        for log in ("train.log", "metrics.log", "measures.log", "probes.log"):  # the log states the device
            assert re.search(r"device cpu \(requested cpu\)", (a / "logs" / log).read_text()), log
        assert "SLURM job" in (a / "logs" / "train.log").read_text()
        assert "SLURM job" not in (b / "logs" / "train.log").read_text()
        assert json.loads((a / "train.json").read_text())["device"] == "cpu"
    print(f"SLURM run {t_slurm:.0f} s")


def test_prune_window_and_peak_disk_known_answer():
    """Three nano and two micro runs, J = 1: each run waits for the previous of its size; the
    peak is what all runs keep plus the largest run of each size; without J it is everything."""
    from geoanatomy.config import prune_window, resolve
    from geoanatomy.cost import checkpoint_disk_mb, kept_disk_mb, peak_disk_mb
    cfg = resolve({"grid": [{"tasks": ["copy", "mod", "add"], "levels": ["L1"], "sizes": ["nano"]},
                            {"tasks": ["copy", "mod"], "levels": ["L1"], "sizes": ["micro"]}],
                   "keep_checkpoints": "final", "max_unpruned_runs": 1})
    assert prune_window(cfg) == {"mod_L1_nano": "copy_L1_nano", "add_L1_nano": "mod_L1_nano",
                                 "mod_L1_micro": "copy_L1_micro"}
    names = ["copy_L1_nano", "mod_L1_nano", "add_L1_nano", "copy_L1_micro", "mod_L1_micro"]
    kept = sum(kept_disk_mb(cfg, r) for r in names)
    # same checkpoints per run within a size: the largest is any one of them
    big = {s: max(checkpoint_disk_mb(cfg, r) - kept_disk_mb(cfg, r) for r in names if r.endswith(s))
           for s in ("nano", "micro")}
    assert peak_disk_mb(cfg) == kept + big["nano"] + big["micro"]
    assert kept < peak_disk_mb(cfg) < sum(checkpoint_disk_mb(cfg, r) for r in names)
    every = resolve({**cfg, "max_unpruned_runs": None})
    assert prune_window(every) == {} and peak_disk_mb(every) == sum(checkpoint_disk_mb(cfg, r) for r in names)
    with pytest.raises(Exception, match="max_unpruned_runs"):
        resolve({**cfg, "keep_checkpoints": "all"})


def test_docs_cost_table_is_the_scripts_output_and_paper_grid_fits_1_5_tb():
    """docs/slurm.md's cost table is what `geoanatomy report cost config/paper.yaml` prints
    (regenerate it after changing the grid or the cost model); the paper grid's peak checkpoint
    disk stays within 1.5 TB."""
    from geoanatomy.config import load_config
    from geoanatomy.cost import peak_disk_mb
    from geoanatomy.report.cost import cost_table_markdown
    cfg = load_config(str(REPO / "config" / "paper.yaml"))
    assert cost_table_markdown(cfg) in (REPO / "docs" / "slurm.md").read_text()
    assert peak_disk_mb(cfg) <= 1.5e6


@pytest.mark.slow
def test_packed_group_submits_its_jobs_together_with_tables_identical_to_unpacked(tmp_path):
    """gpu_pack_per_gpu 2: the measures jobs of two nano runs (a packed size, PACK_SIZES) go
    to SLURM as one group job (one sbatch, both jobs inside, their memory summed), and write
    measures.csv byte for byte as the ungrouped local run does. On this CPU-only cluster the
    group gets no GPU; on a GPU partition the same group asks for one (gres gpu:1)."""
    _need_plugin()
    why = _slurm_up()
    if why:
        pytest.skip(why)
    part = _partition()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SLURM_JOB_ID", None)
    prof = site_profile(tmp_path / "profile", no_gpus=True, cpu_partition=part, gpu_partition=part, account='""',
                        slurm__status__command="squeue", gpu_pack_per_gpu="2",
                        slurm__init__seconds__before__status__checks="1", latency__wait="5", jobs="4")
    grid = TINY.replace("tasks: [mod]", "tasks: [mod, copy]")
    runs = ["mod_L1_nano", "copy_L1_nano"]
    wd_slurm, wd_local = tmp_path / "slurm_run", tmp_path / "local_run"
    for wd in (wd_slurm, wd_local):
        wd.mkdir()
        (wd / "cfg.yaml").write_text(grid)
    targets = [f"results/{r}/measures.csv" for r in runs]
    common = ["-s", str(REPO / "Snakefile"), "--configfile=cfg.yaml"]
    local = subprocess.Popen(SNAKEMAKE + targets + common + ["--cores", "1", "-q"], cwd=wd_local, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    p = subprocess.run(SNAKEMAKE + targets + common + ["--profile", str(prof), "--verbose"], cwd=wd_slurm, env=env,
                       capture_output=True, text=True, timeout=900)
    local_out, _ = local.communicate(timeout=900)
    assert local.returncode == 0, local_out[-3000:]
    assert p.returncode == 0, p.stderr[-5000:]
    calls = [line for line in p.stderr.splitlines() if line.startswith("sbatch call:")]
    assert len(calls) == 3, "\n".join(calls)             # two trainings, one group of two measures jobs
    group = [c for c in calls if "gpupack_measures" in c]
    assert len(group) == 1, "\n".join(calls)
    mems = [int(m) for m in re.findall(r" --mem (\d+) ", " ".join(calls))]
    one = [int(re.search(r" --mem (\d+) ", c).group(1)) for c in calls if c not in group]
    assert int(re.search(r" --mem (\d+) ", group[0]).group(1)) > max(one) and len(mems) == 3
    assert re.search(r"--cpus-per-task[= ]2\b", group[0]), group[0]       # both jobs' threads
    assert "--gres" not in group[0] and "--gpus" not in group[0]          # no GPU partition here
    assert "gpupack_measures_0" in group[0]
    for run in runs:
        a, b = wd_slurm / "results" / run / "measures.csv", wd_local / "results" / run / "measures.csv"
        assert a.read_bytes() == b.read_bytes(), f"{run}: measures.csv differs between the packed and local runs"
        assert len(a.read_text().splitlines()) > 1


def test_packed_gpu_hours_known_answer():
    """A packed job costs max(GPU time / k, arithmetic): a launch-bound nano measures job a
    quarter of its GPU time at 4 per GPU; a job whose arithmetic exceeds that costs its
    arithmetic; k is bounded by GPU memory; the table's packed total is the sum."""
    from geoanatomy.config import load_config
    from geoanatomy.cost import (GPU_MEM_MB_PER_GPU, cost_table, gpu_mem_mb, jobs_per_gpu, pack_group,
                                 packed_gpu_seconds, work_seconds)
    cfg = load_config(str(REPO / "config" / "paper.yaml"))
    run = "copy_L3_nano"
    wall, compute = work_seconds(cfg, "measures", run, "gpu"), work_seconds(cfg, "measures", run, "gpu_compute")
    assert compute < wall / 4                                          # launch-bound
    assert packed_gpu_seconds(cfg, "measures", run, 4) == pytest.approx(wall / 4)
    assert packed_gpu_seconds(cfg, "measures", run, 1) == pytest.approx(wall)
    assert packed_gpu_seconds(cfg, "measures", run, 10**6) == pytest.approx(compute)    # arithmetic floor
    mem = gpu_mem_mb(cfg, "measures", run)
    assert jobs_per_gpu(cfg, "measures", run, 10**6) == GPU_MEM_MB_PER_GPU // mem
    assert pack_group("measures", "nano", 3) == "gpupack_measures_3" and pack_group("train", "nano") is None
    rows = {r["size"]: r for r in cost_table(cfg)}
    nano = rows["nano"]
    assert nano["gpu_hours_packed"] == pytest.approx(
        sum(packed_gpu_seconds(cfg, "measures", r, 4) for r in
            [n for n in __import__("geoanatomy.config", fromlist=["run_names"]).run_names(cfg) if "_nano" in n]) / 3600)
    assert rows["xlarge"]["gpu_hours_packed"] == pytest.approx(rows["xlarge"]["gpu_hours"])   # not packed


def test_packed_training_gpu_hours_known_answer():
    """A run trained in a pack of k on one GPU costs its steps' GPU time / k (one launch
    sequence per step for the pack), never less than their arithmetic, plus its own
    checkpoints; k = 1 is the run alone; the savings table sums it over the CPU-trained sizes."""
    from geoanatomy.config import load_config
    from geoanatomy.cost import GPU_SIZES, train_pack_gpu_seconds, train_pack_savings, train_parts, work_seconds
    cfg = load_config(str(REPO / "config" / "paper.yaml"))
    run = "copy_L3_nano"
    steps, ckpts = train_parts(cfg, run, "gpu")
    compute = train_parts(cfg, run, "gpu_compute")[0]
    assert steps + ckpts == pytest.approx(work_seconds(cfg, "train", run, "gpu"))
    assert train_pack_gpu_seconds(cfg, run, 1) == pytest.approx(steps + ckpts)
    assert compute < steps / 4                                           # launch-bound at nano, k = 4
    assert train_pack_gpu_seconds(cfg, run, 4) == pytest.approx(steps / 4 + ckpts)
    assert train_pack_gpu_seconds(cfg, run, 8) == pytest.approx(compute + ckpts)        # compute-bound at 8
    assert train_pack_gpu_seconds(cfg, run, 10**6) == pytest.approx(compute + ckpts)   # arithmetic floor
    rows = train_pack_savings(cfg, 8)
    assert {r["size"] for r in rows} == {"nano", "micro", "small"} and not {r["size"] for r in rows} & set(
        GPU_SIZES["train"])
    nano = next(r for r in rows if r["size"] == "nano")
    names = [n for n in __import__("geoanatomy.config", fromlist=["run_names"]).run_names(cfg) if "_nano" in n]
    assert nano["runs"] == len(names)
    assert nano["gpu_hours_packed"] == pytest.approx(sum(train_pack_gpu_seconds(cfg, r, 8) for r in names) / 3600)
    assert nano["gpu_hours_packed"] < nano["gpu_hours_alone"]


def test_pack_slots_keep_waiting_runs_apart():
    """With max_unpruned_runs J, run i of a size waits for run i - J: batches of J in grid
    order, numbered across sizes; without a window every run is in batch 0."""
    from geoanatomy.config import pack_slots, prune_window, resolve
    user = {"grid": [{"tasks": ["copy", "rev", "mod", "par", "cmp"], "levels": ["L1"], "sizes": ["nano", "micro"]}],
            "keep_checkpoints": "final", "max_unpruned_runs": 2}
    cfg = resolve(user)
    slots, wait = pack_slots(cfg), prune_window(cfg)
    for run, before in wait.items():
        assert slots[run] != slots[before]                     # a run never shares a batch with one it waits for
    assert sorted(set(slots.values())) == list(range(6))        # 3 batches (2, 2, 1 runs) per size
    same = {}
    for r, k in slots.items():
        same.setdefault(k, []).append(r)
    assert all(not any(wait.get(a) == b for a in g for b in g) for g in same.values())
    assert set(pack_slots(resolve({k: v for k, v in user.items() if k != "max_unpruned_runs"})).values()) == {0}
