"""The scripts the release pipeline's Processing steps run, each ``python3 -m runtime.<step>``.

Standard library plus each step's own libraries (sacrebleu, boto3, safetensors, transformers, llm-compressor),
never aws-cdk: they run in Processing containers, and the tests run them here (``tests/release/``).
``quality_gates.py`` is a link to ``serving_contract/quality_gates.py``, the one declaration of the gates.
"""
