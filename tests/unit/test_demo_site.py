"""The bundled demo shop, exercised over real HTTP with urllib (no browser)."""

import json
import socket
import struct
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from html.parser import HTMLParser
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from cdp_integration.demo import DemoSite


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


@dataclass
class Reply:
    status: int
    headers: Message
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


@pytest.fixture(scope="module")
def site() -> Iterator[DemoSite]:
    demo = DemoSite()
    demo.start()
    yield demo
    demo.stop()


@pytest.fixture(autouse=True)
def fresh_state(site: DemoSite) -> None:
    site.reset()


def fetch(site: DemoSite, path: str, form: dict[str, str] | None = None, cookie: str = "") -> Reply:
    """One request without following redirects; POSTs `form` urlencoded when given."""
    data = urlencode(form).encode() if form is not None else None
    req = urllib.request.Request(
        site.base_url + path, data=data, headers={"Cookie": cookie} if cookie else {}
    )
    try:
        with _OPENER.open(req, timeout=10) as resp:
            return Reply(resp.status, resp.headers, resp.read().decode())
    except urllib.error.HTTPError as err:
        with err:
            return Reply(err.code, err.headers, err.read().decode())


def login(site: DemoSite, username: str, password: str) -> str:
    reply = fetch(site, "/login", {"username": username, "password": password, "next": ""})
    assert reply.status == 302
    return "session=" + SimpleCookie(reply.headers["Set-Cookie"])["session"].value


def test_login_redirects_with_httponly_session_cookie(site: DemoSite) -> None:
    reply = fetch(site, "/login", {"username": "emma", "password": "emma1234", "next": "/orders"})
    assert reply.status == 302
    assert reply.headers["Location"] == "/orders"
    set_cookie = reply.headers["Set-Cookie"]
    morsel = SimpleCookie(set_cookie)["session"]
    assert len(morsel.value) >= 16
    assert morsel["httponly"] is True
    assert morsel["path"] == "/"
    assert morsel["samesite"] == "Lax"
    account = fetch(site, "/account", cookie=f"session={morsel.value}")
    assert account.status == 200
    assert '<dd id="account-username">emma</dd>' in account.body


def test_login_failure_and_open_redirect_guard(site: DemoSite) -> None:
    bad = fetch(site, "/login", {"username": "emma", "password": "wrong", "next": "/orders"})
    assert bad.status == 200
    assert 'id="login-error"' in bad.body
    assert bad.headers["Set-Cookie"] is None
    evil = fetch(site, "/login", {"username": "emma", "password": "emma1234", "next": "//evil.example/"})
    assert evil.headers["Location"] == "/account"


def test_logout_forgets_the_session(site: DemoSite) -> None:
    cookie = login(site, "emma", "emma1234")
    out = fetch(site, "/logout", cookie=cookie)
    assert out.status == 302
    assert "Max-Age=0" in out.headers["Set-Cookie"]
    assert fetch(site, "/account", cookie=cookie).status == 302


def test_admin_requires_login_then_admin_role(site: DemoSite) -> None:
    anonymous = fetch(site, "/admin")
    assert anonymous.status == 302
    assert anonymous.headers["Location"] == "/login?next=/admin"
    customer = fetch(site, "/admin", cookie=login(site, "emma", "emma1234"))
    assert customer.status == 403
    assert 'id="forbidden"' in customer.body
    admin = fetch(site, "/admin", cookie=login(site, "admin", "admin1234"))
    assert admin.status == 200
    assert 'id="admin-dashboard"' in admin.body
    assert fetch(site, "/admin/orders", cookie=login(site, "emma", "emma1234")).status == 403


