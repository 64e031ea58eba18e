"""Byte-level BPE training with the exact semantics of Stanford CS336 assignment 1.

    from cs336_bpe import train_bpe
    vocab, merges = train_bpe("data.txt", 10_000, ["<|endoftext|>"])            # fastest version here
    vocab, merges = train_bpe("data.txt", 10_000, ["<|endoftext|>"], trainer="bpe_v1")  # the oracle
    counts = count_words(["a.txt", "b.txt"], ["<|endoftext|>"]); counts.save("counts.bin")  # count once
    vocab, merges = train_bpe_from_counts("counts.bin", 10_000)                  # train from the counts
    ids = Tokenizer(vocab, merges, ["<|endoftext|>"]).encode("Once upon a time<|endoftext|>")

Installed, the package is `cs336_bpe`; from this checkout it is also `cs336_basics`. Both names are
one package in a process (see _identity.py): the same modules, classes and exceptions.
"""

if __name__ == "cs336_basics":
    # The checkout's name: stand for cs336_bpe, bound to this folder (see _identity.py).
    import importlib.util as _util
    import sys as _sys
    from pathlib import Path as _Path

    _spec = _util.spec_from_file_location(
        "_cs336_identity", _Path(__file__).resolve().parent / "_identity.py"
    )
    _identity = _util.module_from_spec(_spec)
    _spec.loader.exec_module(_identity)
    _sys.modules[__name__] = _identity.adopt_canonical_name(__file__)
else:
    # Each public name is imported on first use (PEP 562), so `import cs336_bpe` costs almost nothing
    # and a command loads only the modules it needs.
    import importlib as _importlib
    import importlib.util

    from ._identity import install_moved_modules as _install_moved_modules

    _install_moved_modules()  # old module names (before the subpackages) keep importing, with a warning

    _PUBLIC = {
        "openmp_enabled": "native.backend",
        "BPEInputError": "rules.contract",
        "count_words": "ingest.counting",
        "count_words_from_iterator": "ingest.counting",
        "Tokenizer": "tokenizer",
        "TRAINERS": "trainers",
        "TrainerStatus": "trainers",
        "TrainerUnavailable": "trainers",
        "default_trainer": "trainers",
        "train": "trainers",
        "train_bpe": "trainers",
        "train_bpe_from_counts": "trainers",
        "train_bpe_from_iterator": "trainers",
        "train_from_iterator": "trainers",
        "trainer_status": "trainers",
        "WordCounts": "ingest.word_counts",
    }
    __all__ = sorted(_PUBLIC)

    def __getattr__(name: str):
        module = _PUBLIC.get(name)
        if module is None:
            # `cs336_bpe.trainers` and the like keep working without an import of their own.
            if not name.startswith("_") and _importlib.util.find_spec(f"{__name__}.{name}") is not None:
                return _importlib.import_module(f".{name}", __name__)
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(_importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_PUBLIC))
