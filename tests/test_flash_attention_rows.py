"""flash_attention's truth and magnitudes at a subset of positions (spec.py, `rows`): equal to the
full computation at those positions, to float64 round-off, and the full path untouched by them.

The grade verifies its timed calls on a sample of positions: a sampled truth that drifted from
the full one (a causal mask counted from 0, a key's sum over too few query rows, a memo entry
served for the other kind of call) would pass wrong kernels or fail right ones.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from cpu_timing import KeepAt, cpu_timing

from grader.judge.checker import load_spec
from grader.kata.catalog import get_kata

SPEC = load_spec(get_kata("flash_attention"))
ROUNDOFF = 1e-10  # of the output's magnitude: float64 sums in another order and chunking

FORWARD = ("o", "lse")
BACKWARD = ("dq", "dk", "dv")

# B = 2, H = 4 with GQA (Hkv = 2) and MHA (Hkv = 4); S from one token to past two 64-blocks.
CASES = [dict(B=2, H=4, Hkv=Hkv, S=S, D=D, causal=causal, layout=layout)
         for Hkv, S, D, causal, layout in itertools.product(
             (2, 4), (1, 7, 37, 130), (16, 64), (True, False), ("bhsd", "bshd"))]


def case_id(case):
    return "{layout}-Hkv{Hkv}-S{S}-D{D}-{c}".format(c="causal" if case["causal"] else "full", **case)


@pytest.fixture(autouse=True)
def fresh_memo(monkeypatch):
    """Each test starts without a remembered pass (and leaves none for other tests)."""
    monkeypatch.setattr(SPEC, "_LAST", {"key": None, "inputs": None, "value": None})


def small_budget(monkeypatch, case):
    """A score chunk of about a third of the rows, so that the full and the sampled passes
    (and the sampled dk/dv pass over all query rows) each cross chunk boundaries."""
    G, S = case["H"] // case["Hkv"], case["S"]
    log_budget = max(0, int(math.log2(G * S * max(1, S // 3))))
    monkeypatch.setattr(SPEC, "LOG_ROWS_BUDGET", log_budget)


def inputs_for(case, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return SPEC.make_backward_inputs(case, torch.bfloat16, "cpu", gen)


def forward_args(inputs):
    return {n: inputs[n] for n in ("q", "k", "v", "causal", "sm_scale")}


def row_sets(S):
    """All positions, one in the middle, the first and last alone, and a sorted random subset
    with both ends."""
    gen = torch.Generator().manual_seed(S)
    inner = torch.randperm(S, generator=gen)[: max(0, S // 4)]
    subset = torch.unique(torch.cat([torch.tensor([0, S - 1]), inner]))
    sets = {"all": torch.arange(S), "middle": torch.tensor([S // 2]), "first": torch.tensor([0]),
            "last": torch.tensor([S - 1]), "subset": subset}
    return {name: rows.to(torch.int64) for name, rows in sets.items()}


def forward_results(args, rows=None):
    """{name: (truth, magnitude)} for o and lse."""
    o, lse = SPEC.reference(**args, rows=rows)
    return {"o": (o, SPEC.o_magnitude(**args, rows=rows)),
            "lse": (lse, SPEC.lse_magnitude(**args, rows=rows))}


def backward_results(inputs, rows=None):
    """{name: (truth, magnitude)} for dq, dk and dv."""
    truth = dict(zip(BACKWARD, SPEC.reference_backward(**inputs, rows=rows)))
    return {name: (truth[name], getattr(SPEC, f"{name}_magnitude")(**inputs, rows=rows))
            for name in BACKWARD}


def assert_rows_of(sampled, full, rows, what):
    """Every sampled truth and magnitude is the full one at `rows` (dim 2), to round-off of the
    full magnitude there."""
    for name, (full_value, full_mag) in full.items():
        value, mag = sampled[name]
        want_value, want_mag = full_value[:, :, rows], full_mag[:, :, rows]
        assert value.shape == want_value.shape and mag.shape == want_mag.shape, (what, name)
        assert value.dtype == mag.dtype == torch.float64, (what, name)
        # A floor of round-off on the largest magnitude for the elements whose own is ~0.
        bound = ROUNDOFF * (want_mag + 1e-6 * full_mag.abs().max())
        for kind, got, want in (("truth", value, want_value), ("magnitude", mag, want_mag)):
            excess = ((got - want).abs() / bound).max().item() if got.numel() else 0.0
            assert excess <= 1.0, f"{what} {name} {kind}: {excess:.3g} times the round-off bound"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_forward_rows_match_full(case, monkeypatch):
    small_budget(monkeypatch, case)
    args = forward_args(inputs_for(case))
    full = forward_results(args)
    for name, rows in row_sets(case["S"]).items():
        assert_rows_of(forward_results(args, rows), full, rows, f"rows {name}")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_backward_rows_match_full(case, monkeypatch):
    small_budget(monkeypatch, case)
    inputs = inputs_for(case)
    full = backward_results(inputs)
    for name, rows in row_sets(case["S"]).items():
        assert_rows_of(backward_results(inputs, rows), full, rows, f"rows {name}")


@pytest.mark.parametrize("q_scale, rising", [(4.0, 0.0), (40.0, 0.0), (1.0, 8.0)])
def test_rows_match_full_on_peaked_scores(q_scale, rising, monkeypatch):
    """Scores of +-30 and in the hundreds (p underflows to 0 on most keys) and a rising row
    max, as the kata's hidden cases have them."""
    case = dict(B=1, H=4, Hkv=2, S=130, D=64, causal=True, q_scale=q_scale, rising=rising)
    small_budget(monkeypatch, case)
    inputs = inputs_for(case, seed=1)
    full_fwd, full_bwd = forward_results(forward_args(inputs)), backward_results(inputs)
    for name, rows in row_sets(case["S"]).items():
        assert_rows_of(forward_results(forward_args(inputs), rows), full_fwd, rows, f"rows {name}")
        assert_rows_of(backward_results(inputs, rows), full_bwd, rows, f"rows {name}")


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("causal", [True, False])
def test_full_path_is_unchanged(causal, layout, monkeypatch):
    """rows=None is the full float64 pass, bit for bit (the tolerances were calibrated on it)."""
    case = dict(B=2, H=4, Hkv=2, S=37, D=16, causal=causal, layout=layout)
    small_budget(monkeypatch, case)
    inputs = inputs_for(case)
    args = forward_args(inputs)
    o, lse, (rss, size) = SPEC._forward64(**args, stats=True)
    got = forward_results(args)
    assert torch.equal(got["o"][0], o) and torch.equal(got["lse"][0], lse)
    assert torch.equal(got["o"][1], o.abs() + SPEC.RSS_MULTIPLE * rss)
    assert torch.equal(got["lse"][1], lse.abs() + size)

    dq, dk, dv, (rq, rk, rv, cq, ck) = SPEC._backward64(**inputs, stats=True)
    got = backward_results(inputs)
    weight = SPEC._cancellation_weight(torch.bfloat16, case["D"])
    for name, truth, mag in (("dq", dq, dq.abs() + SPEC.RSS_MULTIPLE * rq + weight * cq),
                             ("dk", dk, dk.abs() + SPEC.RSS_MULTIPLE * rk + weight * ck),
                             ("dv", dv, dv.abs() + SPEC.RSS_MULTIPLE * rv)):
        assert torch.equal(got[name][0], truth), name
        assert torch.equal(got[name][1], mag), name


