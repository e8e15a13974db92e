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


# --- what the official WebArena evaluators call on a live instance -----------------------------------


def rest(
    site: DemoSite, path: str, *, token: str | None = None, body: object = None, query: str = ""
) -> Reply:
    """A JSON request as WebArena's helper functions send it (``requests`` with a JSON body)."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(site.base_url + path + query, data=data, headers=headers)
    try:
        with _OPENER.open(req, timeout=10) as resp:
            return Reply(resp.status, resp.headers, resp.read().decode())
    except urllib.error.HTTPError as err:
        with err:
            return Reply(err.code, err.headers, err.read().decode())


def admin_token(site: DemoSite) -> str:
    reply = rest(
        site, "/rest/default/V1/integration/admin/token", body={"username": "admin", "password": "admin1234"}
    )
    assert reply.status == 200
    token = reply.json()
    assert isinstance(token, str)
    return token


LATEST_ORDER_QUERY = "?" + urlencode(
    {
        "searchCriteria[sortOrders][0][field]": "created_at",
        "searchCriteria[sortOrders][0][direction]": "DESC",
        "searchCriteria[pageSize]": "1",
    }
)


def test_rest_admin_token_only_for_the_admin(site: DemoSite) -> None:
    token = admin_token(site)
    assert len(token) >= 16 and token == admin_token(site)  # stable, so recorded runs repeat
    for creds in ({"username": "admin", "password": "nope"}, {"username": "emma", "password": "emma1234"}):
        reply = rest(site, "/rest/default/V1/integration/admin/token", body=creds)
        assert reply.status == 401
        assert "sign-in was incorrect" in reply.json()["message"]
    assert rest(site, "/rest/default/V1/integration/admin/token", body=["admin"]).status == 400


def test_rest_orders_latest_first_and_token_required(site: DemoSite) -> None:
    assert rest(site, "/rest/V1/orders", query=LATEST_ORDER_QUERY).status == 401
    assert rest(site, "/rest/V1/orders", token="forged", query=LATEST_ORDER_QUERY).status == 401
    token = admin_token(site)
    latest = rest(site, "/rest/V1/orders", token=token, query=LATEST_ORDER_QUERY).json()
    assert latest["total_count"] == 2
    assert [o["increment_id"] for o in latest["items"]] == ["000000002"]
    assert latest["items"][0]["items"][0]["sku"] == "DS-SP-001"

    cookie = login(site, "emma", "emma1234")
    fetch(site, "/cart/add", {"product_id": "5", "qty": "2"}, cookie)
    assert fetch(site, "/checkout", {}, cookie).headers["Location"] == "/orders/3"
    latest = rest(site, "/rest/V1/orders", token=token, query=LATEST_ORDER_QUERY).json()
    assert latest["total_count"] == 3
    (order,) = latest["items"]
    assert order["increment_id"] == "000000003"
    assert (order["items"][0]["sku"], order["items"][0]["qty_ordered"], order["grand_total"]) == (
        "DS-HK-002",
        2,
        48.0,
    )
    every = rest(site, "/rest/V1/orders", token=token).json()
    assert [o["increment_id"] for o in every["items"]] == ["000000001", "000000002", "000000003"]


def test_rest_reviews_oldest_first_with_magento_fields(site: DemoSite) -> None:
    assert rest(site, "/rest/V1/products/DS-EL-001/reviews").status == 401
    token = admin_token(site)
    reviews = rest(site, "/rest/V1/products/DS-EL-001/reviews", token=token).json()
    assert [(r["nickname"], r["title"]) for r in reviews] == [
        ("Alex Chen", "Great sound"),
        ("Maria Gomez", "Comfortable"),
        ("Sam Patel", "Broke quickly"),
    ]
    assert reviews[-1]["detail"] == "The hinge cracked after two months."
    assert reviews[-1]["ratings"] == [
        {"vote_id": 3, "rating_id": 4, "rating_name": "Rating", "percent": 40, "value": 2}
    ]
    assert rest(site, "/rest/V1/products/NO-SUCH-SKU/reviews", token=token).status == 404


def test_review_nickname_defaults_to_full_name_in_the_form(site: DemoSite) -> None:
    cookie = login(site, "emma", "emma1234")
    assert (
        'id="review-nickname-input" name="nickname" value="Emma Lopez"'
        in fetch(site, "/products/5", cookie=cookie).body
    )
    review = {"rating": "4", "nickname": "MugLover", "title": "Pretty", "text": "Nice colours."}
    assert fetch(site, "/products/5/reviews", review, cookie).status == 302
    reviews = rest(site, "/rest/V1/products/DS-HK-002/reviews", token=admin_token(site)).json()
    assert (reviews[-1]["nickname"], reviews[-1]["ratings"][0]["percent"]) == ("MugLover", 80)
    assert '<span class="review-author">MugLover</span>' in fetch(site, "/products/5").body


def test_webarena_customer_account_signs_in_as_emma(site: DemoSite) -> None:
    form = fetch(site, "/customer/account/login/").body
    assert '<label for="email">Email</label>' in form and '<label for="pass">Password</label>' in form
    assert '<button id="send2" type="submit">Sign In</button>' in form
    cookie = login(site, "emma.lopez@gmail.com", "Password.123")
    assert '<dd id="account-username">emma</dd>' in fetch(site, "/account", cookie=cookie).body
    wrong = fetch(site, "/login", {"username": "emma.lopez@gmail.com", "password": "emma1234", "next": ""})
    assert wrong.status == 200 and 'id="login-error"' in wrong.body


def test_magento_order_view_page(site: DemoSite) -> None:
    assert fetch(site, "/sales/order/view/order_id/1/").status == 302
    page = fetch(site, "/sales/order/view/order_id/1/", cookie=login(site, "emma", "emma1234"))
    assert page.status == 200
    block = page.body.split('<div class="order-details-items ordered">', 1)[1].split("</div>", 1)[0]
    assert "DS-EL-002" in block and "DS-HK-002" in block and "Ordered: 2" in block
    assert "Order # 000000001" in page.body
    assert (
        fetch(site, "/sales/order/view/order_id/1/", cookie=login(site, "admin", "admin1234")).status == 200
    )
    assert fetch(site, "/sales/order/view/order_id/9/", cookie=login(site, "emma", "emma1234")).status == 404


def test_special_price_section_and_storefront(site: DemoSite) -> None:
    cookie = login(site, "admin", "admin1234")
    edit = fetch(site, "/admin/products/7/edit", cookie=cookie).body
    # the field is rendered by script when the section opens, so it is absent from the served HTML
    assert 'data-index="advanced-pricing" data-special-price=""' in edit
    assert 'name="special_price"' not in edit
    form = {"name": "Vitamin C Face Serum", "price": "15.49", "stock": "80"}
    assert fetch(site, "/admin/products/7", {**form, "special_price": "12.99"}, cookie).status == 302
    assert '<p id="product-special-price">Special price: $12.99</p>' in fetch(site, "/products/7").body
    assert 'data-special-price="12.99"' in fetch(site, "/admin/products/7/edit", cookie=cookie).body
    assert fetch(site, "/admin/products/7", form, cookie).status == 302  # section never opened: kept
    assert fetch(site, "/api/products/7").json()["special_price"] == 12.99
    assert fetch(site, "/admin/products/7", {**form, "special_price": "-1"}, cookie).status == 400
    assert fetch(site, "/admin/products/7", {**form, "special_price": ""}, cookie).status == 302
    assert 'id="product-special-price"' not in fetch(site, "/products/7").body


def test_forum_post_and_comment_urls(site: DemoSite) -> None:
    assert fetch(site, "/f/electronics/submit").status == 302
    cookie = login(site, "emma", "emma1234")
    assert 'id="submission-form"' in fetch(site, "/f/electronics/submit/", cookie=cookie).body
    post = {"title": "Cable for a 2019 laptop?", "body": "Does it work?"}
    created = fetch(site, "/f/electronics/submit", post, cookie)
    assert (created.status, created.headers["Location"]) == (302, "/f/electronics/4/cable-for-a-2019-laptop")
    for path in ("/f/electronics/4/cable-for-a-2019-laptop", "/f/electronics/4/", "/f/electronics/4"):
        page = fetch(site, path).body
        assert '<h1 class="submission__title">Cable for a 2019 laptop?</h1>' in page
        assert '<a class="submission__forum" href="/f/electronics">electronics</a>' in page
    commented = fetch(site, "/f/electronics/4/comment", {"text": "Thanks!"}, cookie)
    assert commented.headers["Location"] == "/f/electronics/4/-/comment/3"
    thread = fetch(site, "/f/electronics/4/-/comment/3").body
    assert 'class="comment comment--highlighted" id="comment-3"' in thread
    assert fetch(site, "/f/home/4/").status == 404  # a post lives in one forum only
    assert fetch(site, "/f/nowhere").status == 404
    assert fetch(site, "/f/electronics/submit", {"title": "", "body": "x"}, cookie).status == 400
    assert "Cable for a 2019 laptop?" in fetch(site, "/f/electronics").body


# --- the official helper functions and judge, unchanged, against the demo site -----------------------


@pytest.fixture
def official(site: DemoSite, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``webarena.evaluation_harness.helper_functions`` pointed at the demo site for one test."""
    for name in ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE"):
        monkeypatch.setenv(name, site.base_url)
    monkeypatch.setenv("OPENAI_BASE_URL", site.base_url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "demo-judge")
    import webarena.browser_env.env_config as env_config
    import webarena.evaluation_harness.helper_functions as helpers
    import webarena.llms.providers.openai_utils as openai_utils

    for module in (env_config, helpers):
        monkeypatch.setattr(module, "SHOPPING", site.base_url)
    monkeypatch.setattr(openai_utils, "_client", None)  # the judge's client is cached per process
    return helpers


