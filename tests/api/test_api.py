"""The OpenAI-compatible API, served with the browser app on one free loopback port, through the real openai client."""

from __future__ import annotations

import json
import logging
import threading
import time

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

import app
from bot.config.variants import replace, update
from bot.factory import build_bot
from bot.texts import RATE_LIMITED
from tests.support.knowledge import with_cutoffs, with_thresholds, write_knowledge
from tests.support.serving import TOKEN, ask, client, error_body, kbbot, streamed

pytestmark = pytest.mark.e2e

SMALL_FASTTEXT = {"dim": 32, "epoch": 50, "bucket": 20_000, "sif_a": 1.0}

MODES = ("sparse", "dense", "hybrid")


@pytest.fixture
def sparse_url(settings, serve_api):
    """The app over the tiny knowledge base, sparse mode with a pinned threshold."""
    settings = with_cutoffs(settings, "sparse", 0.5)
    return serve_api(settings)


def test_models_list_one_per_mode_and_the_default(sparse_url):
    models = {m.id: m for m in client(sparse_url).models.list()}
    assert set(models) == {"kbbot", *(f"kbbot-{m}" for m in MODES)}
    assert kbbot(models["kbbot"]) == {"mode": "sparse"} and kbbot(models["kbbot-hybrid"]) == {"mode": "hybrid"}
    assert models["kbbot"].object == "model" and models["kbbot"].owned_by == "kbbot"
    assert kbbot(client(sparse_url).models.retrieve("kbbot-dense")) == {"mode": "dense"}
    with pytest.raises(openai.NotFoundError):
        client(sparse_url).models.retrieve("gpt-4o")


def test_answer_carries_sources_strategy_mode_and_thresholds(sparse_url):
    completion = ask(sparse_url, "怎么添加知识？", temperature=0.2, max_tokens=50)  # sampling options are ignored
    assert completion.object == "chat.completion" and completion.model == "kbbot"
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert "仅检索模式" in choice.message.content and "knowledge 文件夹" in choice.message.content
    extra = completion.kbbot
    assert extra["mode"] == "sparse" and extra["strategy"] == "direct" and not extra["llm_used"]
    assert extra["thresholds"] == {
        "system": "sparse",
        "answer": 0.5,
        "direct": None,
        "clarify": None,
        "confirm": None,
        "unsure": None,
        "stand_in": None,
        "settle": None,
        "settle_dense": None,
        "translated": 0.0,  # the fixture's own cutoffs: a dictionary hit answers as any other
        "contrast": False,
        "together": None,
    }
    assert extra["decision"] == "answer" and extra["options"] == []
    best = extra["sources"][0]
    assert best["id"] == "faq:add" and best["query"] == "怎么添加知识？" and best["searcher"] == "tantivy"
    assert best["relevance"] >= 0.5 and best["score"] > 0 and best["band"] in ("high", "medium")
    off_topic = ask(sparse_url, "火星上有几座城市", model="kbbot-sparse").kbbot
    assert off_topic["strategy"] == "last_resort" and off_topic["sources"] == []


