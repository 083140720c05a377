"""Size derived-value window (Esper ref. 14.4.1): the number of events, posted when it changes."""

from __future__ import annotations

from typing import Any

from operators.base import Row
from operators.derived.base import DerivedView


class SizeView(DerivedView):
    """Counts insert minus remove stream rows; posts only when the count changes."""

    # Esper ref. 14.4.1: 'The window only posts output events when the size count changes'.
    post_only_on_change = True

    def initial(self) -> list[Any]:
        """[size]."""
        return [0]

    def enter(self, row: Row) -> None:
        """One more event."""
        self.acc[0] += 1

    def leave(self, row: Row) -> None:
        """One event less."""
        self.acc[0] -= 1

    def stats(self) -> dict[str, Any]:
        """{size}."""
        return {"size": self.acc[0]}
