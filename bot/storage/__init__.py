"""Storage plumbing shared by the stores that replicas share: the PostgreSQL connection."""
