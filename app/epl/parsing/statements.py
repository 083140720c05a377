"""Tree building for statements: the statement frame, select and its clauses, output
rate limiting, create schema/window/table/variable/index, on-statements and Apama
stream queries."""

from __future__ import annotations

import dataclasses
from typing import Any

from lark import Token

from app.epl import ast as A
from app.epl.parsing.base import (
    BuilderBase,
    Flag,
    Wrapped,
    alias_of,
    all_of,
    first_of,
    flag,
    present,
    wrapped,
)


class StatementRules(BuilderBase):
    """Rules for statements and their clauses."""

    def r_single_start(self, c: list[Any], pos: A.Pos) -> Any:
        """The one statement."""
        return present(c)[0]

    def r_module_start(self, c: list[Any], pos: A.Pos) -> list[Any]:
        """All statements in order."""
        return present(c)

    def r_expr_start(self, c: list[Any], pos: A.Pos) -> Any:
        """The expression."""
        return present(c)[0]

    def r_pattern_start(self, c: list[Any], pos: A.Pos) -> Any:
        """The pattern."""
        return present(c)[0]

    def r_statement(self, c: list[Any], pos: A.Pos) -> Any:
        """Attach leading annotations and the 'context X' prefix to the statement body."""
        items = present(c)
        annotations = all_of(items, A.Annotation)
        ctx = wrapped(items, "context")
        body = items[-1]
        changes: dict[str, Any] = {"pos": pos}
        if annotations:
            changes["annotations"] = annotations
        if ctx is not None:
            changes["context"] = ctx
        statement = dataclasses.replace(body, **changes)
        declared = all_of(items[:-1], A.ExpressionDecl)
        if declared:
            return A.Declared(declared, statement, pos=pos)
        return statement

    def r_ctx_prefix(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """'context Name' prefix."""
        return Wrapped("context", present(c)[0])

    def r_annotation(self, c: list[Any], pos: A.Pos) -> A.Annotation:
        """@name or @name(args)."""
        items = present(c)
        args = wrapped(items, "args") or ()
        return A.Annotation(items[0], args, pos=pos)

    def r_annotation_args(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """Annotation argument list."""
        return Wrapped("args", tuple(present(c)))

    def r_select_stmt(self, c: list[Any], pos: A.Pos) -> A.SelectStatement:
        """Select statement with all its clauses."""
        items = present(c)
        sel = wrapped(items, "select")
        out = first_of(items, A.OutputClause)
        limit = first_of(items, A.Limit)
        streams, joins = wrapped(items, "from") or ((), ())
        return A.SelectStatement(
            insert_into=first_of(items, A.InsertInto),
            into_table=wrapped(items, "into_table"),
            stream_kind=sel["kind"],
            distinct=sel["distinct"],
            select_items=sel["items"],
            from_=streams,
            joins=joins,
            where=wrapped(items, "where"),
            group_by=wrapped(items, "group_by") or (),
            having=wrapped(items, "having"),
            output=out,
            order_by=wrapped(items, "order_by") or (),
            limit=limit,
            match_recognize=wrapped(items, "match_recognize"),
            pos=pos,
        )

    def r_insert_into(self, c: list[Any], pos: A.Pos) -> A.InsertInto:
        """insert [kind] into Name [(cols)]."""
        items = present(c)
        kind = wrapped(items, "kind")
        name = first_of(items, str)
        cols = wrapped(items, "columns") or ()
        return A.InsertInto(kind, name, cols, pos=pos)

    def r_column_list(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """(a, b, c) column names."""
        return Wrapped("columns", tuple(present(c)))

    def r_into_table(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """into table Name."""
        return Wrapped("into_table", present(c)[0])

    def r_stream_kind(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """istream / rstream / irstream, lower-cased."""
        return Wrapped("kind", str(c[0].value).lower())

    def r_rstream_kw(self, c: list[Any], pos: A.Pos) -> Flag:
        """Apama 'select rstream'."""
        return Flag("rstream")

    def r_distinct_kw(self, c: list[Any], pos: A.Pos) -> Flag:
        """'distinct' keyword."""
        return Flag("distinct")

    def r_select_clause(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """select [kind] [distinct] items."""
        items = present(c)
        return Wrapped("select", {
            "kind": wrapped(items, "kind"),
            "distinct": flag(items, "distinct"),
            "items": wrapped(items, "select_list"),
        })

    def r_select_list(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """Select list items."""
        return Wrapped("select_list", tuple(present(c)))

    def r_wildcard_all(self, c: list[Any], pos: A.Pos) -> A.Wildcard:
        """'*'."""
        return A.Wildcard(None, pos=pos)

    def r_wildcard_stream(self, c: list[Any], pos: A.Pos) -> A.Wildcard:
        """'alias.*'."""
        return A.Wildcard(present(c)[0], pos=pos)

    def r_select_expr(self, c: list[Any], pos: A.Pos) -> A.SelectItem:
        """expr [as alias]."""
        items = present(c)
        alias = items[1] if len(items) > 1 else None
        return A.SelectItem(items[0], alias, pos=pos)

    def r_from_clause(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """Streams of the from clause; with ``join ... on`` the qualifiers as well."""
        items = present(c)
        joins = tuple(i for i in items if isinstance(i, tuple))
        if not joins:
            return Wrapped("from", (tuple(items), ()))
        return Wrapped("from", ((items[0], *(s for s, _ in joins)),
                                 tuple(j for _, j in joins)))

    def r_outer_join(self, c: list[Any], pos: A.Pos) -> tuple[Any, A.OuterJoin]:
        """[kind] join stream on expr: (stream, qualifier)."""
        return c[1], A.OuterJoin(c[0], c[2], pos=pos)

    def r_join_left(self, c: list[Any], pos: A.Pos) -> str:
        return "left"

    def r_join_right(self, c: list[Any], pos: A.Pos) -> str:
        return "right"

    def r_join_full(self, c: list[Any], pos: A.Pos) -> str:
        return "full"

    def r_join_inner(self, c: list[Any], pos: A.Pos) -> str:
        return "inner"

    def r_where_clause(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """where expr."""
        return Wrapped("where", present(c)[0])

    def r_group_by_clause(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """group by exprs."""
        return Wrapped("group_by", tuple(present(c)))

    def r_having_clause(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """having expr."""
        return Wrapped("having", present(c)[0])

    def r_order_by_clause(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """order by items."""
        return Wrapped("order_by", tuple(present(c)))

    def r_order_item(self, c: list[Any], pos: A.Pos) -> A.OrderItem:
        """expr [asc|desc]."""
        items = present(c)
        desc = wrapped(items, "desc")
        return A.OrderItem(items[0], bool(desc), pos=pos)

    def r_limit_offset(self, c: list[Any], pos: A.Pos) -> A.Limit:
        """limit n [offset m]."""
        items = present(c)
        return A.Limit(items[0], items[1] if len(items) > 1 else None, pos=pos)

    def r_limit_comma(self, c: list[Any], pos: A.Pos) -> A.Limit:
        """limit m, n means offset m, count n (Esper ref. 5.11)."""
        items = present(c)
        return A.Limit(items[1], items[0], pos=pos)

    def r_output_clause(self, c: list[Any], pos: A.Pos) -> A.OutputClause:
        """output [after ..] [all|first|last|snapshot] trigger (Esper ref. 5.7, Esper ref. 4.5)."""
        items = present(c)
        kwargs: dict[str, Any] = {}
        for item in items:
            if isinstance(item, Wrapped) and item.tag == "output_kind":
                kwargs["kind"] = item.value
            elif isinstance(item, Wrapped) and item.tag == "output":
                kwargs.update(item.value)
        return A.OutputClause(**kwargs, pos=pos)

    def r_output_kind(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """all / first / last / snapshot."""
        return Wrapped("output_kind", str(c[0].value).lower())

    def r_after_time(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """output after <time period>."""
        return Wrapped("output", {"after": present(c)[0], "after_events": False})

    def r_after_events(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """output after N events."""
        return Wrapped("output", {"after": present(c)[0], "after_events": True})

    def _with_terminated(self, base: dict[str, Any], items: list[Any]) -> Wrapped:
        """Merge an optional 'and when terminated ...' part into the trigger fields."""
        term = wrapped(items, "and_terminated")
        if term is not None:
            base.update(term)
        return Wrapped("output", base)

    def r_every_time(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """every <time period> [and when terminated]."""
        items = present(c)
        return self._with_terminated({"every_time": items[0]}, items)

    def r_every_events(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """every N events [and when terminated]."""
        items = present(c)
        return self._with_terminated({"every_count": items[0], "every_unit": "events"}, items)

    def r_out_at(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """at (crontab) [and when terminated]."""
        items = present(c)
        return self._with_terminated({"at": items[0]}, items)

    def r_out_when(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """when expr [then set ...] [and when terminated ...]."""
        items = present(c)
        own = wrapped(items, "then_set") or ()
        term = wrapped(items, "and_terminated")
        if term is None:
            return Wrapped("output", {"when": items[0], "then_set": own})
        return Wrapped("output", {"when": items[0], "when_set": own, **term})

    def r_out_terminated(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """when terminated [and expr] [then set ...] (Esper ref. 4.5)."""
        items = present(c)
        cond = next((i for i in items if isinstance(i, A.Node)), None)
        return Wrapped("output", {"when_terminated": True, "terminated_and": cond,
                                   "then_set": wrapped(items, "then_set") or ()})

    def r_and_terminated(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """and when terminated [and expr] [then set ...] (Esper ref. 4.5)."""
        items = [i for i in present(c)
                 if not (isinstance(i, Token) and i.type == "AND_WHEN_TERMINATED")]
        cond = next((i for i in items if isinstance(i, A.Node)), None)
        return Wrapped("and_terminated", {"and_when_terminated": True, "terminated_and": cond,
                                           "then_set": wrapped(items, "then_set") or ()})

    def r_then_set(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """then set a = x, b = y."""
        return Wrapped("then_set", tuple(present(c)))

    def r_assignment(self, c: list[Any], pos: A.Pos) -> A.Assignment:
        """target = expr."""
        items = present(c)
        return A.Assignment(items[0], items[1], pos=pos)

    def r_int_literal(self, c: list[Any], pos: A.Pos) -> A.Literal:
        """Number used as a count."""
        return self._number(c[0], pos)

    def r_create_schema(self, c: list[Any], pos: A.Pos) -> A.CreateSchema:
        """create schema Name [as] (fields)."""
        items = present(c)
        fields = tuple(i.value for i in items if isinstance(i, Wrapped) and i.tag == "field")
        return A.CreateSchema((), items[0], fields, pos=pos)

    def r_schema_field(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """prop type."""
        items = present(c)
        return Wrapped("field", (items[0], items[1].value))

    def r_type_name(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """Dotted type name with optional [] suffix, as one string."""
        items = present(c)
        text = ".".join(items[0].parts)
        if flag(items, "array"):
            text += "[]"
        return Wrapped("type", text)

    def r_array_kw(self, c: list[Any], pos: A.Pos) -> Flag:
        """'[]' array suffix."""
        return Flag("array")

    def r_create_window(self, c: list[Any], pos: A.Pos) -> A.CreateWindow:
        """create window Name#views [as] source [insert [where ...]]."""
        items = present(c)
        src = wrapped(items, "window_source")
        ins = wrapped(items, "window_insert")
        return A.CreateWindow(
            name=items[0],
            views=all_of(items, A.View),
            type_name=src.get("type_name"),
            select_items=src.get("select_items", ()),
            columns=src.get("columns", ()),
            insert=ins is not None,
            insert_where=ins.get("where") if ins is not None else None,
            pos=pos,
        )

    def r_ws_type(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """[as] Type."""
        return Wrapped("window_source", {"type_name": present(c)[0]})

    def r_ws_select(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """[as] select items from Type."""
        items = present(c)
        return Wrapped("window_source", {"select_items": wrapped(items, "select_list"),
                                          "type_name": first_of(items, str)})

    def r_ws_columns(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """as (col type, ...)."""
        cols = tuple(i.value for i in present(c))
        return Wrapped("window_source", {"columns": cols})

    def r_window_insert(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """insert [where expr] after a create window."""
        items = present(c)
        return Wrapped("window_insert", {"where": items[0] if items else None})

    def r_create_table(self, c: list[Any], pos: A.Pos) -> A.CreateTable:
        """create table Name (columns)."""
        items = present(c)
        return A.CreateTable(name=items[0], columns=all_of(items, A.TableColumn), pos=pos)

    def r_table_col_typed(self, c: list[Any], pos: A.Pos) -> A.TableColumn:
        """name type [primary key]."""
        items = present(c)
        return A.TableColumn(items[0], items[1].value, flag(items, "primary_key"), None, pos=pos)

    def r_table_col_agg(self, c: list[Any], pos: A.Pos) -> A.TableColumn:
        """name aggregation(type) (Esper ref. 4.7 Context and Tables 'avgSpeed avg(double)')."""
        items = present(c)
        return A.TableColumn(items[0], None, False, items[1], pos=pos)

    def r_table_col_kwagg(self, c: list[Any], pos: A.Pos) -> A.TableColumn:
        """name min(type) / last(type): an aggregation named like a keyword."""
        name, keyword, *rest = c
        call = self.r_call([keyword, *rest], pos)  # type: ignore[attr-defined]
        return A.TableColumn(name, None, False, call, pos=pos)

    def r_agg_keyword(self, c: list[Any], pos: A.Pos) -> Any:
        """min | last, as the name token of a call."""
        tok = c[0]
        return tok.update(value=str(tok.value).lower())

    def r_primary_key(self, c: list[Any], pos: A.Pos) -> Flag:
        """'primary key'."""
        return Flag("primary_key")

    def r_create_variable(self, c: list[Any], pos: A.Pos) -> A.CreateVariable:
        """create [constant] variable type name [= expr]."""
        items = present(c)
        type_name = wrapped(items, "type")
        rest = [i for i in items if not isinstance(i, (Wrapped, Flag))]
        name = rest[0]
        init = rest[1] if len(rest) > 1 else None
        return A.CreateVariable(type_name=type_name, name=name, init=init,
                                constant=flag(items, "constant"), pos=pos)

    def r_constant_kw(self, c: list[Any], pos: A.Pos) -> Flag:
        """'constant'."""
        return Flag("constant")

    def r_create_index(self, c: list[Any], pos: A.Pos) -> A.CreateIndex:
        """create [unique] index Name on Window (cols)."""
        items = present(c)
        names = [i for i in items if isinstance(i, str)]
        return A.CreateIndex(name=names[0], window=names[1], columns=all_of(items, A.IndexColumn),
                             unique=flag(items, "unique"), pos=pos)

    def r_unique_kw(self, c: list[Any], pos: A.Pos) -> Flag:
        """'unique'."""
        return Flag("unique")

    def r_index_column(self, c: list[Any], pos: A.Pos) -> A.IndexColumn:
        """col [hash|btree]."""
        items = present(c)
        return A.IndexColumn(items[0], items[1] if len(items) > 1 else None, pos=pos)

    def r_on_stmt(self, c: list[Any], pos: A.Pos) -> A.OnStatement:
        """on trigger action."""
        items = present(c)
        return A.OnStatement((), None, items[0], items[1], pos=pos)

    def r_trigger_filter(self, c: list[Any], pos: A.Pos) -> A.FilterStream:
        """Type[(filter)] [as alias] trigger."""
        items = present(c)
        return A.FilterStream(items[0], wrapped(items, "filter"), (), alias_of(items), pos=pos)

    def r_trigger_pattern(self, c: list[Any], pos: A.Pos) -> A.PatternStream:
        """pattern [..] [as alias] trigger."""
        items = present(c)
        return A.PatternStream(items[0], alias_of(items), pos=pos)

    def r_on_delete(self, c: list[Any], pos: A.Pos) -> A.OnDelete:
        """delete from W [as w] [where ..]."""
        items = present(c)
        return A.OnDelete(items[0], alias_of(items), wrapped(items, "where"), pos=pos)

    def r_on_select(self, c: list[Any], pos: A.Pos) -> A.OnSelect:
        """[insert into ..] select [and delete] [distinct] items from W ..."""
        items = present(c)
        return A.OnSelect(
            insert_into=first_of(items, A.InsertInto),
            and_delete=flag(items, "and_delete"),
            distinct=flag(items, "distinct"),
            select_items=wrapped(items, "select_list"),
            window=first_of(items, str),
            alias=alias_of(items),
            where=wrapped(items, "where"),
            group_by=wrapped(items, "group_by") or (),
            having=wrapped(items, "having"),
            order_by=wrapped(items, "order_by") or (),
            pos=pos,
        )

    def r_and_delete(self, c: list[Any], pos: A.Pos) -> Flag:
        """'and delete' of on-select."""
        return Flag("and_delete")

    def r_on_update(self, c: list[Any], pos: A.Pos) -> A.OnUpdate:
        """update W [as w] set ... [where ..]."""
        items = present(c)
        return A.OnUpdate(items[0], alias_of(items), all_of(items, A.Assignment),
                          wrapped(items, "where"), pos=pos)

    def r_on_set(self, c: list[Any], pos: A.Pos) -> A.OnSet:
        """set var = expr, ..."""
        return A.OnSet(all_of(present(c), A.Assignment), pos=pos)

    def r_on_merge(self, c: list[Any], pos: A.Pos) -> A.OnMerge:
        """merge [into] W [as w] [where ..] items."""
        items = present(c)
        clauses = all_of(items, (A.MergeWhen, A.MergeInsert))
        return A.OnMerge(items[0], alias_of(items), wrapped(items, "where"), clauses, pos=pos)

    def _merge_when(self, c: list[Any], pos: A.Pos, matched: bool) -> A.MergeWhen:
        """Shared body of 'when [not] matched'."""
        items = present(c)
        actions = tuple(i.value for i in items if isinstance(i, Wrapped) and i.tag == "then")
        cond = next((i for i in items if isinstance(i, A.Node)), None)
        return A.MergeWhen(matched, cond, actions, pos=pos)

    def r_merge_matched(self, c: list[Any], pos: A.Pos) -> A.MergeWhen:
        """when matched [and cond] then ..."""
        return self._merge_when(c, pos, True)

    def r_merge_not_matched(self, c: list[Any], pos: A.Pos) -> A.MergeWhen:
        """when not matched [and cond] then ..."""
        return self._merge_when(c, pos, False)

    def r_merge_then(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """then action."""
        return Wrapped("then", present(c)[0])

    def r_merge_update(self, c: list[Any], pos: A.Pos) -> A.MergeUpdate:
        """update set ... [where ..]."""
        items = present(c)
        return A.MergeUpdate(all_of(items, A.Assignment), wrapped(items, "where"), pos=pos)

    def r_merge_delete(self, c: list[Any], pos: A.Pos) -> A.MergeDelete:
        """delete [where ..]."""
        return A.MergeDelete(wrapped(present(c), "where"), pos=pos)

    def r_merge_insert(self, c: list[Any], pos: A.Pos) -> A.MergeInsert:
        """insert [into S] [(cols)] select ... [where ..]."""
        items = present(c)
        return A.MergeInsert(wrapped(items, "into"), wrapped(items, "columns") or (),
                             wrapped(items, "select_list"), wrapped(items, "where"), pos=pos)

    def r_into_name(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """into Name inside a merge insert."""
        return Wrapped("into", present(c)[0])

    def r_apama_query(self, c: list[Any], pos: A.Pos) -> A.ApamaQuery:
        """from v in stream [window] select [rstream] items (Apama batched windows)."""
        items = present(c)
        win = wrapped(items, "apama_window") or {}
        return A.ApamaQuery(
            annotations=(),
            item=items[0],
            stream=items[1],
            within=win.get("within"),
            every=win.get("every"),
            retain=win.get("retain"),
            rstream=flag(items, "rstream"),
            select_items=wrapped(items, "select_list"),
            pos=pos,
        )

    def r_apama_within(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """within D [every P] [retain N]; keyword order decides which value is which."""
        return Wrapped("apama_window", self._keyword_values(c, ("within", "every", "retain")))

    def r_apama_retain(self, c: list[Any], pos: A.Pos) -> Wrapped:
        """retain N [every M]."""
        return Wrapped("apama_window", self._keyword_values(c, ("retain", "every")))

    @staticmethod
    def _keyword_values(c: list[Any], order: tuple[str, ...]) -> dict[str, Any]:
        """Map an 'kw1 e1 [kw2 e2] [kw3 e3]' rule's placeholders to keyword names."""
        # maybe_placeholders keeps one slot per optional part, in grammar order
        return {kw: value for kw, value in zip(order, c, strict=False) if value is not None}
