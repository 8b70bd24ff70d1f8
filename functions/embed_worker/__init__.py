"""The embed_worker Lambda function."""
