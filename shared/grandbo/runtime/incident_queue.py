"""The incident queue in AWS: between the incident-closed rule and its function.

EventBridge delivers each incident-closed event to an SQS queue (the message body is the
event, as the rule matched it); the incident function takes batches from it through an
event source mapping. A record that fails for a reason that passes (the database in a
failover or a patch window) is reported failed and its visibility set to the next step
of RETRY_DELAYS_S, so the retries spread over MAX_RECEIVES receives (about two hours);
only then does SQS's redrive policy move it to the dead-letter queue. An event that can
never be recorded (malformed, refused by the write's rules) is sent to the dead-letter
queue at once, with the reason, and reported done: retrying it would only fail again.

SQS: "If the receive count for a message exceeds the maximum receive count, Amazon SQS
moves the message to the dead-letter queue"
(https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html);
a consumer may change a received message's visibility with its receipt handle
(https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html);
Lambda returns only the failed records of a partial batch response to the queue, each
visible again when its visibility timeout ends
(https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grandbo.errors import EnqueueError
from grandbo.runtime.sqs_queue import SqsQueues

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# receives of one message before SQS dead-letters it (the queue's redrive policy)
MAX_RECEIVES = 12
# the queue's visibility timeout (Lambda asks for at least six times the function's 30 s):
# where no back-off was set (an invocation that timed out, waiting on RDS Proxy through a
# failover, or SQS refusing the change), a record is visible again after this, so
# MAX_RECEIVES receives still span two hours
VISIBILITY_TIMEOUT_S = 600
# the wait after the n-th failed receive (n = 1, 2, ...): doubling from 30 s, at most 15 min
FIRST_RETRY_S = 30
LONGEST_RETRY_S = 900


def retry_delay_s(receive_count: int) -> int:
    """How long a record that failed on its `receive_count`-th receive stays invisible."""
    doublings = min(16, max(0, receive_count - 1))
    return min(LONGEST_RETRY_S, FIRST_RETRY_S << doublings)


def time_before_dead_letter_s() -> int:
    """How long a record failing every receive stays on the queue: the waits after each of
    its MAX_RECEIVES receives (the last wait ends in the receive that dead-letters it)."""
    return sum(retry_delay_s(n) for n in range(1, MAX_RECEIVES + 1))


class SqsIncidentQueue(SqsQueues):
    """Back-off for a failed record, and the dead-letter queue for one that never can be."""

    def __init__(
        self, queue_url: str, dead_letter_url: str, client: SQSClient | None = None
    ) -> None:
        super().__init__(client)
        self.queue_url = queue_url
        self.dead_letter_url = dead_letter_url

    def back_off(self, receipt_handle: str, receive_count: int) -> int:
        """Keep a failed record invisible for its next retry's wait; returns the wait.
        EnqueueError if SQS refuses (the queue's own visibility timeout then applies)."""
        delay = retry_delay_s(receive_count)
        try:
            self.client.change_message_visibility(
                QueueUrl=self.queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=delay
            )
        except Exception as exc:
            raise EnqueueError(f"SQS refused the back-off of a record: {exc}") from exc
        return delay

    def dead_letter(self, body: str, reason: str) -> None:
        """The message, as received, on the dead-letter queue with the reason it failed.
        EnqueueError if SQS refuses (the record is then reported failed, and retried)."""
        try:
            self.client.send_message(
                QueueUrl=self.dead_letter_url,
                MessageBody=body,
                MessageAttributes={
                    "error": {"DataType": "String", "StringValue": reason[:1000] or "refused"}
                },
            )
        except Exception as exc:
            raise EnqueueError(f"SQS refused the dead letter: {exc}") from exc
