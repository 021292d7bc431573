"""The suite's own order: files with slow tests are collected first (tests/conftest.py), each file in its order."""

from tests.conftest import pytest_collection_modifyitems


class Item:
    def __init__(self, path: str, slow: bool):
        self.path, self.slow = path, slow

    def get_closest_marker(self, name: str):
        return "slow" if name == "slow" and self.slow else None


def test_files_with_a_slow_test_come_first_and_keep_their_order():
    items = [Item("a.py", False), Item("b.py", False), Item("b.py", True), Item("c.py", False), Item("d.py", True)]
    pytest_collection_modifyitems(None, items)
    assert [(item.path, item.slow) for item in items] == [
        ("b.py", False),
        ("b.py", True),
        ("d.py", True),
        ("a.py", False),
        ("c.py", False),
    ]
