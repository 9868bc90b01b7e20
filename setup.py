"""Builds the optional Cython core ``navi_core._core`` from ``csrc/_core.pyx``.

NAVI_CORE_PURE=1 skips the extension (the pure-Python twin is used);
NAVI_CORE_REQUIRE_EXTENSION=1 makes a failed build fatal instead of optional;
NAVI_CORE_CYTHON_TRACE=1 compiles with line tracing for coverage.

Without that requirement, any failure on the way to the extension (no Cython, a
cythonize error, no compiler) leaves an install on the twin, so an sdist installs
wherever Python does.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup

TRUTHY = {"1", "true", "yes", "on"}


def flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in TRUTHY


def say(line: str) -> None:
    """Print ``line`` on stderr and, when pip hides that, on the user's terminal.

    pip shows a build backend's output only with -v or on failure, so the one line
    that explains a long silent compile also goes to the controlling terminal.
    """
    print(line, file=sys.stderr, flush=True)
    # pip runs setup.py for the metadata too; only the build itself compiles
    building = {"bdist_wheel", "build_ext", "build", "install", "editable_wheel"}
    if sys.stderr.isatty() or not building.intersection(sys.argv[1:]):
        return
    try:
        with open("/dev/tty", "w", encoding="utf-8") as tty:
            tty.write(line + "\n")
    except OSError:  # no terminal (CI, a service): stderr is all there is
        pass


def extensions() -> list[Extension]:
    if flag("NAVI_CORE_PURE"):
        print("navi_core: pure-Python build (NAVI_CORE_PURE set)", file=sys.stderr)
        return []
    require = flag("NAVI_CORE_REQUIRE_EXTENSION")
    try:
        from Cython.Build import cythonize
    except ImportError:
        if require:
            raise
        print("navi_core: Cython missing, pure-Python build", file=sys.stderr)
        return []
    trace = flag("NAVI_CORE_CYTHON_TRACE")
    macros = [("CYTHON_TRACE_NOGIL", "1")] if trace else []
    ext = Extension(
        "navi_core._core",
        ["csrc/_core.pyx"],
        define_macros=macros,
        extra_compile_args=["-O3"] if os.name != "nt" else [],
        optional=not require,
    )
    say(
        "navi_core: compiling the Cython core (about 30 s; "
        "set NAVI_CORE_PURE=1 to skip it and use the pure-Python twin)"
    )
    try:
        built = cythonize(
            [ext],
            compiler_directives={
                "language_level": 3,
                "embedsignature": True,
                "linetrace": trace,
            },
            quiet=True,
        )
    except Exception as exc:  # a missing or broken csrc/: the twin still installs
        if require:
            raise
        print(
            f"navi_core: cythonize failed ({exc}), pure-Python build", file=sys.stderr
        )
        return []
    for e in built:  # cythonize drops the flag; without it a compiler failure is fatal
        e.optional = not require
    return built


setup(ext_modules=extensions())
