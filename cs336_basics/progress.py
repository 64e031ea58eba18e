"""Progress display, in one place. Work reports itself through an `advance(n)` callable (`phases.Advance`:
n more bytes counted, merges made, documents read); whoever runs it for a person turns that into a
bar here, and nothing else in the package draws one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tqdm import tqdm

from .phases import Advance, ignore_progress


@contextmanager
def progress_bar(
    shown: bool, total: int | None, description: str, unit: str, **bar_options: object
) -> Iterator[Advance]:
    """A tqdm bar's `update` as the `advance` (`total` None: no end known), or one that ignores
    everything when the bar is not `shown`."""
    if not shown:
        yield ignore_progress
        return
    with tqdm(total=total, desc=description, unit=unit, **bar_options) as bar:
        yield bar.update
