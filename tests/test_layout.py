"""The house's import direction (README, "Layout"): every package imports only packages below it.

    downstream -> serving -> models -> preprocessing -> commands;  pipeline -> preprocessing;
    downstream -> pipeline;  demo, benchmarks on top

Inside a package the same holds for its parts: `models`' networks import neither `models.training` nor
`models.convert`; `serving.server` does not import `serving.export`. Lazy imports inside functions count too.

`benchmarks/` is grouped by stage (`BENCHMARK_STAGES`); each module there is a benchmark run as `python -m`,
and no benchmarks module imports one: what two of them share lives in `benchmarks.lib` (or `benchmarks.peers`).
"""

import ast
import os

from tests.conftest import ROOT

BELOW = {
    # command plumbing (user errors, --overwrite, TF start-up): the lowest room, below the text logic
    "commands": set(),
    "preprocessing": {"commands"},
    "pipeline": {"preprocessing", "commands"},
    "models": {"preprocessing", "commands"},
    "serving": {"models", "preprocessing", "commands"},
    # downstream.embed is a Beam job: it reuses pipeline's runner defaults, corpus reader and shard writer
    # (pipeline sits beside models, below serving, so the arrow still points down)
    "downstream": {"serving", "models", "pipeline", "preprocessing", "commands"},
    "demo": {"downstream", "serving", "models", "pipeline", "preprocessing", "commands"},
    # benchmarks reuse tests/fixtures (tiny datasets, served models), and tests reuse benchmarks' peers
    "benchmarks": {"demo", "downstream", "serving", "models", "pipeline", "preprocessing", "commands", "tests"},
}
BENCHMARK_STAGES = ("data", "training", "serving", "downstream")
# (importer prefix, imported prefix): parts of one package that sit below another part of it
FORBIDDEN_INSIDE = [
    ("models.", "models.training"), ("models.", "models.convert"), ("models.training", "models.convert"),
    ("serving.server", "serving.export"), ("serving.server", "serving.client"),
]


def _modules(package: str):
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                yield rel.removesuffix(".__init__"), path


def _imports(path: str) -> list[str]:
    return _imported_names(open(path, encoding="utf-8").read(), path)


def _imported_names(source: str, path: str = "<source>") -> list[str]:
    tree = ast.parse(source, path)
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return names


def upward_imports() -> list[str]:
    """Every import that points up the house, as `importer imports imported`."""
    found = []
    for package, allowed in BELOW.items():
        for module, path in _modules(package):
            for name in _imports(path):
                top = name.split(".")[0]
                if top in BELOW or top == "tests":
                    if top != package and top not in allowed:
                        found.append(f"{module} imports {name}")
                for importer, imported in FORBIDDEN_INSIDE:
                    inside = module.startswith(importer) and not module.startswith(imported)
                    if importer == "models." and module.count(".") > 1:
                        inside = False  # the rule is for models' own files, not its subpackages
                    if inside and (name == imported or name.startswith(imported + ".")):
                        found.append(f"{module} imports {name}")
    return sorted(set(found))


def test_no_package_imports_a_package_above_it():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The checker itself: an import of serving from models is reported."""
    package = tmp_path / "models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "bad.py").write_text("def f():\n    from serving.export import cli\n")
    monkeypatch.setattr("tests.test_layout.ROOT", str(tmp_path))
    assert "models.bad imports serving.export" in upward_imports()


def benchmark_imports_of(module: str, source: str) -> list[str]:
    """The imports in `module`'s source of a benchmark (a module of a stage folder) other than itself, and its
    relative imports (which would hide what they import), as `importer imports imported`."""
    found = []
    stages = tuple(f"benchmarks.{stage}" for stage in BENCHMARK_STAGES)
    for name in _imported_names(source, module):
        if (name in stages or name.startswith(tuple(s + "." for s in stages))) and name != module:
            found.append(f"{module} imports {name}")
    tree = ast.parse(source, module)
    found += [f"{module} imports {'.' * n.level}{n.module or ''} (relative)" for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom) and n.level]
    return found


def benchmark_cross_imports() -> list[str]:
    """Every import of one benchmark by another benchmarks module (a benchmark, `lib` or `peers`)."""
    found = []
    for module, path in _modules("benchmarks"):
        found += benchmark_imports_of(module, open(path, encoding="utf-8").read())
    return sorted(set(found))


def test_no_benchmark_imports_another():
    assert benchmark_cross_imports() == []


def test_the_check_sees_a_benchmark_importing_another():
    source = ("from benchmarks.lib import history\nfrom benchmarks.peers import model_garden\n"
              "def f():\n    from benchmarks.data.pretraining_data import read_documents\n"
              "    from benchmarks import training\n    from . import helpers\n")
    assert benchmark_imports_of("benchmarks.data.scaling", source) == [
        "benchmarks.data.scaling imports benchmarks.data.pretraining_data",
        "benchmarks.data.scaling imports benchmarks.data.pretraining_data.read_documents",
        "benchmarks.data.scaling imports benchmarks.training",
        "benchmarks.data.scaling imports . (relative)"]
    assert benchmark_imports_of("benchmarks.lib.stats", "import math\nfrom benchmarks.lib import proc\n") == []


def test_every_benchmark_is_an_entry_point():
    """A stage folder holds only benchmarks (`if __name__ == "__main__"`); shared code lives in `benchmarks.lib`."""
    for stage in BENCHMARK_STAGES:
        for module, path in _modules(os.path.join("benchmarks", stage)):
            if module.endswith(f".{stage}") and path.endswith("__init__.py"):
                continue
            tree = ast.parse(open(path, encoding="utf-8").read(), path)
            mains = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
            assert mains, f"{module} is not run as a benchmark: move it to benchmarks/lib/"


def test_every_package_says_what_it_owns():
    for package in [*BELOW, "models.training", "models.convert", "serving.export", "serving.server",
                    "downstream.finetune", "tests.fixtures",
                    *(f"benchmarks.{folder}" for folder in (*BENCHMARK_STAGES, "lib", "peers"))]:
        init = os.path.join(ROOT, *package.split("."), "__init__.py")
        doc = ast.get_docstring(ast.parse(open(init, encoding="utf-8").read()))
        assert doc and "later issues" not in doc, f"{init} has no docstring saying what {package} owns"
