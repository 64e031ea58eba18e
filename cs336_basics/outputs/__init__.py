"""What a run writes: its files, their loading, and the exports for other tools."""
