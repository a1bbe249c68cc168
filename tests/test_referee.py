"""The parent's side of the worker's line: verdicts case by case, correctness before timing, the
secret choice of verified timed calls, and questions asked out of turn (grader.sandbox.referee); and the
replay of the input changes made before timed calls (grader.timing.perturb)."""

from __future__ import annotations

import random
import socket

import pytest
import torch

from grader.sandbox.referee import SAMPLED, Referee
from grader.sandbox.worker_line import ParentLine, ParentSampler
from grader.timing.perturb import Perturber, Replay, change_call, replay, seeded_keys

PLAN = [{"key": f"t/c{i}/float32", "task": "t", "case": f"c{i}", "dtype": "float32"} for i in range(3)]


class FakeJudge:
    def __init__(self, failing=(), timed_failure=None):
        self.failing, self.timed_failure = set(failing), timed_failure
        self.samples = []

    def check_case(self, planned, result):
        return dict(result, status="fail" if planned["key"] in self.failing else "pass")

    def check_samples(self, planned, samples, method, n_sets, change_keys=None):
        self.samples.append((planned["key"], samples, method, n_sets, change_keys))
        return self.timed_failure


@pytest.fixture()
def line_to():
    made = []

    def make(judge, **kwargs):
        ours, theirs = socket.socketpair()
        referee = Referee(ours, judge, PLAN, **kwargs)
        referee.start()
        made.append((ours, theirs, referee))
        return ParentLine(theirs.detach()), referee

    yield make
    for ours, theirs, referee in made:
        ours.shutdown(socket.SHUT_RDWR)
        referee.join(timeout=5)
        ours.close()


def _run_cases(line, keys):
    answers = []
    for key in keys:
        line.ask("start", key=key, phase="case")
        answers.append(line.ask("case", key=key, result={"status": "ran", "outputs": {}}))
    return answers


def test_verdicts_come_back_case_by_case_and_a_wrong_submission_is_not_timed(line_to):
    events = []
    line, referee = line_to(FakeJudge(failing={PLAN[1]["key"]}), progress=events.append)
    answers = _run_cases(line, [p["key"] for p in PLAN])
    assert [a["ok"] for a in answers] == [True, False, True]
    assert not any(a["stop"] for a in answers)
    assert line.ask("time") == {"time": False}
    assert referee.timing_skipped and referee.verdicts[PLAN[1]["key"]]["status"] == "fail"
    assert [e["type"] for e in events] == ["start", "case"] * 3


def test_keep_going_times_anyway_and_fail_fast_stops_at_the_first_failure(line_to):
    line, _ = line_to(FakeJudge(failing={PLAN[0]["key"]}), keep_going=True)
    _run_cases(line, [PLAN[0]["key"]])
    assert line.ask("time") == {"time": True}
    line, referee = line_to(FakeJudge(failing={PLAN[0]["key"]}), fail_fast=True)
    assert _run_cases(line, [PLAN[0]["key"]])[0]["stop"] is True
    assert referee.stopped_at == PLAN[0]["key"]


@pytest.mark.parametrize("failing, timed", [((), True), ((PLAN[1]["key"],), False)])
def test_the_compile_ahead_hooks_hear_each_case_once_and_timing_before_it_starts(line_to, failing, timed):
    # grader.grading.compile_ahead: its helpers start at the first case, stop when the worker
    # reaches their share, and stop before timing, which must have the GPU alone.
    line, referee = line_to(FakeJudge(failing=failing))
    heard = []
    referee.case_started = lambda key: heard.append(("case", key))
    referee.before_timing = lambda: heard.append(("timing", None))
    for p in PLAN:
        line.ask("start", key=p["key"], phase="case")
        line.ask("start", key=p["key"], phase="case", baseline_s=0.001)  # its limit, now known
        line.ask("case", key=p["key"], result={"status": "ran", "outputs": {}})
    assert heard == [("case", p["key"]) for p in PLAN]
    assert line.ask("time") == {"time": timed}
    assert heard[3:] == ([("timing", None)] if timed else [])


