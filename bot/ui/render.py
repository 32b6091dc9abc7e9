"""HTML for the browser app: answers, header, sources panel, retrieval test table. Every piece of text is escaped;
an answer's Markdown is rendered by bot/knowledge/markup.py's allow-list (pictures only from this app's assets)."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from html.parser import HTMLParser

from bot.chat.answer import Answer, Band, Cutoffs, Strategy
from bot.chat.status import ModeRetrieval, Status
from bot.knowledge.entries import RULES_FILE
from bot.knowledge.filters import EntryFilter
from bot.knowledge.markup import safe_html
from bot.search.base import Hit
from bot.texts import CONFIG_PROBLEM, KNOWLEDGE_PROBLEM, NOT_SEARCHED

e = html.escape

STRATEGY_LABELS = {
    Strategy.DIRECT: "直接检索 / direct",
    Strategy.VERBATIM: "知识库原文 / verbatim entry",
    Strategy.REWRITE: "改写问题检索 / multi-query rewrite",
    Strategy.HYDE: "HyDE 假设答案检索 / HyDE",
    Strategy.TRANSLATE: "翻译后检索 / translated question",
    Strategy.LAST_RESORT: "兜底回复 / last resort",
    Strategy.REFUSED: "含个人信息，已拒绝 / refused (personal data)",
    Strategy.CHOSEN: "用户选择的条目 / chosen option",
    Strategy.CLARIFY: "请用户澄清 / clarify",
    Strategy.CONFIRM: "请用户确认 / confirm",
    Strategy.CHITCHAT: "闲聊 / chit-chat",
    Strategy.HANDOFF: "转人工 / hand-off",
    Strategy.HELD: "人工客服接待中 / hand-off: held by staff",
    Strategy.REPHRASE: "请用户换个说法 / rephrase",
    Strategy.RULE: "精确匹配规则 / rule",
}
BAND_LABELS = {Band.HIGH: "高 / high", Band.MEDIUM: "中 / medium", Band.LOW: "低 / low"}


RICH_CLASS = "kb-rich"  # the wrapper of a rendered answer (app.py's CSS fits its pictures to the chat)
_BLOCKS = frozenset(
    ["p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "tr", "pre", "blockquote", "table", "ul", "ol"]
)
_BLANK_LINES = re.compile(r"\n{3,}")


def answer_html(text: str, assets: str) -> str:
    """An answer's Markdown as the chat shows it: sanitised HTML whose pictures come from ``assets`` only."""
    return f"<div class='{RICH_CLASS}'>{safe_html(text, assets)}</div>"


