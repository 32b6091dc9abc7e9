"""One way to talk to an OpenAI-compatible server (the chat LLM, an embeddings endpoint): the client, and what
its errors mean for the person who configured it.

Both roles use the same client settings (the openai SDK retries 408/409/429/5xx and timeouts itself, with
exponential backoff and jitter) and the same advice per failure, naming the config block and the environment
variable to check; the caller wraps the advice in its own error type (LLMError for chat, SearchBackendError for
embeddings).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import openai


@dataclass(frozen=True)
class Endpoint:
    """Where a role's server is and how it is configured: for the client and for the advice in its errors."""

    base_url: str
    model: str
    timeout: float
    max_retries: int
    key_env: str  # the environment variable holding the key
    config: str  # the config block that sets it, e.g. "llm" or "retrieval.dense.openai"

    def where(self) -> str:
        """The server and model, as errors name them."""
        return f"{self.base_url} (model {self.model})"


def openai_client(endpoint: Endpoint, api_key: str) -> openai.OpenAI:
    """The SDK client for ``endpoint`` (its own retries and timeout)."""
    import openai

    return openai.OpenAI(
        base_url=endpoint.base_url, api_key=api_key, timeout=endpoint.timeout, max_retries=endpoint.max_retries
    )


def is_timeout(exc: BaseException) -> bool:
    """True when ``exc`` is the SDK's timeout (the caller may have its own error type for it)."""
    import openai

    return isinstance(exc, openai.APITimeoutError)


# What each SDK error means, most specific first: {where} is the role and server, {cfg} its config block, {env}
# the key's environment variable, {timeout} and {status} the request's.
ADVICE: tuple[tuple[str, str], ...] = (
    (
        "APITimeoutError",
        "{where} did not answer within {timeout}s; raise {cfg}.timeout in config.yaml or check the server's load",
    ),
    ("AuthenticationError", "{where} rejected the API key (401); check the {env} environment variable"),
    ("PermissionDeniedError", "{where} refused access (403); check that the key in {env} may use this model"),
    ("NotFoundError", "{where} answered 404; check {cfg}.model and {cfg}.base_url (it usually ends in /v1)"),
    ("RateLimitError", "{where} is rate limiting (429) even after retries; wait, or raise {cfg}.max_retries"),
    ("APIStatusError", "{where} failed with HTTP {status} after retries; check the server's logs"),
    ("APIConnectionError", "cannot connect to {where}; is the server running and {cfg}.base_url right?"),
)


def advice(exc: BaseException, endpoint: Endpoint, role: str) -> str:
    """What a failed request to ``endpoint`` means and what to check, without the key; ``role`` is e.g. "the LLM"."""
    import openai

    where = f"{role} at {endpoint.where()}"
    for name, template in ADVICE:
        if isinstance(exc, getattr(openai, name)):
            return template.format(
                where=where,
                cfg=endpoint.config,
                env=endpoint.key_env,
                timeout=f"{endpoint.timeout:g}",
                status=getattr(exc, "status_code", "?"),
            )
    return f"{where} failed: {type(exc).__name__}: {exc}"
