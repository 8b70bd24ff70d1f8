"""The authorizer Lambda function."""
