import pytest

from textkit.case import camel_case, kebab_case, snake_case


@pytest.mark.parametrize(
    ("name", "snake"),
    [("HTTPServer", "http_server"), ("getX", "get_x"), ("already_snake", "already_snake"), ("Simple", "simple")],
)
def test_snake_case(name, snake):
    assert snake_case(name) == snake


def test_camel_case():
    assert camel_case("parse_http_response") == "parseHttpResponse"


def test_kebab_case():
    assert kebab_case("parseHTTPResponse2") == "parse-http-response-2"


def test_empty_names():
    assert snake_case("") == ""
    assert camel_case("") == ""
