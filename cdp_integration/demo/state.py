"""In-memory data of the demo shop: products, reviews, users, orders, forum posts and sessions, rebuilt
by `reset()`."""

import hashlib
import re
import secrets
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime


@dataclass
class Product:
    """A catalogue entry; `price`, `stock` and `special_price` are what the admin form edits."""

    id: int
    sku: str
    name: str
    category: str
    price: float
    description: str
    stock: int
    special_price: float | None = None

    def to_json(self) -> dict[str, object]:
        """Shape served by `/api/products`, kept flat so REST-style tasks can read fields directly."""
        return asdict(self)


@dataclass(frozen=True)
class Review:
    """A product review; a higher `id` means newer, which is how "latest" is decided.

    `author` is the nickname shown with the review (Magento's ``nickname``).
    """

    id: int
    product_id: int
    author: str
    rating: int
    title: str
    text: str
    created_at: str


@dataclass(frozen=True)
class User:
    """A seeded account; `role` is "admin" or "customer"."""

    username: str
    password: str
    role: str
    full_name: str
    email: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


@dataclass(frozen=True)
class OrderLine:
    """One product in an order, with the price frozen at purchase time."""

    product_id: int
    sku: str
    name: str
    qty: int
    unit_price: float

    @property
    def total(self) -> float:
        return round(self.qty * self.unit_price, 2)


@dataclass
class Order:
    """A placed order owned by `username`."""

    id: int
    username: str
    lines: list[OrderLine]
    status: str
    created_at: str

    @property
    def total(self) -> float:
        return round(sum(line.total for line in self.lines), 2)

    @property
    def increment_id(self) -> str:
        """The order number customers see (Magento's zero-padded ``increment_id``)."""
        return f"{self.id:09d}"

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "total": self.total}


@dataclass(frozen=True)
class ForumPost:
    """A post in the shop's community forum, served at ``/f/<forum>/<id>/<slug>`` like Postmill."""

    id: int
    forum: str
    title: str
    body: str
    author: str
    created_at: str

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")[:60] or "post"

    @property
    def path(self) -> str:
        return f"/f/{self.forum}/{self.id}/{self.slug}"


@dataclass(frozen=True)
class Comment:
    """A reply to a forum post, linked as ``/f/<forum>/<post id>/-/comment/<id>``."""

    id: int
    post_id: int
    author: str
    text: str


@dataclass
class Visitor:
    """Server-side session behind the `session` cookie; anonymous visitors get one to hold a cart."""

    username: str | None
    cart: dict[int, int] = field(default_factory=dict)


# sku | name | category | price | stock | description
_PRODUCTS = """\
DS-EL-001|Wireless Noise Cancelling Headphones|Electronics|129.99|25|Over-ear, 30 hours of battery life.
DS-EL-002|USB-C Charging Cable 2m|Electronics|9.99|200|Braided cable, 60W fast charging.
DS-EL-003|Bluetooth Portable Speaker|Electronics|45.50|40|Waterproof speaker with deep bass.
DS-HK-001|Stainless Steel Water Bottle|Home & Kitchen|19.95|120|Keeps drinks cold for 24 hours.
DS-HK-002|Ceramic Coffee Mug Set|Home & Kitchen|24.00|60|Four 350ml mugs in pastel colours.
DS-HK-003|Cast Iron Skillet 10 inch|Home & Kitchen|34.99|15|Pre-seasoned skillet for any stove.
DS-BT-001|Vitamin C Face Serum|Beauty|15.49|80|Brightening serum with hyaluronic acid.
DS-BT-002|Argan Oil Shampoo|Beauty|12.99|90|Sulfate-free shampoo for dry hair.
DS-SP-001|Yoga Mat Non-Slip|Sports|29.99|35|6mm thick mat with carrying strap.
DS-SP-002|Adjustable Dumbbells Pair|Sports|149.00|8|From 2.5kg to 24kg per dumbbell.
DS-OF-001|Mechanical Keyboard|Office|79.90|22|Tenkeyless keyboard with brown switches.
DS-OF-002|Ergonomic Office Chair|Office|219.00|5|Mesh back chair with lumbar support.
"""

