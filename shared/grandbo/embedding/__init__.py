"""Embedding providers behind one interface, all bound to the 1024-dimension contract."""

from grandbo.embedding.base import (
    EMBEDDING_DIMENSIONS,
    TEXT_TEMPLATE_VERSION,
    Embedding,
    EmbeddingProvider,
    render_entry_text,
)

__all__ = [
    "EMBEDDING_DIMENSIONS",
    "TEXT_TEMPLATE_VERSION",
    "Embedding",
    "EmbeddingProvider",
    "render_entry_text",
]
