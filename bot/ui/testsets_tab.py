"""The admin tab for test sets, the self-check and the knowledge linter: upload labelled questions, run them on
the current knowledge (the numbers of ``python -m bot eval``), see the history and what got better or worse."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import gradio as gr

from bot.config.settings import Settings
from bot.errors import BotError
from bot.evaluation.knowledge_check import lint, self_collisions
from bot.evaluation.testsets import TestRun, TestSetStore, diff
from bot.knowledge_base import KnowledgeBase
from bot.ui.events import PRIVATE
from bot.ui.guard import discard_uploaded_file
from bot.ui.knowledge_tab import read_upload

e = html.escape


def run_html(run: TestRun, previous: TestRun | None) -> str:
    """One run's numbers and the cases that changed since the previous run."""
    s = run.summary
    changed = diff(previous, run)
    cases = run.results

    def listed(ids: tuple[str, ...]) -> str:
        return "".join(f"<li>{e(cases[i]['question'])}</li>" for i in ids) or "<li>—</li>"

    return (
        f"<div class='kb-testrun'><p><b>{e(run.testset)}</b> · {e(run.mode)} · {s['questions']} questions · "
        f"recall@1 <b>{s['recall']['1']:.3f}</b> · recall@3 {s['recall']['3']:.3f} · "
        f"wrong / 100 <b>{s['wrong_per_100']}</b> · decision F1 {s['decision_f1']:.3f}</p>"
        f"<p>比上次好 / Better than the last run:</p><ul class='kb-better'>{listed(changed.better)}</ul>"
        f"<p>比上次差 / Worse than the last run:</p><ul class='kb-worse'>{listed(changed.worse)}</ul></div>"
    )


def history_html(runs: list[TestRun]) -> str:
    """The runs of a test set, newest first."""
    rows = "".join(
        f"<tr><td>{e(r.time)}</td><td>{e(r.mode)}</td><td>{r.summary['recall']['1']:.3f}</td>"
        f"<td>{r.summary['wrong_per_100']}</td><td>{r.summary['decision_f1']:.3f}</td></tr>"
        for r in runs
    )
    head = "<tr><th>时间 / Time</th><th>模式 / Mode</th><th>R@1</th><th>wrong/100</th><th>decision F1</th></tr>"
    return f"<table class='kb-test-history'>{head}{rows}</table>" if runs else ""


class TestSetHandlers:
    """Callbacks of the test-set tab (admins only)."""

    __test__ = False  # not a pytest test class

    def __init__(self, kb: KnowledgeBase, settings: Settings):
        self.search = kb.search
        self.bot = kb.bot
        self.settings = settings
        self.store = TestSetStore(settings.resolve(settings.state_dir) / "testsets.sqlite")

    def names(self, value: str | None = None):
        """The set picker's choices (the given or the first set chosen)."""
        names = self.store.names()
        return gr.update(choices=names, value=value if value in names else (names[0] if names else None))

    def save(self, path: str | None, name: str):
        """Store an uploaded CSV or JSON-lines test set; (status, picker)."""
        if not path:
            return "<div class='kb-notice'>❌ 请先选择文件 / Choose a file first</div>", gr.skip()
        try:
            stem = (name or "").strip() or Path(path).stem
            count = self.store.save(stem, Path(path).name, read_upload(Path(path)), self.search.index.entries)
        except UnicodeDecodeError:
            return "<div class='kb-notice'>❌ 文件不是 UTF-8 文本 / The file is not UTF-8 text</div>", gr.skip()
        except BotError as exc:
            return f"<div class='kb-notice'>❌ {e(str(exc))}</div>", gr.skip()
        finally:
            discard_uploaded_file(path)
        return f"<div class='kb-ok'>✅ 已保存 / Saved {e(stem)}: {count} questions</div>", self.names(stem)

    def run(self, name: str | None):
        """Run the chosen set on the current knowledge; (result html, history html)."""
        if not name:
            return "<div class='kb-notice'>❌ 请先选择测试集 / Choose a test set first</div>", gr.skip()
        previous = next(iter(self.store.history(name, 1)), None)
        try:
            current = self.store.run(name, self.bot, self.search.current_mode())
        except BotError as exc:
            return f"<div class='kb-notice'>❌ {e(str(exc))}</div>", gr.skip()
        return run_html(current, previous), history_html(self.store.history(name))

    def history(self, name: str | None) -> str:
        """The runs of the chosen set."""
        return history_html(self.store.history(name)) if name else ""

    def self_check(self) -> str:
        """Every stored question and phrasing that retrieves another entry first."""
        index, mode = self.search.index, self.search.current_mode()
        collisions = self_collisions(index.entries, index.searcher(mode).search)
        rows = "".join(
            f"<li>{e(c.entry_id)}: {e(c.phrasing)} → {e(c.winner_id)} (own rank {c.rank or '>10'})</li>"
            for c in collisions
        )
        total = sum(len(dict.fromkeys(p for p in x.phrasings if p.strip())) for x in index.entries)
        return (
            f"<p>{mode}: {total - len(collisions)}/{total} phrasings retrieve their own entry first.</p><ul>{rows}</ul>"
        )

    def lint(self) -> str:
        """The knowledge linter's findings on the current knowledge (magnets probed with a phrasing sample)."""
        index, mode = self.search.index, self.search.current_mode()
        report = lint(
            index.entries, index.searcher(mode).search, index.tokenizer.tokenize, self.settings.knowledge.lint
        )
        items = "".join(f"<li>[{e(f.kind)}] {e(' ↔ '.join(f.entry_ids))}: {e(f.detail)}</li>" for f in report.findings)
        return f"<p>{report.entries} entries · {len(report.findings)} findings</p><ul class='kb-lint'>{items}</ul>"


