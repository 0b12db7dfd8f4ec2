"""HTTP for the EugoHPC Manager: tornado handlers under ``/eugo/`` that only translate to the
manager.

Bad input -> 400 with ``{"message": ...}``, unknown id -> 404, no authentication -> 403 (every
verb is ``@tornado.web.authenticated``). The manager owns all state.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any

import tornado.web
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.utils import url_path_join
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from ..exceptions import ClusterError, ConfirmationError, OptionsError
from . import limits
from .live import FAILURES_LIMIT, TASKS_LIMIT, LiveHub, LiveTarget, parse_limit, parse_since
from .manager import ClusterManager

__all__ = ["setup_route_handlers"]

# "preview" is a route of its own (mounted first), and cluster ids start with "c-": no id is
# ever "preview".
_ID = r"(?P<cluster_id>(?!preview/?$)[A-Za-z0-9][A-Za-z0-9_-]{0,63})"
_JOB = r"(?P<node>[A-Za-z0-9_.-]{1,64})"


class _Base(APIHandler):
    @property
    def manager(self) -> ClusterManager:
        return self.settings["eugo_cluster_manager"]  # type: ignore[no-any-return]

    def _reply(self, model: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(model))  # APIHandler.finish says application/json

    async def _answer(self, call: Awaitable[Any], cluster_id: str | None = None) -> Any:
        """What the manager's ``call`` answers: 400 with its sentence when it refuses; 404 when
        it answers None for ``cluster_id``."""
        try:
            model = await call
        except (OptionsError, ClusterError) as exc:
            raise _bad_request(exc) from None
        if model is None and cluster_id is not None:
            self._not_found(cluster_id)
        return model

    def _not_found(self, cluster_id: str) -> None:
        raise tornado.web.HTTPError(
            404, f"No cluster with id {cluster_id!r}; list them at GET /eugo/clusters."
        )

    def _body(self) -> Any:
        try:
            return limits.parse_body(self.request.body)
        except OptionsError as exc:
            raise _bad_request(exc) from None


def _bad_request(exc: Exception) -> tornado.web.HTTPError:
    return tornado.web.HTTPError(400, str(exc))


class ClustersHandler(_Base):
    """``GET /eugo/clusters`` lists; ``POST /eugo/clusters`` launches or connects (201)."""

    @tornado.web.authenticated
    async def get(self) -> None:
        self._reply(await self.manager.list_clusters())

    @tornado.web.authenticated
    async def post(self) -> None:
        model = await self._answer(self.manager.create(self._body()))
        self.set_header("Location", url_path_join(self.base_url, "eugo", "clusters", model["id"]))
        self._reply(model, 201)


class PreviewHandler(_Base):
    """``POST /eugo/clusters/preview``: the plan (job scripts, commands) of a launch body."""

    @tornado.web.authenticated
    async def post(self) -> None:
        self._reply(await self._answer(self.manager.preview(self._body())))


class ProfilesHandler(_Base):
    """``GET /eugo/profiles``: the launch profiles the server's configuration offers."""

    @tornado.web.authenticated
    async def get(self) -> None:
        self._reply(self.manager.profiles())


class KindsHandler(_Base):
    """``GET /eugo/kinds``: each kind's facts (label, fields...; ``available`` for "allocation":
    whether the server runs inside a batch job), so the panel offers only what can run here."""

    @tornado.web.authenticated
    async def get(self) -> None:
        self._reply(self.manager.kinds())


class NodesHandler(_Base):
    """``POST /eugo/clusters/{id}/nodes`` adds a worker node (201 with the model);
    ``DELETE /eugo/clusters/{id}/nodes/{node}`` removes one (200 with the model)."""

    @tornado.web.authenticated
    async def post(self, cluster_id: str, node: str | None = None) -> None:
        if node:
            raise tornado.web.HTTPError(405, "POST adds a node: send it to .../nodes.")
        self._reply(await self._answer(self.manager.add_node(cluster_id), cluster_id), 201)

    @tornado.web.authenticated
    async def delete(self, cluster_id: str, node: str | None = None) -> None:
        if not node:
            raise tornado.web.HTTPError(400, "Name the node to remove: DELETE .../nodes/{job id}.")
        self._reply(await self._answer(self.manager.remove_node(cluster_id, node), cluster_id))


class ClusterHandler(_Base):
    """``GET /eugo/clusters/{id}`` reads; ``DELETE`` shuts down (or detaches) and answers 204.

    A found cluster (not started by the Manager) is only shut down with ``?confirm=true``; without
    it the answer is 409 with a sentence saying so.
    """

    @tornado.web.authenticated
    async def get(self, cluster_id: str) -> None:
        model = await self.manager.get_cluster(cluster_id)
        if model is None:
            self._not_found(cluster_id)
        self._reply(model)

    @tornado.web.authenticated
    async def delete(self, cluster_id: str) -> None:
        confirm = self.get_argument("confirm", "").lower() in ("1", "true", "yes")
        try:
            found = await self.manager.delete(cluster_id, confirm=confirm)
        except ConfirmationError as exc:  # a found cluster: not ours to stop unasked
            raise tornado.web.HTTPError(409, str(exc)) from None
        except ClusterError as exc:
            raise tornado.web.HTTPError(500, str(exc)) from None
        if not found:
            self._not_found(cluster_id)
        self.set_status(204)
        self.finish()


