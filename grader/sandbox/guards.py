"""What is in force while the submission's entry function runs (in the worker; needs torch).

- Forbidden framework ops: a TorchFunctionMode catches Python-level calls however they are
  spelled (an alias, a lambda, a method), a TorchDispatchMode catches the aten op underneath.
- Poisoned outputs: with deterministic algorithms on and fill_uninitialized_memory set, every
  torch.empty* the submission makes is filled with NaN (floats) or the largest integer, so
  elements its kernel never writes cannot pass by inheriting a previous result.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
import warnings
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from grader.kata.allowed_ops import BASE_ALLOWED, HOST_READS, describe
from grader.sandbox.provenance import INPUT, OWN, Provenance


class ForbiddenOpError(RuntimeError):
    pass


def resolve_forbidden(names) -> tuple[dict, set[str]]:
    """Split declared names into Python callables (by id) and aten op packet names."""
    python_level: dict[int, str] = {}
    aten_level: set[str] = set()
    for name in names:
        if name.startswith("aten."):
            aten_level.add(name)
            continue
        obj = _resolve_dotted(name)
        if obj is not None:
            python_level[id(obj)] = name
    return python_level, aten_level


def _resolve_dotted(name: str):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None  # not in this torch version: nothing to forbid
        return obj
    return None


class GraderDispatchMode(TorchDispatchMode):
    """The base of the grader's dispatch modes (here and in grader.sandbox.guardbands). It says
    _should_skip_dynamo() is False: otherwise torch wraps each mode's __torch_dispatch__ in
    torch._dynamo.disable, and the first op the submission runs imports torch._dynamo (5.7 s of
    a 17 s grade on an H100 host). The wrapper only matters when Dynamo traces the submission's
    own Python, which it is not there to do."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False


class _ForbiddenFunctions(TorchFunctionMode):
    def __init__(self, python_level: dict[int, str], seen: list[str], provenance: Provenance | None = None):
        super().__init__()
        self.python_level = python_level
        self.seen = seen
        self.provenance = provenance

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.python_level.get(id(func))
        if name is not None:
            self.seen.append(name)
            if self.provenance is not None:
                self.provenance.forbidden.append(self.provenance.classify(name, args, kwargs))
            raise ForbiddenOpError(f"{name} is forbidden in this kata")
        return func(*args, **(kwargs or {}))


class _ForbiddenAtenOps(GraderDispatchMode):
    def __init__(self, aten_level: set[str], seen: list[str], provenance: Provenance | None = None):
        super().__init__()
        self.aten_level = aten_level
        self.seen = seen
        self.provenance = provenance

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if name in self.aten_level and not (_in_machinery() and name in BASE_ALLOWED):
            self.seen.append(name)
            if self.provenance is not None:  # the recorder above has copied the operands already
                self.provenance.forbidden.append(self.provenance.classify(name, args, kwargs, snapshot=False))
            raise ForbiddenOpError(f"{name} (the op behind it) is forbidden in this kata")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def poisoned_allocations():
    previous_enabled = torch.are_deterministic_algorithms_enabled()
    previous_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    previous_fill = torch.utils.deterministic.fill_uninitialized_memory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The C switch itself: torch.use_deterministic_algorithms also imports torch._inductor
        # (to set its config), seconds of start-up that do nothing for a grade.
        torch._C._set_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True
        try:
            yield
        finally:
            torch._C._set_deterministic_algorithms(previous_enabled, warn_only=previous_warn)
            torch.utils.deterministic.fill_uninitialized_memory = previous_fill


@contextlib.contextmanager
def submission_guards(python_level: dict[int, str], aten_level: set[str], seen: list[str],
                      provenance: Provenance | None = None):
    """Everything in force during a checked call; `seen` collects forbidden names caught (and
    `provenance.forbidden`, when given, what each was called on)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(poisoned_allocations())
        if python_level:
            stack.enter_context(_ForbiddenFunctions(python_level, seen, provenance))
        if aten_level:
            stack.enter_context(_ForbiddenAtenOps(aten_level, seen, provenance))
        yield


# --- torch_compute: PyTorch may not do the work (grader/kata/allowed_ops.py names what it may do) ---
#
# Three independent records of one checked call, compared after it:
# - a TorchDispatchMode on top of the mode stack sees every aten op the submission calls (by
#   overload packet), flags those not allowed, ops on tensor subclasses (whose own
#   __torch_dispatch__ could hide work) and copies from a device to the host;
# - a TorchFunctionMode sees Python-level reads of values on the host (.numpy(), .tolist(),
#   printing), which run no aten op;
# - the legacy autograd profiler (RecordFunction callbacks, below the Python dispatch key) sees
#   the ops that ran even where the modes were switched off (_DisableTorchDispatch, popped
#   modes, excluded dispatch keys, a Python kernel registered over an allowed op).
# Ways round all three that Python offers directly (redispatch with an explicit key set, turning
# RecordFunction or the profiler off, threads) are wrapped before the submission is imported and
# leave evidence. What no in-process check can see is listed in docs/SCORING.md.

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


_machinery = threading.local()  # depth of Triton's own argument marshalling on this thread


def _in_machinery() -> bool:
    return getattr(_machinery, "depth", 0) > 0


@contextlib.contextmanager
def grader_machinery():
    """The grader's or Triton's own tensor work inside a checked call (guard-band copies, the
    interpreter's argument copies): judged by the base allow-list, never by the kata's
    `forbidden`, so a kata may forbid aten.copy_ without tripping over them."""
    _machinery.depth = getattr(_machinery, "depth", 0) + 1
    try:
        yield
    finally:
        _machinery.depth -= 1


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
        elif name not in self.allowed and not (_in_machinery() and name in BASE_ALLOWED):
            kind = self._kind(name, args, kwargs)
            self.record.add(name, kind=kind)
        result = func(*args, **(kwargs or {}))
        if self.provenance is not None and not _in_machinery():
            try:
                self.provenance.follow(name, args, kwargs, result, kind)
            except Exception:  # noqa: BLE001 - what it wrote stays of unknown origin: the inputs'
                pass
        if name in _COPY_OPS:
            if _reads_to_host(args, result):
                self.record.add(f"{name} from the device to the host (.cpu(), .to('cpu'))", name,
                                kind=self._kind(name, args, kwargs))
            cast = _cast_into(name, args, result) if self.forbidden_casts and not _in_machinery() else None
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
