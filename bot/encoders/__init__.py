"""Sentence encoders for dense retrieval: fastText (trained on the knowledge, or pretrained) and OpenAI embeddings."""

from bot.encoders.base import DENSE_HINT, Encoder, normalize_rows
from bot.encoders.fasttext_encoder import MODEL_FILE, MODEL_STATE, PRETRAINED_KEY, FastTextEncoder
from bot.encoders.fasttext_training import FastTextParams
from bot.encoders.openai_encoder import OpenAIEncoder

__all__ = ["DENSE_HINT", "Encoder", "FastTextEncoder", "FastTextParams", "MODEL_FILE", "MODEL_STATE",
           "OpenAIEncoder", "PRETRAINED_KEY", "normalize_rows"]
