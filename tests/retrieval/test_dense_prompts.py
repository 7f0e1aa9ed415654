"""Dense models that need prompts (E5's "query: " / "passage: "): the model's own
sentence-transformers prompts, or prompts given with the run, are put before every text exactly
as sentence-transformers does; the run records them and the embedding cache keys on them."""

import json
import shutil

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from retrieval.dense import default_model
from retrieval.models import Hit, Run
from tests.factories import (
    add_qrels,
    api_client,
    call_json_command,
    make_collection,
    make_text_passages,
    make_text_query,
    make_user,
)

pytestmark = pytest.mark.django_db

TEXTS = ["Call me Ishmael.", "Gatsby believed in the green light.", "The whale was white and the sea was wide."]
QUERIES = ["the colour of the whale", "a light across the bay"]


@pytest.fixture(scope="module")
def prompted_model_folder(tmp_path_factory):
    """MiniLM with E5-style prompts in its sentence-transformers config."""
    folder = tmp_path_factory.mktemp("prompted") / "model"
    shutil.copytree(default_model(), folder)
    config_path = folder / "config_sentence_transformers.json"
    config = json.loads(config_path.read_text())
    config.update(prompts={"query": "query: ", "passage": "passage: "}, default_prompt_name=None)
    config_path.write_text(json.dumps(config))
    return folder


@pytest.fixture
def collection():
    collection = make_collection("prompts")
    passages = make_text_passages(collection, TEXTS)
    for index, text in enumerate(QUERIES):
        add_qrels(make_text_query(collection, text, f"q{index}"), {passages[index * 2]: 1})
    return collection


def stored_scores(run_id) -> np.ndarray:
    rows = Hit.objects.filter(run_id=run_id).values_list("query__ordinal", "passage__ordinal", "score")
    scores = np.zeros((len(QUERIES), len(TEXTS)))
    for query, passage, score in rows:
        scores[query, passage] = score
    return scores


def reference_scores(query_prompt: str, passage_prompt: str) -> np.ndarray:
    model = SentenceTransformer(default_model(), device="cpu", local_files_only=True)
    queries = model.encode(QUERIES, prompt=query_prompt)
    passages = model.encode(TEXTS, prompt=passage_prompt)
    return queries @ passages.T


def test_prompts_given_with_the_run_are_used_and_recorded(collection):
    run = call_json_command(
        "retrieve",
        "--collection",
        "prompts",
        "--retriever",
        "dense",
        "--query-prompt",
        "query: ",
        "--passage-prompt",
        "passage: ",
    )
    np.testing.assert_allclose(stored_scores(run["run_id"]), reference_scores("query: ", "passage: "), atol=1e-5)
    parameters = Run.objects.get(pk=run["run_id"]).parameters
    assert (parameters["query_prompt"], parameters["passage_prompt"]) == ("query: ", "passage: ")
    plain = call_json_command("retrieve", "--collection", "prompts", "--retriever", "dense")
    np.testing.assert_allclose(stored_scores(plain["run_id"]), reference_scores("", ""), atol=1e-5)
    assert Run.objects.get(pk=plain["run_id"]).parameters["query_prompt"] == ""
    assert not np.allclose(stored_scores(plain["run_id"]), stored_scores(run["run_id"]), atol=1e-4)


def test_the_models_own_prompts_are_the_default(collection, prompted_model_folder):
    run = call_json_command(
        "retrieve", "--collection", "prompts", "--retriever", "dense", "--model", prompted_model_folder
    )
    parameters = Run.objects.get(pk=run["run_id"]).parameters
    assert (parameters["query_prompt"], parameters["passage_prompt"]) == ("query: ", "passage: ")
    np.testing.assert_allclose(stored_scores(run["run_id"]), reference_scores("query: ", "passage: "), atol=1e-5)
    overridden = call_json_command(
        "retrieve",
        "--collection",
        "prompts",
        "--retriever",
        "dense",
        "--model",
        prompted_model_folder,
        "--query-prompt",
        "",
        "--passage-prompt",
        "",
    )
    np.testing.assert_allclose(stored_scores(overridden["run_id"]), reference_scores("", ""), atol=1e-5)


def test_the_embedding_cache_keys_on_the_passage_prompt(collection, data_dir):
    call_json_command("retrieve", "--collection", "prompts", "--retriever", "dense")
    call_json_command("retrieve", "--collection", "prompts", "--retriever", "dense", "--passage-prompt", "passage: ")
    folders = sorted(path.name for path in (data_dir / "embeddings").iterdir())
    assert len(folders) == 2 and sum("-prompt-" in name for name in folders) == 1


def test_prompts_over_rest_are_kept_verbatim(collection, django_capture_on_commit_callbacks):
    client = api_client(make_user(staff=True))
    response = client.post(
        "/api/runs/",
        {"collection": collection.pk, "retriever": "dense", "query_prompt": "query: ", "passage_prompt": "passage: "},
        format="json",
    )
    assert response.status_code == 202
    assert response.json()["parameters"]["query_prompt"] == "query: "
