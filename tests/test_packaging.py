"""environment.yml (conda) stays in step with pyproject.toml (pip); no torch pin in the package;
one version number; every rule's conda env is environment.yml."""
import re
import tomllib

import yaml

from conftest import REPO

CONDA_NAME = {"torch": "pytorch"}  # pip name -> conda-forge name where they differ


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0].lower()


def test_environment_matches_pyproject():
    py = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pip_names = {_name(r) for r in py["dependencies"]}
    for extra in py.get("optional-dependencies", {}).values():
        pip_names |= {_name(r) for r in extra}
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    conda_names = {_name(d) for d in env["dependencies"] if isinstance(d, str)} - {"python", "pip"}
    # packages only on PyPI go in environment.yml's pip: section
    conda_names |= {_name(r) for d in env["dependencies"] if isinstance(d, dict)
                    for r in d.get("pip", []) if not r.startswith("-")}
    want = {CONDA_NAME.get(n, n) for n in pip_names}
    assert want == conda_names, (f"in pyproject only: {sorted(want - conda_names)}; "
                                 f"in environment.yml only: {sorted(conda_names - want)}")


def test_no_torch_version_pin_in_package():
    py = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    torch_req = [r for r in py["dependencies"] if _name(r) == "torch"]
    assert torch_req and "==" not in torch_req[0]


def test_one_version_number():
    import geoanatomy
    py = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert py["version"] == geoanatomy.__version__, "pyproject.toml and geoanatomy.__version__ differ"


def test_rules_use_environment_yml():
    common = (REPO / "workflow" / "rules" / "common.smk").read_text()
    m = re.search(r'^CONDA_ENV = "([^"]+)"', common, flags=re.M)
    assert m, "workflow/rules/common.smk: no CONDA_ENV"
    assert (REPO / "workflow" / "rules" / m.group(1)).resolve() == (REPO / "environment.yml").resolve()
    for f in (REPO / "workflow" / "rules").glob("*.smk"):
        text = f.read_text()
        n_rules = len(re.findall(r"^rule \w+:", text, flags=re.M))
        assert len(re.findall(r"^    conda:\n        CONDA_ENV$", text, flags=re.M)) == n_rules, f.name