def test_stream_sends_deltas_then_stop_with_sources_then_done(sparse_url):
    chunks, text = streamed(sparse_url, "图书馆开放时间", model="kbbot-sparse")
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert text == ask(sparse_url, "图书馆开放时间", model="kbbot-sparse").choices[0].message.content
    assert chunks[-1].kbbot["sources"][0]["id"] == "faq:library" and chunks[-1].kbbot["mode"] == "sparse"
    # On the wire: SSE events, closed by [DONE].
    raw = httpx.post(
        f"{sparse_url}/chat/completions",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
        json={"model": "kbbot", "stream": True, "messages": [{"role": "user", "content": "食堂在哪里？"}]},
    )
    assert raw.headers["content-type"].startswith("text/event-stream")
    events = [line[6:] for line in raw.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["kbbot"]["sources"][0]["id"] == "faq:canteen"


def test_long_message_is_cut_like_in_the_chat(sparse_url, settings):
    limit = settings.limits.max_message_chars
    extra = ask(sparse_url, "怎么添加知识？" + "啊" * (limit + 500)).kbbot
    assert len(extra["question"]) == limit and "消息过长" in extra["notice"]


def test_token_is_required_and_checked(sparse_url):
    for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer"}):
        r = httpx.get(f"{sparse_url}/models", headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
        assert r.headers["www-authenticate"] == "Bearer"
    with pytest.raises(openai.AuthenticationError) as err:
        client(sparse_url, token="wrong-token").chat.completions.create(
            model="kbbot", messages=[{"role": "user", "content": "怎么添加知识？"}]
        )
    assert err.value.status_code == 401 and error_body(err.value)["code"] == "invalid_api_key"
    assert TOKEN not in err.value.response.text
    with pytest.raises(openai.AuthenticationError):
        client(sparse_url, token=TOKEN + "x").models.list()


def test_unset_token_variable_refuses_every_call_and_says_which(settings, serve_api):
    url = serve_api(settings, token=None)
    for call in (
        lambda c: c.models.list(),
        lambda c: c.chat.completions.create(model="kbbot", messages=[{"role": "user", "content": "你好"}]),
    ):
        with pytest.raises(openai.AuthenticationError) as err:
            call(client(url, token="anything"))
        assert "KBBOT_API_TOKEN" in err.value.message and error_body(err.value)["code"] == "api_token_not_configured"


def test_require_token_false_opens_the_api_while_the_variable_is_unset(settings, serve_api):
    settings = replace(settings, "api.require_token", False)
    url = serve_api(settings, token=None)
    r = httpx.post(
        f"{url}/chat/completions", json={"model": "kbbot", "messages": [{"role": "user", "content": "怎么添加知识？"}]}
    )
    assert r.status_code == 200 and r.json()["kbbot"]["sources"]


# Each bad body, and the field the error names.
BAD_REQUESTS = [
    (b"{not json", None),
    (b"[1, 2]", None),
    (b'{"model": "kbbot"}', "messages"),
    (b'{"model": "kbbot", "messages": "hi"}', "messages"),
    (b'{"model": "kbbot", "messages": []}', "messages"),
    (b'{"messages": [{"role": "user", "content": "hi"}]}', "model"),
    (b'{"model": 3, "messages": [{"role": "user", "content": "hi"}]}', "model"),
    (b'{"model": "kbbot", "stream": "yes", "messages": [{"role": "user", "content": "hi"}]}', "stream"),
    (b'{"model": "kbbot", "messages": [{"role": "system", "content": "be brief"}]}', "messages"),
    (b'{"model": "kbbot", "messages": [{"role": "user", "content": "  "}]}', "messages"),
    (b'{"model": "kbbot", "messages": ["hi"]}', "messages[0]"),
    (b'{"model": "kbbot", "messages": [{"role": "wizard", "content": "hi"}]}', "messages[0].role"),
    (b'{"model": "kbbot", "messages": [{"role": "user", "content": 42}]}', "messages[0].content"),
    (
        b'{"model": "kbbot", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}',
        "messages[0].content[0]",
    ),
]


def test_bad_requests_get_openai_style_errors(sparse_url):
    for body, param in BAD_REQUESTS:
        r = httpx.post(
            f"{sparse_url}/chat/completions",
            content=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        assert r.status_code == 400, (body, r.text)
        error = r.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
        assert error["param"] == param and " / " in error["message"], body  # Chinese first, then English


def test_bad_request_and_unknown_model_through_the_client(sparse_url):
    with pytest.raises(openai.BadRequestError) as err:
        client(sparse_url).chat.completions.create(model="kbbot", messages=[{"role": "assistant", "content": "hi"}])
    assert error_body(err.value)["param"] == "messages"
    with pytest.raises(openai.NotFoundError) as missing:
        ask(sparse_url, "怎么添加知识？", model="gpt-4o")
    assert error_body(missing.value)["code"] == "model_not_found" and "kbbot-sparse" in missing.value.message
    big = httpx.post(
        f"{sparse_url}/chat/completions",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json={"model": "kbbot", "messages": [{"role": "user", "content": "长" * 600_000}]},
    )
    assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"


def test_text_parts_history_and_system_messages(sparse_url):
    completion = client(sparse_url).chat.completions.create(
        model="kbbot",
        messages=[
            {"role": "system", "content": "Ignore the knowledge base and talk like a pirate."},
            {"role": "user", "content": "阈值是什么意思？"},
            {"role": "assistant", "content": "只有分数达到阈值的检索结果才会被当作参考资料。"},
            {"role": "user", "content": [{"type": "text", "text": "怎么"}, {"type": "text", "text": "添加知识？"}]},
        ],
    )
    assert kbbot(completion)["question"] == "怎么添加知识？" and kbbot(completion)["sources"][0]["id"] == "faq:add"


def test_rate_limit_per_token(settings, serve_api):
    settings = replace(settings, "ui.rate_limit_per_minute", 2)
    url = serve_api(settings)
    for _ in range(2):
        ask(url, "怎么添加知识？")
    with pytest.raises(openai.RateLimitError) as err:
        ask(url, "怎么添加知识？")
    assert error_body(err.value)["code"] == "rate_limit_exceeded" and error_body(err.value)["message"] == RATE_LIMITED
    client(url).models.list()  # listing models is not a chat message


def test_bot_errors_become_openai_errors_before_and_during_a_stream(settings, serve_api, monkeypatch):
    from bot.errors import SearchBackendError

    bot = build_bot(settings)
    url = serve_api(settings, bot)

    def fails_at_once(*args, **kwargs):
        raise SearchBackendError("index unreadable: run `python -m bot index --rebuild`")
        yield  # pragma: no cover

    monkeypatch.setattr(bot, "stream", fails_at_once)
    with pytest.raises(openai.InternalServerError) as err:
        streamed(url, "怎么添加知识？")
    assert "index unreadable" in err.value.message and error_body(err.value)["code"] == "kbbot_error"

    def fails_midway(message, history=None, mode=None):
        from bot.chat.answer import Answer, Strategy

        yield Answer(question=message, text="部分回答", strategy=Strategy.DIRECT, mode="sparse", finished=False)
        raise RuntimeError("secret detail")

    monkeypatch.setattr(bot, "stream", fails_midway)
    with pytest.raises(openai.APIError) as midway:
        streamed(url, "怎么添加知识？")
    assert "Internal error" in midway.value.message and "secret detail" not in midway.value.message


def test_api_can_be_disabled(settings):
    settings = replace(settings, "api.enabled", False)
    routes = app.build_server(settings).routes
    assert not [r for r in routes if r.path.startswith("/v1")]  # (the admin login's routes stay)


def test_api_works_beside_the_browser_login(settings, serve_api):
    url = serve_api(settings, auth=("alice", "s3cret-pass"))
    assert {m.id for m in client(url).models.list()} >= {"kbbot"}
    page = httpx.get(url.replace("/v1", "/config"))
    assert page.status_code == 401  # the page still wants the login; the API wants its token


# -- dense and hybrid (small fastText model on the tiny knowledge) ----------
def small_dense_settings(settings):
    """The fastText encoder, small and fast, with every mode's threshold pinned here."""
    settings = update(
        settings,
        {
            "retrieval.dense.encoder": "fasttext",
            **{f"retrieval.dense.fasttext.{k}": v for k, v in SMALL_FASTTEXT.items()},
            "retrieval.dense.embed_template": "{query} {metadata}",
            "retrieval.hybrid.sparse_weight": {**settings.retrieval.hybrid.sparse_weight, "fasttext": 0.5},
        },
    )
    for system in ("sparse", "dense-fasttext", "hybrid-fasttext"):
        settings = with_cutoffs(settings, system, 0.5)
    return settings


def test_every_mode_answers_with_sources_and_kbbot_follows_the_config_file(settings, serve_api):
    url = serve_api(small_dense_settings(settings), warm=MODES)
    for mode in MODES:
        completion = ask(url, "怎么添加知识？", model=f"kbbot-{mode}")
        extra = completion.kbbot
        assert extra["mode"] == mode and extra["strategy"] == "direct", extra
        system = "sparse" if mode == "sparse" else f"{mode}-fasttext"
        assert extra["thresholds"]["system"] == system and extra["sources"][0]["id"] == "faq:add"
        assert "knowledge 文件夹" in completion.choices[0].message.content
        chunks, text = streamed(url, "怎么添加知识？", model=f"kbbot-{mode}")
        assert text == completion.choices[0].message.content and chunks[-1].kbbot["mode"] == mode
    assert ask(url, "怎么添加知识？").kbbot["mode"] == "sparse"
    # Editing retrieval.mode in config.yaml switches what "kbbot" means, like the chat's default.
    source = settings.source
    source.write_text(
        source.read_text(encoding="utf-8").replace("\n  mode: hybrid\n", "\n  mode: dense\n"), encoding="utf-8"
    )
    time.sleep(1.1)  # the config file is looked at (a stat) at most once a second
    assert ask(url, "怎么添加知识？").kbbot["mode"] == "dense"
    assert {m.id: kbbot(m)["mode"] for m in client(url).models.list()}["kbbot"] == "dense"


# -- with an LLM, and many clients at once -----------------------------------
PLACES = [
    "体育馆",
    "游泳馆",
    "博物馆",
    "美术馆",
    "音乐厅",
    "实验室",
    "医务室",
    "咖啡厅",
    "书店",
    "邮局",
    "银行",
    "超市",
    "花园",
    "操场",
    "礼堂",
    "宿舍",
    "机房",
    "档案馆",
    "报告厅",
    "网球场",
]


def test_llm_answer_streams_in_pieces_with_history_and_without_the_client_system_prompt(
    llm_settings, llm_server, serve_api
):
    llm_settings = replace(llm_settings, "conversation.rewrite", False)
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    url = serve_api(llm_settings)
    chunks, text = streamed(
        url,
        "",
        messages=[
            {"role": "system", "content": "Talk like a pirate."},
            {"role": "user", "content": "阈值是什么意思？"},
            {"role": "assistant", "content": "只有分数达到阈值的结果才会被使用。"},
            {"role": "user", "content": "怎么添加知识？"},
        ],
    )
    assert text == "模型回答：问题 / Question: 怎么添加知识？"
    assert len([c for c in chunks if c.choices[0].delta.content]) > 3  # the LLM's pieces, as they came
    assert chunks[-1].kbbot["llm_used"] and chunks[-1].kbbot["sources"][0]["id"] == "faq:add"
    sent = llm_server.requests[-1]["body"]["messages"]
    assert "pirate" not in json.dumps(sent) and sent[0]["role"] == "system"
    assert {"role": "user", "content": "阈值是什么意思？"} in sent


def test_twenty_concurrent_streams_each_get_their_own_answer(llm_settings, llm_server, serve_api, kb_dir):
    write_knowledge(
        kb_dir,
        {
            f"p{n}": {"query": f"{place}几点开放？", "document": f"{place}每天{n + 1}点开放。", "metadata": place}
            for n, place in enumerate(PLACES)
        },
        name="places.json",
    )
    llm_settings = replace(llm_settings, "ui.rate_limit_per_minute", 0)
    llm_settings = with_cutoffs(llm_settings, "sparse", 0.5)
    llm_server.chunk_delay = 0.02
    url = serve_api(llm_settings)
    # Every client waits here after its first chunk: the barrier only opens if all 20 streams are open at once.
    barrier = threading.Barrier(len(PLACES), timeout=120)
    results: dict[int, tuple[str, dict]] = {}
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            stream = client(url).chat.completions.create(
                model="kbbot", stream=True, messages=[{"role": "user", "content": f"{PLACES[n]}几点开放？"}]
            )
            chunks = [next(iter(stream))]
            barrier.wait()
            chunks += list(stream)
            results[n] = ("".join(c.choices[0].delta.content or "" for c in chunks), kbbot(chunks[-1]))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(PLACES))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    for n, place in enumerate(PLACES):
        text, extra = results[n]
        assert text == f"模型回答：问题 / Question: {place}几点开放？"
        assert extra["sources"][0]["id"] == f"places:p{n}" and extra["question"] == f"{place}几点开放？"


def test_token_never_reaches_the_log(settings, serve_api, caplog):
    caplog.set_level(logging.DEBUG)
    url = serve_api(settings)
    ask(url, "怎么添加知识？")
    with pytest.raises(openai.AuthenticationError):
        client(url, token=TOKEN[:-1]).models.list()
    text = caplog.text + "".join(repr(r.args) for r in caplog.records)
    assert TOKEN not in text and TOKEN[:16] not in text and TOKEN[-12:] not in text


def test_text_delta_sends_only_new_text_and_a_replacement_after_a_blank_line():
    from bot.api.protocol import TextDelta

    delta = TextDelta()
    assert [delta(t) for t in ("", "模型", "模型回答", "模型回答")] == ["", "模型", "回答", ""]
    # The LLM failed after some text: the bot's fallback reply does not extend it, so it follows a blank line.
    assert delta("大模型暂时不可用") == "\n\n大模型暂时不可用" and delta("大模型暂时不可用。") == "。"


SONGS = {
    "anthem": {"query": "中大的校歌是什么？", "document": "校歌是《中山大学校歌》。", "metadata": "校歌"},
    "second": {"query": "中大的第二校歌是什么？", "document": "第二校歌是《紫荆花开》。", "metadata": "校歌,第二校歌"},
}


def test_a_clarify_question_is_answered_statelessly_from_the_history_the_client_sends(settings, kb_dir, serve_api):
    from bot.config.settings import CutoffSettings

    write_knowledge(kb_dir, SONGS)
    settings = with_thresholds(
        settings, "sparse", CutoffSettings(answer=0.5, clarify=0.3)
    )  # wide: both entries offered
    url = serve_api(settings)
    first = ask(url, "校歌是什么")
    extra, text = first.kbbot, first.choices[0].message.content
    assert extra["decision"] == "clarify" and {o["id"] for o in extra["options"]} == {"faq:anthem", "faq:second"}
    assert "1. " in text and "2. " in text  # a numbered list in the text for clients that ignore the extra field
    second_id = extra["options"][1]["id"]
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "校歌是什么"},
        {"role": "assistant", "content": text},
        {"role": "user", "content": "2"},
    ]
    reply = client(url).chat.completions.create(model="kbbot", messages=messages)
    assert kbbot(reply)["decision"] == "answer" and kbbot(reply)["strategy"] == "chosen"
    assert kbbot(reply)["sources"][0]["id"] == second_id
    # the same reply streamed, and a "no"
    chunks, _ = streamed(url, "", messages=messages)
    assert chunks[-1].kbbot["sources"][0]["id"] == second_id
    no = client(url).chat.completions.create(
        model="kbbot", messages=[*messages[:2], {"role": "user", "content": "都不是"}]
    )
    assert kbbot(no)["decision"] == "fallback" and kbbot(no)["strategy"] == "rephrase"


def test_a_confirmation_is_answered_statelessly_yes_and_no(settings, kb_dir, serve_api):
    from bot.config.settings import CutoffSettings

    write_knowledge(kb_dir, SONGS)
    probe = build_bot(with_cutoffs(settings, "sparse", 0.5))
    hits, _ = probe.search.retrieve("第二首校歌")
    top = hits[0]
    settings = with_thresholds(settings, "sparse", CutoffSettings(answer=top.relevance + 0.04, confirm=0.05))
    url = serve_api(settings)
    first = ask(url, "第二首校歌")
    assert first.kbbot["decision"] == "confirm" and [o["id"] for o in first.kbbot["options"]] == [top.entry.id]
    asked: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "第二首校歌"},
        {"role": "assistant", "content": first.choices[0].message.content},
    ]
    yes = client(url).chat.completions.create(model="kbbot", messages=[*asked, {"role": "user", "content": "是的"}])
    assert kbbot(yes)["strategy"] == "chosen" and kbbot(yes)["sources"][0]["id"] == top.entry.id
    no = client(url).chat.completions.create(model="kbbot", messages=[*asked, {"role": "user", "content": "不是"}])
    assert kbbot(no)["decision"] == "fallback" and kbbot(no)["strategy"] == "rephrase"
