"""Documents' Markdown: the plain text retrieval and the prompt read, the assets named, the HTML the page and the
widget show (script, raw HTML, remote pictures and javascript: links neutralised), and what the admin is told."""

from __future__ import annotations

import pytest

from bot.api.im.render import plain
from bot.knowledge.entries import Entry
from bot.knowledge.markup import asset_references, markup_problems, plain_text, safe_html, served_url
from bot.ui.render import answer_html, html_text

pytestmark = pytest.mark.unit

BASE = "/kb-assets/"
MAP = "校园地图见下图：\n\n![校园地图](assets/map.png)\n\n报名表：[下载](assets/form.pdf)，官网：[网站](https://example.org/a)"


def test_plain_text_keeps_alt_and_link_text_and_drops_urls_and_markup():
    text = plain_text(MAP + "\n\n<img src=http://198.51.100.7/t.png> ![远程](http://198.51.100.7/x.png)")
    assert "校园地图" in text and "下载" in text and "网站" in text and "远程" in text
    for gone in ("assets/", "http", "](", "<img", "!["):
        assert gone not in text


def test_a_document_without_links_or_html_is_its_own_plain_text():
    document = "**加粗**、列表：\n- 一\n- 二\n1. 第一"
    assert plain_text(document) == document


def test_text_in_angle_brackets_that_is_not_html_stays_text():
    document = "条目 id 是 <file stem>:<key>，成绩 <60分> 的同学 [点这里](https://example.org)"
    assert plain_text(document) == "条目 id 是 <file stem>:<key>，成绩 <60分> 的同学 点这里"
    assert markup_problems(document, lambda name: True) == []


def test_an_entry_is_searched_by_its_text():
    entry = Entry("map", "校园地图在哪里？", MAP)
    assert entry.text == plain_text(MAP) and "assets/map.png" not in entry.text


def test_asset_references_lists_pictures_and_files_once_in_order():
    assert asset_references(MAP + " ![again](assets/map.png)") == ("map.png", "form.pdf")
    assert asset_references("`![code](assets/not.png)` 和 [官网](https://example.org)") == ()


def test_safe_html_shows_our_pictures_and_links_in_a_new_tab():
    shown = safe_html(MAP, BASE)
    assert '<img src="/kb-assets/map.png" alt="校园地图">' in shown
    assert '<a href="/kb-assets/form.pdf" target="_blank" rel="noopener noreferrer">下载</a>' in shown
    assert '<a href="https://example.org/a" target="_blank" rel="noopener noreferrer">网站</a>' in shown


@pytest.mark.parametrize(
    "document, absent, present",
    [
        ("<script>alert(1)</script>你好", "<script", "&lt;script&gt;"),
        ('<img src="http://198.51.100.7/t.png" onerror="alert(1)">', "<img", "&lt;img"),
        ("![跟踪](http://198.51.100.7/t.png)", "<img", "跟踪"),
        ("![跟踪](//198.51.100.7/t.png)", "<img", "跟踪"),
        ("[点我](javascript:alert(1))", "<a", "点我"),
        ("[点我](JaVaScRiPt:alert(1))", "href", "点我"),
        ("[点我](data:text/html;base64,PHNjcmlwdD4=)", "href", "点我"),
        ("![逃逸](assets/../config.yaml)", "<img", "逃逸"),
        ("![矢量](assets/logo.svg)", "<img", "矢量"),
        ("[相对](../secret.txt)", "href", "相对"),
    ],
)
def test_safe_html_neutralises_script_raw_html_remote_pictures_and_unsafe_links(document, absent, present):
    shown = safe_html(document, BASE)
    assert absent not in shown and present in shown


def test_the_chat_reads_a_rendered_answer_back_as_the_bot_said_it():
    said = "找到多个相关条目，请问您想问的是：\n1. 本科生学费是多少？\n2. 研究生学费是多少？\n\n![图](assets/map.png)"
    back = html_text(answer_html(said, BASE))
    assert "1. 本科生学费是多少？\n2. 研究生学费是多少？" in back and "图" in back
    assert html_text("&lt;b&gt; 5 !&#91;x]") == "<b> 5 ![x]"  # an escaped message as typed


def test_im_text_links_assets_absolutely_and_drops_remote_pictures_and_unsafe_links():
    root = "https://kb.example.org/kb-assets/"
    text = plain(MAP + " ![远程](http://198.51.100.7/x.png) [坏](javascript:alert(1))", root)
    assert "校园地图 (https://kb.example.org/kb-assets/map.png)" in text
    assert "下载 (https://kb.example.org/kb-assets/form.pdf)" in text and "网站 (https://example.org/a)" in text
    assert "198.51.100.7" not in text and "javascript" not in text and "远程" in text and "坏" in text
    assert "assets/" not in plain(MAP, None).replace("https://example.org/a", "")  # no public URL: names only
    assert served_url("assets/../x.png", root, image=True) is None


def test_markup_problems_name_what_the_admin_should_fix():
    problems = markup_problems(
        MAP + "\n\n<b>粗</b> [x](javascript:alert(1)) ![远程](https://198.51.100.7/x.png) ![出界](assets/../a.png)",
        lambda name: name == "map.png",
    )
    text = "\n".join(problems)
    assert "missing asset: assets/form.pdf" in text and "map.png" not in text
    assert "raw HTML" in text and "javascript:alert(1)" in text and "remote picture" in text
    assert "must stay inside assets/" in text
    assert markup_problems(MAP, lambda name: True) == []
