"""Model and adapter releases: the SageMaker Pipeline that quantizes, validates, load-tests, evaluates and
registers a version (``model_release_pipeline.py``), and the scripts its steps run (``runtime/``)."""
