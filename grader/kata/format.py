"""The kata format: kata.yaml parsed and validated into plain dataclasses.

The format is documented in docs/KATA_FORMAT.md; this module is its single source of truth.
It imports neither torch nor triton, so listing and showing katas stays fast.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from grader.kata.allowed_ops import CAST_TARGETS, HOST_READS, is_op_name
from grader.kata.costexpr import CostExpressionError, evaluate, number_or_expression
from grader.kata.time_limits import GRADE_LIMIT_S
from grader.kata.memory_budget import MemoryBudget, MemoryBudgetError, parse_memory_budget

MODES = ("interpret", "gpu")
DIFFICULTIES = ("easy", "medium", "hard")
# Dtype names a kata may use; kept as strings here so this module needs no torch.
DTYPES = (
    "float64", "float32", "float16", "bfloat16",
    "float8_e4m3fn", "float8_e5m2",
    "int64", "int32", "int16", "int8", "uint8", "bool",
)
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
# Bytes per element of each of them (torch's element_size), for the cost model without torch.
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
            "float8_e5m2": 1, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
_ITEMSIZES = sorted(set(ITEMSIZE.values()))  # each element size a cost is checked at
# assert_close's own defaults, used where a task declares no tolerance for a float dtype.
DEFAULT_TOLERANCES = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1.3e-6),
    "float16": (1e-5, 1e-3),
    "bfloat16": (1e-5, 1.6e-2),
}
# What the Triton interpreter cannot grade fairly, whatever the kata: its bf16 arithmetic
# (and bf16 tl.dot) works on raw bit patterns, a known upstream limitation.
INTERPRETER_SKIPS = {
    "bfloat16": "the Triton interpreter computes bf16 arithmetic (and bf16 tl.dot) on raw bit "
    "patterns, a known upstream limitation; bf16 is graded on a GPU only",
}
CASE_RESERVED_KEYS = ("name", "dtypes", "modes", "bench", "note")


class KataFormatError(ValueError):
    """A kata.yaml that does not follow docs/KATA_FORMAT.md."""


@dataclass(frozen=True)
class Tolerance:
    """atol and rtol: numbers, or expressions over the case's fields ("2e-3 * sqrt(K / 64)") for
    errors that grow with the case's reduction length; `resolved` turns them into numbers."""

    atol: float | str
    rtol: float | str

    @property
    def depends_on_case(self) -> bool:
        return isinstance(self.atol, str) or isinstance(self.rtol, str)

    def resolved(self, params: dict | None) -> "Tolerance":
        """Numbers for this case (params: the case's fields)."""
        if not self.depends_on_case:
            return self
        if params is None:
            raise ValueError(f"tolerance {self} depends on the case, and no case was given")
        return Tolerance(*(float(evaluate(v, params)) if isinstance(v, str) else v
                           for v in (self.atol, self.rtol)))


@dataclass(frozen=True)
class OutputSpec:
    """One value the grader checks after the call: returned, or an argument updated in place."""

    name: str
    dtype: str  # a dtype name, or the name of an argument whose dtype it shares
    compare: str = "allclose"  # allclose | exact | ulp | norm
    ulp: int = 0
    # compare: {norm: TOL}: ||got - truth||_F <= TOL * ||truth||_F over the whole tensor; TOL is a
    # number or an expression over the case's fields, like a tolerance.
    norm: float | str | None = None
    inplace: bool = False
    # This output's own {dtype: Tolerance}, overriding the task's: for an output whose error
    # grows with a different reduction than the others' (a weight gradient summed over rows).
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    # spec.py function giving each element's magnitude for the rule |got - expected| <= atol +
    # rtol * scale, in place of rtol * |expected|: for sums, the sum of the terms' absolute values
    # (the bound of any summation order's rounding error), so a result that cancels to near 0 is
    # still judged by the size of what was summed.
    scale_fn: str | None = None
    # spec.py function giving each element's extra absolute allowance, added to the rule:
    # |got - expected| <= atol + rtol * scale + allowance. For math that amplifies rounding in
    # a way rtol cannot express (a constant 1 - beta rounded to float32 on the device, exp of an
    # offset |x| ~ 1000): the spec derives it from the honest formulations' error analysis.
    allowance_fn: str | None = None
    # What the allowance models, in a phrase ("a constant such as 1 - beta2 computed on the
    # device in float32: compute it on the host in float64 and pass it in"): a failure within
    # NEAR_MISS times the allowance is named as that effect (a near miss), not a bug.
    near_miss: str = ""


