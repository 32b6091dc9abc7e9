"""Sentence encoders for dense retrieval: fastText, e5 (in process, offline) and OpenAI-compatible embeddings."""

from bot.search.encoders.base import DENSE_HINT, DOCUMENT, QUESTION, Encoder, has_words, normalize_rows
from bot.search.encoders.cache import CACHE_FILE, EmbeddingCache, cache_key
from bot.search.encoders.cached import CachedEncoder
from bot.search.encoders.e5_encoder import E5Encoder
from bot.search.encoders.fasttext_encoder import MODEL_FILE, MODEL_STATE, PRETRAINED_KEY, FastTextEncoder
from bot.search.encoders.fasttext_training import FastTextParams
from bot.search.encoders.openai_encoder import OpenAIEncoder

__all__ = [
    "CACHE_FILE",
    "DENSE_HINT",
    "DOCUMENT",
    "MODEL_FILE",
    "MODEL_STATE",
    "PRETRAINED_KEY",
    "QUESTION",
    "CachedEncoder",
    "E5Encoder",
    "EmbeddingCache",
    "Encoder",
    "FastTextEncoder",
    "FastTextParams",
    "OpenAIEncoder",
    "cache_key",
    "has_words",
    "normalize_rows",
]
