"""GPU timing (in the worker): submission and baseline, interleaved, on inputs they cannot replay.

Why not triton.testing.do_bench for the timed cases: do_bench sizes its run from the timed
function's own first calls, which a submission controls, and it cannot change the inputs
between calls. The loop below is do_bench's (CUDA events around each call, the L2 flushed before
each, warm-up excluded, the median kept), with four changes:

- the number of calls comes from the baseline, the same for both (shrunk to a bounded time for
  a slow submission, grader.timing.sizing);
- before every call (outside the timed window) every float input is rescaled at random,
  element by element (grader.timing.perturb), so a cache keyed on the contents misses and a
  result kept from an earlier call costs as much to correct as to compute;
- after every call of the submission the parent is asked whether to keep its outputs
  (`sampler.keep`); it alone knows which calls it will have verified, and answers only once the
  call's outputs exist, so nothing the submission can read tells it which calls are checked;
  kept outputs are copied at once, on the timed stream, and the checker rebuilds their inputs
  by replaying the changes (grader.timing.perturb.replay);
- rounds alternate submission and baseline, and the speedup is the median of the per-round
  ratios, which cancels clock drift between rounds;
- kernels shorter than SHORT_MS are timed by replaying a CUDA graph of many calls, each on its
  own input set, so launch overhead does not dominate;
- the GPU is held back (a spin-sleep) before each call, after the input changes are queued,
  for longer than the host took to queue the last calls, so the start event never fires while
  the call is still being launched: the time is the kernels' even where the submission's
  Python is slow (`_Lead`).

The ceilings (copy bandwidth, matmul rate) use do_bench itself: they run before the submission
is imported.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

import torch
import triton.testing

from grader.timing.ceilings import floor_ms  # noqa: F401 - the timer's callers import it from here
from grader.timing.host_syncs import HostSyncs, watched
from grader.timing import sizing
from grader.timing.perturb import Perturber, change_call, seeded_keys, tensors

# Bound here, before the submission is imported: patching the public names changes nothing.
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize
_CUDAGraph = torch.cuda.CUDAGraph
_do_bench = triton.testing.do_bench
_sleep = torch.cuda._sleep
_perf_counter = time.perf_counter

# How many rounds and calls: grader.timing.sizing (from the baseline, shrunk for slow kernels).
WARMUP = sizing.WARMUP
SHORT_MS = 0.02  # shorter kernels are timed through CUDA-graph replay
GRAPH_TARGET_MS = 0.25  # one replay runs at least this long
MAX_GRAPH_CALLS = 64
FLUSH_BYTES = 256 << 20


@dataclass
class Sample:
    """A kept timed call: the submission's `call`-th call (or replay), on input set `set`."""
    call: int
    set: int
    outputs: object = None


@dataclass
class Timing:
    time_ms: float
    baseline_ms: float
    speedup: float
    method: str  # "events" | "cuda_graph"
    calls_per_sample: int
    samples: int  # timed samples per round and side
    round_speedups: list[float]
    warmup_ms: list[float]  # the submission's first calls in this phase
    n_sets: int = 0
    checked: list[Sample] = field(default_factory=list)
    host_syncs: HostSyncs | None = None  # in one untimed call of the submission; None: not watched


def _flush_buffer() -> torch.Tensor:
    return torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")


class _Lead:
    """How far the GPU is held back before each timed call, so that the host has queued the whole
    call (L2 flush, the call's own Python: launches, the op recorder) before the start event
    fires; otherwise the time is partly the host's launch overhead, not the kernels'.
    The lead follows the host's own recent time per call, with a margin; it costs GPU time only
    where the host is slower than the GPU anyway."""

    MARGIN, START_MS, MAX_MS, WINDOW = 1.5, 0.2, 5.0, 8

    def __init__(self):
        self.host_ms: list[float] = []

    def cycles(self) -> int:
        lead_ms = self.MARGIN * max(self.host_ms[-self.WINDOW:], default=self.START_MS)
        return int(min(self.MAX_MS, lead_ms) * _cycles_per_ms())

    def took(self, seconds: float) -> None:
        self.host_ms.append(seconds * 1e3)


