"""Reading and counting, one pipeline: inspect the inputs once into a plan (`plan.py`), choose once
how it is counted (`route.py`: by the trainer version itself, on this machine or on Dask), read each
file through its format's row in one table (`table.py`, files opened and decompressed by
`sources.py`), count the plan on local threads (`counting.py`) or on Dask (`cluster.py`) into
`WordCounts` (`word_counts.py`). The driver asks one entry, `counted.counted_input`: the route,
the counts (one local text file read by the version itself: `in_place.py`) and the notes on them.
A format is one module here that defines its row as `FORMAT`, and one name in `table.FORMATS`
(docs/INGEST.md says how to add one).

Only the table (with `sources.py`, whose files its rows read) is imported here: every other stage
loads when first asked for.
"""

from .table import FORMATS, InputFormat, format_row, known_formats, register_format

__all__ = ["FORMATS", "InputFormat", "format_row", "known_formats", "register_format"]