def test_timed_calls_to_verify_are_chosen_by_the_parent_and_revealed_only_after_each_call(line_to):
    judge = FakeJudge()
    line, referee = line_to(judge)
    key = PLAN[0]["key"]
    sampler = ParentSampler(line, key)
    sampler.begin(200, 3)
    # The worker holds nothing that names the chosen calls: it learns each one only by asking,
    # after the call, once.
    assert not any(isinstance(v, (set, dict)) and v for v in vars(sampler).values())
    kept, sent = {}, []
    for call in range(200):
        sent.append(sampler.change_key())  # before the call: the key of its input change
        if (s := sampler.keep(call)) is not None:
            kept[call] = s
    assert len(kept) == SAMPLED and all(0 <= s < 3 for s in kept.values())
    samples = [{"call": c, "set": c % 3, "file": ""} for c in kept]
    line.ask("samples", key=key, samples=samples, method="events", sets=3)
    assert judge.samples[0][1] == samples and not referee.forgeries
    # The checker replays the changes from the keys the parent sent, one per call, not from
    # anything the worker reports.
    assert judge.samples[0][4][:200] == sent and len(set(sent)) == 200
    sampler.change_key()  # the key sent with the last answer, for a call that never came
    with pytest.raises(RuntimeError, match="no key"):
        sampler.change_key()  # each key serves one call
    # Two grades choose different calls: nothing to learn from one grade for the next.
    line2, _ = line_to(FakeJudge())
    other = ParentSampler(line2, key)
    other.begin(200, 3)
    kept2 = {c for c in range(200) if other.keep(c) is not None}
    chosen_again = kept2 == set(kept)
    assert not chosen_again or SAMPLED >= 200


def _timed_case(line, key, hand_over=True):
    line.ask("start", key=key, phase="timing")
    if hand_over:  # an in-place task's worker hands over no chosen calls, but still asks
        line.ask("samples", key=key, samples=[], method="events", sets=2)


def test_a_timed_case_s_outcome_is_kept_once_as_the_worker_told_it(line_to):
    line, referee = line_to(FakeJudge())
    _timed_case(line, PLAN[0]["key"])
    line.ask("timed", key=PLAN[0]["key"], timing={"time_ms": 1.0, "speedup": 1.5})
    line.ask("start", key=PLAN[1]["key"], phase="timing")
    line.ask("timed", key=PLAN[1]["key"], error={"message": "too slow at first", "cheat": "slow_first_calls"})
    assert referee.timing_reports == {
        PLAN[0]["key"]: {"timing": {"time_ms": 1.0, "speedup": 1.5}},
        PLAN[1]["key"]: {"error": {"message": "too slow at first", "cheat": "slow_first_calls"}}}
    assert referee.forgeries == [] and referee.current is None
    # The submission, later, with a better figure for the first case: too late, and named.
    line.ask("timed", key=PLAN[0]["key"], timing={"time_ms": 0.3, "speedup": 5.0})
    assert referee.timing_reports[PLAN[0]["key"]]["timing"]["speedup"] == 1.5
    assert "told twice" in referee.forgeries[0]


@pytest.mark.parametrize("report", [
    {"timing": {"time_ms": 1.0}, "hand_over": False},  # no kept timed outputs came
    {"timing": {"time_ms": 1.0}, "start": False},      # a case that was never timed
    {"error": {"message": 5}},
    {"timing": [1.0]},
    {"timing": {"time_ms": 1.0}, "error": {"message": "m"}},
], ids=["before_samples", "never_started", "int_message", "list_timing", "both"])
def test_a_timed_case_s_outcome_out_of_turn_or_malformed_is_a_forgery(line_to, report):
    report = dict(report)
    hand_over, start = report.pop("hand_over", True), report.pop("start", True)
    line, referee = line_to(FakeJudge())
    if start:
        _timed_case(line, PLAN[0]["key"], hand_over)
    line.ask("timed", key=PLAN[0]["key"], **report)
    assert referee.timing_reports == {} and referee.forgeries


def test_asking_ahead_or_twice_is_caught(line_to):
    line, referee = line_to(FakeJudge())
    key = PLAN[0]["key"]
    sampler = ParentSampler(line, key)
    sampler.begin(50, 2)
    sampler.keep(5)  # a submission peeking at call 5 before the grader asks
    sampler.keep(5)
    assert referee.forgeries


def test_handing_over_other_timed_outputs_than_chosen_is_caught(line_to):
    line, referee = line_to(FakeJudge())
    key = PLAN[0]["key"]
    sampler = ParentSampler(line, key)
    sampler.begin(30, 2)
    for call in range(30):
        sampler.keep(call)
    line.ask("samples", key=key, samples=[{"call": 1, "set": 0, "file": ""}], method="events", sets=2)
    assert referee.forgeries


