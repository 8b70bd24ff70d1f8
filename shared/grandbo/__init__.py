"""Grandbo: an organization's institutional memory for incident investigation."""

__version__ = "0.1.0"
