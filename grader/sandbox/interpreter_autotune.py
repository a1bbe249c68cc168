"""Under the Triton interpreter, `@triton.autotune` runs its first configuration.

The autotuner times each configuration with the GPU driver's benchmarker, which a machine
without a GPU does not have ("0 active drivers"), so an honest autotuned kernel could not be
graded on a laptop at all. Timing interpreted programs would say nothing about speed anyway, and
every configuration must compute the same result: the worker gives the autotuner a benchmarker
that times nothing, so its configurations tie and the first one left after pruning runs, as
with a single configuration. On a GPU nothing changes; a benchmarker of the submission's own
(`autotune(do_bench=...)`) is kept.
"""

from __future__ import annotations

from functools import cached_property


def _untimed(kernel_call, quantiles=None, **_options):
    """The benchmarker's answer without running anything: every configuration ties."""
    return [0.0] * len(quantiles) if quantiles else 0.0


def install() -> bool:
    """Make the autotuner's benchmarker the untimed one; False where this Triton keeps its
    benchmarker elsewhere (then an autotuned kernel still gets `gpu_only_feature`)."""
    from triton.runtime.autotuner import Autotuner

    if not isinstance(Autotuner.__dict__.get("do_bench"), cached_property):
        return False

    def do_bench(self):
        own = getattr(self, "_do_bench", None)
        return own if own is not None else _untimed

    Autotuner.do_bench = property(do_bench)
    return True
