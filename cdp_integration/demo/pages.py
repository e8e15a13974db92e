"""HTML templates and static assets of the demo shop; every page is a full document with stable ids."""

import base64
import json
from collections.abc import Iterable
from html import escape
from urllib.parse import urlencode

from cdp_integration.demo.state import Comment, ForumPost, Order, Product, Review, User

STYLE_CSS = """\
body { font-family: system-ui, sans-serif; margin: 0; color: #222; }
header { background: #1f3b57; padding: .5rem 1rem; }
header a { color: #fff; margin-right: 1rem; text-decoration: none; }
main { padding: 1rem; max-width: 960px; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: .25rem .5rem; }
.product-item { margin: .25rem 0; }
#featured .product-item { display: inline-block; width: 200px; padding: .5rem; border: 1px solid #ddd; }
.error { color: #b00020; } .notice { color: #1b5e20; }
.review { border-top: 1px solid #eee; padding: .5rem 0; }
"""

APP_JS = """\
document.documentElement.dataset.appReady = "1";
for (const link of document.querySelectorAll("#nav a")) {
  if (link.pathname === location.pathname) link.setAttribute("aria-current", "page");
}
"""

LOGO_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

VISIT_TOKEN = "visit-7f3a9c"

_INLINE_CSS = "header .brand { font-weight: bold; } #user-name { color: #ffd54f; }"


def money(value: float) -> str:
    return f"${value:,.2f}"


def _category_url(category: str) -> str:
    return escape("/products?" + urlencode({"category": category}))


def _script_json(value: object) -> str:
    """JSON safe to embed inside an inline <script>."""
    return json.dumps(value).replace("</", "<\\/")


def layout(title: str, body: str, user: User | None) -> str:
    """Wrap `body` in the shared document: head assets, nav bar and the signed-in user's name."""
    who = (
        f'<span id="user-name">{escape(user.username)}</span> <a id="nav-logout" href="/logout">Sign out</a>'
        if user
        else '<a id="nav-login" href="/login">Sign in</a>'
    )
    admin = '<a id="nav-admin" href="/admin">Admin</a>' if user and user.is_admin else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{escape(title)}</title>
<link rel="icon" href="/favicon.ico">
<link rel="stylesheet" href="/static/style.css">
<style>{_INLINE_CSS}</style>
<script src="/static/app.js" defer></script>
</head>
<body>
<header><nav id="nav">
<a class="brand" href="/"><img src="/static/logo.png" alt="" width="16" height="16"> Demo Shop</a>
<a id="nav-products" href="/products">Products</a> <a id="nav-search" href="/search">Search</a>
<a id="nav-cart" href="/cart">Cart</a> <a id="nav-orders" href="/orders">My Orders</a>
<a id="nav-account" href="/account">My Account</a> <a id="nav-feed" href="/feed">Feed</a>
<a id="nav-forums" href="/forums">Forums</a>
{admin} {who}
</nav></header>
<main id="content">
{body}
</main>
</body>
</html>
"""


def _product_items(products: Iterable[Product], list_id: str) -> str:
    items = "".join(
        f'<li class="product-item" data-id="{p.id}" data-sku="{escape(p.sku)}">'
        f'<a class="product-link" href="/products/{p.id}">'
        f'<span class="product-name">{escape(p.name)}</span></a>'
        f' <span class="product-price">{money(p.price)}</span>'
        f' <span class="product-category">{escape(p.category)}</span></li>\n'
        for p in products
    )
    return f'<ul id="{list_id}">\n{items}</ul>'


def _options(values: Iterable[tuple[str, str]], selected: str) -> str:
    return "".join(
        f'<option value="{escape(v)}"{" selected" if v == selected else ""}>{escape(label)}</option>'
        for v, label in values
    )


def home_page(user: User | None, featured: list[Product], categories: list[str]) -> str:
    cats = "".join(
        f'<li><a class="category-link" href="{_category_url(c)}">{escape(c)}</a></li>' for c in categories
    )
    body = f"""<h1 id="page-title">Welcome to Demo Shop</h1>
