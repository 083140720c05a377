"""``kepl explain``: per statement, the operator chain, state, partitioning and topics."""

from __future__ import annotations

from typing import Any

from app.epl.errors import EplError
from app.runtime.catalog import Catalog, NotSupported
from app.statements import StatementFile


def explain_file(sf: StatementFile) -> tuple[list[str], bool]:
    """Lines describing every statement of a file, and whether all were valid."""
    catalog = Catalog.from_schemas(sf.schemas)
    out: list[str] = []
    for s in sf.statements:
        try:
            plan = catalog.plan(s.epl, s.name)
        except EplError as e:
            out += [f"statement {s.name}: invalid", e.render()]
            return out, False
        except NotSupported as e:
            out.append(f"statement {s.name}: not supported yet: {e}")
            continue
        out += plan.explain()
        out += [f"  state: {line}" for line in _state_of(plan)]
        out += [f"  topic {line}" for line in topics_of(sf, plan, catalog)]
    return out, True


def _state_of(plan: Any) -> list[str]:
    """Where the statement keeps state, per context partition."""
    if plan.kind != "query":
        return []
    p = plan.pipeline
    out = []
    if p.stream is not None and p.stream.view is not None:
        out.append(f"window {p.stream.view.describe()} (rows, O(1) writes per event)")
    if p.pattern is not None:
        out.append("pattern instances")
    if p.resultset.table is not None:
        out.append(f"aggregates in the rows of table {p.resultset.table} (one key per row)")
    elif p.resultset.aggregates:
        per = "per group" if p.resultset.group_by else "one record"
        out.append(f"aggregates {', '.join(a.text for a in p.resultset.aggregates)} ({per})")
    if p.output.limited:
        out.append("output buffer")
    return out or ["none (stateless)"]


def topics_of(sf: StatementFile, plan: Any, catalog: Catalog) -> list[str]:
    """Kafka topics a statement reads and writes, with partition counts."""
    if plan.kind != "query":
        return []
    out = []
    for t in sorted(plan.pipeline.types()):
        n = sf.partitions
        out.append(f"in  {sf.topic_of(t)} ({n} partition{'s' if n != 1 else ''})")
    if plan.context is not None:
        spec = catalog.contexts[plan.context]
        n = (getattr(spec, "granularity", None)
             or (sf.raw.get("context_partitions") or {}).get(plan.context) or sf.partitions)
        out.append(f"via kepl.{sf.app}.repartition.{plan.context} ({n} partition"
                   f"{'s' if n != 1 else ''})")
    elif not is_stateless(plan):
        out.append(f"via kepl.{sf.app}.repartition.global (1 partition)")
    stmt = next(s for s in sf.statements if s.name == plan.name)
    out.append(f"out {sf.output_topic(stmt)}")
    return out


def is_stateless(plan: Any) -> bool:
    """A filter/projection with no window, aggregate, pattern or output limit."""
    p = plan.pipeline
    return (p.stream is not None and p.stream.view is None and p.pattern is None
            and p.resultset.kind == "simple" and not p.output.limited)
