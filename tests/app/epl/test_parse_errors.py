"""Syntax errors: message, position, source line, caret, hint; never another exception."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.epl import ast as A
from app.epl.errors import EplError, EplSyntaxError, EplValidationError, closest
from app.epl.parser import (
    keywords,
    parse_expression,
    parse_module,
    parse_pattern,
    parse_statement,
)

DATA = Path(__file__).with_name("data") / "reference_statements.yaml"
REFERENCE: dict[str, list[dict[str, Any]]] = yaml.safe_load(DATA.read_text(encoding="utf-8"))
SAMPLES = [e["epl"] for e in REFERENCE["statements"] + REFERENCE["conformance"]]

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def error_of(text: str, parse: Any = parse_statement) -> EplSyntaxError:
    """The EplSyntaxError raised for text."""
    with pytest.raises(EplSyntaxError) as info:
        parse(text)
    return info.value


# ------------------------------------------------------------------------- rendering


def test_render_has_location_source_caret_and_hint() -> None:
    """str(err) is 'line L:C: message', the source line, a caret line and the hint."""
    err = error_of("select * form T")
    assert (err.line, err.column) == (1, 10)
    assert err.message == "unexpected 'form'"
    assert err.hint == "did you mean 'from'?"
    assert err.source_line == "select * form T"
    assert err.caret_line == "         ^"
    assert str(err) == (
        "line 1:10: unexpected 'form'\n"
        "  select * form T\n"
        "           ^\n"
        "  hint: did you mean 'from'?")
    assert str(err) == err.render()


def test_error_on_a_later_line_keeps_tabs_in_the_caret_line() -> None:
    """Line/column count from 1; tabs are kept so the caret lines up."""
    err = error_of("select *\nfrom T\n\twhere a >\n\t\tand b")
    assert (err.line, err.column) == (4, 7)
    assert err.source_line == "\t\tand b"
    assert err.caret_line == "\t\t    ^"


def test_error_classes_and_helpers() -> None:
    """EplSyntaxError / EplValidationError are EplErrors; closest() suggests by similarity."""
    assert issubclass(EplSyntaxError, EplError)
    assert issubclass(EplValidationError, EplError)
    err = EplValidationError("unknown event type 'Withdrawl'", 1, 15, "select * from Withdrawl",
                             "did you mean 'Withdrawal'?")
    assert err.render() == (
        "line 1:15: unknown event type 'Withdrawl'\n"
        "  select * from Withdrawl\n"
        "                ^\n"
        "  hint: did you mean 'Withdrawal'?")
    assert EplError("no position").render() == "no position"
    assert closest("Withdrawl", ["Deposit", "Withdrawal"]) == "Withdrawal"
    assert closest("SELCT", ["select", "insert"]) == "select"
    assert closest("xyz", ["select"]) is None
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.message, copy.line, copy.column, copy.hint) == (
        err.message, err.line, err.column, err.hint)


# -------------------------------------------------------------------- typical mistakes


@pytest.mark.parametrize(
    ("text", "line", "column", "hint"),
    [
        ("selct * from T", 1, 1, "did you mean 'select'?"),
        ("select * fromT", 1, 10, "did you mean 'from'?"),
        ("create contxt C start @now", 1, 8, "did you mean 'context'?"),
        ("context X selet * from T", 1, 11, "did you mean 'select'?"),
        ("select count(*) as cnt fro Withdrawal", 1, 24, "did you mean 'from'?"),
        ("select * from T where a = 1 groupby a", 1, 29, "did you mean 'group'?"),
        ("select * from T output evry 5 events", 1, 24, "did you mean 'every'?"),
        ("create context X partition custId frm T", 1, 35, "did you mean 'from'?"),
        ("insert into X selec * from T", 1, 15, "did you mean 'select'?"),
        ("from v in values within 1.5 evry 1.0 select v", 1, 29, "did you mean 'every'?"),
        ("create context C initiated by A terminatd after 1 sec", 1, 33,
         "did you mean 'terminated'?"),
    ],
)
def test_misspelt_keywords_get_did_you_mean(text: str, line: int, column: int, hint: str) -> None:
    """The unexpected word is close to an expected keyword."""
    err = error_of(text)
    assert (err.line, err.column, err.hint) == (line, column, hint)


def test_unexpected_end_of_input_points_after_the_last_token() -> None:
    """Truncated statements report the end position and what may follow."""
    err = error_of("select * from   \n")
    assert (err.line, err.column, err.message) == (1, 14, "unexpected end of input")
    assert err.hint == "expected one of 'pattern', a name"
    err = error_of("select * from T#length(5")
    assert (err.column, err.hint) == (25, "expected one of 'asc', 'desc', ')', ','")


def test_lexical_errors() -> None:
    """Unterminated strings and names, stray characters."""
    assert error_of("select 'abc from T").message == "unterminated string"
    assert error_of("select `abc from T").message == "unterminated back-quoted name"
    err = error_of("select $ from T")
    assert (err.message, err.line, err.column) == ("unexpected character '$'", 1, 8)
    assert err.hint is not None and err.hint.startswith("expected one of")
    typographic = error_of("symbol=“google”", parse_expression)
    assert typographic.message == "unexpected character '“'"


@pytest.mark.parametrize(
    ("text", "message", "column", "hint"),
    [
        ("create context C start (0, 9, *) end after 1 sec",
         "a crontab needs 5 to 7 fields, found 3", 24,
         "write (minutes, hours, days of month, months, days of week[, seconds[, timezone]]), "
         "e.g. (0, 9, *, *, *)"),
        ("select * from pattern [timer:intervl(5)]", "unknown pattern observer 'timer:intervl'",
         24, "did you mean 'timer:interval'?"),
        ("select * from pattern [A where timer:withn(5)]", "unknown pattern guard 'timer:withn'",
         32, "did you mean 'timer:within'?"),
        ("select * from pattern [A where timer:within(5, 6)]",
         "timer:within takes exactly one time period", 32,
         "e.g. where timer:within(10 seconds)"),
        ("select * from pattern [timer:interval(*)]",
         "timer:interval takes exactly one time period", 24, "e.g. timer:interval(5 seconds)"),
        ("create context C start @nowx", "unknown '@nowx' here", 24,
         "write '@now' to start the context partition immediately"),
        ("create context C start pattern [A] @inclusiv", "unknown '@inclusiv' after a pattern",
         36, "did you mean '@inclusive'?"),
        ("create context C initiated @later and A", "unknown '@later' here", 28,
         "write '@now' to start the context partition immediately"),
        ("select f(a, distinct b) from T", "'distinct' may only precede the first argument",
         13, None),
        ("select 1.5L from T", "'1.5L' is not a valid long literal", 8, None),
        ("select 1e999 from T", "number '1e999' is out of range", 8,
         "the largest double is about 1.8e308"),
        ("select 1e-400 from T", "number '1e-400' is too small to be a double", 8,
         "the smallest positive double is about 4.9e-324"),
        ("select 0e-400, 9223372036854775808 from T", "number '9223372036854775808' is out of "
         "range", 16, "the largest integer is 9223372036854775807"),
        ("select 99999999999999999999L from T", "number '99999999999999999999L' is out of "
         "range", 8, "the largest integer is 9223372036854775807"),
        ("select " + "9" * 400 + " from T", "number '999999999999...9999' (400 digits) is out "
         "of range", 8, "the largest integer is 9223372036854775807"),
        ("select * from T#time(1e308 sec)", "time period is out of range", 22,
         "the longest time period is about 292 million years"),
        ("select * from T#time(" + "9" * 17 + " years)", "time period is out of range", 22,
         "the longest time period is about 292 million years"),
        ("select " + "f(" * 101 + "1" + ")" * 101 + " from T",
         "expression nested too deeply (more than 100 levels)", 206,
         "split it with variables or simpler sub-expressions"),
    ],
)
def test_errors_found_while_building_the_tree(text: str, message: str, column: int,
                                              hint: str | None) -> None:
    """Checks beyond the grammar still give positioned EplSyntaxErrors."""
    err = error_of(text)
    assert (err.message, err.line, err.column, err.hint) == (message, 1, column, hint)


def test_empty_and_non_string_input() -> None:
    """Blank text, comments only, or a non-string."""
    assert error_of("").message == "empty statement"
    assert error_of("  // only a comment\n;").message == "empty statement"
    assert error_of(None).message == "statement text must be a string"  # type: ignore[arg-type]
    assert error_of(b"select", parse_module).message == "module text must be a string"
    assert error_of("", parse_expression).message == "unexpected end of input"
    assert error_of("", parse_pattern).message == "unexpected end of input"


def test_module_errors_point_into_the_right_statement() -> None:
    """The position is in the whole module text."""
    err = error_of("select * from A;\ncreate schema B(x int);\nselect * frm B", parse_module)
    assert (err.line, err.column, err.hint) == (3, 10, "did you mean 'from'?")


def test_statement_expected_but_two_given() -> None:
    """parse_statement takes one statement; parse_module several."""
    err = error_of("select * from A; select * from B")
    assert (err.line, err.column) == (1, 18)
    assert len(parse_module("select * from A; select * from B")) == 2


def test_deep_nesting_is_not_a_recursion_error() -> None:
    """Deeply nested input parses (iterative parser and tree builder) or fails cleanly."""
    depth = 5000
    got = parse_expression("(" * depth + "1" + ")" * depth)
    assert got == A.Literal(1, "int")
    unary = parse_expression("not " * 100 + "x")
    assert isinstance(unary, A.Unary)
    err = error_of("not " * 2000 + "x", parse_expression)
    assert (err.message, err.line, err.column) == (
        "expression nested too deeply (more than 100 levels)", 1, 405)
    chain = parse_expression(" + ".join(["x"] * 5000))
    assert isinstance(chain, A.Binary) and chain.right == A.Name(("x",))
    err = error_of("(" * depth, parse_expression)
    assert err.message == "unexpected end of input"


# ----------------------------------------------------------------------------- fuzzing


def check_outcome(parse: Any, text: str) -> None:
    """parse(text) returns a result or raises EplSyntaxError with a usable position."""
    try:
        parse(text)
    except EplSyntaxError as err:
        assert isinstance(err.line, int) and err.line >= 1
        assert isinstance(err.column, int) and err.column >= 1
        assert isinstance(str(err), str)


ENTRY_POINTS = [parse_statement, parse_module, parse_expression, parse_pattern]
TOKENS = sorted(keywords()) + [
    "(", ")", "[", "]", ",", ".", ";", ":", "*", "/", "+", "-", "%", "=", "!=", "<>", "<", ">",
    "<=", ">=", "||", "->", "#", "@", "@now", "@inclusive", "every-distinct", "retain-union",
    "timer:within(", "timer:interval(", "timer:at(", "win:time(", "5", "5L", "1.5", "'s'",
    '"d"', "`q`", "x", "a.b", "T", "context.id", "count(*)", "// c\n", "/* c */",
]


@FUZZ
@given(st.text(max_size=60), st.sampled_from(ENTRY_POINTS))
def test_random_text_gives_ast_or_syntax_error(text: str, parse: Any) -> None:
    """Arbitrary unicode text."""
    check_outcome(parse, text)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=25), st.sampled_from(ENTRY_POINTS))
def test_random_token_soup_gives_ast_or_syntax_error(tokens: list[str], parse: Any) -> None:
    """Keywords and punctuation in random order reach deep into the grammar."""
    check_outcome(parse, " ".join(tokens))


@FUZZ
@given(st.sampled_from(SAMPLES), st.data())
def test_truncated_and_mutated_statements(text: str, data: st.DataObject) -> None:
    """Prefixes, cut-outs and single-character edits of real statements."""
    cut = data.draw(st.integers(0, len(text)))
    check_outcome(parse_statement, text[:cut])
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    check_outcome(parse_statement, text[:start] + text[end:])
    pos = data.draw(st.integers(0, len(text)))
    char = data.draw(st.sampled_from(list("()[],.;:*#@'\"`-> x1")))
    check_outcome(parse_statement, text[:pos] + char + text[pos:])
    check_outcome(parse_module, text[:pos] + ";" + text[pos:])
