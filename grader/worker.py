"""The grading worker: a child process that imports the submission and runs the planned cases.

Started by grader.runner as `python -m grader.worker REQUEST.json`. It reports through a
results file named in the request, one JSON event per line, written and flushed as it goes, so
the parent knows how far it got if the submission crashes or hangs the process. The submission's
own stdout and stderr go to files the parent shows as "output"; they are never parsed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import sys
import traceback
from pathlib import Path

import torch
import triton

from grader.ceilings import cache_key
from grader.compare import check_tensor_type, compare_values, same_values
from grader.guards import resolve_forbidden, submission_guards
from grader.kata import load_kata
from grader.timing import floor_ms, measure_ceilings, time_pair

FATAL_CUDA_MARKERS = ("CUDA error", "illegal memory access", "illegal instruction",
                      "misaligned address", "unspecified launch failure", "device-side assert")


def is_cuda_fault(exc: BaseException) -> bool:
    """After these the CUDA context is lost: nothing more can run in this process."""
    return any(marker in str(exc) for marker in FATAL_CUDA_MARKERS)


class Reporter:
    def __init__(self, path: str):
        # Opened before the submission is imported. Its path is in the request file, which the
        # submission could read: the runner voids a grade whose events it did not write itself.
        self._file = open(path, "a", buffering=1)

    def emit(self, event: dict) -> None:
        self._file.write(json.dumps(event, default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())


def case_seed(seed: int, key: str) -> int:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def user_traceback(exc: BaseException, submission: Path) -> str:
    """The exception with its traceback trimmed to frames in the user's own files."""
    frames = traceback.extract_tb(exc.__traceback__)
    user_dir = str(submission.parent)
    mine = [f for f in frames if f.filename.startswith(user_dir)]
    lines = []
    if mine:
        lines.append("Traceback (your code only):")
        for f in mine[-8:]:
            lines.append(f'  File "{Path(f.filename).name}", line {f.lineno}, in {f.name}')
            if f.line:
                lines.append(f"    {f.line.strip()}")
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if len(text) > 3000:
        text = text[:3000] + " ... (trimmed)"
    lines.append(text)
    return "\n".join(lines)


def load_submission(path: Path):
    """Import the submission as module 'solution'; raises SubmissionLoadError with a clear text."""
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["solution"] = module
    sys.path.insert(0, str(path.parent))  # let it import helpers that sit beside it
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        where = f"{Path(exc.filename or path).name}, line {exc.lineno}"
        detail = f"\n    {exc.text.rstrip()}" if exc.text else ""
        if exc.text and exc.offset:
            detail += "\n    " + " " * (exc.offset - 1 - (len(exc.text) - len(exc.text.lstrip()))) + "^"
        raise SubmissionLoadError("syntax", f"Syntax error in {where}: {exc.msg}{detail}") from None
    except BaseException as exc:  # noqa: BLE001 - anything the import raises is the user's
        if isinstance(exc, SystemExit):
            raise SubmissionLoadError("import", f"{path.name} called sys.exit({exc.code}) while being imported") from None
        raise SubmissionLoadError(
            "import", f"Importing {path.name} raised an exception:\n{user_traceback(exc, path)}"
        ) from None
    return module


class SubmissionLoadError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def check_entry(module, task, path: Path):
    fn = getattr(module, task.name, None)
    if fn is None:
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                         and getattr(v, "__module__", None) == "solution")
        found = f" It defines: {', '.join(defined)}." if defined else ""
        raise SubmissionLoadError(
            "missing_entry",
            f"{path.name} has no function '{task.name}': the kata calls {task.signature}.{found}")
    if not callable(fn) or isinstance(fn, type):
        raise SubmissionLoadError("missing_entry", f"'{task.name}' in {path.name} is not a function")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    try:
        sig.bind(*task.args)
    except TypeError as exc:
        raise SubmissionLoadError(
            "signature",
            f"{task.name}{sig} in {path.name} has the wrong signature: the kata calls "
            f"{task.signature}, passing {len(task.args)} positional argument(s) "
            f"({', '.join(task.args)}); Python says: {exc}") from None
    return fn


def _flatten(value, label):
    """Yield (label, tensor-or-other) leaves of nested lists/tuples of outputs."""
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _flatten(item, f"{label}[{i}]")
    else:
        yield label, value


