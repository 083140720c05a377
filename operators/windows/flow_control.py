"""Flow-control keywords of the time batch windows (Esper ref. 14.3.5, 14.3.7)."""

from __future__ import annotations

from dataclasses import dataclass

KEYWORDS = ("FORCE_UPDATE", "START_EAGER")


@dataclass(frozen=True)
class FlowControl:
    """FORCE_UPDATE posts empty intervals; START_EAGER starts the intervals at creation.

    Esper ref. 14.3.5: START_EAGER posts 'empty result sets even before the first event arrives
    ... As when using FORCE_UPDATE, the window also posts an empty result set ... if there
    is no data to post for an interval' -- so START_EAGER implies FORCE_UPDATE's posting.
    """

    force_update: bool = False
    start_eager: bool = False

    @property
    def force(self) -> bool:
        """Whether empty intervals are posted."""
        return self.force_update or self.start_eager

    @classmethod
    def parse(cls, text: str) -> FlowControl:
        """Parse ``"FORCE_UPDATE, START_EAGER"`` (case-insensitive); unknown words raise."""
        words = [w.strip().upper() for w in text.split(",") if w.strip()]
        for w in words:
            if w not in KEYWORDS:
                raise ValueError(
                    f"unknown flow control keyword '{w}' (expected FORCE_UPDATE or START_EAGER)"
                )
        return cls("FORCE_UPDATE" in words, "START_EAGER" in words)

    def describe(self) -> str:
        """The keywords as written."""
        return ", ".join(
            k for k, on in zip(KEYWORDS, (self.force_update, self.start_eager), strict=True) if on
        )
