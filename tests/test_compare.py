"""Comparison semantics: assert_close-style tolerances, exact and ULP modes, NaN never passes."""

from __future__ import annotations

import pytest
import torch

from grader.judge.compare import check_tensor_type, compare_values, same_values


def test_allclose_matches_assert_close_rule():
    expected = torch.tensor([1.0, 100.0, -3.0], dtype=torch.float64)
    got = torch.tensor([1.0 + 1.9e-3, 100.0 + 0.1, -3.0], dtype=torch.float32)
    ok = compare_values(got, expected, "y", mode="allclose", atol=1e-3, rtol=1e-3)
    assert ok.ok and ok.max_abs_err == pytest.approx(0.1, rel=1e-3)
    bad = compare_values(got, expected, "y", mode="allclose", atol=1e-4, rtol=1e-4)
    assert not bad.ok and bad.mismatched == 2 and [m["index"] for m in bad.mismatches] == [[0], [1]]
    assert "2 of 3 elements" in bad.message


@pytest.mark.parametrize("poison", [float("nan"), float("inf"), -float("inf")])
def test_nan_and_inf_never_pass_against_finite_truth(poison):
    expected = torch.zeros(4, dtype=torch.float64)
    got = torch.zeros(4)
    got[2] = poison
    result = compare_values(got, expected, "y", mode="allclose", atol=1e30, rtol=1e30)
    assert not result.ok and result.mismatched == 1 and result.mismatches[0]["index"] == [2]


def test_nan_message_points_at_unwritten_elements():
    result = compare_values(torch.full((3,), float("nan")), torch.zeros(3, dtype=torch.float64), "y",
                            mode="allclose", atol=1, rtol=1)
    assert "never wrote" in result.message


def test_infinite_truth_must_be_matched_exactly():
    expected = torch.tensor([float("-inf"), 1.0], dtype=torch.float64)
    assert compare_values(torch.tensor([float("-inf"), 1.0]), expected, "y", mode="allclose").ok
    assert not compare_values(torch.tensor([-1e30, 1.0]), expected, "y", mode="allclose", atol=1e31).ok


def test_exact_mode_for_integers():
    expected = torch.tensor([1, 2, 3])
    assert compare_values(torch.tensor([1, 2, 3], dtype=torch.int8), expected, "q", mode="exact").ok
    result = compare_values(torch.tensor([1, 2, 4], dtype=torch.int8), expected, "q", mode="exact")
    assert not result.ok and result.mismatches[0] == {"index": [2], "got": 4.0, "expected": 3.0}


def test_ulp_mode_counts_units_in_the_last_place():
    truth = torch.tensor([1.0, 3.0, -2.5, 0.0], dtype=torch.float64)
    rounded = truth.to(torch.bfloat16)
    one_up = (rounded.view(torch.int16) + 1).view(torch.bfloat16)
    assert compare_values(one_up, truth, "y", mode="ulp", ulp=1).ok
    assert not compare_values(one_up, truth, "y", mode="ulp", ulp=0).ok
    # +0 and -0 are zero ULPs apart.
    assert compare_values(torch.tensor([-0.0], dtype=torch.bfloat16), torch.zeros(1, dtype=torch.float64),
                          "y", mode="ulp", ulp=0).ok


def test_ulp_mode_for_fp8():
    truth = torch.tensor([1.0, 10.0, -100.0], dtype=torch.float64)
    q = truth.to(torch.float8_e4m3fn)
    assert compare_values(q, truth, "q", mode="ulp", ulp=0).ok
    two_up = (q.view(torch.int8) + 2).view(torch.float8_e4m3fn)
    result = compare_values(two_up, truth, "q", mode="ulp", ulp=1)
    assert not result.ok and result.mismatched == 3


def test_structural_checks():
    t = torch.zeros(2, 3)
    assert check_tensor_type(t, "y", t.device, torch.float32, (2, 3)) is None
    assert "dtype float16" in check_tensor_type(t.half(), "y", t.device, torch.float32, (2, 3))
    assert "shape (3, 2)" in check_tensor_type(t.t(), "y", t.device, torch.float32, (2, 3))
    assert "subclass" in check_tensor_type(torch.nn.Parameter(t), "y", t.device, torch.float32, (2, 3))
    assert "expected a torch.Tensor" in check_tensor_type(None, "y", t.device, torch.float32, (2, 3))


def test_same_values_treats_nan_as_equal_but_catches_changes():
    a = torch.tensor([1.0, float("nan")])
    assert same_values(a, a.clone())
    b = a.clone()
    b[0] = 2
    assert not same_values(a, b)


# ---- norm mode: the whole tensor at once -------------------------------------------------------

def _matrix(seed: int = 0, shape=(16, 24)) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_norm_mode_passes_on_the_relative_frobenius_error():
    truth = _matrix()
    noise = _matrix(1)
    got = truth + 0.05 * noise * truth.norm() / noise.norm()  # relative Frobenius error 0.05
    ok = compare_values(got, truth, "out", mode="norm", rtol=0.06)
    assert ok.ok and ok.max_rel_err == pytest.approx(0.05) and ok.mismatched == 0 and ok.total == 384
    # Elementwise the same output would fail anywhere the truth is small: not here.
    assert not compare_values(got, truth, "out", mode="allclose", atol=0, rtol=0.06).ok
    bad = compare_values(got, truth, "out", mode="norm", rtol=0.04)
    assert not bad.ok and bad.max_rel_err == pytest.approx(0.05)
    assert "relative Frobenius error" in bad.message and "= 0.05" in bad.message
    assert "tolerance 0.04" in bad.message
    # The elements listed are those beyond their even share of the allowance: some always are.
    assert bad.mismatched > 0 and bad.mismatches


