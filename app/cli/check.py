"""``kepl check``: every error of a statement file, positioned in the file itself.

A YAML statement file is read once into its node tree (PyYAML marks say where each
key and value starts), then checked as a whole: every JSON-Schema violation, every
statement, unknown event types in ``topics:``.  An EPL error at (line, column) of a
statement's ``epl:`` text is mapped to the YAML file by matching the statement's
non-blank characters with the scalar's characters in the file, which is exact for plain,
single-quoted, double-quoted (common escapes), literal ``|`` and folded ``>`` scalars;
when the match fails the position is the scalar's first line plus the line offset, and
the output says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app.epl.errors import EplError, closest
from app.epl.planner import plan_statement

_BLANK = " \t\r\n"
_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v",
            "f": "\f", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\",
            "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029"}
_HEX = {"x": 2, "u": 4, "U": 8}
_STYLE = {"'": "single-quoted", '"': "double-quoted", "|": "literal", ">": "folded"}


@dataclass
class Problem:
    """One error: what it is about, and the positioned error (file line and column)."""

    about: str
    error: EplError
    note: str | None = None

    def render(self, path: str) -> str:
        out = f"{path}: {self.about}:\n{self.error.render()}" if self.about else \
            f"{path}:\n{self.error.render()}"
        return out + (f"\n  note: {self.note}" if self.note else "")


def check_yaml(path: str, text: str, unsupported: list[str] | None = None) -> list[Problem]:
    """Every problem of a YAML statement file's text, in file order; statements that are
    valid but not supported yet are named in ``unsupported``."""
    from app.statements import ConfigError, Loader, _yaml_problem, schema_errors

    loader = None
    try:
        loader = Loader(text)
        root = loader.get_single_node()
        doc = loader.construct_document(root) if root is not None else None
    except RecursionError:
        raise ConfigError(f"{path}: YAML nested too deeply to read (a statement file is a "
                          "mapping of a few levels: app, schemas, statements)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        if mark is None or isinstance(e, yaml.reader.ReaderError):
            raise ConfigError(f"{path}: not valid YAML at {_yaml_problem(text, e)}") from None
        what = " ".join(str(getattr(e, "problem", None) or "cannot parse").split())
        ctx, cmark = getattr(e, "context", None), getattr(e, "context_mark", None)
        if ctx and cmark is not None and cmark is not mark:
            what += f" ({' '.join(str(ctx).split())} at line {cmark.line + 1}:" \
                    f"{cmark.column + 1})"
        # at the end of the text: point after its last character rather than at nothing
        line, column = _at(text, min(mark.index, len(text.rstrip())))
        return [Problem("not valid YAML", EplError(what, line, column, text))]
    finally:
        if loader is not None:
            loader.dispose()
    if doc is None:
        return [Problem("at top level", EplError(
            "the file holds no YAML document", hint=
            "a statement file is a mapping with 'app' and 'statements'"))]
    problems = [_schema_problem(text, root, e) for e in schema_errors(doc)]
    problems = [p for group in problems for p in group]
    if isinstance(doc, dict) and not problems:
        doc = _with_registry_schemas(text, root, doc, problems)
    if isinstance(doc, dict):
        problems += _topic_problems(text, root, doc)
        problems += _statement_problems(text, root, doc,
                                        unsupported if unsupported is not None else [], path)
    problems.sort(key=lambda p: (p.error.line or 0, p.error.column or 0))
    return problems


def _with_registry_schemas(text: str, root: Any, doc: dict, problems: list[Problem]
                           ) -> dict:
    """The file with its registry subjects' properties filled in (``formats.prepare``);
    a subject or format that cannot be used is a problem at its place."""
    from app.runtime.kafka import formats

    try:
        return formats.prepare(doc)
    except formats.FormatError as e:
        where = str(e).split(":", 1)[0]
        path = [int(p) if p.isdigit() else p for p in where.split(".")]
        _, node = _node_at(root, path)
        about = f"at {where}" if node is not None else "at top level"
        problems.append(Problem(about, _error(text, node, str(e).split(": ", 1)[-1])))
        return {**doc, "schemas": {}, "statements": []}


def _at(text: str, index: int) -> tuple[int, int]:
    """1-based (line, column) of a character index of text."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _node_at(root: Any, path: list[Any]) -> tuple[Any, Any]:
    """(key node, value node) at a JSON path of the document (None where it stops)."""
    key, node = None, root
    for step in path:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(step):
                    key, node = k, v
                    break
            else:
                return key, node
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) \
                and step < len(node.value):
            key, node = None, node.value[step]
        else:
            return key, node
    return key, node


