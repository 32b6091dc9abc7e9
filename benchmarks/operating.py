"""The operator's week: how long a replay of an edit takes, and how well and how fast topics group questions.

**Replay** (``--part replay``): the first 10,000 entries of LCQMC dev (``../shared/data/lcqmc_dev``) as the
knowledge; 10,000 distinct questions as the log's: LCQMC's 4,355 paraphrase questions and 5,645 synthesized ones
(benchmarks/synth.py, spliced from other LCQMC questions). The edit is an import-sized change: 300 entries deleted
and 300 added (the deleted ones' questions reworded by synth). Timed: ``Replayer.replay`` end to end (two staging
indexes built and every question searched in both), sparse and hybrid-e5; for hybrid once with the question vectors
to encode (cold) and once with them stored (warm, as after topics or an earlier replay). Beside each warm replay,
the same replay with the code of ``--baseline`` (a git ref, default main), extracted with ``git archive`` and run in
a process of its own, and whether both found the same changes. Each replay is then run again on the same bot, the
answers before the edit kept from the first (warm cache: what an admin sees once they are kept).

**Topics** (``--part topics``): quality on LCQMC's paraphrase pairs (a question and the entry it paraphrases: the
pair should share a topic), the distance threshold chosen on the first half of the questions and reported on the
second, beside the inbox's near-duplicate grouping (character-bigram Jaccard >= 0.8) on the same texts; then time
to group 100,000 questions (the 15,803 real LCQMC questions' e5 vectors, each repeated with Gaussian noise of
sd 0.01 per dimension and renormalised to reach 100,000: the clustering's cost depends on the count, not the text).

    python -m benchmarks.operating [--part replay|topics|both] [--baseline REF] [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import data_dir, publish

STATE = Path(os.environ.get("KBBOT_BENCH_STATE", "/tmp/kbbot-bench-operating"))
DISTANCES = (0.01, 0.015, 0.02, 0.03, 0.04, 0.06, 0.12)  # the topics' cut tried on half A (0.12: the old default)


def lcqmc() -> tuple[list[dict], list[dict]] | None:
    folder = data_dir() / "lcqmc_dev"
    if not (folder / "knowledge.json").is_file():
        print(f"skipped: {folder} is absent (../shared/data)", file=sys.stderr)
        return None
    knowledge = json.loads((folder / "knowledge.json").read_text(encoding="utf-8"))
    evals = [json.loads(line) for line in (folder / "eval.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return knowledge, evals


def settings_for(folder: Path, mode: str):
    from benchmarks.common import ROOT
    from bot.config.settings import load_settings
    from bot.config.variants import replace

    s = load_settings(ROOT / "config.yaml")
    s = replace(s, "knowledge.path", str(folder))
    s = replace(s, "state_dir", str(STATE / "state"))
    s = replace(s, "knowledge.synonyms", None)
    return replace(s, "retrieval.mode", mode)


BASELINE_RUN = """
import json, sys, time
from pathlib import Path
from benchmarks.operating import settings_for
from bot.evaluation.replay import Question, Replayer
from bot.factory import build_bot, build_store
from bot.knowledge.entries import load_entries
from bot.search.encoders.cache import EmbeddingCache
mode, state = sys.argv[1], Path(sys.argv[2])
job = json.loads((state / "job.json").read_text(encoding="utf-8"))
s = settings_for(state / "knowledge", mode)
bot = build_bot(s)
bot.search.index.searcher(mode)
store = EmbeddingCache(state / "state" / "embeddings" / "questions.sqlite", max_rows=400_000)
replayer = Replayer(bot.search, build_store(s), None, None, store if mode == "hybrid" else None)
questions = [Question(q, "log") for q in job["questions"]]
start = time.perf_counter()
replay = replayer.replay(load_entries(state / "after"), set(job["added"]), mode, questions)
out = replay.to_dict()
out["seconds"] = time.perf_counter() - start
print(json.dumps(out, ensure_ascii=False))
"""


def baseline_tree(ref: str) -> Path:
    """The code of git ``ref`` (the baseline a user runs today) extracted beside the benchmark's state."""
    import shutil
    import subprocess

    from benchmarks.common import ROOT

    tree = STATE / f"baseline-{ref}"
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "bot", "benchmarks", "config.yaml"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def baseline_replay(tree: Path, mode: str) -> dict:
    """``Replayer.replay`` of the same job timed with the baseline's code, in a process of its own."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(tree), "KBBOT_BENCH_STATE": str(STATE)}
    done = subprocess.run(
        [sys.executable, "-c", BASELINE_RUN, mode, str(STATE)],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def same_changes(a: dict, b: dict) -> bool:
    """True when two replays found the same questions gaining, losing and changing, with the same entries."""
    return all(a[k] == b[k] for k in ("replayed", "gained", "lost", "changed"))


VECTORS = {"cold": "encoded in the replay", "warm": "stored"}  # a hybrid replay's question vectors


def replay_rows(knowledge: list[dict], evals: list[dict], baseline_ref: str | None, quick: bool = False) -> list[str]:
    from benchmarks.synth import synthesize
    from bot.evaluation.replay import Question, Replayer
    from bot.factory import build_bot, build_store
    from bot.knowledge.entries import Entry, load_entries, write_entries
    from bot.search.encoders.cache import EmbeddingCache
    from bot.search.tokenizer import Tokenizer

    folder = STATE / "knowledge"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lcqmc.json").write_text(json.dumps(knowledge[:10_000], ensure_ascii=False), encoding="utf-8")
    entries = load_entries(folder)
    cut = Tokenizer().tokenize
    source = [Entry(f"q:{i}", r["query"], r["document"]) for i, r in enumerate(knowledge)]
    extra = [e.query for e in synthesize(source, len(source) + 5_645 + 300, cut)[len(source) :]]
    questions = [Question(r["question"], "log") for r in evals] + [Question(q, "log") for q in extra[:5_645]]
    questions = list({q.text: q for q in questions}.values())[:10_000]
    rng = random.Random(0)
    gone = set(rng.sample([e.id for e in entries], 300))
    added = [Entry(f"lcqmc:new{i}", q, q) for i, q in enumerate(extra[5_645:])]
    after = [e for e in entries if e.id not in gone] + added
    write_entries(after, STATE / "after")  # validated like a real import
    after = load_entries(STATE / "after")
    job = {"questions": [q.text for q in questions], "added": [e.id for e in added]}
    (STATE / "job.json").write_text(json.dumps(job, ensure_ascii=False), encoding="utf-8")
    tree = baseline_tree(baseline_ref) if baseline_ref else None
    vectors = STATE / "state" / "embeddings" / "questions.sqlite"
    rows = []
    for mode in ("sparse", "hybrid"):
        s = settings_for(folder, mode)
        store = build_store(s)
        start = time.perf_counter()
        bot = build_bot(s)
        live = bot.search.index.searcher(mode)
        built = time.perf_counter() - start
        # The baseline a user has without a replay: every question searched once on the live index, as answering
        # them would (a replay searches each twice, before and after, and builds two staging indexes).
        start = time.perf_counter()
        for q in [] if quick else questions:
            live.search(q.text, bot.search.top_k)
        once = "—" if quick else f"{time.perf_counter() - start:.1f}"
        for label in ("cold", "warm") if mode == "hybrid" and not quick else ("warm",) if mode == "hybrid" else ("—",):
            if label == "cold":
                vectors.unlink(missing_ok=True)
            bot = build_bot(s)  # a fresh bot each time, as the baseline's process meets it: no cache warmed before
            bot.search.index.searcher(mode)
            question_store = EmbeddingCache(vectors, max_rows=400_000) if mode == "hybrid" else None
            replayer = Replayer(bot.search, store, None, None, question_store)
            start = time.perf_counter()
            replay = replayer.replay(after, {e.id for e in added}, mode, questions)
            seconds = time.perf_counter() - start
            # What an admin meets on a second edit, or on the first once the served app warmed the answers in the
            # knowledge as it is after it loaded: only the edited side is built and searched.
            start = time.perf_counter()
            again = replayer.replay(after, {e.id for e in added}, mode, questions)
            kept = time.perf_counter() - start
            if again.to_dict() | {"seconds": 0} != replay.to_dict() | {"seconds": 0}:
                raise SystemExit(f"{mode}: the replay with the answers before the edit kept found other changes")
            if question_store is not None:
                question_store.close()
            # The cold rows differ from the warm ones by the questions' encoding, which this change leaves alone:
            # the baseline is timed warm only (its cold replay would encode the same 10,000 questions again).
            old = baseline_replay(tree, mode) if tree is not None and label != "cold" else None
            same = "—" if old is None else "yes" if same_changes(old, replay.to_dict()) else "**no**"
            was = f"{old['seconds']:.1f}" if old is not None else "—"
            ratio = f"{seconds / old['seconds']:.2f}" if old is not None else "—"
            rows.append(
                f"| {mode} | {VECTORS.get(label, label)} | {len(entries):,} | {replay.replayed:,} | {len(replay.gained)} | "
                f"{len(replay.lost)} | {len(replay.changed)} | {was} | {seconds:.1f} | {kept:.1f} | {ratio} | {same} | "
                f"{once} | {built:.0f} |"
            )
            print(rows[-1], flush=True)
    return rows


def pair_scores(labels: dict[str, int], pairs: list[tuple[str, str]]) -> tuple[float, float, float]:
    """Recall of the gold pairs, precision of the same-topic pairs against them, and F1."""
    together = sum(labels[a] == labels[b] for a, b in pairs)
    groups: dict[int, int] = {}
    for label in labels.values():
        groups[label] = groups.get(label, 0) + 1
    same = sum(n * (n - 1) // 2 for n in groups.values())
    recall = together / len(pairs) if pairs else 0.0
    precision = together / same if same else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return recall, precision, f1


def bigram_labels(texts: list[str]) -> dict[str, int]:
    from bot.conversations.inbox import normalise, similar_pairs

    norms = [normalise(t) for t in texts]
    parent = list(range(len(texts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in similar_pairs(norms):
        parent[find(a)] = find(b)
    return {t: find(i) for i, t in enumerate(texts)}


def topic_rows(knowledge: list[dict], evals: list[dict]) -> tuple[list[str], list[str], float]:
    from bot.conversations.topics import QUESTIONS_FILE, Asked, QuestionVectors, cluster, group
    from bot.search.encoders import E5Encoder
    from bot.search.encoders.cache import EmbeddingCache

    encoder = E5Encoder(STATE / "state" / "embeddings", 1, 32, "original", build_workers=2)
    store = EmbeddingCache(STATE / "state" / "embeddings" / QUESTIONS_FILE, max_rows=400_000)
    vectors = QuestionVectors(encoder, store)
    gold = [(r["question"], knowledge[int(r["gold_ids"][0])]["query"]) for r in evals if r.get("gold_ids")]
    half = len(gold) // 2
    texts_all = list(dict.fromkeys([t for pair in gold for t in pair] + [r["query"] for r in knowledge]))
    start = time.perf_counter()
    found, _ = vectors.vectors(texts_all, None)
    encoded = time.perf_counter() - start
    print(f"vectors of {len(texts_all)} questions in {encoded:.0f} s", flush=True)

    def labels_of(texts: list[str], distance: float) -> dict[str, int]:
        rows = np.stack([found[t] for t in texts])
        return dict(zip(texts, (int(x) for x in cluster(rows, np.ones(len(texts)), distance)), strict=True))

    chosen, best = 0.0, -1.0
    quality = []
    for name, pairs in (("A (choose)", gold[:half]), ("B (report)", gold[half:])):
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        pairs = [(a, b) for a, b in pairs if a != b]
        if name.startswith("A"):
            for distance in DISTANCES:
                f1 = pair_scores(labels_of(texts, distance), pairs)[2]
                print(f"  distance {distance}: pair F1 {f1:.3f} on A", flush=True)
                if f1 > best:
                    chosen, best = distance, f1
        start = time.perf_counter()
        ours = pair_scores(labels_of(texts, chosen), pairs)
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        base = pair_scores(bigram_labels(texts), pairs)
        base_s = time.perf_counter() - start
        for system, (r, p, f), secs in (
            (f"e5 + agglomerative, distance {chosen}", ours, ours_s),
            ("inbox bigram Jaccard ≥ 0.8", base, base_s),
        ):
            quality.append(f"| {name} | {len(texts):,} | {system} | {r:.3f} | {p:.3f} | {f:.3f} | {secs:.1f} |")
            print(quality[-1], flush=True)

    real = np.stack([found[t] for t in texts_all])
    rng = np.random.default_rng(0)
    reps = -(-100_000 // len(real))
    big = np.repeat(real, reps, axis=0)[:100_000] + rng.normal(scale=0.01, size=(100_000, real.shape[1]))
    big = (big / np.linalg.norm(big, axis=1, keepdims=True)).astype(np.float32)
    asked = [Asked(f"q{i}", f"q{i}", 1 + (i % 7)) for i in range(100_000)]
    speed = []
    start = time.perf_counter()
    topics = group(asked, big, chosen)
    seconds = time.perf_counter() - start
    speed.append(f"| e5 vectors + k-means micro-clusters + agglomerative | 100,000 | {len(topics):,} | {seconds:.1f} |")
    from bot.conversations.inbox import similar_pairs

    texts = [t + ("" if i < len(texts_all) else f"{i}") for i, t in enumerate((texts_all * reps)[:100_000])]
    start = time.perf_counter()
    similar_pairs(texts)
    seconds = time.perf_counter() - start
    speed.append(f"| inbox bigram Jaccard ≥ 0.8 (PPJoin) on the texts | 100,000 | — | {seconds:.1f} |")
    for row in speed:
        print(row, flush=True)
    return quality, speed, chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=["replay", "topics", "both"], default="both")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="replay only: skip the live-search column and the hybrid replay whose question vectors are encoded",
    )
    parser.add_argument(
        "--baseline", default="main", help="git ref whose replay is timed beside this tree's ('' to skip)"
    )
    args = parser.parse_args(argv)
    data = lcqmc()
    if data is None:
        return 0
    load = os.getloadavg()[0]
    machine = (
        f"{platform.machine()}, {os.cpu_count()} CPUs shared with other work (load average {load:.1f} at the start)"
    )
    if args.part in ("replay", "both"):
        rows = replay_rows(*data, args.baseline or None, args.quick)
        publish(
            "replay",
            "Replay before publishing",
            "`python -m benchmarks.operating --part replay` · knowledge: the first 10,000 LCQMC dev entries; "
            "questions: 10,000 distinct (LCQMC's 4,355 paraphrase questions and 5,645 synthesized by "
            "benchmarks/synth.py); edit: 300 entries deleted and 300 added. Seconds of `Replayer.replay` (two "
            f"staging indexes built, every question searched in both, two threads), each on a freshly built bot; "
            f"{machine}. Question vectors (hybrid): e5 vectors of the questions encoded in the replay, or stored by an "
            f"earlier replay or topics. *replay s, {args.baseline or 'baseline'}*: the same replay with the code of git "
            f"`{args.baseline or '—'}` (the baseline), in its own process in the same run. *replay s, this, cold "
            "cache*: the first replay on a fresh bot (both sides built and searched); *replay s, this, warm cache*: "
            "the same replay again on that bot, the answers before the edit kept from the first (what an admin sees "
            "on a second edit, or on the first once the served app has warmed them in the background after the "
            "knowledge loaded: only the edited side is built and searched); it must find the same changes. "
            "*same changes*: the baseline and this found the same questions gaining, losing and changing, with the "
            "same entries (**no** is expected where this tree decides differently from the baseline: sparse and "
            'hybrid-e5 were retuned since, BENCHMARKS.md "The decision ladder"; the faster replay\'s exactness is '
            "then shown by tests/evaluation/test_replay_exact.py, a replay's answers equal to those of bots built anew "
            f"over each side). *cold / {args.baseline or 'baseline'}*: this cold replay's seconds over the baseline's "
            "(on a busy machine the ratio is what compares). Live search s: the same "
            "questions searched once on the live index of a fresh bot, one thread (what answering them costs; "
            "— : not measured in this run, `--quick`). "
            "Index s: the live index's first build (not part of a replay).",
            [
                f"| mode | question vectors | entries | questions | gained | lost | changed | "
                f"replay s, {args.baseline or 'baseline'} | replay s, this, cold cache | "
                f"replay s, this, warm cache | cold / {args.baseline or 'baseline'} | same changes | live search s | "
                "index s |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
                *rows,
            ],
            write=not args.no_write,
        )
    if args.part in ("topics", "both"):
        quality, speed, chosen = topic_rows(*data)
        publish(
            "topics",
            "Topics",
            "`python -m benchmarks.operating --part topics` · LCQMC dev paraphrase pairs (a question and the entry "
            "it paraphrases), split in two halves: the distance threshold is chosen on A (best pair F1 of "
            f"{', '.join(map(str, DISTANCES))}: {chosen}) and reported on B, beside the inbox's near-duplicate grouping. Pair recall: gold "
            "pairs that share a group; precision: same-group pairs that are gold pairs (understated: LCQMC has "
            "unlabelled paraphrases). Then 100,000 questions grouped (15,803 real e5 vectors repeated with noise, "
            f"see the script); {machine}.",
            [
                "| half | texts | grouping | pair recall | pair precision | pair F1 | s |",
                "|---|---|---|---|---|---|---|",
                *quality,
                "",
                "| grouping | questions | groups | s |",
                "|---|---|---|---|",
                *speed,
            ],
            write=not args.no_write,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
