"""Every route that takes an id answers 404 for a number no database id can be, whatever the
caller (schemathesis once sent study 8410666585986185560064 to the screen-out route: SQLite
raised OverflowError inside a foreign-key lookup, a 500)."""

import re

import pytest

from marginalia.converters import LARGEST_ID
from tests.factories import make_user
from tests.routes import routes

pytestmark = pytest.mark.django_db

ID = re.compile(r"<id:(\w+)>")
OTHER = re.compile(r"<(?:str|slug):\w+>")


def id_routes() -> list[str]:
    return [template for _, template in routes() if ID.search(template)]


def test_the_routes_name_their_ids_with_the_id_converter():
    assert len(id_routes()) > 40
    assert not [template for _, template in routes() if "<int:" in template]


@pytest.mark.parametrize("number", [LARGEST_ID + 1, 10**22], ids=["just past 64 bits", "far past"])
def test_an_id_no_database_can_hold_is_not_found_on_every_route(client, number):
    client.force_login(make_user("staff-prober", staff=True))
    for template in id_routes():
        path = "/" + OTHER.sub("p1", ID.sub(str(number), template))
        for method in ("get", "post"):
            response = getattr(client, method)(path, {})
            assert response.status_code == 404, f"{method.upper()} {path} answered {response.status_code}"


def test_the_largest_id_a_database_holds_reaches_the_view_and_is_not_found_there(client):
    client.force_login(make_user("staff-prober", staff=True))
    assert client.get(f"/api/studies/{LARGEST_ID}/crowd-link/").status_code == 404
    assert client.post(f"/api/studies/{LARGEST_ID}/participants/p1/screen-out/", {}).status_code == 404