def _error(text: str, node: Any, message: str, hint: str | None = None) -> EplError:
    """An error at where node starts (line 1, column 1 without a node)."""
    line, column = (node.start_mark.line + 1, node.start_mark.column + 1) if node is not None \
        else (1, 1)
    return EplError(message, line, column, text, hint)


def _where(path: Any) -> str:
    from app.statements import _where as where

    return f"at {where(path)}"


def _schema_problem(text: str, root: Any, e: Any) -> list[Problem]:
    """A JSON-Schema violation; one problem per unknown key, with a did-you-mean hint."""
    path = list(e.absolute_path)
    key, node = _node_at(root, path)
    if e.validator == "additionalProperties" and isinstance(e.instance, dict):
        known = list(e.schema.get("properties", {}))
        out = []
        for name in e.instance:
            if name in known:
                continue
            k, _ = _node_at(root, [*path, name])
            guess = closest(str(name), known)
            out.append(Problem(_where(path), _error(
                text, k, f"unknown key '{name}'",
                f"did you mean '{guess}'?" if guess else
                f"the keys here are {', '.join(known)}")))
        return out
    hint = None
    if e.validator == "enum" and isinstance(e.instance, str):
        guess = closest(e.instance, [str(v) for v in e.validator_value])
        hint = f"did you mean '{guess}'?" if guess else None
    return [Problem(_where(path), _error(text, node if node is not None else key,
                                         e.message, hint))]


def _topic_problems(text: str, root: Any, doc: dict) -> list[Problem]:
    """``topics:`` keys that name no event type of ``schemas:``."""
    topics, schemas = doc.get("topics"), doc.get("schemas")
    if not isinstance(topics, dict):
        return []
    types = list(schemas) if isinstance(schemas, dict) else []
    out = []
    for name in topics:
        if name in types:
            continue
        k, _ = _node_at(root, ["topics", name])
        guess = closest(str(name), types)
        out.append(Problem(f"at topics.{name}", _error(
            text, k, f"unknown event type '{name}'",
            f"did you mean '{guess}'?" if guess else
            "topics maps event types of 'schemas' to the topics they are read from")))
    return out


def _statement_problems(text: str, root: Any, doc: dict, unsupported: list[str],
                        path: str = "") -> list[Problem]:
    """Every statement planned; EPL errors positioned in the file, duplicate names."""
    from app.runtime.catalog import Catalog, NotSupported

    stmts = doc.get("statements")
    schemas = doc.get("schemas")
    if not isinstance(stmts, list):
        return []
    out: list[Problem] = []
    functions = _function_problems(text, root, doc, path, out)
    try:
        catalog = Catalog.from_schemas(schemas if isinstance(schemas, dict) else {},
                                       functions=functions)
    except Exception:  # noqa: BLE001 - the schema errors already say what is wrong
        return out
    seen: set[str] = set()
    for i, s in enumerate(stmts):
        if not isinstance(s, dict) or not isinstance(s.get("epl"), str):
            continue
        name = s.get("name") or f"s{i}"
        if not isinstance(name, str):
            continue
        if name in seen:
            _, node = _node_at(root, ["statements", i, "name"])
            out.append(Problem(f"at statements[{i}].name", _error(
                text, node, f"duplicate statement name '{name}'",
                "each statement of a file needs its own name")))
        seen.add(name)
        try:
            plan_statement(catalog, s["epl"], name)
        except EplError as e:
            _, node = _node_at(root, ["statements", i, "epl"])
            out.append(_positioned(text, node, s["epl"], e, f"statement '{name}'"))
        except NotSupported as e:
            unsupported.append(f"statement '{name}': valid, but not supported yet: {e}")
    return out


