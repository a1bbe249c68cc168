"""torch_compute: PyTorch may not do the task's work (grader/kata/allowed_ops.py names what it
may do). In the worker, during each checked call; needs torch.

Three independent records of one checked call, compared after it:
- a TorchDispatchMode on top of the mode stack sees every aten op the submission calls (by
  overload packet), flags those not allowed, ops on tensor subclasses (whose own
  __torch_dispatch__ could hide work) and copies from a device to the host;
- a TorchFunctionMode sees Python-level reads of values on the host (.numpy(), .tolist(),
  printing), which run no aten op;
- the legacy autograd profiler (RecordFunction callbacks, below the Python dispatch key) sees
  the ops that ran even where the modes were switched off (_DisableTorchDispatch, popped
  modes, excluded dispatch keys, a Python kernel registered over an allowed op).
Ways round all three that Python offers directly (redispatch with an explicit key set, turning
RecordFunction or the profiler off, threads) are wrapped before the submission is imported and
leave evidence. What no in-process check can see is listed in docs/SCORING.md.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode

from grader.kata.allowed_ops import BASE_ALLOWED, HOST_READS, describe
from grader.sandbox.forbidden_ops import GraderDispatchMode, grader_machinery, in_machinery
from grader.sandbox.provenance import INPUT, OWN, Provenance


@dataclass
class TorchOps:
    """What one checked call did with PyTorch beyond what its task allows."""

    ops: list[str] = field(default_factory=list)  # disallowed ops on the kata's inputs, in order, deduplicated
    own: list[str] = field(default_factory=list)  # disallowed ops on the submission's own results only
    counts: list[str] = field(default_factory=list)  # integer counts or checks of integer inputs
    escapes: list[str] = field(default_factory=list)  # how the check was switched off or gone round
    threads: list[str] = field(default_factory=list)  # threads of the submission's running during it
    names: set[str] = field(default_factory=set)  # bare op names behind `ops`

    def add(self, label: str, name: str | None = None, kind: int = INPUT) -> None:
        """`kind` (grader.sandbox.provenance): what the op computed on, the kata's inputs unless
        the provenance says otherwise."""
        self.names.add(name or label)
        found = self.ops if kind == INPUT else self.own if kind == OWN else self.counts
        if label not in found:
            found.append(label)

    def escape(self, what: str) -> None:
        if what not in self.escapes:
            self.escapes.append(what)



def _packet(func) -> str:
    packet = getattr(func, "overloadpacket", None)
    return str(packet) if packet is not None else str(func)


def _reads_to_host(args, result) -> bool:
    """A copy whose source is on a device and whose result is in host memory."""
    out = result if isinstance(result, torch.Tensor) else None
    if out is None or out.device.type != "cpu":
        return False
    return any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args)


class _OpRecorder(GraderDispatchMode):
    def __init__(self, allowed: frozenset, record: TorchOps, forbidden_casts: frozenset = frozenset(),
                 provenance: Provenance | None = None):
        super().__init__()
        self.allowed, self.record, self.forbidden_casts = allowed, record, forbidden_casts
        self.provenance = provenance

    def _kind(self, name: str, args, kwargs) -> int:
        if self.provenance is None:
            return INPUT
        with grader_machinery(), _scope(MACHINERY_SCOPE):  # its copies are the grader's
            return self.provenance.classify(name, args, kwargs)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = _packet(func)
        hiding = _dispatching_subclasses(types)
        kind = None
        if hiding:
            kinds = ", ".join(sorted({t.__name__ for t in hiding}))
            self.record.add(f"{name} on a tensor subclass ({kinds}), whose __torch_dispatch__ "
                            "can run work this check cannot see", name)
        elif name not in self.allowed and not (in_machinery() and name in BASE_ALLOWED):
            kind = self._kind(name, args, kwargs)
            self.record.add(name, kind=kind)
        result = func(*args, **(kwargs or {}))
        if self.provenance is not None and not in_machinery():
            try:
                self.provenance.follow(name, args, kwargs, result, kind)
            except Exception:  # noqa: BLE001 - what it wrote stays of unknown origin: the inputs'
                pass
        if name in _COPY_OPS:
            if _reads_to_host(args, result):
                self.record.add(f"{name} from the device to the host (.cpu(), .to('cpu'))", name,
                                kind=self._kind(name, args, kwargs))
            cast = _cast_into(name, args, result) if self.forbidden_casts and not in_machinery() else None
            if cast in self.forbidden_casts:
                self.record.add(f"{name}, a conversion into torch.{cast} (.to(torch.{cast}), or copy_ "
                                f"into a {cast} tensor): rounding into {cast} is this task's work, "
                                "so your kernel must do it", name)
        return result


def _dispatching_subclasses(types) -> list:
    """The tensor types among `types` with a __torch_dispatch__ of their own. torch itself passes
    plain torch.Tensor in `types` at times (the detach after `x.view(torch.int32)`), and a plain
    tensor or a Parameter can hide nothing."""
    return [t for t in types if getattr(t, "__torch_dispatch__", None) is not _PLAIN_DISPATCH]


_PLAIN_DISPATCH = torch.Tensor.__torch_dispatch__

_COPY_OPS = {"aten._to_copy", "aten.copy_", "aten.copy", "aten._copy_from", "aten._copy_from_and_resize"}


def _cast_into(name: str, args, result) -> str | None:
    """The dtype a copy op converted into ('float8_e4m3fn'), or None where it kept the dtype."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if name in ("aten._copy_from", "aten._copy_from_and_resize"):  # (src, dst)
        target, sources = (tensors[1], tensors[:1]) if len(tensors) > 1 else (None, [])
    elif name == "aten.copy_":  # (self: the destination, src)
        target, sources = (tensors[0], tensors[1:]) if tensors else (None, [])
    else:  # _to_copy(self), copy(self, src): a new tensor
        target, sources = (result if isinstance(result, torch.Tensor) else None), tensors
    # A 0-d source is a constant being filled in (q[:] = torch.tensor(0.0)): no rounding of data.
    if target is None or all(src.dtype == target.dtype or src.dim() == 0 for src in sources):
        return None
    return str(target.dtype).removeprefix("torch.")