def test_official_order_and_review_helpers(site: DemoSite, official: Any) -> None:
    assert official.shopping_get_latest_order_url() == f"{site.base_url}/sales/order/view/order_id/2/"
    cookie = login(site, "emma", "emma1234")
    fetch(site, "/cart/add", {"product_id": "9", "qty": "1"}, cookie)
    fetch(site, "/checkout", {}, cookie)
    assert official.shopping_get_latest_order_url() == f"{site.base_url}/sales/order/view/order_id/3/"

    assert official.shopping_get_sku_latest_review_author("DS-EL-001") == "Sam Patel"
    assert official.shopping_get_sku_latest_review_rating("DS-EL-001") == "40"
    review = {"rating": "5", "nickname": "SimpleEmma", "title": "Great", "text": "Love it."}
    fetch(site, "/products/1/reviews", review, cookie)
    assert official.shopping_get_sku_latest_review_author("DS-EL-001") == "SimpleEmma"
    assert official.shopping_get_sku_latest_review_rating("DS-EL-001") == "100"


@pytest.mark.parametrize(
    ("pred", "reference", "expected"),
    [
        ("The hinge cracked after two months.", "hinge cracked", 1.0),
        ("HINGE   Cracked!", "hinge cracked", 1.0),
        ("They are a bit heavy.", "hinge cracked", 0.0),
        ("the hinge is fine", "hinge cracked", 0.0),
        ("It costs $24.00 in total", "24", 1.0),  # numbers compare as numbers
        ("It costs $1,299.00", "1299", 1.0),
        ("It costs $24.50", "24", 0.0),
        ("whatever", "N/A", 0.0),
    ],
)
def test_official_llm_fuzzy_match_with_demo_judge(
    official: Any, pred: str, reference: str, expected: float
) -> None:
    assert official.llm_fuzzy_match(pred, reference, "What do reviewers complain about?") == expected


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        ("N/A: no reviewer complains about the bottle.", 1.0),
        ("No reviewer complains about this bottle at all", 1.0),  # stop words (the/this) are not required
        ("The ice melts within an hour.", 0.0),
        ("whatever", 0.0),
    ],
)
def test_official_llm_ua_match_with_demo_judge(official: Any, pred: str, expected: float) -> None:
    reason = "No reviewer complains about the bottle"
    assert official.llm_ua_match(pred, reason, "What do reviewers complain about?") == expected


