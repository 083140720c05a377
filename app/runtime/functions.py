"""User functions: single-row and aggregation functions written in Python, declared by
name in a statement file or a scenario (``functions:``) and imported from their module.

A declaration says where the callable lives (``import: module:callable``), its parameter
types and its result type, so that statements calling it are type-checked when planned.
Only the declared module is imported; statement text is never evaluated as Python.  A
function must be pure (its result depends on its arguments alone): replay after a
failure or a restart calls it again for the same events, and exactly-once output holds
only if it answers the same.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operators.user_functions import UserFunctionError

__all__ = ["FunctionDef", "FunctionError", "UserFunctionError", "parse_functions"]

VALUE_TYPES = ("string", "int", "long", "double", "float", "boolean", "any")
"""Parameter and result types; ``any`` takes every value unchecked."""
EVENT_TYPE = "event"
"""A parameter that takes a whole event (the ``*`` argument, as in ``computeHash(*)``)."""
PARAM_TYPES = (*VALUE_TYPES, EVENT_TYPE)
KINDS = ("single-row", "aggregation")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TARGET = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
                     r":[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
KEYS = ("import", "params", "returns", "kind", "path")


class FunctionError(ValueError):
    """A function declaration that cannot be used; ``key`` names the offending key."""

    def __init__(self, message: str, name: str | None = None, key: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.key = key
        self.hint = hint


@dataclass(frozen=True)
class FunctionDef:
    """One declared user function."""

    name: str
    target: str
    """``module:callable`` (a function, or for an aggregation a class or factory)."""
    params: tuple[str, ...]
    returns: str
    kind: str = "single-row"
    search: tuple[str, ...] = ()
    """Directories the module is looked for in when the import path does not find it
    (the declared ``path``, else the declaring file's directory)."""
    _loaded: list[Any] = field(default_factory=list, compare=False, repr=False)

    @property
    def aggregate(self) -> bool:
        return self.kind == "aggregation"

    def signature(self) -> str:
        """``name(type, ...) -> type`` as ``kepl explain`` and error hints show it."""
        agg = " aggregation" if self.aggregate else ""
        return f"{self.name}({', '.join(self.params)}) -> {self.returns}{agg} = {self.target}"

    def load(self) -> Any:
        """The callable, imported once (FunctionError when it cannot be)."""
        if not self._loaded:
            self._loaded.append(_import(self))
        return self._loaded[0]

    def to_dict(self) -> dict[str, Any]:
        return {"import": self.target, "params": list(self.params), "returns": self.returns,
                **({"kind": self.kind} if self.kind != "single-row" else {}),
                **({"path": self.search[0]} if self.search else {})}


def parse_functions(raw: Any, base_dir: str | Path | None = None) -> dict[str, FunctionDef]:
    """The ``functions:`` mapping of a statement file or scenario, checked (FunctionError
    names the function and key at fault).  ``base_dir``: the declaring file's directory,
    where a relative ``path`` starts and where a module not on the import path is
    looked for."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise FunctionError("'functions' must map function names to declarations "
                            "{import, params, returns}")
    out: dict[str, FunctionDef] = {}
    for name, spec in raw.items():
        out[str(name)] = _parse_one(name, spec, base_dir)
    return out


def _parse_one(name: Any, spec: Any, base_dir: str | Path | None) -> FunctionDef:
    from app.epl.builtins import FUNCTIONS
    from operators.aggregates import AGGREGATE_NAMES

    if not isinstance(name, str) or not _NAME.match(name):
        raise FunctionError(f"function name {name!r} must be an identifier", str(name))
    lname = name.lower()
    if lname in FUNCTIONS or lname in AGGREGATE_NAMES or lname in RESERVED:
        raise FunctionError(f"'{name}' is a built-in function", name,
                            hint="give the user function another name")
    if not isinstance(spec, Mapping):
        raise FunctionError(f"function '{name}' must be a mapping with import, params "
                            "and returns", name)
    for key in spec:
        if key not in KEYS:
            raise FunctionError(f"unknown key '{key}'", name, str(key),
                                f"the keys are {', '.join(KEYS)}")
    target = spec.get("import")
    if not isinstance(target, str) or not _TARGET.match(target):
        raise FunctionError(f"function '{name}': 'import' must be 'module:callable', got "
                            f"{target!r}", name, "import",
                            "as in 'mypackage.functions:compute_hash'")
    params = spec.get("params", [])
    if not isinstance(params, list) or not all(isinstance(p, str) for p in params):
        raise FunctionError(f"function '{name}': 'params' must be a list of types", name,
                            "params", f"the types are {', '.join(PARAM_TYPES)}")
    for p in params:
        if p not in PARAM_TYPES:
            raise FunctionError(f"function '{name}': unknown parameter type '{p}'", name,
                                "params", f"the types are {', '.join(PARAM_TYPES)}")
    returns = spec.get("returns", "any")
    if returns not in VALUE_TYPES:
        raise FunctionError(f"function '{name}': unknown result type {returns!r}", name,
                            "returns", f"the types are {', '.join(VALUE_TYPES)}")
    kind = spec.get("kind", "single-row")
    if kind not in KINDS:
        raise FunctionError(f"function '{name}': 'kind' must be single-row or aggregation, "
                            f"got {kind!r}", name, "kind")
    if kind == "aggregation" and len(params) < 1:
        raise FunctionError(f"aggregation function '{name}' needs at least one parameter",
                            name, "params")
    search: tuple[str, ...] = ()
    path = spec.get("path")
    if path is not None:
        if not isinstance(path, str):
            raise FunctionError(f"function '{name}': 'path' must be a directory", name,
                                "path")
        p = Path(path)
        if not p.is_absolute() and base_dir is not None:
            p = Path(base_dir) / p
        search = (str(p.resolve()),)
    elif base_dir is not None:
        search = (str(Path(base_dir).resolve()),)
    return FunctionDef(name, target, tuple(params), str(returns), str(kind), search)


RESERVED = frozenset({"prev", "prevtail", "prevcount", "prevwindow", "coalesce",
                      "current_timestamp", "cast", "instanceof", "typeof", "exists",
                      "consistent_hash_crc32", "hash_code"})
"""Names the engine gives a meaning of its own."""


def _import(fd: FunctionDef) -> Any:
    module_name, attr = fd.target.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is None or not module_name.startswith(e.name):
            raise FunctionError(f"function '{fd.name}': importing '{module_name}' failed: "
                                f"{e}", fd.name, "import") from None
        module = _import_from(fd, module_name)
    except Exception as e:  # noqa: BLE001 - whatever the module raises while importing
        raise FunctionError(f"function '{fd.name}': importing '{module_name}' failed: "
                            f"{type(e).__name__}: {e}", fd.name, "import") from None
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise FunctionError(f"function '{fd.name}': module '{module_name}' has no "
                                f"'{attr}'", fd.name, "import",
                                f"define '{attr}' in {module_name}, or correct the name "
                                "after ':'")
    if not callable(obj):
        raise FunctionError(f"function '{fd.name}': '{fd.target}' is not callable",
                            fd.name, "import")
    return obj


def _import_from(fd: FunctionDef, module_name: str) -> Any:
    """Import ``module_name`` from the declaration's directories (a module file next to
    the statement file or scenario that declares it)."""
    rel = Path(*module_name.split("."))
    for d in fd.search:
        for candidate in (Path(d) / rel.with_suffix(".py"), Path(d) / rel / "__init__.py"):
            if candidate.is_file():
                spec = importlib.util.spec_from_file_location(module_name, candidate)
                if spec is None or spec.loader is None:
                    continue
                module = importlib.util.module_from_spec(spec)
                sys.modules[module_name] = module
                try:
                    spec.loader.exec_module(module)
                except Exception as e:  # noqa: BLE001 - reported as a declaration error
                    sys.modules.pop(module_name, None)
                    raise FunctionError(f"function '{fd.name}': importing '{candidate}' "
                                        f"failed: {type(e).__name__}: {e}", fd.name,
                                        "import") from None
                return module
    where = f" (nor in {', '.join(fd.search)})" if fd.search else ""
    raise FunctionError(f"function '{fd.name}': no module named '{module_name}'{where}",
                        fd.name, "import",
                        "put the module on PYTHONPATH or next to the file that declares it")