# product id | author | rating | title | text | date
_REVIEWS = """\
1|Alex Chen|5|Great sound|Noise cancelling works really well on flights.|2023-01-12
1|Maria Gomez|4|Comfortable|Comfortable for long sessions, a bit heavy.|2023-02-03
1|Sam Patel|2|Broke quickly|The hinge cracked after two months.|2023-04-21
2|Jordan Lee|5|Works|Charges my laptop fast.|2023-01-30
3|Priya Nair|4|Loud enough|Good for the beach, battery is fine.|2023-03-08
3|Tom Becker|3|Average|Bass is muddy at high volume.|2023-05-15
4|Lena Fischer|5|Cold all day|Ice still there after a full day.|2023-02-18
5|Noah Kim|4|Cute mugs|Nice colours, one arrived chipped.|2023-03-27
6|Chris Owens|5|Perfect sear|Heavy but cooks evenly.|2023-01-05
7|Aisha Bello|3|Okay|Did not notice much difference.|2023-04-02
8|Emma Lopez|4|Soft hair|Smells nice and leaves hair soft.|2023-03-19
9|Ivan Petrov|5|Not slippery|Stays in place even on wooden floor.|2023-02-11
10|Kate Wilson|4|Saves space|Replaced a whole rack of weights.|2023-05-01
11|Diego Ruiz|5|Clicky|Typing feels great.|2023-01-22
11|Hana Sato|2|Too loud|My coworkers hate it.|2023-04-09
12|Oliver Brown|4|Back pain gone|Took an hour to assemble.|2023-03-03
"""

_USERS: tuple[User, ...] = (
    User("admin", "admin1234", "admin", "Shop Administrator", "admin@demo.shop"),
    User("emma", "emma1234", "customer", "Emma Lopez", "emma.lopez@demo.shop"),
)

_LOGIN_ALIASES: dict[str, tuple[str, str]] = {
    # WebArena's shopping customer (webarena.browser_env.env_config.ACCOUNTS["shopping"]) is our emma.
    "emma.lopez@gmail.com": ("Password.123", "emma"),
}
"""Other sign-in names: login -> (password, demo username)."""

_ORDERS: tuple[tuple[int, str, str, str, tuple[tuple[int, int], ...]], ...] = (
    (1, "emma", "complete", "2023-03-14 10:21:07", ((2, 1), (5, 2))),
    (2, "emma", "processing", "2023-05-02 16:45:30", ((9, 1),)),
)

FORUMS: dict[str, str] = {
    "electronics": "Headphones, speakers, cables and other gadgets",
    "home": "Kitchen, cooking and everything at home",
    "deals": "Sales, coupons and bargains",
}

# forum | author | date | title | body
_POSTS = """electronics|Alex Chen|2023-02-01 09:12:00|Best budget headphones?|Looking for over-ear headphones under $150.
home|Chris Owens|2023-02-10 18:30:00|Cast iron care tips|Dry it on the stove and oil it lightly after each wash.
deals|Shop Administrator|2023-03-01 08:00:00|Spring sale starts Monday|Ten percent off all Sports items.
"""

# post id | author | text
_COMMENTS = """1|Maria Gomez|The Wireless Noise Cancelling Headphones are worth it.
2|Lena Fischer|Never put it in the dishwasher.
"""


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


def _token(user: User) -> str:
    return hashlib.sha256(f"demo-shop-token:{user.username}:{user.password}".encode()).hexdigest()[:32]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")


