"""What a deployed function runs on: the Lambda container's state (environment,
connection, services, keyring) and the SQS embed queue."""
