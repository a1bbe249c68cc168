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
