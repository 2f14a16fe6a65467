"""The redactor: every form of a held secret replaced by its marker, in a whole text and in a
stream however it is cut into chunks; short values and unrelated text left alone."""

from __future__ import annotations

import pytest

from adapters.redact import MIN_LENGTH, Redactor, marker

CREDENTIAL = "wc-7f3a9c2e41d0"
TOKEN = "op-5b8d0e6f93aa1c"
DB = "postgresql://t25:p%40ss-w0rd-91@db.example/t25"
HELD = {
    "FACTORY_WORKER_CREDENTIAL": CREDENTIAL,
    "T25_OPERATOR_TOKEN": TOKEN,
    "T25_DATABASE_URL": DB,
}
WORKER_MARK = b"[t25: redacted FACTORY_WORKER_CREDENTIAL]"


def test_each_held_value_is_replaced_by_a_marker_naming_it():
    text = f"cred={CREDENTIAL} token={TOKEN} url={DB}".encode()
    assert Redactor(HELD).redact(text) == (
        b"cred=" + WORKER_MARK + b" token=[t25: redacted T25_OPERATOR_TOKEN]"
        b" url=[t25: redacted T25_DATABASE_URL]"
    )


def test_the_database_password_is_redacted_as_written_and_decoded():
    redacted = Redactor(HELD).redact(b"a p%40ss-w0rd-91 b p@ss-w0rd-91 c")
    password = marker("T25_DATABASE_URL password")
    assert redacted == b"a " + password + b" b " + password + b" c"


def test_a_value_inside_a_json_string_is_redacted_in_its_escaped_form():
    odd = 'quo"te\\back-slash'
    redactor = Redactor({"T25_OPERATOR_TOKEN": odd})
    assert redactor.redact(b'{"text": "quo\\"te\\\\back-slash"}') == (
        b'{"text": "[t25: redacted T25_OPERATOR_TOKEN]"}'
    )


def test_a_short_value_is_not_redacted():
    short = "x" * (MIN_LENGTH - 1)
    assert Redactor({"T25_OPERATOR_TOKEN": short}).redact(short.encode()) == short.encode()


def test_without_secrets_output_passes_unchanged():
    stream = Redactor({}).stream()
    assert stream.feed(b"abc") == b"abc" and stream.flush() == b""


def streamed(redactor: Redactor, chunks: list[bytes]) -> bytes:
    stream = redactor.stream()
    return b"".join(stream.feed(chunk) for chunk in chunks) + stream.flush()


def test_a_secret_cut_at_any_point_between_two_chunks_is_redacted():
    redactor = Redactor(HELD)
    text = f"before {CREDENTIAL} middle {DB} after".encode()
    whole = redactor.redact(text)
    for cut in range(len(text) + 1):
        assert streamed(redactor, [text[:cut], text[cut:]]) == whole, cut


def test_a_secret_fed_one_byte_at_a_time_is_redacted():
    redactor = Redactor(HELD)
    text = f"{TOKEN}{CREDENTIAL}\n{TOKEN}".encode()
    out = streamed(redactor, [bytes([b]) for b in text])
    assert out == redactor.redact(text)
    assert CREDENTIAL.encode() not in out and TOKEN.encode() not in out


@pytest.mark.parametrize("cut", [3, 5, 9])
def test_no_fed_piece_ever_holds_the_secret_and_nothing_else_is_lost(cut):
    redactor = Redactor(HELD)
    text = b"x" * 100 + CREDENTIAL.encode() + b"y" * 100
    stream = redactor.stream()
    pieces = [stream.feed(text[i : i + cut]) for i in range(0, len(text), cut)]
    pieces.append(stream.flush())
    assert all(CREDENTIAL.encode() not in piece for piece in pieces)
    assert b"".join(pieces) == b"x" * 100 + WORKER_MARK + b"y" * 100
