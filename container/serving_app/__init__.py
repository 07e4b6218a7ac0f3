"""Serving layer of the MangaAssist inference container.

A small Starlette gateway on :8080 (the SageMaker container contract) in front of vLLM's
OpenAI server on 127.0.0.1. The gateway owns readiness, warmup, drain and metrics so
that none of them depends on vLLM internals; see ``container/README.md``.
"""
