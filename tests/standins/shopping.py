"""Magento stand-ins: the storefront (with the REST endpoints the evaluator helpers call) and the admin."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field

from tests.standins.server import Request, Response, SiteApp, esc, json_response, not_found, page, redirect

CUSTOMER = ("emma.lopez@gmail.com", "Password.123")
ADMIN = ("admin", "admin1234")


@dataclass(frozen=True)
class Product:
    id: int
    sku: str
    name: str
    price: float
    slug: str


@dataclass
class Review:
    nickname: str
    title: str
    stars: int
    detail: str = ""


@dataclass
class Order:
    id: int
    created_at: str
    status: str
    items: list[str]
    """SKUs."""

    @property
    def increment_id(self) -> str:
        return f"{self.id:09d}"


PRODUCTS = {
    p.sku: p
    for p in (
        Product(
            1,
            "B07DFJ5XKH",
            "Foundation For Mattress With Frame Set",
            209.99,
            "foundation-for-mattress-with-frame-set",
        ),
        Product(2, "B072XS3F6W", "Table Lamp with USB Port", 39.99, "table-lamp-with-usb-port"),
        Product(
            3, "B00J8RZL7I", "Floor Lamp, Modern Standing Light", 45.99, "floor-lamp-modern-standing-light"
        ),
        Product(4, "B01M5Q0ZQ4", "Sony Computer Entertainment VR", 299.0, "sony-computer-entertainment-vr"),
        Product(5, "B08SHOE19", "Canvas Slip-On Sneaker", 19.99, "canvas-slip-on-sneaker"),
        Product(6, "B08SHOE39", "Leather Ankle Boot", 39.0, "leather-ankle-boot"),
    )
}
BY_ID = {p.id: p for p in PRODUCTS.values()}
BY_SLUG = {p.slug: p for p in PRODUCTS.values()}


class Shopping(SiteApp):
    name = "shopping"

    def __init__(self) -> None:
        super().__init__()
        r = self.route
        r("GET", r"/", self.home)
        r("GET", r"/customer/account/login/?", self.login_form)
        r("POST", r"/customer/account/loginPost/?", self.login)
        r("GET", r"/customer/account/?", self.account)
        r("GET", r"/clothing-shoes-jewelry/women/shoes\.html", self.shoes)
        r("GET", r"/sales/order/history/?", self.history)
        r("GET", r"/sales/order/view/order_id/(\d+)/?", self.order)
        r("POST", r"/sales/order/reorder/order_id/(\d+)/?", self.reorder)
        r("GET", r"/checkout/cart/?", self.cart)
        r("GET", r"/checkout/?", self.checkout)
        r("POST", r"/checkout/placeOrder", self.place_order)
        r("GET", r"/checkout/onepage/success/?", self.success)
        r("POST", r"/review/product/post/id/(\d+)/?", self.post_review)
        r("POST", r"/rest/default/V1/integration/admin/token", self.rest_token)
        r("GET", r"/rest/V1/orders", self.rest_orders)
        r("GET", r"/rest/V1/products/([\w-]+)/reviews", self.rest_reviews)
        r("GET", r"/([\w-]+)\.html", self.product)

    def reset(self) -> None:
        self.tokens: set[str] = set()
        self.cart_items: list[str] = []
        self.orders = {
            o.id: o
            for o in (
                Order(170, "2022-09-14 10:00:00", "complete", ["B08SHOE39"]),
                Order(179, "2023-03-02 09:12:00", "canceled", ["B07DFJ5XKH"]),
                Order(183, "2023-05-11 16:40:00", "canceled", ["B072XS3F6W"]),
                Order(187, "2023-05-20 11:05:00", "complete", ["B00J8RZL7I"]),
            )
        }
        self.reviews: dict[str, list[Review]] = {
            "B00J8RZL7I": [Review("Lampfan", "Bright enough", 4)],
            "B01M5Q0ZQ4": [
                Review("Gamer01", "Great for the price", 5),
                Review("kb", "didn't last a year without issues", 2),
                Review("Rob", "Works fine", 4),
                Review(
                    "Ann",
                    "Disappointing. Didn't last long before it stopped powering on and needed to be sent in for repair.",
                    1,
                ),
                Review("Liz", "Received used items!!", 1),
            ],
        }

    def _page(self, r: Request, title: str, body: str) -> Response:
        account = (
            '<a href="/customer/account/">My Account</a>'
            if r.user
            else '<a href="/customer/account/login/">Sign In</a>'
        )
        nav = f'<nav><a href="/">One Stop Market</a> {account} <a href="/checkout/cart/">My Cart</a></nav>'
        return page(title, nav + body, user=r.user)

    def home(self, r: Request, m: re.Match[str]) -> Response:
        links = "".join(f'<li><a href="/{p.slug}.html">{esc(p.name)}</a></li>' for p in PRODUCTS.values())
        return self._page(
            r,
            "One Stop Market",
            f'<a href="/clothing-shoes-jewelry/women/shoes.html">Women\'s Shoes</a><ul class="products">{links}</ul>',
        )

    def login_form(self, r: Request, m: re.Match[str]) -> Response:
        return self._page(
            r,
            "Customer Login",
            '<form method="post" action="/customer/account/loginPost/"><label for="email">Email</label>'
            '<input id="email" name="login[username]"><label for="pass">Password</label>'
            '<input id="pass" type="password" name="login[password]"><button type="submit">Sign In</button></form>',
        )

    def login(self, r: Request, m: re.Match[str]) -> Response:
        if (r.field("login[username]"), r.field("login[password]")) == CUSTOMER:
            return self.sign_in(CUSTOMER[0], "/customer/account/")
        return redirect("/customer/account/login/")

    def account(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user:
            return redirect("/customer/account/login/")
        return self._page(r, "My Account", '<h1>My Account</h1><a href="/sales/order/history/">My Orders</a>')

    def shoes(self, r: Request, m: re.Match[str]) -> Response:
        low, _, high = r.query.get("price", "0-").partition("-")
        shoes = [PRODUCTS["B08SHOE19"], PRODUCTS["B08SHOE39"]]
        chosen = [p for p in shoes if float(low or 0) <= p.price < float(high or "inf")]
        items = "".join(f'<li><a href="/{p.slug}.html">{esc(p.name)}</a> ${p.price:.2f}</li>' for p in chosen)
        base = "/clothing-shoes-jewelry/women/shoes.html"
        return self._page(
            r,
            "Shoes - Women",
            f'<div class="filter"><strong>Price</strong><a href="{base}?price=0-25">$0.00 - $24.99</a> '
            f'<a href="{base}?price=25-50">$25.00 - $49.99</a></div><ul class="products">{items}</ul>',
        )

    def history(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user:
            return redirect("/customer/account/login/")
        rows = "".join(
            f"<tr><td>{o.increment_id}</td><td>{o.created_at[:10]}</td><td>{esc(', '.join(PRODUCTS[s].name for s in o.items))}</td>"
            f'<td>{o.status.title()}</td><td><a class="view" href="/sales/order/view/order_id/{o.id}/">View Order #{o.id}</a></td></tr>'
            for o in sorted(self.orders.values(), key=lambda o: o.created_at, reverse=True)
        )
        return self._page(r, "My Orders", f"<table class='orders'>{rows}</table>")

    def order(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user:
            return redirect("/customer/account/login/")
        order = self.orders.get(int(m[1]))
        if order is None:
            return not_found()
        items = "".join(f"<tr><td>{esc(PRODUCTS[s].name)}</td><td>SKU: {s}</td></tr>" for s in order.items)
        return self._page(
            r,
            f"Order # {order.increment_id}",
            f'<h1>Order # {order.increment_id}</h1><span class="order-status">{order.status.title()}</span>'
            f'<form method="post" action="/sales/order/reorder/order_id/{order.id}/"><button type="submit">Reorder</button></form>'
            f'<div class="order-details-items ordered"><table>{items}</table></div>',
        )

    def reorder(self, r: Request, m: re.Match[str]) -> Response:
        order = self.orders.get(int(m[1]))
        if not r.user or order is None:
            return redirect("/customer/account/login/")
        self.cart_items = list(order.items)
        return redirect("/checkout/cart/")

    def cart(self, r: Request, m: re.Match[str]) -> Response:
        items = "".join(f"<li>{esc(PRODUCTS[s].name)}</li>" for s in self.cart_items)
        return self._page(
            r, "Shopping Cart", f'<ul class="cart">{items}</ul><a href="/checkout/">Proceed to Checkout</a>'
        )

    def checkout(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user:
            return redirect("/customer/account/login/")
        return self._page(
            r,
            "Checkout",
            '<form method="post" action="/checkout/placeOrder"><button type="submit">Place Order</button></form>',
        )

    def place_order(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user or not self.cart_items:
            return redirect("/checkout/cart/")
        order_id = max(self.orders) + 1
        self.orders[order_id] = Order(
            order_id, f"2023-06-{order_id % 28 + 1:02d} 12:00:00", "pending", self.cart_items
        )
        self.cart_items = []
        return redirect("/checkout/onepage/success/")

    def success(self, r: Request, m: re.Match[str]) -> Response:
        latest = max(self.orders.values(), key=lambda o: o.created_at)
        return self._page(r, "Success Page", f"<p>Your order number is: {latest.increment_id}.</p>")

    def product(self, r: Request, m: re.Match[str]) -> Response:
        product = BY_SLUG.get(m[1])
        if product is None:
            return not_found()
        reviews = "".join(
            f'<li class="review-item"><span class="review-title">{esc(v.title)}</span> '
            f'<span class="rating">{v.stars} stars</span> <span class="review-author">{esc(v.nickname)}</span></li>'
            for v in self.reviews.get(product.sku, [])
        )
        stars = "".join(
            f'<input type="radio" id="Rating_{n}" name="rating" value="{n}"><label for="Rating_{n}">{n} stars</label>'
            for n in range(1, 6)
        )
        form = (
            f'<form method="post" action="/review/product/post/id/{product.id}/"><fieldset><legend>Your Rating</legend>{stars}'
            '</fieldset><label for="nickname_field">Nickname</label><input id="nickname_field" name="nickname">'
            '<label for="summary_field">Summary</label><input id="summary_field" name="title">'
            '<label for="review_field">Review</label><textarea id="review_field" name="detail"></textarea>'
            '<button type="submit">Submit Review</button></form>'
        )
        return self._page(
            r,
            product.name,
            f'<h1 class="page-title">{esc(product.name)}</h1><div class="product-info-stock-sku">SKU: {product.sku}</div>'
            f'<span class="price">${product.price:.2f}</span><ol class="reviews">{reviews}</ol>{form}',
        )

    def post_review(self, r: Request, m: re.Match[str]) -> Response:
        product = BY_ID.get(int(m[1]))
        stars = r.field("rating")
        if product is None or not r.field("nickname") or stars not in {"1", "2", "3", "4", "5"}:
            return redirect(r.headers.get("referer") or "/")
        self.reviews.setdefault(product.sku, []).append(
            Review(r.field("nickname"), r.field("title"), int(stars), r.field("detail"))
        )
        return redirect(f"/{product.slug}.html")

    # -- Magento REST -----------------------------------------------------------------------
    def rest_token(self, r: Request, m: re.Match[str]) -> Response:
        try:
            body = json.loads(r.body or b"{}")
        except ValueError:
            return json_response({"message": "Invalid JSON"}, 400)
        if (body.get("username"), body.get("password")) != ADMIN:
            return json_response({"message": "The account sign-in was incorrect."}, 401)
        token = secrets.token_hex(16)
        self.tokens.add(token)
        return json_response(token)

    def _authorized(self, r: Request) -> bool:
        return r.headers.get("authorization", "").removeprefix("Bearer ") in self.tokens

    def rest_orders(self, r: Request, m: re.Match[str]) -> Response:
        if not self._authorized(r):
            return json_response({"message": "The consumer isn't authorized to access %resources."}, 401)
        field_name = r.query.get("searchCriteria[sortOrders][0][field]", "created_at")
        descending = r.query.get("searchCriteria[sortOrders][0][direction]", "ASC").upper() == "DESC"
        orders = sorted(
            self.orders.values(), key=lambda o: str(getattr(o, field_name, o.created_at)), reverse=descending
        )
        size = int(r.query.get("searchCriteria[pageSize]") or len(orders))
        items = [
            {
                "entity_id": o.id,
                "increment_id": o.increment_id,
                "created_at": o.created_at,
                "status": o.status,
                "items": [{"sku": s, "name": PRODUCTS[s].name} for s in o.items],
            }
            for o in orders[:size]
        ]
        return json_response({"items": items, "total_count": len(orders)})

    def rest_reviews(self, r: Request, m: re.Match[str]) -> Response:
        if not self._authorized(r):
            return json_response({"message": "The consumer isn't authorized to access %resources."}, 401)
        return json_response(
            [
                {
                    "id": i + 1,
                    "title": v.title,
                    "detail": v.detail,
                    "nickname": v.nickname,
                    "ratings": [{"rating_name": "Rating", "percent": v.stars * 20, "value": v.stars}],
                }
                for i, v in enumerate(self.reviews.get(m[1], []))
            ]
        )


@dataclass
class PriceRule:
    name: str
    fields: dict[str, str] = field(default_factory=dict)


class ShoppingAdmin(SiteApp):
    name = "shopping_admin"
    prefix = "/admin"

    def __init__(self) -> None:
        super().__init__()
        r = self.route
        a = self.prefix
        r("GET", a + r"/?", self.login_or_dashboard)
        r("POST", a + r"/?", self.login)
        r("GET", a + r"/admin/dashboard/?", self.dashboard)
        r("GET", a + r"/reports/report_sales/bestsellers/?", self.bestsellers)
        r("GET", a + r"/reports/report_sales/(sales|tax)/?", self.report)
        r("GET", a + r"/review/product/?", self.reviews)
        r("GET", a + r"/catalog/product/?", self.products)
        r("GET", a + r"/sales/order/?", self.orders)
        r("GET", a + r"/sales_rule/promo_quote/?", self.rules)
        r("GET", a + r"/sales_rule/promo_quote/new/?", self.new_rule)
        r("GET", a + r"/customer/index/?", self.customers)

    def _page(self, r: Request, title: str, body: str) -> Response:
        if not r.user:
            return redirect(self.prefix)
        a = self.prefix
        menu = (
            f'<nav class="admin__menu"><a href="{a}/admin/dashboard/">Dashboard</a> <a href="{a}/sales/order/">Orders</a> '
            f'<a href="{a}/catalog/product/">Products</a> <a href="{a}/customer/index/">All Customers</a> '
            f'<a href="{a}/review/product/">Reviews</a> <a href="{a}/sales_rule/promo_quote/">Cart Price Rules</a> '
            f'<a href="{a}/reports/report_sales/bestsellers/">Bestsellers</a> <a href="{a}/reports/report_sales/sales/">Orders Report</a> '
            f'<a href="{a}/reports/report_sales/tax/">Tax Report</a></nav>'
        )
        return page(title, menu + body, user=r.user)

    def login_or_dashboard(self, r: Request, m: re.Match[str]) -> Response:
        if r.user:
            return redirect(f"{self.prefix}/admin/dashboard/")
        return page(
            "Magento Admin",
            f'<form method="post" action="{self.prefix}"><label for="username">Username</label><input id="username" name="login[username]">'
            '<label for="login">Password</label><input id="login" type="password" name="login[password]">'
            '<button type="submit">Sign in</button></form>',
        )

    def login(self, r: Request, m: re.Match[str]) -> Response:
        if (r.field("login[username]"), r.field("login[password]")) == ADMIN:
            return self.sign_in(ADMIN[0], f"{self.prefix}/admin/dashboard/")
        return redirect(self.prefix)

    def dashboard(self, r: Request, m: re.Match[str]) -> Response:
        return self._page(r, "Dashboard / Magento Admin", "<h1>Dashboard</h1>")

    def bestsellers(self, r: Request, m: re.Match[str]) -> Response:
        rows = "".join(
            f'<tr class="rank-{i}"><td>{i}</td><td class="product-name">{esc(name)}</td><td>{qty}</td></tr>'
            for i, (name, qty) in enumerate(
                [("Quest Lumaflex™ Band", 6), ("Sprite Yoga Strap 6 foot", 5), ("Overnight Duffle", 5)], 1
            )
        )
        return self._page(
            r, "Bestsellers Report", f"<h1>Bestsellers 2022</h1><table class='bestsellers'>{rows}</table>"
        )

    def report(self, r: Request, m: re.Match[str]) -> Response:
        title = "Sales Report" if m[1] == "sales" else "Tax Report"
        a = f"{self.prefix}/reports/report_sales/{m[1]}/"
        return self._page(
            r,
            title,
            f'<h1>{title}</h1><form method="get" action="{a}"><label for="sales_report_from">From</label>'
            f'<input id="sales_report_from" name="from" value="{esc(r.query.get("from", ""))}">'
            f'<label for="sales_report_to">To</label><input id="sales_report_to" name="to" value="{esc(r.query.get("to", ""))}">'
            '<button type="submit">Show Report</button></form>',
        )

    REVIEWS = (
        ("Ana Running Short", "Veronica", "It is comfortable and light, great for long runs."),
        ("Ana Running Short", "Jane", "I love how comfortable it is."),
        ("Circe Hooded Ice Fleece", "Hannah Lim", "Not what I expected, I am not satisfied with the zipper."),
        ("Olivia 1/4 Zip Light Jacket", "Emma", "Totally satisfied with the fit."),
        ("Sinbad Fitness Tank", "Carma", "Runs small."),
    )

    def reviews(self, r: Request, m: re.Match[str]) -> Response:
        words = r.query.get("q", "").lower()
        found = [v for v in self.REVIEWS if words in " ".join(v).lower()]
        rows = "".join(
            f"<tr><td>{esc(p)}</td><td>{esc(n)}</td><td class='review-text'>{esc(t)}</td></tr>"
            for p, n, t in found
        )
        return self._page(
            r,
            "Reviews",
            f'<form method="get"><input name="q" aria-label="Search by keyword" value="{esc(r.query.get("q", ""))}">'
            f'<button type="submit">Search</button></form><p id="records-found"><span class="count">{len(found)}</span> records found</p>'
            f"<table class='reviews'>{rows}</table>",
        )

    def products(self, r: Request, m: re.Match[str]) -> Response:
        rows = "".join(
            f'<tr><td class="product-name">{esc(n)}</td><td class="qty">{q}</td></tr>'
            for n, q in (("Overnight Duffle", 52), ("Sinbad Fitness Tank", 0), ("Ana Running Short", 100))
        )
        return self._page(
            r, "Products", f"<table class='products'><tr><th>Name</th><th>Quantity</th></tr>{rows}</table>"
        )

    STATUSES = (
        ("", "Any"),
        ("pending", "Pending"),
        ("holded", "On Hold"),
        ("fraud", "Suspected Fraud"),
        ("complete", "Complete"),
    )

    def orders(self, r: Request, m: re.Match[str]) -> Response:
        status = r.query.get("status", "")
        label = dict(self.STATUSES).get(status, "")
        options = "".join(f'<option value="{v}">{t}</option>' for v, t in self.STATUSES)
        current = (
            f"<span>Active filters:</span> <span class='filter'>Status: {esc(label)}</span>" if status else ""
        )
        return self._page(
            r,
            "Orders",
            f'<form method="get"><label for="order_status">Status</label><select id="order_status" name="status">{options}</select>'
            f'<button type="submit">Apply Filters</button></form><div class="admin__data-grid-filters-current">{current}</div>',
        )

    def rules(self, r: Request, m: re.Match[str]) -> Response:
        return self._page(
            r, "Cart Price Rules", f'<a href="{self.prefix}/sales_rule/promo_quote/new/">Add New Rule</a>'
        )

    def new_rule(self, r: Request, m: re.Match[str]) -> Response:
        groups = "".join(
            f"<option value='{i}'>{g}</option>"
            for i, g in enumerate(("NOT LOGGED IN", "General", "Wholesale", "Retailer"))
        )
        actions = "".join(
            f"<option value='{v}'>{t}</option>"
            for v, t in (
                ("by_percent", "Percent of product price discount"),
                ("by_fixed", "Fixed amount discount"),
                ("cart_fixed", "Fixed amount discount for whole cart"),
                ("buy_x_get_y", "Buy X get Y free"),
            )
        )
        return self._page(
            r,
            "New Cart Price Rule",
            '<style>.hidden{display:none}</style><form><label for="rule_name">Rule Name</label><input id="rule_name" name="name">'
            '<label for="website_ids">Websites</label><select id="website_ids" name="website_ids"><option value="1">Main Website</option></select>'
            f'<label for="customer_group_ids">Customer Groups</label><select id="customer_group_ids" name="customer_group_ids">{groups}</select>'
            '<div data-index="actions"><div class="admin__collapsible-title" '
            "onclick=\"this.nextElementSibling.classList.toggle('hidden')\">Actions</div>"
            f'<div class="admin__collapsible-content hidden"><label for="simple_action">Apply</label><select id="simple_action" name="simple_action">{actions}</select>'
            '<label for="discount_amount">Discount Amount</label><input id="discount_amount" name="discount_amount"></div></div></form>',
        )

    def customers(self, r: Request, m: re.Match[str]) -> Response:
        rows = "".join(
            f"<tr><td class='customer-name'>{n}</td><td class='customer-city'>{c}</td></tr>"
            for n, c in (("Sophia Young", "Boston"), ("Amanda Kim", "Hoboken"), ("Emma Lopez", "Seattle"))
        )
        return self._page(r, "Customers", f"<table class='customers'>{rows}</table>")
