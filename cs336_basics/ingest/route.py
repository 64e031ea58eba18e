"""The input route, decided here and nowhere else: how a run's inputs are counted.

    plan = as_plan(paths, format, text_field)        # every input inspected once (plan.py)
    way = route(plan, cluster)                       # Route.VERSION, Route.HERE or Route.CLUSTER
    counts = count_inputs(plan, special_tokens, cluster=cluster, ...)   # HERE or CLUSTER

One local plain-text file is read by the trainer version itself (`Route.VERSION`: its own
`pretokenize_and_count`, bpe_v3's processes, bpe_v7's memory-mapped counter); everything else is
counted first, on this machine (`Route.HERE`: `counting.count_plan`) or on a Dask cluster
(`Route.CLUSTER`: `cluster.count_words_on_cluster`), and the version merges the counts. The driver
(`trainers.train`, through `counted.counted_input`) and the training command both ask `route`;
`count_inputs` counts by it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import TYPE_CHECKING

from ..rules.contract import BPEInputError
from ..rules.pattern import Pattern, resolve_pattern
from ..rules.presets import TrainingRules, refuse_by_lines, resolve_unicode
from .plan import InputPlan, as_plan
from .sources import is_url
from .table import row_of

if TYPE_CHECKING:
    from .word_counts import WordCounts


class Route(Enum):
    """How the inputs are counted."""

    VERSION = "the trainer version reads the one local text file itself"
    HERE = "counted first, on this machine"
    CLUSTER = "counted first, on a Dask cluster"


def route(plan: InputPlan, cluster: str | None = None, rules: TrainingRules | None = None) -> Route:
    """The route of a plan: on `cluster` when one is named; a version's own reading for one local
    plain-text file (random access, no decompression); else counted here, streamed or by byte ranges.
    `rules` that read the file line by line (like='hf-files', as HF's `train(files)`) take only a
    version's own reading: any other route is refused, saying what the inputs are."""
    if cluster is not None:
        way = Route.CLUSTER
    elif len(plan.files) == 1 and plan.in_place and not is_url(plan.files[0].path):
        way = Route.VERSION
    else:
        way = Route.HERE
    if rules is not None and rules.by_lines and way is not Route.VERSION:
        described = inputs_described(plan, cluster)
        refuse_by_lines(rules, described)
    return way


def inputs_described(plan: InputPlan, cluster: str | None = None) -> str:
    """What the inputs are, in a message that says why they take the route they do."""
    if cluster is not None:
        return f"inputs counted on the cluster {cluster}"
    if len(plan.files) > 1:
        return f"{len(plan.files):,} files"
    source = plan.files[0]
    where = "a URL of " if is_url(source.path) else ""
    return f"{source.path} ({where}{row_of(source).describe(source)})"


def count_inputs(
    paths: Iterable[str | os.PathLike] | InputPlan,
    special_tokens: list[str],
    *,
    cluster: str | None = None,
    cluster_timeout: float | None = None,
    num_workers: int | None = None,
    task_bytes: int | None = None,
    progress: bool = False,
    format: str | None = None,
    text_field: str = "text",
    skip_bad_records: bool = False,
    pattern: str | Pattern | None = None,
    unicode: str | None = None,
) -> WordCounts:
    """The inputs' word counts, read as if concatenated: on the Dask cluster `cluster` names
    (`local`, `local:N`, `tcp://...`), else on this machine's threads. Compressed, JSON-lines and
    Parquet inputs (`format`, `text_field`, `skip_bad_records`: see `plan.inspect_input`) are read on
    either. `cluster_timeout`: seconds to reach a scheduler (see `cluster.connect`). Inputs that hold
    no text at all are refused, as an empty text file is: what every command and `train` count goes
    through. `pattern`: the pre-tokenizer (`pattern.py`; None: GPT-2's), `unicode` the Unicode version
    of its classes (`presets.resolve_unicode`: the pattern's own, else the installed `regex`'s).
    `paths` may be a plan of inputs already inspected (`plan.plan_inputs`): then `format`,
    `text_field` and `skip_bad_records` are the plan's."""
    return count_plan_by_route(
        as_plan(paths, format, text_field, skip_bad_records=skip_bad_records),
        special_tokens,
        cluster=cluster,
        cluster_timeout=cluster_timeout,
        num_workers=num_workers,
        task_bytes=task_bytes,
        progress=progress,
        pattern=resolve_unicode(resolve_pattern(pattern), unicode),
    )


def count_plan_by_route(
    plan: InputPlan,
    special_tokens: list[str],
    *,
    cluster: str | None = None,
    cluster_timeout: float | None = None,
    num_workers: int | None = None,
    task_bytes: int | None = None,
    progress: bool = False,
    pattern: str | Pattern | None = None,
) -> WordCounts:
    """`count_inputs` of inputs already inspected into a plan (once, upstream: a bad input is refused
    before a cluster is started), on `cluster` or here; inputs without text refused."""
    if cluster is not None:
        from .cluster import connect, count_plan_on_cluster

        with connect(cluster, timeout=cluster_timeout) as client:
            counts = count_plan_on_cluster(
                client, plan, special_tokens, task_bytes=task_bytes, progress=progress, pattern=pattern
            )
    else:
        from .counting import LOCAL_TASK_BYTES, count_plan

        counts = count_plan(
            plan,
            special_tokens,
            num_workers=num_workers,
            task_bytes=task_bytes or LOCAL_TASK_BYTES,
            progress=progress,
            pattern=pattern,
        )
    if not counts.source_bytes:
        raise BPEInputError(no_text_message(plan.paths, counts.skipped_records))
    return counts


def no_text_message(paths: Sequence[str], skipped_records: int = 0) -> str:
    """Inputs that hold no text: an empty file, blank lines only, a Parquet file of no rows, records
    all skipped. Training on them would make a vocabulary of bytes alone, silently."""
    if len(paths) == 1:
        named = f"training file holds no text: {paths[0]}"
    else:
        shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3:,} more" if len(paths) > 3 else "")
        named = f"the {len(paths):,} training files hold no text: {shown}"
    if skipped_records:
        records = "record" if skipped_records == 1 else "records"
        return f"{named} (every record was skipped: {skipped_records:,} bad {records})"
    return f"{named} (empty, blank lines only, or no rows)"
