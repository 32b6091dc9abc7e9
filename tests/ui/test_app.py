"""The Gradio app through gradio_client, on a free loopback port."""

from __future__ import annotations

import json

import gradio as gr
import httpx
import pytest

from bot.config.variants import replace
from bot.factory import build_bot, build_knowledge_base
from bot.ui.app import build_demo
from bot.ui.render import html_text
from tests.support.knowledge import TINY
from tests.support.ports import free_port
from tests.support.serving import launched

pytestmark = pytest.mark.e2e


def test_chat_answers_with_source_and_escapes_html(app_client, kb_dir):
    client, _bot = app_client
    history, box, sources, header, _ = client.predict("怎么添加知识？", [], "sparse", api_name="/chat")
    # the box was emptied by the turn's first output; the last one (sent again as the event completes) leaves it
    assert box == {"__type__": "update"} and "`sparse`" in header and "this session's choice" in header
    reply = history[-1]["content"]
    reply = reply if isinstance(reply, str) else "".join(p.get("text", "") for p in reply)
    assert "仅检索模式" in reply and "knowledge 文件夹" in reply
    assert "怎么添加知识？" in sources and "direct" in sources
    # The panel shows the relevance the threshold compares, then the signals behind it.
    assert "sparse ≥ 0.5" in sources and "相关度 / Relevance" in sources
    assert "<b>1.000</b> <span class='kb-band kb-band-high'>高 / high</span> <small>(BM25 " in sources
    assert "覆盖 coverage 1 · " in sources and "conflict 0" in sources  # the agreement signals follow


def test_off_topic_gets_last_resort(app_client):
    client, _ = app_client
    _, _, sources, *_ = client.predict("火星上有几座城市", [], "sparse", api_name="/chat")
    assert "last resort" in sources


