"""The conversation log's tables, written once for both backends (SQLite's spelling; PostgreSQL's is derived).

``{unanswered}`` is the inbox's condition (bot/conversations/log_sql.py); the rollup tables are in
bot/conversations/rollup.py.
"""

from __future__ import annotations

SCHEMA_VERSION = 2  # 2: turns.top_relevance and the analytics indexes
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, session TEXT, source TEXT, client TEXT,
    question TEXT NOT NULL, rewritten TEXT, norm TEXT NOT NULL, strategy TEXT NOT NULL, mode TEXT,
    hits TEXT NOT NULL, thresholds TEXT, timings TEXT, latency_ms REAL, llm TEXT, llm_used INTEGER NOT NULL,
    answer TEXT, hypothetical TEXT, notices TEXT, finished INTEGER NOT NULL,
    rating INTEGER, reason TEXT, rated_at TEXT, top_relevance REAL);
CREATE INDEX IF NOT EXISTS turns_time ON turns(time);
CREATE INDEX IF NOT EXISTS turns_session ON turns(session);
DROP INDEX IF EXISTS turns_unanswered;
CREATE INDEX IF NOT EXISTS turns_unanswered_2 ON turns(id) WHERE {unanswered};
CREATE TABLE IF NOT EXISTS used (
    turn_id INTEGER NOT NULL REFERENCES turns(id) ON DELETE CASCADE, entry_id TEXT NOT NULL, time TEXT NOT NULL,
    source TEXT, mode TEXT);
CREATE INDEX IF NOT EXISTS used_entry ON used(entry_id, time);
CREATE INDEX IF NOT EXISTS used_turn ON used(turn_id);
CREATE TABLE IF NOT EXISTS dismissals (norm TEXT PRIMARY KEY, dismissed_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rejected_suggestions (
    norm TEXT NOT NULL, entry_id TEXT NOT NULL, rejected_at TEXT NOT NULL, PRIMARY KEY (norm, entry_id));
"""
# The analytics page (bot/conversations/analytics.py) aggregates a million turns in well under a second only from covering
# indexes: one over the filter columns and what the counts read, one over norm for top and trending questions.
# Created after the migration below, since an older file lacks top_relevance until then.
INDEXES = """
CREATE INDEX IF NOT EXISTS turns_stats ON turns(time, source, mode, strategy, rating, top_relevance);
CREATE INDEX IF NOT EXISTS turns_norm ON turns(norm, time, source, mode);
CREATE INDEX IF NOT EXISTS used_mode ON used(mode, time, entry_id, source);
CREATE INDEX IF NOT EXISTS used_source ON used(source, time, entry_id, mode);
"""