<section><h2>Categories</h2><ul id="categories">{cats}</ul></section>
<section><h2>Featured products</h2>{_product_items(featured, "featured")}</section>
<p><a id="link-links" href="/links">Useful links</a> ·
<a id="link-preferences" href="/preferences">Preferences</a></p>"""
    return layout("Demo Shop - Home", body, user)


def login_page(next_path: str, error: str = "", username: str = "") -> str:
    err = f'<p id="login-error" class="error">{escape(error)}</p>' if error else ""
    body = f"""<h1 id="page-title">Customer Login</h1>
{err}
<form id="login-form" method="post" action="/login">
<input type="hidden" name="next" value="{escape(next_path)}">
<label>Username <input id="username" name="username" value="{escape(username)}"></label>
<label>Password <input id="password" name="password" type="password" autocomplete="current-password"></label>
<button id="login-button" type="submit">Sign In</button>
</form>"""
    return layout("Customer Login", body, None)


def customer_login_page(error: str = "") -> str:
    """Magento's customer sign-in form: the labels and button WebArena's ``ui_login`` looks for."""
    err = f'<p id="login-error" class="error">{escape(error)}</p>' if error else ""
    body = f"""<h1 id="page-title">Customer Login</h1>
{err}
<form id="customer-login-form" method="post" action="/login">
<input type="hidden" name="next" value="/account">
<div class="field"><label for="email">Email</label> <input id="email" name="username" type="email"></div>
<div class="field"><label for="pass">Password</label>
<input id="pass" name="password" type="password" autocomplete="current-password"></div>
<button id="send2" type="submit">Sign In</button>
</form>"""
    return layout("Customer Login", body, None)


def product_list_page(
    user: User | None,
    title: str,
    products: list[Product],
    categories: list[str],
    q: str = "",
    category: str = "",
    sort: str = "",
) -> str:
    """Shared by /search and /products: a filter form, a result count and the matching items."""
    cat_opts = _options([("", "All categories"), *((c, c) for c in categories)], category)
    sort_opts = _options([("", "Relevance"), ("price", "Price"), ("name", "Name")], sort)
    body = f"""<h1 id="page-title">{escape(title)}</h1>
<form id="search-form" method="get" action="/search">
<input id="search-input" name="q" value="{escape(q)}" placeholder="Search products">
<select id="search-category" name="category">{cat_opts}</select>
<select id="search-sort" name="sort">{sort_opts}</select>
<button id="search-button" type="submit">Search</button>
</form>
<p id="result-count">{len(products)} result{"" if len(products) == 1 else "s"}</p>
{_product_items(products, "results")}"""
    return layout(title, body, user)


def _review(r: Review) -> str:
    return f"""<li class="review" data-review-id="{r.id}">
<strong class="review-title">{escape(r.title)}</strong>
<span class="review-rating" data-rating="{r.rating}">{r.rating}</span>/5 by
<span class="review-author">{escape(r.author)}</span> on
<span class="review-date">{escape(r.created_at)}</span>
<p class="review-text">{escape(r.text)}</p></li>"""


def product_page(user: User | None, p: Product, reviews: list[Review], error: str = "") -> str:
    err = f'<p id="review-error" class="error">{escape(error)}</p>' if error else ""
    ratings = _options([(str(n), str(n)) for n in range(5, 0, -1)], "5")
    nickname = escape(user.full_name) if user else ""
    special = (
        f'<p id="product-special-price">Special price: {money(p.special_price)}</p>'
        if p.special_price is not None
        else ""
    )
    body = f"""<article id="product" data-id="{p.id}">
