"""An empty environment that remembers every name asked of it: what ``Settings.from_env`` reads, found by running it."""

from __future__ import annotations


class RecordingEnv(dict[str, str]):
    """An empty environment that remembers every name asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return super().__getitem__(key)
