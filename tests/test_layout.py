"""The grader's layout is its architecture (docs/ARCHITECTURE.md), checked from the source with `ast`:

- the trust boundary: nothing the judge imports, however indirectly, is the sandbox's (the worker
  imports the submission), and the judge loads no code but a kata's spec; nothing the sandbox
  imports, however indirectly, is the results store's;
- each subpackage imports only the packages its `__init__` docstring names ("May import: ...");
- no import cycle between modules, nor between packages;
- the `__init__` files hold only their docstring (importing a package costs nothing), and
  pyproject.toml ships every subpackage;
- the command-line process never imports torch for `kata list`, `show` or `new`;
- no module is over 600 lines: one that grows past it is doing more than one job.

Every import counts, at the top of a module or inside a function, and so does an
importlib.import_module of a literal name.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "grader"
FOUNDATION = {"grader", "grader.paths", "grader.profiling"}  # the root's modules that every package may import


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=None)
def sources() -> dict[str, tuple[Path, ast.Module]]:
    return {module_name(path): (path, ast.parse(path.read_text(), str(path)))
            for path in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in path.parts}


@lru_cache(maxsize=None)
def subpackages() -> tuple[str, ...]:
    return tuple(sorted(name for name, (path, _) in sources().items()
                        if path.name == "__init__.py" and name != "grader"))


def package_of(module: str) -> str:
    """grader.judge.checker -> grader.judge; the root's own modules (grader.paths) -> grader."""
    package = ".".join(module.split(".")[:2])
    return package if package in subpackages() else "grader"


def _resolve(name: str) -> str | None:
    """The grader module a dotted name lives in (the longest prefix that is a module); None
    when it is not the grader's."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        if ".".join(parts[:cut]) in sources():
            return ".".join(parts[:cut])
    return None


@lru_cache(maxsize=None)
def imports(module: str) -> frozenset[str]:
    """The grader modules `module` imports, anywhere in it."""
    path, tree = sources()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: `from . import x`, `from ..judge import y`
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in sources() else base
                     for alias in node.names]
        elif (isinstance(node, ast.Call) and _dotted(node.func) in ("importlib.import_module", "import_module")
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]
        found.update(m for m in map(_resolve, names) if m is not None and m != module)
    return frozenset(found)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _calls_by_function(tree: ast.Module) -> dict[ast.AST | None, list[ast.Call]]:
    """Each call, under the function it is written in (None: the module's own code)."""
    found: dict[ast.AST | None, list[ast.Call]] = {}

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call):
                found.setdefault(function, []).append(child)
            scope = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, child if scope else function)

    visit(tree, None)
    return found


