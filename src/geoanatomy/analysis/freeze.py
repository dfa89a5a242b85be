"""Rules frozen before a confirmation grid: the fingerprint of every rule that decides a word.

``geoanatomy freeze --config config/study.yaml --out config/study_frozen.json`` writes, with the
date and the commit, the sha256 of:

* every claim's definition (``analysis.claims``: its fields - statement, test, null, inputs,
  design, effect of interest and its reason, figure - and the source of its rows function);
* the verdict's rule (``analysis.verdict.word`` and the gates: their source);
* the precursor benchmark's rules (its detector settings, event kinds, false-alarm target, and
  every signal's curve and direction in the registry);
* the ``summary:`` and ``events:`` settings of the config (the classes file by its sha256);
* ``code``: every module a word depends on, one sha256 each: the static import closure
  (module-level imports, within the package) of the verdict, the claims, the power simulation
  (its nulls gate every word) and the benchmark (``WORD_ROOTS``), each module hashed without
  its docstrings and comments (``code_hash``), so a comment or a docstring changes nothing and
  any change of code does (a bound's variance in a helper, the design covariates, an emptied null).

A summary whose config names the file (``summary.frozen_rules``) compares the rules it runs
with it before any work (``check``) and refuses on a difference, naming what differs, unless
``summary.allow_unfrozen`` is true: then every verdict row says so in its ``frozen`` column.
The helpers the rows call are covered by ``code`` (they were not before: an edit of the bound's
variance moved 3 words with ``freeze --check`` passing).

A change of code that moves or renames but decides no word differently (a refactoring of a
rows function) changes its source and so its sha256. ``geoanatomy freeze ... --code-only
"why"`` then writes the new fingerprints into the same file (``refrozen``) and keeps the
freeze's date and commit, the moment the rules were fixed; it appends what changed, when, at
which commit and why to ``code_changes``. It refuses a change of the settings (those are
rules, not code). That no number moved is shown, not claimed: before the file is written the
committed data snapshots of the study and of its confirmation are summarised again with the
re-fingerprinted rules and must keep every word, n and p-value (``report.recheck.
refreeze_shown``; tests/test_docs_data.py checks the same afterwards). ``geoanatomy freeze``
onto an existing file is refused unless ``--replace`` (the old freeze kept in
``previous_freezes``).
"""
from __future__ import annotations

import ast
import datetime as _dt
import hashlib
import inspect
import io
import json
import subprocess
import tokenize
from pathlib import Path

FROZEN_KEYS = ("claims", "verdict_rule", "benchmark", "summary_settings", "events_settings", "code")
# the modules whose import closure decides the words (``code_fingerprints``)
WORD_ROOTS = ("geoanatomy.analysis.verdict", "geoanatomy.analysis.claims", "geoanatomy.analysis.power",
              "geoanatomy.analysis.benchmark")
_PACKAGE = Path(__file__).resolve().parents[1]          # src/geoanatomy


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _src(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return repr(fn)


def _module_file(name: str) -> Path | None:
    rel = _PACKAGE.joinpath(*name.split(".")[1:])
    for f in (rel / "__init__.py", rel.with_suffix(".py")):
        if f.is_file():
            return f
    return None


def _imports(name: str, tree: ast.Module, is_package: bool) -> set[str]:
    """The package's modules a module imports at module level (``from .x import y``: module
    x.y when it is one, else x)."""
    pkg = name if is_package else name.rsplit(".", 1)[0]
    out = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
            if mod.split(".")[0] == "geoanatomy":
                subs = [f"{mod}.{a.name}" for a in node.names if _module_file(f"{mod}.{a.name}")]
                out.update(subs or [mod])
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "geoanatomy")
    return out


def code_hash(source: str) -> str:
    """sha256 of a module's code: its source with every docstring and comment blanked out and
    blank lines and trailing spaces dropped, so only a change of what runs changes it. Text,
    not the syntax tree: ``ast.dump`` differs between Python versions, the source does not."""
    lines = source.splitlines()

    def blank(start: tuple[int, int], end: tuple[int, int]) -> None:
        (r0, c0), (r1, c1) = start, end
        for r in range(r0, r1 + 1):
            a, b = (c0 if r == r0 else 0), (c1 if r == r1 else len(lines[r - 1]))
            lines[r - 1] = lines[r - 1][:a] + " " * (b - a) + lines[r - 1][b:]
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            d = body[0]
            blank((d.lineno, d.col_offset), (d.end_lineno, d.end_col_offset))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            blank(tok.start, tok.end)
    kept = [ln.rstrip() for ln in lines if ln.strip()]
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()


def code_fingerprints(roots=WORD_ROOTS) -> dict[str, str]:
    """{module: code_hash} over the static import closure of ``roots`` within the package."""
    seen: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        f = _module_file(name)
        if name in seen or f is None:
            continue
        src = f.read_text()
        seen[name] = code_hash(src)
        todo += sorted(_imports(name, ast.parse(src), f.name == "__init__.py"))
    return dict(sorted(seen.items()))


