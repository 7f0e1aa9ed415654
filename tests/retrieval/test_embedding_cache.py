"""The passage embedding cache: a collection is encoded once per model; a changed text or model
is encoded again; files appear whole or not at all."""

import multiprocessing
import shutil
import time
from typing import NamedTuple

import numpy as np
import pytest

from retrieval import dense, embedding_cache
from retrieval.dense import DenseScorer, default_model
from retrieval.models import Document, Retriever
from tests.factories import make_collection, make_text_passages


class PassageStub(NamedTuple):
    """What the cache reads of a passage (a plain row, as runs pass PassageRow)."""

    pk: int
    collection_id: int
    document_id: int
    retrieval_text: str


pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]

TEXTS = [
    f"Passage {n} tells of {topic}."
    for n, topic in enumerate(
        ["whales", "a ball at Netherfield", "a river steamer", "green lights", "a naval officer", "a storm", "letters"]
    )
]


@pytest.fixture
def encoded(monkeypatch):
    """Every passage text the dense encoder is asked to embed, in order."""
    texts = []
    real_encode = dense.encode

    def counting_encode(model, batch, **kwargs):
        if kwargs.get("label") == "passages":
            texts.extend(batch)
        return real_encode(model, batch, **kwargs)

    monkeypatch.setattr(dense, "encode", counting_encode)
    return texts


def scorer(model_path: str = "") -> DenseScorer:
    """A fresh scorer, as a new run (or another worker) would make: nothing held in memory."""
    return DenseScorer(Retriever(name="minilm", kind=Retriever.Kind.DENSE, model_path=model_path))


def test_a_second_run_over_the_same_collection_encodes_nothing(encoded):
    passages = make_text_passages(make_collection(), TEXTS)

    first = scorer().score(["whales and storms"], passages)
    second = scorer().score(["whales and storms"], passages)

    assert encoded == TEXTS
    np.testing.assert_array_equal(first, second)


def test_scoring_one_candidate_set_at_a_time_encodes_only_the_missing_passages(encoded):
    passages = make_text_passages(make_collection(), TEXTS)
    run = scorer()

    run.score(["q"], passages[:4])
    run.score(["q"], passages[2:])

    assert encoded == TEXTS  # passages 2 and 3 came from the cache the second time


def test_a_changed_passage_text_is_encoded_again(encoded):
    passages = make_text_passages(make_collection(), TEXTS[:3])
    scorer().score(["q"], passages)
    passages[1].text = "An entirely new text about a lighthouse."
    passages[1].save()

    scores = scorer().score(["a lighthouse"], passages)

    assert encoded == [*TEXTS[:3], "An entirely new text about a lighthouse."]
    model = dense.load_model(default_model(), "cpu")
    expected = model.encode(["a lighthouse"]) @ model.encode([p.retrieval_text for p in passages]).T
    np.testing.assert_allclose(scores, expected, atol=1e-5)


def test_a_changed_model_gets_its_own_cache(encoded, tmp_path):
    passages = make_text_passages(make_collection(), TEXTS[:3])
    copy = tmp_path / "minilm-copy"
    shutil.copytree(default_model(), copy)
    scorer().score(["q"], passages)
    scorer(str(copy)).score(["q"], passages)  # same files: same identity, cache hit
    assert encoded == TEXTS[:3]

    with open(copy / "README.md", "a") as readme:  # any change to the model's files
        readme.write("\nfine-tuned\n")
    scorer(str(copy)).score(["q"], passages)

    assert encoded == TEXTS[:3] * 2


def test_each_book_has_its_own_shard_of_whole_files(data_dir):
    collection = make_collection()
    passages = make_text_passages(collection, TEXTS)
    books = [Document.objects.create(collection=collection, external_id=f"b{n}", title=f"B{n}") for n in range(2)]
    for index, passage in enumerate(passages):
        passage.document = books[index % 2]
        passage.save()

    scorer().score(["q"], passages)

    shards = sorted(path.parent.name for path in (data_dir / "embeddings").rglob("*.npz"))
    assert shards == [f"document-{books[0].pk}", f"document-{books[1].pk}"]
    assert not list((data_dir / "embeddings").rglob(".*.tmp"))


