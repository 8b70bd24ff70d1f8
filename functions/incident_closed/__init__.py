"""The incident_closed Lambda function."""