@dataclass(frozen=True)
class Case:
    name: str
    params: dict[str, Any]
    dtypes: tuple[str, ...]
    modes: tuple[str, ...]
    hidden: bool
    bench: bool = False
    note: str = ""


@dataclass(frozen=True)
class SkipRule:
    reason: str
    mode: str | None = None
    dtype: str | None = None
    case: str | None = None

    def matches(self, mode: str, dtype: str, case: str) -> bool:
        return (
            (self.mode is None or self.mode == mode)
            and (self.dtype is None or self.dtype == dtype)
            and (self.case is None or self.case == case)
        )


@dataclass(frozen=True)
class TimedRows:
    """`timed_rows: {dim, count}`: the kept timed calls of a bench case are verified at `count`
    random positions along `dim` of every output, plus every position the timing's input changes
    touched, instead of everywhere (the checked calls on the same shape were verified whole).
    The spec's reference and scale functions take `rows=` (a sorted int64 tensor of positions)
    and compute those positions only: for a truth that costs seconds per call (attention)."""
    dim: int
    count: int


@dataclass(frozen=True)
class Task:
    name: str  # also the entry function the user writes
    signature: str
    args: tuple[str, ...]
    outputs: tuple[OutputSpec, ...]
    dtypes: tuple[str, ...]
    tolerances: dict[str, Tolerance]
    cases: tuple[Case, ...]
    threshold: float
    baseline_name: str
    inputs_fn: str = "make_inputs"
    reference_fn: str = "reference"
    baseline_fn: str = "baseline"
    forbidden: tuple[str, ...] = ()
    allowed_ops: tuple[str, ...] = ()  # PyTorch ops allowed beyond grader.kata.allowed_ops.BASE_ALLOWED
    # dtypes PyTorch may not convert into during a call (a quantization's rounding is its work)
    forbidden_casts: tuple[str, ...] = ()
    cost_bytes: str | None = None
    cost_flops: str | None = None
    skip: tuple[SkipRule, ...] = ()
    property_fn: str | None = None  # check: {property: FN}: judged by spec.FN, not a ground truth
    # GPU memory a call may use beyond its inputs and outputs (grader.kata.memory_budget); None: no cap
    memory_budget: MemoryBudget | None = None
    # The kept timed calls verified at a sample of positions along one dim (TimedRows); None: whole
    timed_rows: "TimedRows | None" = None

    @property
    def returns(self) -> tuple[OutputSpec, ...]:
        return tuple(o for o in self.outputs if not o.inplace)

    @property
    def inplace(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.outputs if o.inplace)

    def tolerance(self, dtype: str, output: OutputSpec | None = None,
                  case: "Case | None" = None) -> Tolerance:
        """The tolerance for an output of this dtype: the output's own, else the task's; with a
        case, expressions are evaluated over its fields (without one, they stay as written).
        A norm-compared output's is (atol 0, rtol its norm tolerance), whatever the dtype."""
        if output is not None and output.compare == "norm":
            tol = Tolerance(0.0, output.norm)
        elif output is not None and dtype in output.tolerances:
            tol = output.tolerances[dtype]
        elif dtype in self.tolerances:
            tol = self.tolerances[dtype]
        else:
            tol = Tolerance(*DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0)))
        return tol.resolved(case.params) if case is not None else tol

    def case(self, name: str) -> "Case":
        return next(c for c in self.cases if c.name == name)

    def skip_reason(self, mode: str, dtype: str, case: Case) -> str | None:
        """Why this case cannot run in this mode, or None when it runs."""
        if mode not in case.modes:
            return "too large for the Triton interpreter: graded on a GPU only"
        for rule in self.skip:
            if rule.matches(mode, dtype, case.name):
                return rule.reason
        if mode == "interpret" and dtype in INTERPRETER_SKIPS:
            return INTERPRETER_SKIPS[dtype]
        return None

    def cost(self, case: Case, itemsize: int) -> tuple[float | None, float | None]:
        """(bytes moved, FLOPs) for the roofline, from the declared expressions."""
        names = dict(case.params, itemsize=itemsize)
        nbytes = evaluate(self.cost_bytes, names) if self.cost_bytes else None
        flops = evaluate(self.cost_flops, names) if self.cost_flops else None
        return nbytes, flops


