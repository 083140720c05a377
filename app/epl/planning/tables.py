"""Planning of ``create variable`` and ``create table`` statements and of ``into table``
(Esper ref. 4.7 Context and Tables, 4.8)."""

from __future__ import annotations

from dataclasses import replace

from app.epl import ast
from app.epl.aggregate_args import declares_filter, has_filter
from app.epl.errors import did_you_mean, verr
from app.epl.expr import (
    Scope,
    compile_expr,
    has_aggregate,
    names_in,
    text_of,
)
from app.epl.parser import parse_expression
from app.epl.planning.base import (
    PlannerBase,
    column_name,
)
from app.runtime.plan import StatementPlan
from operators.aggregates import table_aggregator
from operators.base import PartitionCtx
from operators.resultset import (
    ResultSetSpec,
)
from operators.table import IntoTableSpec, TableColumn, TableSpec


class TablePlanning(PlannerBase):
    """Plans variables, tables and into-table statements."""

    def create_variable(self, node: ast.CreateVariable, name: str, epl: str) -> StatementPlan:
        """``[context C] create [constant] variable type name [= expr]`` (Esper ref. 4.8)."""
        from operators.variables import SCALAR_TYPES, VariableDecl, VariableError

        type_name = str(node.type_name)
        base = type_name[:-2] if type_name.endswith("[]") else type_name
        if base.lower() not in SCALAR_TYPES and self.catalog.type_props(base) is None:
            raise verr(f"unknown variable type '{type_name}'", node,
                       hint="use int, long, double, float, string, boolean, short, byte, "
                            "object, an array of one of them, or an event type")
        if node.name in self.catalog.variables:
            raise verr(f"variable '{node.name}' is already declared", node)
        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                       hint=did_you_mean(node.context, self.catalog.contexts))
        if node.constant and node.init is None:
            raise verr(f"constant '{node.name}' needs an initial value", node)
        init = None
        if node.init is not None:
            scope = Scope("event", variables=frozenset(self.catalog.variables))
            fn = compile_expr(node.init, scope)
            init = fn({}, PartitionCtx(variables=dict(self.catalog.variable_values)))
        decl = VariableDecl(node.name, type_name, init, bool(node.constant))
        try:
            value = decl.coerce(init)
        except VariableError as e:
            raise verr(str(e), node.init or node) from None
        self.catalog.variables[node.name] = type_name
        self.catalog.variable_values[node.name] = value
        if node.constant:
            self.catalog.constants.add(node.name)
        if node.context is not None:
            self.catalog.context_variables[node.name] = node.context
        return StatementPlan(name, "variable", epl, context=node.context, initial=value,
                             variable=node.name, var_decl=decl)

    def _check_context_variables(self, node: ast.Statement) -> None:
        """Esper ref. 4.8: context variables can only be used in statements of the same context."""
        owners = self.catalog.context_variables
        if not owners or isinstance(node, ast.CreateVariable):
            return
        context = getattr(node, "context", None)
        for n in names_in(node):
            owner = owners.get(n.parts[0])
            if owner is not None and owner != context:
                raise verr(f"variable '{n.parts[0]}' is a context variable of '{owner}'; the "
                           f"statement must declare 'context {owner}'", n,
                           hint="context variables can only be used in statements associated "
                                "to the same context (Esper ref. 4.8 Context and Variables)")

    def create_table(self, node: ast.CreateTable, name: str, epl: str) -> StatementPlan:
        """``[context C] create table Name (k type primary key, c sum(double), ...)``."""
        from app.epl.functions import user_aggregation_column
        from operators.aggregates import AGGREGATE_NAMES, make_aggregator

        if node.context is not None and node.context not in self.catalog.contexts:
            raise verr(f"unknown context '{node.context}'", node,
                       hint=did_you_mean(node.context, self.catalog.contexts))
        if node.name in self.catalog.tables or self.catalog.type_props(node.name) is not None:
            raise verr(f"'{node.name}' is already declared", node)
        cols: list[TableColumn] = []
        seen: set[str] = set()
        for c in node.columns:
            if c.name in seen:
                raise verr(f"column '{c.name}' is declared twice", c)
            seen.add(c.name)
            if c.aggregation is not None:
                fname = c.aggregation.name.lower()
                named = next((a for a in c.aggregation.args if isinstance(a, ast.NamedArg)),
                             None)
                if named is not None:
                    # Esper ref. 4.7 (tables) with 10.2: a column declares the aggregation;
                    # the statements aggregating into the table filter and group it
                    raise verr("the 'group_by' and 'filter' parameters are not allowed in "
                               "create-table statements", named,
                               hint=f"declare '{c.name} {_without_named(c.aggregation)}' and "
                                    f"give the {named.name} in the 'into table' statement")
                user = user_aggregation_column(c.aggregation)
                if user is not None:
                    cols.append(TableColumn(c.name, None, False, user,
                                            text_of(c.aggregation)))
                    continue
                if fname not in AGGREGATE_NAMES:
                    raise verr(f"'{c.aggregation.name}' is not an aggregation function", c,
                               hint="aggregation columns are written like 'total sum(double)'")
                call = c.aggregation
                star = bool(call.star) or (bool(call.args) and isinstance(call.args[0], ast.Star))
                agg = make_aggregator(fname, star=star, distinct=bool(call.distinct))
                cols.append(TableColumn(c.name, None, False, agg, text_of(c.aggregation)))
            else:
                cols.append(TableColumn(c.name, str(c.type_name), bool(c.primary_key)))
        spec = TableSpec(node.name, tuple(cols), node.context)
        self.catalog.tables[node.name] = spec
        return StatementPlan(name, "table", epl, context=node.context, table=spec)

    def _into_table(self, node: ast.SelectStatement, rs: ResultSetSpec, aggs_by_text: dict[str, int]
                    ) -> ResultSetSpec:
        """``into table T select agg as col ... group by keys`` (Esper ref. 4.7): each aggregate
        maintains the table column its alias names; group-by values are the primary key."""
        table = self.catalog.tables.get(node.into_table)
        if table is None:
            raise verr(f"unknown table '{node.into_table}'", node,
                       hint=did_you_mean(node.into_table, self.catalog.tables))
        tctx = table.context
        if tctx != node.context:
            raise verr(f"table '{table.name}' is declared with context '{tctx}'; 'into table' "
                       "must declare the same context" if tctx else
                       f"table '{table.name}' has no context; 'into table' must not declare "
                       "one", node, hint="Esper ref. 4.7 Context and Tables")
        if len(node.group_by or ()) != len(table.keys):
            raise verr(f"table '{table.name}' has {len(table.keys)} primary key column(s); "
                       f"the statement groups by {len(node.group_by or ())} expression(s)",
                       node, hint="group by the primary key, in the declared order")
        columns: list[str | None] = [None] * len(rs.aggregates)
        for item in node.select_items:
            if not isinstance(item, ast.SelectItem) or not has_aggregate(item.expr):
                continue
            col_name = item.alias or column_name(item, self.source)
            col = table.aggregations.get(col_name)
            if col is None:
                raise verr(f"table '{table.name}' has no aggregation column '{col_name}'",
                           item, hint=did_you_mean(col_name, table.aggregations))
            if not isinstance(item.expr, ast.Call):
                raise verr("an 'into table' column must be a single aggregation", item)
            idx = aggs_by_text.get(text_of(item.expr))
            if idx is None:
                continue
            have = rs.aggregates[idx].aggregator
            if type(have) is not type(col.aggregator) or have.name != col.aggregator.name:
                raise verr(f"column '{col_name}' is {col.agg_text}; the statement aggregates "
                           f"{text_of(item.expr)}", item)
            if has_filter(item.expr):
                # Esper 9 refuses a filter for a column that declares none ("The aggregation
                # declares no filter expression and provided is a filter expression"), and
                # maintains nothing for one declared with a filter type (count(*, boolean)):
                # no filtered aggregation goes into a table
                raise verr("an 'into table' aggregation cannot take a filter", item,
                           hint="filter the statement's events in its where clause")
            decl = parse_expression(col.agg_text)
            if isinstance(decl, ast.Call) and declares_filter(decl):
                raise verr(f"column '{col_name}' is {col.agg_text}, which declares a filter; "
                           f"the statement aggregates {text_of(item.expr)}", item,
                           hint=f"declare the column without the filter type, as "
                                f"'{col_name} {_without_filter(decl)}'")
            columns[idx] = col_name
        if any(c is None for c in columns):
            raise verr("every aggregation of an 'into table' statement must go to a table "
                       "column", node)
        # Esper ref. 4.7: a table's counters count down without a floor (table_aggregator)
        rs = replace(rs, aggregates=tuple(replace(a, aggregator=table_aggregator(a.aggregator))
                                          for a in rs.aggregates))
        return IntoTableSpec.of(rs, table.name, tuple(c or "" for c in columns))


def _without_filter(call: ast.Call) -> str:
    """A column's aggregation declared with a filter type, as text without it."""
    return text_of(replace(call, args=call.args[:1]))


def _without_named(call: ast.Call) -> str:
    """A column's aggregation as it is declared: without named parameters, and with a
    ``boolean`` filter type for a ``filter:`` (``count(*, filter: b)`` is declared
    ``count(*, boolean)``, see ``declares_filter``)."""
    named = [a for a in call.args if isinstance(a, ast.NamedArg)]
    bare = replace(call, args=tuple(a for a in call.args if not isinstance(a, ast.NamedArg)))
    if any(a.name.lower() == "filter" for a in named) and bare.args:
        bare = replace(bare, args=(*bare.args, ast.Name(("boolean",))))
    return text_of(bare)
