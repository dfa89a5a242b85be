"""End to end through Snakemake on a tiny config in a temporary folder:
single target, full run, no-op rerun, dry run, bad config rejected before any job; the
rule files' lint, formatting and shell quoting; the command line (--help, --version,
clean-run refusing a folder that is not a run)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, smk

TINY = """
results_dir: results
grid:
  - {tasks: [copy, mod], levels: [L1], sizes: [nano]}
train:
  steps: 30
  warmup: 5
  checkpoints: {n_log: 5, log_end: 0.2, n_uniform: 4}
eval: {n_samples: 32}
measures:              # cheap settings: these tests are about the workflow, not the estimators
  n_points: 3
  grad_rank: {n_samples: 8}
  hessian: {batch_size: 8, max_iter: 10}
  llc: {chains: 1, draws: 4, burnin: 1, batch_size: 8, n_data: 32}
probes: {n_samples: 32}
summary: {power_populations: 10, power_multiples: [1]}   # the power report's size is not under test here
"""


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


@pytest.mark.slow
def test_dry_run_lists_jobs(workdir):
    p = smk(workdir, "-n", "--configfile", "tiny.yaml")
    out = p.stdout + p.stderr
    for rule, n in (("train", 2), ("metrics", 2), ("events", 2)):
        assert any(line.split()[:2] == [rule, str(n)] for line in out.splitlines()), out


@pytest.mark.slow
def test_keep_checkpoints_final_adds_one_prune_job_per_run(workdir):
    c = _job_counts((lambda p: p.stdout + p.stderr)(smk(workdir, "-n", "--configfile", "tiny.yaml")))
    assert "prune" not in c, c
    (workdir / "prune.yaml").write_text(TINY + "keep_checkpoints: final\n")
    c = _job_counts((lambda p: p.stdout + p.stderr)(smk(workdir, "-n", "--configfile", "prune.yaml")))
    assert c.get("prune") == 2 and c.get("train") == 2, c


def _job_events(out: str) -> list[tuple[str, str, str]]:
    """[("start" | "finish", rule, run)] in the order Snakemake logged them."""
    events, rule, jobid, job_run, started = [], None, None, {}, {}
    for line in out.splitlines():
        s = line.strip()
        if m := re.match(r"^(?:local)?rule (\w+):$", s):
            rule, jobid = m[1], None
        elif m := re.match(r"^jobid: (\d+)$", s):
            jobid = m[1]
        elif (m := re.match(r"^wildcards: run=(\S+)$", s)) and jobid is not None:
            job_run[jobid] = m[1]
            started[jobid] = rule
            events.append(("start", rule, m[1]))
        elif m := re.match(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$", s):
            if m[1] in job_run:
                events.append(("finish", m[2], job_run[m[1]]))
    return events


@pytest.mark.slow
def test_max_unpruned_runs_bounds_runs_holding_checkpoints(workdir):
    """keep_checkpoints final, max_unpruned_runs 1: each run trains only after the previous
    run of its size was pruned, and every run ends with one checkpoint."""
    (workdir / "pw.yaml").write_text(TINY.replace("[copy, mod]", "[copy, mod, add]")
                                     + "keep_checkpoints: final\nmax_unpruned_runs: 1\n")
    runs = ["copy_L1_nano", "mod_L1_nano", "add_L1_nano"]
    p = smk(workdir, "--cores", "2", "--configfile=pw.yaml", *[f"results/{r}/pruned.json" for r in runs])
    ev = _job_events(p.stdout + p.stderr)
    for before, after in zip(runs, runs[1:]):
        assert ev.index(("finish", "prune", before)) < ev.index(("start", "train", after)), ev
    for r in runs:
        assert len(list((workdir / "results" / r / "checkpoints").glob("step_*.safetensors"))) == 1
        assert json.loads((workdir / "results" / r / "pruned.json").read_text())["complete"]
    holding = 0                                  # runs trained and not yet pruned, at every event
    for kind, rule, _ in ev:
        holding += (kind, rule) == ("start", "train") and 1 or 0
        holding -= (kind, rule) == ("finish", "prune") and 1 or 0
        assert holding <= 1, ev


@pytest.mark.slow
def test_single_target_builds_only_that_run(workdir):
    smk(workdir, "results/mod_L1_nano/precursor.json", "--cores", "2", "--configfile", "tiny.yaml")
    assert (workdir / "results/mod_L1_nano/precursor.json").exists()
    assert not (workdir / "results/copy_L1_nano").exists()


@pytest.mark.slow
def test_a_packed_grid_trains_its_runs_in_one_job_each_as_if_alone(workdir):
    """pack: {train: 2}: one train_pack job trains both runs (each into its own folder, float
    path recorded), the runs' own train jobs only resume at the last step and write train.json,
    the rest of the workflow reads them as before, and a second invocation has nothing to do."""
    (workdir / "pack.yaml").write_text(TINY + "pack: {train: 2}\n")
    dry = smk(workdir, "-n", "--configfile", "pack.yaml")
    assert _job_counts(dry.stdout + dry.stderr).get("train_pack") == 1
    smk(workdir, "--cores", "2", "--configfile", "pack.yaml")
    rec = json.loads((workdir / "results/packs/nano_p00.json").read_text())
    assert rec["runs"] == ["copy_L1_nano", "mod_L1_nano"] and rec["float_path"] == ["packed-vmap"]
    for run in rec["runs"]:
        d = workdir / "results" / run
        tr = json.loads((d / "train.json").read_text())
        assert tr["float_path"] == ["packed-vmap"] and tr["resumed_from"] == tr["steps"] == 30
        assert tr["machine"]["float_path"] == ["packed-vmap"]
        assert "trained in a pack" in (d / "logs/train.log").read_text()
        assert (d / "logs/train_pack.log").read_text().count(f"[train] {run} step") == len(tr["checkpoint_steps"])
        assert json.loads((d / "precursor.json").read_text())["run"] == run
    p = smk(workdir, "--cores", "2", "--configfile", "pack.yaml")
    assert "Nothing to be done" in p.stdout + p.stderr


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


@pytest.mark.slow
def test_the_report_opens_with_the_headline_figure_and_the_counts_and_carries_each_run(built_workdir, tmp_path):
    """`snakemake --report`: the landing page shows headline.png (embedded) and verdict.csv's
    counts as the file says them; each run's trajectory.png is in the report (category Runs)."""
    import base64
    import csv
    from collections import Counter
    out = tmp_path / "report.html"
    p = smk(built_workdir, "--report", str(out), "--configfile", "tiny.yaml", check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    page = out.read_text()
    png = base64.b64encode((built_workdir / "results" / "summary" / "headline.png").read_bytes()).decode()
    landing = page[page.index("The answer first</strong>"):]
    assert landing.index(png[:76]) < landing.index("Decoder-only GPT-2-style")     # on the landing page
    with (built_workdir / "results" / "summary" / "verdict.csv").open(newline="") as f:
        c = Counter(r["verdict"] for r in csv.DictReader(f))
    assert f"{c.get('reproduced', 0)} reproduced, {c.get('not reproduced', 0)} not reproduced" in page
    assert "4 Runs" in page and "copy_L1_nano" in page and "mod_L1_nano" in page


@pytest.mark.slow
def test_every_table_the_workflow_writes_is_plain_csv_that_pandas_and_pyarrow_read(built_workdir):
    """Every CSV under results/ (per-run tables, summary tables, the training logs) is read by
    pd.read_csv and pyarrow.csv.read_csv without options, with the row count its manifest
    records (the training log: one row per checkpoint of train.json)."""
    import pandas as pd
    pacsv = pytest.importorskip("pyarrow.csv")
    from geoanatomy.manifest import manifest_path
    tables = sorted((built_workdir / "results").rglob("*.csv"))
    names = {p.name for p in tables}
    assert {"metrics.csv", "measures.csv", "probes.csv", "train_log.csv", "transitions.csv", "verdict.csv"} <= names
    for path in tables:
        df = pd.read_csv(path)
        at = pacsv.read_csv(path)
        assert at.num_rows == len(df), path
        if path.name == "train_log.csv":
            rec = json.loads((path.parent.parent / "train.json").read_text())
            assert len(df) == len(rec["checkpoint_steps"]), path
            continue
        meta = json.loads(manifest_path(path).read_text())
        assert meta["rows"] == len(df) and meta["url"] == path.name, path
        assert [c["name"] for c in meta["tableSchema"]["columns"]] == list(df.columns), path
        assert not any(str(c).startswith("#") for c in df.columns), path


@pytest.mark.slow
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
    (workdir / "probes.yaml").write_text(TINY.replace("probes: {n_samples: 32}", "probes: {n_samples: 32, C: 0.5}"))
    c = _job_counts((lambda p: p.stdout + p.stderr)(smk(workdir, "-n", "--configfile", "probes.yaml")))
    assert c.get("probes") == 2 and not {"train", "metrics", "measures"} & set(c), c
    (workdir / "lr.yaml").write_text(TINY.replace("warmup: 5", "warmup: 5\n  lr: 0.002"))
    c = _job_counts((lambda p: p.stdout + p.stderr)(smk(workdir, "-n", "--configfile", "lr.yaml")))
    assert c.get("train") == 2 and c.get("metrics") == 2 and c.get("events") == 2, c
    (workdir / "eval.yaml").write_text(TINY.replace("n_samples: 32", "n_samples: 48"))
    c = _job_counts((lambda p: p.stdout + p.stderr)(smk(workdir, "-n", "--configfile", "eval.yaml")))
    assert "train" not in c and c.get("metrics") == 2, c


# ------------------------------------------------------------------ lint, quoting (fast)
@pytest.mark.slow
def test_snakemake_lint_is_clean():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_rule_files_are_snakefmt_clean():
    pytest.importorskip("snakefmt", reason="snakefmt not installed (pip install -e '.[test]')")
    p = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "workflow/"], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


