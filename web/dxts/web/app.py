"""The web application: its routes, sign-in, and how a service's refusal becomes a page.

Every page is a stable URL; the part of it that changes while work runs is also served alone
(`?fragment=1`) and re-fetched by static/live.js every few seconds, so a page follows its
workgraph without a reload (and reads complete without JavaScript).

Every form that changes something (signing in and out, steering) is refused when its Origin
(or Referer) names another site, and the ones made for a session carry its CSRF token; every
redirect a request can choose (`next`, `back`) stays on this site; every response carries the
security headers of `SECURITY_HEADERS` (docs/security.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dxts.core.errors import (
    DxtsError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from dxts.v1 import common_pb2, definition_pb2
from dxts.web import (
    errors,
    files,
    inputs,
    jobs,
    members,
    names,
    parcels,
    steering,
    workgraphs,
)
from dxts.web.services import Services, UserClients
from dxts.web.sessions import COOKIE, Session, Sessions
from dxts.web.settings import WebSettings

HERE = Path(__file__).parent
Page = Callable[[Request, Session], Awaitable[Response]]


class Web:
    """One web process: its settings, the services' channels, sessions and templates."""

    def __init__(self, settings: WebSettings, services: Services | None = None) -> None:
        self.settings = settings
        self.services = services or Services(settings)
        self.sessions = Sessions(
            session_seconds=settings.session_hours * 3600,
            ticket_seconds=settings.ticket_seconds,
        )
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.globals.update(
            names=names,
            css=names.css_class,
            age=names.age,
            poll_ms=int(settings.poll_seconds * 1000),
            actionable=steering.actionable,
        )

    def render(
        self, request: Request, template: str, context: Mapping[str, Any], status: int = 200
    ) -> Response:
        return self.templates.TemplateResponse(
            request, template, {"session": self.session_of(request), **context}, status_code=status
        )

    def session_of(self, request: Request) -> Session | None:
        return self.sessions.find(request.cookies.get(COOKIE))

    def clients(self, session: Session) -> UserClients:
        return self.services.as_user(session.token)

    async def check_token(self, token: str) -> None:
        """Raises Unauthenticated unless the services accept `token`."""
        await self.services.as_user(token).definition.ListWorkgraphs(
            definition_pb2.ListWorkgraphsRequest(paging=common_pb2.Paging(page_size=1))
        )

    def signed_in(self, response: Response, token: str) -> Response:
        session = self.sessions.open(token)
        response.set_cookie(
            COOKIE,
            session.id,
            max_age=int(self.settings.session_hours * 3600),
            httponly=True,
            samesite="lax",
            secure=self.settings.secure_cookies,
            path="/",
        )
        return response


# What a browser is told of every response: scripts, styles and fetches from this site only
# (the bars' widths are the one inline style), never framed, no type sniffing, and no URL of
# a page (ids, LFNs) sent to another site.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; "
        "style-src-attr 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


class SecurityHeaders:
    """ASGI middleware: `SECURITY_HEADERS` on every HTTP response, pages, redirects, static
    files and errors alike."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


def _local(path: str) -> str:
    """`path` if it is a path of this site, else "/" (no redirect to another site): it starts
    with one `/`, and has no backslash or control character (which browsers read as `/` or
    drop, so `/\\evil.example` would leave the site)."""
    parts = urlsplit(path)
    if (
        parts.scheme
        or parts.netloc
        or not path.startswith("/")
        or path.startswith("//")
        or "\\" in path
        or any(ord(c) < 0x20 or ord(c) == 0x7F for c in path)
    ):
        return "/"
    return path


def page(web: Web, handler: Page) -> Callable[[Request], Awaitable[Response]]:
    """A page for signed-in users: without a session, the sign-in form (fragments: 401);
    the service's NOT_FOUND, PERMISSION_DENIED or a malformed id: the not-found page."""

    async def endpoint(request: Request) -> Response:
        session = web.session_of(request)
        fragment = bool(request.query_params.get("fragment"))
        if session is None:
            if fragment:
                return Response("sign in again", status_code=401)
            target = quote(
                str(request.url.path) + ("?" + request.url.query if request.url.query else "")
            )
            return RedirectResponse(f"/signin?next={target}", status_code=303)
        try:
            return await handler(request, session)
        except (NotFound, PermissionDenied, InvalidArgument) as error:
            return web.render(request, "not_found.html", {"message": str(error)}, status=404)
        except Unauthenticated:
            web.sessions.close(session.id)
            return RedirectResponse(f"/signin?next={quote(request.url.path)}", status_code=303)
        except Unavailable as error:
            return web.render(request, "error.html", {"message": str(error)}, status=503)

    return endpoint


