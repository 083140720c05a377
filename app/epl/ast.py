"""EPL abstract syntax tree: frozen dataclasses produced by app.epl.parser.

Every node carries ``pos`` (source span) declared with ``compare=False`` so that
two trees parsed from differently formatted text compare equal; the printer
(app.epl.printer) relies on that for ``parse(to_epl(ast)) == ast``.

Conventions (documented once here, relied on by parser, printer and tests):
- identifiers keep the spelling written in the statement (case included);
  keywords are case-insensitive and never stored;
- a filter list ``T(a, b)`` is stored as one expression ``a and b``;
- ``-`` applied to a numeric literal is folded into a negative ``Literal``;
- time-period units are normalised to the singular long name ('second', ...).
"""

from __future__ import annotations

from dataclasses import field

from app.epl.frozen import FrozenNode, dataclass


@dataclass(frozen=True, slots=True)
class Pos(FrozenNode):
    """Source span: 1-based line/column of the first character; end_column is one past the last."""

    line: int = 0
    column: int = 0
    end_line: int = 0
    end_column: int = 0


NOPOS = Pos()


@dataclass(frozen=True, slots=True)
class Node(FrozenNode):
    """Base of every AST node; ``pos`` is ignored by equality and hashing."""

    pos: Pos = field(default=NOPOS, compare=False, repr=False, kw_only=True)


# --------------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Literal(Node):
    """Constant; type is one of 'int', 'long', 'double', 'string', 'boolean', 'null'."""

    value: object
    type: str


@dataclass(frozen=True, slots=True)
class Name(Node):
    """Dotted reference to a property, stream alias, variable or context property."""

    parts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TableAccess(Node):
    """``Table[k1, k2].column`` (``column`` None: the whole row); Esper ref. 4.7 tables.

    A key-less table's ``Table.column`` parses as a ``Name``; the planner tells the two
    apart because only it knows which names are tables."""

    table: str
    keys: tuple[Node, ...]
    column: str | None = None


@dataclass(frozen=True, slots=True)
class Star(Node):
    """A bare ``*`` argument (window parameter ``uni(price, *)``, ``computeHash(*)``)."""


@dataclass(frozen=True, slots=True)
class Unary(Node):
    """Prefix operator: op is '-' or 'not'."""

    op: str
    operand: Node


@dataclass(frozen=True, slots=True)
class Binary(Node):
    """Infix operator: + - * / % || = != < <= > >= and or ('<>' is stored as '!=')."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Between(Node):
    """``expr [not] between low and high`` (bounds inclusive)."""

    expr: Node
    low: Node
    high: Node
    negated: bool = False


@dataclass(frozen=True, slots=True)
class InList(Node):
    """``expr [not] in (a, b, ...)``."""

    expr: Node
    items: tuple[Node, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class InRange(Node):
    """``expr [not] in [low:high]``; '[' / ']' are closed ends, '(' / ')' open ones."""

    expr: Node
    low: Node
    high: Node
    low_closed: bool
    high_closed: bool
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Like(Node):
    """``expr [not] like pattern [escape ch]``."""

    expr: Node
    pattern: Node
    escape: Node | None = None
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Regexp(Node):
    """``expr [not] regexp pattern``."""

    expr: Node
    pattern: Node
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    """``expr is [not] null``."""

    expr: Node
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsSame(Node):
    """``a is [not] b``: equality that takes two nulls as equal, never null itself."""

    left: Node
    right: Node
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Case(Node):
    """``case [operand] when c then r ... [else e] end``; operand None for the searched form."""

    operand: Node | None
    whens: tuple[tuple[Node, Node], ...]
    else_: Node | None = None


@dataclass(frozen=True, slots=True)
class Call(Node):
    """Function or aggregate call; name as written (dotted or 'ns:name'); ``count(*)`` has star."""

    name: str
    args: tuple[Node, ...] = ()
    distinct: bool = False
    star: bool = False


@dataclass(frozen=True, slots=True)
class NamedArg(Node):
    """Named call argument ``name: expr`` such as ``sum(amount, group_by: account)``
    (Esper ref. 2)."""

    name: str
    value: Node


@dataclass(frozen=True, slots=True)
class Cast(Node):
    """``cast(expr, type)`` or ``cast(expr as type)``."""

    expr: Node
    type_name: str


# --------------------------------------------------------------------- subqueries
# Esper reference "Subqueries": a select over one stream used inside an expression.


@dataclass(frozen=True, slots=True)
class SubSelect(Node):
    """``select [distinct] items from Stream[(filter)]#views [as s] [where ..] [group by
    ..] [having ..]`` inside parentheses; ``stream`` is a FilterStream."""

    select_items: tuple[Node, ...]
    stream: Node
    where: Node | None = None
    group_by: tuple[Node, ...] = ()
    having: Node | None = None
    distinct: bool = False


@dataclass(frozen=True, slots=True)
class Subquery(Node):
    """``(select ...)`` as a value: one column's value, or a row of several columns."""

    query: SubSelect


