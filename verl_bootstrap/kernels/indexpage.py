"""The wheels a prebuilt source lists: a simple index's page of one distribution, read as the
index's JSON (PEP 691) where it serves that, else as its HTML (PEP 503), and a published list
of release assets (Markdown, or HTML). Each page is untrusted: shapes are checked as read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verl_bootstrap.errors import field_problems, said_of
from verl_bootstrap.httpclient import Page, fetch_page
from verl_bootstrap.redact import redact
from verl_bootstrap.safety import jsontext

__all__ = ["JSON_TYPE", "PageError", "index_wheels", "list_wheels", "read_html", "read_json"]

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
# JSON first; an index that only has HTML (a lab's static folder, a pages site) answers that
_ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
_LIST_ACCEPT = "text/markdown, text/plain;q=0.9, text/html;q=0.5"
_HTML_TYPES = {"text/html", "application/vnd.pypi.simple.v1+html", "application/xhtml+xml"}
# a Markdown link's target: `[text](URL)`; no parser of Markdown is among the tool's deps
_MD_LINK = re.compile(r"\]\((?P<url>[^)\s]+)\)")
_MAX_PAGE = 16 * 1024 * 1024


class PageError(Exception):
    """A page came, but it is not one this reader can trust to list the source's wheels."""


class _File(BaseModel):
    """One file of a PEP 691 project page; the keys this reader does not use are let be."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    filename: str
    url: str


class _Meta(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    api_version: str = Field(alias="api-version", pattern=r"^\d+(\.\d+)*$")


class _Project(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    meta: _Meta
    files: list[_File]


def index_wheels(page: str) -> list[str]:
    """The wheel URLs an index's page of one distribution lists, in its order."""
    answer = fetch_page(page, accept=_ACCEPT, timeout=60, limit=_MAX_PAGE)
    if answer.media_type == JSON_TYPE:
        return read_json(page, answer.body)
    return read_html(page, _text(answer))


def list_wheels(listing: str) -> list[str]:
    """The wheel URLs a published list links to, in its order: Markdown links, or an HTML
    page's anchors where the list is served as HTML."""
    answer = fetch_page(listing, accept=_LIST_ACCEPT, timeout=60, limit=_MAX_PAGE)
    if answer.media_type in _HTML_TYPES:
        return read_html(listing, _text(answer))
    found = (urljoin(listing, m["url"]) for m in _MD_LINK.finditer(_text(answer)))
    return _wheels(found)


def read_json(page: str, body: bytes) -> list[str]:
    """The wheel URLs of a PEP 691 project page (version 1.x), resolved against `page`."""
    project = _project(page, body)
    major = project.meta.api_version.split(".")[0]
    if major != "1":
        msg = f"{redact(page)} speaks simple API {project.meta.api_version}; this tool reads 1.x"
        raise PageError(msg)
    wheels = (f for f in project.files if f.filename.endswith(".whl"))
    return _wheels(urljoin(page, f.url) for f in wheels)


def _project(page: str, body: bytes) -> _Project:
    """The page's JSON, shape-checked: a page cut at the size limit or of another shape is an
    error, never "no wheels"."""
    try:
        data: Any = jsontext.loads(body)
        return _Project.model_validate(data)
    except ValidationError as exc:  # first: a ValidationError is a ValueError too
        why = said_of(field_problems(exc.errors()[:1]))
    except ValueError as exc:  # JSONDecodeError, bad UTF-8
        why = str(exc).splitlines()[0][:160]
    raise PageError(f"{redact(page)} is not a PEP 691 project page ({why})")


def read_html(page: str, text: str) -> list[str]:
    """The wheel URLs a (PEP 503) HTML page's anchors link to, resolved against `page`."""
    anchors = _Anchors()
    anchors.feed(text)
    anchors.close()
    return _wheels(urljoin(page, href) for href in anchors.hrefs)


class _Anchors(HTMLParser):
    """Collects each `<a href>` in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href") if tag == "a" else None
        if href:
            self.hrefs.append(href.strip())


def _wheels(urls: Iterable[str]) -> list[str]:
    """The URLs (fragments such as `#sha256=` dropped) whose path names a wheel."""
    bare = (urldefrag(u).url for u in urls)
    return [u for u in bare if urlsplit(u).path.endswith(".whl")]


def _text(answer: Page) -> str:
    return answer.body.decode("utf-8", "replace")