def test_judge_reply_is_a_repeatable_chat_completion(site: DemoSite) -> None:
    prompt = (
        "Help a teacher to grade the answer of a student given a question.\nquestion: q?\n"
        "reference answer: 24\nall the string 'N/A' that you see is a special sequence that means "
        "'not achievable'\nstudent answer: it is 24.0\nConclude the judgement by correct/incorrect/partially correct."
    )
    body = {"model": "gpt-4-1106-preview", "messages": [{"role": "user", "content": prompt}]}
    first, second = (rest(site, "/v1/chat/completions", body=body) for _ in range(2))
    assert first.status == 200 and first.body == second.body
    reply = first.json()
    assert reply["object"] == "chat.completion" and reply["created"] == 1_700_000_000
    assert reply["model"] == "gpt-4-1106-preview" and reply["id"].startswith("chatcmpl-")
    (choice,) = reply["choices"]
    assert (choice["message"]["role"], choice["finish_reason"]) == ("assistant", "stop")
    assert choice["message"]["content"].endswith("Judgement: correct")
    assert (
        reply["usage"]["total_tokens"]
        == reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]
    )
    other = rest(site, "/v1/chat/completions", body={"messages": [{"role": "user", "content": "Hello"}]})
    assert other.status == 400 and "only grades" in other.json()["error"]["message"]
    assert rest(site, "/v1/chat/completions", body={"messages": "x"}).status == 400