_CYCLES_PER_MS: list[float] = []


def _cycles_per_ms() -> float:
    """The GPU's spin-sleep rate (clock cycles per ms), measured once per process."""
    if not _CYCLES_PER_MS:
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _sleep(1_000_000)  # clocks up first
        _record(start)
        _sleep(1_000_000)
        _record(end)
        _synchronize()
        _CYCLES_PER_MS.append(1_000_000 / max(_elapsed(start, end), 1e-3))
    return _CYCLES_PER_MS[0]


def _event_times(run_call, n: int, before, flush: torch.Tensor, after=None,
                 lead: _Lead | None = None) -> list[float]:
    starts = [_Event(enable_timing=True) for _ in range(n)]
    ends = [_Event(enable_timing=True) for _ in range(n)]
    lead = lead if lead is not None else _Lead()
    for i in range(n):
        # The input changes are queued before the hold: the host time they take (a graph's
        # sets, a large input) must not eat into the lead the call's own launch needs.
        before(i)
        if flush.is_cuda:
            _sleep(lead.cycles())
        queued = _perf_counter()
        flush.zero_()
        _record(starts[i])
        run_call(i)
        _record(ends[i])
        lead.took(_perf_counter() - queued)
        if after:
            after(i)
    _synchronize()
    return [_elapsed(s, e) for s, e in zip(starts, ends)]


def estimate_ms(fn, args, flush) -> float:
    fn(*args)
    times = _event_times(lambda i: fn(*args), 3, lambda i: None, flush)
    return statistics.median(times)


class _EagerSide:
    """One side (submission or baseline) timed call by call, rotating over its input sets."""

    method = "events"
    calls_per_sample = 1

    def __init__(self, fn, sets, change, sampler, launch_log, watch_call: int | None = None):
        self.fn, self.sets, self.change, self.sampler = fn, sets, change, sampler
        self.launch_log = launch_log
        self.checked: list[Sample] = []
        self.calls = 0
        self._last = None
        self.lead = _Lead()
        # The call run with PyTorch's sync warnings on (an untimed warm-up call), and what it showed.
        self.watch_call, self.host_syncs = watch_call, None

    def run(self, n: int, flush) -> list[float]:
        def before(i):
            self.change(self.calls)

        def call(i):
            args = self.sets[self.calls % len(self.sets)]
            if self.calls == self.watch_call:
                self._last, self.host_syncs = watched(lambda: self.fn(*args))
            else:
                self._last = self.fn(*args)

        def after(i):
            # Asked once the outputs exist (and outside the timed window): too late to change them.
            if self.sampler is not None and self.sampler.keep(self.calls) is not None:
                self.checked.append(Sample(self.calls, self.calls % len(self.sets), _clone_all(self._last)))
            self._last = None
            self.calls += 1

        return _event_times(call, n, before, flush, after, self.lead)


class _GraphSide:
    """One side timed by replaying a CUDA graph of `len(sets)` calls, one per input set."""

    method = "cuda_graph"

    def __init__(self, fn, sets, change, sampler, launch_log):
        self.sets, self.change, self.sampler, self.launch_log = sets, change, sampler, launch_log
        self.calls_per_sample = len(sets)
        self.checked: list[Sample] = []
        self.lead = _Lead()
        self.replays = 0
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            if launch_log is not None:
                launch_log.stream = side.cuda_stream
            for args in sets[:2]:
                fn(*args)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = _CUDAGraph()
        with torch.cuda.graph(self.graph):
            if launch_log is not None:
                launch_log.stream = torch.cuda.current_stream().cuda_stream
            self.outputs = [fn(*args) for args in sets]
        if launch_log is not None:
            launch_log.stream = torch.cuda.current_stream().cuda_stream
        # A function that reuses its output buffer across calls leaves one replay holding the
        # last set's result in every set's output, and a kept sample could not be checked:
        # time it call by call instead (time_pair falls back when this raises).
        owners: dict[int, int] = {}
        for index, out in enumerate(self.outputs):
            for t in tensors(out):
                if owners.setdefault(t.untyped_storage().data_ptr(), index) != index:
                    raise RuntimeError("the calls share an output buffer across input sets")

    def run(self, n: int, flush) -> list[float]:
        def before(i):
            self.change(self.replays)

        def call(i):
            self.graph.replay()

        def after(i):
            kept = self.sampler.keep(self.replays) if self.sampler is not None else None
            if kept is not None:
                index = kept % len(self.sets)
                self.checked.append(Sample(self.replays, index, _clone_all(self.outputs[index])))
            self.replays += 1

        times = _event_times(call, n, before, flush, after, self.lead)
        return [t / self.calls_per_sample for t in times]


