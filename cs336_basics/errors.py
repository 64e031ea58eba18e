"""The one error a user's bad input raises. A leaf: every module may import it, it imports nothing."""

from __future__ import annotations


class BPEInputError(ValueError):
    """Bad input to training or tokenization; the message says what is wrong and what to do."""