@dataclass(frozen=True)
class Kata:
    name: str
    title: str
    difficulty: str
    topics: tuple[str, ...]
    minutes: int
    statement: str
    hints: tuple[str, ...]
    tasks: tuple[Task, ...]
    directory: Path
    reference_path: Path
    threshold: float = 1.0  # the default speedup threshold of its tasks
    roofline_target: float = 0.85
    time_limit_s: dict[str, float] = field(default_factory=lambda: dict(GRADE_LIMIT_S))
    # The GPU memory a whole GPU grade of the reference peaks at (worker, checker, CUDA contexts),
    # measured on an 80 GB H100; None when not declared.
    gpu_memory_gib: float | None = None

    @property
    def spec_path(self) -> Path:
        return self.directory / "spec.py"

    @property
    def stub_path(self) -> Path:
        return self.directory / "stub.py"


def _require(mapping: dict, key: str, where: str) -> Any:
    if key not in mapping:
        raise KataFormatError(f"{where}: missing required key '{key}'")
    return mapping[key]


def _as_tuple(value: Any) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def _check_dtype(name: str, where: str) -> str:
    if name not in DTYPES:
        raise KataFormatError(f"{where}: unknown dtype '{name}' (known: {', '.join(DTYPES)})")
    return name


def _parse_output(raw: Any, args: tuple[str, ...], inplace: bool, where: str) -> OutputSpec:
    if isinstance(raw, str):
        raw = {"name": raw}
    name = _require(raw, "name", where)
    if inplace and name not in args:
        raise KataFormatError(f"{where}: in-place output '{name}' is not an argument")
    dtype = raw.get("dtype", name if inplace else args[0])
    if dtype not in args:
        _check_dtype(dtype, where)
    compare = raw.get("compare", "allclose")
    ulp, norm = 0, None
    if isinstance(compare, dict) and "norm" in compare:
        if set(compare) != {"norm"}:
            raise KataFormatError(f"{where}, output '{name}': compare must be {{norm: TOL}} alone")
        norm = _tolerance_value(compare["norm"], f"{where}, output '{name}': compare norm")
        if isinstance(norm, float) and not norm >= 0:
            raise KataFormatError(f"{where}, output '{name}': compare norm is negative: {norm}")
        compare = "norm"
    elif isinstance(compare, dict):
        ulp = int(_require(compare, "ulp", where))
        compare = "ulp"
    if compare not in ("allclose", "exact", "ulp", "norm"):
        raise KataFormatError(f"{where}: compare must be allclose, exact, {{ulp: N}} or {{norm: TOL}}")
    if compare == "norm" and raw.get("tolerance") is not None:
        raise KataFormatError(f"{where}, output '{name}': a norm-compared output takes its "
                              "tolerance from compare: {norm: TOL}, not from `tolerance`")
    tolerances = _parse_tolerances(raw.get("tolerance"), f"{where}, output '{name}'")
    scale_fn = raw.get("scale")
    if scale_fn is not None and (not isinstance(scale_fn, str) or not scale_fn.isidentifier()):
        raise KataFormatError(f"{where}, output '{name}': scale must name a function in spec.py")
    if scale_fn is not None and compare != "allclose":
        raise KataFormatError(f"{where}, output '{name}': scale applies to allclose outputs only")
    allowance_fn = raw.get("allowance")
    if allowance_fn is not None and (not isinstance(allowance_fn, str) or not allowance_fn.isidentifier()):
        raise KataFormatError(f"{where}, output '{name}': allowance must name a function in spec.py")
    if allowance_fn is not None and compare != "allclose":
        raise KataFormatError(f"{where}, output '{name}': allowance applies to allclose outputs only")
    return OutputSpec(name=name, dtype=dtype, compare=compare, ulp=ulp, inplace=inplace,
                      tolerances=tolerances, scale_fn=scale_fn, norm=norm, allowance_fn=allowance_fn,
                      near_miss=str(raw.get("near_miss") or "").strip())