def test_a_failed_write_leaves_no_file_and_the_next_run_encodes_again(monkeypatch, encoded, data_dir):
    passages = make_text_passages(make_collection(), TEXTS[:2])

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(embedding_cache.np, "savez", disk_full)
        with pytest.raises(OSError):
            scorer().score(["q"], passages)
    assert not list((data_dir / "embeddings").rglob("*.npz"))  # (the lock file stays: it holds no data)

    scorer().score(["q"], passages)

    assert encoded == TEXTS[:2] * 2


def test_many_small_segments_are_merged_when_a_shard_is_loaded(monkeypatch, encoded, data_dir):
    monkeypatch.setattr(embedding_cache, "MAX_SEGMENTS", 2)
    passages = make_text_passages(make_collection(), TEXTS[:4])
    writer = scorer()
    for passage in passages:  # one candidate set, hence one segment, per passage
        writer.score(["q"], [passage])
    assert len(list((data_dir / "embeddings").rglob("*.npz"))) == 4

    scores = scorer().score(["q"], passages)

    assert len(list((data_dir / "embeddings").rglob("*.npz"))) == 1
    assert encoded == TEXTS[:4]
    model = dense.load_model(default_model(), "cpu")
    np.testing.assert_allclose(scores, model.encode(["q"]) @ model.encode(TEXTS[:4]).T, atol=1e-5)


def _encode_in_another_process(root, passages, log) -> None:
    """A second worker asking for the same passages: encodes slowly, logs what it encoded."""

    def slow_encode(texts):
        with open(log, "a") as stream:
            stream.write("".join(f"{text}\n" for text in texts))
        time.sleep(0.5)
        return np.ones((len(texts), 3), dtype=np.float32)

    embedding_cache.EmbeddingCache(root, "model").embeddings(passages, slow_encode)


def test_shards_on_two_processes_encode_shared_passages_once(tmp_path):
    """Two shards of one candidate set, on two worker processes, both ask for its passages at
    once: one encodes them while the other waits for the lock, then reads them from disk."""
    passages = [PassageStub(pk, 1, 7, f"window {pk}") for pk in range(20)]
    log = tmp_path / "encoded.txt"
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_encode_in_another_process, args=(tmp_path / "cache", passages, log)) for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)

    assert [worker.exitcode for worker in workers] == [0, 0]
    assert sorted(log.read_text().splitlines()) == sorted(f"window {pk}" for pk in range(20))
    vectors = embedding_cache.EmbeddingCache(tmp_path / "cache", "model").embeddings(passages, pytest.fail)
    assert vectors.shape == (20, 3)


def _hold_a_claim(root, keys, held, release) -> None:
    """Another worker encoding `keys`: it holds their claim until told to release it."""
    with embedding_cache.EmbeddingCache(root, "model")._claimed(keys, collection_id=1):
        held.set()
        release.wait(60)


def _ask_for(root, passages) -> None:
    embedding_cache.EmbeddingCache(root, "model").embeddings(
        passages, lambda texts: np.ones((len(texts), 3), np.float32)
    )


def test_a_worker_encoding_other_passages_of_the_same_book_does_not_wait_for_another(tmp_path):
    """The lock claims the passages being encoded, not their book: while another worker holds the
    claim on windows 0-9 of book 7, windows 10-19 of the same book are encoded at once, and
    asking for windows 0-9 waits until that claim is released."""
    first, second = ([PassageStub(pk, 1, 7, f"window {pk}") for pk in range(start, start + 10)] for start in (0, 10))
    keys = sorted((passage.pk, embedding_cache.text_digest(passage.retrieval_text)) for passage in first)
    root, context = tmp_path / "cache", multiprocessing.get_context("fork")
    held, release = context.Event(), context.Event()
    holder = context.Process(target=_hold_a_claim, args=(root, keys, held, release))
    holder.start()
    assert held.wait(60)

    other = context.Process(target=_ask_for, args=(root, second))
    waiting = context.Process(target=_ask_for, args=(root, first))
    other.start(), waiting.start()
    other.join(timeout=60)
    waiting.join(timeout=1)
    assert other.exitcode == 0 and waiting.exitcode is None  # the claim on windows 0-9 is still held
    release.set()
    waiting.join(timeout=60)
    holder.join(timeout=60)

    assert waiting.exitcode == 0 and holder.exitcode == 0
    vectors = embedding_cache.EmbeddingCache(root, "model").embeddings(first + second, pytest.fail)
    assert vectors.shape == (20, 3)
