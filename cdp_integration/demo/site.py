"""A tiny shop served over real HTTP, with the surface WebArena shopping tasks touch, for tests and demos.

Besides the storefront and admin pages it serves what the official WebArena evaluators call on a live
instance: a subset of Magento's REST API (``/rest/...``: admin token, order search, product reviews) and
an OpenAI-compatible judge (``POST /v1/chat/completions``) that grades ``llm_fuzzy_match`` and
``llm_ua_match`` prompts by a fixed rule (see `judge_reply`).
"""

import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self, cast
from urllib.parse import parse_qs, quote, unquote, urlsplit

from cdp_integration.demo import pages
from cdp_integration.demo.state import FORUMS, Order, Product, ShopState, User, Visitor

HTML = "text/html; charset=utf-8"
JSON = "application/json; charset=utf-8"
_MAX_BODY = 1 << 20
_BIG_MAX = 200_000
_COOKIE_ATTRS = "HttpOnly; Path=/; SameSite=Lax"
_ERROR_IDS = {400: "bad-request", 403: "forbidden", 404: "not-found", 405: "not-allowed", 409: "conflict"}
_ASSETS: dict[str, tuple[bytes, str]] = {
    "/static/style.css": (pages.STYLE_CSS.encode(), "text/css; charset=utf-8"),
    "/static/app.js": (pages.APP_JS.encode(), "text/javascript; charset=utf-8"),
    "/static/logo.png": (pages.LOGO_PNG, "image/png"),
}


@dataclass
class Request:
    """A parsed request plus the session and user its cookie resolves to (None when absent or stale).

    `headers` has lower-case names; `body` is the raw request body (JSON APIs read it).
    """

    method: str
    path: str
    target: str
    query: dict[str, str]
    form: dict[str, str]
    token: str | None
    session: Visitor | None
    user: User | None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass
class Response:
    """What a handler returns; the HTTP layer adds Content-Length (except for 204)."""

    status: int
    body: bytes = b""
    content_type: str = HTML
    headers: list[tuple[str, str]] = field(default_factory=list)


def html_response(text: str, status: int = 200) -> Response:
    return Response(status, text.encode())


def json_response(value: object, status: int = 200) -> Response:
    return Response(status, json.dumps(value).encode(), JSON)


def redirect(location: str, *headers: tuple[str, str]) -> Response:
    return Response(302, b"", HTML, [("Location", location), *headers])


