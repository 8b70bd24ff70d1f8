"""AWS event and context shapes the tests hand to handlers: an SQS record as Lambda's
event source mapping delivers it, and a Lambda context with a chosen time left."""

from __future__ import annotations

from typing import Any


def sqs_record(
    message_id: str,
    receipt_handle: str,
    body: str,
    *,
    receive_count: int = 1,
    queue_arn: str = "arn:aws:sqs:us-east-1:000000000000:grandbo-embed",
) -> dict[str, Any]:
    """One record of an SQS event, received `receive_count` times."""
    return {
        "messageId": message_id,
        "receiptHandle": receipt_handle,
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": "0",
            "SenderId": "x",
            "ApproximateFirstReceiveTimestamp": "0",
        },
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1",
    }


class TimedContext:
    """A Lambda context with `remaining_ms` of its invocation left."""

    memory_limit_in_mb = 512
    aws_request_id = "req"

    def __init__(self, remaining_ms: int, function_name: str = "grandbo-embed-worker") -> None:
        self.remaining_ms = remaining_ms
        self.function_name = function_name
        self.invoked_function_arn = (
            f"arn:aws:lambda:us-east-1:000000000000:function:{function_name}"
        )

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms
