"""The roofline floor used by the grader and the benchmark."""

from grader.timing import floor_ms

CEILINGS = {"copy_gbps": 1000.0, "matmul_tflops": 500.0}


def test_floor_is_the_larger_of_memory_and_compute_time():
    assert floor_ms(2e9, None, CEILINGS) == 2.0  # 2 GB at 1000 GB/s
    assert floor_ms(1e6, 1e12, CEILINGS) == 2.0  # 1 TFLOP at 500 TFLOP/s dominates
    assert floor_ms(None, None, CEILINGS) is None
