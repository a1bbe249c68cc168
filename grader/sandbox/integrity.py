"""Has the submission patched the timer, the checker or the grader itself?

A snapshot is taken in the worker before the submission is imported: the identity of every
function the grader's timing, comparison and reporting rely on, and the code object of every
function in the grader's own modules. The grader also keeps its own references to those
functions, so a patch never changes a figure; it is reported as tampering.
"""

from __future__ import annotations

import sys
import types

# (module, dotted attribute) pairs a cheat would patch to fake a time or a comparison.
WATCHED = [
    ("triton.testing", "do_bench"), ("triton.testing", "do_bench_cudagraph"),
    ("torch", "allclose"), ("torch", "isclose"), ("torch", "equal"),
    ("torch.testing", "assert_close"), ("torch.cuda", "synchronize"), ("torch.cuda", "Event"),
    ("torch.cuda", "Event.record"), ("torch.cuda", "Event.elapsed_time"),
    ("torch.cuda", "Event.synchronize"), ("torch.cuda", "CUDAGraph"), ("torch.cuda", "CUDAGraph.replay"),
    ("torch", "save"), ("torch", "Tensor.cpu"), ("torch", "Tensor.clone"), ("torch", "Tensor.copy_"),
    ("torch", "Generator"), ("torch", "randint"), ("torch", "exp2"), ("torch", "sub"),
    ("torch", "Tensor.mul_"),
    ("time", "perf_counter"), ("time", "monotonic"), ("json", "dumps"), ("os", "fsync"),
]


def _lookup(module_name: str, dotted: str):
    obj = sys.modules.get(module_name)
    for part in dotted.split("."):
        if obj is None:
            return None
        obj = getattr(obj, part, None)
    return obj


def _grader_functions() -> dict[str, object]:
    """'module.qualname' -> code object, for every function and method in grader.*"""
    found = {}
    for name, module in list(sys.modules.items()):
        if not (name == "grader" or name.startswith("grader.")) or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType) and value.__module__ == name:
                found[f"{name}.{attr}"] = value.__code__
            elif isinstance(value, type) and value.__module__ == name:
                for meth, fn in vars(value).items():
                    if isinstance(fn, types.FunctionType):
                        found[f"{name}.{attr}.{meth}"] = fn.__code__
    return found


class Snapshot:
    def __init__(self):
        self.attributes = {(m, a): _lookup(m, a) for m, a in WATCHED}
        self.objects: list = []  # (name, object, its attributes): see watch()
        self.functions = _grader_functions()
        self.modules = {name: sys.modules[name] for name in self.functions_modules()}

    def functions_modules(self) -> set[str]:
        return {name for name in sys.modules if name == "grader" or name.startswith("grader.")}

    def watch(self, name: str, obj) -> None:
        """Also hold obj's own attributes to what they are now: the worker's line to the parent
        and its events file, which a submission could wrap on the instance (the class's
        functions are checked above) to change what the worker says."""
        self.objects.append((name, obj, dict(vars(obj))))

    def changes(self) -> list[str]:
        """What differs from the snapshot, as readable names; empty when nothing does."""
        changed = [f"{m}.{a}" for (m, a), obj in self.attributes.items() if _lookup(m, a) is not obj]
        for name, obj, saved in self.objects:
            now = vars(obj)
            if now.keys() != saved.keys() or any(now[k] is not v for k, v in saved.items()):
                changed.append(name)
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                changed.append(f"the module {name}")
        now = _grader_functions()
        changed += [name for name, code in self.functions.items() if now.get(name) is not code]
        from grader.sandbox import launches

        if not launches.still_installed():
            changed.append("Triton's launchers")
        return changed
