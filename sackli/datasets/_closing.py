"""Context-manager behaviour shared by the dataset readers and writers."""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["ClosesOnExit", "DiscardsOnError"]

Self = TypeVar("Self")


class ClosesOnExit:
    """`with reader:` closes it on leaving the block."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class DiscardsOnError:
    """`with writer:` closes it (publishing what was written) when the block
    ends normally, and discards the unfinished write when it raises."""

    def close(self) -> None:
        raise NotImplementedError

    def discard(self) -> None:
        raise NotImplementedError

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(self, exc_type: Any, *exc_info: object) -> None:
        if exc_type is not None:
            self.discard()
        else:
            self.close()
