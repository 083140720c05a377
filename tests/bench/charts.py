"""PNG charts of the benchmark tables (``make bench``, ``make bench-kafka``), for
docs/testing.md.  matplotlib comes with the ``bench`` extra (``pip install
'kepl[bench]'``); without it the scripts print their tables only and say so."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / "docs" / "img"
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3")


def _pyplot():  # noqa: ANN202 - matplotlib's module, or None
    try:
        import matplotlib
    except ModuleNotFoundError:
        print("charts: matplotlib is not installed (pip install 'kepl[bench]'): tables only",
              file=sys.stderr)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bars(path: Path, title: str, labels: Sequence[str], series: dict[str, Sequence[float]],
         unit: str, note: str = "") -> Path | None:
    """Horizontal bars, one group per label and one bar per series (NaN: no bar)."""
    plt = _pyplot()
    if plt is None:
        return None
    n, k = len(labels), len(series)
    height = 0.8 / k
    fig, ax = plt.subplots(figsize=(9, 0.45 * n * max(1, k * 0.7) + 1.4), dpi=72)
    for i, (name, values) in enumerate(series.items()):
        ys = [j + (i - (k - 1) / 2) * height for j in range(n)]
        drawn = ax.barh(ys, [0 if v != v else v for v in values], height=height * 0.95,
                        label=name, color=COLOURS[i % len(COLOURS)])
        ax.bar_label(drawn, labels=["" if v != v else f"{v:,.0f}" if v >= 100
                                    else f"{v:,.1f}" for v in values],
                     padding=3, fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=11)
    ax.margins(x=0.15)
    ax.grid(axis="x", alpha=0.3)
    if k > 1:
        ax.legend(fontsize=8, loc="lower right")
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    print(f"chart: {path}", file=sys.stderr)
    return path
