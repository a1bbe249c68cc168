"""One task's cases, run in the worker beside the submission: the checked calls and what a live
process can see in them (exceptions, forbidden ops, kernel launches, threads and streams, output
types, aliasing, changed inputs, guard bands), the outputs saved for the checker, the baseline's
time (for the case's limit, which the parent sets) and, on a GPU, the timing against the
baseline with the parent's choice of kept timed calls (grader.timing.timer).

Split from grader.sandbox.worker, which loads the submission and runs the grade's cases in order.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from pathlib import Path

import torch

from grader.judge import handover
from grader.judge.compare import check_tensor_type
from grader.judge.inputs import AGAIN, case_seed, flatten, make_case_inputs, output_dtype
from grader.kata import memory_budget
from grader.kata.allowed_ops import describe, effective_allowed
from grader.sandbox import integrity, launches, lockdown, progress, protocol
from grader.sandbox.out_of_bounds import GuardedFactories, guarded_copy
from grader.sandbox.forbidden_ops import resolve_forbidden, submission_guards
from grader.sandbox.torch_compute import watch_torch_compute
from grader.sandbox.provenance import COUNT, INPUT, Provenance
from grader.sandbox.worker_line import ParentLine, ParentSampler
from grader.timing import anatomy, sizing
from grader.timing.timer import time_pair

FATAL_CUDA_MARKERS = ("CUDA error", "illegal memory access", "illegal instruction",
                      "misaligned address", "unspecified launch failure", "device-side assert")


def is_cuda_fault(exc: BaseException) -> bool:
    """After these the CUDA context is lost: nothing more can run in this process."""
    return any(marker in str(exc) for marker in FATAL_CUDA_MARKERS)


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
    # Triton's CompilationError points at the kernel's line and keeps the reason in the error it
    # was raised from (an assertion of the frontend's: "pass out_dtype=int32 ..."): show it.
    link, seen = _earlier(exc), {id(exc)}
    while link is not None and id(link[1]) not in seen and len(seen) <= 3:
        how, earlier = link
        seen.add(id(earlier))
        reason = "".join(traceback.format_exception_only(type(earlier), earlier)).strip()
        lines.append(f"{how}: " + (reason[:1500] + " ... (trimmed)" if len(reason) > 1500 else reason))
        link = _earlier(earlier)
    return "\n".join(lines)


def _earlier(exc: BaseException) -> tuple[str, BaseException] | None:
    """The exception `exc` was raised from ("caused by"), or while handling, as Python chains them."""
    if exc.__cause__ is not None:
        return "caused by", exc.__cause__
    if exc.__context__ is not None and not exc.__suppress_context__:
        return "raised while handling", exc.__context__
    return None


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _guard_tree(value, label: str, guards: list):
    """value with every tensor moved into guarded storage; the guards are appended to `guards`."""
    if isinstance(value, torch.Tensor):
        copy, guard = guarded_copy(value, label)
        guards.append(guard)
        return copy
    if isinstance(value, (list, tuple)):
        return type(value)(_guard_tree(v, f"{label}[{i}]", guards) for i, v in enumerate(value))
    return value


def _copy_contents(dst, src):
    """src's values written into dst's tensors (same buffers); non-tensors taken from src."""
    if isinstance(dst, torch.Tensor):
        dst.copy_(src)
        return dst
    if isinstance(dst, (list, tuple)):
        return type(dst)(_copy_contents(d, s) for d, s in zip(dst, src))
    return src


def _tensor_like(value) -> bool:
    return isinstance(value, torch.Tensor) or hasattr(type(value), "__torch_function__")


def _check_bands(guard, what: str) -> None:
    lo, hi = guard.damage()
    if lo or hi:
        raise CaseProblem(
            f"wrote out of bounds: {hi or lo} byte(s) {'after the end' if hi else 'before the start'} "
            f"of {what} were overwritten (an unmasked store tail, or a wrong offset)",
            "out_of_bounds_write")


def rule_broken(own: list[str], counts: list[str]) -> str:
    """The message of a call whose PyTorch work touched only its own results, or counted integer
    inputs (grader.sandbox.provenance): a rule broken, not a cheat (grader.judge.failure_codes reads
    its first words)."""
    parts = []
    if own:
        parts.append(f"{describe(own)} on what your Triton kernels wrote (or allocated) in this call")
    if counts:
        parts.append(f"{describe(counts)} counting or checking integer inputs")
    return ("PyTorch computed outside your Triton kernels: " + "; ".join(parts) + ". The kata asks "
            "for all the arithmetic in Triton; your kernels did the per-element work, so this "
            "breaks that rule without doing the kata's work in PyTorch (no cheat)")


class CaseProblem(Exception):
    """What the live process saw wrong with a call: a message, and a cheat when it is one."""

    def __init__(self, message: str, cheat: str | None = None, status: str = "fail"):
        super().__init__(message)
        self.message, self.cheat, self.status = message, cheat, status


def _no_work_in(outputs: dict, inputs: dict, inplace) -> bool:
    """Every output tensor is one value throughout (NaN counts as one value: an unwritten
    poisoned output) or holds the values of an argument that is not an in-place output, in
    that argument's order, cast to the output's dtype: what allocation, fills and copies alone
    produce."""
    sources = [t for name, value in inputs.items() if name not in inplace
               for _, t in flatten(value, name) if isinstance(t, torch.Tensor) and t.numel()]
    for _, got in flatten(list(outputs.values()), ""):
        if not isinstance(got, torch.Tensor) or got.numel() == 0:
            continue
        flat = got.reshape(-1)
        first = flat[:1]
        same = flat == first
        if flat.is_floating_point():
            same |= flat.isnan() & first.isnan()
        if bool(same.all()):
            continue
        if not any(src.numel() == got.numel() and torch.equal(src.reshape(-1).to(got.dtype), flat)
                   for src in sources if src.device == got.device):
            return False
    return True


class CaseRunner:
    """Runs one task's cases against the submission in this process."""

    def __init__(self, spec, task, fn, submission: Path, device: str, seed: int, outdir: Path,
                 snapshot: integrity.Snapshot, gpu_too_small: str | None = None):
        self.spec, self.task, self.fn = spec, task, fn
        self.gpu_too_small = gpu_too_small  # grader.kata.gpu_memory_fit.shortfall on this GPU, if any
        self.submission, self.device, self.seed = submission, device, seed
        self.outdir, self.snapshot = outdir, snapshot
        self.python_forbidden, self.aten_forbidden = resolve_forbidden(task.forbidden)
        self.torch_allowed = effective_allowed(task.allowed_ops, task.forbidden)
        self.forbidden_casts = frozenset(task.forbidden_casts)
        self.torch_ops = None  # what the last call did with PyTorch (grader.sandbox.torch_compute.TorchOps)
        self.provenance: Provenance | None = None  # where the last call's tensors came from
        self.floating_outputs = True  # every output of the last call is floating point
        self.cases = {c.name: c for c in task.cases}
        self.saved = 0
        self.launches_last_call = 0  # Triton launches of the last checked call
        self.last_call_s = 0.0
        # Seconds each case's second checked call took (wall, synchronised): sizes its timing.
        self.call_s: dict[str, float] = {}
        self.shared: list[torch.Tensor] = []  # outputs handed over by CUDA IPC, not yet ruled on
        self.anatomy_dir: str | None = None  # `kata grade --profile`: traces, IR and PTX go here

    def inputs(self, planned, salt: str = "") -> dict:
        case = self.cases[planned["case"]]
        return make_case_inputs(self.spec, self.task, case, planned["dtype"], self.device,
                                self.seed, planned["key"], salt)

    def run_case(self, planned) -> dict:
        """Two checked calls; returns the worker's side of a CaseResult as a dict."""
        guards: list = []
        inputs = {name: _guard_tree(v, name, guards) for name, v in self.inputs(planned).items()}
        first = next((t for a in self.task.args for _, t in flatten(inputs[a], a)
                      if isinstance(t, torch.Tensor)), None)
        result = {"task": self.task.name, "name": planned["case"], "dtype": planned["dtype"],
                  "shape": list(first.shape) if first is not None else None,
                  "hidden": planned["hidden"], "status": "ran", "message": "", "cheat": None}
        budget = self._memory_budget(planned)
        try:
            outputs = {"first": self._checked_call(inputs, guards, budget=budget)}
            fresh = self.inputs(planned, AGAIN)
            inputs = {name: _copy_contents(inputs[name], fresh[name]) for name in inputs}
            outputs["again"] = self._checked_call(inputs, guards, again=True, budget=budget)
            self.call_s[planned["key"]] = self.last_call_s
            # The second call's: the first may have run an autotuner's benchmark launches.
            result["launches"] = self.launches_last_call
        except CaseProblem as problem:
            result.update(status=problem.status, message=problem.message, cheat=problem.cheat)
            return result
        result["outputs"] = outputs
        return result

    def _memory_budget(self, planned) -> tuple[float, str, str] | None:
        """(bytes, what, advice) of the task's memory budget for this case, where it is
        measured: on a GPU (the interpreter has no peak-memory counter)."""
        budget = self.task.memory_budget
        if budget is None or self.device != "cuda":
            return None
        itemsize = getattr(torch, planned["dtype"]).itemsize
        return budget.limit(self.cases[planned["case"]].params, itemsize), budget.what, budget.advice

    def _checked_call(self, inputs: dict, input_guards: list, again: bool = False,
                      budget: tuple[float, str, str] | None = None) -> str:
        """Call the submission once under every guard; returns the file its outputs went to."""
        args = [inputs[a] for a in self.task.args]
        before = [g.buffer.clone() for g in input_guards]
        meter = memory_budget.PeakMeter(active=budget is not None)
        returned, launched = self._call(args, meter)
        self.launches_last_call = launched
        outputs = self._collect_outputs(returned, inputs)
        self._check_outputs(outputs, inputs)
        produced = sum(t.numel() for got in outputs.values() for _, t in flatten(got, "")
                       if isinstance(t, torch.Tensor))
        # A call that launched nothing is a cheat only where its outputs took work: a constant
        # (spmv with nnz = 0: zeros) or a copy of an input (dropout with p = 0) is an honest
        # shortcut, judged by the checker like any output.
        if launched == 0 and produced and not _no_work_in(outputs, inputs, self.task.inplace):
            if again:
                raise CaseProblem("called again with new inputs in the same buffers, it launched no "
                                  "kernel and returned at once: results are cached across calls",
                                  "cached_results")
            raise CaseProblem("no Triton kernel was launched: the outputs must be computed by "
                              "Triton kernels you launch, not by PyTorch or Python code", "no_triton_kernel")
        self._check_torch_compute()
        for guard, snapshot in zip(input_guards, before):
            _check_bands(guard, f"the input '{guard.label}'")
            root = guard.label.split("[")[0]
            if root not in self.task.inplace and not torch.equal(guard.buffer, snapshot):
                raise CaseProblem(f"input '{guard.label}' was modified; only the outputs may be written",
                                  "input_mutated")
        if budget is not None:
            returned_leaves = [t for o in self.task.returns for _, t in flatten(outputs[o.name], o.name)]
            over = memory_budget.judge(meter.extra - memory_budget.output_bytes(returned_leaves), *budget)
            if over:
                raise CaseProblem(over)  # a design flaw, not a cheat: the diagnosis memory_budget
        # The second call may write into the first call's output buffers before the checker reads
        # them: the in-place outputs always, returned ones where the submission reuses its
        # output tensors across calls. On a GPU (handed over by reference, not copied) the first
        # call's outputs are therefore handed over as copies, as a CPU's file holds them.
        return self._save(outputs, copy_first=not again)

    def _call(self, args, meter: memory_budget.PeakMeter | None = None) -> tuple[object, int]:
        """(what the submission returned, how many Triton kernels it launched); `meter`, when
        active, measures the call's peak GPU memory (grader.kata.memory_budget)."""
        seen: list[str] = []
        self.provenance = provenance = Provenance(
            [pair for name, value in zip(self.task.args, args) for pair in flatten(value, name)],
            launches.log.storages)
        by_name = dict(zip(self.task.args, args))
        self.floating_outputs = all(output_dtype(o, by_name).is_floating_point for o in self.task.outputs)
        meter = meter or memory_budget.PeakMeter(active=False)
        factories = GuardedFactories(pause=meter.excluded)
        threads_before = set(threading.enumerate())
        violations_before = len(lockdown.violations)
        stream = torch.cuda.current_stream().cuda_stream if self.device == "cuda" else None
        launches.log.start(stream, keep_storages=True)
        error = None
        meter.start()
        try:
            with submission_guards(self.python_forbidden, self.aten_forbidden, seen, provenance), factories, \
                    watch_torch_compute(self.torch_allowed, self.forbidden_casts, provenance) as self.torch_ops:
                progress.record.call()
                started = time.perf_counter()
                returned = self.fn(*args)
            progress.record.stage(progress.WAITING)
            _sync(self.device)
            self.last_call_s = time.perf_counter() - started
            meter.stop()
        except NotImplementedError as exc:
            raise CaseProblem(f"not implemented yet: {self.task.name} raised "
                              f"NotImplementedError({str(exc)!r})", status="error") from None
        except Exception as exc:  # noqa: BLE001 - the submission's exception is the verdict
            error = exc
        finally:
            launches.log.stop()
        if seen:
            raise self._torch_problem(seen[0])
        if len(lockdown.violations) > violations_before:
            raise CaseProblem(f"the sandbox refused {lockdown.violations[-1]}: a submission may not "
                              "start processes", "sandbox_violation")
        if error is not None:
            text = user_traceback(error, self.submission)
            if is_cuda_fault(error):
                raise FatalCudaError(text)
            if isinstance(error, torch.OutOfMemoryError) and self.device == "cuda":
                text += (f"\n(A submission may use at most {100 * lockdown.gpu_memory_fraction:.0f}% "
                         "of the GPU's memory.)")
                if self.gpu_too_small:  # the case may not fit this GPU, however good the kernel
                    text += f"\n({self.gpu_too_small}.)"
            raise CaseProblem(f"{self.task.name} raised an exception:\n{text}", status="error")
        self._check_integrity()
        self._check_concurrency(threads_before)
        self._check_op_escapes()
        for guard in factories.made:
            _check_bands(guard, "a tensor it allocated (an output?)")
        return returned, launches.log.count

    def _check_integrity(self) -> None:
        changed = self.snapshot.changes()
        if changed:
            raise TamperingError(changed)

    def _check_op_escapes(self) -> None:
        """The PyTorch-op check was switched off or gone round during the call (grader.sandbox.torch_compute)."""
        ops = self.torch_ops
        if ops.escapes:
            raise CaseProblem(f"switched off or went round the check on PyTorch ops: {'; '.join(ops.escapes[:3])}. "
                              "Whatever ran unseen counts as PyTorch doing the work", "torch_compute")
        if ops.threads:
            raise CaseProblem(f"a thread it started was running during the call ({ops.threads[0]}): work "
                              "done there escapes the op check and the timer", "background_thread")

    def _check_torch_compute(self) -> None:
        """PyTorch computed on tensor data during the call (docs/SCORING.md, torch_compute)."""
        problem = self._torch_problem()
        if problem is not None:
            raise problem

    def _torch_problem(self, forbidden: str | None = None) -> CaseProblem | None:
        """What PyTorch did in the last call beyond what the task allows (`forbidden`: the first
        forbidden op caught), by what it computed on (grader.sandbox.provenance): the kata's
        inputs, the cheat; only the submission's own results, or counts of integer inputs in a
        task with floating-point outputs, a rule broken."""
        ops, provenance, floating = self.torch_ops, self.provenance, self.floating_outputs
        own, counts, inputs = (ops.own, ops.counts, ops.ops) if ops is not None else ([], [], [])
        kinds = provenance.forbidden if provenance is not None else []
        if not own and not counts and forbidden is None and not inputs:
            return None
        copies = provenance.copies_of_inputs() if provenance is not None else []
        if forbidden is not None and (not kinds or copies or any(
                k == INPUT or (k == COUNT and not floating) for k in kinds)):
            return CaseProblem(f"called a forbidden op: {forbidden} is forbidden in this kata"
                               + (f" ({copies[0]})" if copies else ""), "forbidden_op")
        on_inputs = inputs + copies + ([] if floating else counts)
        if on_inputs:
            return CaseProblem(
                f"used PyTorch for more than allocating, filling, viewing and copying tensors: "
                f"{describe(on_inputs)}. Your Triton kernels must compute the outputs "
                "(reading values on the host counts too); `kata show` lists what PyTorch may do "
                "in this kata", "torch_compute")
        if forbidden is not None:
            own = [f"{forbidden} (forbidden in this kata)"] + [op for op in own if op != forbidden]
        return CaseProblem(rule_broken(own, counts))

    def _check_concurrency(self, threads_before: set) -> None:
        if launches.log.foreign_threads:
            raise CaseProblem(f"launched {launches.log.foreign_threads[0]} from another thread: "
                              "work done in a background thread escapes the timer", "background_thread")
        if launches.log.foreign_streams:
            raise CaseProblem(f"launched {launches.log.foreign_streams[0]} on a side stream: "
                              "launch on the current stream, which the timer watches", "side_stream")
        submission_file = str(self.submission)
        for thread in set(threading.enumerate()) - threads_before:
            target = getattr(thread, "_target", None)
            code = getattr(target, "__code__", None)
            if thread.is_alive() and code is not None and code.co_filename == submission_file:
                raise CaseProblem("left a background thread running after returning: work done "
                                  "there escapes the timer", "background_thread")

    def _collect_outputs(self, returned, inputs) -> dict:
        """{output name: [leaf tensors]}: returned values, then in-place arguments."""
        returns = self.task.returns
        if len(returns) == 0:
            got_returned = ()
        elif len(returns) == 1:
            got_returned = (returned,)
        elif not isinstance(returned, (tuple, list)) or len(returned) != len(returns):
            raise CaseProblem(f"{self.task.name} must return {len(returns)} values "
                              f"({', '.join(o.name for o in returns)}), got {_describe(returned)}")
        else:
            got_returned = tuple(returned)
        got_all = got_returned + tuple(inputs[name] for name in self.task.inplace)
        return {o.name: got for o, got in zip(self.task.outputs, got_all)}

    def _check_outputs(self, outputs: dict, inputs: dict) -> None:
        first = next((t for v in inputs.values() for _, t in flatten(v, "") if isinstance(t, torch.Tensor)), None)
        device = first.device if first is not None else torch.device(self.device)
        input_ptrs = {}
        for name, value in inputs.items():
            for label, leaf in flatten(value, name):
                if isinstance(leaf, torch.Tensor) and leaf.numel():
                    input_ptrs[leaf.untyped_storage().data_ptr()] = label
        for output in self.task.outputs:
            got = outputs[output.name]
            leaves = list(flatten(got, output.name)) if isinstance(got, (list, tuple)) else [(output.name, got)]
            for label, leaf in leaves:
                if not _tensor_like(leaf):
                    if isinstance(got, (list, tuple)):
                        raise CaseProblem(f"'{output.name}' is a {type(got).__name__}, expected a "
                                          "torch.Tensor (or, where the kata says so, a list of tensors)")
                    raise CaseProblem(f"'{label}' is {_describe(leaf)}, expected a torch.Tensor")
                if type(leaf) is not torch.Tensor:
                    kind = "a torch.Tensor subclass" if isinstance(leaf, torch.Tensor) else "a tensor-like wrapper"
                    raise CaseProblem(
                        f"'{label}' is a {type(leaf).__name__}, {kind}: return a plain torch.Tensor "
                        "(subclasses and lazy wrappers are not accepted as outputs)", "output_type")
                if leaf.device != device:
                    raise CaseProblem(f"'{label}' is on {leaf.device}, expected {device} (the "
                                      "inputs' device): the work must stay on the device", "output_type")
                dtype = output_dtype(output, inputs)
                problem = check_tensor_type(leaf, f"'{label}'", device, dtype, tuple(leaf.shape))
                if problem:
                    raise CaseProblem(problem)
                if not output.inplace and leaf.numel():
                    shared = input_ptrs.get(leaf.untyped_storage().data_ptr())
                    if shared is not None:
                        raise CaseProblem(f"output '{label}' shares memory with input '{shared}': "
                                          "return a new tensor", "output_aliases_input")

    def _save(self, outputs: dict, copy_first: bool = False):
        """The outputs handed to the checker: CUDA IPC handles on a GPU (the tensors are kept
        alive in self.shared until the parent has the verdict), else plain CPU copies in a file.
        copy_first: hand over copies (a first checked call's outputs, whose buffers the second
        call may overwrite before the checker reads them)."""
        leaves = {name: [t.detach() for _, t in flatten(got, name)] if isinstance(got, (list, tuple))
                  else [got.detach()] for name, got in outputs.items()}
        if self.device == "cuda":
            try:
                handed = {}
                for name, tensors in leaves.items():
                    tensors = [t.clone(memory_format=torch.contiguous_format) if copy_first else t.contiguous()
                               for t in tensors]
                    self.shared.extend(tensors)
                    handed[name] = [handover.share(t) for t in tensors]
                torch.cuda.synchronize()  # the checker reads them from another process
                return handed
            except Exception:  # noqa: BLE001 - IPC unavailable here: fall back to a file
                pass
        plain = {name: [t.to("cpu", copy=True).contiguous() for t in tensors]
                 for name, tensors in leaves.items()}
        self.saved += 1
        return handover.save(plain, self.outdir / f"{self.task.name}-{self.saved}.pt")

    def release(self, handed) -> None:
        """Drop what was handed over, once the parent has ruled on it."""
        self.shared.clear()
        for value in (handed.values() if isinstance(handed, dict) else [handed]):
            if isinstance(value, str):
                Path(value).unlink(missing_ok=True)

    def baseline_s(self, planned) -> float:
        """Seconds the kata's baseline takes on this case's inputs (for the case's time limit)."""
        args = [v for v in self.inputs(planned, "/limit").values()]
        baseline = getattr(self.spec, self.task.baseline_fn)
        started = time.perf_counter()
        try:
            baseline(*args)
            _sync(self.device)
        except Exception:  # noqa: BLE001 - a baseline that cannot run here gives no estimate
            return 0.0
        return time.perf_counter() - started

    def time_case(self, planned, line: ParentLine, budget_ms: float = sizing.BUDGET_MS,
                  limit_s: float | None = None) -> dict:
        """Submission vs baseline on fresh input sets; the timed calls the parent chose go to it.
        limit_s: the timing's limit (sizing keeps a slow kernel's timing inside it)."""
        def make_args(salt):
            inputs = self.inputs(planned, salt)
            return tuple(inputs[a] for a in self.task.args)

        baseline = getattr(self.spec, self.task.baseline_fn)
        # An in-place output moves on with every later call: its timed calls are not verified.
        sampler = None if self.task.inplace else ParentSampler(line, planned["key"])
        stream = torch.cuda.current_stream().cuda_stream
        launches.log.start(stream)
        progress.record.begin(progress.TIMING)
        call_s = self.call_s.get(planned["key"])
        try:
            timing = time_pair(self.fn, baseline, make_args, seed=case_seed(self.seed, planned["key"] + "/rng"),
                               launch_log=launches.log, sampler=sampler,
                               call_ms=call_s * 1e3 if call_s is not None else None, budget_ms=budget_ms)
        finally:
            launches.log.stop()
        self._check_integrity()
        self._check_concurrency(set(threading.enumerate()))
        out = {"time_ms": timing.time_ms, "baseline_ms": timing.baseline_ms, "speedup": timing.speedup,
               "timing_method": timing.method, "calls_per_sample": timing.calls_per_sample,
               "samples": timing.samples, "round_speedups": timing.round_speedups}
        if timing.host_syncs is not None:
            out.update(host_syncs=timing.host_syncs.count, host_sync_at=timing.host_syncs.first_at)
        kept = []
        for sample in timing.checked:
            outputs = {o.name: v for o, v in zip(self.task.returns, (
                (sample.outputs,) if len(self.task.returns) == 1 else tuple(sample.outputs)))}
            kept.append({"call": sample.call, "set": sample.set, "file": self._save(outputs)})
        timing.checked.clear()
        line.ask(protocol.SamplesOp(planned["key"], kept, timing.method, timing.n_sets))
        for sample in kept:
            self.release(sample["file"])
        # The first calls' times go to the parent, which judges them (slow first calls are named
        # only when a second timing shows them again: grader.sandbox.referee.Referee._on_timed).
        out["warmup_ms"] = [float(t) for t in timing.warmup_ms]
        # The roofline floor is the parent's to work out (from the kata's cost and the ceilings
        # told before the import): a figure from this process could be the submission's.
        del timing
        torch.cuda.empty_cache()
        return out

    def anatomy_of(self, planned, time_ms, limit_s: float | None, elapsed_s: float) -> dict | None:
        """The case's anatomy (grader.timing.anatomy): one more call, profiled, once the case's
        timing is final (a timing the parent has timed again is not profiled twice, and the
        second timing follows the first as closely as the first followed the checked calls).
        It must fit in what is left of the timing's limit: elapsed_s of it are gone. Advice only:
        never raises; None when switched off (KATA_NO_ANATOMY)."""
        if os.environ.get("KATA_NO_ANATOMY"):
            return None
        try:
            if not anatomy.fits(time_ms, elapsed_s, limit_s):
                return anatomy.not_profiled(time_ms, limit_s)
            inputs = self.inputs(planned, "/anatomy")
            return anatomy.profile_call(self.fn, tuple(inputs[a] for a in self.task.args), self.anatomy_dir,
                                        planned["key"])
        except Exception as exc:  # noqa: BLE001 - advice only: it never fails the case
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}


class TamperingError(Exception):
    def __init__(self, changed: list[str]):
        super().__init__(", ".join(changed))
        self.changed = changed


class FatalCudaError(Exception):
    pass


def _describe(value) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


