"""Reading input, one pipeline: inspect the inputs once into a plan (`plan.py`), read each file
through its format's row in one table (`table.py`), count the plan on local threads
(`counting.py`) or on Dask (`cluster.py`). A format is one module here that defines its row as
`FORMAT`, and one name in `table.FORMATS` (docs/INGEST.md says how to add one).

Only the table is imported here: the format modules and the plan read files through `formats.py`,
which itself asks the table, so they load when first asked for.
"""

from .table import FORMATS, InputFormat, format_row, known_formats, register_format

__all__ = ["FORMATS", "InputFormat", "format_row", "known_formats", "register_format"]