def _function_problems(text: str, root: Any, doc: dict, path: str, out: list[Problem]
                       ) -> dict[str, Any]:
    """The declared functions; each one that cannot be used (a built-in's name, a module
    that does not import, no such callable) is a problem at its key (and, once its
    declaration is well formed, at each call)."""
    from app.runtime.functions import FunctionError, parse_functions
    from app.statements import schema_errors

    raw = doc.get("functions")
    if not isinstance(raw, dict):
        return {}
    base = str(Path(path).resolve().parent) if path else None
    bad = {str(e.absolute_path[1]) for e in schema_errors(doc)
           if len(e.absolute_path) > 1 and e.absolute_path[0] == "functions"}
    good: dict[str, Any] = {}
    for name, spec in raw.items():
        if str(name) in bad:  # the schema problems already say what is wrong
            continue
        fd = None
        try:
            fd = parse_functions({name: spec}, base)[str(name)]
            fd.load()
        except FunctionError as e:
            if fd is not None:  # declared, but its module fails: calls of it say so too
                good[fd.name] = fd
            k, node = _node_at(root, ["functions", name])
            if e.key is not None:
                k2, v2 = _node_at(root, ["functions", name, e.key])
                node = v2 if v2 is not None and k2 is not None else k
            else:
                node = k
            out.append(Problem(f"at functions.{name}", _error(text, node, str(e), e.hint)))
            continue
        good[fd.name] = fd
    return good


def _positioned(text: str, node: Any, value: str, e: EplError, about: str) -> Problem:
    """The EPL error of a statement moved to the statement file's line and column."""
    if not isinstance(node, yaml.ScalarNode):
        return Problem(about, _error(text, node, e.message, e.hint))
    line, column = e.line or 1, e.column or 1
    exact = map_position(text, node, value, line, column)
    note = None
    if exact is None:
        start = _content_start(text, node)
        first, col0 = _at(text, start)
        target = first + line - 1
        lines = text.split("\n")
        indent = 1
        if target <= len(lines):
            body = lines[target - 1]
            indent = len(body) - len(body.lstrip(" ")) + 1
        exact = (target, (col0 if line == 1 else indent) + column - 1)
        note = (f"in this {_STYLE.get(node.style or '', 'plain')} scalar the position is "
                f"approximate: statement line {line}, column {column}")
    return Problem(about, EplError(e.message, exact[0], exact[1], text, e.hint), note)


def _content_start(text: str, node: Any) -> int:
    """Index of the scalar's first character of content in the file."""
    start = node.start_mark.index
    if node.style in ("'", '"'):
        return start + 1
    if node.style in ("|", ">"):
        nl = text.find("\n", start)
        return len(text) if nl < 0 else nl + 1
    return start


def _file_chars(text: str, node: Any) -> list[tuple[str, int]] | None:
    """The scalar's characters as its value holds them, each with its file index (blanks
    and line breaks kept as they stand; None for an escape not understood)."""
    start, end = _content_start(text, node), node.end_mark.index
    if node.style in ("'", '"'):
        end -= 1
    out: list[tuple[str, int]] = []
    i = start
    while i < end:
        ch = text[i]
        if node.style == "'" and ch == "'" and text[i + 1: i + 2] == "'":
            out.append(("'", i))
            i += 2
            continue
        if node.style == '"' and ch == "\\":
            nxt = text[i + 1: i + 2]
            if nxt in _ESCAPES:
                out.append((_ESCAPES[nxt], i))
                i += 2
            elif nxt in _HEX:
                digits = text[i + 2: i + 2 + _HEX[nxt]]
                try:
                    out.append((chr(int(digits, 16)), i))
                except ValueError:
                    return None
                i += 2 + _HEX[nxt]
            elif nxt in ("\n", "\r"):  # an escaped line break joins the lines
                i += 1
            else:
                return None
            continue
        out.append((ch, i))
        i += 1
    return out


