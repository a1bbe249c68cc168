"""What the worker may read once it is locked down: an allow-list of paths, for Landlock's read rights.

Readable: the Python installation and every import path (torch, triton, CUDA's pip packages),
the system's programs and libraries (/usr, /lib*, /bin: the compilers Triton runs, libcuda), the
few /etc files the dynamic linker, glibc and CUDA read, /proc and /sys, the GPU's device files,
the compiler caches, the grade's own folders and the submission (its file, the .py files beside
it, the names in its folder). Everything else is refused: the home folder, the results store,
a batch's source folder and the other candidates' files, and, carved out of the grader's own
installation, the reference solutions and the katas' folders (the worker has read what it needs
of its kata, kata.yaml and spec.py, before the lockdown).

Landlock's rules only add: a folder allowed is allowed with everything beneath it. So a folder
that holds something refused (site-packages holds the grader, which holds grader/reference) is
not allowed itself: its names may be listed, and each of its entries is allowed but the refused
ones, recursively.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from grader.paths import data_root, kata_roots, package_dir

# /etc files read after the lockdown: the dynamic linker's cache and configuration, glibc's
# name-service files (a user's name, a home folder), time zone, OS identification.
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload", "nsswitch.conf", "passwd",
             "group", "host.conf", "localtime", "timezone", "os-release", "lsb-release",
             "debian_version", "redhat-release", "alternatives", "nvidia", "gai.conf")
# The system's programs and libraries: compilers (gcc, ld, as: Triton builds its launchers),
# libcuda and the libraries Python, torch and ptxas load.
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")
# Device files a grade uses: /dev/shm holds PyTorch's reference counts of the outputs handed to
# the checker through CUDA IPC. Never all of /dev (disks are device files too).
DEV_FILES = ("null", "zero", "full", "random", "urandom", "shm")
DEV_PREFIXES = ("nvidia",)  # nvidia0..N, nvidiactl, nvidia-uvm(-tools), nvidia-modeset, nvidia-caps
# /proc entries never readable: self and thread-self are links to a process's folder (its own is
# allowed by number); the rest expose the kernel's or other processes' memory and messages.
PROC_REFUSED = ("self", "thread-self", "kcore", "kmsg", "kpagecount", "kpageflags", "kpagecgroup",
                "kallsyms", "keys", "key-users", "sysrq-trigger", "timer_list", "vmallocinfo")
# Variables naming the CUDA toolkit, its tools or libraries (Triton's own and the usual ones).
TOOL_VARS = ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH",
             "TRITON_NVDISASM_PATH", "TRITON_LIBDEVICE_PATH", "TRITON_LIBCUDA_PATH", "TRITON_CUDART_PATH",
             "TRITON_CUPTI_LIB_PATH", "TRITON_CUDACRT_PATH")


@dataclass
class ReadRules:
    """Paths allowed: `trees` with everything beneath, `files` one file each, `listable` folders
    whose names (not contents) may be read, with their subfolders' names."""
    trees: list[Path] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    listable: list[Path] = field(default_factory=list)

    def add(self, path: Path) -> None:
        (self.trees if path.is_dir() else self.files).append(path)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def refused_inside_the_grader() -> tuple[list[Path], list[Path]]:
    """(never readable, readable only where named): the references and katas of every kata root;
    in a source checkout its whole top folder too (its .git holds the references), but for the
    grader package and what the allow-list names inside it (a virtual environment)."""
    hard = []
    for root in kata_roots():
        hard += [root / "reference", root / "katas"]
    # Every other installation of the grader on the import path too: a checkout's worker can
    # walk sys.path to the copy `pip install .` put in site-packages (CI found that door open).
    for entry in sys.path:
        installed = Path(entry or ".") / "grader"
        if os.path.isabs(entry) and (installed / "reference").is_dir():
            hard += [installed / "reference", installed / "katas"]
    soft = [data_root()] if data_root() != package_dir() else []
    return [p.resolve() for p in hard], [p.resolve() for p in soft]


def _allow_tree(rules: ReadRules, path: Path, hard: list[Path], soft: list[Path],
                explicit: bool) -> None:
    """Allow `path` with what is beneath it, split around what is refused."""
    try:
        path = path.resolve()
    except OSError:
        return
    if not path.exists() or any(_within(path, h) for h in hard):
        return
    if not explicit and any(_within(path, s) for s in soft):
        return
    if path == Path("/") or _within(Path.home().resolve(), path):
        return  # never the whole disk or a folder above the home folder
    inner = [s for s in hard + soft if s != path and path in s.parents]
    if not inner:
        rules.add(path)
        return
    if not any(_within(path, s) for s in soft):
        # Its names may be listed (Python's import system lists site-packages), and with them the
        # names beneath: the kata names, in grader/reference and grader/katas. A checkout's top
        # folder is on the path only for the grader itself, already imported: not even listed.
        rules.listable.append(path)
    try:
        children = sorted(path.iterdir())
    except OSError:
        return
    for child in children:
        _allow_tree(rules, child, hard, soft, explicit=False)