def test_admin_product_update_is_visible_everywhere(site: DemoSite) -> None:
    cookie = login(site, "admin", "admin1234")
    saved = fetch(site, "/admin/products/2", {"name": "USB-C Cable", "price": "7.50", "stock": "3"}, cookie)
    assert saved.status == 302
    assert saved.headers["Location"] == "/admin/products/2/edit?saved=1"
    assert 'id="saved-message"' in fetch(site, "/admin/products/2/edit?saved=1", cookie=cookie).body
    product = fetch(site, "/api/products/2").json()
    assert product == {**product, "name": "USB-C Cable", "price": 7.5, "stock": 3}
    assert '<span id="product-price" data-price="7.50">$7.50</span>' in fetch(site, "/products/2").body
    rejected = fetch(site, "/admin/products/2", {"name": "x", "price": "nan", "stock": "1"}, cookie)
    assert rejected.status == 400
    customer = fetch(
        site, "/admin/products/2", {"name": "x", "price": "1", "stock": "1"}, login(site, "emma", "emma1234")
    )
    assert customer.status == 403
    assert fetch(site, "/api/products/2").json() == product


def test_review_post_changes_state_and_init_resets_it(site: DemoSite) -> None:
    review = {"rating": "1", "title": "Meh", "text": "Unique review text 4242"}
    anonymous = fetch(site, "/products/1/reviews", review)
    assert anonymous.status == 302
    assert anonymous.headers["Location"] == "/login?next=/products/1"
    cookie = login(site, "emma", "emma1234")
    posted = fetch(site, "/products/1/reviews", review, cookie)
    assert posted.status == 302
    assert posted.headers["Location"] == "/products/1"
    page = fetch(site, "/products/1").body
    assert "Unique review text 4242" in page
    assert '<span id="review-count">4</span>' in page
    latest = fetch(site, "/api/reviews/latest?sku=DS-EL-001").json()
    assert latest == {**latest, "author": "emma", "rating": 1, "title": "Meh"}

    init = urllib.request.urlopen(urllib.request.Request(site.base_url + "/init", data=b""), timeout=10)
    assert json.loads(init.read()) == {"status": "ok"}
    page = fetch(site, "/products/1").body
    assert "Unique review text 4242" not in page
    assert '<span id="review-count">3</span>' in page
    after = fetch(site, "/api/reviews/latest?sku=DS-EL-001").json()
    assert (after["author"], after["rating"]) == ("Sam Patel", 2)
    assert fetch(site, "/account", cookie=cookie).status == 302


def test_invalid_review_is_rejected(site: DemoSite) -> None:
    cookie = login(site, "emma", "emma1234")
    reply = fetch(site, "/products/1/reviews", {"rating": "9", "title": "t", "text": "x"}, cookie)
    assert reply.status == 400
    assert 'id="review-error"' in reply.body
    assert '<span id="review-count">3</span>' in fetch(site, "/products/1").body


def _result_names(body: str) -> list[str]:
    results = body.split('<ul id="results">', 1)[1].split("</ul>", 1)[0]
    return [chunk.split("</span>", 1)[0] for chunk in results.split('<span class="product-name">')[1:]]


def test_search_filters_and_sorts(site: DemoSite) -> None:
    assert _result_names(fetch(site, "/search?q=mug").body) == ["Ceramic Coffee Mug Set"]
    assert _result_names(fetch(site, "/search?q=DS-OF-002").body) == ["Ergonomic Office Chair"]
    assert len(_result_names(fetch(site, "/search?q=").body)) == 12
    assert _result_names(fetch(site, "/search?q=&category=Sports&sort=price").body) == [
        "Yoga Mat Non-Slip",
        "Adjustable Dumbbells Pair",
    ]
    assert 'id="result-count">0 results' in fetch(site, "/search?q=zzz-no-such-thing").body
    assert len(_result_names(fetch(site, "/products?category=Beauty").body)) == 2
    assert 'href="/products?category=Home+%26+Kitchen"' in fetch(site, "/").body
    assert len(_result_names(fetch(site, "/products?category=Home+%26+Kitchen").body)) == 3


def test_api_products_json(site: DemoSite) -> None:
    reply = fetch(site, "/api/products?limit=5")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json; charset=utf-8"
    data = reply.json()
    assert data["total_count"] == 12
    assert [p["id"] for p in data["items"]] == [1, 2, 3, 4, 5]
    assert set(data["items"][0]) >= {"id", "sku", "name", "category", "price", "description", "stock"}
    keyboard = fetch(site, "/api/products?q=keyboard").json()
    assert [p["sku"] for p in keyboard["items"]] == ["DS-OF-001"]
    assert fetch(site, "/api/products/999").status == 404