def _parse_tolerances(raw: Any, where: str) -> dict[str, Tolerance]:
    """{dtype: {atol, rtol}} -> {dtype: Tolerance}."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise KataFormatError(f"{where}: tolerance must map dtypes to {{atol, rtol}}")
    tolerances = {}
    for dtype, tol in raw.items():
        _check_dtype(dtype, where)
        if not isinstance(tol, dict) or "atol" not in tol or "rtol" not in tol:
            raise KataFormatError(f"{where}: tolerance for {dtype} needs atol and rtol")
        tolerances[dtype] = Tolerance(*(_tolerance_value(tol[k], f"{where}: tolerance for {dtype}, {k}")
                                        for k in ("atol", "rtol")))
    return tolerances


def _tolerance_value(raw: Any, where: str) -> float | str:
    """A number, or an expression over the case's fields (checked per case once parsed)."""
    try:
        return number_or_expression(raw)
    except CostExpressionError as exc:
        raise KataFormatError(f"{where}: {exc}") from None


def _parse_case(raw: dict, task_dtypes: tuple[str, ...], hidden: bool, where: str) -> Case:
    name = _require(raw, "name", where)
    dtypes = _as_tuple(raw.get("dtypes")) or task_dtypes
    for d in dtypes:
        if d not in task_dtypes:
            raise KataFormatError(f"{where}, case '{name}': dtype {d} is not one of the task's")
    modes = _as_tuple(raw.get("modes")) or MODES
    for m in modes:
        if m not in MODES:
            raise KataFormatError(f"{where}, case '{name}': unknown mode '{m}'")
    params = {k: v for k, v in raw.items() if k not in CASE_RESERVED_KEYS}
    return Case(
        name=name, params=params, dtypes=tuple(dtypes), modes=tuple(modes), hidden=hidden,
        bench=bool(raw.get("bench", False)), note=raw.get("note", ""),
    )


def _parse_task(raw: dict, kata_defaults: dict, where: str) -> Task:
    name = _require(raw, "name", where)
    where = f"{where}, task '{name}'"
    signature = _require(raw, "signature", where)
    match = re.match(r"\s*([A-Za-z_]\w*)\s*\(", signature)
    if not match or match.group(1) != name:
        raise KataFormatError(f"{where}: signature must start with '{name}('")
    args = tuple(_require(raw, "args", where))
    dtypes = tuple(_check_dtype(d, where) for d in _require(raw, "dtypes", where))
    outputs = tuple(_parse_output(o, args, False, where) for o in raw.get("returns", []))
    outputs += tuple(_parse_output(o, args, True, where) for o in raw.get("inplace", []))
    if not outputs:
        raise KataFormatError(f"{where}: declares neither 'returns' nor 'inplace' outputs")
    tolerances = _parse_tolerances(raw.get("tolerance"), where)
    raw_cases = _require(raw, "cases", where)
    cases = tuple(_parse_case(c, dtypes, False, where) for c in raw_cases.get("public", []))
    cases += tuple(_parse_case(c, dtypes, True, where) for c in raw_cases.get("hidden", []))
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise KataFormatError(f"{where}: case names must be unique")
    baseline = raw.get("baseline", {})
    cost = raw.get("cost", {})
    forbidden = tuple(raw.get("forbidden", ())) + tuple(kata_defaults["forbidden"])
    allowed_ops = _parse_allowed_ops(raw.get("allowed_ops"), where) + kata_defaults["allowed_ops"]
    both = sorted(set(allowed_ops) & set(forbidden))
    if both:
        raise KataFormatError(f"{where}: {', '.join(both)} both allowed (allowed_ops) and forbidden")
    forbidden_casts = tuple(dict.fromkeys(
        _parse_forbidden_casts(raw.get("forbidden_casts"), where) + kata_defaults["forbidden_casts"]))
    skip = tuple(
        SkipRule(reason=_require(s, "reason", where), mode=s.get("mode"), dtype=s.get("dtype"),
                 case=s.get("case"))
        for s in raw.get("skip", [])
    )
    task = Task(
        name=name, signature=signature, args=args, outputs=outputs, dtypes=dtypes,
        tolerances=tolerances, cases=cases,
        threshold=float(raw.get("threshold", kata_defaults["threshold"])),
        baseline_name=baseline.get("name", "PyTorch eager"),
        inputs_fn=raw.get("inputs", "make_inputs"),
        reference_fn=raw.get("reference", "reference"),
        baseline_fn=baseline.get("function", "baseline"),
        forbidden=forbidden, allowed_ops=allowed_ops, forbidden_casts=forbidden_casts,
        cost_bytes=cost.get("bytes"), cost_flops=cost.get("flops"), skip=skip,
        property_fn=_parse_check(raw.get("check"), where),
        memory_budget=_parse_memory_budget(raw.get("memory_budget"), cases, where),
        timed_rows=_parse_timed_rows(raw.get("timed_rows"), where),
    )
    if task.timed_rows and task.property_fn:
        raise KataFormatError(f"{where}: timed_rows needs a ground truth; a property check has none")
    if task.timed_rows and any(o.compare == "norm" for o in task.outputs):
        raise KataFormatError(f"{where}: timed_rows samples positions, and a norm is of the whole "
                              "output: an output compared by norm cannot be sampled")
    _check_cost_expressions(task, where)
    _check_tolerance_expressions(task, where)
    return task


