"""Declarations of user functions: checked shape, imports from the import path or next
to the declaring file, the dict form a worker's config file carries."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.runtime.functions import FunctionDef, FunctionError, parse_functions


def write_module(d: Path, name: str, text: str) -> None:
    (d / f"{name}.py").write_text(text)


def test_a_declaration_is_parsed_with_defaults(tmp_path: Path) -> None:
    fns = parse_functions({"f": {"import": "m:f"}}, tmp_path)
    assert fns == {"f": FunctionDef("f", "m:f", (), "any", "single-row",
                                    (str(tmp_path.resolve()),))}
    assert fns["f"].signature() == "f() -> any = m:f"


def test_the_module_is_imported_from_the_declaring_files_directory(tmp_path: Path) -> None:
    write_module(tmp_path, "udf_near_module", "def f(x):\n    return x + 1\n")
    fd = parse_functions({"f": {"import": "udf_near_module:f", "params": ["int"],
                                "returns": "int"}}, tmp_path)["f"]
    assert fd.load()(1) == 2


def test_a_relative_path_starts_at_the_declaring_file(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    write_module(tmp_path / "lib", "udf_lib_module", "class A:\n    pass\n")
    fd = parse_functions({"a": {"import": "udf_lib_module:A", "params": ["int"],
                                "kind": "aggregation", "path": "lib"}}, tmp_path)["a"]
    assert fd.search == (str((tmp_path / "lib").resolve()),)
    assert fd.load().__name__ == "A"
    assert parse_functions({"a": fd.to_dict()}) == {"a": fd}  # the worker's config file


def test_an_importable_module_needs_no_path() -> None:
    fd = parse_functions({"h": {"import": "tests.scenarios.udf_bank:compute_hash",
                                "params": ["event"], "returns": "int"}})["h"]
    assert fd.load()({"custId": "C1"}) == 2126


@pytest.mark.parametrize(("raw", "message", "key"), [
    ([1], "'functions' must map function names to declarations {import, params, returns}",
     None),
    ({"abs": {"import": "m:f"}}, "'abs' is a built-in function", None),
    ({"sum": {"import": "m:f"}}, "'sum' is a built-in function", None),
    ({"f": {"import": "m.f"}}, "function 'f': 'import' must be 'module:callable', got 'm.f'",
     "import"),
    ({"f": {"import": "m:f", "params": ["integer"]}},
     "function 'f': unknown parameter type 'integer'", "params"),
    ({"f": {"import": "m:f", "returns": "event"}}, "function 'f': unknown result type 'event'",
     "returns"),
    ({"f": {"import": "m:f", "kind": "window"}},
     "function 'f': 'kind' must be single-row or aggregation, got 'window'", "kind"),
    ({"f": {"import": "m:f", "kind": "aggregation"}},
     "aggregation function 'f' needs at least one parameter", "params"),
    ({"f": {"import": "m:f", "colour": 1}}, "unknown key 'colour'", "colour"),
])
def test_bad_declarations(raw: object, message: str, key: str | None) -> None:
    with pytest.raises(FunctionError) as info:
        parse_functions(raw)
    assert (str(info.value), info.value.key) == (message, key)


def test_import_failures_say_why(tmp_path: Path) -> None:
    write_module(tmp_path, "udf_broken_module", "raise ImportError('needs numpy')\n")
    write_module(tmp_path, "udf_plain_module", "VALUE = 3\n")
    fns = parse_functions({
        "a": {"import": "udf_no_such_module:f"},
        "b": {"import": "udf_broken_module:f"},
        "c": {"import": "udf_plain_module:g"},
        "d": {"import": "udf_plain_module:VALUE"}}, tmp_path)
    messages = []
    for fd in fns.values():
        with pytest.raises(FunctionError) as info:
            fd.load()
        messages.append(str(info.value))
    assert messages == [
        f"function 'a': no module named 'udf_no_such_module' (nor in {tmp_path.resolve()})",
        f"function 'b': importing '{tmp_path.resolve() / 'udf_broken_module.py'}' failed: "
        "ImportError: needs numpy",
        "function 'c': module 'udf_plain_module' has no 'g'",
        "function 'd': 'udf_plain_module:VALUE' is not callable",
    ]
