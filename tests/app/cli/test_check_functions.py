"""``kepl check`` and ``kepl explain`` with user functions: declarations and calls are
checked, each error at its place in the file; explain names the functions each
statement calls."""

from __future__ import annotations

from pathlib import Path

from app.cli.check import check_paths
from app.cli.explain import explain_file
from app.statements import load_statement_file

ROOT = Path(__file__).resolve().parents[3]

FILE = """\
app: udfcheck
schemas:
  T: {a: string, x: double}
functions:
  half: {import: "udf_check_module:half", params: [double], returns: double}
  gone: {import: "udf_check_module:nothere", params: [int], returns: int}
  abs: {import: "udf_check_module:half", params: [int], returns: int}
  typo: {import: "udf_check_module:half", params: [integer], returns: int}
statements:
  - name: ok
    epl: select half(x) as h from T
  - name: arg
    epl: |
      select half(a) as h
        from T
  - name: count
    epl: select half(x, x) from T
  - name: broken
    epl: select gone(1) from T
"""


def test_declarations_and_calls_are_checked_in_place(tmp_path: Path) -> None:
    (tmp_path / "udf_check_module.py").write_text("def half(x):\n    return x / 2\n")
    path = tmp_path / "app.yaml"
    path.write_text(FILE)
    out, failures = check_paths([str(path)])
    text = "\n".join(out).replace(str(path), "app.yaml")
    assert failures == 6
    assert text == """\
app.yaml: at functions.gone:
line 6:18: function 'gone': module 'udf_check_module' has no 'nothere'
    gone: {import: "udf_check_module:nothere", params: [int], returns: int}
                   ^
  hint: define 'nothere' in udf_check_module, or correct the name after ':'
app.yaml: at functions.abs:
line 7:3: 'abs' is a built-in function
    abs: {import: "udf_check_module:half", params: [int], returns: int}
    ^
  hint: give the user function another name
app.yaml: at functions.typo.params[0]:
line 8:52: 'integer' is not one of ['string', 'int', 'long', 'double', 'float', 'boolean', \
'any', 'event']
    typo: {import: "udf_check_module:half", params: [integer], returns: int}
                                                     ^
  hint: did you mean 'int'?
app.yaml: statement 'arg':
line 14:19: parameter 1 of 'half' is double; 'a' is a string
        select half(a) as h
                    ^
  hint: half takes (double) and returns double
app.yaml: statement 'count':
line 17:17: function 'half' takes 1 argument(s), 2 given
      epl: select half(x, x) from T
                  ^
  hint: half takes (double) and returns double
app.yaml: statement 'broken':
line 19:17: function 'gone': module 'udf_check_module' has no 'nothere'
      epl: select gone(1) from T
                  ^
  hint: define 'nothere' in udf_check_module, or correct the name after ':'"""


def test_explain_names_the_functions_a_statement_calls() -> None:
    lines, ok = explain_file(load_statement_file(ROOT / "examples" / "bank-functions.yaml"))
    assert ok
    calls = [line for line in lines if "calls:" in line or line.startswith("statement")
             or "topic via" in line]
    assert calls == [
        "statement risky (query)",
        "  calls: risk(double, string) -> string = bank_functions:risk",
        "statement by_account (context)",
        "  calls: accountHash(string) -> int = bank_functions:account_hash",
        "  topic via kepl.bank-functions.repartition.ByAccount (4 partitions, by accountHash "
        "mod 4)",
        "statement spread_per_account (query)",
        "  calls: spread(double) -> double aggregation = bank_functions:Spread",
        "  topic via kepl.bank-functions.repartition.ByAccount (4 partitions, by accountHash "
        "mod 4)",
    ]