PREQUOTED_PARAMS = {"spec", "settings"}   # JSON params the rule files pass through shlex.quote


@pytest.mark.slow
def test_shell_commands_quote_every_path(workdir):
    """Every {input}, {output}, {log} and path {params} field in every rule's shell command
    carries Snakemake's :q (the config keeps paths shell-safe; this is the second line)."""
    (workdir / "py.yaml").write_text(
        TINY + "pythia: {enabled: true, models: [EleutherAI/pythia-160m], revisions: {stride: 20}}\n")
    (workdir / "dump.smk").write_text(
        f"include: {str(REPO / 'Snakefile')!r}\n"
        "import json as _j, sys as _s\n"
        "print('SHELLS=' + _j.dumps({r.name: r.shellcmd for r in workflow.rules}), file=_s.stderr)\n")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "snakemake", "-s", "dump.smk", "-n", "--configfile", "py.yaml"],
                       cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    line = [x for x in (p.stdout + p.stderr).splitlines() if x.startswith("SHELLS=")]
    assert p.returncode == 0 and line, p.stdout + p.stderr
    shells = {k: v for k, v in json.loads(line[0][len("SHELLS="):]).items() if v}
    assert {"train", "metrics", "measures", "probes", "events", "pythia_extract", "pythia_events",
            "pythia_scale", "summary_tables", "summary_scale", "summary_prediction", "summary_figures",
            "summary_html"} <= set(shells), sorted(shells)
    for rule, cmd in shells.items():
        assert "{log:q}" in cmd, (rule, cmd)
        for field in re.findall(r"\{([^{}]+)\}", cmd):
            name, _, spec = field.partition(":")
            kind, _, key = name.partition(".")
            if kind in ("input", "output", "log") or (kind == "params" and key not in PREQUOTED_PARAMS):
                assert spec == "q", f"rule {rule}: {{{field}}} is not quoted ({{{name}:q}}): {cmd}"


