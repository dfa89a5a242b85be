"""Difficulty classes fixed before the analysed outcome: the class file (torch-free).

The study's claim is that geometry precedes behaviour on *hard* runs and not on easy ones.
If a run's class were read off its own acquisition step, the class would be selected on the
very outcome the precursor is tested against (a late acquisition makes any early event look
like a precursor). So classes come from **calibration runs**: the same task x level x size
cell trained with seeds disjoint from the analysed seeds, before the analysed runs are
looked at. The class is per size (difficulty relative to capacity).

The class file is a plain CSV, one row per cell (``CLASS_COLUMNS``)::

    task,level,size,class,calibration_seeds,calibration_acquisition_steps,easy_max_step,steps,rule

``calibration_seeds`` and ``calibration_acquisition_steps`` are ``;``-separated, in the same
order, ``never`` for a calibration run that did not acquire within ``steps``. The rule
(``RULE``, the same text in every row)::

    easy   every calibration seed acquired at a step <= easy_max_step
    hard   otherwise: some calibration seed acquired later, or not within the budget

The config names the file and its sha256 (``events.classes_file``, ``events.classes_sha256``;
a path relative to the folder the workflow runs in); a file whose hash
differs is refused by name before any job runs, and every verdict records the hash, so a
class cannot be edited after the outcome is seen without it showing. Build the file with
``geoanatomy classes build`` from the calibration runs' precursor.json files.
"""
from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

from .errors import ConfigError

CLASS_COLUMNS = ("task", "level", "size", "class", "calibration_seeds", "calibration_acquisition_steps",
                 "easy_max_step", "steps", "rule")
CLASSES = ("easy", "hard")
RULE = "easy if every calibration seed acquired by easy_max_step, hard otherwise"


class ClassFileError(ConfigError):
    """A class file that is unreadable, malformed, not the one the config names, or
    overlapping the analysed seeds; the message names the file, row and field."""


def class_from_calibration(acquisition_steps, easy_max_step: int) -> str:
    """The rule of the module doc on one cell's calibration acquisition steps (None = never)."""
    steps = list(acquisition_steps)
    if not steps:
        raise ValueError("a cell needs at least one calibration run")
    return "easy" if all(t is not None and t <= easy_max_step for t in steps) else "hard"


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_rows(calibration: list[dict], easy_max_step: int) -> list[dict]:
    """Class rows from calibration runs' facts (dicts with task, level, size, seed, steps,
    acquisition_step, control, diverged, as precursor.json has them), one per cell, sorted.
    Controls are left out; a diverged calibration run counts as not acquired."""
    cells: dict[tuple, list[dict]] = {}
    for p in calibration:
        if p.get("control"):
            continue
        cells.setdefault((p["task"], p["level"], p["size"]), []).append(p)
    rows = []
    for (task, level, size), runs in sorted(cells.items()):
        runs = sorted(runs, key=lambda r: int(r["seed"]))
        budgets = {int(r["steps"]) for r in runs}
        if len(budgets) != 1:
            raise ValueError(f"calibration runs of {task} {level} {size} have different step budgets {sorted(budgets)}")
        acq = [None if r.get("diverged") else r.get("acquisition_step") for r in runs]
        rows.append({"task": task, "level": level, "size": size,
                     "class": class_from_calibration(acq, easy_max_step),
                     "calibration_seeds": ";".join(str(int(r["seed"])) for r in runs),
                     "calibration_acquisition_steps": ";".join("never" if t is None else str(int(t)) for t in acq),
                     "easy_max_step": int(easy_max_step), "steps": budgets.pop(), "rule": RULE})
    return rows


