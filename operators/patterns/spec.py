"""Pattern specs: the frozen description of an EPL ``pattern [...]`` the planner emits.

The planner translates the EPL AST (``app.epl.ast`` P* nodes) into these classes; this
package never imports the parser.  ``operators.patterns.pattern.PatternSpec`` wraps a
tree of these nodes and builds a ``PatternMatcher`` per context partition.

Calling convention of pattern expressions (they see the partial match, not one row):

* a filter predicate is called as ``predicate((event, tags), ctx)``: ``event`` is the
  candidate event, ``tags`` maps tag name -> event matched so far (``b=B(id = a.id)``
  reads ``tags['a']``);
* an every-distinct key, a repeat bound and a while-guard condition are called as
  ``expr((None, tags), ctx)``.

A match row is ``{tag: event}`` over the tagged filters of the match (untagged filters
contribute nothing; a pure timer pattern yields ``{}``); a tag inside a repeat is
``{tag: [event, ...]}`` outside it (an indexed tag: ``a[0]``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from operators.base import PartitionCtx, Row
from operators.patterns.crontab import CronSpec

PatternExpr = Callable[[tuple[Row | None, dict[str, Row]], PartitionCtx], Any]
"""A pattern expression: called with ``(event or None, tags)`` and the partition context."""


@dataclass(frozen=True)
class Filter:
    """``tag=Type(filter)``: one event of ``type_name`` passing ``predicate``."""

    tag: str | None
    type_name: str
    predicate: PatternExpr | None = None
    text: str = field(default="", compare=False)
    """The filter criteria as written (for describe only)."""
    ordered_by: PatternExpr | None = field(default=None, compare=False)
    """The value an instance's filter compares the event with, where Esper's filter index
    orders instances by it (``PatternMatcher.on_event``); None: start order."""


@dataclass(frozen=True)
class Every:
    """``every child``: restart the child each time it turns true (or false)."""

    child: PatternNode


@dataclass(frozen=True)
class EveryDistinct:
    """``every-distinct(keys[, period]) child``: like every, dropping repeated key values."""

    keys: tuple[PatternExpr, ...]
    period_ms: int | None
    child: PatternNode

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(self.keys))
        if not self.keys:
            raise ValueError("every-distinct needs at least one distinct-value expression")


@dataclass(frozen=True)
class FollowedBy:
    """``c0 -> c1 -> ...``: each match of a stage starts the next stage."""

    children: tuple[PatternNode, ...]

    def __post_init__(self) -> None:
        _children(self, "->")


@dataclass(frozen=True)
class And:
    """``c0 and c1 ...``: true when every child has turned true (in any order)."""

    children: tuple[PatternNode, ...]

    def __post_init__(self) -> None:
        _children(self, "and")


@dataclass(frozen=True)
class Or:
    """``c0 or c1 ...``: true when any child turns true."""

    children: tuple[PatternNode, ...]

    def __post_init__(self) -> None:
        _children(self, "or")


@dataclass(frozen=True)
class Not:
    """``not child``: true from the start, permanently false once the child turns true."""

    child: PatternNode


@dataclass(frozen=True)
class TimerInterval:
    """``timer:interval(period)``: true ``ms`` after the sub-expression started."""

    ms: int


@dataclass(frozen=True)
class TimerAt:
    """``timer:at(crontab)``: true at the next crontab instant after it started."""

    cron: CronSpec


@dataclass(frozen=True)
class Within:
    """``child where timer:within(period)``: the child must turn true within ``ms``;
    with ``max_count`` (``timer:withinmax``) at most that many results pass."""

    child: PatternNode
    ms: int
    max_count: int | None = None


@dataclass(frozen=True)
class WhileGuard:
    """``child while (cond)``: passes the child's results while ``cond`` holds.

    ``cond`` is called as ``cond((None, tags), ctx)`` with the tags of each result; false
    ends the sub-expression (permanently false), null drops the result only.
    """

    child: PatternNode
    cond: PatternExpr
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Repeat:
    """``[n] child``, ``[low:high] child``, ``child until stop``: a repeated sub-expression.

    ``low``/``high`` are bound expressions evaluated when an instance starts (None: no
    bound; ``exact``: ``[n]``, both bounds are ``low``).  ``array_tags`` are the tags
    inside ``child``: a result carries each as the list of its events over all repeats.
    """

    child: PatternNode
    until: PatternNode | None = None
    low: PatternExpr | None = None
    high: PatternExpr | None = None
    exact: bool = False
    array_tags: tuple[str, ...] = ()
    text: str = field(default="", compare=False)
    """The range as written, e.g. ``[2:]`` (for describe only)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "array_tags", tuple(self.array_tags))


