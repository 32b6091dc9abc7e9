"""No edit published blind, in the knowledge tab: the replay and the publisher check before a change.

Before a save, delete, publish or import changes what visitors get, the replay (bot/evaluation/replay.py) runs
on it; when some questions would lose their answer or get another entry's, the tab shows them and waits for a
confirmation. With ``knowledge.require_approval`` only a publisher (bot/ui/publishers.py) publishes; an admin
alone saves new entries and drafts.
"""

from __future__ import annotations

import html
import logging
from typing import Any

from bot.config.settings import Settings
from bot.errors import BotError
from bot.evaluation.replay import Change, Edit, Replay, Replayer
from bot.knowledge_base import KnowledgeBase
from bot.ui.publishers import PublisherAuth

e = html.escape
log = logging.getLogger(__name__)
SHOWN = 20  # changes listed per kind; the rest are counted
NEEDS_PUBLISHER = (
    "需要发布者登录才能发布（/publisher/login）；可以先存为草稿。/ Publishing needs a publisher's login "
    "(/publisher/login); save it as a draft meanwhile."
)


def _answer(side: Any) -> str:
    return f"{e(side.id)} {e(side.query)} <small>{side.relevance:.2f}</small>" if side else "—"


def replay_html(replay: Replay, asking: bool) -> str:
    """The replay's diff: lost, changed, then gained questions with the entry before and after (escaped)."""
    rows = []
    for title, changes in (
        ("失去答案 / Lose their answer", replay.lost),
        ("换了条目 / Change entry", replay.changed),
        ("新得到答案 / Gain an answer", replay.gained),
    ):
        if not changes:
            continue
        rows.append(f"<tr><th colspan='4'>{title} ({len(changes)})</th></tr>")
        for c in list(changes)[:SHOWN]:
            rows.append(_row(c))
        if len(changes) > SHOWN:
            rows.append(f"<tr><td colspan='4'>… +{len(changes) - SHOWN}</td></tr>")
    head = f"<p class='kb-replay-summary'>{e(replay.summary())}</p>"
    ask = (
        "<p class='kb-notice'><b>有问题会失去答案或换成别的条目，确认后才会保存。/ Some questions would lose their "
        "answer or get another entry's: confirm to go ahead.</b></p>"
        if asking
        else ""
    )
    table = (
        "<table class='kb-hits kb-replay'><tr><th>问题 / Question</th><th>来源 / Source</th><th>之前 / Before</th>"
        "<th>之后 / After</th></tr>" + "".join(rows) + "</table>"
        if rows
        else ""
    )
    return f"<div id='kb-k-replay'>{ask}{head}{table}</div>"


def _row(c: Change) -> str:
    return (
        f"<tr><td>{e(c.question)} <small>×{c.asked}</small></td><td>{e(c.source)}</td>"
        f"<td>{_answer(c.before)}</td><td>{_answer(c.after)}</td></tr>"
    )


class EditReview:
    """The replay before a change and the publisher check, for the knowledge tab."""

    def __init__(
        self, replayer: Replayer | None, require_approval: bool = False, publishers: PublisherAuth | None = None
    ):
        self.replayer = replayer
        self.require_approval = require_approval
        self.publishers = publishers

    def may_publish(self, request: Any) -> bool:
        """True when publishing needs no approval, or ``request`` carries a publisher's cookie."""
        if not self.require_approval:
            return True
        return self.publishers is not None and request is not None and self.publishers.publisher(request) is not None

    def replay(self, edit: Edit) -> Replay | None:
        """The replay of ``edit`` (None without a replayer, or when the edit itself is refused: the save says why)."""
        if self.replayer is None:
            return None
        try:
            return self.replayer.replay_edit(edit)
        except BotError:
            return None  # the real write refuses it with the store's message
        except Exception:  # a replay that fails must not block editing: logged, and the edit goes on unchecked
            log.exception("the replay of an edit failed")
            return None

    def hold(self, edit: Edit, confirmed: bool) -> tuple[str | None, str]:
        """(the diff to confirm, or None to go ahead; the diff to show after the write)."""
        replay = self.replay(edit)
        if replay is None:
            return None, ""
        if replay.needs_confirmation and not confirmed:
            return replay_html(replay, asking=True), ""
        return None, replay_html(replay, asking=False)


def edit_review(kb: KnowledgeBase, settings: Settings, publishers: PublisherAuth | None = None) -> EditReview:
    """The knowledge tab's review from ``knowledge.replay`` and ``require_approval``.

    ``publishers``: the server's publisher logins (None: built from ``knowledge.publishers``, for a page served
    alone).
    """
    from bot.evaluation.replay import replayer_from_settings

    k = settings.knowledge
    if publishers is None and k.publishers:
        publishers = PublisherAuth.publishers(settings)
    replayer = replayer_from_settings(kb.search, kb.store, kb.recorder, settings)
    # An admin's replay then searches only the edited side: the other's answers are ready for the live knowledge.
    replayer.keep_warm()
    return EditReview(replayer, k.require_approval, publishers)