def _parse_allowed_ops(raw: Any, where: str) -> tuple[str, ...]:
    """kata.yaml `allowed_ops`: aten overload packets (aten.cat) or host reads (Tensor.tolist)."""
    names = _as_tuple(raw)
    for name in names:
        if not isinstance(name, str) or not is_op_name(name):
            raise KataFormatError(
                f"{where}: allowed_ops entry {name!r} is not an op name: name the op the dispatcher "
                f"sees, as namespace.op (aten.cat, not torch.cat or aten.cat.default), or one of "
                f"{', '.join(HOST_READS)}")
        if name.startswith("torch."):
            raise KataFormatError(f"{where}: allowed_ops entry {name!r}: name the aten op (aten.{name.split('.')[-1]})")
    return tuple(names)


def _parse_forbidden_casts(raw: Any, where: str) -> tuple[str, ...]:
    """kata.yaml `forbidden_casts`: torch dtype names (float8_e4m3fn) PyTorch may not convert into."""
    names = _as_tuple(raw)
    for name in names:
        if name not in CAST_TARGETS:
            raise KataFormatError(f"{where}: forbidden_casts entry {name!r} is not a torch dtype name "
                                  f"(one of {', '.join(CAST_TARGETS)})")
    return tuple(names)


def _parse_memory_budget(raw: Any, cases: tuple[Case, ...], where: str) -> MemoryBudget | None:
    """`memory_budget: {bytes: EXPR, what, advice}`, its expression checked on every case."""
    try:
        budget = parse_memory_budget(raw)
    except MemoryBudgetError as exc:
        raise KataFormatError(f"{where}: {exc}") from None
    if budget is not None:
        # At every element size, as the cost (the worker evaluates it at the case's dtype's).
        _check_on_cases(cases, where, [("memory_budget", lambda case: tuple(
            budget.limit(case.params, itemsize=size) for size in _ITEMSIZES))])
    return budget


def _parse_timed_rows(raw: Any, where: str) -> TimedRows | None:
    """`timed_rows: {dim: D, count: N}`, two integers, D >= 0 and N >= 1."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"dim", "count"} or not all(
            isinstance(raw[k], int) and not isinstance(raw[k], bool) for k in raw) \
            or raw["dim"] < 0 or raw["count"] < 1:
        raise KataFormatError(f"{where}: timed_rows must be {{dim: D, count: N}}: the dim of the "
                              "outputs to sample (D >= 0) and how many positions (N >= 1)")
    return TimedRows(dim=raw["dim"], count=raw["count"])


def _parse_check(raw: Any, where: str) -> str | None:
    """`check: {property: FN}`: the outputs are judged by spec.FN instead of a ground truth."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"property"} or not isinstance(raw["property"], str) \
            or not raw["property"].isidentifier():
        raise KataFormatError(f"{where}: check must be {{property: FUNCTION}}, FUNCTION a function "
                              "in spec.py that judges the outputs")
    return raw["property"]