<h1 id="product-name">{escape(p.name)}</h1>
<p>Price: <span id="product-price" data-price="{p.price:.2f}">{money(p.price)}</span></p>{special}
<p>SKU: <span id="product-sku">{escape(p.sku)}</span> · Category:
<a id="product-category" href="{_category_url(p.category)}">{escape(p.category)}</a> ·
In stock: <span id="product-stock">{p.stock}</span></p>
<p id="product-description">{escape(p.description)}</p>
<form id="add-to-cart-form" method="post" action="/cart/add">
<input type="hidden" name="product_id" value="{p.id}">
<label>Qty <input id="qty" name="qty" type="number" value="1" min="1" max="99"></label>
<button id="add-to-cart" type="submit">Add to Cart</button>
</form>
</article>
<section id="reviews"><h2>Reviews (<span id="review-count">{len(reviews)}</span>)</h2>
<ul id="review-list">{"".join(_review(r) for r in reviews)}</ul>
<h3>Write a review</h3>{err}
<form id="review-form" method="post" action="/products/{p.id}/reviews">
<label>Rating <select id="review-rating-input" name="rating">{ratings}</select></label>
<label>Nickname <input id="review-nickname-input" name="nickname" value="{nickname}"></label>
<label>Title <input id="review-title-input" name="title"></label>
<label>Review <textarea id="review-text-input" name="text"></textarea></label>
<button id="submit-review" type="submit">Submit Review</button>
</form></section>"""
    return layout(p.name, body, user)


def cart_page(user: User | None, lines: list[tuple[Product, int]], error: str = "") -> str:
    err = f'<p id="cart-error" class="error">{escape(error)}</p>' if error else ""
    if not lines:
        return layout(
            "Shopping Cart",
            f'<h1 id="page-title">Shopping Cart</h1>{err}<p id="cart-empty">Your cart is empty.</p>',
            user,
        )
    rows = "".join(
        f'<tr class="cart-line" data-product-id="{p.id}"><td class="line-name">{escape(p.name)}</td>'
        f'<td class="line-qty">{qty}</td><td class="line-total">{money(p.price * qty)}</td></tr>'
        for p, qty in lines
    )
    total = sum(p.price * qty for p, qty in lines)
    body = f"""<h1 id="page-title">Shopping Cart</h1>{err}
<table id="cart"><tr><th>Product</th><th>Qty</th><th>Subtotal</th></tr>{rows}</table>
<p>Total: <span id="cart-total">{money(total)}</span></p>
<form id="checkout-form" method="post" action="/checkout">
<button id="checkout" type="submit">Place Order</button></form>"""
    return layout("Shopping Cart", body, user)


def _order_rows(orders: list[Order], row_class: str, with_user: bool) -> str:
    return "".join(
        f'<tr class="{row_class}" data-order-id="{o.id}">'
        f'<td class="order-id"><a href="/orders/{o.id}">{o.id:09d}</a></td>'
        + (f'<td class="order-user">{escape(o.username)}</td>' if with_user else "")
        + f'<td class="order-date">{escape(o.created_at)}</td>'
        f'<td class="order-status">{escape(o.status)}</td>'
        f'<td class="order-total">{money(o.total)}</td></tr>'
        for o in orders
    )


def orders_page(user: User, orders: list[Order]) -> str:
    body = f"""<h1 id="page-title">My Orders</h1>
<table id="orders"><tr><th>Order #</th><th>Date</th><th>Status</th><th>Total</th></tr>
{_order_rows(orders, "order-row", with_user=False)}</table>"""
    return layout("My Orders", body, user)


def order_page(user: User, order: Order) -> str:
    lines = "".join(
        f'<tr class="order-line"><td class="line-sku">{escape(x.sku)}</td>'
        f'<td class="line-name">{escape(x.name)}</td>'
        f'<td class="line-qty">{x.qty}</td><td class="line-total">{money(x.total)}</td></tr>'
        for x in order.lines
    )
    body = f"""<h1 id="page-title">Order # <span id="order-id">{order.id:09d}</span></h1>