def test_latest_order_api_and_checkout(site: DemoSite) -> None:
    assert fetch(site, "/api/orders/latest").status == 401
    cookie = login(site, "emma", "emma1234")
    latest = fetch(site, "/api/orders/latest", cookie=cookie).json()
    assert latest["id"] == 2
    added = fetch(site, "/cart/add", {"product_id": "11", "qty": "2"}, cookie)
    assert (added.status, added.headers["Location"]) == (302, "/cart")
    assert 'class="cart-line" data-product-id="11"' in fetch(site, "/cart", cookie=cookie).body
    checkout = fetch(site, "/checkout", {}, cookie)
    assert checkout.status == 302
    assert checkout.headers["Location"] == "/orders/3"
    order = fetch(site, "/api/orders/latest", cookie=cookie).json()
    assert (order["id"], order["total"]) == (3, 159.8)
    assert 'id="cart-empty"' in fetch(site, "/cart", cookie=cookie).body
    product = fetch(site, "/api/products/11").json()
    assert product["stock"] == 20
    assert fetch(site, "/orders/3", cookie=login(site, "admin", "admin1234")).status == 200


class _TagCounter(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.count += 1


@pytest.mark.parametrize("n", [1_000, 10_000])
def test_big_page_has_about_n_elements(site: DemoSite, n: int) -> None:
    reply = fetch(site, f"/big?n={n}")
    assert reply.status == 200
    counter = _TagCounter()
    counter.feed(reply.body)
    assert 0.95 * n <= counter.count <= 1.05 * n
    assert reply.body == fetch(site, f"/big?n={n}").body


def test_static_assets_and_png(site: DemoSite) -> None:
    css = fetch(site, "/static/style.css")
    assert css.headers["Content-Type"] == "text/css; charset=utf-8"
    assert css.headers["Cache-Control"] == "max-age=3600"
    js = fetch(site, "/static/app.js")
    assert js.headers["Content-Type"] == "text/javascript; charset=utf-8"
    with urllib.request.urlopen(site.base_url + "/static/logo.png", timeout=10) as resp:
        assert resp.headers["Content-Type"] == "image/png"
        png = resp.read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", png[8:16])
    assert kind == b"IHDR"
    (crc,) = struct.unpack(">I", png[16 + length : 20 + length])
    assert crc == zlib.crc32(png[12 : 16 + length])
    assert fetch(site, "/favicon.ico").status == 204
    home = fetch(site, "/").body
    assert '<link rel="stylesheet" href="/static/style.css">' in home
    assert '<script src="/static/app.js" defer></script>' in home


def test_html_pages_and_errors(site: DemoSite) -> None:
    product = fetch(site, "/products/1")
    assert product.headers["Content-Type"] == "text/html; charset=utf-8"
    assert int(product.headers["Content-Length"]) == len(product.body.encode())
    for marker in ('id="product-name"', 'id="product-sku">DS-EL-001<', 'class="review-author"', "<title>"):
        assert marker in product.body
    assert 'id="feed" data-loaded="false">Loading...' in fetch(site, "/feed").body
    prefs = fetch(site, "/preferences").body
    assert 'localStorage.setItem("theme", "dark")' in prefs
    assert 'id="save-prefs"' in prefs
    assert '<a id="open-help" href="/help" target="_blank">' in fetch(site, "/links").body
    missing = fetch(site, "/no/such/page")
    assert missing.status == 404
    assert 'id="not-found"' in missing.body
    assert fetch(site, "/products/999").status == 404


def test_stop_closes_the_listening_port() -> None:
    with DemoSite() as demo:
        url = demo.base_url
        with urllib.request.urlopen(url + "/help", timeout=10) as resp:
            assert resp.status == 200
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((parts.hostname, parts.port), timeout=5).close()
    with pytest.raises(RuntimeError):
        _ = demo.base_url
