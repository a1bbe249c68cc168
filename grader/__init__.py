"""triton-kata: katas and an automated grader for practising Triton GPU kernels."""

__version__ = "0.1.0"