<p>Status: <span id="order-status">{escape(order.status)}</span> · Date:
<span id="order-date">{escape(order.created_at)}</span></p>
<table id="order-lines"><tr><th>SKU</th><th>Product</th><th>Qty</th><th>Subtotal</th></tr>{lines}</table>
<p>Grand total: <span id="order-total">{money(order.total)}</span></p>"""
    return layout(f"Order # {order.id:09d}", body, user)


def sales_order_page(user: User, order: Order) -> str:
    """Magento's order view (``/sales/order/view/order_id/<n>/``) with its ``.order-details-items`` block."""
    rows = "".join(
        f'<tr class="order-item" data-sku="{escape(x.sku)}">'
        f'<td class="product-item-name">{escape(x.name)}</td><td class="sku">{escape(x.sku)}</td>'
        f'<td class="price">{money(x.unit_price)}</td><td class="qty">Ordered: {x.qty}</td>'
        f'<td class="subtotal">{money(x.total)}</td></tr>'
        for x in order.lines
    )
    body = f"""<h1 id="page-title">Order # {order.increment_id}</h1>
<p class="order-status">{escape(order.status.capitalize())}</p>
<p class="order-date">Order Date: <span>{escape(order.created_at)}</span></p>
<div class="order-details-items ordered"><strong class="title">Items Ordered</strong>
<table id="my-orders-table"><thead><tr><th>Product Name</th><th>SKU</th><th>Price</th><th>Qty</th>
<th>Subtotal</th></tr></thead><tbody>{rows}</tbody></table>
<p class="grand_total">Grand Total <span class="price">{money(order.total)}</span></p></div>"""
    return layout(f"Order # {order.increment_id}", body, user)


def account_page(user: User) -> str:
    body = f"""<h1 id="page-title">My Account</h1>
<dl id="account-info"><dt>Username</dt><dd id="account-username">{escape(user.username)}</dd>
<dt>Name</dt><dd id="account-name">{escape(user.full_name)}</dd>
<dt>Email</dt><dd id="account-email">{escape(user.email)}</dd>
<dt>Role</dt><dd id="account-role">{escape(user.role)}</dd></dl>
<section id="preferences"><h2>Preferences</h2>
<p>Theme and newsletter choices are kept in this browser.
<a id="preferences-link" href="/preferences">Edit preferences</a></p></section>"""
    return layout("My Account", body, user)


def feed_page(user: User | None) -> str:
    body = """<h1 id="page-title">Product Feed</h1>
<div id="feed" data-loaded="false">Loading...</div>
<script>
window.addEventListener("load", () => {
  const feed = document.getElementById("feed");
  fetch("/api/products?limit=5").then((r) => r.json()).then((data) => {
    const list = document.createElement("ul");
    list.id = "feed-list";
    for (const p of data.items) {
      const li = document.createElement("li");
      li.className = "feed-item";
      li.dataset.id = String(p.id);
      const a = document.createElement("a");
      a.href = "/products/" + p.id;
      a.className = "feed-name";
      a.textContent = p.name;
      li.append(a, " ", Object.assign(document.createElement("span"), {className: "feed-price",
        textContent: "$" + p.price.toFixed(2)}));
      list.append(li);
    }
    feed.replaceChildren(list);
    feed.dataset.loaded = "true";
  }).catch(() => { feed.textContent = "Failed to load"; feed.dataset.loaded = "error"; });
});
</script>"""
    return layout("Product Feed", body, user)


def preferences_page(user: User | None, recently_viewed: list[str]) -> str:
    body = f"""<h1 id="page-title">Preferences</h1>
<p id="prefs-status">Theme set to dark.</p>
<button id="save-prefs" type="button">Subscribe to newsletter</button>
<script>
localStorage.setItem("theme", "dark");
localStorage.setItem("recently_viewed", JSON.stringify({_script_json(recently_viewed)}));
sessionStorage.setItem("visit_token", {_script_json(VISIT_TOKEN)});
document.getElementById("save-prefs").addEventListener("click", () => {{
  localStorage.setItem("newsletter", "yes");
  document.getElementById("prefs-status").textContent = "Preferences saved.";
}});
</script>"""
    return layout("Preferences", body, user)


def links_page(user: User | None) -> str:
    body = """<h1 id="page-title">Useful links</h1>
<ul id="links"><li><a id="open-help" href="/help" target="_blank">Open help in a new tab</a></li>
<li><a id="same-tab-help" href="/help">Help (same tab)</a></li></ul>"""
    return layout("Links", body, user)


def help_page(user: User | None) -> str:
    body = """<h1 id="help-title">Help Center</h1>
<p id="help-text">Contact support@demo.shop for help with orders, returns and accounts.</p>"""
    return layout("Help Center", body, user)


