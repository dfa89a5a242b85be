"""End to end through Snakemake on a tiny config in a temporary folder:
single target, full run, no-op rerun, dry run, bad config rejected before any job."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

TINY = """
results_dir: results
grid:
  - {tasks: [copy, mod], levels: [L1], sizes: [nano]}
train:
  steps: 30
  warmup: 5
  checkpoints: {n_log: 5, log_end: 0.2, n_uniform: 4}
eval: {n_samples: 32}
"""


def smk(workdir: Path, *args, check=True):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(workdir), *args]
    p = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    if check and p.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}")
    return p


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "tiny.yaml").write_text(TINY)
    return tmp_path


@pytest.fixture(scope="module")
def built_workdir(tmp_path_factory):
    """A work folder where the whole tiny grid has been built once (read-only for tests)."""
    d = tmp_path_factory.mktemp("wf_built")
    (d / "tiny.yaml").write_text(TINY)
    smk(d, "--cores", "2", "--configfile", "tiny.yaml")
    return d


def test_dry_run_lists_jobs(workdir):
    p = smk(workdir, "-n", "--configfile", "tiny.yaml")
    out = p.stdout + p.stderr
    for rule, n in (("train", 2), ("metrics", 2), ("events", 2)):
        assert any(line.split()[:2] == [rule, str(n)] for line in out.splitlines()), out


@pytest.mark.slow
def test_single_target_builds_only_that_run(workdir):
    smk(workdir, "results/mod_L1_nano/precursor.json", "--cores", "2", "--configfile", "tiny.yaml")
    assert (workdir / "results/mod_L1_nano/precursor.json").exists()
    assert not (workdir / "results/copy_L1_nano").exists()


@pytest.mark.slow
def test_full_run_then_noop(built_workdir):
    workdir = built_workdir
    for run in ("copy_L1_nano", "mod_L1_nano"):
        d = workdir / "results" / run
        pre = json.loads((d / "precursor.json").read_text())
        for key in ("run", "task", "level", "size", "n_params", "steps", "acquired", "acquisition_step",
                    "logprob_emergence_step", "difficulty"):
            assert key in pre, key
        rm = pre["measures"]["rankme"]
        for key in ("layer", "init", "floor", "floor_step", "collapse_step", "recovery_step", "precursor",
                    "gap_steps"):
            assert key in rm, key
        assert pre["run"] == run and pre["n_params"] == 409_088
        assert (d / "trajectory.png").stat().st_size > 10_000
        assert "[train]" in (d / "logs/train.log").read_text()
        header = (d / "metrics.csv").read_text().splitlines()[0].split(",")
        assert header[:5] == ["run", "step", "measure", "layer", "layer_index"]
    p = smk(workdir, "--cores", "2", "--configfile", "tiny.yaml")
    assert "Nothing to be done" in p.stdout + p.stderr


def test_bad_config_rejected_naming_the_field(workdir):
    (workdir / "bad.yaml").write_text(TINY.replace("[copy, mod]", "[copy, divide]"))
    p = smk(workdir, "-n", "--configfile", "bad.yaml", check=False)
    out = p.stdout + p.stderr
    assert p.returncode != 0
    assert "grid.0.tasks.1" in out and "'divide'" in out and "copy" in out
    (workdir / "bad2.yaml").write_text(TINY.replace("warmup: 5", "warmpu: 5"))
    p = smk(workdir, "-n", "--configfile", "bad2.yaml", check=False)
    assert p.returncode != 0 and "warmpu" in p.stdout + p.stderr


def _job_counts(out: str) -> dict:
    counts, on = {}, False
    for line in out.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            on = True
            continue
        if on and len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
        elif on and parts and parts[0] == "total":
            break
    return counts


@pytest.mark.slow
def test_settings_changes_invalidate_exactly_the_affected_jobs(built_workdir):
    workdir = built_workdir
    assert (workdir / "results/copy_L1_nano/precursor.json").exists()
    (workdir / "events.yaml").write_text(TINY + "events: {recovery_rise: 0.5}\n")
    c = _job_counts((lambda p: p.stdout + p.stderr)(smk(workdir, "-n", "--configfile", "events.yaml")))
    # (measures reruns too: the checkpoints it measures are picked around detected events)
    assert c.get("events") == 2 and not {"train", "metrics", "probes"} & set(c), c
    (workdir / "probes.yaml").write_text(TINY + "probes: {C: 0.5}\n")
    c = _job_counts((lambda p: p.stdout + p.stderr)(smk(workdir, "-n", "--configfile", "probes.yaml")))
    assert c.get("probes") == 2 and not {"train", "metrics", "measures"} & set(c), c
    (workdir / "lr.yaml").write_text(TINY.replace("warmup: 5", "warmup: 5\n  lr: 0.002"))
    c = _job_counts((lambda p: p.stdout + p.stderr)(smk(workdir, "-n", "--configfile", "lr.yaml")))
    assert c.get("train") == 2 and c.get("metrics") == 2 and c.get("events") == 2, c
    (workdir / "eval.yaml").write_text(TINY.replace("n_samples: 32", "n_samples: 48"))
    c = _job_counts((lambda p: p.stdout + p.stderr)(smk(workdir, "-n", "--configfile", "eval.yaml")))
    assert "train" not in c and c.get("metrics") == 2, c
