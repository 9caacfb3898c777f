"""POST /api/v1/subscribe: a double opt-in sign-up for an application (service/subscribers/optin.py).

The answer is 202 and the same whatever the address's state (new, unconfirmed, confirmed, suppressed) and
whether a confirmation went out, and is sent no sooner than optin.FLOOR_SECONDS after the route began: the
caller learns nothing of who is subscribed, from the answer or its time. A list whose sign-ups its account
has not opened (`PUT /lists/{name}/form`) is 409. A key past EINMAL_OPTIN_CLIENT_LIMIT sign-ups in the
current hour is 429, counted in PostgreSQL for all nodes together."""

import time
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from service import clients
from service.api.deps import ERRORS, Conn, Key, Problem, SignUpsConfig, log
from service.subscribers import optin, texts
from service.text import MAX_EMAIL, MAX_LIST, MAX_NAME

router = APIRouter(tags=["double opt-in"])
ANSWER = "if the address can be subscribed, a message asking to confirm is on its way"


class SubscribeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    list: str = Field(min_length=1, max_length=MAX_LIST, description="the name of one of the account's lists")
    email: str = Field(min_length=1, max_length=MAX_EMAIL)
    name: str = Field("", max_length=MAX_NAME, description="used only when the address is new to the account")


class SubscribeAnswer(BaseModel):
    status: Literal["pending"]
    detail: str


Answer = Annotated[SubscribeAnswer, Field(description=ANSWER)]


@router.post(
    "/subscribe",
    operation_id="subscribe",
    status_code=202,
    responses={**ERRORS, 409: {"model": Problem}, 429: {"model": Problem}},
    summary="sign an address up to a list; it is on the list once it confirms (double opt-in)",
)
async def subscribe(body: SubscribeRequest, conn: Conn, key: Key, signups: SignUpsConfig) -> SubscribeAnswer:
    started = time.monotonic()
    email, name = optin.checked_address(body.email, body.name)
    found = await optin.open_list(conn, signups.mailing, account_id=key.account_id, list_name=body.list)
    counted = await clients.hit(conn, optin.KEY_KIND, f"key:{key.id}", optin.HOUR)
    if counted.hits > signups.client_limit:
        raise HTTPException(
            429, "too many sign-ups from this key; try again later", headers={"Retry-After": counted.retry_after()}
        )
    queued = await optin.sign_up(
        conn,
        signups,
        optin.SignUp(
            found.id,
            key.account_id,
            email,
            name,
            f"api:{key.id}",
            optin.own_wording(texts.confirmation(found.language), found.subject, found.text),
            found.from_address,
        ),
    )
    log.info("sign-up to list %d by key %d: %s", found.id, key.id, "confirmation queued" if queued else "nothing sent")
    await optin.pad(started)  # holds the request's connection meanwhile: at most the key's limit an hour
    return SubscribeAnswer(status="pending", detail=ANSWER)
