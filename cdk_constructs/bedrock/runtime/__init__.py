"""Bedrock Custom Model Import custom-resource handlers (deployed as ``index.on_event`` / ``index.is_complete``)."""
