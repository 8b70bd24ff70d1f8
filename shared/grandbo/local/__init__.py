"""Local mode: settings, the embedded PostgreSQL, the in-process embed queue, the local
HTTP gateway that drives the Lambda handlers, and the demo organization."""
