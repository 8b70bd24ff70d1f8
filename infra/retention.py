"""CloudWatch log retention from a number of days (the stage settings say days)."""

from __future__ import annotations

from aws_cdk import aws_logs as logs


def retention(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch retention that keeps `days`."""
    choices = {
        7: logs.RetentionDays.ONE_WEEK,
        14: logs.RetentionDays.TWO_WEEKS,
        30: logs.RetentionDays.ONE_MONTH,
        90: logs.RetentionDays.THREE_MONTHS,
        365: logs.RetentionDays.ONE_YEAR,
    }
    return choices[min((d for d in choices if d >= days), default=365)]