def python_paths() -> list[Path]:
    """The interpreter, its standard library and every import path."""
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))]
    found += [p for p in sys.path if p and os.path.isabs(p)]
    found += [v for k, v in sysconfig.get_paths().items() if k in ("include", "platinclude", "stdlib",
                                                                 "platstdlib", "purelib", "platlib")]
    return [Path(p) for p in found]


def toolkit_paths() -> list[Path]:
    """CUDA's toolkit and Triton's tools, where variables name them; the library path."""
    found = [Path(os.environ[v]) for v in TOOL_VARS if os.environ.get(v)]
    found += [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if os.path.isabs(p)]
    return found


# The C compiler and assembler Triton runs to build its launchers, wherever they are installed
# (a GPU machine may have gcc under /opt/gcc, not /usr): each one's installation prefix, for its
# libexec (cc1), headers and binutils.
COMPILER_NAMES = ("cc", "gcc", "clang", "c++", "g++", "as", "ld")


def compiler_paths() -> list[Path]:
    """The installation prefixes of the compilers Triton may run (CC, else what PATH finds), by
    their link and by what the link points to. Never the home folder or a folder above it."""
    home = Path.home().resolve()
    found: list[Path] = []
    names = [os.environ["CC"]] if os.environ.get("CC") else []
    for name in names + list(COMPILER_NAMES):
        where = shutil.which(name)
        if not where:
            continue
        for binary in (Path(where), Path(os.path.realpath(where))):
            folder = binary.parent
            for candidate in (folder.parent if folder.name == "bin" else folder, folder):
                if not _within(home, candidate.resolve()):  # /bin's parent is /: its folder only
                    if candidate not in found:
                        found.append(candidate)
                    break
    return found


def linker_paths(conf: Path = Path("/etc/ld.so.conf")) -> list[Path]:
    """The dynamic linker's library folders (ld.so.conf and the files it includes): where the
    driver's libraries sit, /usr/lib or not (a driver container's /run/nvidia/driver/...)."""
    found, seen = [], set()

    def read(path: Path) -> None:
        if path in seen:
            return
        seen.add(path)
        try:
            lines = path.read_text().splitlines()
        except OSError:
            return
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if line.startswith("include "):
                for pattern in line.split()[1:]:
                    base = Path(pattern) if os.path.isabs(pattern) else path.parent / pattern
                    for match in sorted(base.parent.glob(base.name)):
                        read(match)
            elif os.path.isabs(line):
                found.append(Path(line))

    read(conf)
    return found


def proc_paths() -> list[Path]:
    """/proc but other processes' folders: the system's entries (cpuinfo, meminfo, sys, driver/
    nvidia, ...) and this process's own (/proc/self). Another process's environment (the user's
    shell, holding tokens) is refused."""
    proc = Path("/proc")
    try:
        entries = [p for p in proc.iterdir() if not p.name.isdigit() and p.name not in PROC_REFUSED]
    except OSError:
        return [proc]
    return entries + [proc / str(os.getpid())]


def device_paths() -> list[Path]:
    dev = Path("/dev")
    found = [dev / name for name in DEV_FILES]
    try:
        found += [p for p in dev.iterdir() if p.name.startswith(DEV_PREFIXES)]
    except OSError:
        pass
    return [p for p in found if p.exists()]


def read_rules(grade_dirs: list[Path], caches: list[Path], submission: Path) -> ReadRules:
    """The worker's allow-list: what it needs to import, compile, load and run a kernel, and the
    submission's own files; `grade_dirs` are the grade's folders it works in, `caches` the
    compiler caches (the same it may write)."""
    hard, soft = refused_inside_the_grader()
    rules = ReadRules()
    # The grader itself, but for its data folders (in a wheel they sit inside the package); its
    # names listed, for the modules it imports late.
    rules.listable.append(package_dir())
    for child in sorted(package_dir().iterdir()):
        _allow_tree(rules, child, hard, soft, explicit=True)
    general = python_paths() + toolkit_paths() + linker_paths() + compiler_paths()
    general += [Path(p) for p in SYSTEM_DIRS]
    general += [Path("/etc") / name for name in ETC_FILES]
    general += proc_paths() + [Path("/sys")] + device_paths()
    for path in general:
        _allow_tree(rules, path, hard, soft, explicit=True)
    for path in caches + grade_dirs:
        _allow_tree(rules, path, hard, soft, explicit=True)
    # The submission: its file and the .py files beside it (helpers it may import); the names
    # in its folder, which Python's import system lists.
    folder = submission.parent
    rules.listable.append(folder)
    rules.files.append(submission)
    try:
        rules.files += sorted(p for p in folder.glob("*.py") if p != submission and p.is_file())
    except OSError:
        pass
    return rules