def counting(monkeypatch, *names):
    """Counts the calls of SPEC's float64 passes `names` (the memo's lambdas look them up)."""
    calls = dict.fromkeys(names, 0)
    for name in names:
        original = getattr(SPEC, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)
        monkeypatch.setattr(SPEC, name, counted)
    return calls


def test_memo_keeps_full_and_rows_apart(monkeypatch):
    case = dict(B=1, H=4, Hkv=2, S=37, D=16, causal=True)
    inputs = inputs_for(case)
    args = forward_args(inputs)
    rows, other = torch.tensor([0, 5, 36]), torch.tensor([1, 5, 36])
    calls = counting(monkeypatch, "_forward64", "_forward64_rows", "_backward64", "_backward64_rows")

    o, lse = SPEC.reference(**args)
    o_rows, lse_rows = SPEC.reference(**args, rows=rows)
    assert o_rows.shape == (1, 4, 3, 16) and lse_rows.shape == (1, 4, 3)
    assert torch.allclose(o_rows, o[:, :, rows], rtol=1e-12, atol=0)
    # The checker asks for the truth, then each magnitude on cloned inputs: one pass each.
    assert SPEC.o_magnitude(**{n: (t.clone() if isinstance(t, torch.Tensor) else t)
                               for n, t in args.items()}, rows=rows.clone()).shape == (1, 4, 3, 16)
    assert SPEC.lse_magnitude(**args, rows=rows).shape == (1, 4, 3)
    o_other, _ = SPEC.reference(**args, rows=other)  # same length, other positions
    assert torch.allclose(o_other, o[:, :, other], rtol=1e-12, atol=0)
    o_again, lse_again = SPEC.reference(**args)
    assert torch.equal(o_again, o) and torch.equal(lse_again, lse)
    assert SPEC.o_magnitude(**args).shape == o.shape
    assert calls["_forward64"] == 2 and calls["_forward64_rows"] == 2

    dq, dk, dv = SPEC.reference_backward(**inputs)
    dq_rows, dk_rows, dv_rows = SPEC.reference_backward(**inputs, rows=rows)
    assert dq_rows.shape == (1, 4, 3, 16) and dk_rows.shape == dv_rows.shape == (1, 2, 3, 16)
    for sampled, full in ((dq_rows, dq), (dk_rows, dk), (dv_rows, dv)):
        assert torch.allclose(sampled, full[:, :, rows], rtol=1e-10, atol=1e-12)
    for name in BACKWARD:
        assert getattr(SPEC, f"{name}_magnitude")(**inputs, rows=rows).shape[2] == 3
    assert SPEC.reference_backward(**inputs, rows=other)[1].shape == (1, 2, 3, 16)
    again = SPEC.reference_backward(**inputs)
    assert all(torch.equal(a, b) for a, b in zip(again, (dq, dk, dv)))
    assert calls["_backward64"] == 2 and calls["_backward64_rows"] == 2


