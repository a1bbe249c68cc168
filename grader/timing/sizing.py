"""How many rounds and calls a bench case is timed with (grader.timing.timer.time_pair).

By default the count comes from the baseline (about ROUND_MS of its kernel time per round, 10
to 100 calls, 5 rounds of 3 warm-up calls and the samples): the submission cannot size its own
run. But a correct kernel 100x slower than the baseline would then spend minutes in the timer,
and slow is not hung: when the calls' cost (the submission's time per call, as its checked call
took it and, where that looks slow, as the timer takes it in one untimed call; plus the
baseline's) would take more than the case's budget, the run shrinks to
fit: one warm-up call per round (the kernel has already run twice at this shape), fewer samples,
then fewer rounds, down to a floor of one round of one warm-up call and one sample. A case's
budget is BUDGET_MS, or less where the grade times many cases (GRADE_BUDGET_MS shared among
them): a kernel of a second a call is timed in seconds, whatever the kata.

The submission's checked-call time is its own (it could sleep in its checked calls): all it can
buy is a shorter run of the same timer, whose median still measures every timed call it makes,
and which verifies the same number of kept calls out of fewer.
"""

from __future__ import annotations

from dataclasses import dataclass

ROUNDS = 5
WARMUP = 3  # untimed calls per round (timed separately in the first round, for the report)
ROUND_MS = 10.0  # kernel time per round and side, from the baseline's estimate
MIN_SAMPLES, MAX_SAMPLES = 10, 100
BUDGET_MS = 2000.0  # kernel time (both sides) one bench case's timing may take, above the floor
GRADE_BUDGET_MS = 15000.0  # shared among a grade's bench cases where they are many
SLOW_WARMUP = 1
SLOW_MIN_SAMPLES = 3  # per round, while there are several rounds
FLOOR = (1, 1, 1)  # rounds, warm-up calls, samples: the least a timing makes


@dataclass(frozen=True)
class Run:
    rounds: int
    warmup: int
    samples: int  # timed calls (or graph replays) per round and side

    @property
    def calls(self) -> int:
        """The submission's calls (or replays) in all: what the parent chooses its kept calls from."""
        return self.rounds * (self.warmup + self.samples)


def case_budget_ms(bench_cases: int) -> float:
    """One bench case's budget in a grade that times `bench_cases` of them."""
    return min(BUDGET_MS, GRADE_BUDGET_MS / max(1, bench_cases))


def baseline_samples(baseline_ms: float) -> int:
    return max(MIN_SAMPLES, min(MAX_SAMPLES, round(ROUND_MS / max(baseline_ms, 1e-4))))


def plan_run(baseline_ms: float, call_ms: float | None = None, calls_per_sample: int = 1,
             budget_ms: float = BUDGET_MS) -> Run:
    """The run for a case whose baseline takes `baseline_ms` a call and the submission `call_ms`
    (None: not known), each sample being `calls_per_sample` calls (a CUDA graph's replay)."""
    default = Run(ROUNDS, WARMUP, baseline_samples(baseline_ms))
    per_sample = (max(call_ms or 0.0, 0.0) + max(baseline_ms, 0.0)) * max(1, calls_per_sample)
    if per_sample <= 0 or default.calls * per_sample <= budget_ms:
        return default
    affordable = int(budget_ms // per_sample)
    for rounds in (ROUNDS, 3):
        per_round = affordable // rounds
        if per_round >= SLOW_WARMUP + SLOW_MIN_SAMPLES:
            return Run(rounds, SLOW_WARMUP, min(default.samples, per_round - SLOW_WARMUP))
    rounds, warmup, samples = FLOOR
    return Run(rounds, warmup, max(samples, min(default.samples, affordable - warmup)))