def test_a_case_past_its_limit_is_overdue(line_to):
    line, referee = line_to(FakeJudge(), case_cap_s=1e-6)
    line.ask("start", key=PLAN[0]["key"], phase="case")
    assert referee.overdue()["key"] == PLAN[0]["key"]
    line.ask("case", key=PLAN[0]["key"], result={"status": "ran"})
    assert referee.overdue() is None


def test_malformed_requests_are_forgeries(line_to):
    line, referee = line_to(FakeJudge())
    line.ask("case", key="not/in/the/plan", result={})
    line.ask("launch_missiles", key=PLAN[0]["key"])
    assert len(referee.forgeries) == 2


def test_the_environment_is_heard_once_before_anything_else(line_to):
    env = {"device": "GPU", "versions": {"torch": "2"}, "ceilings": {"copy_gbps": 3000.0}, "ceilings_measured": True}
    line, referee = line_to(FakeJudge())
    line.ask("env", **env)
    assert referee.env == env and referee.forgeries == []
    line.ask("env", **dict(env, ceilings={"copy_gbps": 1.0}))  # the submission, once imported
    assert referee.env == env and "environment" in referee.forgeries[0]
    line, referee = line_to(FakeJudge())
    _run_cases(line, [PLAN[0]["key"]])
    line.ask("env", **env)
    assert referee.env is None and referee.forgeries


def test_the_lockdown_is_heard_once_right_after_the_environment(line_to):
    env = {"device": "GPU", "versions": {}, "ceilings": None, "ceilings_measured": False}
    line, referee = line_to(FakeJudge())
    line.ask("env", **env)
    line.ask("sandbox", status={"filesystem_restricted": False})
    assert referee.sandbox == {"filesystem_restricted": False} and referee.forgeries == []
    line.ask("sandbox", status={"filesystem_restricted": True})
    assert referee.sandbox == {"filesystem_restricted": False} and "lockdown" in referee.forgeries[0]
    line, referee = line_to(FakeJudge())
    line.ask("sandbox", status={"filesystem_restricted": True})  # before the environment
    assert referee.sandbox is None and referee.forgeries


@pytest.mark.parametrize("status", ["pass", "skipped", None, 1])
def test_a_case_result_only_the_checker_can_give_is_a_forgery(line_to, status):
    # The submission shares the worker's process and can reach its end of the line: a "pass"
    # sent from there never went through the checker.
    line, referee = line_to(FakeJudge())
    line.ask("start", key=PLAN[0]["key"], phase="case")
    answer = line.ask("case", key=PLAN[0]["key"], result={"status": status})
    assert answer == {"ok": False, "stop": True}
    assert referee.forgeries and "never sends" in referee.forgeries[0]
    assert PLAN[0]["key"] not in referee.verdicts


def test_a_result_for_a_case_not_being_run_is_a_forgery(line_to):
    line, referee = line_to(FakeJudge())
    line.ask("start", key=PLAN[0]["key"], phase="case")
    assert line.ask("case", key=PLAN[1]["key"], result={"status": "ran"})["stop"] is True
    assert "not the case being run" in referee.forgeries[0]
    assert referee.verdicts == {}


def test_which_case_a_result_is_for_comes_from_the_plan(line_to):
    line, referee = line_to(FakeJudge())
    line.ask("start", key=PLAN[0]["key"], phase="case")
    line.ask("case", key=PLAN[0]["key"], result={"status": "ran", "task": "x", "name": "y",
                                                 "dtype": "float64", "hidden": True})
    verdict = referee.verdicts[PLAN[0]["key"]]
    assert (verdict["task"], verdict["name"], verdict["dtype"], verdict["hidden"]) == ("t", "c0", "float32", False)
    assert referee.forgeries == []


@pytest.mark.parametrize("field", [{"message": None}, {"message": 5}, {"cheat": ["a"]},
                                   {"diagnosis": 5}, {"mismatches": 5}, {"launches": "many"}],
                         ids=["no_message", "int_message", "list_cheat", "diagnosis", "mismatches", "str_launches"])
