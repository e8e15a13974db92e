"""GitLab stand-in: sign-in, projects, issues, members with roles, new projects with a README (raw files)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tests.standins.server import TEXT, Request, Response, SiteApp, esc, not_found, page, redirect

ACCOUNT = ("byteblaze", "hello1234")
ROLES = ("Guest", "Reporter", "Developer", "Maintainer", "Owner")


@dataclass
class Issue:
    iid: int
    title: str
    state: str = "opened"
    author: str = "byteblaze"
    description: str = ""


@dataclass
class Project:
    path: str
    description: str = ""
    members: dict[str, str] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


class GitLab(SiteApp):
    name = "gitlab"

    def __init__(self) -> None:
        super().__init__()
        r = self.route
        r("GET", r"/users/sign_in", self.sign_in_form)
        r("POST", r"/users/sign_in", self.sign_in_post)
        r("GET", r"/", self.dashboard)
        r("GET", r"/explore(?:/projects)?/?", self.explore)
        r("GET", r"/dashboard/issues/?", self.my_issues)
        r("GET", r"/projects/new", self.new_project_form)
        r("POST", r"/projects", self.create_project)
        p = r"/([\w.-]+/[\w.-]+)"
        r("GET", p + r"/-/issues/?", self.issues)
        r("GET", p + r"/-/issues/new", self.new_issue_form)
        r("POST", p + r"/-/issues", self.create_issue)
        r("GET", p + r"/-/issues/(\d+)", self.issue)
        r("GET", p + r"/-/project_members/?", self.members)
        r("POST", p + r"/-/project_members", self.invite)
        r("GET", p + r"/-/raw/main/(.+)", self.raw)
        r("GET", p + r"/?", self.project)

    def reset(self) -> None:
        owner = {"byteblaze": "Owner"}
        self.projects: dict[str, Project] = {}
        for project in (
            Project(
                "a11yproject/a11yproject.com",
                "The A11Y Project is a community-driven effort to make digital accessibility easier.",
                {"byteblaze": "Developer"},
                {
                    719: Issue(719, "Update homepage content", "closed"),
                    1517: Issue(1517, "Feature request: dark mode", "closed"),
                },
            ),
            Project(
                "byteblaze/empathy-prompts",
                "Ideas to help consider Inclusive Design principles when making things for others to use.",
                dict(owner),
                {
                    8: Issue(8, "Better prompts for accessibility reviews"),
                    18: Issue(18, "Update dependency versions"),
                    3: Issue(3, "Typo in README", "closed"),
                },
            ),
            Project("byteblaze/dotfiles", "Computer setup", dict(owner)),
            Project(
                "byteblaze/a11y-webring.club",
                "A webring for digital accessibility practitioners.",
                dict(owner),
            ),
            Project("byteblaze/solarized-prism-theme", "A Solarized theme for Prism.js", dict(owner)),
            Project("root/metaseq", "Repo for external large-scale work", {"byteblaze": "Developer"}),
        ):
            self.projects[project.path] = project

    def _page(self, r: Request, title: str, body: str) -> Response:
        nav = '<nav><a href="/">Projects</a> <a href="/explore">Explore</a> <a href="/dashboard/issues">Issues</a> <a href="/projects/new">New project</a></nav>'
        return page(title, nav + body, user=r.user)

    def _project(self, m: re.Match[str]) -> Project | None:
        return self.projects.get(m[1])

    def sign_in_form(self, r: Request, m: re.Match[str]) -> Response:
        return page(
            "Sign in · GitLab",
            '<form method="post" action="/users/sign_in"><label for="user_login">Username or email</label>'
            '<input id="user_login" name="user[login]"><label for="user_password">Password</label>'
            '<input id="user_password" type="password" name="user[password]"><button type="submit">Sign in</button></form>',
        )

    def sign_in_post(self, r: Request, m: re.Match[str]) -> Response:
        if (r.field("user[login]"), r.field("user[password]")) == ACCOUNT:
            return self.sign_in(ACCOUNT[0], "/")
        return redirect("/users/sign_in")

    def _project_list(self) -> str:
        return (
            "<ul class='projects'>"
            + "".join(
                f'<li><a href="/{p.path}">{esc(p.path)}</a> <span class="description">{esc(p.description)}</span></li>'
                for p in self.projects.values()
            )
            + "</ul>"
        )

    def dashboard(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user:
            return redirect("/users/sign_in")
        return self._page(r, "Projects · Dashboard", "<h1>Your projects</h1>" + self._project_list())

    def explore(self, r: Request, m: re.Match[str]) -> Response:
        return self._page(r, "Explore projects", "<h1>Explore projects</h1>" + self._project_list())

    def my_issues(self, r: Request, m: re.Match[str]) -> Response:
        words = r.query.get("search", "").lower()
        rows = "".join(
            f'<li class="issue"><a href="/{p.path}/-/issues/{i.iid}">{esc(i.title)}</a> ({esc(p.path)}#{i.iid})</li>'
            for p in self.projects.values()
            for i in sorted(p.issues.values(), key=lambda i: -i.iid)
            if i.author == r.user and words in i.title.lower()
        )
        return self._page(
            r,
            "Issues",
            '<form method="get" action="/dashboard/issues"><input name="search" aria-label="Search issues">'
            f'<button type="submit">Search</button></form><ul class="issues">{rows}</ul>',
        )

    def project(self, r: Request, m: re.Match[str]) -> Response:
        project = self._project(m)
        if project is None:
            return not_found("The project you were looking for could not be found.")
        files = "".join(
            f'<li><a href="/{project.path}/-/raw/main/{esc(f)}">{esc(f)}</a></li>' for f in project.files
        )
        return self._page(
            r,
            project.path,
            f'<h1 class="project-title">{esc(project.path)}</h1><p class="project-description">{esc(project.description)}</p>'
            f'<a href="/{project.path}/-/issues">Issues</a> <a href="/{project.path}/-/project_members">Members</a>'
            f"<ul class='files'>{files}</ul>",
        )

    def issues(self, r: Request, m: re.Match[str]) -> Response:
        project = self._project(m)
        if project is None:
            return not_found()
        state = r.query.get("state", "opened")
        chosen = [i for i in project.issues.values() if state == "all" or i.state == state]
        chosen.sort(key=lambda i: i.iid, reverse=r.query.get("sort") != "created_asc")
        rows = "".join(
            f'<li class="issue"><a href="/{project.path}/-/issues/{i.iid}">{esc(i.title)}</a></li>'
            for i in chosen
        )
        base = f"/{project.path}/-/issues/"
        return self._page(
            r,
            f"Issues · {project.path}",
            f'<a href="{base}?state=opened">Open</a> <a href="{base}?state=closed">Closed</a> '
            f'<a href="{base}?sort=created_asc&amp;state=opened">Created date</a> '
            f'<a href="{base}new">New issue</a><ul class="issues">{rows}</ul>',
        )

    def issue(self, r: Request, m: re.Match[str]) -> Response:
        project = self._project(m)
        issue = project.issues.get(int(m[2])) if project else None
        if project is None or issue is None:
            return not_found()
        status = "Open" if issue.state == "opened" else "Closed"
        return self._page(
            r,
            issue.title,
            f'<span class="issuable-status">{status}</span><div class="detail-page-description">'
            f'<h1 class="title" data-qa-selector="title_content">{esc(issue.title)}</h1>'
            f'<div class="description">{esc(issue.description)}</div></div>',
        )

    def new_issue_form(self, r: Request, m: re.Match[str]) -> Response:
        project = self._project(m)
        if project is None or not r.user:
            return not_found() if project is None else redirect("/users/sign_in")
        return self._page(
            r,
            "New issue",
            f'<form method="post" action="/{project.path}/-/issues"><label for="issue_title">Title</label>'
            '<input id="issue_title" name="issue[title]"><label for="issue_description">Description</label>'
            '<textarea id="issue_description" name="issue[description]"></textarea><button type="submit">Create issue</button></form>',
        )

    def create_issue(self, r: Request, m: re.Match[str]) -> Response:
        project = self._project(m)
        if project is None or not r.user or not r.field("issue[title]"):
            return redirect("/users/sign_in") if not r.user else not_found()
        iid = max(project.issues, default=0) + 1
        project.issues[iid] = Issue(
            iid, r.field("issue[title]"), author=r.user, description=r.field("issue[description]")
        )
        return redirect(f"/{project.path}/-/issues/{iid}")

    def members(self, r: Request, m: re.Match[str]) -> Response:
        project = self._project(m)
        if project is None:
            return not_found()
        rows = "".join(
            f'<tr><td data-label="Account"><span class="gl-avatar-labeled-label">{esc(name)}</span>'
            f'<span class="gl-avatar-labeled-sublabel">@{esc(name)}</span></td>'
            f'<td class="col-max-role"><span>{esc(role)}</span></td></tr>'
            for name, role in project.members.items()
        )
        options = "".join(f'<option value="{role}">{role}</option>' for role in ROLES)
        return self._page(
            r,
            f"Members · {project.path}",
            f'<form method="post" action="/{project.path}/-/project_members"><label for="invite_username">Username</label>'
            f'<input id="invite_username" name="username"><label for="invite_access_level">Select a role</label>'
            f'<select id="invite_access_level" name="access_level">{options}</select><button type="submit">Invite</button></form>'
            f"<table class='members'><tbody>{rows}</tbody></table>",
        )

    def invite(self, r: Request, m: re.Match[str]) -> Response:
        project = self._project(m)
        if project is None or not r.user:
            return not_found() if project is None else redirect("/users/sign_in")
        username, role = r.field("username").lstrip("@"), r.field("access_level")
        if re.fullmatch(r"[\w.-]+", username) and role in ROLES:
            project.members[username] = role
        return redirect(f"/{project.path}/-/project_members")

    def raw(self, r: Request, m: re.Match[str]) -> Response:
        project = self._project(m)
        if project is None or m[2] not in project.files:
            return not_found()
        return Response(body=project.files[m[2]].encode(), content_type=TEXT)

    def new_project_form(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user:
            return redirect("/users/sign_in")
        return self._page(
            r,
            "New project",
            '<form method="post" action="/projects"><label for="project_name">Project name</label>'
            '<input id="project_name" name="project[name]"><label for="project_readme">README.md</label>'
            '<textarea id="project_readme" name="project[readme]"></textarea><button type="submit">Create project</button></form>',
        )

    def create_project(self, r: Request, m: re.Match[str]) -> Response:
        if not r.user:
            return redirect("/users/sign_in")
        name = r.field("project[name]")
        path = f"{r.user}/{name}"
        if not re.fullmatch(r"[\w.-]+", name) or path in self.projects:
            return redirect("/projects/new")
        readme = r.form.get("project[readme]", [""])[0]
        self.projects[path] = Project(
            path, members={r.user: "Owner"}, files={"README.md": readme} if readme else {}
        )
        return redirect(f"/{path}")
