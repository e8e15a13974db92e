"""WebArena stand-ins: the six WebArena sites as small local servers, for tests.

``with StandIns() as sites:`` starts shopping, shopping_admin, reddit, gitlab, map and the homepage
(with the LLM judge) as in-process HTTP servers and wikipedia as a real ``kiwix-serve``, each on its own
free 127.0.0.1 port; ``sites.urls`` maps ``WA_SHOPPING`` ... ``WA_HOMEPAGE`` to their base URLs, and
``sites.environ()`` adds the plain names and the judge's ``OPENAI_BASE_URL``. ``sites.reset()`` restores
the initial data. `tests.standins.tasks` holds the curated real task ids and their trajectories.
"""

from __future__ import annotations

from types import TracebackType

from tests.standins.gitlab import GitLab
from tests.standins.map import Homepage, OpenStreetMap
from tests.standins.reddit import Reddit
from tests.standins.server import RunningSite, SiteApp
from tests.standins.shopping import Shopping, ShoppingAdmin
from tests.standins.wikipedia import KiwixServe

__all__ = ["StandIns"]


class StandIns:
    """All six stand-in sites plus the homepage; a context manager that stops every server it started."""

    def __init__(self) -> None:
        self.sites: dict[str, RunningSite] = {}
        self.kiwix: KiwixServe | None = None

    def start(self) -> StandIns:
        try:
            apps: list[SiteApp] = [
                Shopping(),
                ShoppingAdmin(),
                Reddit(),
                GitLab(),
                OpenStreetMap(),
                Homepage(),
            ]
            for app in apps:
                self.sites[app.name] = RunningSite(app)
            self.kiwix = KiwixServe()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def urls(self) -> dict[str, str]:
        """``WA_<SITE>`` -> base URL, as BrowserGym reads them."""
        urls = {f"WA_{name.upper()}": site.url for name, site in self.sites.items()}
        if self.kiwix is not None:
            urls["WA_WIKIPEDIA"] = self.kiwix.url
        return urls

    def environ(self) -> dict[str, str]:
        """Every variable a live WebArena episode against the stand-ins needs."""
        env = dict(self.urls)
        env.update({key.removeprefix("WA_"): value for key, value in self.urls.items()})
        env["OPENAI_BASE_URL"] = self.sites["homepage"].url + "/v1"
        env["OPENAI_API_KEY"] = "standin-judge"
        return env

    def reset(self) -> None:
        for site in self.sites.values():
            with site.app.lock:
                site.app.sessions.clear()
                site.app.reset()

    def stop(self) -> None:
        for site in self.sites.values():
            site.stop()
        self.sites.clear()
        if self.kiwix is not None:
            self.kiwix.stop()
            self.kiwix = None

    def __enter__(self) -> StandIns:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
