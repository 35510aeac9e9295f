"""Running a sweep's first chunk on a background thread while the caller prepares the warehouse run."""

from __future__ import annotations

import threading
from typing import Any, Iterator


class started:  # used like a function: started(iterator)
    """Iterate ``items``, the first one computed on a background thread started at once.

    A sweep's first batch waits for the compiled chunk to load and for its first evaluation; the caller
    meanwhile prepares the warehouse run (lock, stale-run cleanup, contract check) on its own thread. The
    rest are computed on the consuming thread as usual. An exception from the first item is re-raised on
    the consuming thread. Call :meth:`join` before leaving on an error raised before the first item was
    taken: a process must not exit while that thread is inside XLA (it aborts).
    """

    def __init__(self, items: Iterator[Any]):
        self._items, self._first, self._error = items, [], []
        self._thread = threading.Thread(target=self._work, name="sweepkit-first-chunk", daemon=True)
        self._thread.start()
        self._rest = self._iterate()

    def _work(self) -> None:
        try:
            self._first.append(next(self._items))
        except StopIteration:
            pass
        except BaseException as exc:  # noqa: BLE001 - re-raised on the consuming thread
            self._error.append(exc)

    def _iterate(self) -> Iterator[Any]:
        self._thread.join()
        if self._error:
            raise self._error[0]
        if self._first:
            yield self._first.pop()
            yield from self._items

    def __iter__(self) -> started:
        return self

    def __next__(self) -> Any:
        return next(self._rest)

    def join(self) -> None:
        """Wait for the background thread (the first item is kept for iteration)."""
        self._thread.join()