def admin_dashboard(user: User, n_products: int, n_orders: int, revenue: float, low: list[Product]) -> str:
    low_items = _product_items(low, "low-stock")
    body = f"""<h1 id="page-title">Dashboard</h1>
<section id="admin-dashboard"><p>Products: <span id="stat-products">{n_products}</span></p>
<p>Orders: <span id="stat-orders">{n_orders}</span></p>
<p>Lifetime sales: <span id="stat-revenue">{money(revenue)}</span></p></section>
<h2>Low stock (under 10)</h2>{low_items}
<p><a id="admin-products-link" href="/admin/products">Catalog</a> ·
<a id="admin-orders-link" href="/admin/orders">Orders</a></p>"""
    return layout("Dashboard / Admin", body, user)


def admin_products_page(user: User, products: list[Product]) -> str:
    rows = "".join(
        f'<tr class="admin-product-row" data-id="{p.id}"><td class="col-id">{p.id}</td>'
        f'<td class="col-sku">{escape(p.sku)}</td><td class="col-name">{escape(p.name)}</td>'
        f'<td class="col-price">{p.price:.2f}</td><td class="col-stock">{p.stock}</td>'
        f'<td><a class="edit-link" href="/admin/products/{p.id}/edit">Edit</a></td></tr>'
        for p in products
    )
    body = f"""<h1 id="page-title">Products / Catalog</h1>
<table id="admin-products"><tr><th>ID</th><th>SKU</th><th>Name</th><th>Price</th><th>Qty</th><th></th></tr>
{rows}</table>"""
    return layout("Products / Catalog / Admin", body, user)


def admin_edit_page(
    user: User, p: Product, saved: bool, error: str = "", form: dict[str, str] | None = None
) -> str:
    values = form or {"name": p.name, "price": f"{p.price:.2f}", "stock": str(p.stock)}
    notice = '<p id="saved-message" class="notice">You saved the product.</p>' if saved else ""
    err = f'<p id="edit-error" class="error">{escape(error)}</p>' if error else ""
    special = "" if p.special_price is None else f"{p.special_price:.2f}"
    body = f"""<h1 id="page-title">Edit <span id="edit-title">{escape(p.name)}</span></h1>{notice}{err}
<form id="product-edit-form" method="post" action="/admin/products/{p.id}">
<label>Name <input id="edit-name" name="name" value="{escape(values.get("name", ""))}"></label>
<label>Price <input id="edit-price" name="price" value="{escape(values.get("price", ""))}"></label>
<label>Quantity <input id="edit-stock" name="stock" value="{escape(values.get("stock", ""))}"></label>
<div class="admin__collapsible-block" data-index="advanced-pricing" data-special-price="{special}">
<div class="admin__collapsible-title" role="button" tabindex="0">Advanced Pricing</div>
<div class="admin__collapsible-content"></div></div>
<button id="save-product" type="submit">Save</button>
</form>
<script>
// Like Magento's UI components, the section's fields exist only once it has been opened.
document.querySelector('[data-index="advanced-pricing"] .admin__collapsible-title').addEventListener("click", () => {{
  const block = document.querySelector('[data-index="advanced-pricing"]');
  const content = block.querySelector(".admin__collapsible-content");
  if (!content.firstChild) {{
    const label = document.createElement("label");
    const input = Object.assign(document.createElement("input"),
      {{id: "edit-special-price", name: "special_price", value: block.dataset.specialPrice}});
    label.append("Special Price ", input);
    content.append(label);
  }}
  block.classList.toggle("_show");
  content.hidden = !block.classList.contains("_show");
}});
</script>"""
    return layout(f"{p.name} / Products / Admin", body, user)


def admin_orders_page(user: User, orders: list[Order]) -> str:
    body = f"""<h1 id="page-title">Orders</h1>
<table id="admin-orders"><tr><th>Order #</th><th>Customer</th><th>Date</th><th>Status</th><th>Total</th></tr>
{_order_rows(orders, "admin-order-row", with_user=True)}</table>"""
    return layout("Orders / Admin", body, user)


def forums_page(user: User | None, forums: dict[str, str]) -> str:
    items = "".join(
        f'<li class="forum-item"><a class="forum-link" href="/f/{escape(name)}">f/{escape(name)}</a>'
        f' <span class="forum-description">{escape(about)}</span></li>'
        for name, about in forums.items()
    )
    body = f'<h1 id="page-title">Forums</h1><ul id="forums">{items}</ul>'
    return layout("Forums", body, user)


