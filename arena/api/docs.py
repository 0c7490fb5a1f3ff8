"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served from the package: they work offline.

FastAPI's own pages load their scripts from a CDN, so without network access they are
blank. These are the same pages (FastAPI's ``get_swagger_ui_html``/``get_redoc_html``)
pointing at copies under ``static/vendor/`` (see its README for versions and licenses),
with every other remote reference (favicon, Google fonts, the online spec validator)
turned off. The Content-Security-Policy's nonce of the request (:mod:`arena.web.security`)
goes on their ``<script>`` tags: Swagger UI starts from an inline script.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, swagger_ui_default_parameters
from fastapi.responses import HTMLResponse

VENDOR = "/static/vendor"
FAVICON = "/static/favicon.svg"


def docs_router(openapi_url: str, title: str) -> APIRouter:
    """The two documentation pages of the OpenAPI schema at ``openapi_url``."""
    router = APIRouter(include_in_schema=False)

    @router.get("/docs", response_class=HTMLResponse)
    def swagger_ui(request: Request) -> HTMLResponse:
        return _with_nonce(request, get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{title} - API docs",
            swagger_js_url=f"{VENDOR}/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url=f"{VENDOR}/swagger-ui/swagger-ui.css", swagger_favicon_url=FAVICON,
            swagger_ui_parameters={**swagger_ui_default_parameters, "validatorUrl": None},
        ))

    @router.get("/redoc", response_class=HTMLResponse)
    def redoc(request: Request) -> HTMLResponse:
        return _with_nonce(request, get_redoc_html(openapi_url=openapi_url, title=f"{title} - API reference",
                              redoc_js_url=f"{VENDOR}/redoc/redoc.standalone.js", redoc_favicon_url=FAVICON,
                              with_google_fonts=False))

    return router


def _with_nonce(request: Request, page: HTMLResponse) -> HTMLResponse:
    """``page`` with the request's CSP nonce on every ``<script>`` (none: unchanged)."""
    nonce = getattr(request.state, "csp_nonce", None)
    if nonce is None:
        return page
    html = page.body.decode().replace("<script", f'<script nonce="{nonce}"')
    return HTMLResponse(html, status_code=page.status_code)