# ----------------------------------------------------------------------------- the grade's use
# The checker verifies kept timed calls at sampled rows (kata.yaml timed_rows) with this spec:
# an honest float32 attention in torch stands in for a kernel, timed on the CPU with the
# timer's clock faked (tests/test_timing.py), so its kept outputs go through check_samples.

def _attention32(q, k, v, causal, sm_scale):
    G = q.shape[1] // k.shape[1]
    k, v = (t.float().repeat_interleave(G, dim=1) for t in (k, v))
    s = q.float() @ k.transpose(-1, -2) * sm_scale
    if causal:
        S = q.shape[2]
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    o = torch.exp(s - lse[..., None]) @ v
    return o.to(q.dtype), lse


def _attention_backward32(q, k, v, o, lse, do, causal, sm_scale):
    B, H, S, D = q.shape
    G = H // k.shape[1]
    qf, dof = q.float(), do.float()
    kf, vf = (t.float().repeat_interleave(G, dim=1) for t in (k, v))
    p = torch.exp(qf @ kf.transpose(-1, -2) * sm_scale - lse[..., None])
    if causal:
        p = p.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), 0.0)
    delta = (o.float() * dof).sum(-1, keepdim=True)
    ds = p * (dof @ vf.transpose(-1, -2) - delta)
    dq = sm_scale * ds @ kf
    dk = (sm_scale * ds.transpose(-1, -2) @ qf).unflatten(1, (-1, G)).sum(2)
    dv = (p.transpose(-1, -2) @ dof).unflatten(1, (-1, G)).sum(2)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _kept_calls_checked(monkeypatch, tmp_path, task_name, case_name, submission, picks, count, seed=11):
    """check_samples' verdict on `submission`'s kept timed calls, and the row sets the spec was
    asked for (None: the whole output)."""
    import dataclasses

    from grader.judge.checker import Checker
    from grader.judge.inputs import case_seed, make_case_inputs
    from grader.kata.format import TimedRows
    timer = cpu_timing(monkeypatch)
    kata = get_kata("flash_attention")
    checker = Checker(kata, seed, "cpu")
    task = checker.tasks[task_name]
    # Both tasks declare timed_rows; a smaller count fits these S.
    assert task.timed_rows is not None
    checker.tasks[task_name] = task = dataclasses.replace(task, timed_rows=TimedRows(dim=2, count=count))
    asked = []
    truth = getattr(checker.spec, task.reference_fn)
    monkeypatch.setattr(checker.spec, task.reference_fn,
                        lambda *a, rows=None, **kw: asked.append(rows) or truth(*a, rows=rows, **kw))
    case = task.case(case_name)
    planned = {"key": f"{task.name}/{case.name}/bfloat16", "task": task.name, "case": case.name,
               "dtype": "bfloat16"}

    def make_args(salt):
        inputs = make_case_inputs(checker.spec, task, case, "bfloat16", "cpu", seed, planned["key"], salt)
        return tuple(inputs[a] for a in task.args)

    result = timer.time_pair(submission, submission, make_args, seed=case_seed(seed, planned["key"] + "/rng"),
                             use_graph=False, sampler=KeepAt(picks))
    samples = []
    for i, sample in enumerate(result.checked):
        path = tmp_path / f"s{i}.pt"
        torch.save({name: [t] for name, t in zip((o.name for o in task.outputs), sample.outputs)}, path)
        samples.append({"call": sample.call, "set": sample.set, "file": str(path)})
    return checker.check_samples(planned, samples, result.method, result.n_sets), asked


