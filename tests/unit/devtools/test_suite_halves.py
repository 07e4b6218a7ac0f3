"""``make test`` runs the suite as two pytest runs (devtools/suite_halves.py): every folder of tests/ in one of them."""

from pathlib import Path

from devtools import suite_halves


def test_every_test_folder_is_in_exactly_one_half() -> None:
    assert suite_halves.uncovered() == []


def test_a_folder_in_no_half_or_in_both_is_named(tmp_path: Path) -> None:
    for folder in ("engine", "unit", "newcomer"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_x.py").write_text("")
    halves = {"a": ("tests/engine", "tests/unit"), "b": ("tests/unit",)}
    assert suite_halves.uncovered(halves, tmp_path) == ["tests/newcomer", "tests/unit"]