@dataclass(frozen=True, slots=True)
class Exists(Node):
    """``exists (select ...)``: whether the subquery finds a row."""

    query: SubSelect


@dataclass(frozen=True, slots=True)
class InSubquery(Node):
    """``expr [not] in (select ...)``."""

    expr: Node
    query: SubSelect
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Quantified(Node):
    """``expr op any|some|all (select ...)``; ``quantifier`` is 'any' or 'all' (some = any)."""

    expr: Node
    op: str
    quantifier: str
    query: SubSelect


# Milliseconds per normalised time unit. Esper ref. 5.2.1 time periods; a month is
# taken as 30 days and a year as 365 days when no calendar is involved.
UNIT_MS: dict[str, float] = {
    "year": 365 * 86_400_000,
    "month": 30 * 86_400_000,
    "week": 7 * 86_400_000,
    "day": 86_400_000,
    "hour": 3_600_000,
    "minute": 60_000,
    "second": 1_000,
    "millisecond": 1,
    "microsecond": 0.001,
}


@dataclass(frozen=True, slots=True)
class TimePeriod(Node):
    """Time period such as ``2 minutes 5 seconds``: parts are (amount, unit) pairs."""

    parts: tuple[tuple[Node, str], ...]

    def ms(self) -> float | int | None:
        """Length in milliseconds when every amount is a numeric literal, else None."""
        total: float = 0
        for amount, unit in self.parts:
            if not isinstance(amount, Literal) or amount.type not in ("int", "long", "double"):
                return None
            try:
                total += amount.value * UNIT_MS[unit]  # type: ignore[operator]
            except OverflowError:  # an integer amount too large for a float unit
                return float("inf")
        if isinstance(total, float) and total.is_integer():
            return int(total)
        return total


@dataclass(frozen=True, slots=True)
class SortSpec(Node):
    """Sort criterion inside window parameters: ``price desc`` / ``symbol asc``."""

    expr: Node
    descending: bool


@dataclass(frozen=True, slots=True)
class CronStar(Node):
    """Crontab wildcard ``*``."""


@dataclass(frozen=True, slots=True)
class CronStep(Node):
    """Crontab frequency ``*/step``."""

    step: Node


@dataclass(frozen=True, slots=True)
class CronRange(Node):
    """Crontab inclusive range ``low:high``."""

    low: Node
    high: Node