def test_norm_mode_in_float64_from_a_bf16_output():
    truth = _matrix()
    got = truth.to(torch.bfloat16)  # rounding alone: about 2e-3 relative, normwise
    result = compare_values(got, truth, "out", mode="norm", rtol=4e-3)
    assert result.ok and 5e-4 < result.max_rel_err < 4e-3


@pytest.mark.parametrize("poison", [float("nan"), float("inf"), -float("inf")])
def test_norm_mode_never_passes_nan_or_inf(poison):
    truth = _matrix()
    got = truth.clone()
    got[3, 4] = poison
    result = compare_values(got, truth, "out", mode="norm", rtol=1e30)
    assert not result.ok and result.max_rel_err is None
    assert result.mismatches[0]["index"] == [3, 4]
    assert ("NaN" if poison != poison else "inf") in result.message


def test_norm_mode_with_a_zero_truth():
    truth = torch.zeros(4, 5, dtype=torch.float64)
    assert compare_values(torch.zeros(4, 5), truth, "out", mode="norm", rtol=0.1).ok
    result = compare_values(torch.full((4, 5), 1e-6), truth, "out", mode="norm", rtol=0.1)
    assert not result.ok and "truth is all zeros" in result.message
    # An absolute floor (atol) is what lets a near-zero output pass a zero truth.
    assert compare_values(torch.full((4, 5), 1e-6), truth, "out", mode="norm", atol=1e-4, rtol=0.1).ok


def test_norm_mode_close_mask_marks_elements_beyond_their_share():
    from grader.judge.compare import close_mask
    truth = _matrix()
    got = truth.clone()
    got[0, 0] += 10.0  # one big error, the rest exact
    close, g, e, diff = close_mask(got, truth, mode="norm", rtol=0.01)
    assert not bool(close[0, 0]) and bool(close.flatten()[1:].all())
    assert float(diff[0, 0]) == pytest.approx(10.0)


def test_tolerance_used_is_the_worst_error_over_its_allowed_error():
    # The tolerance allows atol + rtol * |e| + allowance = 1e-3 + 1e-3 * 4 + 5e-3 = 1e-2 at the
    # second element; an error of 5e-3 there uses exactly half of it, and is the worst.
    expected = torch.tensor([1.0, 4.0, 0.0], dtype=torch.float64)
    allowance = torch.tensor([0.0, 5e-3, 0.0], dtype=torch.float64)
    got = (expected + torch.tensor([1e-4, 5e-3, 0.0], dtype=torch.float64)).double()
    half = compare_values(got, expected, "y", mode="allclose", atol=1e-3, rtol=1e-3, allowance=allowance)
    assert half.ok and half.tolerance_used == pytest.approx(0.5, rel=1e-9)
    # scale replaces |expected| in the bound: 1e-3 + 1e-3 * 9 = 1e-2, so 5e-3 is half again.
    scaled = compare_values(got[1:2], expected[1:2], "y", mode="allclose", atol=1e-3, rtol=1e-3,
                            scale=torch.tensor([9.0], dtype=torch.float64))
    assert scaled.tolerance_used == pytest.approx(0.5, rel=1e-9)
    over = compare_values(got, expected, "y", mode="allclose", atol=1e-3, rtol=0.0)  # 5e-3 of 1e-3
    assert not over.ok and over.tolerance_used == pytest.approx(5.0, rel=1e-9)
    exact = compare_values(expected.clone(), expected, "y", mode="allclose", atol=0.0, rtol=0.0)
    assert exact.ok and exact.tolerance_used == 0.0


def test_tolerance_used_is_infinite_for_nan_or_an_error_with_nothing_allowed():
    expected = torch.zeros(3, dtype=torch.float64)
    nan = compare_values(torch.tensor([0.0, float("nan"), 0.0]), expected, "y", mode="allclose",
                         atol=1.0, rtol=0.0)
    assert nan.tolerance_used == float("inf")
    nothing = compare_values(torch.tensor([0.0, 1e-9, 0.0]), expected, "y", mode="allclose")
    assert not nothing.ok and nothing.tolerance_used == float("inf")
    ints = torch.tensor([1, 2, 3])
    assert compare_values(ints, ints, "y", mode="exact").tolerance_used == 0.0
    assert compare_values(ints + 1, ints, "y", mode="exact").tolerance_used == float("inf")


def test_tolerance_used_in_ulp_and_norm_modes():
    expected = torch.tensor([1.0, 2.0], dtype=torch.float16)
    one_ulp = torch.nextafter(expected, torch.tensor(10.0, dtype=torch.float16))
    result = compare_values(one_ulp, expected.double(), "y", mode="ulp", ulp=2)
    assert result.ok and result.tolerance_used == pytest.approx(0.5)
    truth = torch.tensor([3.0, 4.0], dtype=torch.float64)  # ||truth|| = 5
    got = truth + torch.tensor([0.03, 0.04], dtype=torch.float64)  # error norm 0.05
    norm = compare_values(got, truth, "y", mode="norm", rtol=0.02)  # allows 0.1
    assert norm.ok and norm.tolerance_used == pytest.approx(0.5, rel=1e-9)
