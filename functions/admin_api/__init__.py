"""The admin_api Lambda function."""