class _Text(HTMLParser):
    """The text of a chat message's HTML: blocks on their own lines, list items numbered, pictures as alt text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.lists: list[int | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("ol", "ul"):
            start = dict(attrs).get("start")
            self.lists.append((int(start) if start and start.isdigit() else 1) if tag == "ol" else None)
        elif tag == "li" and self.lists:
            n = self.lists[-1]
            self.out.append("- " if n is None else f"{n}. ")
            if n is not None:
                self.lists[-1] = n + 1
        elif tag == "br":
            self.out.append("\n")
        elif tag == "img":
            self.out.append(dict(attrs).get("alt") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("ol", "ul") and self.lists:
            self.lists.pop()
        if tag in _BLOCKS:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not (data.strip() == "" and "\n" in data):  # the line breaks between rendered tags
            self.out.append(data)


def html_text(content: str) -> str:
    """The text a chat message's content says: a rendered answer's HTML read back (numbered lines stay numbered,
    so a reply to a clarify question is read as the bot asked it), an escaped message unescaped."""
    if RICH_CLASS not in content:
        return html.unescape(content)
    parser = _Text()
    parser.feed(content)
    parser.close()
    return _BLANK_LINES.sub("\n\n", "".join(parser.out)).strip()


def minute(iso: str | None) -> str:
    """A stored UTC timestamp to the minute, as people read it ("2026-11-27 09:05"; empty for none)."""
    return (iso or "")[:16].replace("T", " ")


def warn(text: str) -> str:
    """A notice with one ⚠️ in front (config notices may bring their own), escaped."""
    return f"⚠️ {e(text.strip().removeprefix('⚠️').strip())}"


def header_markdown(title: str, status: Status, retrieval_only_label: str, follows_config: bool = True) -> str:
    """Title, the mode (and whether it follows the config), LLM or retrieval-only, entries loaded, problems."""
    llm = f"大模型 / LLM: `{e(status.llm)}`" if status.llm else f"**{e(retrieval_only_label)}**"
    how = "跟随配置 / following config" if follows_config else "本会话选择 / this session's choice"
    text = (
        f"## {e(title)}\n检索模式 / Mode: `{e(status.mode)}`（{how}）· {llm} · "
        f"已加载 {status.entries} 条知识 / {status.entries} entries loaded"
    )
    problems = (KNOWLEDGE_PROBLEM if status.knowledge_error else None, CONFIG_PROBLEM if status.config_error else None)
    for line in (status.notice, *problems):
        if line:
            text += f"\n\n{warn(line)}"
    if status.building:
        done = " · ".join(e(snap.describe()) for snap in status.building)
        text += f"\n\n<span class='kb-building'>⏳ 索引构建中 / Building: {done}</span>"
    return text


def mode_served(mode: str, cutoffs: Cutoffs | None) -> str:
    """The mode asked for, and which one answered when another stood in while its index builds."""
    system = cutoffs.system if cutoffs else ""
    served = system.split("-", 1)[0]
    if not system or served == mode:
        return e(mode)
    return f"{e(mode)}（索引构建中，由 {e(system)} 代答 / building; {e(system)} answers meanwhile）"


SIGNAL_LABELS = {
    "coverage": "覆盖 coverage",
    "bm25": "BM25",
    "question": "问句余弦 q-cos",
    "passage": "正文余弦 p-cos",
    "llm_grade": "大模型评分 LLM grade",
    "retrieval": "检索相关度 retrieval",
}
PASSAGE_PREVIEW_CHARS = 160
# The Searcher column speaks the header's vocabulary (the modes), naming the engine only where it is not the default.
SEARCHER_MODES = {"tantivy": "sparse", "elasticsearch": "sparse (elasticsearch)", "faiss": "dense", "hybrid": "hybrid"}


def searcher_label(name: str) -> str:
    """The retrieval mode a searcher serves, as the header names it (unknown names as they are)."""
    return SEARCHER_MODES.get(name, name)


def _passages(hit: Hit) -> str:
    """The parts of a long document that matched (number, relevance, start of the text), best first."""
    if not hit.passages:
        return ""
    items = []
    for p in hit.passages:
        text = hit.entry.document[p.start : p.end].strip()
        text = text if len(text) <= PASSAGE_PREVIEW_CHARS else text[:PASSAGE_PREVIEW_CHARS] + "…"
        items.append(f"<li>§{p.index + 1} <b>{p.relevance:.3f}</b>: {e(text)}</li>")
    numbers = ", ".join(f"§{p.index + 1}" for p in hit.passages)
    return (
        f"<details class='kb-passages'><summary><small>匹配段落 / Passages {e(numbers)}</small></summary>"
        f"<ol class='kb-passage-list'>{''.join(items)}</ol></details>"
    )


def _scores(hit: Hit, cutoffs: Cutoffs | None = None) -> str:
    """Relevance first (the thresholded number) with its confidence band, then the signals behind it."""
    extra = " · ".join(f"{e(SIGNAL_LABELS.get(k, k))} {v:.3g}" for k, v in hit.signals.items())
    band = cutoffs.band(hit) if cutoffs else None
    badge = f" <span class='kb-band kb-band-{band.value}'>{BAND_LABELS[band]}</span>" if band else ""
    return f"<b>{hit.relevance:.3f}</b>{badge}" + (f" <small>({extra})</small>" if extra else "")


def _cutoffs(cutoffs: Cutoffs | None) -> str:
    return e(cutoffs.describe()) if cutoffs else "—"


def sources_html(answer: Answer) -> str:
    """The sources panel: strategy, rewritten question, HyDE text, and each used hit's score vs the threshold.

    A knowledge error shows as a generic line: its detail names server paths (the knowledge tab shows it).
    """
    head = (
        f"<div class='kb-sources' data-q='{e(answer.question)}' data-mode='{e(answer.mode)}'><p><b>策略 / Strategy:</b> "
        f"<span class='kb-strategy'>{e(STRATEGY_LABELS[answer.strategy])}</span> · "
        f"<b>模式 / Mode:</b> {mode_served(answer.mode, answer.thresholds)} · "
        f"<b>阈值 / Threshold:</b> {_cutoffs(answer.thresholds)}</p>"
    )
    parts = [head]
    if answer.within is not None:
        parts.append(f"<p class='kb-filter'><b>分类 / Categories:</b> {e(answer.within.describe())}</p>")
    if answer.notice:
        parts.append(f"<p class='kb-notice'>{warn(answer.notice)}</p>")
    if answer.rule is not None:  # the file's name only: its folder is the server's
        r = answer.rule
        parts.append(
            f"<p class='kb-rule'><b>规则 / Rule:</b> {e(r.kind)} <code>{e(r.pattern)}</code> → {e(r.entry_id)} "
            f"<small>({e(RULES_FILE)} 第 {r.line} 行 / line {r.line})</small></p>"
        )
    if answer.rewritten:
        parts.append(f"<p class='kb-rewritten'><b>检索用的问题 / Searched as:</b> {e(answer.rewritten)}</p>")
    if answer.phrasings:
        parts.append(
            "<p class='kb-phrasings'><b>改写的问法 / Phrasings searched:</b> "
            f"{' · '.join(e(p) for p in answer.phrasings)}</p>"
        )
    if answer.hypothetical:
        parts.append(f"<p class='kb-hyde'><b>HyDE 假设答案 / Hypothetical answer:</b> {e(answer.hypothetical)}</p>")
    if answer.reasoning:
        parts.append(
            "<details class='kb-reasoning'><summary>模型的思考过程 / The model's reasoning</summary>"
            f"<pre style='white-space:pre-wrap'>{e(answer.reasoning)}</pre></details>"
        )
    offered = {o.id for o in answer.options}
    shown = answer.hits or [h for h in answer.candidates if h.entry.id in offered]
    if shown:
        if not answer.hits:
            parts.append("<p class='kb-offered'><b>提供的选项 / Offered:</b></p>")
        rows = "".join(
            f"<tr><td>[{i}]</td><td title='{e(h.entry.id)}'>{e(h.entry.query)}"
            f"{'<br><small>↳ ' + e(h.subquestion) + '</small>' if h.subquestion else ''}{_passages(h)}</td>"
            f"<td>{_scores(h, answer.thresholds)}</td><td>{e(searcher_label(h.searcher))}</td></tr>"
            for i, h in enumerate(shown, 1)
        )
        parts.append(
            "<table class='kb-hits'><tr><th>#</th><th>来源 / Source</th><th>相关度 / Relevance</th>"
            f"<th>检索器 / Searcher</th></tr>{rows}</table>"
        )
    elif answer.thresholds is None:  # small talk, a hand-off, a refusal: the knowledge was never searched
        parts.append(f"<p class='kb-not-searched'>{e(NOT_SEARCHED)}</p>")
    else:
        parts.append("<p>没有达到阈值的知识条目。/ No knowledge entry passed the threshold.</p>")
    if answer.knowledge_error:
        parts.append(f"<p class='kb-notice kb-knowledge-problem'>⚠️ {e(KNOWLEDGE_PROBLEM)}</p>")
    parts.append("</div>")
    return "".join(parts)


def knowledge_error_html(error: str | None) -> str:
    """The knowledge tab's view of a broken knowledge file, in full (for admins), or nothing."""
    if not error:
        return ""
    return (
        "<div class='kb-notice'>⚠️ 知识文件有错误，仍在使用上一次有效的知识。/ A knowledge file has errors; "
        f"the last good knowledge is still serving.<pre>{e(error)}</pre></div>"
    )