def _host_read_functions() -> dict:
    found = {}
    for name in HOST_READS:
        obj = getattr(torch.Tensor, name.split(".", 1)[1], None)
        if obj is not None:
            found[obj] = name
    return found


class _HostReads(TorchFunctionMode):
    def __init__(self, allowed: frozenset, record: TorchOps, provenance: Provenance | None = None):
        super().__init__()
        self.allowed, self.record = allowed, record
        self.provenance = provenance
        self.functions = _host_read_functions()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            name = self.functions.get(func)
        except TypeError:  # an unhashable callable
            name = None
        if name is not None and name not in self.allowed:
            kind = INPUT
            if self.provenance is not None and name not in _PRINTING:
                with grader_machinery(), _scope(MACHINERY_SCOPE):
                    kind = self.provenance.classify(name, args, kwargs)
            self.record.add(name, kind=kind)
        return func(*args, **(kwargs or {}))


# The originals of what the audit wrappers replace, bound before the submission is imported.
_originals: dict[str, object] = {}
_installed: list[tuple[object, str, object]] = []  # (owner, attribute, wrapper)
_audit: list[str] = []  # escapes called since install_op_checks(), reported at the next check
_threads: list[dict] = []  # threads started since install_op_checks()
_composite_cache: dict[str, bool] = {}
_PROFILER_CONTROLS = ("_enable_profiler", "_disable_profiler", "_prepare_profiler",
                      "_enable_profiler_legacy", "_disable_profiler_legacy", "_enable_record_function",
                      "_clear_callbacks", "_toggle_collection_dynamic")
MACHINERY_SCOPE = "kata-grader: Triton argument marshalling"
_PRINTING = {"Tensor.__repr__", "Tensor.__format__"}  # already torch_compute (host reads)


def _replace(owner, attribute: str, make_wrapper) -> None:
    """owner.attribute, and every module-level alias of it, replaced by make_wrapper(original)."""
    original = getattr(owner, attribute, None)
    if original is None:
        return
    wrapper = make_wrapper(original)
    setattr(owner, attribute, wrapper)
    _installed.append((owner, attribute, wrapper))
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or module is owner:
            continue
        for key, value in list(namespace.items()):
            if value is original:
                setattr(module, key, wrapper)
                _installed.append((module, key, wrapper))


def _named_like(original, wrapper):
    """wrapper with original's name and doc, but no __wrapped__ leading back to the original."""
    functools.update_wrapper(wrapper, original, updated=())
    del wrapper.__wrapped__
    return wrapper


def _audited(label: str):
    def make(original):
        def wrapper(*args, **kwargs):
            _audit.append(label)
            return original(*args, **kwargs)
        return _named_like(original, wrapper)
    return make


def _marshalling(original):
    def wrapper(*args, **kwargs):
        with grader_machinery(), _scope(MACHINERY_SCOPE):
            return original(*args, **kwargs)
    return _named_like(original, wrapper)


def _scope(name: str):
    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    return fast(name) if fast is not None else contextlib.nullcontext()