def forum_page(user: User | None, forum: str, about: str, posts: list[ForumPost]) -> str:
    items = "".join(
        f'<li class="submission" data-post-id="{p.id}"><a class="submission__link" href="{escape(p.path)}">'
        f'{escape(p.title)}</a> by <span class="submission__author">{escape(p.author)}</span></li>'
        for p in posts
    )
    body = f"""<h1 id="page-title">f/{escape(forum)}</h1><p id="forum-description">{escape(about)}</p>
<p><a id="submit-link" href="/f/{escape(forum)}/submit">Create submission</a></p>
<ul id="submissions">{items}</ul>"""
    return layout(f"f/{forum}", body, user)


def post_page(user: User | None, post: ForumPost, comments: list[Comment], highlight: int | None) -> str:
    """A forum post with Postmill's class names (``.submission__title``, ``.submission__body``, ...), the
    hooks WebArena's locators read on pages ``reddit_get_post_url()`` returns."""
    replies = "".join(
        f'<li class="comment{" comment--highlighted" if c.id == highlight else ""}" id="comment-{c.id}">'
        f'<span class="comment__author">{escape(c.author)}</span>'
        f'<p class="comment__body">{escape(c.text)}</p></li>'
        for c in comments
    )
    body = f"""<article class="submission__inner" data-post-id="{post.id}">
<p>Posted in <a class="submission__forum" href="/f/{escape(post.forum)}">{escape(post.forum)}</a> by
<span class="submission__author">{escape(post.author)}</span> on
<span class="submission__date">{escape(post.created_at)}</span></p>
<h1 class="submission__title">{escape(post.title)}</h1>
<div class="submission__body">{escape(post.body)}</div></article>
<section id="comments"><h2>Comments (<span id="comment-count">{len(comments)}</span>)</h2>
<ol id="comment-list">{replies}</ol>
<form id="comment-form" method="post" action="/f/{escape(post.forum)}/{post.id}/comment">
<label>Reply <textarea id="comment-input" name="text"></textarea></label>
<button id="post-comment" type="submit">Post</button></form></section>"""
    return layout(post.title, body, user)


def submit_page(user: User, forum: str, error: str = "", form: dict[str, str] | None = None) -> str:
    values = form or {}
    err = f'<p id="submission-error" class="error">{escape(error)}</p>' if error else ""
    body = f"""<h1 id="page-title">Create submission in f/{escape(forum)}</h1>{err}
<form id="submission-form" method="post" action="/f/{escape(forum)}/submit">
<label>Title <input id="submission-title" name="title" value="{escape(values.get("title", ""))}"></label>
<label>Body <textarea id="submission-body" name="body">{escape(values.get("body", ""))}</textarea></label>
<button id="submit-post" type="submit">Create submission</button>
</form>"""
    return layout(f"Create submission - f/{forum}", body, user)


def error_page(user: User | None, title: str, message: str, element_id: str) -> str:
    body = f'<h1 id="page-title">{escape(title)}</h1><p id="{element_id}" class="error">{escape(message)}</p>'
    return layout(title, body, user)


def big_page(n: int) -> str:
    """About `n` elements in blocks of ten (nested divs, spans, a link, a table row); deterministic."""
    parts = ['<div id="big-root">']
    for i in range(max(1, n // 10)):
        parts.append(
            f'<div class="big-item" id="big-{i}"><div class="big-inner">'
            f'<span class="big-label">Item {i}</span>'
            f'<a class="big-link" href="/products/{i % 12 + 1}">Product {i % 12 + 1}</a>'
            f'<span class="big-value">{(i * 7919) % 1000}</span></div><table class="big-table"><tbody>'
            f"<tr><td>{i}</td><td>{i * i % 97}</td></tr></tbody></table></div>"
        )
    parts.append("</div>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Big page ({n} elements)</title>
<link rel="stylesheet" href="/static/style.css"></head>
<body>{"".join(parts)}</body></html>
"""