def test_a_failing_result_in_a_form_the_worker_never_sends_is_a_forgery(line_to, field):
    # A failing result goes to the verdict as it came (the checker has nothing to check): one the
    # worker's code cannot have written names fake_result instead of crashing the grade.
    line, referee = line_to(FakeJudge())
    line.ask("start", key=PLAN[0]["key"], phase="case")
    answer = line.ask("case", key=PLAN[0]["key"], result=dict({"status": "fail", "message": "m", "cheat": None}, **field))
    assert answer == {"ok": False, "stop": True} and "never sends" in referee.forgeries[0]
    assert PLAN[0]["key"] not in referee.verdicts


def test_the_worker_s_own_failing_result_is_no_forgery(line_to):
    line, referee = line_to(FakeJudge(failing={PLAN[0]["key"]}))
    line.ask("start", key=PLAN[0]["key"], phase="case")
    line.ask("case", key=PLAN[0]["key"], result={
        "task": "t", "name": "c0", "dtype": "float32", "shape": [4, 4], "hidden": False,
        "status": "error", "message": "t raised an exception", "cheat": None, "launches": 2})
    assert referee.forgeries == [] and referee.verdicts[PLAN[0]["key"]]["status"] == "fail"


@pytest.mark.parametrize("request_", [
    {"op": "start", "key": ["a"], "phase": "case", "limit_s": 1},
    {"op": "case", "key": {"a": 1}, "result": {"status": "ran"}},
    {"op": ["time"]},
    {"op": "samples", "key": PLAN[0]["key"], "samples": [], "method": "events", "sets": "3"},
    {"op": "samples", "key": PLAN[0]["key"], "samples": [{"call": [0], "set": 0}], "method": "events", "sets": 3},
], ids=["list_key", "dict_key", "list_op", "str_sets", "list_call"])
def test_junk_on_the_line_is_a_forgery_and_the_referee_goes_on_answering(line_to, request_):
    line, referee = line_to(FakeJudge())
    line._sock.settimeout(10)  # a referee that died would leave the worker waiting for ever
    if request_.get("op") == "samples":
        sampler = ParentSampler(line, PLAN[0]["key"])
        sampler.begin(5, 3)
        for call in range(5):
            sampler.keep(call)
    line.ask(**request_)
    assert referee.forgeries and referee.is_alive()
    assert line.ask("time") == {"time": True}  # still answered


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("graph", [False, True])
def test_replay_rebuilds_the_inputs_of_any_timed_call(graph, dtype):
    gen = torch.Generator().manual_seed(0)
    drawn = [(torch.randn(7, 300, generator=gen).to(dtype), torch.randn(300, generator=gen).to(dtype))
             for _ in range(3)]
    live = [tuple(t.clone() for t in s) for s in drawn]
    perturb, keys = Perturber(), [random.getrandbits(63) for _ in range(40)]
    seen = {}
    for call in range(40):  # the timing loop's order of changes, a key per call
        change_call(perturb, live, call, keys[call], graph)
        seen[call] = [tuple(t.clone() for t in s) for s in live]
    for call in (0, 17, 39):
        rebuilt = [tuple(t.clone() for t in s) for s in drawn]
        replay(rebuilt, keys, call, graph)
        for got, want in zip(rebuilt, seen[call]):
            assert all(torch.equal(g, w) for g, w in zip(got, want))
    # Every element is its drawn value, half or a quarter of it: finite, same sign, valid where
    # the drawn value was.
    for before, after in zip(drawn, seen[39]):
        for b, a in zip(before, after):
            ratios = set((a / b).unique().tolist())
            assert ratios <= {0.25, 0.5, 1.0} and len(ratios) >= 2


def test_each_change_moves_half_of_every_input_so_no_cheap_correction_exists():
    # A kernel that keeps its last inputs and result could patch the result where the change is
    # small: a rank-k update of a GEMM. Between two calls on one set, half or more of every float
    # input moved, spread over every row and column: the difference has full rank.
    gen = torch.Generator().manual_seed(2)
    a, b, bias = torch.randn(64, 96, generator=gen), torch.randn(96, 80, generator=gen), torch.randn(80, generator=gen)
    live = (a, b, bias)
    perturb, keys = Perturber(), seeded_keys(11)
    previous = None
    for _ in range(4):
        perturb(live, keys())
        if previous is not None:
            for before, after in zip(previous, live):
                moved = before != after
                assert 0.4 < moved.double().mean() < 0.85  # a half, or three quarters
                if after.dim() == 2:
                    assert moved.any(0).all() and moved.any(1).all()
                    assert torch.linalg.matrix_rank(after - before) == min(after.shape)
        previous = tuple(t.clone() for t in live)