@dataclass(frozen=True, slots=True)
class CronList(Node):
    """Crontab list ``[a, b:c, */d]``."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class CronLast(Node):
    """Crontab ``last`` (value None) or ``N last`` (last N-day of month / week)."""

    value: Node | None = None


@dataclass(frozen=True, slots=True)
class CronWeekday(Node):
    """Crontab ``N weekday``: the weekday nearest to day N of the month."""

    value: Node


@dataclass(frozen=True, slots=True)
class CronLastWeekday(Node):
    """Crontab ``lastweekday``: the last weekday of the month."""


@dataclass(frozen=True, slots=True)
class Crontab(Node):
    """Crontab tuple (minutes, hours, days of month, months, days of week [, seconds [, tz]])."""

    fields: tuple[Node, ...]


# ----------------------------------------------------------------------- patterns


@dataclass(frozen=True, slots=True)
class PFilter(Node):
    """Pattern filter atom ``[tag=]Type[(filter)]``."""

    tag: str | None
    type_name: str
    filter: Node | None = None


@dataclass(frozen=True, slots=True)
class PEvery(Node):
    """``every p``: restart the sub-pattern each time it matches."""

    child: Node


@dataclass(frozen=True, slots=True)
class PEveryDistinct(Node):
    """``every-distinct(exprs[, period]) p``: every, suppressing duplicate key values."""

    exprs: tuple[Node, ...]
    period: Node | None
    child: Node


@dataclass(frozen=True, slots=True)
class PNot(Node):
    """``not p``: true until p becomes true."""

    child: Node


@dataclass(frozen=True, slots=True)
class PFollowedBy(Node):
    """``a -> b -> c``: each child after the previous one matched."""

    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class PAnd(Node):
    """``a and b``: all children match, in any order."""

    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class POr(Node):
    """``a or b``: any child matches."""

    children: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class PTimerInterval(Node):
    """Observer ``timer:interval(period)``."""

    period: Node


@dataclass(frozen=True, slots=True)
class PTimerAt(Node):
    """Observer ``timer:at(crontab fields)``."""

    crontab: Crontab


@dataclass(frozen=True, slots=True)
class PGuard(Node):
    """Guard ``p where timer:within(period)``: p must match within the period;
    ``timer:withinmax(period, max_count)`` also ends p after max_count results."""

    child: Node
    period: Node
    max_count: Node | None = None


@dataclass(frozen=True, slots=True)
class PGuardWhile(Node):
    """Guard ``p while (cond)`` (also read as ``p where while (cond)``): p's results
    pass while cond holds for them."""

    child: Node
    cond: Node


@dataclass(frozen=True, slots=True)
class PRepeat(Node):
    """Repeat / match-until: ``[n] p``, ``[a:b] p``, ``p until q``, ``[a:b] p until q``."""

    child: Node
    low: Node | None = None
    high: Node | None = None
    ranged: bool = False
    until: Node | None = None


# ------------------------------------------------------------------ select pieces


@dataclass(frozen=True, slots=True)
class Annotation(Node):
    """Statement annotation ``@name(args)`` such as @name('x'), @Priority(1), @Hint('..')."""

    name: str
    args: tuple[Node, ...] = ()


@dataclass(frozen=True, slots=True)
class SelectItem(Node):
    """One select-list expression with its optional ``as`` alias."""

    expr: Node
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class Wildcard(Node):
    """``*`` (stream None) or ``alias.*`` in a select list."""

    stream: str | None = None


@dataclass(frozen=True, slots=True)
class InsertInto(Node):
    """``insert [istream|rstream|irstream] into Name [(cols)]``."""

    stream_kind: str | None
    name: str
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class View(Node):
    """Data window ``#ns:name(params)``; syntax '#' or '.' is kept only for printing."""

    namespace: str | None
    name: str
    params: tuple[Node, ...] = ()
    syntax: str = field(default="#", compare=False)


@dataclass(frozen=True, slots=True)
class FilterStream(Node):
    """From-clause stream ``Type[(filter)]#views [as alias] [unidirectional] [retain-...]``."""

    type_name: str
    filter: Node | None = None
    views: tuple[View, ...] = ()
    alias: str | None = None
    retain: str | None = None
    unidirectional: bool = False


@dataclass(frozen=True, slots=True)
class PatternStream(Node):
    """From-clause stream ``pattern [ ... ]#views [as alias]``."""

    pattern: Node
    alias: str | None = None
    views: tuple[View, ...] = ()
    retain: str | None = None
    unidirectional: bool = False


@dataclass(frozen=True, slots=True)
class OuterJoin(Node):
    """``[left|right|full outer|inner] join`` of the from clause: how the stream at the
    same position of ``from_`` (after the first) joins, on the ``on`` condition."""

    kind: str  # left | right | full | inner
    on: Node


@dataclass(frozen=True, slots=True)
class Assignment(Node):
    """``target = expr`` in ``then set``, ``on ... set`` and update clauses."""

    target: Name
    expr: Node


@dataclass(frozen=True, slots=True)
class OutputClause(Node):
    """Output rate limiting (Esper ref. 5.7, Esper ref. 4.5): exactly one trigger form is set.

    every_count+every_unit ('events') or every_time; at (Crontab); when (expr);
    when_terminated (primary form). terminated_and / then_set belong to the
    terminated part when there is one, else then_set belongs to ``when expr``.
    """

    kind: str | None = None
    every_count: Node | None = None
    every_unit: str | None = None
    every_time: Node | None = None
    at: Crontab | None = None
    when: Node | None = None
    when_terminated: bool = False
    terminated_and: Node | None = None
    then_set: tuple[Assignment, ...] = ()
    and_when_terminated: bool = False
    when_set: tuple[Assignment, ...] = ()
    """``when expr then set ... and when terminated ...``: the when's own assignments."""
    after: Node | None = None
    after_events: bool = False


@dataclass(frozen=True, slots=True)
class OrderItem(Node):
    """``order by`` element."""

    expr: Node
    descending: bool = False