def _thread_starter(original):
    def start(function, args=(), kwargs=None, *rest):
        owner = getattr(function, "__self__", None)
        target = getattr(owner, "_target", None) or function
        entry = {"what": f"{getattr(owner, 'name', 'a thread')} running "
                         f"{getattr(target, '__qualname__', type(target).__name__)}", "done": False}
        _threads.append(entry)

        def run(*a, **k):
            try:
                return function(*a, **k)
            finally:
                entry["done"] = True
        return original(run, args, *(() if kwargs is None else (kwargs,)), *rest)
    return _named_like(original, start)


def install_op_checks() -> None:
    """Called once in the worker, before the submission is imported."""
    if _installed:
        return
    from torch._C import _autograd

    for name in _PROFILER_CONTROLS:
        if hasattr(_autograd, name):
            _originals[name] = getattr(_autograd, name)
    for name in _PROFILER_CONTROLS:
        _replace(_autograd, name, _audited(f"torch._C._autograd.{name} (the profiler or RecordFunction)"))
    _replace(torch._C._DispatchOperatorHandle, "redispatch_boxed",
             _audited("redispatch_boxed (an op called below the Python dispatch key)"))
    _replace(torch._ops.OpOverload, "redispatch",
             _audited("OpOverload.redispatch (an op called below the Python dispatch key)"))
    import _thread

    _replace(_thread, "start_new_thread", _thread_starter)
    try:
        from triton.runtime.interpreter import GridExecutor
    except ImportError:
        return
    for name in ("_init_args_hst", "_restore_args_dev"):
        _replace(GridExecutor, name, _marshalling)


def _still_installed() -> list[str]:
    return sorted({f"{getattr(owner, '__name__', owner)}.{attr}" for owner, attr, wrapper in _installed
                   if getattr(owner, attr, None) is not wrapper})


class _Profile:
    """The legacy autograd profiler (CPU, RecordFunction), through the originals bound at install."""

    def __init__(self):
        self.on = False
        self.problem = None

    def start(self) -> None:
        enable = _originals.get("_enable_profiler_legacy")
        if enable is None or "_disable_profiler_legacy" not in _originals:
            return  # this torch has no legacy profiler: the modes alone decide
        from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig

        try:
            enable(ProfilerConfig(ProfilerState.CPU, False, False, False, False, False, _ExperimentalConfig()))
            self.on = True
        except RuntimeError as exc:  # a profiler is already running: the submission started one
            self.problem = f"a profiler was running when the call began ({str(exc).splitlines()[0]})"

    def stop(self):
        if not self.on:
            return None
        try:
            return _originals["_disable_profiler_legacy"]()
        except RuntimeError:
            self.problem = "the op profiler was switched off during the call"
            return None


def _composite(op: str) -> bool:
    """The op the profiler names decomposes (CompositeImplicitAutograd), so what it runs is judged
    instead. The profiler names the packet, not the overload: its default overload decides, and
    a packet without one (aten::flatten has only flatten.using_ints) counts only if every overload
    it registers decomposes."""
    if op not in _composite_cache:
        namespace, _, name = op.partition(".")
        try:
            overloads = getattr(getattr(torch.ops, namespace), name).overloads()
        except Exception:  # noqa: BLE001 - not an operator
            overloads = []
        if "default" in overloads:
            overloads = ["default"]
        found = []
        for overload in overloads:
            qualified = f"{namespace}::{name}" + ("" if overload == "default" else f".{overload}")
            try:
                found.append(bool(torch._C._dispatch_has_kernel_for_dispatch_key(
                    qualified, "CompositeImplicitAutograd")))
            except Exception:  # noqa: BLE001 - listed but not registered (a TorchScript-only overload)
                continue
        _composite_cache[op] = bool(found) and all(found)
    return _composite_cache[op]


def unseen_ops(events, allowed: frozenset, recorded: set[str]) -> list[str]:
    """Ops the profiler saw that neither the allow-list nor the recorder accounts for.

    An op called from Python (top level) must be allowed for the task, or recorded. What runs
    inside an op of the base allow-list (its implementation, the grader's guard copies, the
    recorder calling the op itself) must be in the base list too, which catches a Python kernel
    registered over an allowed op; what runs inside an op only the kata allows is the kata's
    business. Composite ops (CompositeImplicitAutograd) are judged by what they decompose into;
    scopes that are not ops are transparent, except Triton's argument marshalling (base list).
    """
    unseen: list[str] = []
    for thread_events in events:
        stack: list[tuple[str, str]] = []  # per open event: (top | base | skip, op name)
        for event in thread_events:
            kind = event.kind()
            if kind == "pop":
                if stack:
                    stack.pop()
                continue
            if kind != "push":
                continue
            state, parent_op = stack[-1] if stack else ("top", "")
            name = event.name()
            if state == "skip":
                stack.append(("skip", ""))
                continue
            if "::" not in name:
                stack.append(("base", "") if name == MACHINERY_SCOPE else (state, parent_op))
                continue
            op = name.replace("::", ".", 1)
            if op in BASE_ALLOWED and (state != "top" or op in allowed):
                stack.append(("base", op))
            elif state == "top" and op in allowed:
                stack.append(("skip", op))
            elif state == "base" and op == parent_op:
                stack.append(("base", op))  # a mode calling the op it was handed
            elif op in recorded:
                stack.append(("skip", op))
            elif _composite(op):
                stack.append((state, op))
            else:
                if op not in unseen:
                    unseen.append(op)
                stack.append(("skip", op))
    return unseen


