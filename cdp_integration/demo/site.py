"""A tiny shop served over real HTTP, with the surface WebArena shopping tasks touch, for tests and demos."""

import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self, cast
from urllib.parse import parse_qs, quote, urlsplit

from cdp_integration.demo import pages
from cdp_integration.demo.state import Product, Session, ShopState, User

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
    """A parsed request plus the session and user its cookie resolves to (None when absent or stale)."""

    method: str
    path: str
    target: str
    query: dict[str, str]
    form: dict[str, str]
    token: str | None
    session: Session | None
    user: User | None


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
            ("GET", r"/init", self.init),
            ("POST", r"/init", self.init),
        ]
        stateless: list[tuple[str, str, Handler]] = [
            ("GET", r"/big", self.big),
            ("GET", r"/static/[\w.-]+", self.asset),
            ("GET", r"/favicon.ico", lambda r, m: Response(204)),
        ]
        self.routes = [Route(method, re.compile(rx), fn) for method, rx, fn in table]
        self.routes += [Route(method, re.compile(rx), fn, shared=False) for method, rx, fn in stateless]

    def dispatch(self, method: str, target: str, body: bytes, cookie_header: str) -> Response:
        """Route one request; unknown paths get 404, known paths with another method 405."""
        url = urlsplit(target)
        matches = [(route, m) for route in self.routes if (m := route.pattern.fullmatch(url.path))]
        found = next(((route, m) for route, m in matches if route.method == method), None)
        form = _first_values(body.decode("utf-8", "replace")) if method == "POST" else {}
        request = Request(method, url.path, target, _first_values(url.query), form, None, None, None)
        if found and not found[0].shared:
            return found[0].handler(request, found[1])
        with self.state.lock:
            token = _session_token(cookie_header)
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

    def _ensure_session(self, request: Request) -> tuple[Session, list[tuple[str, str]]]:
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
        if self.state.authenticate(username, r.form.get("password", "")) is None:
            return html_response(pages.login_page(next_path, "Invalid username or password.", username))
        cart = r.session.cart if r.session else {}
        if r.token:
            self.state.sessions.pop(r.token, None)
        token = self.state.new_session(username, cart)
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
        self.state.add_review(p.id, r.user.username, rating, title, text)
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
        try:
            price = round(float(r.form.get("price", "")), 2)
        except ValueError:
            price = math.nan
        if not name or not (math.isfinite(price) and price >= 0) or stock is None or stock < 0:
            error = "Name is required; price and quantity must be non-negative numbers."
            return html_response(pages.admin_edit_page(admin, p, False, error, r.form), 400)
        p.name, p.price, p.stock = name, price, stock
        return redirect(f"/admin/products/{p.id}/edit?saved=1")

    def admin_orders(self, r: Request, m: re.Match[str]) -> Response:
        if isinstance(admin := self._admin(r), Response):
            return admin
        return html_response(pages.admin_orders_page(admin, sorted(self.state.orders, key=lambda o: -o.id)))

    def init(self, r: Request, m: re.Match[str]) -> Response:
        self.state.reset()
        return json_response({"status": "ok"})

    def big(self, r: Request, m: re.Match[str]) -> Response:
        n = _int(r.query.get("n")) or 10_000
        return html_response(pages.big_page(min(max(n, 1), _BIG_MAX)))


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
                "GET" if method == "HEAD" else method, self.path, body, self.headers.get("Cookie", "")
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