def render(rows: list[dict]) -> str:
    """The class file's text (plain CSV, ``\\n`` line ends, header first)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CLASS_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r[k] for k in CLASS_COLUMNS})
    return buf.getvalue()


def _int(text: str, path, line: int, field: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise ClassFileError(f"class file {path}, line {line}: {field} {text!r} is not an integer") from None
    if v < 0:
        raise ClassFileError(f"class file {path}, line {line}: {field} {v} is negative")
    return v


def read_class_file(path: str | Path, sha256: str | None = None) -> dict[tuple[str, str, str], dict]:
    """{(task, level, size): row} of a class file, parsed strictly (module doc). With
    ``sha256`` the file's hash must equal it."""
    path = Path(path)
    if not path.is_file():
        raise ClassFileError(f"class file {path} does not exist (events.classes_file); build it with "
                             f"`geoanatomy classes build`")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256:
        raise ClassFileError(f"class file {path} has sha256 {digest}, but the config says {sha256} "
                             f"(events.classes_sha256): the classes changed after they were fixed; restore the "
                             f"file or, if the change is intended, write its new hash into the config")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ClassFileError(f"class file {path} is not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != CLASS_COLUMNS:
        raise ClassFileError(f"class file {path}: columns {reader.fieldnames} must be {list(CLASS_COLUMNS)}")
    out: dict[tuple[str, str, str], dict] = {}
    for i, r in enumerate(reader, start=2):
        if None in r or any(v is None for v in r.values()):
            raise ClassFileError(f"class file {path}, line {i}: wrong number of fields")
        key = (r["task"], r["level"], r["size"])
        if key in out:
            raise ClassFileError(f"class file {path}, line {i}: cell {' '.join(key)} appears twice")
        if r["class"] not in CLASSES:
            raise ClassFileError(f"class file {path}, line {i}: class {r['class']!r} must be one of {list(CLASSES)}")
        seeds = [_int(s, path, i, "calibration_seeds") for s in r["calibration_seeds"].split(";")]
        acq = [None if s == "never" else _int(s, path, i, "calibration_acquisition_steps")
               for s in r["calibration_acquisition_steps"].split(";")]
        if len(acq) != len(seeds) or len(set(seeds)) != len(seeds):
            raise ClassFileError(f"class file {path}, line {i}: calibration_seeds {r['calibration_seeds']!r} and "
                                 f"calibration_acquisition_steps {r['calibration_acquisition_steps']!r} must "
                                 f"pair distinct seeds with steps")
        easy_max, steps = _int(r["easy_max_step"], path, i, "easy_max_step"), _int(r["steps"], path, i, "steps")
        if r["rule"] != RULE:
            raise ClassFileError(f"class file {path}, line {i}: rule {r['rule']!r} is not this version's rule "
                                 f"{RULE!r}; rebuild the file with `geoanatomy classes build`")
        if class_from_calibration(acq, easy_max) != r["class"]:
            raise ClassFileError(f"class file {path}, line {i}: class {r['class']!r} does not follow from its "
                                 f"calibration steps {r['calibration_acquisition_steps']!r} by the rule {RULE!r}")
        if any(t is not None and t > steps for t in acq):
            raise ClassFileError(f"class file {path}, line {i}: an acquisition step exceeds steps {steps}")
        out[key] = {"task": key[0], "level": key[1], "size": key[2], "class": r["class"], "calibration_seeds": seeds,
                    "calibration_acquisition_steps": acq, "easy_max_step": easy_max, "steps": steps}
    return out


def check_against_grid(classes: dict, runs: list[dict], path: str | Path) -> None:
    """Every analysed (non-control) run's cell has a class, its seed is not a calibration
    seed of that cell, and its step budget is the calibration's. ``runs``: dicts with task,
    level, size, seed, steps, control, name."""
    for r in runs:
        if r.get("control"):
            continue
        key = (r["task"], r["level"], r["size"])
        row = classes.get(key)
        if row is None:
            raise ClassFileError(f"class file {path} has no class for run {r['name']} (cell {' '.join(key)}); "
                                 f"calibrate that cell and rebuild the file")
        if int(r["seed"]) in row["calibration_seeds"]:
            raise ClassFileError(f"run {r['name']} uses seed {r['seed']}, a calibration seed of cell {' '.join(key)} "
                                 f"in class file {path}: analysed seeds must be disjoint from calibration seeds")
        if int(r["steps"]) != row["steps"]:
            raise ClassFileError(f"run {r['name']} trains {r['steps']} steps, but its class in {path} was "
                                 f"calibrated at {row['steps']} steps")