PatternNode = (
    Filter | Every | EveryDistinct | FollowedBy | And | Or | Not | TimerInterval | TimerAt
    | Within | WhileGuard | Repeat)
"""Any pattern sub-expression."""


def _children(node: Any, op: str) -> None:
    """Freeze a composite's children into a tuple and check it has some."""
    kids = tuple(node.children)
    if not kids:
        raise ValueError(f"'{op}' needs at least one sub-expression")
    object.__setattr__(node, "children", kids)


def child_nodes(node: PatternNode) -> tuple[PatternNode, ...]:
    """The direct sub-expressions of a pattern node, in order."""
    if isinstance(node, FollowedBy | And | Or):
        return node.children
    if isinstance(node, Every | EveryDistinct | Not | Within | WhileGuard):
        return (node.child,)
    if isinstance(node, Repeat):
        return (node.child,) if node.until is None else (node.child, node.until)
    return ()


def render(node: PatternNode) -> str:
    """EPL-like text of a pattern node (for ``describe`` when no source text is kept)."""
    if isinstance(node, Filter):
        head = f"{node.tag}={node.type_name}" if node.tag else node.type_name
        if node.predicate is not None:
            head += f"({node.text or '...'})"
        return head
    if isinstance(node, Every):
        return f"every {_paren(node.child)}"
    if isinstance(node, EveryDistinct):
        period = f", {node.period_ms} ms" if node.period_ms is not None else ""
        return f"every-distinct({len(node.keys)} keys{period}) {_paren(node.child)}"
    if isinstance(node, FollowedBy | And | Or):
        op = {FollowedBy: " -> ", And: " and ", Or: " or "}[type(node)]
        return op.join(_paren(c) for c in node.children)
    if isinstance(node, Not):
        return f"not {_paren(node.child)}"
    if isinstance(node, TimerInterval):
        return f"timer:interval({node.ms} ms)"
    if isinstance(node, TimerAt):
        return f"timer:at({node.cron.text or '...'})"
    if isinstance(node, Within):
        if node.max_count is not None:
            return (f"{_paren(node.child)} where timer:withinmax({node.ms} ms, "
                    f"{node.max_count})")
        return f"{_paren(node.child)} where timer:within({node.ms} ms)"
    if isinstance(node, WhileGuard):
        return f"{_paren(node.child)} while ({node.text or '...'})"
    if isinstance(node, Repeat):
        head = f"{node.text or '[...]'} " if node.low is not None or node.high is not None else ""
        tail = f" until {_paren(node.until)}" if node.until is not None else ""
        return f"{head}{_paren(node.child)}{tail}"
    raise TypeError(f"not a pattern node: {node!r}")


def _paren(node: PatternNode) -> str:
    """Render a sub-expression, parenthesised when it is a binary operator."""
    text = render(node)
    return f"({text})" if isinstance(
        node, FollowedBy | And | Or | Within | WhileGuard | Repeat) else text


@dataclass(frozen=True)
class PatternPlan:
    """The spec tree flattened in pre-order: what the matcher addresses by index."""

    nodes: tuple[PatternNode, ...]
    children: tuple[tuple[int, ...], ...]
    signature: str
    """A fingerprint of the tree's shape, stored with the state to refuse foreign state."""


def flatten(root: PatternNode) -> PatternPlan:
    """Flatten a pattern tree into pre-order arrays (node index -> child indexes)."""
    nodes: list[PatternNode] = []
    children: list[tuple[int, ...]] = []
    sig: list[str] = []

    def visit(node: PatternNode) -> int:
        idx = len(nodes)
        nodes.append(node)
        children.append(())
        sig.append(type(node).__name__ + (
            f":{node.tag}:{node.type_name}" if isinstance(node, Filter) else
            f":{int(node.until is not None)}" if isinstance(node, Repeat) else ""))
        children[idx] = tuple(visit(c) for c in child_nodes(node))
        return idx

    visit(root)
    return PatternPlan(tuple(nodes), tuple(children), "|".join(sig))