@pytest.mark.parametrize("graph", [False, True])
def test_replay_brought_forward_call_by_call_matches_a_replay_from_the_draw(graph):
    # The checker verifies a case's kept timed calls in ascending order on one draw of the sets.
    gen = torch.Generator().manual_seed(3)
    drawn = [(torch.randn(5, 200, generator=gen),) for _ in range(3)]
    changes = Replay([tuple(t.clone() for t in s) for s in drawn], 77, graph)
    for call in (-1, 4, 5, 23):
        changes.advance(call)
        fresh = [tuple(t.clone() for t in s) for s in drawn]
        if call >= 0:
            replay(fresh, 77, call, graph)
        assert all(torch.equal(g, w) for a, b in zip(changes.sets, fresh) for g, w in zip(a, b))
    with pytest.raises(ValueError, match="draw them again"):
        changes.advance(22)  # changes cannot be taken back


def test_the_change_is_a_pattern_repeated_in_memory_order_times_a_bit_per_run(monkeypatch):
    # Two passes over the input whatever its size: a PERIOD-element pattern repeated along it in
    # memory order (so a transposed view is changed as its contiguous weight would be), times one
    # factor per run of PERIOD elements.
    from grader.timing import perturb as module
    from grader.timing.perturb import _in_memory_order

    monkeypatch.setattr(module, "PERIOD", 64)
    gen = torch.Generator().manual_seed(4)
    weight = torch.rand(25, 40, generator=gen) + 1  # 1000 elements: 15 periods and a tail of 40
    drawn = (weight.t(),)
    live = (weight.clone().t(),)
    perturb, keys = Perturber(), seeded_keys(8)
    for call in range(3):
        perturb(live, keys())
        factor = (live[0].t() / drawn[0].t()).reshape(-1)
        assert set(factor.unique().tolist()) <= {0.25, 0.5, 1.0}
        per_run = factor[:960].view(15, 64) / factor[:64]
        assert torch.equal(per_run, per_run[:, :1].expand(15, 64))  # one factor per run
        assert set(per_run[:, 0].tolist()) <= {0.5, 1.0, 2.0} and len(set(per_run[:, 0].tolist())) > 1
        tail = factor[960:] / factor[:40]
        assert len(set(tail.tolist())) == 1
        rebuilt = [(weight.clone().t(),)]
        replay(rebuilt, 8, call, per_call_all_sets=False)
        assert torch.equal(rebuilt[0][0], live[0])
    buffer = torch.rand(10, 30, generator=gen) + 1
    live = (buffer.clone()[:, :20],)  # strided with gaps: no memory order
    assert _in_memory_order(live[0]) is None
    Perturber()(live, seeded_keys(1)())
    assert set((live[0] / buffer[:, :20]).unique().tolist()) <= {0.25, 0.5, 1.0}


def test_fp8_inputs_are_perturbed_and_replayed():
    # torch has no arithmetic kernels for fp8 (mul_ raises): they are rescaled through float32.
    gen = torch.Generator().manual_seed(0)
    a = (torch.randn(9, 80, generator=gen) * 100).to(torch.float8_e4m3fn)
    b = (torch.randn(7, 80, generator=gen) * 100).to(torch.float8_e5m2).t()  # a strided view
    drawn = (a, b)
    live = tuple(t.clone() for t in drawn)
    perturb, keys = Perturber(), seeded_keys(99)
    for _ in range(30):
        perturb(live, keys())
    changed = [not torch.equal(x.view(torch.uint8), y.view(torch.uint8)) for x, y in zip(drawn, live)]
    assert any(changed)
    for before, after in zip(drawn, live):
        # Each element is its drawn value, half or a quarter of it; where halving rounds (a
        # subnormal result), doubling back may not restore it: never larger, never of the other
        # sign.
        ratio = after.float() / before.float()
        normal = before.float().abs() >= 4 * torch.finfo(before.dtype).smallest_normal
        assert set(ratio[normal].unique().tolist()) <= {0.25, 0.5, 1.0}
        assert bool(((ratio >= 0) & (ratio <= 1)).all()) and torch.isfinite(after.float()).all()
    rebuilt = [tuple(t.clone() for t in drawn)]
    replay(rebuilt, 99, 29, per_call_all_sets=False)
    assert all(torch.equal(g.view(torch.uint8), w.view(torch.uint8)) for g, w in zip(rebuilt[0], live))


