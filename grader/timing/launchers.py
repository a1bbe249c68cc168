"""Triton's launcher classes, the one place every compiled kernel's launch goes through: what the
launch count (grader.sandbox.launches), the progress record (grader.sandbox.progress) and the
anatomy (grader.timing.anatomy) each wrap. Here, below the sandbox, so that all three share it."""

from __future__ import annotations

# (module, class) of each backend's launcher: every compiled kernel launches through its __call__.
LAUNCHERS = (("triton.backends.nvidia.driver", "CudaLauncher"), ("triton.backends.amd.driver", "HIPLauncher"))


def launcher_classes() -> list[type]:
    """The launcher classes this Triton has and can import here."""
    import importlib

    found = []
    for module_name, class_name in LAUNCHERS:
        try:
            found.append(getattr(importlib.import_module(module_name), class_name))
        except Exception:  # noqa: BLE001 - a backend this Triton lacks, or cannot import here
            continue
    return found


def launch_name(args) -> str:
    """The kernel's name from the launch metadata Triton hands its launcher (a LazyDict)."""
    for arg in args[:2]:
        data = getattr(arg, "data", None)
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            return data["name"]
    return "a Triton kernel"
