"""Settings: the pydantic model of config.yaml, loading, live reload and comment-preserving edits."""