def reachable(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        for target in imports(todo.pop()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def allowed(package: str) -> set[str]:
    """The packages named on the "May import:" line of the package's docstring (up to ';' or '. ')."""
    docstring = ast.get_docstring(sources()[package][1]) or ""
    line = next((l for l in docstring.splitlines() if l.startswith("May import:")), None)
    assert line is not None, f"{package}/__init__.py does not say what it may import ('May import: ...')"
    listed = re.split(r";|\.\s|\.$", line[len("May import:"):])[0]
    named = set(re.findall(r"grader\.\w+", listed))
    unknown = named - set(subpackages()) - FOUNDATION
    assert not unknown, f"{package} names packages that do not exist: {sorted(unknown)}"
    return named & set(subpackages())


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


# ---- the trust boundary -----------------------------------------------------------------

def test_nothing_the_judge_imports_is_the_sandboxs():
    judge = [m for m in sources() if package_of(m) == "grader.judge"]
    assert "grader.judge.checker" in judge
    for module in judge:
        leaks = sorted(m for m in reachable(module) if package_of(m) == "grader.sandbox")
        assert not leaks, f"{module} imports the sandbox (where the submission is imported): {leaks}"


LOADS_CODE = ("__import__", "exec", "eval", "import_module", "run_path", "run_module", "load_module",
              "module_from_spec", "exec_module", "spec_from_file_location")
SPEC_LOADING = ("spec_from_file_location", "module_from_spec", "exec_module")


def test_the_judge_loads_no_code_but_a_katas_spec():
    """What runs in the checker (the judge and all it imports) loads no file as code but a kata's
    spec, and unpickles nothing: torch.load only with weights_only=True, no pickle or marshal."""
    checker = {"grader.judge.checker", *reachable("grader.judge.checker")}
    assert {package_of(m) for m in checker} <= {"grader", "grader.judge", "grader.kata", "grader.timing"}
    problems = []
    for module in sorted(m for m in sources() if package_of(m) == "grader.judge" or m in checker):
        path, tree = sources()[module]
        for function, calls in _calls_by_function(tree).items():
            # A kata's spec may be loaded: spec_from_file_location(NAME, KATA.spec_path), executed.
            loads_a_spec = function is not None and any(
                _dotted(c.func).endswith("spec_from_file_location") and len(c.args) > 1
                and isinstance(c.args[1], ast.Attribute) and c.args[1].attr == "spec_path" for c in calls)
            for call in calls:
                name = _dotted(call.func)
                where = f"{path.relative_to(ROOT)}:{call.lineno} {name}"
                last = name.rpartition(".")[2]
                if name.startswith(("pickle.", "marshal.", "dill.")):
                    problems.append(where)
                elif name == "torch.load" and not any(
                        k.arg == "weights_only" and getattr(k.value, "value", None) is True for k in call.keywords):
                    problems.append(where + " without weights_only=True")
                elif last in LOADS_CODE and not (loads_a_spec and last in SPEC_LOADING):
                    problems.append(where)
    problems = sorted(set(problems))
    assert not problems, "the judge loads code other than a kata's spec:\n" + "\n".join(problems)


def test_nothing_the_sandbox_imports_is_the_stores():
    sandbox = [m for m in sources() if package_of(m) == "grader.sandbox"]
    assert "grader.sandbox.worker" in sandbox
    for module in sandbox:
        leaks = sorted(m for m in reachable(module)
                       if package_of(m) in ("grader.store", "grader.learner", "grader.cli"))
        assert not leaks, f"{module} imports the results store or what uses it: {leaks}"


# ---- the packages' own rules ------------------------------------------------------------

def test_each_package_imports_only_what_its_docstring_allows():
    wrong = []
    for module in sorted(sources()):
        package = package_of(module)
        if package == "grader":
            continue
        permitted = allowed(package) | {package}
        wrong += [f"{module} -> {target}" for target in sorted(imports(module))
                  if package_of(target) not in permitted and target not in FOUNDATION]
    assert not wrong, "imports its package's docstring does not allow:\n" + "\n".join(wrong)


def test_the_foundation_imports_no_package():
    for module in FOUNDATION:
        assert imports(module) <= FOUNDATION, module


def test_no_import_cycles_between_modules():
    found = cycle({m: set(imports(m)) for m in sources()})
    assert found is None, "an import cycle: " + " -> ".join(found)


def test_no_import_cycles_between_packages():
    declared = {p: allowed(p) for p in subpackages()}
    found = cycle(declared)
    assert found is None, "the packages' docstrings allow a cycle: " + " -> ".join(found)


def test_package_inits_hold_only_their_docstring():
    for package in subpackages():
        body = sources()[package][1].body
        assert len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), \
            f"{package}/__init__.py holds more than its docstring: importing a submodule would run it"


def test_pyproject_ships_every_subpackage():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    data = {"grader.katas", "grader.reference", "grader.templates"}  # the top-level data folders
    assert listed - data == {"grader", *subpackages()}


MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines():
    long = {name: len(path.read_text().splitlines()) for name, (path, _) in sources().items()}
    assert not {n: lines for n, lines in long.items() if lines > MAX_MODULE_LINES}, \
        "split a module that does more than one job (docs/ARCHITECTURE.md)"


def test_the_layout_check_sees_lazy_and_dynamic_imports():
    """The check itself: an import inside a function and an import_module of a literal count."""
    assert "grader.results.report" in imports("grader.learner.workspace")  # inside a function
    assert "grader.store.database" in imports("grader.learner.progress")  # importlib.import_module
    assert "grader.sandbox.worker" in imports("grader.grading.warm_start")  # `import grader.x`


def test_the_command_line_never_imports_torch_to_list_show_or_scaffold(tmp_path):
    commands = [["list"], ["show", "vector_add"], ["new", "vector_add", "--dir", str(tmp_path)], ["--help"]]
    code = (
        "import sys\n"
        "from grader.cli.main import main\n"
        f"for args in {commands!r}:\n"
        "    try:\n"
        "        main(args, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('torch' in sys.modules, 'triton' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    imported = out.stdout.strip().splitlines()[-1]
    assert imported == "False False", f"torch, triton imported: {imported}\n{out.stderr[-2000:]}"


def test_a_cpu_grade_leaves_torch_to_the_worker_and_the_checker(tmp_path):
    # Importing torch in the grading process cost a small CPU grade 1-1.6 s before its first
    # case (docs/PERFORMANCE.md): the worker and the checker, forked by the warm start, have it.
    code = (
        "import sys\n"
        "from grader.cli.main import main\n"
        "for path in ('reference/vector_add.py', 'tests/wrong/vector_add_bad_mask.py'):\n"
        "    try:\n"
        "        main(['grade', path, '--kata', 'vector_add', '--interpret', '--no-record',\n"
        "              '--json'], standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('torch' in sys.modules, 'triton' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               KATA_DATA_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    assert '"status": "pass"' in out.stdout and '"status": "fail"' in out.stdout
    imported = out.stdout.strip().splitlines()[-1]
    assert imported == "False False", f"torch, triton imported: {imported}\n{out.stderr[-2000:]}"
