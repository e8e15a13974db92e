"""The stand-in sites answer what BrowserGym and the official evaluator helpers ask of a WebArena
deployment, over real HTTP, and leave nothing running."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests

from tests.standins import StandIns

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sites() -> Iterator[StandIns]:
    with StandIns() as running:
        yield running


def test_every_site_answers_the_reachability_probe(sites: StandIns) -> None:
    """BrowserGym's check_status GETs every site URL; all seven variables are set."""
    assert set(sites.urls) == {
        f"WA_{s}" for s in ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE")
    }
    for name, url in sites.urls.items():
        assert requests.get(url, timeout=10).status_code == 200, name
    assert len({url.split("/")[2] for url in sites.urls.values()}) == 7, "one port per site"


@pytest.mark.parametrize(
    ("site", "path", "fields"),
    [
        (
            "shopping",
            "/customer/account/loginPost/",
            {"login[username]": "emma.lopez@gmail.com", "login[password]": "Password.123"},
        ),
        ("shopping_admin", "", {"login[username]": "admin", "login[password]": "admin1234"}),
        ("reddit", "/login_check", {"_username": "MarvelsGrantMan136", "_password": "test1234"}),
        ("gitlab", "/users/sign_in", {"user[login]": "byteblaze", "user[password]": "hello1234"}),
    ],
)
def test_sign_in_accepts_webarena_accounts_only(
    sites: StandIns, site: str, path: str, fields: dict[str, str]
) -> None:
    url = sites.urls[f"WA_{site.upper()}"] + path
    good = requests.post(url, data=fields, allow_redirects=False, timeout=10)
    assert good.status_code == 302 and f"{site}_session=" in good.headers.get("Set-Cookie", "")
    wrong = {k: (v if "pass" not in k else "nope") for k, v in fields.items()}
    bad = requests.post(url, data=wrong, allow_redirects=False, timeout=10)
    assert "Set-Cookie" not in bad.headers


def test_magento_rest_as_the_evaluator_helpers_call_it(sites: StandIns) -> None:
    shop = sites.urls["WA_SHOPPING"]
    assert requests.get(f"{shop}/rest/V1/orders", timeout=10).status_code == 401
    token = requests.post(
        f"{shop}/rest/default/V1/integration/admin/token",
        headers={"content-type": "application/json"},
        data=json.dumps({"username": "admin", "password": "admin1234"}),
        timeout=10,
    ).json()
    auth = {"Authorization": f"Bearer {token}"}
    params = {
        "searchCriteria[sortOrders][0][field]": "created_at",
        "searchCriteria[sortOrders][0][direction]": "DESC",
        "searchCriteria[pageSize]": "1",
    }
    latest = requests.get(f"{shop}/rest/V1/orders", params=params, headers=auth, timeout=10).json()["items"]
    assert [o["increment_id"] for o in latest] == ["000000187"]
    reviews = requests.get(f"{shop}/rest/V1/products/B00J8RZL7I/reviews", headers=auth, timeout=10).json()
    assert reviews[0]["ratings"][0]["rating_name"] == "Rating" and reviews[-1]["nickname"] == "Lampfan"


def test_wikipedia_is_kiwix_serve_at_webarena_paths(sites: StandIns) -> None:
    page = requests.get(
        f"{sites.urls['WA_WIKIPEDIA']}/wikipedia_en_all_maxi_2022-05/A/Christopher_Nolan", timeout=10
    )
    assert page.status_code == 200 and "The Dark Knight" in page.text


def test_judge_grades_fuzzy_prompts(sites: StandIns) -> None:
    prompt = (
        "question: q\nreference answer: It is comfortable\nall the string 'N/A' that you see is a special "
        "sequence that means 'not achievable'\nstudent answer: it is comfortable indeed\nConclude the judgement by"
        " correct/incorrect/partially correct."
    )
    reply = requests.post(
        sites.environ()["OPENAI_BASE_URL"] + "/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": prompt}]},
        timeout=10,
    ).json()
    assert reply["choices"][0]["message"]["content"].endswith("Judgement: correct")


def test_stop_leaves_no_server_running() -> None:
    sites = StandIns().start()
    kiwix, urls = sites.kiwix, dict(sites.urls)
    sites.stop()
    assert kiwix is not None and kiwix.process.poll() is not None
    for url in urls.values():
        with pytest.raises(requests.ConnectionError):
            requests.get(url, timeout=2)
