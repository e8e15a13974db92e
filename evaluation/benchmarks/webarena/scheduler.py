"""Which tasks may run side by side: ``--num-workers N`` without changing any score.

A task that changes a site (WebArena-Verified's ``mutate``, or any task the run resets before) must
see that site as the reset left it, and must not change it under another task's feet: it runs
alone on each of its sites. Tasks that only read share their sites. ``SiteScheduler.next()`` hands
a worker the first pending task (in the run's order) whose sites are free enough, and waits while
none is; ``done(task)`` releases its sites. Any N gives every task the same site state as N=1.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

__all__ = ["SiteScheduler"]


class SiteScheduler[T]:
    """Hands out ``tasks`` to workers; ``sites(task)`` names its sites, ``exclusive(task)`` whether it
    changes them."""

    def __init__(
        self,
        tasks: Sequence[T],
        *,
        sites: Callable[[T], Sequence[str]],
        exclusive: Callable[[T], bool],
    ) -> None:
        self._pending = list(tasks)
        self._sites = sites
        self._exclusive = exclusive
        self._readers: dict[str, int] = {}
        self._writers: set[str] = set()
        self._changed = threading.Condition()

    def _free(self, task: T) -> bool:
        sites = self._sites(task)
        if self._exclusive(task):
            return not any(site in self._writers or self._readers.get(site) for site in sites)
        return not any(site in self._writers for site in sites)

    def next(self) -> T | None:
        """The next task this worker may run, waiting for one; None when none is left."""
        with self._changed:
            while True:
                if not self._pending:
                    return None
                # the first pending task that fits; a waiting exclusive task holds back later readers of
                # its sites so it is not starved by a stream of them
                blocked: set[str] = set()
                for number, task in enumerate(self._pending):
                    sites = set(self._sites(task))
                    if not sites & blocked and self._free(task):
                        del self._pending[number]
                        if self._exclusive(task):
                            self._writers.update(sites)
                        else:
                            for site in sites:
                                self._readers[site] = self._readers.get(site, 0) + 1
                        return task
                    if self._exclusive(task):
                        blocked |= sites
                self._changed.wait()

    def done(self, task: T) -> None:
        with self._changed:
            sites = self._sites(task)
            if self._exclusive(task):
                self._writers.difference_update(sites)
            else:
                for site in sites:
                    self._readers[site] -= 1
                    if not self._readers[site]:
                        del self._readers[site]
            self._changed.notify_all()


class PoolScheduler[T]:
    """``SiteScheduler``'s rule per deployment of a pool: ``take(deployment)`` is the first pending task
    (in the run's order) free on that deployment's servers, or None; never blocks (one caller, the loop
    that hands out work). ``servers(task, deployment)`` names the task's servers there.

    ``retry(task, deployment)`` puts a task whose worker died back in front, to run on another
    deployment when one is live; ``drain(deployment)`` stops handing out work there."""

    def __init__(
        self,
        tasks: Sequence[T],
        deployments: Sequence[str],
        *,
        servers: Callable[[T, str], Sequence[str]],
        exclusive: Callable[[T], bool],
    ) -> None:
        self._pending = list(tasks)
        self._live = list(deployments)
        self._servers = servers
        self._exclusive = exclusive
        self._readers: dict[str, int] = {}
        self._writers: set[str] = set()
        self._avoid: dict[int, set[str]] = {}

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def live(self) -> tuple[str, ...]:
        return tuple(self._live)

    def _free(self, task: T, servers: Sequence[str]) -> bool:
        if self._exclusive(task):
            return not any(server in self._writers or self._readers.get(server) for server in servers)
        return not any(server in self._writers for server in servers)

    def take(self, deployment: str) -> T | None:
        if deployment not in self._live:
            return None
        blocked: set[str] = set()
        for number, task in enumerate(self._pending):
            avoid = self._avoid.get(id(task), set())
            if deployment in avoid and any(other not in avoid for other in self._live):
                continue
            servers = set(self._servers(task, deployment))
            if not servers & blocked and self._free(task, tuple(servers)):
                del self._pending[number]
                if self._exclusive(task):
                    self._writers.update(servers)
                else:
                    for server in servers:
                        self._readers[server] = self._readers.get(server, 0) + 1
                return task
            if self._exclusive(task):
                blocked |= servers
        return None

    def done(self, task: T, deployment: str) -> None:
        servers = self._servers(task, deployment)
        if self._exclusive(task):
            self._writers.difference_update(servers)
        else:
            for server in servers:
                self._readers[server] -= 1
                if not self._readers[server]:
                    del self._readers[server]

    def retry(self, task: T, deployment: str) -> None:
        """``task`` ran on ``deployment`` and did not finish: released and pending again, first."""
        self.done(task, deployment)
        self._avoid.setdefault(id(task), set()).add(deployment)
        self._pending.insert(0, task)

    def drain(self, deployment: str) -> None:
        if deployment in self._live:
            self._live.remove(deployment)
