"""The commands: each `main` behind a console script, and what they share."""
