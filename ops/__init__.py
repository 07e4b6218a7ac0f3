"""What an operator runs against an account: the operations commands for a deployed MangaAssist
endpoint (preflight, smoke, promote, rollback, load), run as ``mangaassist-ops <command>`` or
``python -m ops <command>`` (docs/operations.md); ``python -m ops.pin_artifacts`` (the released
artifacts' pins, for cdk.json) and ``python -m ops.bedrock_invoke`` (call an imported Bedrock model).
"""