@pytest.mark.slow
def test_sdm_conda_refused_with_the_way_that_works(workdir):
    """--sdm conda cannot build environment.yml (its `pip install -e .` runs in Snakemake's
    copy under .snakemake/conda/): refused at parse time, naming what to do instead."""
    for flags in (["--sdm", "conda"], ["--use-conda"]):
        p = smk(workdir, "-n", *flags, "--configfile", "tiny.yaml", check=False)
        out = p.stdout + p.stderr
        assert p.returncode != 0, out
        assert "conda env create -f environment.yml" in out and "docs/running.md" in out, out
        assert not (workdir / ".snakemake" / "conda").exists() or not any((workdir / ".snakemake" / "conda").iterdir())


# ------------------------------------------------------------------------- CLI (fast)
def _cli(capsys, *argv):
    from geoanatomy.cli import main
    try:
        rc = main(list(argv))
    except SystemExit as e:  # argparse: --help, --version, usage errors
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_help_lists_every_command(capsys):
    from geoanatomy.cli import DELEGATED, STAGES
    rc, out, _ = _cli(capsys, "--help")
    assert rc == 0
    listed = {line.split()[0] for line in out.split("COMMAND", 2)[-1].splitlines()
              if line.startswith("    ") and not line.startswith("     ")}
    want = {"validate", "runs", "clean-run", *STAGES, *DELEGATED}
    assert {"summarize", "pythia"} <= want
    assert want <= listed, f"missing from geoanatomy --help: {sorted(want - listed)}\n{out}"
    # the delegated commands keep their own parsers and help
    rc, out, _ = _cli(capsys, "summarize", "--help")
    assert rc == 0 and out.startswith("usage: geoanatomy summarize")
    rc, out, _ = _cli(capsys, "pythia", "--help")
    assert rc == 0 and out.startswith("usage: geoanatomy pythia")


