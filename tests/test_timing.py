"""The roofline floor used by the grader and the benchmark."""

import pytest

from cpu_timing import KeepAt, cpu_timing
from grader.timing.timer import floor_ms

CEILINGS = {"copy_gbps": 1000.0, "matmul_tflops": 500.0}


def test_floor_is_the_larger_of_memory_and_compute_time():
    assert floor_ms(2e9, None, CEILINGS) == 2.0  # 2 GB at 1000 GB/s
    assert floor_ms(1e6, 1e12, CEILINGS) == 2.0  # 1 TFLOP at 500 TFLOP/s dominates
    assert floor_ms(None, None, CEILINGS) is None


def _vector_add_checker_and_args(case_name=None):
    import importlib.util

    from grader.judge.checker import Checker
    from grader.judge.inputs import make_case_inputs
    from grader.kata.catalog import get_kata

    kata = get_kata("vector_add")
    task = kata.tasks[0]
    case = task.case(case_name) if case_name else next(c for c in task.cases if "interpret" in c.modes)
    planned = {"key": f"{task.name}/{case.name}/float32", "task": task.name, "case": case.name,
               "dtype": "float32"}
    checker = Checker(kata, 7, "cpu")

    def make_args(salt):
        inputs = make_case_inputs(checker.spec, task, case, "float32", "cpu", 7, planned["key"], salt)
        return tuple(inputs[a] for a in task.args)

    return checker, planned, make_args


def _verify(checker, planned, result, tmp_path):
    import torch

    from grader.judge.inputs import case_seed  # noqa: F401 - the seed the worker's timing uses

    samples = []
    for i, sample in enumerate(result.checked):
        path = tmp_path / f"s{i}.pt"
        torch.save({"out": [sample.outputs]}, path)
        samples.append({"call": sample.call, "set": sample.set, "file": str(path)})
    return checker.check_samples(planned, samples, result.method, result.n_sets)


def _honest_timing(monkeypatch, picks, case_name=None):
    """An honest vector_add timed call by call on the CPU, keeping the calls in `picks`."""
    from grader.judge.inputs import case_seed

    timing = cpu_timing(monkeypatch)
    checker, planned, make_args = _vector_add_checker_and_args(case_name)
    honest = lambda x, y: x + y  # noqa: E731
    result = timing.time_pair(honest, honest, make_args, seed=case_seed(7, planned["key"] + "/rng"),
                              use_graph=False, sampler=KeepAt(picks))
    return checker, planned, result


def test_kept_timed_outputs_verify_against_replayed_inputs(monkeypatch, tmp_path):
    checker, planned, result = _honest_timing(monkeypatch, {0: 0, 7: 1, 40: 1})
    assert [s.call for s in result.checked] == [0, 7, 40] and result.n_sets == 3
    assert [s.set for s in result.checked] == [0, 7 % 3, 40 % 3]  # call-by-call: the call's own set
    assert _verify(checker, planned, result, tmp_path) is None


def test_kept_timed_outputs_in_any_order_share_one_draw_of_the_sets(monkeypatch, tmp_path):
    # A large case's inputs can cost as much to draw as its truth (flash attention's backward
    # draws o and lse through a float64 forward): the sets are drawn once per case, not per sample.
    checker, planned, result = _honest_timing(monkeypatch, {3: 0, 31: 1, 44: 2})
    result.checked.reverse()  # the worker's order is not the checker's
    draws = []
    drawing = checker._inputs
    monkeypatch.setattr(checker, "_inputs", lambda *a: draws.append(a[-1]) or drawing(*a))
    assert _verify(checker, planned, result, tmp_path) is None
    assert sorted(draws) == ["/timing0", "/timing1", "/timing2"]


def test_a_stale_timed_output_is_named_cached_results(monkeypatch, tmp_path):
    from grader.judge.inputs import case_seed

    timing = cpu_timing(monkeypatch)
    checker, planned, make_args = _vector_add_checker_and_args()
    cache = {}

    def by_pointer(x, y):  # honest the first time it sees a buffer, then replays that result
        key = x.data_ptr()
        if key not in cache:
            cache[key] = x + y
        return cache[key]

    result = timing.time_pair(by_pointer, lambda x, y: x + y, make_args,
                              seed=case_seed(7, planned["key"] + "/rng"), use_graph=False,
                              sampler=KeepAt({30: 0}))
    failure = _verify(checker, planned, result, tmp_path)
    assert failure["cheat"] == "cached_results" and "earlier call" in failure["message"]


