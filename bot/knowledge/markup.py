"""A document's Markdown (markdown-it-py, CommonMark): its plain text, the assets it names, safe HTML, what is wrong.

- ``plain_text``: what retrieval and the prompt read: alt text and link text stay, image markup, URLs and raw HTML go.
- ``asset_references``: the ``assets/<name>`` files a document shows or links.
- ``safe_html``: HTML for the page and the widget, sanitised by an allow-list (nh3): no script, no raw HTML (shown as
  text), pictures only from this app's assets, links only http(s)/mailto/tel or an asset, each opening a new tab.
- ``served_url``: where a link of a document leads once served (an asset under its base, http(s) as it is).
- ``markup_problems``: what the knowledge linter and the knowledge tab tell the admin (missing asset, a path out of
  the folder, a remote picture, a ``javascript:`` link, raw HTML).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token

from bot.knowledge.assets import AssetError, asset_name, check_name, kind_of

SAFE_SCHEMES = frozenset({"http", "https", "mailto", "tel"})
_ALLOWED_TEXT = (
    "p br strong em del s code pre blockquote ul ol li h1 h2 h3 h4 h5 h6 hr a img table thead tbody tr th td"
)
TAGS = frozenset(_ALLOWED_TEXT.split())  # what an answer's HTML may hold
ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}, "ol": {"start"}}
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
# Tags of HTML a document may carry by intent; anything else in angle brackets ("<file stem>", "<60分>") is text.
_HTML_TEXT = (
    "a abbr address applet area article aside audio b base bdi bdo big blink blockquote body br button canvas caption "
    "center cite code col colgroup data dd del details dfn dialog div dl dt em embed fieldset figcaption figure font "
    "footer form frame frameset h1 h2 h3 h4 h5 h6 head header hr html i iframe img input ins kbd label legend li link "
    "main map mark marquee math menu meta meter nav noscript object ol optgroup option output p param picture pre "
    "progress q s samp script section select slot small source span strike strong style sub summary sup svg table "
    "tbody td template textarea tfoot th thead time title tr track tt u ul var video wbr xmp"
)
HTML_TAGS = frozenset(_HTML_TEXT.split())
_TAG_NAME = re.compile(r"^</?([a-zA-Z][a-zA-Z0-9]*)")
_BLANKS = re.compile(r"\n{3,}")


def _parser(html: bool) -> MarkdownIt:
    # A line break in a document is a line break on the screen, as the chat showed answers before (and as people
    # writing FAQ answers expect), not a space as in CommonMark.
    return MarkdownIt("commonmark", {"html": html, "breaks": True}).enable(["table", "strikethrough"])


_RENDER = _parser(html=False)  # raw HTML is shown as text: neutralised, and the admin sees it
_READ = _parser(html=True)  # raw HTML as tokens, so that plain text can drop it
_SCAN = _parser(html=True)
_SCAN.validateLink = lambda url: True  # type: ignore[method-assign]  # the scan sees javascript: links too


def _marked_up(text: str) -> bool:
    """Whether ``text`` may hold a link, a picture or raw HTML (without them it is its own plain text)."""
    return "](" in text or "<" in text or "]:" in text


def _scheme(url: str) -> str | None:
    m = _SCHEME.match(url.strip())
    return m.group(1).lower() if m else None


def _is_html(token: Token) -> bool:
    """Whether a raw-HTML token is HTML by intent (a known tag or a comment), not text in angle brackets."""
    if token.type not in ("html_inline", "html_block"):
        return False
    content = token.content.lstrip()
    m = _TAG_NAME.match(content)
    return content.startswith("<!--") or (m is not None and m.group(1).lower() in HTML_TAGS)


def _inline(tokens: Sequence[Token]) -> list[Token]:
    """Every inline token of a parse, in order."""
    return [child for token in tokens if token.type == "inline" for child in token.children or ()]


def _walk_text(tokens: Sequence[Token], link: Callable[[str, str], str], image: Callable[[str, str], str]) -> str:
    """The text of a parse: block breaks as newlines, list items marked, raw HTML dropped; ``link(text, href)`` and
    ``image(alt, src)`` say what a link and a picture become."""
    out: list[str] = []
    numbers: list[int | None] = []  # per open list: the next number (None: bullets)
    for token in tokens:
        kind = token.type
        if kind == "ordered_list_open":
            numbers.append(int(token.attrs.get("start", 1) or 1))
        elif kind == "bullet_list_open":
            numbers.append(None)
        elif kind in ("ordered_list_close", "bullet_list_close"):
            numbers.pop()
            out.append("\n")
        elif kind == "list_item_open" and numbers:
            n = numbers[-1]
            out.append("- " if n is None else f"{n}. ")
            if n is not None:
                numbers[-1] = n + 1
        elif kind in ("paragraph_close", "heading_close", "tr_close"):
            out.append("\n" if token.level else "\n\n")
        elif kind in ("th_close", "td_close"):
            out.append(" ")
        elif kind in ("fence", "code_block") or (kind == "html_block" and not _is_html(token)):
            out.append(token.content + "\n")
        elif kind == "inline":
            out.append(_inline_text(token.children or [], link, image))
    return _BLANKS.sub("\n\n", "".join(out)).strip()


def _inline_text(children: Sequence[Token], link: Callable[[str, str], str], image: Callable[[str, str], str]) -> str:
    out: list[str] = []
    stack: list[tuple[str, int]] = []  # open links: href, where their text starts in out
    for child in children:
        kind = child.type
        if kind in ("text", "code_inline") or (kind == "html_inline" and not _is_html(child)):
            out.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "image":
            out.append(image(child.content, str(child.attrs.get("src", ""))))
        elif kind == "link_open":
            stack.append((str(child.attrs.get("href", "")), len(out)))
        elif kind == "link_close" and stack:
            href, start = stack.pop()
            out[start:] = [link("".join(out[start:]), href)]
    return "".join(out)


@lru_cache(maxsize=4096)
def plain_text(document: str) -> str:
    """What retrieval and the prompt read of ``document``: its text, alt text and link text, without image markup,
    URLs or raw HTML (a document without any is returned as it is)."""
    if not _marked_up(document):
        return document
    return _walk_text(_READ.parse(document), lambda text, href: text, lambda alt, src: alt)


def asset_references(document: str) -> tuple[str, ...]:
    """The asset names (under ``assets/``) that ``document`` shows or links, in order, once each."""
    if "](" not in document and "]:" not in document:
        return ()
    names: list[str] = []
    for child in _inline(_RENDER.parse(document)):
        url = child.attrs.get("src") if child.type == "image" else child.attrs.get("href")
        name = asset_name(str(url)) if url else None
        if name is not None and name not in names:
            names.append(name)
    return tuple(names)


def asset_pictures(document: str) -> tuple[str, ...]:
    """The pictures ``document`` shows from its assets, each as its Markdown (``![alt](assets/name)``), once each."""
    if "](" not in document:
        return ()
    shown: list[str] = []
    for child in _inline(_RENDER.parse(document)):
        src = str(child.attrs.get("src") or "") if child.type == "image" else ""
        name = asset_name(src) if src else None
        picture = f"![{child.content}](assets/{name})" if name is not None and _is_picture(name) else None
        if picture is not None and picture not in shown:
            shown.append(picture)
    return tuple(shown)


def _asset_url(url: str, base: str) -> str | None:
    """The served URL of an asset reference (None: not one of ours, or a name that leaves the folder)."""
    name = asset_name(url)
    if name is None:
        return None
    try:
        check_name(name)
    except AssetError:
        return None
    return base + name


def served_url(url: str, base: str | None, image: bool = False) -> str | None:
    """Where a document's link (``image``: picture) leads for a reader outside the page: an asset under ``base``
    (None: nowhere), an http(s) link as it is; a remote picture, ``javascript:`` or any other link leads nowhere."""
    if asset_name(url) is not None:
        return _asset_url(url, base) if base else None
    return url if not image and _scheme(url) in ("http", "https") else None


def _is_picture(name: str) -> bool:
    try:
        return kind_of(name).image
    except AssetError:
        return False


def safe_html(document: str, base: str) -> str:
    """``document`` as HTML safe to show in a visitor's browser; assets are served under ``base`` (e.g.
    ``/kb-assets/``): the only pictures shown; any other picture becomes its alt text."""
    tokens = _RENDER.parse(document)
    for child in _inline(tokens):
        if child.type == "image":
            src = str(child.attrs.get("src", ""))
            served = _asset_url(src, base)
            if served is None or not _is_picture(src):
                child.type, child.tag, child.attrs = "text", "", {}  # the alt text stays, as text
                child.content = child.content or src
                child.children = None
            else:
                child.attrs["src"] = served
        elif child.type == "link_open":
            href = str(child.attrs.get("href", ""))
            served = _asset_url(href, base)
            if served is not None:
                child.attrs["href"] = served
            elif _scheme(href) not in SAFE_SCHEMES:
                child.attrs.pop("href", None)  # a relative or unknown link leads nowhere
    rendered = _RENDER.renderer.render(tokens, _RENDER.options, {})

    def allowed(tag: str, attribute: str, value: str) -> str | None:
        if tag == "img" and attribute == "src" and not value.startswith(base):
            return None
        return value

    return nh3.clean(
        rendered,
        tags=set(TAGS),
        attributes={k: set(v) for k, v in ATTRIBUTES.items()},
        attribute_filter=allowed,
        url_schemes=set(SAFE_SCHEMES),
        link_rel="noopener noreferrer",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    ).strip()


def markup_problems(document: str, exists: Callable[[str], bool]) -> list[str]:
    """What is wrong with ``document``'s markup, each said to its admin (``exists``: whether an asset is there)."""
    if not _marked_up(document):
        return []
    problems: list[str] = []
    tokens = _SCAN.parse(document)
    if any(_is_html(t) for t in tokens) or any(_is_html(t) for t in _inline(tokens)):
        problems.append("含有 HTML，将作为文字显示 / raw HTML is shown as text, never run")
    for child in _inline(tokens):
        if child.type not in ("image", "link_open"):
            continue
        url = str(child.attrs.get("src" if child.type == "image" else "href", ""))
        name = asset_name(url)
        if name is not None:
            try:
                check_name(name)
            except AssetError as exc:
                problems.append(str(exc))
                continue
            if not exists(name):
                problems.append(f"素材不存在 / missing asset: {url}")
        elif child.type == "image":
            problems.append(f"不显示外部图片 / a remote picture is not shown: {url[:200]}")
        elif _scheme(url) is not None and _scheme(url) not in SAFE_SCHEMES:
            problems.append(f"已去掉不安全的链接 / an unsafe link is not followed: {url[:200]}")
        elif (_scheme(url) is None and url.startswith(("../", "/"))) or "/../" in url:
            problems.append(f"链接离开了知识库 / a link leaves the knowledge folder: {url[:200]}")
    return problems
