"""The backfill Lambda function."""