def test_a_timed_output_wrong_for_other_reasons_is_not_called_a_cheat(monkeypatch, tmp_path):
    from grader.judge.inputs import case_seed

    timing = cpu_timing(monkeypatch)
    checker, planned, make_args = _vector_add_checker_and_args()

    def off_by_a_bit(x, y):
        return x + y + 1e-2

    result = timing.time_pair(off_by_a_bit, lambda x, y: x + y, make_args,
                              seed=case_seed(7, planned["key"] + "/rng"), use_graph=False,
                              sampler=KeepAt({12: 0}))
    failure = _verify(checker, planned, result, tmp_path)
    assert failure["cheat"] is None and "timed call" in failure["message"]


# ----------------------------------------------------------------------------- timed_rows
# A task may declare timed_rows: its kept timed calls are verified at a sample of positions
# along one dim (the checked calls on the same shape were verified whole). Here vector_add,
# whose out[i] depends on x[i] and y[i] only, stands in for flash attention (a query row's
# output depends on that row), with a reference that can compute some positions only.

def _sampled(monkeypatch, checker, count):
    import dataclasses

    from grader.kata.format import TimedRows

    task = checker.tasks["vector_add"]
    checker.tasks["vector_add"] = dataclasses.replace(task, timed_rows=TimedRows(dim=0, count=count))
    asked = []
    whole = checker.spec.reference

    def reference(x, y, rows=None):
        asked.append(None if rows is None else rows.clone())
        out = whole(x, y)
        return out if rows is None else out.index_select(0, rows)

    monkeypatch.setattr(checker.spec, "reference", reference)
    return asked


def test_timed_rows_verify_kept_calls_at_sampled_positions(monkeypatch, tmp_path):
    checker, planned, result = _honest_timing(monkeypatch, {5: 0, 40: 1}, "odd_tail")
    asked = _sampled(monkeypatch, checker, count=64)
    assert _verify(checker, planned, result, tmp_path) is None
    assert len(asked) == 2 and all(rows is not None for rows in asked)
    for rows in asked:
        positions = rows.tolist()
        assert positions == sorted(set(positions)) and len(positions) == 64


def test_timed_rows_are_drawn_by_the_checker_not_from_the_grade_seed(monkeypatch, tmp_path):
    # The worker knows the grade's seed: positions derived from it could be predicted.
    checker, planned, result = _honest_timing(monkeypatch, {5: 0}, "odd_tail")
    asked = _sampled(monkeypatch, checker, count=64)
    assert _verify(checker, planned, result, tmp_path) is None
    assert _verify(checker, planned, result, tmp_path) is None
    assert asked[0].tolist() != asked[1].tolist()


def test_timed_rows_still_catch_a_stale_result_and_account_for_the_whole_output(monkeypatch, tmp_path):
    # The timing rescales every input before each call: a cached result differs from the truth
    # wherever x or y moved (most positions), and 32 positions of 98307 see it.
    from grader.judge.inputs import case_seed

    timing = cpu_timing(monkeypatch)
    checker, planned, make_args = _vector_add_checker_and_args("odd_tail")
    asked = _sampled(monkeypatch, checker, count=32)
    cache = {}

    def by_buffer(x, y):  # x is kept, so a later tensor never takes its id
        if id(x) not in cache:
            cache[id(x)] = (x, x + y)
        return cache[id(x)][1]

    result = timing.time_pair(by_buffer, lambda x, y: x + y, make_args,
                              seed=case_seed(7, planned["key"] + "/rng"), use_graph=False,
                              sampler=KeepAt({30: 0}))
    failure = _verify(checker, planned, result, tmp_path)
    assert failure["cheat"] == "cached_results"
    assert asked[0] is not None and None in asked[1:]  # sampled first, then the whole output


