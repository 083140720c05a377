"""The metric names a PromQL expression reads (enough of PromQL for the chart's queries):
strings, label matchers, range selectors and grouping clauses are dropped; what is left
that names no function, keyword or number is a metric."""

from __future__ import annotations

import re

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "bool", "offset", "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for m in _IDENT.finditer(text):
        name = m.group()
        rest = text[m.end():].lstrip()
        if rest.startswith("(") or name.lower() in KEYWORDS:
            continue
        if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
            continue  # an exponent or a unit inside a number
        names.add(name)
    return names
