"""Statement files: the YAML a user deploys (event types, topics, EPL statements).

Validated against ``schemas/statement-file.schema.json`` (package data); a bad file
gives one line saying what is wrong and where.  ``.epl`` modules (statements ended by ``;`` with
``create schema`` declarations) load into the same shape.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from app.schema_check import conforms
from schemas import STATEMENT_FILE_SCHEMA

if TYPE_CHECKING:
    import jsonschema

SCHEMA_PATH = STATEMENT_FILE_SCHEMA


class ConfigError(Exception):
    """A statement file that cannot be used; the message is one line."""


class InvalidFile(ConfigError):
    """A statement file that does not have the statement-file shape; ``path`` names it,
    so that a command can point at the first error's line and column (``kepl check``)."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class Loader(yaml.SafeLoader):
    """PyYAML's safe loader whose value constructors never raise past it: a scalar it
    cannot turn into a value (an integer of more digits than Python converts, a date
    that does not exist) is a ``ConstructorError`` at the scalar's line and column."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, OverflowError, TypeError, LookupError, AttributeError) as e:
            raise yaml.constructor.ConstructorError(
                None, None, _unreadable(node, e), node.start_mark) from None


def _unreadable(node: Any, e: Exception) -> str:
    """What a scalar the loader could not construct is, in one line."""
    kind = str(node.tag).rpartition(":")[2] or "value"
    if kind == "int" and "digits" in str(e):
        digits = sum(ch.isdigit() for ch in str(node.value))
        return (f"an integer of {digits} digits is too long to read (at most "
                f"{sys.get_int_max_str_digits()} digits)")
    if isinstance(e, ValueError | OverflowError):
        return f"cannot read this {kind}: {str(e).split(';')[0]}"
    value = str(node.value)
    return f"cannot read this {kind}: {value[:40] + ('...' if len(value) > 40 else '')!r} " \
        f"is not a valid {kind}"


def load_yaml(text: str) -> Any:
    """The YAML document of ``text`` (``Loader``); YAML errors carry their mark."""
    loader = Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


@dataclass(frozen=True)
class StatementDef:
    """One statement of a file."""

    name: str
    epl: str
    output_topic: str | None = None


@dataclass
class StatementFile:
    """A loaded, validated statement file."""

    app: str
    schemas: dict[str, dict[str, str]]
    topics: dict[str, str]
    statements: list[StatementDef]
    partitions: int = 1
    path: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    functions: dict[str, Any] = field(default_factory=dict)
    """Declared user functions (``app.runtime.functions.FunctionDef`` by name)."""

    @property
    def base_dir(self) -> str:
        """The file's directory: relative function module paths start there."""
        return str(Path(self.path).resolve().parent) if self.path else "."

    def topic_of(self, type_name: str) -> str:
        return self.topics.get(type_name, type_name)

    def output_topic(self, stmt: StatementDef) -> str:
        return stmt.output_topic or f"kepl.{self.app}.out.{stmt.name}"


def _where(path: Any) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in path]
    return "".join(parts).lstrip(".") or "top level"


def schema_errors(doc: Any) -> list[jsonschema.ValidationError]:
    """Every JSON-Schema violation of a decoded statement file, ordered by where
    (jsonschema is imported only for a file that does not conform: app.schema_check)."""
    schema = json.loads(SCHEMA_PATH.read_text())
    if conforms(doc, schema):
        return []
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    return sorted(validator.iter_errors(doc),
                  key=lambda e: [(0, p, "") if isinstance(p, int) else (1, 0, str(p))
                                 for p in e.path])


def parse_statement_file(doc: Any, path: str = "<memory>") -> StatementFile:
    """Validate a decoded statement file and build a StatementFile."""
    errors = schema_errors(doc)
    if errors:
        e = errors[0]
        more = (f" (and {len(errors) - 1} more error(s): kepl check lists them)"
                if len(errors) > 1 else "")
        raise InvalidFile(f"{path}: at {_where(e.absolute_path)}: {e.message}{more}", path)
    from app.runtime.kafka import formats

    try:
        doc = formats.prepare(doc)
    except formats.FormatError as e:
        raise InvalidFile(f"{path}: {e}", path) from None
    stmts = []
    seen: set[str] = set()
    for i, s in enumerate(doc["statements"]):
        name = s.get("name") or f"s{i}"
        if name in seen:
            raise InvalidFile(f"{path}: at statements[{i}].name: duplicate statement name "
                              f"'{name}'", path)
        seen.add(name)
        stmts.append(StatementDef(name, s["epl"], s.get("output_topic")))
    from app.runtime.functions import FunctionError, parse_functions

    base = str(Path(path).resolve().parent) if path != "<memory>" else None
    try:
        functions = parse_functions(doc.get("functions"), base)
    except FunctionError as e:
        raise ConfigError(f"{path}: at functions{'.' + e.name if e.name else ''}: {e}"
                          ) from None
    return StatementFile(doc["app"], doc.get("schemas") or {}, doc.get("topics") or {}, stmts,
                         int(doc.get("partitions", 1)), path, doc, functions)


def load_statement_file(path: str | Path) -> StatementFile:
    """Read a ``.yaml`` statement file or an ``.epl`` module."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"{p}: cannot read: {e.strerror}") from None
    text = _decode(p, data)
    if p.suffix == ".epl":
        name = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in p.stem)
        return StatementFile(name, {}, {}, [StatementDef(f"s{i}", epl) for i, epl in
                                            enumerate(split_module(text))], 1, str(p))
    try:
        doc = load_yaml(text)
    except RecursionError:
        raise ConfigError(f"{p}: YAML nested too deeply to read (a statement file is a "
                          "mapping of a few levels: app, schemas, statements)") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: not valid YAML at {_yaml_problem(text, e)}") from None
    return parse_statement_file(doc, str(p))


def _yaml_problem(text: str, e: yaml.YAMLError) -> str:
    """'line L, column C: what' for a YAML error, on one line."""
    if isinstance(e, yaml.reader.ReaderError):
        before = text[: e.position]
        line, column = before.count("\n") + 1, e.position - (before.rfind("\n") + 1) + 1
        return f"line {line}, column {column}: character {chr(e.character)!r} is not allowed"
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "line 1, column 1"
    what = getattr(e, "problem", None) or getattr(e, "context", None) or "cannot parse"
    return f"{where}: {' '.join(str(what).split())}"


def _decode(p: Path, data: bytes) -> str:
    """The file's text (UTF-8); a byte that is not names its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start]
        line = before.count(b"\n") + 1
        column = e.start - (before.rfind(b"\n") + 1) + 1
        raise ConfigError(f"{p}: line {line}, column {column}: not UTF-8 text (byte "
                          f"0x{data[e.start]:02x}); statement files and EPL modules are "
                          "UTF-8") from None


def split_module(text: str) -> list[str]:
    """The statements of an EPL module as written (``;``-separated, comments allowed)."""
    from app.epl.parser import parse_module, source_text

    out = []
    lines = text.split("\n")
    for s in parse_module(text):
        # blank out what precedes the statement so error positions are the file's own
        start = sum(len(ln) + 1 for ln in lines[: s.pos.line - 1]) + s.pos.column - 1
        pad = "".join(ch if ch == "\n" else " " for ch in text[:start])
        out.append(pad + source_text(text, s.pos))
    return out
