"""After MEMORYHUB_LOGIN_FAILURE_LIMIT failed sign-ins for one user
name from one address, that pair is refused, even with the right password, with a clear
message on the sign-in page (429, never a 500); other users and addresses sign in."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

PASSWORD = "correct horse battery staple"
LOCKED = "Too many failed sign-ins for this user from your address"


@pytest.fixture
def users(django_user_model: Any) -> None:
    django_user_model.objects.create_user("olivia", password=PASSWORD)
    django_user_model.objects.create_user("mia", password=PASSWORD)


def sign_in(username: str, password: str, address: str = "203.0.113.10", client: Client | None = None) -> Any:
    return (client or Client()).post(
        "/login/", {"username": username, "password": password}, REMOTE_ADDR=address
    )


def fail_until_locked(username: str, address: str = "203.0.113.10") -> None:
    for _ in range(5):  # the default limit, MEMORYHUB_LOGIN_FAILURE_LIMIT
        refused = sign_in(username, "wrong password", address)
        assert refused.status_code in (200, 429)


def test_the_right_password_is_refused_after_five_wrong_ones(users: None) -> None:
    fail_until_locked("olivia")

    response = sign_in("olivia", PASSWORD)

    assert response.status_code == 429
    page = response.content.decode()
    assert LOCKED in page
    assert "Try again in 15 minutes" in page
    assert '<form method="post"' in page
    assert "_auth_user_id" not in response.client.session


def test_four_wrong_passwords_do_not_lock_and_success_clears_the_count(users: None) -> None:
    for _ in range(4):
        assert sign_in("olivia", "wrong password").status_code == 200

    assert sign_in("olivia", PASSWORD).status_code == 302
    for _ in range(4):
        assert sign_in("olivia", "wrong password").status_code == 200
    assert sign_in("olivia", PASSWORD).status_code == 302


def test_another_user_and_another_address_are_not_locked(users: None) -> None:
    fail_until_locked("olivia")

    assert sign_in("mia", PASSWORD).status_code == 302
    assert sign_in("olivia", PASSWORD, address="198.51.100.20").status_code == 302


def test_a_locked_out_sign_in_on_the_admin_gets_the_message_too(users: None) -> None:
    fail_until_locked("olivia")

    response = Client().post(
        "/admin/login/", {"username": "olivia", "password": PASSWORD}, REMOTE_ADDR="203.0.113.10"
    )

    assert response.status_code == 429
    assert LOCKED in response.content.decode()
