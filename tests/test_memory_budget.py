"""Memory budgets (grader/kata/memory_budget.py): the judgement, the meter's arithmetic and its hook in
the guard bands, all on the CPU. A CUDA caching allocator is simulated where the meter reads
one; the real measurement runs in the GPU grades (a budget kata's reference passes, and
tests/wrong_gpu/cross_entropy_fp32_copy.py fails with the diagnosis memory_budget)."""

from __future__ import annotations

import pytest
import torch

from grader.judge import failure_codes
from grader.kata import memory_budget
from grader.kata.memory_budget import PeakMeter, human_bytes, judge, output_bytes
from grader.sandbox.out_of_bounds import GUARD_BYTES, GuardedFactories


def test_within_the_budget_passes_and_over_it_says_by_how_much_and_why():
    assert judge(40_000_000, 43_075_502) is None
    assert judge(43_075_502, 43_075_502) is None  # the budget itself is allowed
    message = judge(4_203_000_000, 43_075_502, "2% of the logits, plus 1 MiB", "a float32 copy of the logits?")
    assert message == ("peak extra GPU memory 4.2 GB exceeds the budget 43.1 MB (2% of the logits, "
                       "plus 1 MiB): a float32 copy of the logits?")
    assert judge(2_000_000, 1_048_576) == "peak extra GPU memory 2 MB exceeds the budget 1.05 MB"


def test_sizes_read_in_decimal_units():
    assert [human_bytes(n) for n in (300, 12_345, 64e6, 2.1e9)] == ["300 bytes", "12.3 kB", "64 MB", "2.1 GB"]


def test_over_the_budget_is_the_diagnosis_memory_budget_with_advice_never_a_cheat():
    assert failure_codes.ADVICE["memory_budget"] and "memory_budget" in failure_codes.DIAGNOSES
    assert "memory_budget" not in failure_codes.CHEATS
    message = judge(4.2e9, 4.3e7, "2% of the logits", "a float32 copy of the logits?")
    found = failure_codes.from_message(message, "fail")
    assert found.code == "memory_budget" and found.message == message
    assert "wider dtype (x.float())" in found.advice


def test_the_outputs_own_bytes_are_counted_once_in_allocator_blocks():
    grad = torch.empty(8, 1000, dtype=torch.bfloat16)  # 16000 bytes: 32 blocks of 512 (16384)
    loss = torch.empty((), dtype=torch.float32)  # 4 bytes: one block
    assert output_bytes([grad, loss]) == 16_384 + 512
    assert output_bytes([grad, grad]) == 16_384
    assert output_bytes([torch.empty(0)]) == 0


class FakeAllocator:
    """The four counters PeakMeter reads, as the CUDA caching allocator keeps them."""

    def __init__(self, allocated: int):
        self.allocated = self.peak = allocated

    def alloc(self, n: int) -> None:
        self.allocated += n
        self.peak = max(self.peak, self.allocated)

    def free(self, n: int) -> None:
        self.allocated -= n

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
        monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: self.allocated)
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: self.peak)
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: setattr(self, "peak", self.allocated))


def test_the_meter_counts_the_submissions_peak_and_not_the_graders_copies(monkeypatch):
    cuda = FakeAllocator(allocated=1000)  # the inputs and whatever existed before the call
    cuda.install(monkeypatch)
    meter = PeakMeter(active=True)
    meter.start()
    cuda.alloc(500)  # the output, made by a factory: then moved into guarded storage
    with meter.excluded():
        cuda.alloc(500 + 2 * GUARD_BYTES)  # for an instant the tensor exists twice
        cuda.free(500)
    cuda.alloc(300)  # a scratch buffer, freed before returning
    cuda.free(300)
    meter.stop()
    assert meter.extra == 500 + 300  # the output and the scratch; not the copy, nor the bands
    assert judge(meter.extra - 500, 299) and judge(meter.extra - 500, 300) is None


def test_a_peak_reached_before_a_relocation_is_kept(monkeypatch):
    cuda = FakeAllocator(allocated=0)
    cuda.install(monkeypatch)
    meter = PeakMeter(active=True)
    meter.start()
    cuda.alloc(4000)  # a big float32 copy, freed before the output is allocated
    cuda.free(4000)
    cuda.alloc(100)
    with meter.excluded():
        cuda.alloc(100 + 2 * GUARD_BYTES)
        cuda.free(100)
    meter.stop()
    assert meter.extra == 4000


def test_triton_autotuning_inside_a_call_is_not_the_submissions_peak(monkeypatch):
    # Autotuner._bench times each config with a 256 MB L2-flush buffer, inside the first call.
    cuda = FakeAllocator(allocated=0)
    cuda.install(monkeypatch)

    class Tuner:
        def _bench(self, config):
            cuda.alloc(256)  # triton.testing.do_bench's flush buffer
            cuda.free(256)
            return [config]

    memory_budget.exclude_from_meter(Tuner, "_bench")
    memory_budget.exclude_from_meter(Tuner, "_bench")  # installed once, however often asked
    assert Tuner._bench.kata_excluded and Tuner._bench.__wrapped__.__name__ == "_bench"
    meter = PeakMeter(active=True)
    meter.start()
    assert Tuner()._bench(7) == [7]
    cuda.alloc(40)  # the submission's own scratch
    cuda.free(40)
    meter.stop()
    assert meter.extra == 40
    assert Tuner()._bench(8) == [8]  # outside a measured call: runs as it is
    assert meter.extra == 40


def test_an_inactive_meter_reads_nothing(monkeypatch):
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: pytest.fail("read on the CPU"))
    meter = PeakMeter(active=False)
    meter.start()
    with meter.excluded():
        pass
    meter.stop()
    assert meter.extra == 0


def test_the_guard_bands_pause_the_meter_around_each_relocation_only():
    entered = []

    class Pause:
        def __enter__(self):
            entered.append("in")

        def __exit__(self, *exc):
            entered.append("out")

    x = torch.ones(3)
    with GuardedFactories(pause=Pause) as factories:
        a = torch.empty(10)
        b = x + 1  # not a factory: not relocated, no pause
        c = torch.zeros(4)
    assert entered == ["in", "out", "in", "out"] and len(factories.made) == 2
    assert torch.equal(c, torch.zeros(4)) and torch.equal(b, torch.full((3,), 2.0)) and a.shape == (10,)


def test_the_worker_measures_only_on_a_gpu_and_only_where_a_budget_is_declared():
    from grader.kata.catalog import get_kata
    from grader.sandbox.case_runner import CaseRunner

    def budget(kata: str, device: str):
        task = get_kata(kata).tasks[0]
        runner = CaseRunner.__new__(CaseRunner)
        runner.task, runner.device = task, device
        runner.cases = {c.name: c for c in task.cases}
        return runner._memory_budget({"case": task.cases[0].name, "dtype": "bfloat16"})

    assert budget("cross_entropy", "cpu") is None  # the interpreter has no peak-memory counter
    assert budget("softmax", "cuda") is None
    limit, what, advice = budget("cross_entropy", "cuda")
    assert limit == pytest.approx(0.02 * 8 * 1000 * 2 + 2 ** 20)  # the public case 'small'
    assert what and advice
    assert memory_budget.judge(2 * 8 * 1000 * 4, limit) is None  # small cases: 1 MiB of room