def test_timed_rows_fall_back_to_the_whole_output_when_positions_cannot_be_sampled(monkeypatch):
    import torch

    checker, _, _ = _vector_add_checker_and_args()
    _sampled(monkeypatch, checker, count=8)
    task = checker.tasks["vector_add"]
    x, y = torch.zeros(1000), torch.zeros(1000)
    inputs, saved = {"x": x, "y": y}, {"out": [torch.zeros(1000)]}
    assert len(checker._sampled_rows(task, inputs, saved)) == 8
    assert checker._sampled_rows(task, inputs, {"out": [torch.zeros(999)]}) is None
    assert checker._sampled_rows(task, inputs, {"out": [torch.zeros(())]}) is None
    assert checker._sampled_rows(task, {"x": x, "y": torch.zeros(7)}, saved) is None
    small = {"x": torch.zeros(15), "y": torch.zeros(15)}
    assert checker._sampled_rows(task, small, {"out": [torch.zeros(15)]}) is None  # most of it


def test_a_timed_output_equal_to_a_checked_calls_result_is_a_diagnosis_not_a_cheat(monkeypatch, tmp_path):
    # A kernel that keeps the first call's pointers (keyed on the shape) passes both checked
    # calls, which share buffers, then returns their result in timed calls: state kept across
    # calls, an honest bug, not evidence of a cache.
    from grader.judge.inputs import AGAIN, case_seed

    timing = cpu_timing(monkeypatch)
    checker, planned, make_args = _vector_add_checker_and_args()
    x, y = make_args(AGAIN)  # the second checked call's inputs, left in the first call's buffers
    from_checking = x + y
    result = timing.time_pair(lambda x, y: from_checking.clone(), lambda x, y: x + y, make_args,
                              seed=case_seed(7, planned["key"] + "/rng"), use_graph=False,
                              sampler=KeepAt({8: 2}))
    failure = _verify(checker, planned, result, tmp_path)
    assert failure["cheat"] is None and failure["diagnosis"]["code"] == "timed_outputs_wrong", failure


@pytest.mark.parametrize("graph, expected", [(True, [True, True, True]), (False, [True, True, False])])
def test_replay_changes_every_set_per_graph_replay_and_the_calls_own_set_call_by_call(graph, expected):
    import torch

    from grader.timing.perturb import Replay

    sets = [(torch.ones(8, 4),) for _ in range(3)]
    changes = Replay(sets, 3, graph)
    changes.advance(1)  # calls 0 and 1: call by call, sets 0 and 1 only
    assert [not torch.equal(s[0], torch.ones(8, 4)) for s in sets] == expected


def test_a_forged_output_file_is_no_output_to_sample(monkeypatch):
    import torch

    checker, _, _ = _vector_add_checker_and_args()
    _sampled(monkeypatch, checker, count=8)
    task = checker.tasks["vector_add"]
    inputs = {"x": torch.zeros(1000), "y": torch.zeros(1000)}
    assert checker._sampled_rows(task, inputs, {"out": torch.zeros(1000)}) is None


class _ParentKeys(KeepAt):
    """A sampler that, as the parent does, hands out each call's change key one call at a time."""

    def __init__(self, picks):
        super().__init__(picks)
        import secrets

        self.sent, self._random = [], secrets.SystemRandom()

    def change_key(self):
        self.sent.append(self._random.getrandbits(63))
        return self.sent[-1]


def test_the_timing_changes_come_from_the_parents_keys_and_replay_from_them(monkeypatch, tmp_path):
    # Keys the worker could not predict: the checker rebuilds the kept calls' inputs from the keys
    # the parent sent; from the case's seed (what the worker could know) they come out wrong.
    import torch

    from grader.judge.inputs import case_seed

    timing = cpu_timing(monkeypatch)
    checker, planned, make_args = _vector_add_checker_and_args("odd_tail")
    sampler = _ParentKeys({5: 2, 40: 1})
    honest = lambda x, y: x + y  # noqa: E731
    result = timing.time_pair(honest, honest, make_args, seed=case_seed(7, planned["key"] + "/rng"),
                              use_graph=False, sampler=sampler)
    assert len(sampler.sent) == sampler.calls  # one key per submission call, none for the baseline
    samples = []
    for i, sample in enumerate(result.checked):
        path = tmp_path / f"s{i}.pt"
        torch.save({"out": [sample.outputs]}, path)
        samples.append({"call": sample.call, "set": sample.set, "file": str(path)})
    assert checker.check_samples(planned, samples, result.method, result.n_sets, sampler.sent) is None
    failure = checker.check_samples(planned, samples, result.method, result.n_sets)
    assert failure is not None and failure["cheat"] is None