def test_knowledge_html_is_rendered_escaped(app_client, kb_dir):
    import json

    client, bot = app_client
    bot.index.check_interval = 0
    (kb_dir / "xss.json").write_text(
        json.dumps(
            {
                "x": {
                    "query": "脚本注入测试<script>alert(1)</script>",
                    "document": "<img src=x onerror=alert(1)>危险内容",
                    "metadata": "脚本注入",
                }
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    history, _, sources, *_ = client.predict("脚本注入测试", [], "sparse", api_name="/chat")
    assert "<script>" not in sources and "&lt;script&gt;" in sources
    reply = history[-1]["content"]
    reply = reply if isinstance(reply, str) else "".join(p.get("text", "") for p in reply)
    assert "<img" not in reply and "&lt;img" in reply


def test_header_shows_mode_and_retrieval_only(settings):
    from bot.ui.app import ChatHandlers

    header = ChatHandlers(build_knowledge_base(settings), settings).header("sparse")
    assert "`sparse`" in header and "Retrieval-only" in header and "6 entries loaded" in header


def test_app_binds_loopback_by_default():
    import app

    args = app.parse_args([])
    assert args.host is None and not args.share
    from bot.config.settings import load_settings
    from tests.support.knowledge import ROOT

    assert load_settings(ROOT / "config.yaml").ui.host == "127.0.0.1"


def reply_text(history) -> str:
    content = history[-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def test_retrieval_tab_shows_every_mode_with_pass_marks(app_client):
    client, bot = app_client
    html_out = client.predict("怎么添加知识", api_name="/retrieval_test")
    for mode in bot.index.modes:
        assert (
            f"<h4 class='kb-mode'>{mode} · 阈值 / threshold {bot.search.mode_thresholds(mode).describe()}</h4>"
            in html_out
        )
    assert "sparse ≥ 0.5" in html_out and f"{bot.index.searcher('hybrid').system} ≥" in html_out
    sparse_table = html_out.split("<h4 class='kb-mode'>sparse")[1].split("<h4")[0]
    assert "<td>1</td><td>✓</td><td><b>1.000</b>" in sparse_table and "<td>✗</td>" in sparse_table


def test_knowledge_tab_add_is_answered_at_once_and_saved_to_disk(app_client, kb_dir, settings):
    client, _bot = app_client
    status, *_ = client.predict(
        "faq.json", "", "停车场怎么收费？", "校内停车每小时五元。", "停车,收费", api_name="/save_entry"
    )
    assert "faq:1" in status and "index updated" in status
    # A second new entry in a row is added next to the first, never over it.
    status, *_ = client.predict("faq.json", "", "自行车停哪里？", "自行车停在车棚。", "自行车", api_name="/save_entry")
    assert "Added faq:2" in status
    on_disk = json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
    assert list(on_disk)[: len(TINY)] == list(TINY) and on_disk["1"]["query"] == "停车场怎么收费？"
    assert on_disk["2"]["query"] == "自行车停哪里？"
    history, _, sources, *_ = client.predict("停车场怎么收费", [], "sparse", api_name="/chat")
    assert "每小时五元" in reply_text(history) and "停车场怎么收费？" in sources
    # A restarted app (new index over the same folders) still has it.
    again = build_bot(settings)
    assert again.search.retrieve("停车场怎么收费")[1][0].entry.id == "faq:1"


def test_knowledge_tab_rejects_invalid_entry_inline(app_client, kb_dir):
    client, _ = app_client
    before = (kb_dir / "faq.json").read_text(encoding="utf-8")
    status, *_ = client.predict("faq.json", "bad", "  ", "内容", "", api_name="/save_entry")
    assert "Not saved" in status and "&#x27;bad&#x27;" in status and "&#x27;query&#x27; is empty" in status
    assert (kb_dir / "faq.json").read_text(encoding="utf-8") == before


def test_knowledge_tab_edit_and_delete(app_client, kb_dir):
    client, bot = app_client
    # Without loading it first, a save under an existing key is a new entry: refused, nothing overwritten.
    status, *_ = client.predict("faq.json", "canteen", "食堂在哪里？", "覆盖！", "食堂", api_name="/save_entry")
    assert "该条目已存在" in status and "Nothing was written" in status
    status, *_ = client.predict(api_name="/delete_entry")
    assert "No entry is loaded" in status and "canteen" in json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
    assert client.predict("faq.json", "canteen", api_name="/entry")[0] == "食堂在哪里？"
    client.predict("faq.json", "canteen", "食堂在哪里？", "学生食堂搬到了校园西区。", "食堂", api_name="/save_entry")
    assert bot.retrieve("食堂在哪里")[1][0].entry.document == "学生食堂搬到了校园西区。"
    status, *_ = client.predict(api_name="/delete_entry")
    assert "Deleted faq:canteen" in status
    assert "canteen" not in json.loads((kb_dir / "faq.json").read_text(encoding="utf-8"))
    assert all(h.entry.id != "faq:canteen" for h in bot.retrieve("食堂在哪里")[0])


def test_knowledge_tab_upload(app_client, kb_dir, tmp_path):
    from gradio_client import handle_file

    client, bot = app_client
    upload = tmp_path / "campus.json"
    upload.write_text(
        json.dumps(
            {"gym": {"query": "体育馆几点关门？", "document": "体育馆晚上九点关门。", "metadata": "体育馆"}},
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    status, _ = client.predict(handle_file(str(upload)), False, api_name="/upload_file")
    assert "Imported campus.json: 1 entries" in status and (kb_dir / "campus.json").is_file()
    assert bot.retrieve("体育馆几点关门")[1][0].entry.id == "campus:gym"
    bad = tmp_path / "broken.json"
    bad.write_text('{"x": {"query": "q",', encoding="utf-8")
    status, _ = client.predict(handle_file(str(bad)), False, api_name="/upload_file")
    assert "invalid JSON at line 1" in status and not (kb_dir / "broken.json").exists()


def test_retry_and_undo(app_client):
    client, _ = app_client
    history, *_ = client.predict("怎么添加知识？", [], "sparse", api_name="/chat")
    retried, _, sources, *_ = client.predict(history, "sparse", api_name="/retry")
    assert len(retried) == 2 and "怎么添加知识？" in sources
    undone, box, _ = client.predict(retried, api_name="/undo")
    assert undone == [] and box == "怎么添加知识？"


def test_rate_limit_per_client_address_not_per_session(settings):
    """Fresh sessions from one address share its limit (a script renews sessions at will); another address does not."""
    import gradio as gr
    from gradio_client import Client

    from bot.ui.app import ChatHandlers

    settings = replace(settings, "limits.chat_per_minute", 2)
    bot = build_bot(settings)
    demo = build_demo(build_knowledge_base(settings, bot), settings).queue()
    base = launched(demo)
    try:
        replies = [
            reply_text(Client(f"{base}/", verbose=False).predict("怎么添加知识？", [], "sparse", api_name="/chat")[0])
            for _ in range(3)
        ]  # a new client (session) each
        assert "Too many messages" not in replies[1] and "Too many messages" in replies[2]
    finally:
        demo.close()
    handlers = ChatHandlers(build_knowledge_base(settings, bot), settings)

    def ask(host):
        request = gr.Request(session_hash=f"s-{host}", client={"host": host})  # as Gradio's queue builds one
        return list(handlers.chat("怎么添加知识？", [], "sparse", request=request))[-1][0][-1]["content"]

    assert ["Too many" in ask("10.0.0.1") for _ in range(3)] == [False, False, True]
    assert "Too many" not in ask("10.0.0.2")


def test_deprecated_ui_rate_limit_still_wins(settings):
    from bot.serving.ratelimit import chat_per_minute

    assert chat_per_minute(settings) == settings.limits.chat_per_minute == 20
    settings = replace(settings, "ui.rate_limit_per_minute", 0)
    assert chat_per_minute(settings) == 0


def test_login_required_when_enabled(tmp_path, monkeypatch):
    import subprocess
    import sys
    import urllib.request

    import yaml

    from tests.support.knowledge import ROOT, config_dict, write_knowledge

    write_knowledge(tmp_path / "knowledge", TINY)
    raw = config_dict(tmp_path, tmp_path / "knowledge")
    raw["ui"]["auth"]["enabled"] = True
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("KBBOT_")}
    missing = subprocess.run(
        [sys.executable, "app.py", "--config", str(cfg)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2 and "KBBOT_USERNAME" in missing.stderr and "KBBOT_PASSWORD" in missing.stderr
    port = free_port()
    env.update(KBBOT_USERNAME="alice", KBBOT_PASSWORD="s3cret-pass")
    proc = subprocess.Popen(
        [sys.executable, "app.py", "--config", str(cfg), "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import time

        for _ in range(300):
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=1)
                break
            except urllib.error.HTTPError as err:
                page = err
                break
            except OSError:
                time.sleep(0.3)
        assert isinstance(page, urllib.error.HTTPError) and page.code == 401
        import http.cookiejar
        import urllib.parse

        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

        def login(password):
            data = urllib.parse.urlencode({"username": "alice", "password": password}).encode()
            try:
                return opener.open(f"http://127.0.0.1:{port}/login", data=data, timeout=5).status
            except urllib.error.HTTPError as err:
                return err.code

        assert login("wrong") >= 400
        assert login("s3cret-pass") == 200
        config = opener.open(f"http://127.0.0.1:{port}/config", timeout=5).read().decode()
        assert "s3cret-pass" not in config and "kb-chat" in config
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_only_a_turns_first_output_empties_the_input_box(settings):
    from bot.ui.app import ChatHandlers

    handlers = ChatHandlers(build_knowledge_base(settings, build_bot(settings)), settings)
    first, *rest = list(handlers.chat("怎么添加知识？", [{"role": "user", "content": "你好"}]))
    assert first[1] == "" and first[0][-1]["content"] == "怎么添加知识？"  # the question shows at once
    # main: a retrieval-only turn had one output, with the empty box, which the page applied twice
    assert rest and all(out[1] == gr.skip() for out in rest)
    assert "knowledge 文件夹" in str(rest[-1][0][-1]["content"])


def test_unexpected_failure_costs_one_answer_not_the_session(settings, caplog, monkeypatch):
    from bot.texts import INTERNAL_ERROR
    from bot.ui.app import ChatHandlers

    bot = build_bot(settings)
    handlers = ChatHandlers(build_knowledge_base(settings, bot), settings)

    def broken(*args, **kwargs):
        raise RuntimeError("boom")
        yield  # pragma: no cover

    monkeypatch.setattr(bot, "stream", broken)
    history, _box, *_ = list(handlers.chat("怎么添加知识？", []))[-1]
    assert history[-1]["content"] == INTERNAL_ERROR and "boom" not in INTERNAL_ERROR
    assert any("chat turn failed" in r.getMessage() for r in caplog.records)


def test_python_m_bot_serve_starts_the_same_server(app_config, tmp_path):
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    from tests.support.browser import offline_env
    from tests.support.knowledge import ROOT

    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--config", str(app_config), "--port", str(port)],
            cwd=ROOT,
            env=offline_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline, page = time.time() + 90, None
            while time.time() < deadline and page is None:
                assert proc.poll() is None, log.read_text()[-2000:]
                try:
                    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read().decode()
                except OSError:
                    time.sleep(0.3)
            assert page is not None and "gradio" in page.lower()
            with pytest.raises(urllib.error.HTTPError) as refused:  # the API is there, locked without a token
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5)
            assert refused.value.code == 401
            # the documented INFO lines are written (the CLI's WARNING level does not hold for the server)
            assert "INFO bot.factory: no OPENAI_API_KEY in the environment" in log.read_text()
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def test_loading_faiss_writes_no_loader_lines_at_info():
    import subprocess
    import sys

    from tests.support.knowledge import ROOT

    script = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "from bot.search.faiss_files import _import_faiss; _import_faiss(); logging.getLogger('bot').info('ready')"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "INFO:bot:ready" in done.stderr, done.stderr
    assert "faiss.loader" not in done.stderr  # "Could not load library with AVX512 support" read as an error


def test_the_admin_login_without_its_variables_says_which_to_set(settings, serve_api, monkeypatch):
    monkeypatch.delenv(settings.ui.admin.username_env, raising=False)
    monkeypatch.delenv(settings.ui.admin.password_env, raising=False)
    base = serve_api(settings).removesuffix("/v1")
    for response in (
        httpx.get(base + "/admin/login", timeout=30),
        httpx.post(base + "/admin/login", data={"username": "admin", "password": "guess"}, timeout=30),
    ):
        assert response.status_code == 404 and response.headers["content-type"].startswith("text/html")
        assert "KBBOT_ADMIN_USER" in response.text and "KBBOT_ADMIN_PASSWORD" in response.text, response.text
        assert "kbbot_admin" not in response.cookies


def test_a_rule_answers_on_the_page_with_the_web_variant_and_the_sources_say_rule(app_client, kb_dir):
    from tests.support.knowledge import write_knowledge

    client, bot = app_client
    bot.index.check_interval = 0
    canteen = {**TINY["canteen"], "variants": {"web": "网页版：东区食堂，11 点开饭", "wecom": "企业微信版"}}
    write_knowledge(kb_dir, {**TINY, "canteen": canteen})
    (kb_dir / "rules.yaml").write_text("- contains: 开饭\n  entry: faq:canteen\n", encoding="utf-8")
    history, _, sources, *_ = client.predict("几点开饭？", [], "sparse", api_name="/chat")
    reply = history[-1]["content"]
    reply = reply if isinstance(reply, str) else "".join(p.get("text", "") for p in reply)
    assert html_text(reply) == "网页版：东区食堂，11 点开饭"  # the answer's Markdown, rendered
    assert "精确匹配规则 / rule" in sources and "rules.yaml 第 1 行 / line 1" in sources
    assert "<code>开饭</code> → faq:canteen" in sources