def _first_values(raw: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _safe_next(value: str, default: str) -> str:
    """Only same-site paths, so `next` cannot become an open redirect."""
    return value if value.startswith("/") and not value.startswith("//") else default


Handler = Callable[[Request, re.Match[str]], Response]


@dataclass(frozen=True)
class Route:
    """`shared=False` marks routes that never read shop state, so they run without taking the lock."""

    method: str
    pattern: re.Pattern[str]
    handler: Handler
    shared: bool = True


class ShopApp:
    """Routing and handlers over one `ShopState`; `dispatch` runs each handler under the state lock."""

    def __init__(self, state: ShopState | None = None) -> None:
        self.state = state or ShopState()
        table: list[tuple[str, str, Handler]] = [
            ("GET", r"/", self.home),
            ("GET", r"/login", self.login_form),
            ("POST", r"/login", self.login),
            ("GET", r"/logout", self.logout),
            ("GET", r"/search", self.search),
            ("GET", r"/products", self.products),
            ("GET", r"/products/(\d+)", self.product),
            ("POST", r"/products/(\d+)/reviews", self.add_review),
            ("POST", r"/cart/add", self.cart_add),
            ("GET", r"/cart", self.cart),
            ("POST", r"/checkout", self.checkout),
            ("GET", r"/orders", self.orders),
            ("GET", r"/orders/(\d+)", self.order),
            ("GET", r"/account", self.account),
            ("GET", r"/feed", lambda r, m: html_response(pages.feed_page(r.user))),
            ("GET", r"/preferences", self.preferences),
            ("GET", r"/links", lambda r, m: html_response(pages.links_page(r.user))),
            ("GET", r"/help", lambda r, m: html_response(pages.help_page(r.user))),
            ("GET", r"/api/products", self.api_products),
            ("GET", r"/api/products/(\d+)", self.api_product),
            ("GET", r"/api/orders/latest", self.api_latest_order),
            ("GET", r"/api/reviews/latest", self.api_latest_review),
            ("GET", r"/admin", self.admin),
            ("GET", r"/admin/products", self.admin_products),
            ("GET", r"/admin/products/(\d+)/edit", self.admin_edit),
            ("POST", r"/admin/products/(\d+)", self.admin_save),
            ("GET", r"/admin/orders", self.admin_orders),
            ("GET", r"/customer/account/login/?", lambda r, m: html_response(pages.customer_login_page())),
            ("GET", r"/sales/order/view/order_id/(\d+)/?", self.sales_order),
            ("POST", r"/rest(?:/default)?/V1/integration/admin/token", self.rest_token),
            ("GET", r"/rest(?:/default)?/V1/orders", self.rest_orders),
            ("GET", r"/rest(?:/default)?/V1/products/([^/]+)/reviews", self.rest_reviews),
            ("GET", r"/forums", lambda r, m: html_response(pages.forums_page(r.user, FORUMS))),
            ("GET", r"/f/([\w-]+)/?", self.forum),
            ("GET", r"/f/([\w-]+)/submit/?", self.submit_form),
            ("POST", r"/f/([\w-]+)/submit/?", self.submit_post),
            ("GET", r"/f/([\w-]+)/(\d+)(?:/[\w-]*)?/?", self.post),
            ("GET", r"/f/([\w-]+)/(\d+)/-/comment/(\d+)/?", self.post),
            ("POST", r"/f/([\w-]+)/(\d+)/comment", self.add_comment),
            ("GET", r"/init", self.init),
            ("POST", r"/init", self.init),
        ]
        stateless: list[tuple[str, str, Handler]] = [
            ("POST", r"/v1/chat/completions", self.chat_completion),
            ("GET", r"/big", self.big),
            ("GET", r"/static/[\w.-]+", self.asset),
            ("GET", r"/favicon.ico", lambda r, m: Response(204)),
        ]
        self.routes = [Route(method, re.compile(rx), fn) for method, rx, fn in table]
        self.routes += [Route(method, re.compile(rx), fn, shared=False) for method, rx, fn in stateless]

    def dispatch(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> Response:
        """Route one request; unknown paths get 404, known paths with another method 405."""
        url = urlsplit(target)
        matches = [(route, m) for route in self.routes if (m := route.pattern.fullmatch(url.path))]
        found = next(((route, m) for route, m in matches if route.method == method), None)
        lowered = {name.lower(): value for name, value in (headers or {}).items()}
        is_form = method == "POST" and not lowered.get("content-type", "").startswith("application/json")
        form = _first_values(body.decode("utf-8", "replace")) if is_form else {}
        request = Request(
            method, url.path, target, _first_values(url.query), form, None, None, None, lowered, body
        )
        if found and not found[0].shared:
            return found[0].handler(request, found[1])
        with self.state.lock:
            token = _session_token(lowered.get("cookie", ""))
            request.session = self.state.sessions.get(token) if token else None
            request.token = token if request.session else None
            if request.session and request.session.username:
                request.user = self.state.users.get(request.session.username)
            if found:
                return found[0].handler(request, found[1])
            if matches:
                allowed = ", ".join(sorted({route.method for route, _ in matches}))
                response = self._error(request, 405, f"Use {allowed}.")
                response.headers.append(("Allow", allowed))
                return response
            return self._error(request, 404, "The page you requested was not found.")

    def _login_redirect(self, request: Request, next_path: str | None = None) -> Response:
        return redirect("/login?next=" + quote(next_path or request.target, safe="/"))

    def _error(self, request: Request, status: int, message: str) -> Response:
        """An error page whose message carries a per-status id (#not-found, #forbidden, ...)."""
        title = f"{status} {HTTPStatus(status).phrase}"
        page = pages.error_page(request.user, title, message, _ERROR_IDS.get(status, "error-message"))
        return html_response(page, status)

    def _admin(self, request: Request, next_path: str | None = None) -> User | Response:
        """The signed-in admin, or the response that turns the visitor away (login redirect or 403)."""
        if request.user is None:
            return self._login_redirect(request, next_path)
        if not request.user.is_admin:
            return self._error(request, 403, "You are not allowed to view this page.")
        return request.user

    def _ensure_session(self, request: Request) -> tuple[Visitor, list[tuple[str, str]]]:
        """The visitor's session, creating an anonymous one (and its cookie header) when there is none."""
        if request.session is not None:
            return request.session, []
        token = self.state.new_session(None)
        return self.state.sessions[token], [("Set-Cookie", f"session={token}; {_COOKIE_ATTRS}")]

    def asset(self, r: Request, m: re.Match[str]) -> Response:
        if r.path not in _ASSETS:
            return self._error(r, 404, "File not found.")
        body, content_type = _ASSETS[r.path]
        return Response(200, body, content_type, [("Cache-Control", "max-age=3600")])

    def home(self, r: Request, m: re.Match[str]) -> Response:
        featured = [self.state.products[i] for i in (1, 4, 9, 11)]
        return html_response(pages.home_page(r.user, featured, self.state.categories()))

    def login_form(self, r: Request, m: re.Match[str]) -> Response:
        return html_response(pages.login_page(r.query.get("next", "")))

    def login(self, r: Request, m: re.Match[str]) -> Response:
        username, next_path = r.form.get("username", ""), r.form.get("next", "")
        user = self.state.authenticate(username, r.form.get("password", ""))
        if user is None:
            return html_response(pages.login_page(next_path, "Invalid username or password.", username))
        cart = r.session.cart if r.session else {}
        if r.token:
            self.state.sessions.pop(r.token, None)
        token = self.state.new_session(user.username, cart)
        return redirect(
            _safe_next(next_path, "/account"), ("Set-Cookie", f"session={token}; {_COOKIE_ATTRS}")
        )

    def logout(self, r: Request, m: re.Match[str]) -> Response:
        if r.token:
            self.state.sessions.pop(r.token, None)
        return redirect("/", ("Set-Cookie", f"session=; Max-Age=0; {_COOKIE_ATTRS}"))

    def search(self, r: Request, m: re.Match[str]) -> Response:
        q, category, sort = r.query.get("q", ""), r.query.get("category", ""), r.query.get("sort", "")
        found = self.state.search(q, category, sort)
        title = f"Search results for: '{q}'" if q else "All products"
        return html_response(
            pages.product_list_page(r.user, title, found, self.state.categories(), q, category, sort)
        )

    def products(self, r: Request, m: re.Match[str]) -> Response:
        category, sort = r.query.get("category", ""), r.query.get("sort", "")
        found = self.state.search("", category, sort)
        title = category or "All products"
        return html_response(
            pages.product_list_page(r.user, title, found, self.state.categories(), "", category, sort)
        )

    def product(self, r: Request, m: re.Match[str]) -> Response:
        p = self.state.products.get(int(m[1]))
        if p is None:
            return self._error(r, 404, "Product not found.")
        return html_response(pages.product_page(r.user, p, self.state.reviews_for(p.id)))

    def add_review(self, r: Request, m: re.Match[str]) -> Response:
        p = self.state.products.get(int(m[1]))
        if p is None:
            return self._error(r, 404, "Product not found.")
        if r.user is None:
            return self._login_redirect(r, f"/products/{p.id}")
        rating = _int(r.form.get("rating"))
        title, text = r.form.get("title", "").strip(), r.form.get("text", "").strip()
        if rating is None or not 1 <= rating <= 5 or not title or not text:
            error = "Please give a rating from 1 to 5, a title and a review."
            return html_response(pages.product_page(r.user, p, self.state.reviews_for(p.id), error), 400)
        nickname = r.form.get("nickname", "").strip() or r.user.username
        self.state.add_review(p.id, nickname, rating, title, text)
        return redirect(f"/products/{p.id}")

    def cart_add(self, r: Request, m: re.Match[str]) -> Response:
        product_id, qty = _int(r.form.get("product_id")), _int(r.form.get("qty", "1"))
        if product_id is None or product_id not in self.state.products:
            return self._error(r, 404, "Product not found.")
        if qty is None or not 1 <= qty <= 99:
            return self._error(r, 400, "Quantity must be 1-99.")
        session, headers = self._ensure_session(r)
        session.cart[product_id] = min(99, session.cart.get(product_id, 0) + qty)
        return redirect("/cart", *headers)

    def _cart_lines(self, r: Request) -> list[tuple[Product, int]]:
        cart = r.session.cart if r.session else {}
        return [(self.state.products[pid], qty) for pid, qty in cart.items()]

    def cart(self, r: Request, m: re.Match[str]) -> Response:
        return html_response(pages.cart_page(r.user, self._cart_lines(r)))

    def checkout(self, r: Request, m: re.Match[str]) -> Response:
        if r.user is None or r.session is None:
            return self._login_redirect(r, "/cart")
        if not r.session.cart:
            return html_response(pages.cart_page(r.user, [], "Your cart is empty."), 400)
        try:
            order = self.state.place_order(r.user.username, r.session.cart)
        except ValueError as exc:
            return html_response(pages.cart_page(r.user, self._cart_lines(r), str(exc)), 409)
        r.session.cart.clear()
        return redirect(f"/orders/{order.id}")

    def orders(self, r: Request, m: re.Match[str]) -> Response:
        if r.user is None:
            return self._login_redirect(r)
        return html_response(pages.orders_page(r.user, self.state.orders_for(r.user.username)))

    def order(self, r: Request, m: re.Match[str]) -> Response:
        if r.user is None:
            return self._login_redirect(r)
        order = self.state.order(int(m[1]))
        if order is None or (order.username != r.user.username and not r.user.is_admin):
            return self._error(r, 404, "Order not found.")
        return html_response(pages.order_page(r.user, order))

    def sales_order(self, r: Request, m: re.Match[str]) -> Response:
        """Magento's order page, the URL ``shopping_get_latest_order_url()`` returns."""
        if r.user is None:
            return self._login_redirect(r)
        order = self.state.order(int(m[1]))
        if order is None or (order.username != r.user.username and not r.user.is_admin):
            return self._error(r, 404, "Order not found.")
        return html_response(pages.sales_order_page(r.user, order))

    def account(self, r: Request, m: re.Match[str]) -> Response:
        if r.user is None:
            return self._login_redirect(r)
        return html_response(pages.account_page(r.user))

    def preferences(self, r: Request, m: re.Match[str]) -> Response:
        recent = [self.state.products[i].sku for i in (3, 1, 7)]
        return html_response(pages.preferences_page(r.user, recent))

    def api_products(self, r: Request, m: re.Match[str]) -> Response:
        found = self.state.search(r.query.get("q", ""), r.query.get("category", ""))
        limit = _int(r.query.get("limit"))
        items = found[: max(0, limit)] if limit is not None else found
        return json_response({"items": [p.to_json() for p in items], "total_count": len(found)})

    def api_product(self, r: Request, m: re.Match[str]) -> Response:
        p = self.state.products.get(int(m[1]))
        return json_response(p.to_json()) if p else json_response({"error": "product not found"}, 404)

    def api_latest_order(self, r: Request, m: re.Match[str]) -> Response:
        if r.user is None:
            return json_response({"error": "login required"}, 401)
        orders = self.state.orders_for(r.user.username)
        return json_response(orders[0].to_json()) if orders else json_response({"error": "no orders"}, 404)

    def api_latest_review(self, r: Request, m: re.Match[str]) -> Response:
        sku = r.query.get("sku", "")
        p = self.state.product_by_sku(sku) if sku else None
        if p is None:
            return json_response({"error": "unknown sku" if sku else "sku is required"}, 404 if sku else 400)
        reviews = self.state.reviews_for(p.id)
        if not reviews:
            return json_response({"error": "no reviews"}, 404)
        return json_response({"sku": p.sku, **asdict(reviews[0])})

    def admin(self, r: Request, m: re.Match[str]) -> Response:
        if isinstance(admin := self._admin(r), Response):
            return admin
        s = self.state
        low = [p for p in s.products.values() if p.stock < 10]
        revenue = round(sum(o.total for o in s.orders), 2)
        return html_response(pages.admin_dashboard(admin, len(s.products), len(s.orders), revenue, low))

    def admin_products(self, r: Request, m: re.Match[str]) -> Response:
        if isinstance(admin := self._admin(r), Response):
            return admin
        return html_response(pages.admin_products_page(admin, list(self.state.products.values())))

    def admin_edit(self, r: Request, m: re.Match[str]) -> Response:
        if isinstance(admin := self._admin(r), Response):
            return admin
        p = self.state.products.get(int(m[1]))
        if p is None:
            return self._error(r, 404, "Product not found.")
        return html_response(pages.admin_edit_page(admin, p, saved=r.query.get("saved") == "1"))

    def admin_save(self, r: Request, m: re.Match[str]) -> Response:
        if isinstance(admin := self._admin(r, f"/admin/products/{m[1]}/edit"), Response):
            return admin
        p = self.state.products.get(int(m[1]))
        if p is None:
            return self._error(r, 404, "Product not found.")
        name, stock = r.form.get("name", "").strip(), _int(r.form.get("stock"))
        price = _money(r.form.get("price", ""))
        special = r.form.get("special_price", "").strip()  # absent unless the section was opened
        special_price = _money(special) if special else None
        if (
            not name
            or math.isnan(price)
            or stock is None
            or stock < 0
            or (special_price is not None and math.isnan(special_price))
        ):
            error = "Name is required; prices and quantity must be non-negative numbers."
            return html_response(pages.admin_edit_page(admin, p, False, error, r.form), 400)
        p.name, p.price, p.stock = name, price, stock
        if "special_price" in r.form:
            p.special_price = special_price
        return redirect(f"/admin/products/{p.id}/edit?saved=1")

    def admin_orders(self, r: Request, m: re.Match[str]) -> Response:
        if isinstance(admin := self._admin(r), Response):
            return admin
        return html_response(pages.admin_orders_page(admin, sorted(self.state.orders, key=lambda o: -o.id)))

    def _rest_admin(self, r: Request) -> User | Response:
        """The admin behind ``Authorization: Bearer <token>``, or Magento's 401 reply."""
        scheme, _, token = r.headers.get("authorization", "").partition(" ")
        user = self.state.user_for_token(token.strip()) if scheme.lower() == "bearer" else None
        if user is None:
            return json_response({"message": "The consumer isn't authorized to access %resources."}, 401)
        return user

    def rest_token(self, r: Request, m: re.Match[str]) -> Response:
        """``POST /rest/default/V1/integration/admin/token``: JSON credentials in, a JSON string out."""
        try:
            body = json.loads(r.body or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return json_response({"message": "The request body must be a JSON object."}, 400)
        token = self.state.api_token(str(body.get("username", "")), str(body.get("password", "")))
        if token is None:
            message = "The account sign-in was incorrect or your account is disabled temporarily."
            return json_response({"message": message}, 401)
        return json_response(token)

    def rest_orders(self, r: Request, m: re.Match[str]) -> Response:
        """``GET /rest/V1/orders`` with Magento's ``searchCriteria`` sort and page size."""
        if isinstance(admin := self._rest_admin(r), Response):
            return admin
        field_name = r.query.get("searchCriteria[sortOrders][0][field]", "created_at")
        descending = r.query.get("searchCriteria[sortOrders][0][direction]", "ASC").upper() == "DESC"
        if field_name == "created_at":
            found = self.state.orders_by_date(newest_first=descending)
        elif field_name in ("entity_id", "increment_id"):
            found = sorted(self.state.orders, key=lambda o: o.id, reverse=descending)
        else:
            return json_response({"message": f'"{field_name}" is not a sortable field.'}, 400)
        size, page = (
            _int(r.query.get("searchCriteria[pageSize]")),
            _int(r.query.get("searchCriteria[currentPage]")),
        )
        start = (max(page or 1, 1) - 1) * size if size else 0
        items = found[start : start + size] if size and size > 0 else found
        return json_response({"items": [self._rest_order(o) for o in items], "total_count": len(found)})

    def _rest_order(self, order: Order) -> dict[str, object]:
        user = self.state.users.get(order.username)
        return {
            "entity_id": order.id,
            "increment_id": order.increment_id,
            "created_at": order.created_at,
            "status": order.status,
            "customer_email": user.email if user else "",
            "grand_total": order.total,
            "items": [
                {
                    "sku": x.sku,
                    "name": x.name,
                    "qty_ordered": x.qty,
                    "price": x.unit_price,
                    "row_total": x.total,
                }
                for x in order.lines
            ],
        }

    def rest_reviews(self, r: Request, m: re.Match[str]) -> Response:
        """``GET /rest/V1/products/{sku}/reviews``: oldest first, as the helpers' ``[-1]`` expects."""
        if isinstance(admin := self._rest_admin(r), Response):
            return admin
        p = self.state.product_by_sku(unquote(m[1]))
        if p is None:
            message = "The product that was requested doesn't exist. Verify the product and try again."
            return json_response({"message": message}, 404)
        reviews = sorted(self.state.reviews_for(p.id), key=lambda x: x.id)
        return json_response(
            [
                {
                    "id": x.id,
                    "title": x.title,
                    "detail": x.text,
                    "nickname": x.author,
                    "ratings": [
                        {
                            "vote_id": x.id,
                            "rating_id": 4,
                            "rating_name": "Rating",
                            "percent": x.rating * 20,
                            "value": x.rating,
                        }
                    ],
                    "review_entity": "product",
                    "review_type": 2,
                    "review_status": 1,
                    "created_at": x.created_at,
                    "entity_pk_value": p.id,
                    "store_id": 1,
                }
                for x in reviews
            ]
        )

    def forum(self, r: Request, m: re.Match[str]) -> Response:
        if m[1] not in FORUMS:
            return self._error(r, 404, "No such forum.")
        return html_response(pages.forum_page(r.user, m[1], FORUMS[m[1]], self.state.posts_in(m[1])))

    def submit_form(self, r: Request, m: re.Match[str]) -> Response:
        if m[1] not in FORUMS:
            return self._error(r, 404, "No such forum.")
        if r.user is None:
            return self._login_redirect(r)
        return html_response(pages.submit_page(r.user, m[1]))

    def submit_post(self, r: Request, m: re.Match[str]) -> Response:
        if m[1] not in FORUMS:
            return self._error(r, 404, "No such forum.")
        if r.user is None:
            return self._login_redirect(r, f"/f/{m[1]}/submit")
        title, body = r.form.get("title", "").strip(), r.form.get("body", "").strip()
        if not title or not body:
            return html_response(
                pages.submit_page(r.user, m[1], "A title and a body are required.", r.form), 400
            )
        post = self.state.add_post(m[1], r.user.full_name, title, body)
        return redirect(post.path)

    def post(self, r: Request, m: re.Match[str]) -> Response:
        """A post at ``/f/<forum>/<id>[/<slug>]``, or with one comment highlighted (``.../-/comment/<id>``)."""
        post = self.state.post(int(m[2]))
        if post is None or post.forum != m[1]:
            return self._error(r, 404, "No such submission.")
        highlight = _int(m[3]) if m.re.groups >= 3 else None
        return html_response(pages.post_page(r.user, post, self.state.comments_on(post.id), highlight))

    def add_comment(self, r: Request, m: re.Match[str]) -> Response:
        post = self.state.post(int(m[2]))
        if post is None or post.forum != m[1]:
            return self._error(r, 404, "No such submission.")
        if r.user is None:
            return self._login_redirect(r, post.path)
        text = r.form.get("text", "").strip()
        if not text:
            return redirect(post.path)
        comment = self.state.add_comment(post.id, r.user.full_name, text)
        return redirect(f"/f/{post.forum}/{post.id}/-/comment/{comment.id}")

    def chat_completion(self, r: Request, m: re.Match[str]) -> Response:
        """An OpenAI-compatible ``chat.completion`` whose answer is `judge_reply` on the last user message."""
        try:
            body = json.loads(r.body or b"null")
            prompt = next(
                str(msg.get("content", "")) for msg in reversed(body["messages"]) if msg.get("role") == "user"
            )
        except (ValueError, KeyError, TypeError, AttributeError, StopIteration):
            return _openai_error("Expected a JSON body with a user message in `messages`.")
        content = judge_reply(prompt)
        if content is None:
            return _openai_error(
                "The demo judge only grades WebArena's llm_fuzzy_match and llm_ua_match prompts."
            )
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
        prompt_tokens, completion_tokens = len(prompt.split()), len(content.split())
        return json_response(
            {
                "id": f"chatcmpl-demo-{digest}",
                "object": "chat.completion",
                "created": _JUDGE_CREATED,
                "model": str(body.get("model", "demo-judge")),
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    def init(self, r: Request, m: re.Match[str]) -> Response:
        self.state.reset()
        return json_response({"status": "ok"})

    def big(self, r: Request, m: re.Match[str]) -> Response:
        n = _int(r.query.get("n")) or 10_000
        return html_response(pages.big_page(min(max(n, 1), _BIG_MAX)))


def _money(value: str) -> float:
    """A non-negative amount rounded to cents, or NaN when `value` is not one."""
    try:
        amount = round(float(value), 2)
    except ValueError:
        return math.nan
    return amount if math.isfinite(amount) and amount >= 0 else math.nan


def _openai_error(message: str) -> Response:
    return json_response({"error": {"message": message, "type": "invalid_request_error", "code": None}}, 400)


_JUDGE_CREATED = 1_700_000_000
"""Fixed ``created`` stamp: the judge's replies are byte-for-byte repeatable."""

_FUZZY_PROMPT = re.compile(
    r"question: (?P<question>.*?)\nreference answer: (?P<reference>.*?)\n"
    r"all the string 'N/A'.*?\nstudent answer: (?P<answer>.*)\nConclude the judgement",
    re.DOTALL,
)
_UA_PROMPT = re.compile(
    r"task: (?P<question>.*?)\nactual unachievable reason: (?P<reference>.*?)\n"
    r"reported unachievable reason: (?P<answer>.*?)\nThe task described above",
    re.DOTALL,
)
_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)*")
_STOPWORDS = frozenset(
    "a an the is are was were be been to of in on at for about any there this that it its and or".split()  # noqa: SIM905
)


def _terms(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens; thousands separators dropped so "1,299.00" is one number."""
    return _WORD.findall(re.sub(r"(?<=\d),(?=\d{3})", "", text.lower()))


def _number(term: str) -> float | None:
    try:
        return float(term)
    except ValueError:
        return None


def _missing(wanted: list[str], text: str) -> list[str]:
    """Terms of `wanted` absent from `text`; numbers match numerically ("24" matches "24.00")."""
    have = set(_terms(text))
    numbers = {n for t in have if (n := _number(t)) is not None}
    return [
        t for t in dict.fromkeys(wanted) if t not in have and ((n := _number(t)) is None or n not in numbers)
    ]


def judge_reply(prompt: str) -> str | None:
    """The demo judge's deterministic verdict on an official WebArena judge prompt (None: not one).

    - ``llm_fuzzy_match``: "correct" iff every alphanumeric term of the reference answer appears in the
      student answer (case-insensitive, numbers compared as numbers), else "incorrect".
    - ``llm_ua_match``: "same" iff every term of the actual unachievable reason, stop words (a, the, is,
      of, about, ...) left out, appears in the reported reason, else "different".
    """
    if match := _FUZZY_PROMPT.search(prompt):
        wanted = _terms(match["reference"])
        missing = _missing(wanted, match["answer"])
        if not missing:
            return f"All {len(wanted)} terms of the reference answer appear in the student answer. Judgement: correct"
        return f"{len(missing)} of {len(wanted)} reference terms are missing ({', '.join(missing)}). Judgement: incorrect"
    if match := _UA_PROMPT.search(prompt):
        wanted = [t for t in _terms(match["reference"]) if t not in _STOPWORDS]
        missing = _missing(wanted, match["answer"])
        if not missing:
            return "The reported reason names every key term of the actual reason. Verdict: same"
        return f"The reported reason leaves out {', '.join(missing)}. Verdict: different"
    return None


def _session_token(cookie_header: str) -> str | None:
    try:
        morsel = SimpleCookie(cookie_header).get("session")
    except CookieError:
        return None
    return morsel.value if morsel and morsel.value else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: ShopApp) -> None:
        super().__init__(address, _Handler)
        self.app = app

    def handle_error(self, request: object, client_address: object) -> None:
        """Stay quiet: clients dropping connections is normal for a browser-driven demo."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "DemoShop/1.0"
    timeout = 30

    def log_message(self, format: str, *args: object) -> None:
        """No per-request logging to stderr."""

    def _serve(self, method: str) -> None:
        length = _int(self.headers.get("Content-Length")) or 0
        if length > _MAX_BODY:
            self.send_error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
            return
        body = self.rfile.read(length) if length > 0 else b""
        app = cast(_Server, self.server).app
        try:
            response = app.dispatch(
                "GET" if method == "HEAD" else method, self.path, body, dict(self.headers.items())
            )
        except Exception:
            response = Response(500, b"Internal Server Error", "text/plain; charset=utf-8")
        self.send_response(response.status)
        if response.status != HTTPStatus.NO_CONTENT:
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(response.body)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_HEAD(self) -> None:
        self._serve("HEAD")


class DemoSite:
    """The demo shop on a background thread; `start()` returns the base URL, `stop()` frees the port."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self.app = ShopApp()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """`http://host:port` of the running server; RuntimeError when stopped."""
        if self._server is None:
            raise RuntimeError("DemoSite is not running")
        host, port = self._server.server_address[:2]
        return f"http://{cast(str, host)}:{port}"

    def start(self) -> str:
        """Bind (port 0 picks a free port), serve on a daemon thread and return the base URL."""
        if self._server is not None:
            raise RuntimeError("DemoSite is already running")
        self._server = _Server((self.host, self.port), self.app)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="demo-site", daemon=True
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving and close the listening socket; safe to call twice."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join()

    def reset(self) -> None:
        """Same effect as POST /init."""
        self.app.state.reset()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