@pytest.mark.parametrize("task_name, case_name, submission", [
    ("attention", "small_causal_gqa", _attention32),
    ("attention_backward", "bwd_small_causal_gqa", _attention_backward32),
])
def test_an_honest_kernels_kept_timed_calls_pass_at_sampled_rows(monkeypatch, tmp_path, task_name,
                                                                 case_name, submission):
    failure, asked = _kept_calls_checked(monkeypatch, tmp_path, task_name, case_name, submission,
                                         {1: 0, 4: 1}, count=8)
    assert failure is None, failure
    assert len(asked) == 2 and all(rows is not None and 8 <= len(rows) < 50 for rows in asked)


def test_a_result_cached_across_timed_calls_is_named_at_sampled_rows(monkeypatch, tmp_path):
    # The timing changes half of q, k, v and do before every call: a result cached at a set's
    # first call is wrong at nearly every row, and a sample of 8 rows of 100 sees it.
    cache = {}

    def by_buffer(*args):  # honest on a buffer's first call, then that call's result again
        if id(args[0]) not in cache:
            cache[id(args[0])] = (args[0], _attention32(*args))
        return cache[id(args[0])][1]

    failure, asked = _kept_calls_checked(monkeypatch, tmp_path, "attention", "small_causal_gqa",
                                         by_buffer, {7: 1}, count=8)
    assert failure is not None and failure["cheat"] == "cached_results", failure
    assert asked[0] is not None and len(asked[0]) == 8 and None in asked[1:]