class ActivateHandler(_Base):
    """``POST /eugo/clusters/{id}/activate``: new kernels use this cluster."""

    @tornado.web.authenticated
    async def post(self, cluster_id: str) -> None:
        self._reply(await self._answer(self.manager.activate(cluster_id), cluster_id))


class LiveHandler(_Base):
    """``GET /eugo/clusters/{id}/live/{tasks|progress|nodes|gpus|failures}``: the live panes'
    data (:mod:`.live`), read by the server from Ray; the browser never reaches Ray's ports."""

    _VIEWS = ("tasks", "progress", "nodes", "gpus", "failures")

    @property
    def hub(self) -> LiveHub:
        return self.settings["eugo_live_hub"]  # type: ignore[no-any-return]

    @tornado.web.authenticated
    async def get(self, cluster_id: str, view: str) -> None:
        if view not in self._VIEWS:
            raise tornado.web.HTTPError(
                404, f"No live view {view!r}; the views are {', '.join(self._VIEWS)}."
            )
        try:
            since = parse_since(self.get_argument("since", None))
            limit = self.get_argument("limit", None)
            bounds = TASKS_LIMIT if view == "tasks" else FAILURES_LIMIT
            count = parse_limit(limit, bounds) if view in ("tasks", "failures") else 0
        except OptionsError as exc:
            raise _bad_request(exc) from None
        model = await self.manager.get_cluster(cluster_id)
        if model is None:
            self._not_found(cluster_id)
            return
        dashboard = None
        if view in ("nodes", "gpus") and model["status"] == "running":
            dashboard = await self.manager.dashboard_target(cluster_id)
        target = LiveTarget(cluster_id, dict(model), dashboard)
        if view == "tasks":
            reply = await self.hub.tasks(target, since, count)
        elif view == "failures":
            reply = await self.hub.failures(target, count)
        else:
            reply = await getattr(self.hub, view)(target)
        self.set_header("Cache-Control", "no-store")
        self._reply(reply)


class DashboardHandler(JupyterHandler):
    """``GET /eugo/clusters/{id}/dashboard/...``: Ray's dashboard, behind the server's auth.

    The server adds Ray's token, so the browser needs neither the token nor Ray's port.
    """

    _COPIED = ("Content-Type", "Cache-Control", "ETag", "Last-Modified", "Content-Disposition")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # Our own errors (unknown id, dashboard down) speak JSON like every other /eugo/ route;
        # Jupyter's default here would be an HTML page.
        exc = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(exc, "log_message", None) or self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message, "reason": self._reason}))

    @tornado.web.authenticated
    async def get(self, cluster_id: str, path: str | None) -> None:
        if not path:  # the dashboard's pages use relative links: they need the trailing slash
            self.redirect(self.request.path + "/")
            return
        path = path[1:]
        target = await self.settings["eugo_cluster_manager"].dashboard_target(cluster_id)
        if target is None:
            raise tornado.web.HTTPError(404, f"No cluster with id {cluster_id!r} has a dashboard.")
        if isinstance(target, str):  # a dashboard that may not receive the token: why not
            raise tornado.web.HTTPError(403, target)
        base, headers = target
        url = f"{base}/{path}" + (f"?{self.request.query}" if self.request.query else "")
        request = HTTPRequest(url, headers=headers, request_timeout=30, follow_redirects=False)
        response = await AsyncHTTPClient().fetch(request, raise_error=False)
        if response.code == 599:
            raise tornado.web.HTTPError(
                502, f"The cluster's dashboard does not answer: {response.error}"
            )
        self.set_status(response.code, response.reason)
        for name in self._COPIED:
            if name in response.headers:
                self.set_header(name, response.headers[name])
        self.finish(response.body or b"")


def setup_route_handlers(web_app: Any, manager: ClusterManager) -> None:
    """Mount the ``/eugo/`` routes on a Jupyter server's tornado application."""
    base_url = web_app.settings["base_url"]
    web_app.settings["eugo_cluster_manager"] = manager
    web_app.settings.setdefault("eugo_live_hub", LiveHub())
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base_url, "eugo", "clusters") + r"/?", ClustersHandler),
            (url_path_join(base_url, "eugo", "clusters", "preview") + r"/?", PreviewHandler),
            (url_path_join(base_url, "eugo", "profiles") + r"/?", ProfilesHandler),
            (url_path_join(base_url, "eugo", "kinds") + r"/?", KindsHandler),
            (url_path_join(base_url, "eugo", "clusters", _ID) + r"/?", ClusterHandler),
            (url_path_join(base_url, "eugo", "clusters", _ID, "activate") + r"/?", ActivateHandler),
            (
                url_path_join(base_url, "eugo", "clusters", _ID, "nodes") + f"(?:/{_JOB})?/?",
                NodesHandler,
            ),
            (
                url_path_join(base_url, "eugo", "clusters", _ID, "live") + r"/(?P<view>[a-z]+)/?",
                LiveHandler,
            ),
            (
                url_path_join(base_url, "eugo", "clusters", _ID, "dashboard") + "(?P<path>/.*)?",
                DashboardHandler,
            ),
        ],
    )
