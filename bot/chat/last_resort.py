"""The last resort: the fixed polite reply with "did you mean" suggestions, or the LLM alone with a notice."""

from __future__ import annotations

from collections.abc import Sequence

from bot.chat.offers import clarify_text, confirm_text
from bot.config.settings import LastResortSettings
from bot.search.base import Hit
from bot.texts import DID_YOU_MEAN, UNSURE_HEAD


class LastResort:
    """The fixed polite reply (with 'did you mean' suggestions), or the LLM alone with a visible notice."""

    def __init__(self, settings: LastResortSettings):
        self.settings = settings

    @property
    def uses_llm(self) -> bool:
        """True when configured to let the LLM answer alone."""
        return self.settings.mode == "llm"

    def suggestions(self, candidates: Sequence[Hit]) -> list[str]:
        """The questions of up to ``suggestions`` closest entries below the threshold ("did you mean")."""
        return [hit.entry.query for hit in self.suggested(candidates)]

    def suggested(self, candidates: Sequence[Hit]) -> list[Hit]:
        """The hits behind :meth:`suggestions`: the closest entries, one per distinct question."""
        seen: dict[str, Hit] = {}
        for hit in candidates:
            if len(seen) >= self.settings.suggestions:
                break
            seen.setdefault(hit.entry.query, hit)
        return list(seen.values())

    def fixed_reply(self, candidates: Sequence[Hit], unsure: bool = False) -> str:
        """The configured reply plus the "did you mean" suggestions; ``unsure`` (the best candidate just short of
        the threshold): "我不太确定，您是想问：" and the suggestions as numbered options instead ("您是想问「X」吗？"
        for one)."""
        seen = self.suggestions(candidates)
        if unsure and seen:
            return clarify_text(seen, UNSURE_HEAD) if len(seen) > 1 else confirm_text(seen[0])
        text = self.settings.reply.strip()
        if seen:
            text += f"\n\n{DID_YOU_MEAN}\n" + "\n".join(f"- {q}" for q in seen)
        return text

    @property
    def notice(self) -> str:
        """The notice shown above an LLM-alone answer."""
        return self.settings.notice.strip()
