"""A seccomp filter that refuses new sockets: the worker's whole network confinement on kernels
without Landlock's network rules, and the part of it they lack (UDP, raw sockets) on those with.

The filter is a few BPF instructions: socket() fails with EACCES whatever its family, io_uring_setup
(whose operations could open and connect a socket without the socket() call) with ENOSYS, and so
does every call made through another architecture's entry (a 32-bit int 0x80 on x86-64); a few
calls only root can make, and no grade needs, fail with EPERM (_ROOT_ONLY). socketpair()
is allowed: its two ends join only each other. It applies to every thread of the process
(SECCOMP_FILTER_FLAG_TSYNC) and to every process started afterwards, and cannot be lifted.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import sys

# (audit architecture, socket, io_uring_setup, seccomp) per machine: include/uapi/linux/audit.h and
# the architectures' syscall tables.
_ARCHES = {
    "x86_64": (0xC000003E, 41, 425, 317),
    "aarch64": (0xC00000B7, 198, 425, 277),
}
# Calls no grade makes, that a worker run as root could use to leave its sandbox: loading kernel
# modules or a new kernel, BPF, perf events, port I/O, opening files by handle (round the path
# checks), the kernel's keyrings, swap, reboot. (swapon, swapoff, reboot, iopl, ioperm,
# init_module, delete_module, kexec_load, add_key, request_key, keyctl, perf_event_open,
# open_by_handle_at, finit_module, kexec_file_load, bpf.)
_ROOT_ONLY = {
    "x86_64": (167, 168, 169, 172, 173, 175, 176, 246, 248, 249, 250, 298, 304, 313, 320, 321),
    "aarch64": (224, 225, 142, 105, 106, 104, 217, 218, 219, 241, 265, 273, 294, 280),
}
_X32_BIT = 0x40000000  # x86-64's x32 calls: another way in, refused
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data
_AF_UNIX = 1
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_PR_SET_NO_NEW_PRIVS = 38


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def program(machine: str, allow_unix: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter for `machine`, as (code, jump if true, jump if false, k) instructions."""
    arch, nr_socket, nr_io_uring, _ = _ARCHES[machine]
    refuse_socket = _RET_ERRNO | errno.EACCES
    refuse_other = _RET_ERRNO | errno.ENOSYS
    code = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, refuse_other),            # another architecture's entry
        (_LD_W_ABS, 0, 0, _NR),
        (_JGE_K, 0, 1, _X32_BIT),
        (_RET_K, 0, 0, refuse_other),            # x32
        (_JEQ_K, 0, 1, nr_io_uring),
        (_RET_K, 0, 0, refuse_other),
    ]
    for nr in _ROOT_ONLY[machine]:
        code += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM)]
    code += [
        (_JEQ_K, 0, 3 if allow_unix else 1, nr_socket),
    ]
    if allow_unix:
        code += [(_LD_W_ABS, 0, 0, _ARG0), (_JEQ_K, 1, 0, _AF_UNIX)]
    code += [(_RET_K, 0, 0, refuse_socket), (_RET_K, 0, 0, _RET_ALLOW)]
    return code


def available() -> str | None:
    """Why the filter cannot be put in force here, or None."""
    if sys.platform != "linux":
        return "seccomp is Linux's"
    if platform.machine() not in _ARCHES:
        return f"no socket filter for {platform.machine()}"
    return None


def refuse_sockets(allow_unix: bool = False) -> str | None:
    """Put the filter in force for this process, its threads and its children; returns why it
    could not, or None."""
    problem = available()
    if problem:
        return problem
    machine = platform.machine()
    code = program(machine, allow_unix)
    instructions = (_Instruction * len(code))(*[_Instruction(*i) for i in code])
    prog = _Program(len(code), instructions)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"prctl(NO_NEW_PRIVS) failed: {ctypes.get_errno()}"
    nr_seccomp = _ARCHES[machine][3]
    if libc.syscall(nr_seccomp, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog)) != 0:
        reason = ctypes.get_errno()
        return f"seccomp(SET_MODE_FILTER) failed: {errno.errorcode.get(reason, reason)}"
    return None