def testsets_tab(kb: KnowledgeBase, settings: Settings) -> tuple[TestSetHandlers, Any]:
    """Lay out and wire the tab's content in the current (admin-only) Blocks context; (handlers, set picker)."""
    h = TestSetHandlers(kb, settings)
    gr.Markdown(
        "上传带标注的问题（CSV：question, expected（条目 id 或 none）；或 eval 的 JSON lines），在当前知识上运行。"
        "/ Upload labelled questions (CSV: question, expected — an entry id or none; or eval JSON lines) and run them "
        "on the current knowledge: the numbers of `python -m bot eval`."
    )
    with gr.Row():
        upload = gr.File(
            file_types=[".csv", ".jsonl"], type="filepath", label="测试集 / Test set", elem_id="kb-ts-file"
        )
        name = gr.Textbox(label="名称 / Name", elem_id="kb-ts-name")
    save = gr.Button("保存 / Save", elem_id="kb-ts-save")
    saved = gr.HTML(elem_id="kb-ts-saved")
    with gr.Row():
        pick = gr.Dropdown([], label="测试集 / Test set", elem_id="kb-ts-pick")
        run = gr.Button("运行 / Run", variant="primary", elem_id="kb-ts-run")
    result = gr.HTML(elem_id="kb-ts-result")
    history = gr.HTML(elem_id="kb-ts-history")
    with gr.Row():
        check = gr.Button("自检：每个问法找回自己的条目 / Self-check", elem_id="kb-ts-selfcheck")
        linted = gr.Button("知识检查 / Lint the knowledge", elem_id="kb-ts-lint")
    report = gr.HTML(elem_id="kb-ts-report")
    save.click(h.save, [upload, name], [saved, pick], api_name="testset_save")
    run.click(h.run, [pick], [result, history], api_name="testset_run")
    pick.change(h.history, [pick], [history], **PRIVATE)
    check.click(h.self_check, None, [report], api_name="testset_self_check")
    linted.click(h.lint, None, [report], api_name="knowledge_lint")
    return h, pick


def testsets_page(demo: Any, kb: KnowledgeBase, settings: Settings) -> Any:
    """The test-set tab, hidden until an admin's page loads; filled by its select (an admin event)."""
    with demo.admin_only():
        with gr.Tab("测试集 / Test sets", id="testsets", visible=False) as tab:
            h, pick = testsets_tab(kb, settings)
        tab.select(h.names, [pick], [pick], **PRIVATE)
    return tab