@dataclass(frozen=True, slots=True)
class Limit(Node):
    """``limit count [offset offset]`` (``limit offset, count`` is normalised to this)."""

    count: Node
    offset: Node | None = None


# --------------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class SelectStatement(Node):
    """``[context C] [insert into ...|into table T] select ... from ... [clauses]``."""

    annotations: tuple[Annotation, ...] = ()
    context: str | None = None
    insert_into: InsertInto | None = None
    stream_kind: str | None = None
    select_items: tuple[Node, ...] = ()
    from_: tuple[Node, ...] = ()
    where: Node | None = None
    group_by: tuple[Node, ...] = ()
    having: Node | None = None
    output: OutputClause | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: Limit | None = None
    into_table: str | None = None
    joins: tuple[OuterJoin, ...] = ()
    """``join ... on`` qualifiers: ``joins[i]`` joins ``from_[i + 1]``; empty for a
    comma-separated from clause."""
    distinct: bool = False
    match_recognize: MatchRecognize | None = None
    """``match_recognize (...)`` after the from clause's one stream."""


# ---------------------------------------------------------------- match_recognize
# Esper reference, chapter "EPL Reference: Match Recognize".


@dataclass(frozen=True, slots=True)
class MrRepeat(Node):
    """``{n}`` (``exact``), ``{n,}``, ``{,m}``, ``{n,m}`` after a pattern atom or group."""

    low: int | None
    high: int | None
    exact: bool = False


@dataclass(frozen=True, slots=True)
class MrAtom(Node):
    """A pattern variable with its quantifier: '' (one), '*', '+', '?', or with a
    trailing '?' for the reluctant form ('*?', '+?', '??')."""

    name: str
    quantifier: str = ""
    repeat: MrRepeat | None = None


@dataclass(frozen=True, slots=True)
class MrConcat(Node):
    """Pattern items one after the other."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class MrAlt(Node):
    """``a | b``: one of the alternatives, the leftmost preferred."""

    alternatives: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class MrNested(Node):
    """A parenthesised group with its quantifier and repeat."""

    child: Node
    quantifier: str = ""
    repeat: MrRepeat | None = None


@dataclass(frozen=True, slots=True)
class MrPermute(Node):
    """``match_recognize_permute(a, b, ...)``: the items in any order, each order an
    alternative (the written order first)."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class MrMeasure(Node):
    """``expr as name`` of the measures clause (``name`` None when the 'as' is missing)."""

    expr: Node
    name: str | None


@dataclass(frozen=True, slots=True)
class MrDefine(Node):
    """``VAR as condition`` of the define clause."""

    name: str
    expr: Node


@dataclass(frozen=True, slots=True)
class MatchRecognize(Node):
    """The whole ``match_recognize (...)`` clause; ``skip`` is 'past last row', 'to next
    row' or 'to current row'."""

    partition_by: tuple[Node, ...]
    measures: tuple[MrMeasure, ...]
    pattern: Node
    defines: tuple[MrDefine, ...] = ()
    all_matches: bool = False
    skip: str = "past last row"
    interval: Node | None = None
    or_terminated: bool = False