def test_integer_data_is_halved_toward_zero_and_indices_are_left_alone():
    # An INT8 GEMM's operands change, and stay in range.
    gen = torch.Generator().manual_seed(1)
    a = torch.randint(-128, 128, (9, 80), generator=gen, dtype=torch.int8)
    b = torch.randint(-128, 128, (80, 7), generator=gen, dtype=torch.int8)
    live = (a.clone(), b.clone())
    perturb, keys = Perturber(), seeded_keys(5)
    for _ in range(20):
        perturb(live, keys())
    assert any(not torch.equal(x, y) for x, y in zip((a, b), live))
    for before, after in zip((a, b), live):
        after, before = after.short(), before.short()  # abs(-128) overflows int8
        assert bool((after.abs() <= before.abs()).all() & ((after == 0) | (after.sign() == before.sign())).all())
    rebuilt = [(a.clone(), b.clone())]
    replay(rebuilt, 5, 19, per_call_all_sets=False)
    assert all(torch.equal(g, w) for g, w in zip(rebuilt[0], live))
    # With a float input beside them, indices are never touched.
    indices, weight = torch.arange(50), torch.randn(50, 4, generator=gen)
    live = (indices.clone(), weight.clone())
    for _ in range(20):
        perturb(live, keys())
    assert torch.equal(live[0], indices) and not torch.equal(live[1], weight)
    # int8 beside a float is quantized data (dequantize's q beside its scales): it changes too,
    # or a kernel keeping its last output would only rewrite the rows whose scale moved.
    scale = torch.rand(9, 1, generator=gen) + 0.5
    live = (a.clone(), scale.clone())
    perturb(live, keys())
    assert not torch.equal(live[0], a) and not torch.equal(live[1], scale)


def test_a_grade_that_times_has_the_gpu_to_itself():
    import threading
    import time

    from grader.grading.selftest import GpuTurns

    turns, log = GpuTurns(), []
    turns.case_begin()  # grade A is in a case
    timer = threading.Thread(target=lambda: (turns.timing_begin(), log.append("timing"),
                                             time.sleep(0.2), log.append("timed"), turns.timing_end()))
    timer.start()
    time.sleep(0.1)
    assert log == []  # B waits for A's case to end
    turns.case_end()
    time.sleep(0.05)
    assert log == ["timing"]
    turns.case_begin()  # A's next case waits until B has timed
    log.append("case")
    timer.join()
    assert log == ["timing", "timed", "case"]
    turns.case_end()


def test_a_full_reduction_cannot_be_corrected_from_one_run(monkeypatch):
    # With the pattern alone, every run of PERIOD elements changes alike: the ratios of one run to
    # its kept copy, times the per-position sums kept from the first call, give the new sum
    # exactly, reading PERIOD elements of the input (a reviewer's total_sum cheat). The bit per
    # run breaks it: the shortcut's sum is wrong.
    from grader.timing import perturb as module

    monkeypatch.setattr(module, "PERIOD", 64)
    gen = torch.Generator().manual_seed(6)
    drawn = torch.rand(64 * 50, generator=gen, dtype=torch.float64) + 0.5
    x = drawn.clone()
    per_position = drawn.view(50, 64).sum(0)  # what the cheat kept at its first call
    perturb, keys, wrong = Perturber(), seeded_keys(21), 0
    for _ in range(20):
        perturb((x,), keys())
        shortcut = float((x[:64] / drawn[:64] * per_position).sum())
        wrong += abs(shortcut - float(x.sum())) > 1e-6 * float(x.sum())
    assert wrong >= 18


def test_a_case_stays_under_its_timing_limit_until_its_anatomy_is_told(line_to):
    # After its final timing the worker calls the submission once more, profiled (the anatomy):
    # a call that hangs there is stopped at the case's limit, named, not at the whole grade's.
    line, referee = line_to(FakeJudge(), case_cap_s=1e-6)
    key = PLAN[0]["key"]
    line.ask("start", key=key, phase="timing")
    line.ask("samples", key=key, samples=[], method="events", sets=2)
    assert referee.overdue()["key"] == key and referee.overdue()["phase"] == "timing"
    line.ask("timed", key=key, timing={"time_ms": 1.0, "speedup": 1.5})
    assert referee.overdue()["key"] == key  # the anatomy's call is still under the limit
    line.ask("anatomy", key=key, anatomy={"kernels": []})
    assert referee.overdue() is None and referee.current is None
    assert referee.timing_reports[key]["timing"] == {"time_ms": 1.0, "speedup": 1.5, "anatomy": {"kernels": []}}
    assert not referee.forgeries


