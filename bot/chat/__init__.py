"""The turn: the Bot down the ladder of rungs, the search it makes, the answer it writes, and what wraps it."""