def _checked_case(monkeypatch, tmp_path, bench, second_call):
    """check_case's result for the forward's small_causal_gqa (as a bench case or not), its first
    call honest and its second `second_call(inputs of the second call, first outputs)`; and the
    row sets the spec was asked for, in order."""
    import dataclasses

    from grader.judge.checker import Checker
    from grader.judge.inputs import AGAIN, make_case_inputs
    from grader.kata.format import TimedRows

    checker = Checker(get_kata("flash_attention"), 5, "cpu")
    task = checker.tasks["attention"]
    cases = tuple(dataclasses.replace(c, bench=bench) if c.name == "small_causal_gqa" else c
                  for c in task.cases)
    checker.tasks["attention"] = task = dataclasses.replace(
        task, cases=cases, timed_rows=TimedRows(dim=2, count=8))
    asked = []
    truth = checker.spec.reference
    monkeypatch.setattr(checker.spec, "reference",
                        lambda *a, rows=None, **kw: asked.append(rows) or truth(*a, rows=rows, **kw))
    key = "attention/small_causal_gqa/bfloat16"
    planned = {"key": key, "task": "attention", "case": "small_causal_gqa", "dtype": "bfloat16"}
    draw = lambda salt: make_case_inputs(checker.spec, task, task.case("small_causal_gqa"),  # noqa: E731
                                         "bfloat16", "cpu", 5, key, salt)
    args = lambda inputs: [inputs[a] for a in task.args]  # noqa: E731
    first = _attention32(*args(draw("")))
    files = {}
    for name, outputs in (("first", first), ("again", second_call(args(draw(AGAIN)), first))):
        files[name] = str(tmp_path / f"{name}.pt")
        torch.save({"o": [outputs[0]], "lse": [outputs[1]]}, files[name])
    return checker.check_case(planned, {"status": "ran", "outputs": files}), asked


def test_a_bench_cases_second_checked_call_is_verified_at_sampled_rows(monkeypatch, tmp_path):
    result, asked = _checked_case(monkeypatch, tmp_path, True, lambda args, first: _attention32(*args))
    assert result["status"] == "pass", result
    assert asked[0] is None and asked[1] is not None and 8 <= len(asked[1]) < 50 and len(asked) == 2
    result, asked = _checked_case(monkeypatch, tmp_path, False, lambda args, first: _attention32(*args))
    assert result["status"] == "pass" and asked == [None, None]  # not a bench case: whole


def test_a_bench_cases_second_call_returning_the_first_result_is_still_named(monkeypatch, tmp_path):
    result, asked = _checked_case(monkeypatch, tmp_path, True, lambda args, first: first)
    assert result["status"] == "fail" and result["cheat"] == "cached_results", result
    assert asked[1] is not None and asked[2] is None  # sampled, then whole for the account


def test_a_sampled_failure_is_reported_whole(monkeypatch, tmp_path):
    # The last eighth of dq's rows left unwritten (zero) in timed calls: the sample finds it,
    # and the message counts the whole output's elements, as a whole comparison does.
    calls = {"n": 0}

    def seven_eighths(*args):
        dq, dk, dv = _attention_backward32(*args)
        calls["n"] += 1
        S = dq.shape[2]
        return dq.index_fill(2, torch.arange(S - S // 8, S), 0.0), dk, dv

    # Three kept calls, each sampled at 40 rows of 100: all three miss the 12 rows once in 4e8.
    failure, asked = _kept_calls_checked(monkeypatch, tmp_path, "attention_backward", "bwd_small_causal_gqa",
                                         seven_eighths, {4: 1, 5: 2, 7: 1}, count=40)
    assert failure is not None and failure["cheat"] is None, failure
    assert asked[0] is not None and asked[-1] is None  # sampled, then whole for the account
    B, H, S, D = 1, 4, 100, 64
    assert f"of {B * H * S * D} elements" in failure["message"], failure["message"]