def test_cli_version(capsys):
    import geoanatomy
    rc, out, err = _cli(capsys, "--version")
    assert rc == 0 and (out + err).strip() == f"geoanatomy {geoanatomy.__version__}"
    p = subprocess.run([sys.executable, "-m", "geoanatomy.cli", "--version"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == f"geoanatomy {geoanatomy.__version__}"


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name,files,why", [
    ("results", ["metrics.csv", "train.json", "precursor.json"], "is not TASK_LEVEL_SIZE"),  # the results folder
    ("src", ["train.json", "checkpoints/step_000001.safetensors"], "is not TASK_LEVEL_SIZE"),
    ("mod_L3_nano_old", ["train.json"], "is not TASK_LEVEL_SIZE"),
    ("divide_L1_nano", ["train.json"], "is not TASK_LEVEL_SIZE"),
    ("mod_L3_nano", ["metrics.csv", "precursor.json", "notes.txt"], "neither train.json nor checkpoints"),
    ("mod_L3_nano", ["metrics.csv", "checkpoints/readme.txt"], "neither train.json nor checkpoints"),
])
def test_clean_run_refuses_a_folder_that_is_not_a_run(tmp_path, capsys, name, files, why):
    d = tmp_path / name
    for f in files:
        (d / f).parent.mkdir(parents=True, exist_ok=True)
        (d / f).write_text(f"keep {f}")
    before = _tree(tmp_path)
    for extra in ([], ["--checkpoints"]):
        rc, out, err = _cli(capsys, "clean-run", str(d), *extra)
        assert rc == 2 and "cleaned" not in out
        assert str(d) in err and why in err, err
        assert "TASK_LEVEL_SIZE" in err and "train.json" in err and "nothing deleted" in err, err
        assert _tree(tmp_path) == before, "clean-run deleted files of a folder that is not a run"


def test_clean_run_refuses_missing_folder_and_file(tmp_path, capsys):
    rc, _, err = _cli(capsys, "clean-run", str(tmp_path / "mod_L3_nano"))
    assert rc == 2 and "no such folder" in err and str(tmp_path / "mod_L3_nano") in err
    f = tmp_path / "mod_L1_nano"
    f.write_text("a file")
    rc, _, err = _cli(capsys, "clean-run", str(f), "--checkpoints")
    assert rc == 2 and "not a folder" in err and f.read_text() == "a file"


def test_clean_run_accepts_a_run_with_only_checkpoints(tmp_path, capsys):
    d = tmp_path / "mod_L3_nano"
    (d / "checkpoints").mkdir(parents=True)
    (d / "checkpoints" / "step_000010.safetensors").write_text("w")
    (d / "metrics.csv").write_text("stale")
    rc, out, _ = _cli(capsys, "clean-run", str(d))
    assert rc == 0 and "cleaned" in out
    assert not (d / "metrics.csv").exists() and (d / "checkpoints" / "step_000010.safetensors").exists()
    # a checkpoints folder that is a link: --checkpoints removes the link, never what it points to
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "step_000001.safetensors").write_text("w")
    (d / "train.json").write_text("{}")
    (d / "checkpoints" / "step_000010.safetensors").unlink()
    (d / "checkpoints").rmdir()
    (d / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    rc, _, _ = _cli(capsys, "clean-run", str(d), "--checkpoints")
    assert rc == 0 and not (d / "checkpoints").exists() and (elsewhere / "step_000001.safetensors").exists()


def test_the_report_refuses_a_summary_table_edited_after_it_was_written(workdir):
    """`snakemake --report` bundles the tables on disk: a hand-edited verdict.csv (its manifest
    kept) is refused by name before anything is embedded (it used to be embedded as it was)."""
    import pandas as pd

    from geoanatomy.analysis.tables import write_csv
    summary = workdir / "results" / "summary"
    summary.mkdir(parents=True)
    write_csv(pd.DataFrame({"claim": ["a"], "verdict": ["inconclusive"]}), summary / "verdict.csv", "t", [])
    (summary / "verdict.csv").write_text("claim,verdict\na,reproduced\n")
    p = smk(workdir, "--report", "report.html", "--configfile", "tiny.yaml", check=False)
    assert p.returncode != 0 and not (workdir / "report.html").exists()
    out = p.stdout + p.stderr
    assert "not making the report" in out and "verdict.csv is incomplete or damaged" in out
