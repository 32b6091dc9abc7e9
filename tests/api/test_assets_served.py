"""The knowledge's pictures and files over real HTTP: served from /kb-assets/ with their checked content type,
refused when the path leaves the folder or the content is not what the name says, listed with absolute URLs in the
API's ``kbbot.assets``, rendered safely on the page's chat; uploaded by an admin only, a 1 GB upload cut off early."""

from __future__ import annotations

import io
import json

import httpx
import pytest
from PIL import Image

from bot.config.variants import replace
from tests.support.bodies import upload_regardless
from tests.support.knowledge import write_knowledge
from tests.support.serving import ADMIN_COOKIE, TOKEN, admin_call, ask

pytestmark = pytest.mark.e2e

MB = 1024 * 1024
MAP_ENTRY = {
    "map": {
        "query": "校园地图在哪里看？",
        "document": "校园地图如下：\n\n![校园地图](assets/map.png)\n\n[下载报名表](assets/form.pdf)",
        "metadata": "校园地图,地图",
    }
}


def png_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 6), "#f97316").save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def rich_kb(kb_dir):
    """The tiny knowledge plus an entry with a map and a form, and a few files that must not be served."""
    write_knowledge(kb_dir, MAP_ENTRY, "map.json")
    assets = kb_dir / "assets"
    assets.mkdir()
    (assets / "map.png").write_bytes(png_bytes())
    (assets / "form.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    (assets / "fake.png").write_bytes(b"<html><script>alert(1)</script></html>")
    (assets / "logo.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    (kb_dir.parent / "secret.png").write_bytes(png_bytes())
    return kb_dir


@pytest.fixture
def base(rich_kb, settings, serve_app, monkeypatch):
    monkeypatch.setenv(settings.api.token_env, TOKEN)
    return serve_app(settings).rstrip("/")


def test_an_asset_is_served_with_its_checked_type_and_nothing_else_is(base):
    r = httpx.get(f"{base}/kb-assets/map.png", timeout=30)
    assert r.status_code == 200 and r.content == png_bytes()
    assert r.headers["content-type"] == "image/png" and r.headers["x-content-type-options"] == "nosniff"
    assert "img-src 'self'" in r.headers["content-security-policy"]
    pdf = httpx.get(f"{base}/kb-assets/form.pdf", timeout=30)
    assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
    for path in ("fake.png", "logo.svg", "missing.png", "%2e%2e/secret.png", "..%2fsecret.png", "%2e%2e%2fmap.json"):
        assert httpx.get(f"{base}/kb-assets/{path}", timeout=30).status_code == 404, path
    assert httpx.get(f"{base}/assets/map.png", timeout=30).status_code == 404  # /assets/ is Gradio's own


def test_the_api_returns_the_markdown_and_the_assets_absolute_urls(base):
    completion = ask(f"{base}/v1", "校园地图在哪里看？")
    assert "![校园地图](assets/map.png)" in completion.choices[0].message.content
    extra = completion.model_extra["kbbot"]
    assert extra["assets"] == [f"{base}/kb-assets/map.png", f"{base}/kb-assets/form.pdf"]
    assert httpx.get(extra["assets"][0], timeout=30).content == png_bytes()
    assert ask(f"{base}/v1", "怎么添加知识？").model_extra["kbbot"]["assets"] == []


def test_the_public_url_names_the_assets_when_set(rich_kb, settings, serve_app, monkeypatch):
    monkeypatch.setenv(settings.api.token_env, TOKEN)
    base = serve_app(replace(settings, "knowledge.assets.public_url", "https://kb.example.org/")).rstrip("/")
    extra = ask(f"{base}/v1", "校园地图在哪里看？").model_extra["kbbot"]
    assert extra["assets"][0] == "https://kb.example.org/kb-assets/map.png"


def test_the_page_shows_the_picture_from_this_app_only(base):
    data = admin_call(base, "chat", "校园地图在哪里看？", [], "sparse", None, None, None)
    html = json.dumps(data, ensure_ascii=False)
    assert 'src=\\"/kb-assets/map.png\\"' in html and 'target=\\"_blank\\"' in html


def upload(base: str, name: str, data: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{base}/gradio_api/upload", files={"files": (name, data)}, headers=headers, timeout=60)


def stored(base: str, name: str, data: bytes) -> str:
    path = upload(base, name, data, ADMIN_COOKIE).json()[0]
    return admin_call(base, "upload_asset", {"path": path, "meta": {"_type": "gradio.FileData"}})[0]


def test_an_admin_uploads_a_picture_and_a_bad_one_is_refused_with_a_reason(base, rich_kb):
    assert "assets/校门.png" in stored(base, "校门.png", png_bytes())
    assert httpx.get(f"{base}/kb-assets/校门.png", timeout=30).content == png_bytes()
    svg = stored(base, "evil.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    assert "SVG" in svg and "Not saved" in svg
    fake = stored(base, "photo.jpg", b"<html><script>alert(1)</script></html>")
    assert "not a .jpg file" in fake
    assert sorted(p.name for p in (rich_kb / "assets").iterdir()) == [
        "fake.png",
        "form.pdf",
        "logo.svg",
        "map.png",
        "校门.png",
    ]
    assert upload(base, "x.png", png_bytes(), {}).status_code in (401, 403)  # uploads are for admins only
    path = upload(base, "偷偷.png", png_bytes(), ADMIN_COOKIE).json()[0]
    with httpx.Client(base_url=base, timeout=60) as visitor:  # no admin cookie: the event itself refuses
        file = {"path": path, "meta": {"_type": "gradio.FileData"}}
        event = visitor.post("/gradio_api/call/upload_asset", json={"data": [file]}).json()["event_id"]
        assert "event: error" in visitor.get(f"/gradio_api/call/upload_asset/{event}").text
    assert not (rich_kb / "assets" / "偷偷.png").exists()


def test_saving_a_document_with_unsafe_markup_saves_it_and_says_what_is_not_shown(base, rich_kb):
    document = "见 [这里](javascript:alert(1)) <script>alert(1)</script> ![图](assets/nowhere.png)"
    status = admin_call(base, "save_entry", "faq.json", "", "危险内容？", document, "", None, "", False, "", "")[0]
    assert "Saved" in status or "saved" in status
    assert "javascript:alert(1)" in status and "raw HTML" in status and "missing asset: assets/nowhere.png" in status


def test_a_1_gb_upload_is_cut_off_at_the_limit_without_being_read(base):
    sent = upload_regardless(base, 1024 * MB, ADMIN_COOKIE)
    assert sent.status in (413, None) and sent.sent < 200 * MB