def _clone(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _storage_ptrs(inputs: dict) -> dict[int, str]:
    """Storage address -> name of the input that owns it."""
    ptrs = {}
    for name, value in inputs.items():
        for label, leaf in _flatten(value, name):
            if isinstance(leaf, torch.Tensor) and leaf.numel():
                ptrs[leaf.untyped_storage().data_ptr()] = label
    return ptrs


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


class CaseRunner:
    """Runs one task's cases against the submission in this process."""

    def __init__(self, spec, task, fn, submission: Path, device: str, seed: int):
        self.spec, self.task, self.fn = spec, task, fn
        self.submission, self.device, self.seed = submission, device, seed
        self.python_forbidden, self.aten_forbidden = resolve_forbidden(task.forbidden)
        self.cases = {c.name: c for c in task.cases}

    def inputs(self, planned, salt: str = ""):
        gen = torch.Generator(device=self.device)
        gen.manual_seed(case_seed(self.seed, planned["key"] + salt))
        make = getattr(self.spec, self.task.inputs_fn)
        case = self.cases[planned["case"]]
        return make(dict(case.params), getattr(torch, planned["dtype"]), self.device, gen)

    def expected_dtype(self, output, inputs):
        if output.dtype in inputs:
            leaf = next(v for _, v in _flatten(inputs[output.dtype], "") if isinstance(v, torch.Tensor))
            return leaf.dtype
        return getattr(torch, output.dtype)

    def run_case(self, planned) -> dict:
        """Correctness of one case; returns a CaseResult as a dict."""
        inputs = self.inputs(planned)
        args = [inputs[a] for a in self.task.args]
        first = next((v for _, v in _flatten(args, "") if isinstance(v, torch.Tensor)), None)
        result = {"task": self.task.name, "name": planned["case"], "dtype": planned["dtype"],
                  "shape": list(first.shape) if first is not None else None,
                  "hidden": planned["hidden"], "status": "fail", "message": ""}
        truth = getattr(self.spec, self.task.reference_fn)(**_clone(inputs))
        if len(self.task.outputs) == 1:
            truth = (truth,)
        snapshot = _clone(inputs)
        input_ptrs = _storage_ptrs(inputs)
        device = first.device if first is not None else torch.device(self.device)
        seen: list[str] = []
        try:
            with submission_guards(self.python_forbidden, self.aten_forbidden, seen):
                returned = self.fn(*args)
            _sync(self.device)
        except NotImplementedError as exc:
            result.update(status="error", message=f"not implemented yet: {self.task.name} raised "
                          f"NotImplementedError({str(exc)!r})")
            return result
        except Exception as exc:  # noqa: BLE001 - the submission's exception is the verdict
            if not seen:  # a forbidden call is reported below, raised through or swallowed
                text = user_traceback(exc, self.submission)
                if is_cuda_fault(exc):
                    raise FatalCudaError(text) from None
                result.update(status="error", message=f"{self.task.name} raised an exception:\n{text}")
                return result
        if seen:
            result.update(message=f"called a forbidden op: {seen[0]} is forbidden in this kata")
            return result

        got_all = self._collect_outputs(returned, inputs)
        if isinstance(got_all, str):
            result["message"] = got_all
            return result
        worst = {"max_abs_err": None, "max_rel_err": None, "mismatched": 0, "total": 0}
        for output, got, expected in zip(self.task.outputs, got_all, truth):
            if not output.inplace and isinstance(got, torch.Tensor) and got.numel():
                shared = input_ptrs.get(got.untyped_storage().data_ptr())
                if shared is not None:
                    result["message"] = (f"output '{output.name}' shares memory with input "
                                         f"'{shared}': return a new tensor")
                    return result
            message = self._compare(output, got, expected, inputs, device, worst, result)
            if message:
                result["message"] = message
                return result
        message = self._changed_input(snapshot, inputs)
        if message:
            result["message"] = message
            return result
        result.update(status="pass", **worst)
        return result

    def _collect_outputs(self, returned, inputs) -> tuple | str:
        """Returned values, then in-place arguments, in declaration order; or what is wrong."""
        returns = self.task.returns
        if len(returns) == 0:
            got_returned = ()
        elif len(returns) == 1:
            got_returned = (returned,)
        elif not isinstance(returned, (tuple, list)) or len(returned) != len(returns):
            return (f"{self.task.name} must return {len(returns)} values "
                    f"({', '.join(o.name for o in returns)}), got {_describe(returned)}")
        else:
            got_returned = tuple(returned)
        return got_returned + tuple(inputs[name] for name in self.task.inplace)

    def _changed_input(self, snapshot, inputs) -> str | None:
        for name in self.task.args:
            if name in self.task.inplace:
                continue
            for (label, before), (_, after) in zip(_flatten(snapshot[name], name), _flatten(inputs[name], name)):
                if isinstance(before, torch.Tensor) and not same_values(before, after):
                    return f"input '{label}' was modified; only the outputs may be written"
        return None

    def _compare(self, output, got, expected, inputs, device, worst, result) -> str:
        exp_leaves = list(_flatten(expected, output.name))
        if isinstance(expected, (list, tuple)):  # a list of tensors (multi-tensor katas)
            if not isinstance(got, (list, tuple)):
                return f"'{output.name}' is {_describe(got)}, expected a list of {len(exp_leaves)} tensors"
            got_leaves = list(_flatten(got, output.name))
            if len(got_leaves) != len(exp_leaves):
                return f"'{output.name}' has {len(got_leaves)} tensors, expected {len(exp_leaves)}"
        else:
            got_leaves = [(output.name, got)]
        dtype = self.expected_dtype(output, inputs)
        tol = self.task.tolerance(str(dtype).removeprefix("torch."))
        for (label, g), (_, e) in zip(got_leaves, exp_leaves):
            problem = check_tensor_type(g, f"'{label}'", device, dtype, tuple(e.shape))
            if problem:
                return problem
            cmp = compare_values(g, e, f"'{label}'", mode=output.compare, atol=tol.atol,
                                 rtol=tol.rtol, ulp=output.ulp)
            for key in ("max_abs_err", "max_rel_err"):
                value = getattr(cmp, key)
                if value is not None and (worst[key] is None or value > worst[key]):
                    worst[key] = value
            worst["mismatched"] += cmp.mismatched or 0
            worst["total"] += cmp.total or 0
            if not cmp.ok:
                result.update(max_abs_err=cmp.max_abs_err, max_rel_err=cmp.max_rel_err,
                              mismatched=cmp.mismatched, total=cmp.total, mismatches=cmp.mismatches)
                return cmp.message
        return ""

    def time_case(self, planned, ceilings) -> dict:
        """Submission vs baseline on the same rotating input sets."""
        input_sets = []
        for i in range(2):
            inputs = self.inputs(planned, salt=f"/timing{i}")
            input_sets.append(tuple(inputs[a] for a in self.task.args))
        baseline = getattr(self.spec, self.task.baseline_fn)
        t_sub, t_base = time_pair(self.fn, baseline, input_sets)
        out = {"time_ms": t_sub, "baseline_ms": t_base, "speedup": t_base / t_sub}
        case = self.cases[planned["case"]]
        first = next(v for _, v in _flatten(input_sets[0], "") if isinstance(v, torch.Tensor))
        nbytes, flops = self.task.cost(case, itemsize=first.element_size())
        floor = floor_ms(nbytes, flops, ceilings) if ceilings else None
        if floor:
            out["floor_ms"], out["roofline"] = floor, floor / t_sub
        del input_sets
        torch.cuda.empty_cache()
        return out


class FatalCudaError(Exception):
    pass


def _describe(value) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def main(request_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    reporter = Reporter(request["results"])
    submission = Path(request["submission"])
    mode = request["mode"]
    device = "cuda" if mode == "gpu" else "cpu"
    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__}
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (Triton interpreter)"
    ceilings, measured = None, False
    if device == "cuda":
        ceilings = request.get("ceilings_cache", {}).get(cache_key(device_name, versions))
    if device == "cuda" and not ceilings:
        # Measured before the submission is imported, so nothing it does can skew them.
        ceilings, measured = measure_ceilings(), True
    reporter.emit({"type": "env", "device": device_name, "versions": versions,
                   "ceilings": ceilings, "ceilings_measured": measured})

    kata = load_kata(Path(request["kata_dir"]))
    spec_module = _import_path("kata_spec", kata.spec_path)
    try:
        module = load_submission(submission)
        entries = {t.name: check_entry(module, t, submission) for t in kata.tasks}
    except SubmissionLoadError as exc:
        reporter.emit({"type": "load_error", "kind": exc.kind, "message": exc.message})
        return 0

    tasks = {t.name: t for t in kata.tasks}
    runners = {name: CaseRunner(spec_module, task, entries[name], submission, device, request["seed"])
               for name, task in tasks.items()}
    plan = [p for p in request["plan"] if not p["skip_reason"]]
    failed_tasks: set[str] = set()
    try:
        for planned in plan:
            reporter.emit({"type": "start", "key": planned["key"]})
            result = runners[planned["task"]].run_case(planned)
            if result["status"] != "pass":
                failed_tasks.add(planned["task"])
            reporter.emit({"type": "case", "key": planned["key"], "result": result})
        if device == "cuda":
            for planned in plan:
                if planned["bench"] and planned["task"] not in failed_tasks:
                    reporter.emit({"type": "start", "key": planned["key"], "phase": "timing"})
                    try:
                        timing = runners[planned["task"]].time_case(planned, ceilings)
                    except Exception as exc:  # noqa: BLE001 - the submission failed while timed
                        text = user_traceback(exc, submission)
                        if is_cuda_fault(exc):
                            raise FatalCudaError(text) from None
                        reporter.emit({"type": "timing_error", "key": planned["key"],
                                       "message": f"failed while being timed:\n{text}"})
                        continue
                    reporter.emit({"type": "timing", "key": planned["key"], "timing": timing})
    except FatalCudaError as exc:
        reporter.emit({"type": "fatal", "message": f"CUDA fault (the GPU context is lost, so the "
                       f"remaining cases could not run):\n{exc}"})
        return 0
    reporter.emit({"type": "done"})
    return 0


def _import_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    try:
        code = main(sys.argv[1])
    except Exception:  # noqa: BLE001 - a fault of the grader or the kata, not of the submission
        Reporter(json.loads(Path(sys.argv[1]).read_text())["results"]).emit(
            {"type": "internal_error", "message": traceback.format_exc()})
        code = 0
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a submission's atexit hooks or threads must not change the verdict.
    os._exit(code)