def _clone_all(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone_all(v) for v in value)
    return value


def graph_calls(estimate: float) -> int:
    return max(2, min(MAX_GRAPH_CALLS, math.ceil(GRAPH_TARGET_MS / max(estimate, 1e-4))))


def time_pair(submission, baseline, make_args, *, seed: int, launch_log=None,
              use_graph: bool | None = None, sampler=None, watch_syncs: bool | None = None,
              call_ms: float | None = None, budget_ms: float = sizing.BUDGET_MS) -> Timing:
    """Time submission and baseline, both on input sets drawn by make_args(salt) -> args tuple.

    Sets are drawn with salts "/timing<i>". Before its first timed call the sampler is told how
    many calls the submission will make (`sampler.begin(calls, n_sets)`); after each call it is
    asked `sampler.keep(call)`: None, or a set index whose outputs are kept (Timing.checked).
    The submission's input changes are drawn from the keys `sampler.change_key()` gives, one per
    call (the parent's, sent with its answer to the previous call), or from `seed` where the
    sampler has none: grader.timing.perturb.replay rebuilds them from the same keys.

    Timed call by call, the submission's first warm-up call of the second round runs with
    PyTorch's sync warnings on (grader.timing.host_syncs; `watch_syncs`, by default on a GPU):
    Timing.host_syncs. A CUDA graph cannot capture a sync, so a submission that syncs is never
    timed by replay.

    `call_ms`: the submission's time per call as its checked calls took it, if known: a kernel
    that is slow there is timed once more on the first set, untimed, and if it is slow there too
    its run is shrunk to fit `budget_ms` (grader.timing.sizing).
    """
    flush = _flush_buffer()
    first = make_args("/timing0")
    estimate = estimate_ms(baseline, first, flush)
    short = estimate < SHORT_MS if use_graph is None else use_graph
    count = graph_calls(estimate) if short else 3
    sets = [first] + [make_args(f"/timing{i}") for i in range(1, count)]
    per_sample = count if short else 1
    if sizing.plan_run(estimate, call_ms, per_sample, budget_ms) != sizing.plan_run(estimate, None, per_sample, budget_ms):
        # The checked call looked slow, but its time includes the guards' overhead: one untimed
        # call on the set as drawn, timed as the timer times (no guards, the L2 flushed), decides.
        call_ms = min(call_ms, _event_times(lambda i: submission(*first), 1, lambda i: None, flush)[0])
    run = sizing.plan_run(estimate, call_ms, per_sample, budget_ms)
    # Only the submission's calls change the inputs (the baseline caches nothing), so the changes
    # to the shared sets are the submission's alone and replay exactly. Each change's key comes
    # from the parent, one call at a time (the sampler's change_key): a submission that found
    # this process's state could not know the inputs of a call before the call.
    next_key = getattr(sampler, "change_key", None) or seeded_keys(seed)
    perturber = Perturber()

    def sub_change(call, all_sets):
        change_call(perturber, sets, call, next_key(), all_sets)

    no_change = lambda call: None  # noqa: E731
    method, tried_graph = "events", short
    if short:
        try:
            sub_side = _GraphSide(submission, sets, lambda call: sub_change(call, True), sampler, launch_log)
            base_side = _GraphSide(baseline, sets, no_change, None, None)
            method = "cuda_graph"
        except Exception:  # noqa: BLE001 - not capturable (a host sync, say): time call by call
            torch.cuda.synchronize()
            short = False
    if not short:
        if tried_graph:  # a failed capture may have run the submission on them: draw afresh
            sets = [make_args(f"/timing{i}") for i in range(3)]
            run = sizing.plan_run(estimate, call_ms, 1, budget_ms)
        watch = flush.is_cuda if watch_syncs is None else watch_syncs
        sub_side = _EagerSide(submission, sets, lambda call: sub_change(call, False), sampler, launch_log,
                              watch_call=run.warmup + run.samples if watch and run.rounds > 1 else None)
        base_side = _EagerSide(baseline, sets, no_change, None, None)
    if sampler is not None:
        sampler.begin(run.calls, len(sets))
    round_sub, round_base, ratios, warmup_ms = [], [], [], []
    for r in range(run.rounds):
        order = (sub_side, base_side) if r % 2 == 0 else (base_side, sub_side)
        for side in order:
            warm = side.run(run.warmup, flush)
            if side is sub_side and r == 0:
                warmup_ms = warm
            times = side.run(run.samples, flush)
            (round_sub if side is sub_side else round_base).append(statistics.median(times))
        ratios.append(round_base[-1] / round_sub[-1])
    return Timing(
        time_ms=statistics.median(round_sub), baseline_ms=statistics.median(round_base),
        speedup=statistics.median(ratios), method=method,
        calls_per_sample=sub_side.calls_per_sample, samples=run.samples, round_speedups=ratios,
        warmup_ms=warmup_ms, n_sets=len(sets), checked=sub_side.checked,
        host_syncs=getattr(sub_side, "host_syncs", None),
    )


