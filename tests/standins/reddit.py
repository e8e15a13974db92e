"""Postmill (WebArena's reddit) stand-in: forums, submissions, votes, comments, forum creation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tests.standins.server import Request, Response, SiteApp, esc, not_found, page, redirect

ACCOUNT = ("MarvelsGrantMan136", "test1234")


@dataclass
class Post:
    id: int
    forum: str
    title: str
    author: str
    body: str = ""
    url: str = ""
    score: int = 1

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")[:60].rstrip("-")

    @property
    def path(self) -> str:
        return f"/f/{self.forum}/{self.id}/{self.slug}"


@dataclass
class Comment:
    id: int
    post: int
    author: str
    text: str
    parent: int | None = None
    up: int = 1
    down: int = 0


@dataclass
class Forum:
    name: str
    title: str = ""
    description: str = ""
    sidebar: str = ""
    posts: list[int] = field(default_factory=list)


class Reddit(SiteApp):
    name = "reddit"

    def __init__(self) -> None:
        super().__init__()
        r = self.route
        r("GET", r"/", self.front)
        r("GET", r"/login", self.login_form)
        r("POST", r"/login_check", self.login)
        r("GET", r"/forums", self.front)
        r("GET", r"/create_forum", self.create_forum_form)
        r("POST", r"/create_forum", self.create_forum)
        r("GET", r"/submit/([\w]+)", self.submit_form)
        r("POST", r"/submit/([\w]+)", self.submit)
        r("POST", r"/sv/(\d+)", self.vote)
        r("GET", r"/user/([\w-]+)", self.user_page)
        r("GET", r"/f/([\w]+)/(\d+)/-/comment/(\d+)", self.comment_page)
        r("POST", r"/f/([\w]+)/(\d+)/-/comment/(\d+)/reply", self.reply)
        r("POST", r"/f/([\w]+)/(\d+)/comment", self.comment)
        r("GET", r"/f/([\w]+)/(\d+)(?:/[^/]*)?/?", self.post_page)
        r("GET", r"/f/([\w]+)/edit", self.edit_forum)
        r("GET", r"/f/([\w]+)(?:/(new|hot|top))?/?", self.forum_page)

    def reset(self) -> None:
        self.forums: dict[str, Forum] = {}
        self.posts: dict[int, Post] = {}
        self.comments: dict[int, Comment] = {}
        self.votes: dict[int, int] = {}
        self.next_post, self.next_comment = 134200, 1200000
        for name in (
            "books",
            "gadgets",
            "singularity",
            "Showerthoughts",
            "consoles",
            "gaming",
            "aww",
            "history",
        ):
            self.forums[name] = Forum(name, title=name)
        for post in (
            Post(
                59396,
                "books",
                "Apple Books has a free audiobook of A Christmas Carol",
                "ReadingRainbow",
                score=2101,
            ),
            Post(
                81371,
                "books",
                "Friendly reminder that bookshop.org exists",
                "indiebookworm",
                "bookshop.org supports local independent book stores with every purchase.",
                score=1830,
            ),
            Post(124260, "books", "Adults reading to each other out loud?", "quietshelf", score=12),
            Post(
                19459,
                "gadgets",
                "A custom gaming PC built inside a vintage 1940s Motorola radio",
                "retrobuild",
                score=7421,
            ),
            Post(19990, "gadgets", "My new mechanical keyboard", "clacky", score=310),
            Post(69404, "singularity", "This is how ChatGPT sees itself", "promptsmith", score=842),
            Post(
                131800, "Showerthoughts", "Socks are just shoe liners for your feet", "Oxfordcommas", score=55
            ),
            Post(
                131700,
                "Showerthoughts",
                "Every mirror is a window to a room you cannot enter",
                "deepthinker",
                score=90,
            ),
        ):
            self.posts[post.id] = post
            self.forums[post.forum].posts.append(post.id)
        for comment in (
            Comment(1042264, 69404, "firstreplier", "It drew itself as a glowing brain. Cute."),
            Comment(1042270, 69404, "lateposter", "Mine drew a toaster."),
            Comment(900101, 131800, "Oxfordcommas", "Thanks, glad you liked it", up=12),
            Comment(900102, 131600, "Oxfordcommas", "Pineapple belongs on pizza", up=30, down=4),
            Comment(900103, 131500, "Oxfordcommas", "Cats are liquid", up=8, down=8),
        ):
            self.comments[comment.id] = comment

    # -- layout -------------------------------------------------------------------------
    def _nav(self, r: Request) -> str:
        if r.user:
            return f'<nav><a href="/">Postmill</a> <a href="/forums">Forums</a> <a href="/user/{esc(r.user)}">{esc(r.user)}</a></nav>'
        return '<nav><a href="/">Postmill</a> <a href="/forums">Forums</a> <a href="/login">Log in</a> <a href="/registration">Sign up</a></nav>'

    def _page(self, r: Request, title: str, body: str, status: int = 200) -> Response:
        response = page(title, self._nav(r) + body, user=r.user)
        response.status = status
        return response

    def _post_item(self, post: Post) -> str:
        return (
            f'<article class="submission"><h2><a class="submission__link" href="{esc(post.path)}">{esc(post.title)}</a></h2>'
            f'<p>by <a class="submission__author" href="/user/{esc(post.author)}">{esc(post.author)}</a>'
            f" · {post.score} points</p></article>"
        )

    # -- handlers -----------------------------------------------------------------------
    def front(self, r: Request, m: re.Match[str]) -> Response:
        forums = "".join(f'<li><a href="/f/{f}">{f}</a></li>' for f in self.forums)
        return self._page(
            r,
            "Postmill",
            f"<h1>Forums</h1><ul class='forums'>{forums}</ul><a href='/create_forum'>Create forum</a>",
        )

    def login_form(self, r: Request, m: re.Match[str]) -> Response:
        return self._page(
            r,
            "Log in",
            '<form method="post" action="/login_check"><label for="login-username">Username</label>'
            '<input id="login-username" name="_username"><label for="login-password">Password</label>'
            '<input id="login-password" type="password" name="_password"><button type="submit">Log in</button></form>',
        )

    def login(self, r: Request, m: re.Match[str]) -> Response:
        if (r.field("_username"), r.field("_password")) == ACCOUNT:
            return self.sign_in(ACCOUNT[0], "/")
        return redirect("/login")

    def forum_page(self, r: Request, m: re.Match[str]) -> Response:
        forum = self.forums.get(m[1])
        if forum is None:
            return self._page(
                r, "Not found", f"<h1>404</h1><p class='error'>The forum {esc(m[1])} does not exist.</p>", 404
            )
        posts = [self.posts[i] for i in forum.posts]
        posts.sort(key=(lambda p: -p.id) if m[2] == "new" else (lambda p: -p.score))
        items = "".join(self._post_item(p) for p in posts)
        return self._page(
            r,
            f"/f/{forum.name}",
            f"<h1>/f/{esc(forum.name)}</h1><p class='forum-description'>{esc(forum.description)}</p>"
            f'<a href="/f/{esc(forum.name)}/new">New</a> <a href="/submit/{esc(forum.name)}">Submit a post</a>{items}',
        )

    def _vote_form(self, r: Request, post: Post) -> str:
        choice = self.votes.get(post.id, 0) if r.user else 0
        cls = {1: "vote vote--user-upvoted", -1: "vote vote--user-downvoted"}.get(choice, "vote")
        return (
            f'<div class="submission__vote"><form class="{cls}" method="post" action="/sv/{post.id}">'
            f'<button class="vote__up" name="choice" value="1">Upvote</button><span class="vote__net-score">'
            f'{post.score + choice}</span><button class="vote__down" name="choice" value="-1">Downvote</button></form></div>'
        )

    def _comment_tree(self, post: Post, parent: int | None, only: int | None = None) -> str:
        out = []
        for c in sorted(self.comments.values(), key=lambda c: c.id):
            if c.post != post.id or c.parent != parent or (only is not None and c.id != only):
                continue
            out.append(
                f'<div class="comment" id="comment-{c.id}"><p class="comment__author">{esc(c.author)}</p>'
                f'<div class="comment__body">{esc(c.text)}</div>'
                f'<a class="comment__reply" href="/f/{post.forum}/{post.id}/-/comment/{c.id}">Reply</a>'
                f'<div class="comment__replies">{self._comment_tree(post, c.id)}</div></div>'
            )
        return "".join(out)

    def _submission(self, r: Request, post: Post) -> str:
        link = post.url or post.path
        return (
            f'<article class="submission">{self._vote_form(r, post)}<div class="submission__inner">'
            f'<h1 class="submission__title"><a href="{esc(link)}">{esc(post.title)}</a></h1>'
            f'<p class="submission__info">by <a href="/user/{esc(post.author)}">{esc(post.author)}</a> in '
            f'<a href="/f/{post.forum}">/f/{post.forum}</a></p>'
            f'<div class="submission__body">{esc(post.body)}</div></div></article>'
        )

    def _find_post(self, m: re.Match[str]) -> Post | None:
        post = self.posts.get(int(m[2]))
        return post if post is not None and post.forum == m[1] else None

    def post_page(self, r: Request, m: re.Match[str]) -> Response:
        post = self._find_post(m)
        if post is None:
            return not_found("No such submission.")
        form = (
            f'<form method="post" action="/f/{post.forum}/{post.id}/comment"><label for="reply_to_post">Comment</label>'
            '<textarea id="reply_to_post" name="comment"></textarea><button type="submit">Post comment</button></form>'
        )
        return self._page(
            r,
            post.title,
            self._submission(r, post)
            + form
            + f'<section class="comments">{self._comment_tree(post, None)}</section>',
        )

    def comment_page(self, r: Request, m: re.Match[str]) -> Response:
        post, comment = self._find_post(m), self.comments.get(int(m[3]))
        if post is None or comment is None or comment.post != post.id:
            return not_found("No such comment.")
        form = (
            f'<form method="post" action="/f/{post.forum}/{post.id}/-/comment/{comment.id}/reply">'
            f'<label for="reply_to_comment_{comment.id}">Reply</label><textarea id="reply_to_comment_{comment.id}" '
            'name="comment"></textarea><button type="submit">Post reply</button></form>'
        )
        tree = self._comment_tree(post, comment.parent, only=comment.id)
        return self._page(
            r, post.title, f"<h1>{esc(post.title)}</h1>{form}<section class='comments'>{tree}</section>"
        )

    def _add_comment(self, r: Request, post: Post, parent: int | None) -> Response:
        if not r.user:
            return redirect("/login")
        text = r.field("comment")
        if text:
            self.next_comment += 1
            self.comments[self.next_comment] = Comment(self.next_comment, post.id, r.user, text, parent)
            return redirect(f"/f/{post.forum}/{post.id}/-/comment/{self.next_comment}")
        return redirect(post.path)

    def comment(self, r: Request, m: re.Match[str]) -> Response:
        post = self._find_post(m)
        return not_found() if post is None else self._add_comment(r, post, None)

    def reply(self, r: Request, m: re.Match[str]) -> Response:
        post, parent = self._find_post(m), self.comments.get(int(m[3]))
        return not_found() if post is None or parent is None else self._add_comment(r, post, parent.id)

    def vote(self, r: Request, m: re.Match[str]) -> Response:
        post = self.posts.get(int(m[1]))
        if post is None:
            return not_found()
        if not r.user:
            return redirect("/login")
        choice = int(r.field("choice") or 0)
        self.votes[post.id] = 0 if self.votes.get(post.id) == choice else choice
        return redirect(r.headers.get("referer") or post.path)

    def user_page(self, r: Request, m: re.Match[str]) -> Response:
        rows = "".join(
            f'<li class="comment"><div class="comment__body">{esc(c.text)}</div>'
            f'<span class="comment__votes">+{c.up} / -{c.down}</span></li>'
            for c in self.comments.values()
            if c.author == m[1]
        )
        return self._page(r, m[1], f"<h1>{esc(m[1])}</h1><h2>Comments</h2><ul>{rows}</ul>")

    def submit_form(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user:
            return redirect("/login")
        if m[1] not in self.forums:
            return not_found(f"The forum {m[1]} does not exist.")
        return self._page(
            r,
            "Create submission",
            f'<form method="post" action="/submit/{esc(m[1])}"><label for="submission_url">URL</label>'
            '<input id="submission_url" name="url"><label for="submission_title">Title</label>'
            '<input id="submission_title" name="title"><label for="submission_body">Body</label>'
            '<textarea id="submission_body" name="body"></textarea><button type="submit">Create submission</button></form>',
        )

    def submit(self, r: Request, m: re.Match[str]) -> Response:
        forum = self.forums.get(m[1])
        if not r.user or forum is None:
            return redirect("/login") if not r.user else not_found()
        if not r.field("title"):
            return redirect(f"/submit/{forum.name}")
        self.next_post += 1
        post = Post(self.next_post, forum.name, r.field("title"), r.user, r.field("body"), r.field("url"))
        self.posts[post.id] = post
        forum.posts.append(post.id)
        return redirect(post.path)

    def _forum_form(self, action: str, forum: Forum | None) -> str:
        f = forum or Forum("")
        return (
            f'<form method="post" action="{action}"><label for="forum_name">Name</label>'
            f'<input id="forum_name" name="name" value="{esc(f.name)}"><label for="forum_title">Title</label>'
            f'<input id="forum_title" name="title" value="{esc(f.title)}"><label for="forum_description">Description</label>'
            f'<textarea id="forum_description" name="description">{esc(f.description)}</textarea>'
            f'<label for="forum_sidebar">Sidebar</label><textarea id="forum_sidebar" name="sidebar">{esc(f.sidebar)}</textarea>'
            '<button type="submit">Create forum</button></form>'
        )

    def create_forum_form(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user:
            return redirect("/login")
        return self._page(
            r, "Create forum", "<h1>Create forum</h1>" + self._forum_form("/create_forum", None)
        )

    def create_forum(self, r: Request, m: re.Match[str]) -> Response:
        name = r.field("name")
        if not r.user or not re.fullmatch(r"\w{3,25}", name) or name in self.forums:
            return redirect("/create_forum")
        self.forums[name] = Forum(name, r.field("title"), r.field("description"), r.field("sidebar"))
        return redirect(f"/f/{name}")

    def edit_forum(self, r: Request, m: re.Match[str]) -> Response:
        forum = self.forums.get(m[1])
        if forum is None:
            return not_found(f"The forum {m[1]} does not exist.")
        return self._page(r, f"Edit /f/{forum.name}", self._forum_form(f"/f/{forum.name}/edit", forum))