def test_an_anatomy_told_twice_or_before_its_timing_is_a_forgery(line_to):
    line, referee = line_to(FakeJudge())
    key = PLAN[0]["key"]
    line.ask("start", key=key, phase="timing")
    line.ask("anatomy", key=key, anatomy={})  # before the timing
    line.ask("samples", key=key, samples=[], method="events", sets=2)
    line.ask("timed", key=key, timing={"time_ms": 1.0, "speedup": 1.5})
    line.ask("anatomy", key=key, anatomy=None)  # switched off: the timing as told
    line.ask("anatomy", key=key, anatomy={"kernels": []})  # a second one
    assert referee.timing_reports[key]["timing"] == {"time_ms": 1.0, "speedup": 1.5}
    assert len(referee.forgeries) == 2 and all("anatomy" in f for f in referee.forgeries)


def test_an_error_while_timed_ends_the_case_without_an_anatomy(line_to):
    line, referee = line_to(FakeJudge(), case_cap_s=1e-6)
    key = PLAN[0]["key"]
    line.ask("start", key=key, phase="timing")
    line.ask("timed", key=key, error={"message": "failed while being timed", "cheat": None})
    assert referee.overdue() is None and referee.current is None


# ---- the case deadlines are the parent's ----------------------------------------------------------

def test_the_referee_sets_each_case_s_deadline_from_the_baseline_s_time():
    # grader.kata.time_limits: the cap until the baseline's time is known, then the case's own; a
    # task's first case compiles its kernels and gets the compile allowance.
    from grader.kata.time_limits import CASE_CAP_S, case_limit_s, timing_limit_s

    referee = Referee(None, FakeJudge(), PLAN, mode="gpu")
    first, second = PLAN[0]["key"], PLAN[1]["key"]
    assert referee.answer({"op": "start", "key": first, "phase": "case"}) == {"limit_s": CASE_CAP_S}
    assert referee.answer({"op": "start", "key": first, "phase": "case", "baseline_s": 0.001}) == \
        {"limit_s": case_limit_s("gpu", True, 0.001, None)}
    assert referee.current["limit_s"] == pytest.approx(32.0)  # 30 s to compile, 2000 x 1 ms
    referee.answer({"op": "start", "key": second, "phase": "case", "baseline_s": 0.001})
    assert referee.current["limit_s"] == pytest.approx(12.0)  # the task's kernels are compiled
    assert referee.answer({"op": "start", "key": first, "phase": "timing"}) == {"limit_s": timing_limit_s(None)}
    assert referee.forgeries == []


def test_a_worker_cannot_lengthen_its_deadline():
    # Whatever limit the worker names is not read; a baseline's time it claims is bounded by the
    # cap, and one that is no time at all is a forgery.
    from grader.kata.time_limits import CASE_CAP_S

    referee = Referee(None, FakeJudge(), PLAN, mode="gpu", case_cap_s=None)
    key = PLAN[0]["key"]
    referee.answer({"op": "start", "key": key, "phase": "case", "limit_s": 1e9})
    assert referee.current["limit_s"] == CASE_CAP_S
    referee.answer({"op": "start", "key": key, "phase": "case", "baseline_s": 1e9, "limit_s": 1e9})
    assert referee.current["limit_s"] == CASE_CAP_S
    for junk in (float("nan"), float("inf"), -1.0, "5", True, [1]):
        assert referee.answer({"op": "start", "key": key, "phase": "case", "baseline_s": junk}) is None
    assert referee.answer({"op": "start", "key": key, "phase": "timing", "baseline_s": 0.1}) is None
    assert referee.current["limit_s"] == CASE_CAP_S


def test_timeout_sets_every_case_s_deadline_raised_or_lowered():
    referee = Referee(None, FakeJudge(), PLAN, mode="interpret", case_cap_s=300.0)
    key = PLAN[0]["key"]
    assert referee.answer({"op": "start", "key": key, "phase": "case"}) == {"limit_s": 300.0}
    assert referee.answer({"op": "start", "key": key, "phase": "case", "baseline_s": 0.001}) == {"limit_s": 300.0}
    assert referee.answer({"op": "start", "key": key, "phase": "timing"}) == {"limit_s": 300.0}