def map_position(text: str, node: Any, value: str, line: int, column: int
                 ) -> tuple[int, int] | None:
    """File (line, column) of (line, column) of a scalar's value, 1-based; None when the
    value's characters cannot be matched with the file's."""
    chars = _file_chars(text, node)
    if chars is None:
        return None
    lines = value.split("\n")
    line = min(max(line, 1), len(lines))
    target = sum(len(s) + 1 for s in lines[: line - 1]) + max(column, 1) - 1
    where: dict[int, int] = {}
    j = 0
    for k, ch in enumerate(value):
        if ch in _BLANK:
            continue
        while j < len(chars) and chars[j][0] in _BLANK:
            j += 1
        if j >= len(chars) or chars[j][0] != ch:
            return None
        where[k] = chars[j][1]
        j += 1
    if not where:
        return _at(text, _content_start(text, node))
    if target in where:
        return _at(text, where[target])
    before = [k for k in where if k < target]
    if before:
        k = max(before)
        index = where[k] + (target - k)
        nl = text.find("\n", where[k])
        if nl >= 0:
            index = min(index, nl)
        return _at(text, index)
    k = min(where)
    index = where[k] - (k - target)
    return _at(text, max(index, text.rfind("\n", 0, where[k]) + 1))


def first_error(path: str | Path) -> str | None:
    """The first error of a YAML statement file as one line, ``FILE:LINE:COLUMN: what``
    (None when it has none): what ``kepl run``, ``deploy`` and ``worker`` print for a
    file they cannot use, pointing to ``kepl check`` for the rest."""
    from app.statements import ConfigError, _decode

    p = Path(path)
    try:
        problems = check_yaml(str(p), _decode(p, p.read_bytes()))
    except (ConfigError, OSError):
        return None
    if not problems:
        return None
    pr, e = problems[0], problems[0].error
    where = f"{p}:{e.line}:{e.column}" if e.line else str(p)
    about = f" {pr.about}:" if pr.about else ""
    hint = f" ({e.hint})" if e.hint else ""
    more = (f"; {len(problems) - 1} more: kepl check {p} lists them"
            if len(problems) > 1 else "")
    return f"{where}:{about} {e.message}{hint}{more}"


def check_paths(paths: list[str]) -> tuple[list[str], int]:
    """Output lines of ``kepl check`` for the files, and how many errors they hold."""
    from app.runtime.catalog import Catalog, NotSupported
    from app.statements import ConfigError, _decode, load_statement_file

    out: list[str] = []
    failures = 0
    for f in paths:
        p = Path(f)
        try:
            if p.suffix == ".epl":
                sf = load_statement_file(f)
                problems: list[Problem] = []
                catalog = Catalog.from_schemas(sf.schemas, functions=sf.functions)
                for s in sf.statements:
                    try:
                        plan_statement(catalog, s.epl, s.name)
                    except EplError as e:
                        problems.append(Problem(f"statement '{s.name}'", e))
                    except NotSupported as e:
                        out.append(f"{f}: statement '{s.name}': valid, but not supported "
                                   f"yet: {e}")
            else:
                try:
                    data = p.read_bytes()
                except OSError as e:
                    raise ConfigError(f"{p}: cannot read: {e.strerror}") from None
                text = _decode(p, data)
                unsupported: list[str] = []
                problems = check_yaml(f, text, unsupported)
                out += [f"{f}: {u}" for u in unsupported]
        except (ConfigError, EplError) as e:
            out.append(f"{f}:\n{e.render()}" if isinstance(e, EplError) else str(e))
            failures += 1
            continue
        failures += len(problems)
        out += [pr.render(f) for pr in problems]
    return out, failures