@dataclass(frozen=True, slots=True)
class CreateSchema(Node):
    """``create schema Name [as] (prop type, ...)``."""

    annotations: tuple[Annotation, ...]
    name: str
    fields: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class CreateWindow(Node):
    """``create window Name#views [as] [select ... from] Type | as (cols)`` (named window)."""

    annotations: tuple[Annotation, ...] = ()
    context: str | None = None
    name: str = ""
    views: tuple[View, ...] = ()
    type_name: str | None = None
    select_items: tuple[Node, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()
    insert: bool = False
    insert_where: Node | None = None


@dataclass(frozen=True, slots=True)
class TableColumn(Node):
    """Table column: ``name type [primary key]`` or aggregation column ``name avg(double)``."""

    name: str
    type_name: str | None = None
    primary_key: bool = False
    aggregation: Call | None = None


@dataclass(frozen=True, slots=True)
class CreateTable(Node):
    """``create table Name (columns)``."""

    annotations: tuple[Annotation, ...] = ()
    context: str | None = None
    name: str = ""
    columns: tuple[TableColumn, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateVariable(Node):
    """``create [constant] variable type name [= init]``."""

    annotations: tuple[Annotation, ...] = ()
    context: str | None = None
    type_name: str = ""
    name: str = ""
    init: Node | None = None
    constant: bool = False


@dataclass(frozen=True, slots=True)
class IndexColumn(Node):
    """Index column with optional kind ('hash', 'btree', as written)."""

    name: str
    kind: str | None = None


@dataclass(frozen=True, slots=True)
class CreateIndex(Node):
    """``create [unique] index Name on Window (col [kind], ...)``."""

    annotations: tuple[Annotation, ...] = ()
    context: str | None = None
    name: str = ""
    window: str = ""
    columns: tuple[IndexColumn, ...] = ()
    unique: bool = False


# ----------------------------------------------------------------- on-statements


@dataclass(frozen=True, slots=True)
class OnDelete(Node):
    """``delete from W [as w] [where ...]`` action of an on-statement."""

    window: str
    alias: str | None = None
    where: Node | None = None


@dataclass(frozen=True, slots=True)
class OnSelect(Node):
    """``[insert into ..] select [and delete] ... from W [as w] [where ...]`` on-action."""

    insert_into: InsertInto | None
    and_delete: bool
    distinct: bool
    select_items: tuple[Node, ...]
    window: str
    alias: str | None = None
    where: Node | None = None
    group_by: tuple[Node, ...] = ()
    having: Node | None = None
    order_by: tuple[OrderItem, ...] = ()


@dataclass(frozen=True, slots=True)
class OnUpdate(Node):
    """``update W [as w] set ... [where ...]`` on-action."""

    window: str
    alias: str | None
    assignments: tuple[Assignment, ...]
    where: Node | None = None


@dataclass(frozen=True, slots=True)
class OnSet(Node):
    """``set var = expr, ...`` on-action (variables)."""

    assignments: tuple[Assignment, ...]


@dataclass(frozen=True, slots=True)
class MergeUpdate(Node):
    """``then update set ... [where ...]`` in on-merge."""

    assignments: tuple[Assignment, ...]
    where: Node | None = None


@dataclass(frozen=True, slots=True)
class MergeDelete(Node):
    """``then delete [where ...]`` in on-merge."""

    where: Node | None = None


@dataclass(frozen=True, slots=True)
class MergeInsert(Node):
    """``insert [into S] [(cols)] select ... [where ...]``; alone it inserts unconditionally."""

    into: str | None
    columns: tuple[str, ...]
    select_items: tuple[Node, ...]
    where: Node | None = None


@dataclass(frozen=True, slots=True)
class MergeWhen(Node):
    """``when [not] matched [and cond] then action [then action ...]``."""

    matched: bool
    condition: Node | None
    actions: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class OnMerge(Node):
    """``merge [into] W [as w] [where ...] (when ... | insert ...)+`` on-action."""

    window: str
    alias: str | None
    where: Node | None
    clauses: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class OnStatement(Node):
    """``on Trigger action``: trigger is a FilterStream or PatternStream."""

    annotations: tuple[Annotation, ...]
    context: str | None
    trigger: Node
    action: Node


# ----------------------------------------------------------------------- contexts


@dataclass(frozen=True, slots=True)
class CondFilter(Node):
    """Context condition: event filter ``Type[(filter)] [as alias]`` (Esper ref. 4.2.7.1)."""

    type_name: str
    filter: Node | None = None
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class CondPattern(Node):
    """Context condition: ``pattern [ ... ] [@inclusive]`` (Esper ref. 4.2.7.2)."""

    pattern: Node
    inclusive: bool = False
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class CondCrontab(Node):
    """Context condition: crontab ``(0, 9, *, *, *)`` (Esper ref. 4.2.7.3)."""

    crontab: Crontab


@dataclass(frozen=True, slots=True)
class CondAfter(Node):
    """Context condition: ``after time_period`` (Esper ref. 4.2.7.4)."""

    period: Node


@dataclass(frozen=True, slots=True)
class CondNow(Node):
    """Context start condition ``@now`` (Esper ref. 4.2.5 Non-Overlapping Context)."""


@dataclass(frozen=True, slots=True)
class CondNowAnd(Node):
    """Initiating condition ``@now and cond`` (Esper ref. 4.2.6 Overlapping Context)."""

    cond: Node


@dataclass(frozen=True, slots=True)
class KeyedItem(Node):
    """``p1 and p2 from Type[(filter)] [as alias]`` of a keyed segmented context."""

    props: tuple[Name, ...]
    type_name: str
    filter: Node | None = None
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class KeyedContext(Node):
    """``partition by ... [initiated by ...] [terminated by ...]`` (Esper ref. 4.2.2; the
    lifecycle as in Esper's keyed segmented context with initiation and termination)."""

    items: tuple[KeyedItem, ...]
    initiated: tuple[Node, ...] = ()
    terminated: Node | None = None


@dataclass(frozen=True, slots=True)
class HashItem(Node):
    """``hash_func(args) from Type[(filter)]`` of a hash segmented context."""

    function: str
    args: tuple[Node, ...]
    type_name: str
    filter: Node | None = None


@dataclass(frozen=True, slots=True)
class HashContext(Node):
    """``coalesce by ... granularity N [preallocate]`` (Esper ref. 4.2.3 Hash Segmented Context)."""

    items: tuple[HashItem, ...]
    granularity: Node
    preallocate: bool = False


@dataclass(frozen=True, slots=True)
class CategoryGroup(Node):
    """``group expr as label`` of a category context."""

    expr: Node
    label: str


@dataclass(frozen=True, slots=True)
class CategoryContext(Node):
    """``group ... as l1, group ... as l2 from Type[(filter)]`` (Esper ref. 4.2.4)."""

    groups: tuple[CategoryGroup, ...]
    type_name: str
    filter: Node | None = None


@dataclass(frozen=True, slots=True)
class NonOverlappingContext(Node):
    """``start cond [end cond]`` (Esper ref. 4.2.5 Non-Overlapping Context)."""

    start: Node
    end: Node | None = None


@dataclass(frozen=True, slots=True)
class OverlappingContext(Node):
    """``initiated [by] [distinct (..)] cond [terminated [by] cond]`` (Esper ref. 4.2.6)."""

    initiated: Node
    terminated: Node | None = None
    distinct: tuple[Node, ...] = ()


@dataclass(frozen=True, slots=True)
class NestedItem(Node):
    """``context Name spec`` inside a nested context."""

    name: str
    spec: Node


@dataclass(frozen=True, slots=True)
class NestedContext(Node):
    """``context A spec, context B spec, ...`` (Esper ref. 4.3 Context Nesting)."""

    contexts: tuple[NestedItem, ...]


@dataclass(frozen=True, slots=True)
class CreateContext(Node):
    """``create context Name [as] spec``."""

    annotations: tuple[Annotation, ...]
    name: str
    spec: Node


# -------------------------------------------------------------------------- Apama


@dataclass(frozen=True, slots=True)
class ApamaQuery(Node):
    """Apama stream query ``from v in values within D every P [retain N] select ...``
    (Apama batched windows)."""

    annotations: tuple[Annotation, ...]
    item: str
    stream: str
    within: Node | None
    every: Node | None
    retain: Node | None
    rstream: bool
    select_items: tuple[Node, ...]


# ---------------------------------------------------------- expression declarations


@dataclass(frozen=True, slots=True)
class ExpressionDecl(Node):
    """``expression name {[params =>] body}`` or ``expression name alias for {body}``
    (Esper reference, "Expression declarations"); calls to it inline at planning."""

    name: str
    params: tuple[str, ...]
    body: Node
    alias: bool = False
    """``alias for``: used as a plain name, without parentheses or parameters."""


@dataclass(frozen=True, slots=True)
class Declared(Node):
    """A statement preceded by its own expression declarations."""

    expressions: tuple[ExpressionDecl, ...]
    statement: Node


@dataclass(frozen=True, slots=True)
class CreateExpression(Node):
    """``create expression ...``: a declaration later statements may call."""

    decl: ExpressionDecl
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True, slots=True)
class Module(Node):
    """A list of statements parsed from one text (``;``-separated)."""

    statements: tuple[Node, ...]


Statement = (
    SelectStatement
    | CreateSchema
    | CreateWindow
    | CreateTable
    | CreateVariable
    | CreateIndex
    | OnStatement
    | CreateContext
    | ApamaQuery
    | CreateExpression
    | Declared
)
"""Any statement node."""
Expr = Node
"""Any expression node (Literal, Name, Binary, Call, TimePeriod, ...)."""

STATEMENT_TYPES: tuple[type, ...] = (
    SelectStatement, CreateSchema, CreateWindow, CreateTable, CreateVariable, CreateIndex,
    OnStatement, CreateContext, ApamaQuery, CreateExpression, Declared,
)

__all__ = sorted(
    name
    for name, value in dict(globals()).items()
    if not name.startswith("_") and (isinstance(value, type) or name in ("NOPOS", "UNIT_MS"))
    and name not in ("dataclass", "FrozenNode")
)