@contextlib.contextmanager
def watch_torch_compute(allowed: frozenset, forbidden_casts: frozenset = frozenset(),
                        provenance: Provenance | None = None):
    """Record, during one checked call, the PyTorch work `allowed` does not cover, and conversions
    into the dtypes of `forbidden_casts` (names: 'float8_e4m3fn'); yields a TorchOps filled in
    when the block exits. With `provenance`, each op is told apart by what it computed on: the
    kata's inputs, or the submission's own results only (grader.sandbox.provenance). Enter it
    last, so its mode is on top of the stack."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    record = TorchOps()
    audited = len(_audit)
    record.escapes.extend(dict.fromkeys(_audit))  # anything called since the last check
    live_threads = [t for t in _threads if not t["done"]]
    threads_before = len(_threads)
    recorder = _OpRecorder(allowed, record, forbidden_casts, provenance)
    host_reads = _HostReads(allowed, record, provenance)
    dispatch_below = list(_get_current_dispatch_mode_stack())
    function_below = list(_get_current_function_mode_stack())
    profile = _Profile()
    profile.start()
    host_reads.__enter__()
    recorder.__enter__()
    own_state = (set(vars(recorder)), set(vars(host_reads)))
    try:
        yield record
    finally:
        dispatch_now = list(_get_current_dispatch_mode_stack())
        function_now = list(_get_current_function_mode_stack())
        python_key_off = torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python)
        if dispatch_now == dispatch_below + [recorder]:
            recorder.__exit__(None, None, None)
        else:
            record.escape("the dispatch mode stack was changed during the call (a mode popped or left pushed)")
            _restore_modes(dispatch_now, dispatch_below, dispatch=True)
        if function_now == function_below + [host_reads]:
            host_reads.__exit__(None, None, None)
        else:
            record.escape("the torch function mode stack was changed during the call")
            _restore_modes(function_now, function_below, dispatch=False)
        events = profile.stop()
        if python_key_off:
            record.escape("the Python dispatch key was left excluded (torch._C._DisableTorchDispatch)")
        if (set(vars(recorder)), set(vars(host_reads))) != own_state or recorder.allowed is not allowed \
                or recorder.record is not record or host_reads.allowed is not allowed \
                or recorder.forbidden_casts is not forbidden_casts or recorder.provenance is not provenance \
                or host_reads.provenance is not provenance:
            record.escape("the op recorder was modified")
        if profile.problem:
            record.escape(profile.problem)
        if events is not None and not record.names & _PRINTING:  # printing pops the modes itself
            unseen = unseen_ops(events, allowed, record.names)
            if unseen:
                record.escape(f"{describe(unseen)} ran where the dispatch mode did not see "
                              "(a mode switched off, popped or bypassed)")
        record.escapes.extend(e for e in dict.fromkeys(_audit[audited:]) if e not in record.escapes)
        for name in _still_installed():
            record.escape(f"{name} was restored or replaced")
        compiled = compile_evidence()
        if compiled:
            record.escape(compiled)
        record.threads = [t["what"] for t in live_threads + _threads[threads_before:]]


def compile_evidence() -> str | None:
    """torch.compile writes kernels for the submission, which the op recorder does not see (they
    are Triton kernels of TorchInductor's, launched past the JIT). The worker starts with it off
    (TORCH_COMPILE_DISABLE: a compiled function then runs eagerly and its ops are recorded), so
    it is on only if the submission switched it back on; or TorchInductor loaded generated code."""
    config = sys.modules.get("torch._dynamo.config")
    if config is not None and getattr(config, "disable", True) is False:
        return "torch.compile was switched back on (torch._dynamo.config.disable), so TorchInductor could write the kernels"
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is not None and getattr(getattr(codecache, "PyCodeCache", None), "modules", None):
        return "TorchInductor generated and loaded kernels (torch.compile) during the grade"
    return None


def _restore_modes(now: list, below: list, dispatch: bool) -> None:
    """Put a mode stack back as it was before the call (the grader's own modes exit after)."""
    if dispatch:
        from torch.utils._python_dispatch import _pop_mode, _push_mode
    else:
        from torch.overrides import _pop_mode, _push_mode
    for _ in now:
        _pop_mode()
    for mode in below:
        _push_mode(mode)
