"""Quiet terminals (issue 53, point 6): the local runner's metrics and structured log lines
go to a file in its data directory (`--verbose` keeps them on the terminal); in Lambda a
metric is an EMF line on stdout, as CloudWatch reads it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from grandbo import observability
from grandbo.observability import LOCAL_OUTPUT_ENV, count_entries_created, logger


def test_in_lambda_a_metric_is_an_emf_line_on_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(LOCAL_OUTPUT_ENV, raising=False)
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    count_entries_created("incident", 2)
    (line,) = capsys.readouterr().out.splitlines()
    document = json.loads(line)
    assert document["EntriesCreated"] == [2.0]
    assert document["origin"] == "incident"
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Grandbo"


def test_disabled_metrics_print_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # powertools' own single_metric printed even then: the runner's terminal showed them
    monkeypatch.delenv(LOCAL_OUTPUT_ENV, raising=False)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    count_entries_created("admin", 1)
    assert capsys.readouterr().out == ""


def test_the_local_runner_writes_metrics_and_log_lines_to_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    stream = handler.stream
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setattr(observability.os, "environ", {**observability.os.environ})
    try:
        observability.to_local_file(tmp_path / "runner.log")
        count_entries_created("admin", 1)
        logger.warning("the embedding provider did not warm")
        handler.flush()
    finally:
        handler.setStream(stream)
    assert capsys.readouterr().out == ""
    lines = (tmp_path / "runner.log").read_text().splitlines()
    assert json.loads(lines[0])["EntriesCreated"] == [1.0]
    assert json.loads(lines[1])["message"] == "the embedding provider did not warm"