def held_median_ms(fn, rep_ms: float = 100.0, warmup_ms: float = 25.0) -> float:
    """fn()'s median time per call, timed as a grade times one: the L2 flushed before each call,
    and the GPU held back until the host has queued the call (`_Lead`), so that a call of several
    launches is timed by its kernels and not by the host's launch overhead. For benchmarks
    (benchmarks/bench.py): the same loop as do_bench, sized from fn's own first calls."""
    flush, lead = _flush_buffer(), _Lead()

    def call(i):
        fn()

    estimate = max(statistics.median(_event_times(call, 3, lambda i: None, flush, lead=lead)), 1e-3)
    _event_times(call, max(1, min(1000, int(warmup_ms / estimate))), lambda i: None, flush, lead=lead)
    calls = max(10, min(1000, int(rep_ms / estimate)))
    return statistics.median(_event_times(call, calls, lambda i: None, flush, lead=lead))


def median_ms(fn) -> float:
    # For the ceilings only: do_bench flushes the L2 before every call and excludes its warm-up.
    return float(_do_bench(fn, warmup=25, rep=100, return_mode="median"))


def _copy_gbps(n: int = 1 << 28) -> float:
    # 1 GiB of float32: far larger than any L2. Bytes read + bytes written.
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    return 2 * n * 4 / (median_ms(lambda: dst.copy_(src)) * 1e-3) / 1e9


def _matmul_tflops(m: int = 8192) -> float:
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    return 2 * m**3 / (median_ms(lambda: a @ b) * 1e-3) / 1e12


def measure_ceilings() -> dict:
    """Device-to-device copy bandwidth and dense bf16 matmul rate, measured here and now."""
    props = torch.cuda.get_device_properties(0)
    ceilings = {"device": props.name, "copy_gbps": _copy_gbps(), "matmul_tflops": _matmul_tflops(),
                "l2_bytes": getattr(props, "L2_cache_size", None)}
    torch.cuda.empty_cache()  # the buffers above are freed on return; give the memory back
    return ceilings
