"""The claim table of docs/analysis.md, generated from the claims (``analysis.claims``) and the
verdict's rules (``analysis.verdict.RULES``): ``python -m geoanatomy.report.claims docs/analysis.md``
rewrites the block between its markers; ``tests/test_verdict.py`` checks it is current."""
from __future__ import annotations

from pathlib import Path

from ..analysis.claims import CLAIMS
from ..analysis.verdict import RULES

DOCS_BEGIN = "<!-- claims: generated from geoanatomy.analysis.verdict (CLAIMS, WORDS); do not edit by hand -->"
DOCS_END = "<!-- end of claims -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _design_text(d) -> str:
    if d.kind == "simulated":
        return (f"simulated: nulls {', '.join(d.nulls)}; alternative {', '.join(d.alternative)}"
                + (f" (rows of {d.measure})" if d.measure else ""))
    return "binomial: share 1/2 null, 0.8 alternative" if d.kind == "binomial" else "not simulated"


def claims_markdown() -> str:
    """The rule and the claim table as docs/analysis.md shows them (between DOCS_BEGIN and DOCS_END)."""
    lines = ["The rules; each row names its own (column `rule`; alpha = `summary.alpha`, n_min ="
             " `summary.verdict_min_units`, delta = `summary.equivalence_decades` or `summary.slope_equivalence`):", ""]
    lines += [f"* **{r}**: {when}" for r, when in RULES.items()]
    lines += ["* otherwise, with fewer than n_min units, or without a test: **inconclusive**"]
    lines += ["", "| claim | rows | the study's statement | our test | null | reads | power (verdict_power.csv) |"
              " module |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {' | '.join(_cell(x) for x in (c.name, c.per, c.statement, c.test, c.null, c.inputs))}"
              f" | {_cell(_design_text(c.design))} | `{c.rows.__module__.rsplit('.', 1)[-1]}` |" for c in CLAIMS]
    return "\n".join(lines)


def docs_block(text: str) -> str:
    """The generated part of a docs page (between the markers, without them)."""
    try:
        start = text.index(DOCS_BEGIN) + len(DOCS_BEGIN)
        return text[start:text.index(DOCS_END, start)].strip("\n")
    except ValueError:
        raise ValueError(f"no claims block ({DOCS_BEGIN!r} ... {DOCS_END!r})") from None


def write_docs(path) -> bool:
    """Replace the claims block of a docs page by ``claims_markdown()``; True when it changed."""
    p = Path(path)
    text = p.read_text()
    old = docs_block(text)
    new = claims_markdown()
    if old == new:
        return False
    start = text.index(DOCS_BEGIN) + len(DOCS_BEGIN)
    end = text.index(DOCS_END, start)
    p.write_text(text[:start] + "\n" + new + "\n" + text[end:])
    return True


if __name__ == "__main__":
    import sys
    for f in sys.argv[1:] or ["docs/analysis.md"]:
        print(f"{f}: {'rewritten' if write_docs(f) else 'up to date'}")
