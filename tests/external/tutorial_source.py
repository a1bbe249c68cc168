"""The kernels of a Triton tutorial without the rest of it. A tutorial is a sphinx-gallery script:
importing it runs its unit test and its benchmark (prints, plots, minutes of timing). What the
kernels need is kept: function and class definitions, and the module-level imports and
assignments that a kept definition uses (followed transitively). Dropped: the docstring, the
benchmarks (functions decorated with `triton.testing.perf_report`), the test_/bench helpers,
and every other statement (calls, loops, prints, try blocks such as the optional `import apex`)."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / ".tutorials"
DROPPED_PREFIXES = ("test_", "bench")


def tutorials_present() -> bool:
    return (TUTORIALS / "COMMIT").is_file()


def extract(source: str) -> str:
    tree = ast.parse(source)
    kept = [node for node in tree.body if _is_kept_definition(node)]
    needed = set().union(*(_free_names(node) for node in kept))
    bindings = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign))]
    chosen: set[int] = set()
    # A kept assignment can use other module-level names (DEVICE feeds `properties`): to a fixpoint.
    while True:
        more = [n for n in bindings if id(n) not in chosen and _bound_names(n) & needed]
        if not more:
            break
        for node in more:
            chosen.add(id(node))
            needed |= _free_names(node)
    body = [n for n in tree.body if id(n) in chosen or any(n is k for k in kept)]
    return ast.unparse(ast.Module(body=body, type_ignores=[])) + "\n"


def extract_file(name: str, target: Path) -> Path:
    """The kernels of .tutorials/NAME written to TARGET (beside the wrapper submission)."""
    target.write_text(f"# The kernels of Triton's tutorial {name}, extracted for grading.\n"
                      + extract((TUTORIALS / name).read_text()))
    return target


def _is_kept_definition(node: ast.stmt) -> bool:
    if isinstance(node, ast.ClassDef):
        return True
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if node.name.startswith(DROPPED_PREFIXES):
        return False
    return not any("perf_report" in ast.unparse(d) for d in node.decorator_list)


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _free_names(node: ast.AST) -> set[str]:
    """Names a statement reads and does not bind itself (parameters, local stores, nested
    definitions): an over-approximation is harmless, a name missed would break the import."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return set()
    loads, bound = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not node:
            bound.add(n.name)
        elif isinstance(n, ast.alias):
            bound.add((n.asname or n.name).split(".")[0])
    return loads - bound - set(dir(builtins))
