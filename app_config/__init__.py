"""Validated configuration of the MangaAssist serving app (pydantic v2).

Only ``app.py`` reads CDK context; it calls :func:`load_config` once and passes the
parts of the resulting :class:`AppConfig` down to the stacks.
"""

from app_config.errors import ConfigError
from app_config.loader import load_config
from app_config.root import AppConfig

__all__ = ["AppConfig", "ConfigError", "load_config"]
