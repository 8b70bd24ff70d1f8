"""The default install is offline and torch-free: nothing is fetched, no PyTorch is needed."""

from __future__ import annotations

import importlib.util
import socket
from typing import Any

import pytest


def test_pytorch_is_not_installed() -> None:
    assert importlib.util.find_spec("torch") is None


def test_the_local_model_loads_and_embeds_with_the_network_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from grandbo.embedding.local import LocalMiniLMProvider

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the local provider tried to open a network connection")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    provider = LocalMiniLMProvider()  # a fresh instance: loads model and tokenizer now
    (vector,) = provider.embed(["disk pressure evicted pods on the node"])
    assert len(vector) == 1024
