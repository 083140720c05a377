"""Compiles kepl's hot modules with Cython into extensions beside their .py files (`make compile`).

The .py files stay the source: nothing here is rewritten, an extension is only a faster copy,
``app.pure`` runs the source when ``KEPL_PURE`` is set or the source is newer, and a
machine without Cython or a C compiler skips this step with one line and runs the source.
Run: python build_compiled.py [--clean] [--jobs N]
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

ROOT = Path(__file__).resolve().parent

# Chosen by profile (tests/bench/bench_worker_path.py --profile, bench_send_batch): the
# modules an event and a checkpoint cross.
MODULES = [
    "app/runtime/engine.py",
    "app/runtime/catalog.py",
    "app/runtime/rows.py",
    "app/epl/expr.py",
    "app/runtime/kafka/intake.py",
    "app/runtime/kafka/partition.py",
    "app/runtime/kafka/store.py",
    "app/runtime/kafka/rows.py",
    "app/runtime/kafka/checkpoint.py",
    "app/runtime/kafka/codec.py",
    "app/runtime/kafka/loop.py",
    "operators/pipeline.py",
    "operators/resultset.py",
    "operators/aggregates.py",
    "operators/state.py",
    "operators/bags.py",
    "operators/windows/common.py",
    "operators/windows/length.py",
    "operators/windows/time.py",
    "operators/windows/groupwin.py",
    "operators/windows/unique.py",
]

DIRECTIVES = {
    "language_level": 3,
    "binding": True,            # functions keep __name__, __module__, signatures for inspect
    "annotation_typing": False,  # annotations stay hints: no C types, no exact-type checks
}


def miscompiled(module: str) -> list[str]:
    """Lines Cython 3.0 compiles wrongly: ``isinstance(v, int | float)`` is always False."""
    tree = ast.parse((ROOT / module).read_text())
    return [f"{module}:{n.lineno}" for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in ("isinstance", "issubclass") and len(n.args) == 2
            and isinstance(n.args[1], ast.BinOp) and isinstance(n.args[1].op, ast.BitOr)]


def built_files() -> list[Path]:
    """The extensions and C files this step leaves beside the sources."""
    out = []
    for module in MODULES:
        stem = ROOT / module[:-3]
        out += [stem.with_suffix(".c"), *(Path(f"{stem}{s}") for s in EXTENSION_SUFFIXES)]
    return [p for p in out if p.exists()]


def clean() -> None:
    paths = built_files()
    for path in paths:
        path.unlink()
    print(f"compile: removed {len(paths)} compiled files")


def build(jobs: int) -> int:
    try:
        from Cython.Build import cythonize
        from setuptools import Extension, setup
    except ImportError as exc:
        print(f"compile: skipped ({exc.name} is not installed); kepl runs its pure-Python modules")
        return 0
    bad = [line for module in MODULES for line in miscompiled(module)]
    if bad:
        clean()
        print(f"compile: skipped (isinstance with an X | Y union at {', '.join(bad)}: write a "
              "tuple); kepl runs its pure-Python modules")
        return 0
    start = time.monotonic()
    extensions = [Extension(m[:-3].replace("/", "."), [m],
                            extra_compile_args=["-O2", "-g0", "-Wno-unused-function"])
                  for m in MODULES]
    os.chdir(ROOT)
    try:
        setup(name="kepl-compiled", script_args=["-q", "build_ext", "--inplace",
                                                  "--parallel", str(jobs)],
              ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES, nthreads=jobs,
                                    quiet=True))
    except (SystemExit, Exception) as exc:  # no C compiler, no Python headers
        for path in built_files():
            path.unlink()
        print(f"compile: skipped (the build failed: {exc}); kepl runs its pure-Python modules")
        return 0
    print(f"compile: {len(MODULES)} modules compiled with Cython in "
          f"{time.monotonic() - start:.0f} s (KEPL_PURE=1 runs the sources)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clean", action="store_true", help="remove the compiled files")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    if args.clean:
        clean()
        return 0
    return build(args.jobs)


if __name__ == "__main__":
    sys.exit(main())
