"""The test pipeline: runs its source as plain Python, so the service can be tested without a compiler."""