class ShopState:
    """All mutable shop data; callers hold `lock` around any read-modify-write sequence."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.products: dict[int, Product] = {}
        self.reviews: list[Review] = []
        self.users: dict[str, User] = {}
        self.orders: list[Order] = []
        self.posts: list[ForumPost] = []
        self.comments: list[Comment] = []
        self.sessions: dict[str, Visitor] = {}
        self.reset()

    def reset(self) -> None:
        """Restore the seed data and drop every session, like WebArena's environment reset."""
        with self.lock:
            self.products = {}
            for i, line in enumerate(_PRODUCTS.splitlines(), start=1):
                sku, name, category, price, stock, description = line.split("|")
                self.products[i] = Product(i, sku, name, category, float(price), description, int(stock))
            self.reviews = []
            for i, line in enumerate(_REVIEWS.splitlines(), start=1):
                pid, author, rating, title, text, date = line.split("|")
                self.reviews.append(Review(i, int(pid), author, int(rating), title, text, date))
            self.users = {u.username: u for u in _USERS}
            self.orders = [
                Order(oid, user, [self._line(pid, qty) for pid, qty in lines], status, date)
                for oid, user, status, date, lines in _ORDERS
            ]
            self.posts = []
            for i, line in enumerate(_POSTS.splitlines(), start=1):
                forum, author, date, title, body = line.split("|")
                self.posts.append(ForumPost(i, forum, title, body, author, date))
            self.comments = []
            for i, line in enumerate(_COMMENTS.splitlines(), start=1):
                post_id, author, text = line.split("|")
                self.comments.append(Comment(i, int(post_id), author, text))
            self.sessions = {}

    def _line(self, product_id: int, qty: int) -> OrderLine:
        p = self.products[product_id]
        return OrderLine(p.id, p.sku, p.name, qty, p.price)

    def categories(self) -> list[str]:
        return sorted({p.category for p in self.products.values()})

    def search(self, q: str = "", category: str = "", sort: str = "") -> list[Product]:
        """Case-insensitive match of `q` on name, description and SKU; empty `q` matches everything."""
        needle = q.strip().lower()
        found = [
            p
            for p in self.products.values()
            if (not needle or needle in f"{p.name} {p.description} {p.sku}".lower())
            and (not category or p.category.lower() == category.lower())
        ]
        if sort == "price":
            found.sort(key=lambda p: (p.price, p.id))
        elif sort == "name":
            found.sort(key=lambda p: p.name.lower())
        return found

    def product_by_sku(self, sku: str) -> Product | None:
        return next((p for p in self.products.values() if p.sku.lower() == sku.lower()), None)

    def reviews_for(self, product_id: int) -> list[Review]:
        """Newest first."""
        return sorted((r for r in self.reviews if r.product_id == product_id), key=lambda r: -r.id)

    def add_review(self, product_id: int, author: str, rating: int, title: str, text: str) -> Review:
        with self.lock:
            review = Review(len(self.reviews) + 1, product_id, author, rating, title, text, _today())
            self.reviews.append(review)
            return review

    def authenticate(self, username: str, password: str) -> User | None:
        """The user behind a sign-in name (a username or an alias such as WebArena's e-mail login)."""
        expected, name = _LOGIN_ALIASES.get(username.strip().lower(), (None, username))
        user = self.users.get(name)
        if user is None:
            return None
        if not secrets.compare_digest((expected or user.password).encode(), password.encode()):
            return None
        return user

    def api_token(self, username: str, password: str) -> str | None:
        """A REST bearer token for an admin; derived from the account, so runs (and recordings) repeat."""
        user = self.authenticate(username, password)
        return _token(user) if user is not None and user.is_admin else None

    def user_for_token(self, token: str) -> User | None:
        """The admin a bearer token belongs to; None for anything else."""
        return next(
            (
                u
                for u in self.users.values()
                if u.is_admin and secrets.compare_digest(_token(u).encode(), token.encode())
            ),
            None,
        )

    def new_session(self, username: str | None, cart: dict[int, int] | None = None) -> str:
        token = secrets.token_urlsafe(24)
        with self.lock:
            self.sessions[token] = Visitor(username, dict(cart or {}))
        return token

    def orders_for(self, username: str) -> list[Order]:
        """Newest first."""
        return sorted((o for o in self.orders if o.username == username), key=lambda o: -o.id)

    def order(self, order_id: int) -> Order | None:
        return next((o for o in self.orders if o.id == order_id), None)

    def orders_by_date(self, newest_first: bool = True) -> list[Order]:
        """All orders by ``created_at`` (ties broken by id), as the REST order search sorts them."""
        return sorted(self.orders, key=lambda o: (o.created_at, o.id), reverse=newest_first)

    def place_order(self, username: str, cart: dict[int, int]) -> Order:
        """Turn a cart into an order and take the stock; ValueError names the first product short of stock."""
        with self.lock:
            for pid, qty in cart.items():
                if self.products[pid].stock < qty:
                    raise ValueError(f"Not enough stock for {self.products[pid].name}.")
            for pid, qty in cart.items():
                self.products[pid].stock -= qty
            order_id = max((o.id for o in self.orders), default=0) + 1
            order = Order(order_id, username, [self._line(p, q) for p, q in cart.items()], "pending", _now())
            self.orders.append(order)
            return order

    def posts_in(self, forum: str) -> list[ForumPost]:
        """Newest first."""
        return sorted((p for p in self.posts if p.forum == forum), key=lambda p: -p.id)

    def post(self, post_id: int) -> ForumPost | None:
        return next((p for p in self.posts if p.id == post_id), None)

    def comments_on(self, post_id: int) -> list[Comment]:
        """Oldest first, as threads read."""
        return [c for c in self.comments if c.post_id == post_id]

    def add_post(self, forum: str, author: str, title: str, body: str) -> ForumPost:
        with self.lock:
            post = ForumPost(len(self.posts) + 1, forum, title, body, author, _now())
            self.posts.append(post)
            return post

    def add_comment(self, post_id: int, author: str, text: str) -> Comment:
        with self.lock:
            comment = Comment(len(self.comments) + 1, post_id, author, text)
            self.comments.append(comment)
            return comment
