"""The passage embedding cache: a collection is encoded once per model; a changed text or model
is encoded again; files appear whole or not at all."""

import shutil

import numpy as np
import pytest

from retrieval import dense, embedding_cache
from retrieval.dense import DenseScorer, default_model
from retrieval.models import Document, Retriever
from tests.factories import make_collection, make_text_passages

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
    assert not [path for path in (data_dir / "embeddings").rglob("*") if path.is_file()]

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