def build_app(web: Web) -> Starlette:
    t = web.render

    async def healthz(request: Request) -> Response:
        """Liveness and readiness: the server answers (the services have their own probes)."""
        return Response("ok", media_type="text/plain")

    async def home(request: Request) -> Response:
        return RedirectResponse("/workgraphs", status_code=303)

    async def signin_form(request: Request) -> Response:
        return t(request, "signin.html", {"next": _local(request.query_params.get("next", "/"))})

    async def signin(request: Request) -> Response:
        if not _same_origin(request):
            return t(request, "error.html", {"message": "cross-site request refused"}, 403)
        form = await request.form()
        token = str(form.get("token", "")).strip()
        target = _local(str(form.get("next", "/")))
        try:
            await web.check_token(token)
        except DxtsError as error:
            return t(request, "signin.html", {"next": target, "error": str(error)}, status=401)
        return web.signed_in(RedirectResponse(target, status_code=303), token)

    async def signin_ticket(request: Request) -> Response:
        token = web.sessions.redeem(request.path_params["ticket"])
        target = _local(request.query_params.get("next", "/"))
        if token is None:
            error = "this sign-in link was used already or has expired: ask for a new one"
            return t(request, "signin.html", {"next": target, "error": error}, status=401)
        return web.signed_in(RedirectResponse(target, status_code=303), token)

    async def signout(request: Request) -> Response:
        session = web.session_of(request)
        form = await request.form()
        if not _same_origin(request) or (
            session is not None and not session.csrf_matches(str(form.get("csrf", "")))
        ):
            return t(request, "error.html", {"message": "cross-site request refused"}, 403)
        if session is not None:
            web.sessions.close(session.id)
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def sign_in_link(request: Request) -> Response:
        """A one-time sign-in link for the bearer of the request's token (`dxts open`)."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return JSONResponse({"error": "send Authorization: Bearer TOKEN"}, status_code=401)
        try:
            await web.check_token(token)
        except DxtsError as error:
            return JSONResponse({"error": str(error)}, status_code=401)
        return JSONResponse({"path": f"/signin/{web.sessions.issue_ticket(token)}"})

    async def workgraph_list(request: Request, session: Session) -> Response:
        q = request.query_params
        filters = workgraphs.Filters.of(q)
        listing = await workgraphs.list_workgraphs(web.clients(session), filters)
        context = {
            "listing": listing,
            "filters": filters,
            "sorts": workgraphs.SORTS,
            "statuses": list(workgraphs.WORKGRAPH_STATUSES),
            "now": datetime.now(UTC),
        }
        template = "workgraphs_live.html" if q.get("fragment") else "workgraphs.html"
        return t(request, template, context)

    async def workgraph(request: Request, session: Session) -> Response:
        found = await workgraphs.workgraph_page(web.clients(session), request.path_params["wg"])
        template = (
            "workgraph_live.html" if request.query_params.get("fragment") else "workgraph.html"
        )
        return t(request, template, {"wg": found, "verbs": steering.WORKGRAPH_VERBS})

    async def member(request: Request, session: Session) -> Response:
        found = await members.member_page(
            web.clients(session), request.path_params["tf"], datetime.now(UTC)
        )
        template = "member_live.html" if request.query_params.get("fragment") else "member.html"
        context = {
            "m": found,
            "verbs": steering.MEMBER_VERBS,
            "action_verbs": steering.ACTION_VERBS,
        }
        return t(request, template, context)

    async def error_groups(request: Request, session: Session) -> Response:
        q = request.query_params
        now = datetime.now(UTC)
        found = await errors.errors_page(
            web.clients(session), q.get("since", ""), q.get("wg", "").strip(), now
        )
        template = "errors_live.html" if q.get("fragment") else "errors.html"
        return t(request, template, {"e": found, "windows": list(errors.WINDOWS), "now": now})

    async def user_jobs(request: Request, session: Session) -> Response:
        q = request.query_params
        status, token = q.get("status", ""), q.get("page", "")
        rows, next_token = await jobs.jobs_page(web.clients(session), status, token)
        context = {
            "rows": rows,
            "next_token": next_token,
            "status": status,
            "page": token,
            "statuses": jobs.JOB_STATUSES,
            "now": datetime.now(UTC),
        }
        return t(request, "jobs_live.html" if q.get("fragment") else "jobs.html", context)

    async def parcel(request: Request, session: Session) -> Response:
        now = datetime.now(UTC)
        found = await parcels.parcel_page(web.clients(session), request.path_params["name"], now)
        context = {
            "p": found,
            "now": now,
            "parameters": parcels.parameters(found.got),
            "full_log_bytes": parcels.FULL_LOG_BYTES,
        }
        return t(request, "parcel.html", context)

    async def parcel_log(request: Request, session: Session) -> Response:
        """One stream of the job's log as plain text, up to the adaptors' cap."""
        stream = request.path_params["stream"]
        if stream not in ("stdout", "stderr"):
            raise HTTPException(404, f"no such stream: {stream}")
        clients = web.clients(session)
        parcel_id = await parcels.resolve(clients, request.path_params["name"])
        found = await parcels.job_logs(clients, parcel_id, parcels.FULL_LOG_BYTES)
        if found.missing:
            return Response(f"no logs: {found.missing}\n", status_code=409, media_type="text/plain")
        text = found.stdout if stream == "stdout" else found.stderr
        return Response(text, media_type="text/plain; charset=utf-8")

    async def file(request: Request, session: Session) -> Response:
        lfn = request.query_params.get("lfn", "").strip()
        found = await files.lineage(web.clients(session), lfn) if lfn else None
        return t(request, "file.html", {"lfn": lfn, "found": found})

    async def open_id(request: Request, session: Session) -> Response:
        """A workgraph's or a member's page, whichever the id names (`dxts open ID`)."""
        identifier = request.path_params["id"]
        with contextlib.suppress(NotFound, PermissionDenied):
            await web.clients(session).definition.GetWorkgraph(
                definition_pb2.GetWorkgraphRequest(workgraph_id=identifier)
            )
            return RedirectResponse(f"/workgraphs/{identifier}", status_code=303)
        return RedirectResponse(f"/transformations/{identifier}", status_code=303)

    def steer_page(verbs: Mapping[str, steering.Verb], what: str, key: str) -> Page:
        async def handler(request: Request, session: Session) -> Response:
            target = str(request.path_params[key])
            name = request.path_params["verb"]
            if name not in verbs:
                raise HTTPException(404, f"no such verb: {name}")
            back = _local(request.query_params.get("back") or _back(what, target))
            context: dict[str, Any] = {
                "verb": verbs[name],
                "what": what,
                "target": target,
                "back": back,
            }
            if request.method == "GET":
                return t(request, "confirm.html", context)
            form = await request.form()
            if not _same_origin(request) or not session.csrf_matches(str(form.get("csrf", ""))):
                return t(request, "error.html", {"message": "cross-site request refused"}, 403)
            try:
                await steering.steer(
                    web.clients(session), verbs, name, target, str(form.get("reason", ""))
                )
            except (NotFound, PermissionDenied, Unauthenticated, Unavailable):
                raise
            except DxtsError as error:
                return t(request, "confirm.html", {**context, "refused": str(error)}, 409)
            return RedirectResponse(back, status_code=303)

        return handler

    async def input_verb(request: Request, session: Session) -> Response:
        """Write off or reset a member's inputs: a confirmation page, then the call."""
        target = str(request.path_params["tf"])
        name = request.path_params["verb"]
        if name not in inputs.INPUT_VERBS:
            raise HTTPException(404, f"no such verb: {name}")
        verb = inputs.INPUT_VERBS[name]
        clients = web.clients(session)
        member = (
            await clients.definition.GetTransformation(
                definition_pb2.GetTransformationRequest(transformation_id=target)
            )
        ).transformation
        back = _local(request.query_params.get("back") or f"/transformations/{target}")
        asked = request.query_params if request.method == "GET" else await request.form()
        context: dict[str, Any] = {"verb": verb, "member": member, "back": back, "chosen": None}
        try:
            chosen = inputs.selection_of(
                verb,
                [str(i) for i in asked.getlist("input")],
                str(asked.get("status", "")),
            )
        except InvalidArgument as error:
            return t(request, "inputs_confirm.html", {**context, "refused": str(error)}, 400)
        context["chosen"] = chosen
        if request.method == "GET":
            return t(request, "inputs_confirm.html", context)
        if not _same_origin(request) or not session.csrf_matches(str(asked.get("csrf", ""))):
            return t(request, "error.html", {"message": "cross-site request refused"}, 403)
        try:
            await inputs.act(clients, verb, target, chosen, str(asked.get("reason", "")))
        except (NotFound, PermissionDenied, Unauthenticated, Unavailable):
            raise
        except DxtsError as error:
            return t(request, "inputs_confirm.html", {**context, "refused": str(error)}, 409)
        return RedirectResponse(back, status_code=303)

    routes = [
        Route("/", home),
        Route("/healthz", healthz),
        Route("/signin", signin_form, methods=["GET"]),
        Route("/signin", signin, methods=["POST"]),
        Route("/signin/{ticket}", signin_ticket),
        Route("/signout", signout, methods=["POST"]),
        Route("/api/sign-in-links", sign_in_link, methods=["POST"]),
        Route("/workgraphs", page(web, workgraph_list)),
        Route("/workgraphs/{wg}", page(web, workgraph)),
        Route(
            "/workgraphs/{wg}/steer/{verb}",
            page(web, steer_page(steering.WORKGRAPH_VERBS, "workgraph", "wg")),
            methods=["GET", "POST"],
        ),
        Route("/transformations/{tf}", page(web, member)),
        Route(
            "/transformations/{tf}/steer/{verb}",
            page(web, steer_page(steering.MEMBER_VERBS, "member", "tf")),
            methods=["GET", "POST"],
        ),
        Route(
            "/transformations/{tf}/inputs/{verb}",
            page(web, input_verb),
            methods=["GET", "POST"],
        ),
        Route(
            "/actions/{action:int}/steer/{verb}",
            page(web, steer_page(steering.ACTION_VERBS, "action", "action")),
            methods=["GET", "POST"],
        ),
        Route("/errors", page(web, error_groups)),
        Route("/jobs", page(web, user_jobs)),
        Route("/parcels/{name}", page(web, parcel)),
        Route("/parcels/{name}/logs/{stream}", page(web, parcel_log)),
        Route("/files", page(web, file)),
        Route("/open/{id}", page(web, open_id)),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]

    async def not_found(request: Request, error: Exception) -> Response:
        detail = getattr(error, "detail", "") or f"nothing at {request.url.path}"
        return t(request, "not_found.html", {"message": detail}, 404)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await web.services.close()

    return Starlette(
        routes=routes,
        exception_handlers={404: not_found},
        lifespan=lifespan,
        middleware=[Middleware(SecurityHeaders)],
    )


def _back(what: str, target: str) -> str:
    return {"workgraph": "/workgraphs/", "member": "/transformations/"}.get(what, "/") + (
        target if what != "action" else ""
    )


def _same_origin(request: Request) -> bool:
    """A steering form must come from this site: an Origin (or Referer) naming another host
    is a cross-site request, whatever cookie it carries."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin or origin == "null":
        return origin != "null"
    return urlsplit(origin).netloc == request.headers.get("host", "")