def fingerprints(cfg: dict) -> dict:
    """{key: sha256 or {name: sha256}} of every rule that decides a word (module doc); ``cfg``
    holds the ``summary`` and ``events`` blocks (a resolved config, or those of a summary job)."""
    from . import benchmark, verdict
    from ..measures.signal_registry import SIGNALS
    from .claims import CLAIMS
    claims = {}
    for c in CLAIMS:
        fields = {k: v for k, v in c.__dict__.items() if k != "rows"}
        claims[c.name] = _sha({"fields": fields, "rows": _src(c.rows)})
    gates = getattr(verdict, "GATES", None)
    events = dict(cfg["events"])
    return {
        "claims": claims,
        "verdict_rule": _sha({"word": _src(verdict.word), "finish": _src(verdict.finish), "gates": repr(gates)}),
        "benchmark": _sha({"settings": benchmark.SETTINGS, "events": benchmark.EVENT_KINDS, "fa": benchmark.FA_TARGET,
                           "signals": [(s.name, s.table, s.measure, s.layer, s.position, s.variant, s.direction)
                                       for s in SIGNALS], "score": _src(benchmark.auroc_block),
                           "gain": _src(benchmark.gain_rows)}),
        "summary_settings": _sha({k: v for k, v in dict(cfg["summary"]).items()
                                  if k not in ("frozen_rules", "allow_unfrozen")}),
        "events_settings": _sha({k: v for k, v in events.items() if k != "classes_file"}),
        "code": code_fingerprints(),
    }


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def freeze(cfg: dict, out, config_name: str = "", replace: bool = False) -> dict:
    """Write the frozen-rules file ``out`` (module doc); the dict written. An existing file is
    refused (its date is the moment the rules were fixed) unless ``replace``: then the old
    freeze is kept in ``previous_freezes``, its history with it."""
    from ..files import atomic_write_json
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    previous: list = []
    if Path(out).exists():
        old = _read_frozen(Path(out))
        if not replace:
            raise ValueError(f"{out} holds rules frozen on {old.get('date')}; a new freeze would replace that date "
                             f"and its history (pass --replace to freeze anew, keeping the old one in "
                             f"previous_freezes; --code-only to re-fingerprint a code change)")
        previous = [*old.pop("previous_freezes", []), old]
    rec = {"what": "sha256 of every rule that decides a verdict word, frozen before a confirmation grid "
                   "(geoanatomy.analysis.freeze)", "date": now,
           "commit": _commit(), "config": config_name, **fingerprints(cfg),
           **({"previous_freezes": previous} if previous else {})}
    atomic_write_json(Path(out), rec)
    return rec


SETTINGS_KEYS = ("summary_settings", "events_settings")


def refrozen(cfg: dict, path, reason: str) -> dict:
    """The frozen-rules file ``path`` re-fingerprinted after a code-only change (module doc),
    not written: the new sha256s, the original date and commit, and a ``code_changes`` entry;
    ValueError when a setting differs or nothing does. ``report.recheck.refreeze_shown``
    writes it once every committed snapshot is shown to keep its words under it."""
    p = Path(path)
    old = _read_frozen(p)
    now = fingerprints(cfg)
    diff = differences(old, now)
    if not diff:
        raise ValueError(f"{p}: the rules are the frozen ones; nothing to re-fingerprint")
    moved = [k for k in SETTINGS_KEYS if old.get(k) != now[k]]
    if moved:
        raise ValueError(f"{p}: {', '.join(moved)} differ from the frozen ones; settings are rules, not code, so a "
                         "code-only re-fingerprint cannot take them (the confirmation's settings are the frozen ones)")
    if not reason.strip():
        raise ValueError("--code-only needs the reason (what the change did and why no number moves)")
    when = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return {**old, **now, "code_changes": [*old.get("code_changes", []),
                                           {"date": when, "commit": _commit(), "changed": diff, "reason": reason}]}


def _read_frozen(p: Path) -> dict:
    """A frozen-rules file as a dict; ValueError naming the file when it is not one."""
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{p}: not a frozen-rules file ({e})") from None
    if not isinstance(d, dict) or "claims" not in d:
        raise ValueError(f"{p}: not a frozen-rules file (a JSON object with the rules' fingerprints; got "
                         f"{type(d).__name__})")
    return d


def differences(frozen: dict, now: dict) -> list[str]:
    """What differs between a frozen-rules file and the rules now (empty: none)."""
    out = []
    for k in FROZEN_KEYS:
        a, b = frozen.get(k), now.get(k)
        if k == "code" and a is None:
            out.append("code: not fingerprinted in this file (frozen before the helpers were covered)")
        elif isinstance(a, dict) and isinstance(b, dict):
            what = "claim" if k == "claims" else "module"
            for name in sorted(set(a) | set(b)):
                if a.get(name) != b.get(name):
                    out.append(f"{what} {name!r} " + ("added" if name not in a else "removed" if name not in b
                                                      else "changed"))
        elif a != b:
            out.append(f"{k} changed")
    return out


def check(cfg: dict) -> str:
    """'' when the config names no frozen file; else the ``frozen`` note of every verdict row
    ("rules as frozen on DATE" or, with allow_unfrozen, what differs). Raises ValueError naming
    the differences otherwise, before any summary work."""
    path = (cfg.get("summary") or {}).get("frozen_rules")
    if not path:
        return ""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"summary.frozen_rules: {p} does not exist (write it with geoanatomy freeze before the "
                         f"confirmation grid trains)")
    frozen = _read_frozen(p)
    diff = differences(frozen, fingerprints(cfg))
    if not diff:
        return f"rules as frozen in {p.name} on {frozen.get('date')}"
    if cfg["summary"].get("allow_unfrozen"):
        return f"NOT the frozen rules ({p.name}, {frozen.get('date')}): " + "; ".join(diff)
    raise ValueError(f"the rules differ from the frozen ones in {p} ({frozen.get('date')}): {'; '.join(diff[:6])}"
                     f"{' ...' if len(diff) > 6 else ''}; a confirmation is read with the frozen rules (set "
                     f"summary.allow_unfrozen: true to run anyway, every row then says so)")