def config_error_html(error: str | None) -> str:
    """The knowledge tab's view of a config edit that was not taken (for admins), or nothing."""
    if not error:
        return ""
    return (
        "<div class='kb-notice kb-config-error'>⚠️ config.yaml 的修改有错误，没有生效。/ The last edit of config.yaml "
        f"has an error and was not applied.<pre>{e(error)}</pre></div>"
    )


def rule_problems_html(problems: tuple[str, ...]) -> str:
    """The knowledge tab's view of the rules left out of rules.yaml, each with its file and line, or nothing."""
    if not problems:
        return ""
    return (
        "<div class='kb-notice kb-rule-problems'>⚠️ 规则文件中有规则没有生效，其余规则和知识照常使用。/ Some rules of "
        f"{e(RULES_FILE)} were left out; the other rules and the knowledge serve as usual."
        f"<pre>{e(chr(10).join(problems))}</pre></div>"
    )


def health_html(status: Status) -> str:
    """What is wrong with the knowledge files, the rules and the config, in full, for admins (nothing when all is
    well)."""
    return (
        knowledge_error_html(status.knowledge_error)
        + rule_problems_html(status.rule_problems)
        + config_error_html(status.config_error)
    )


def retrieval_html(query: str, results: Mapping[str, ModeRetrieval], within: EntryFilter | None = None) -> str:
    """Hits of every mode, one table each, with ✓ for hits that pass that mode's threshold."""
    out = [f"<div class='kb-retrieval'><p><b>查询 / Query:</b> {e(query)}</p>"]
    if within is not None:
        out.append(f"<p class='kb-filter'><b>分类 / Categories:</b> {e(within.describe())}</p>")
    for mode, r in results.items():
        out.append(f"<h4 class='kb-mode'>{e(mode)} · 阈值 / threshold {_cutoffs(r.thresholds)}</h4>")
        if r.error:
            out.append(f"<p class='kb-notice'>{warn(r.error)}</p>")
        elif not r.hits:
            out.append("<p>没有结果 / no hits</p>")
        else:
            passed = {h.entry.id for h in r.passed}
            rows = "".join(
                f"<tr><td>{i}</td><td>{'✓' if h.entry.id in passed else '✗'}</td><td>{_scores(h)}</td>"
                f"<td>{e(h.entry.query)}{_passages(h)}</td><td>{e(h.entry.id)}</td></tr>"
                for i, h in enumerate(r.hits, 1)
            )
            out.append(
                "<table class='kb-hits'><tr><th>#</th><th>通过 / Pass</th><th>相关度 / Relevance</th>"
                f"<th>标题 / Title</th><th>ID</th></tr>{rows}</table>"
            )
    out.append("</div>")
    return "".join(out)
