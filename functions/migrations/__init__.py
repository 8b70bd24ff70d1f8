"""The migrations Lambda function (a CloudFormation custom resource)."""
