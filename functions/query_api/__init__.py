"""The query_api Lambda function."""
