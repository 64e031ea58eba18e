"""What defines a run's result: the contract, patterns, tie-breaks, limits, presets, bases."""