def _check_tolerance_expressions(task: Task, where: str) -> None:
    """Every tolerance expression evaluates, to a number >= 0, on every case."""
    rules = [(f"tolerance for {d}", t) for d, t in task.tolerances.items()]
    rules += [(f"output '{o.name}', tolerance for {d}", t) for o in task.outputs for d, t in o.tolerances.items()]
    rules += [(f"output '{o.name}', compare norm", Tolerance(0.0, o.norm)) for o in task.outputs
              if o.compare == "norm"]
    _check_on_cases(task.cases, where, [
        (label, lambda case, tol=tol: (tol.resolved(case.params).atol, tol.resolved(case.params).rtol))
        for label, tol in rules if tol.depends_on_case])


def _check_on_cases(cases, where: str, rules) -> None:
    """Each (label, value_of) rule, value_of(case) -> numbers, evaluates on every case to numbers
    >= 0: a declared expression that names a field a case lacks fails when the kata loads."""
    for case in cases:
        for label, value_of in rules:
            try:
                values = value_of(case)
            except CostExpressionError as exc:
                raise KataFormatError(f"{where}, case '{case.name}': {label}: {exc}") from None
            if not all(v >= 0 for v in values):
                raise KataFormatError(f"{where}, case '{case.name}': {label} is negative "
                                      f"({', '.join(f'{v:g}' for v in values)})")


def _check_cost_expressions(task: Task, where: str) -> None:
    # At every element size: the grader works a timed case's floor out at its dtype's, and an
    # expression that fails there must fail here, when the kata loads, not in a learner's grade.
    for case in task.cases:
        for itemsize in _ITEMSIZES:
            try:
                task.cost(case, itemsize=itemsize)
            except CostExpressionError as exc:
                raise KataFormatError(f"{where}, case '{case.name}': cost at itemsize "
                                      f"{itemsize}: {exc}") from None


def parse_kata(raw: dict, directory: Path, reference_path: Path) -> Kata:
    where = f"{directory / 'kata.yaml'}"
    if not isinstance(raw, dict):
        raise KataFormatError(f"{where}: expected a mapping at the top level")
    name = _require(raw, "name", where)
    if name != directory.name:
        raise KataFormatError(f"{where}: name '{name}' differs from its folder '{directory.name}'")
    difficulty = _require(raw, "difficulty", where)
    if difficulty not in DIFFICULTIES:
        raise KataFormatError(f"{where}: difficulty must be one of {', '.join(DIFFICULTIES)}")
    hints = tuple(_require(raw, "hints", where))
    if len(hints) != 3:
        raise KataFormatError(f"{where}: needs exactly 3 hints (nudge, approach, near-solution)")
    defaults = {"threshold": raw.get("threshold", 1.0), "forbidden": raw.get("forbidden", ()),
                "allowed_ops": _parse_allowed_ops(raw.get("allowed_ops"), where),
                "forbidden_casts": _parse_forbidden_casts(raw.get("forbidden_casts"), where)}
    tasks = tuple(_parse_task(t, defaults, where) for t in _require(raw, "tasks", where))
    if not tasks:
        raise KataFormatError(f"{where}: needs at least one task")
    limits = dict(GRADE_LIMIT_S)
    limits.update({k: float(v) for k, v in (raw.get("time_limit_s") or {}).items()})
    gpu_memory = raw.get("gpu_memory_gib")
    if gpu_memory is not None and (isinstance(gpu_memory, bool) or not isinstance(gpu_memory, (int, float))
                                   or gpu_memory <= 0):
        raise KataFormatError(f"{where}: gpu_memory_gib must be a positive number of GiB, not {gpu_memory!r}")
    return Kata(
        name=name, title=_require(raw, "title", where), difficulty=difficulty,
        topics=tuple(raw.get("topics", ())), minutes=int(_require(raw, "minutes", where)),
        statement=_require(raw, "statement", where).strip(), hints=hints, tasks=tasks,
        directory=directory, reference_path=reference_path, threshold=float(defaults["threshold"]),
        roofline_target=float(raw.get("roofline_target", 0.85)), time_limit_s=limits,
        gpu_memory_gib=float(gpu_memory) if gpu_memory is not None else None,
    )


def load_kata(directory: Path) -> Kata:
    """Load katas/NAME/kata.yaml; the reference lives at ../../reference/NAME.py."""
    directory = Path(directory)
    path = directory / "kata.yaml"
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise KataFormatError(f"{path}: not valid YAML: {exc}") from None
    reference_path = directory.parent.parent / "reference" / f"{directory.name}.py"
    return parse_kata(raw, directory, reference_path)
