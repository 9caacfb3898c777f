"""Every route of the API and every dependency it solves is a coroutine: FastAPI runs a plain function's in a
worker thread (fastapi/dependencies/utils.py `run_in_threadpool`), a hop to another thread and back for each
request, which a loaded node pays in milliseconds (service/api/deps.py)."""

import inspect

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from service.api import app as api_app
from service.settings import Settings


def _calls(dependant: Dependant):
    for sub in dependant.dependencies:
        if sub.call is not None:
            yield sub.call
        yield from _calls(sub)


def _awaited(call) -> bool:
    if inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call):
        return True
    # an instance called as the dependency (HTTPBearer): its class's __call__
    return not inspect.isfunction(call) and inspect.iscoroutinefunction(type(call).__call__)


def test_no_route_or_dependency_of_the_api_runs_in_a_worker_thread() -> None:
    app = api_app.api(None, Settings(database_url="postgresql://einmal@127.0.0.1/einmal"))  # type: ignore[arg-type]
    routers = [getattr(r, "original_router", None) for r in app.routes]
    routes = [r for router in routers if router is not None for r in router.routes if isinstance(r, APIRoute)]
    assert len(routes) > 50  # the whole API, not a part of it
    plain = sorted(
        {
            f"{r.path}: {getattr(c, '__qualname__', type(c).__name__)}"
            for r in routes
            for c in (r.endpoint, *_calls(r.dependant))
            if not _awaited(c)
        }
    )
    assert plain == []
