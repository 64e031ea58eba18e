"""One list of trainers for every test; versions that cannot run here are skipped with the reason.
Shared paths and helpers live in tests/support.py. This file is at the root, not in tests/, so that
the CS336 handout's own tests/conftest.py can be copied in beside our tests
(scripts/add_handout_tests.py).

Two tiers. `python -m pytest` runs every test (each trainer, format, export and fault family) with
at most DEFAULT_TIER_EXAMPLES examples per hypothesis test and the first DEFAULT_TIER_SEEDS seeds of a
test parametrized over `seed`, runs a trainer test's other parameters as a covering set (every
version and every value of each parameter at least once, not every combination), and skips the tests
marked `exhaustive` (sweeps, big corpora, builds of the installed package, and every wall-clock
limit: the assignment's 1.5 s on corpus.en, so the default tier passes on a busy machine). `python
-m pytest --exhaustive` runs everything with every example and seed each test asks for; CI runs
that. A new test is in the default tier unless marked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cs336_basics import TRAINERS, trainer_status
from tests.support import FIXTURES

_STATUS = trainer_status()
EXHAUSTIVE = "--exhaustive"
# Enough for every strategy to reach its edge cases (hypothesis tries the simplest inputs first, and
# each @example always runs); --exhaustive runs each test's own max_examples.
DEFAULT_TIER_EXAMPLES = 10
DEFAULT_TIER_SEEDS = 5


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        EXHAUSTIVE,
        action="store_true",
        help="also run the exhaustive tier (long fuzzing, sweeps, big corpora, the installed package), "
        "with every hypothesis example each test asks for; CI runs it",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"exhaustive: runs only with {EXHAUSTIVE} (too long for the default tier)")


def pytest_report_header(config: pytest.Config) -> str:
    if config.getoption(EXHAUSTIVE):
        return "tier: exhaustive (every test, every hypothesis example)"
    return (
        f"tier: default (hypothesis tests run at most {DEFAULT_TIER_EXAMPLES} examples, seeded fuzz its first "
        f"{DEFAULT_TIER_SEEDS} seeds, tests marked exhaustive are skipped; {EXHAUSTIVE} runs everything)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption(EXHAUSTIVE):
        return
    skip = pytest.mark.skip(reason=f"exhaustive tier: run with {EXHAUSTIVE}")
    later_seed = pytest.mark.skip(reason=f"exhaustive tier: seeds from {DEFAULT_TIER_SEEDS} on run with {EXHAUSTIVE}")
    uncovered = pytest.mark.skip(
        reason=f"exhaustive tier: the default tier runs each version and each parameter value once; every "
        f"combination with {EXHAUSTIVE}"
    )
    capped: set[int] = set()
    covering = _covering_items(items)
    for item in items:
        if item.get_closest_marker("exhaustive"):
            item.add_marker(skip)
        elif _is_a_later_seed(item):
            item.add_marker(later_seed)
        elif id(item) not in covering:
            item.add_marker(uncovered)
        elif id(function := getattr(item, "function", None)) not in capped:
            capped.add(id(function))
            _cap_hypothesis_examples(function)


def _covering_items(items: list[pytest.Item]) -> set[int]:
    """The items the default tier keeps (by id): all of them, except for a test parametrized over the
    trainer and something more, where a greedy cover keeps the fewest items that still run every
    version and every value of every other parameter (so the oracle, the slowest, runs once, not once
    per combination). Versions that cannot run here cover nothing, so a value they would have carried
    goes to one that runs."""
    by_test: dict[object, list[pytest.Item]] = {}
    kept: set[int] = set()
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = {k: v for k, v in callspec.params.items() if k != "seed"} if callspec is not None else {}
        if "trainer" in params and len(params) > 1:
            by_test.setdefault(getattr(item, "function", None), []).append(item)
        else:
            kept.add(id(item))
    for group in by_test.values():
        values = {id(item): _parameter_values(item) for item in group}
        missing = set().union(*values.values())
        while missing:
            # From the end: the compiled versions, listed last, take the later (larger) values first.
            best = max(reversed(group), key=lambda item: len(values[id(item)] & missing))
            if not values[id(best)] & missing:
                break
            kept.add(id(best))
            missing -= values[id(best)]
        kept.update(id(item) for item in group if not values[id(item)])
    return kept


def _parameter_values(item: pytest.Item) -> set[tuple[str, str]]:
    """(parameter, value) pairs an item runs with, none if its trainer cannot run here."""
    params = item.callspec.params  # type: ignore[attr-defined]
    if not _STATUS[params["trainer"]].available:
        return set()
    return {(name, repr(value)) for name, value in params.items() if name != "seed"}


def _is_a_later_seed(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    seed = callspec.params.get("seed") if callspec is not None else None
    return isinstance(seed, int) and seed >= DEFAULT_TIER_SEEDS


def _cap_hypothesis_examples(test: object) -> None:
    """Run at most DEFAULT_TIER_EXAMPLES examples of a @given test. Hypothesis has no public way to
    lower the max_examples an @settings decorator set, so this replaces the settings it keeps on the
    test; a hypothesis without that attribute leaves the test as it is (slower, never wrong)."""
    chosen = getattr(test, "_hypothesis_internal_use_settings", None)
    if not getattr(test, "is_hypothesis_test", False) or chosen is None:
        return
    if chosen.max_examples > DEFAULT_TIER_EXAMPLES:
        from hypothesis import settings

        test._hypothesis_internal_use_settings = settings(chosen, max_examples=DEFAULT_TIER_EXAMPLES)


@pytest.fixture(params=TRAINERS)
def trainer(request: pytest.FixtureRequest) -> str:
    """Every registered trainer version; compiled ones that are not built are skipped, with why."""
    status = _STATUS[request.param]
    if not status.available:
        pytest.skip(status.reason)
    return request.param


@pytest.fixture
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"fixtures directory {FIXTURES} not found (set CS336_FIXTURES)")
    return FIXTURES
