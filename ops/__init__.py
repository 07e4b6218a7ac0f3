"""Operations commands for a deployed MangaAssist endpoint: smoke, promote, rollback, load.

Run as ``mangaassist-ops <command>`` or ``python -m ops <command>``; see docs/operations.md.
"""
