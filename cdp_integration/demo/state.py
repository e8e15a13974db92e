"""In-memory data of the demo shop: products, reviews, users, orders and sessions, rebuilt by `reset()`."""

import secrets
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime


@dataclass
class Product:
    """A catalogue entry; `price` and `stock` are what the admin form edits."""

    id: int
    sku: str
    name: str
    category: str
    price: float
    description: str
    stock: int

    def to_json(self) -> dict[str, object]:
        """Shape served by `/api/products`, kept flat so REST-style tasks can read fields directly."""
        return asdict(self)


@dataclass(frozen=True)
class Review:
    """A product review; a higher `id` means newer, which is how "latest" is decided."""

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

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "total": self.total}


@dataclass
class Session:
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

_ORDERS: tuple[tuple[int, str, str, str, tuple[tuple[int, int], ...]], ...] = (
    (1, "emma", "complete", "2023-03-14", ((2, 1), (5, 2))),
    (2, "emma", "processing", "2023-05-02", ((9, 1),)),
)


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


class ShopState:
    """All mutable shop data; callers hold `lock` around any read-modify-write sequence."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.products: dict[int, Product] = {}
        self.reviews: list[Review] = []
        self.users: dict[str, User] = {}
        self.orders: list[Order] = []
        self.sessions: dict[str, Session] = {}
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
        user = self.users.get(username)
        if user is None or not secrets.compare_digest(user.password.encode(), password.encode()):
            return None
        return user

    def new_session(self, username: str | None, cart: dict[int, int] | None = None) -> str:
        token = secrets.token_urlsafe(24)
        with self.lock:
            self.sessions[token] = Session(username, dict(cart or {}))
        return token

    def orders_for(self, username: str) -> list[Order]:
        """Newest first."""
        return sorted((o for o in self.orders if o.username == username), key=lambda o: -o.id)

    def order(self, order_id: int) -> Order | None:
        return next((o for o in self.orders if o.id == order_id), None)

    def place_order(self, username: str, cart: dict[int, int]) -> Order:
        """Turn a cart into an order and take the stock; ValueError names the first product short of stock."""
        with self.lock:
            for pid, qty in cart.items():
                if self.products[pid].stock < qty:
                    raise ValueError(f"Not enough stock for {self.products[pid].name}.")
            for pid, qty in cart.items():
                self.products[pid].stock -= qty
            order_id = max((o.id for o in self.orders), default=0) + 1
            order = Order(
                order_id, username, [self._line(p, q) for p, q in cart.items()], "pending", _today()
            )
            self.orders.append(order)
            return order
