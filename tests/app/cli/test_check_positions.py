"""``kepl check`` lists every error of a statement file at its line and column in the
file, with the file's own line, a caret and did-you-mean hints."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.cli.check import _positioned, map_position
from app.cli.main import main
from app.epl.errors import EplError

BAD = """\
app: bank
shemas:
  Withdrawal: {account: string, amount: dooble}
schemas:
  Withdrawal: {account: string, amount: double}
topics:
  Withdrawl: withdrawals
statments: []
statements:
  - name: plain
    epl: select * from Withdrawl
  - name: plainmulti
    epl: select account,
      sum(amount) as total
      from Withdrawal group by acount
  - name: single
    epl: 'select ''x'' as a,
      nope from Withdrawal'
  - name: double
    epl: "select \\"x\\" as a,\\n  nope2 from Withdrawal"
  - name: literal
    epl: |
      select account
        from Withdrawal
        where amont > 1
  - name: folded
    epl: >
      select account
      from Withdrawal
      where amout > 1
  - nmae: x
    epl: select * from Withdrawal
    output_topik: t
"""

BAD_OUT = """\
bad.yaml: at top level:
line 2:1: unknown key 'shemas'
  shemas:
  ^
  hint: did you mean 'schemas'?
bad.yaml: at topics.Withdrawl:
line 7:3: unknown event type 'Withdrawl'
    Withdrawl: withdrawals
    ^
  hint: did you mean 'Withdrawal'?
bad.yaml: at top level:
line 8:1: unknown key 'statments'
  statments: []
  ^
  hint: did you mean 'statements'?
bad.yaml: statement 'plain':
line 11:24: unknown event type 'Withdrawl'
      epl: select * from Withdrawl
                         ^
  hint: did you mean 'Withdrawal'?
bad.yaml: statement 'plainmulti':
line 15:32: unknown property 'acount' of Withdrawal
        from Withdrawal group by acount
                                 ^
  hint: did you mean 'account'?
bad.yaml: statement 'single':
line 18:7: unknown property 'nope' of Withdrawal
        nope from Withdrawal'
        ^
bad.yaml: statement 'double':
line 20:33: unknown property 'nope2' of Withdrawal
      epl: "select \\"x\\" as a,\\n  nope2 from Withdrawal"
                                  ^
bad.yaml: statement 'literal':
line 25:15: unknown property 'amont' of Withdrawal
          where amont > 1
                ^
  hint: did you mean 'amount'?
bad.yaml: statement 'folded':
line 30:13: unknown property 'amout' of Withdrawal
        where amout > 1
              ^
  hint: did you mean 'amount'?
bad.yaml: at statements[6]:
line 31:5: unknown key 'nmae'
    - nmae: x
      ^
  hint: did you mean 'name'?
bad.yaml: at statements[6]:
line 33:5: unknown key 'output_topik'
      output_topik: t
      ^
  hint: did you mean 'output_topic'?
11 error(s)
"""


def check(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
          ) -> tuple[int, str]:
    (tmp_path / name).write_text(text)
    code = main(["check", str(tmp_path / name)])
    return code, capsys.readouterr().out.replace(str(tmp_path / name), name)


def test_every_error_of_a_file_at_its_place_in_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(tmp_path, capsys, "bad.yaml", BAD) == (2, BAD_OUT)


def test_missing_epl_duplicate_name_enum_and_pattern(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ("app: x\nschemas: {E: {a: strng}}\nstatements:\n  - elp: select 1\n"
            "  - {name: a, epl: select a from E}\n  - {name: a, epl: select a from E}\n"
            "  - {name: 'b c', epl: select a from E}\n")
    assert check(tmp_path, capsys, "m.yaml", text) == (2, """\
m.yaml: at schemas.E.a:
line 2:18: 'strng' is not one of ['string', 'int', 'long', 'double', 'float', 'boolean']
  schemas: {E: {a: strng}}
                   ^
  hint: did you mean 'string'?
m.yaml: at statements[0]:
line 4:5: 'epl' is a required property
    - elp: select 1
      ^
m.yaml: at statements[0]:
line 4:5: unknown key 'elp'
    - elp: select 1
      ^
  hint: did you mean 'epl'?
m.yaml: at statements[2].name:
line 6:12: duplicate statement name 'a'
    - {name: a, epl: select a from E}
             ^
  hint: each statement of a file needs its own name
m.yaml: at statements[3].name:
line 7:12: 'b c' does not match '^[A-Za-z0-9_.-]+$'
    - {name: 'b c', epl: select a from E}
             ^
5 error(s)
""")


def test_yaml_syntax_error_shows_the_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    text = "app: x\nstatements:\n  - epl: select 1\n    name: [a\n"
    assert check(tmp_path, capsys, "y.yaml", text) == (2, """\
y.yaml: not valid YAML:
line 4:13: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence at \
line 4:11)
      name: [a
              ^
1 error(s)
""")


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(tmp_path, capsys, "e.yaml", "# nothing\n") == (2, """\
e.yaml: at top level:
the file holds no YAML document
  hint: a statement file is a mapping with 'app' and 'statements'
1 error(s)
""")


def test_valid_file_and_epl_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[3] / "examples"
    assert main(["check", str(root / "bank.yaml"), str(root / "bank.epl")]) == 0
    assert capsys.readouterr().out == "2 file(s) valid\n"


def _scalar(text: str) -> yaml.ScalarNode:
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    return root.value[0][1]


@pytest.mark.parametrize(("text", "line", "column", "expected"), [
    ("epl: select x from E\n", 1, 8, (1, 13)),
    ("epl:   select\n  x\n\n  from E\n", 2, 1, (4, 3)),  # folded plain: '\n' kept
    ("epl: 'it''s x'\n", 1, 6, (1, 13)),
    ('epl: "a\\tb\\u00e9 c"\n', 1, 6, (1, 18)),  # escapes: 'c' after them
    ("epl: |\n  select\n    x\n", 2, 3, (3, 5)),
    ("epl: >-\n  select\n  x\n", 1, 8, (3, 3)),
    ("epl: select x\n", 1, 20, (1, 14)),  # past the end: the end of the line
])
def test_map_position(text: str, line: int, column: int, expected: tuple[int, int]) -> None:
    node = _scalar(text)
    value = yaml.safe_load(text)["epl"]
    assert map_position(text, node, value, line, column) == expected


def test_unmatched_scalar_is_mapped_by_line_and_says_so() -> None:
    text = "epl: >\n  select\n  x from E\n"
    problem = _positioned(text, _scalar(text), "select\ny from E",
                          EplError("boom", 2, 3, "select\ny from E"), "statement 's'")
    assert problem.render("f.yaml") == (
        "f.yaml: statement 's':\nline 3:5: boom\n    x from E\n      ^\n"
        "  note: in this folded scalar the position is approximate: statement line 2, "
        "column 3")
