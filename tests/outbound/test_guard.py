"""The outbound guard: which addresses a request may go to, the one strict URL parser, and the
guarded HTTP client against real listener processes on 127.0.0.1 (tests/judges/openai_server.py).

Decisions about other addresses are tested as decisions only: the guard refuses before any
connection, and nothing here sends traffic anywhere but 127.0.0.1."""

import ipaddress
import re

import httpx2
import pytest
from django.core.exceptions import ImproperlyConfigured

from jobs.management.commands.run_platform import stop_process
from outbound.addresses import OutboundRefused, Policy, UnresolvableHost, address_kind, address_literal
from outbound.http import guarded_client
from outbound.targets import BadURL, parse_url
from tests.judges.conftest import start_chat_server

# Finding 2's 24 base URLs: loopback, private, link-local, shared, multicast, reserved,
# unspecified, the metadata services, and loopback written in every encoding a parser accepts.
REFUSED_BASE_URLS = [
    "http://127.0.0.1:8313/v1",
    "http://localhost:8313/v1",
    "http://[::1]:8313/v1",
    "http://0.0.0.0:8313/v1",
    "http://10.0.0.5/v1",
    "http://172.16.5.4/v1",
    "http://192.168.1.10/v1",
    "http://100.64.0.1/v1",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.100.100.200/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://[fe80::1]/v1",
    "http://224.0.0.1/v1",
    "http://240.0.0.1/v1",
    "http://[::]/v1",
    "http://[fc00::1]/v1",
    "http://2130706433:8313/v1",
    "http://0x7f000001:8313/v1",
    "http://0177.0.0.1:8313/v1",
    "http://127.1:8313/v1",
    "http://[::ffff:127.0.0.1]:8313/v1",
    "http://[::ffff:a9fe:a9fe]/latest/meta-data/",
    "http://[64:ff9b::7f00:1]:8313/v1",
]


def raw_host_and_port(url: str) -> tuple[str, int]:
    """The host as an HTTP client hands it to the network layer, past any URL parser's opinion."""
    authority = url.split("/")[2]
    if authority.startswith("["):
        host, _, port = authority[1:].partition("]")
        return host, int(port[1:] or 80)
    host, _, port = authority.partition(":")
    return host, int(port or 80)


@pytest.fixture
def listener(tmp_path):
    """A factory for real HTTP listener processes on 127.0.0.1; all stop at the end."""
    started = []

    def start(*args: str):
        started.append(start_chat_server(tmp_path, *args))
        return started[-1]

    yield start
    for server in started:
        stop_process(server.process)


# --- the decision -------------------------------------------------------------------------------


def test_all_24_base_urls_of_finding_2_are_refused_by_the_guard_and_by_the_parser(settings):
    settings.MARGINALIA_OUTBOUND_ALLOW = []
    assert len(REFUSED_BASE_URLS) == 24
    policy = Policy.from_settings()
    refused_by_parser = 0
    for url in REFUSED_BASE_URLS:
        with pytest.raises(OutboundRefused) as refusal:
            policy.addresses(*raw_host_and_port(url))
        assert "\n" not in str(refusal.value), url
        try:
            target = parse_url(url)
        except BadURL:
            refused_by_parser += 1  # the encoded forms: refused before any address is looked at
            continue
        with pytest.raises(OutboundRefused):
            policy.addresses(target.host, target.port)
    assert refused_by_parser == 4


@pytest.mark.parametrize(
    "host, kind",
    [
        ("127.0.0.1", "loopback"),
        ("2130706433", "loopback"),
        ("017700000001", "loopback"),
        ("0x7f.0.0.1", "loopback"),
        ("127.0.0.1.", "loopback"),
        ("::127.0.0.1", "loopback (IPv4 127.0.0.1 inside IPv6)"),
        ("2002:7f00:1::1", "loopback (IPv4 127.0.0.1 inside IPv6)"),
        ("::ffff:169.254.169.254", "cloud metadata (IPv4 169.254.169.254 inside IPv6)"),
        ("168.63.129.16", "cloud metadata"),
        ("0", "unspecified"),
        ("255.255.255.255", "reserved"),
        ("198.18.0.1", "private"),
        ("192.0.0.170", "private"),
    ],
)
def test_every_spelling_of_a_non_public_address_is_judged_as_that_address(host, kind):
    with pytest.raises(OutboundRefused, match=f"is an? {kind.split(' (')[0]}"):
        Policy().addresses(host, 80)
    assert address_kind(address_literal(host)) == kind


def test_numbers_that_are_no_address_are_refused_instead_of_being_sent_to_dns():
    for host in ("999.1.1.1", "1.2.3.4.5", "08.1.2.3", "0x1.0x100000000"):
        with pytest.raises(OutboundRefused, match="neither a host name nor an IPv4 address"):
            Policy().addresses(host, 80)


def test_public_addresses_pass_and_the_allow_list_admits_its_networks_and_names_but_never_metadata(settings):
    assert Policy().addresses("8.8.8.8", 443) == [ipaddress.ip_address("8.8.8.8")]
    assert Policy().addresses("2001:4860:4860::8888", 443)
    settings.MARGINALIA_OUTBOUND_ALLOW = ["10.0.5.0/24", "127.0.0.1", "llm.internal", "0.0.0.0/0", "::/0"]
    policy = Policy.from_settings()
    assert policy.addresses("10.0.5.9", 80) and policy.addresses("127.0.0.1", 80)
    assert policy.addresses("::ffff:127.0.0.1", 80)  # the allowed IPv4 address, written as IPv6
    for metadata in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "::ffff:a9fe:a9fe"):
        with pytest.raises(OutboundRefused, match="cloud metadata"):
            policy.addresses(metadata, 80)
    with pytest.raises(OutboundRefused, match="cloud metadata service"):
        policy.addresses("metadata.google.internal", 80)


def test_an_allowed_host_name_admits_what_it_resolves_to_and_nothing_else(settings):
    settings.MARGINALIA_OUTBOUND_ALLOW = ["localhost"]
    policy = Policy.from_settings()
    assert ipaddress.ip_address("127.0.0.1") in policy.addresses("localhost", 80)
    with pytest.raises(OutboundRefused, match=re.escape("127.0.0.1 is a loopback address")):
        policy.addresses("127.0.0.1", 80)


def test_webhooks_private_setting_adds_private_networks_but_not_link_local_or_metadata(settings):
    settings.MARGINALIA_OUTBOUND_ALLOW = []
    policy = Policy.from_settings(private_networks=True)
    for address in ("127.0.0.1", "10.1.2.3", "192.168.0.10", "fc00::1", "::1"):
        assert policy.addresses(address, 80)
    for address, kind in (("169.254.169.254", "cloud metadata"), ("fe80::1", "link-local"), ("0.0.0.0", "unspecified")):
        with pytest.raises(OutboundRefused, match=kind):
            policy.addresses(address, 80)


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "not a host", "http://x/", "a_b"])
def test_an_allow_list_entry_that_is_no_host_address_or_network_stops_the_process(settings, entry):
    settings.MARGINALIA_OUTBOUND_ALLOW = [entry]
    with pytest.raises(ImproperlyConfigured, match="MARGINALIA_OUTBOUND_ALLOW"):
        Policy.from_settings()


# --- the parser ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://127.0.0.1:8314\\@example.org/", "backslash"),
        ("http://example.org\\evil/", "backslash"),
        ("http://user:pass@example.org/", "user name or password"),
        ("http://@example.org/", "user name or password"),
        ("http://exa mple.org/", "spaces or control characters"),
        ("http://example.org/\thook", "spaces or control characters"),
        ("http://example.org/\x00", "spaces or control characters"),
        ("http://example.org/\x7f", "spaces or control characters"),
        (" http://example.org/", "spaces or control characters"),
        ("ftp://example.org/", "http:// or https://"),
        ("javascript:alert(1)", "http:// or https://"),
        ("http:example.org", "http:// or https://"),
        ("//example.org/", "http:// or https://"),
        ("http://example.org:0/", "port '0'"),
        ("http://example.org:65536/", "port '65536'"),
        ("http://example.org:/", "port ''"),
        ("http://example.org:8o/", "port '8o'"),
        ("http://example.org:٨٠/", "port"),
        ("http://example.org:+80/", "port '\\+80'"),
        ("http://xn--zz.example/", "not valid IDNA"),
        ("http://☃.example/", "not a valid international domain name"),
        ("http://exa\u200bmple.org/", "IDNA reads as others"),
        ("http://ｅxample.org/", "IDNA reads as others"),
        ("http://a_b.example/", "not a valid host name"),
        ("http://-a.example/", "not a valid host name"),
        ("http://a..example/", "not a valid host name"),
        ("http://example.org./", "not a valid host name"),
        ("http:///hook", "has no host"),
        ("http://exam%70le.org/", "must not %-encode its host"),
        ("http://2130706433/", "four decimal numbers"),
        ("http://127.000.000.001/", "four decimal numbers"),
        ("http://example.123/", "four decimal numbers"),
        ("http://[fe80::1%25eth0]/", "zone identifiers"),
        ("http://[::1/", "unclosed"),
        ("http://[::1]x/", "after the bracketed address"),
        ("http://[1.2.3.4]/", "not a valid IPv6 address"),
        ("http://::1/", "IPv6 addresses must be written in brackets"),
        ("http://example.org/#fragment", "fragment"),
        ("http://example.org/a%zz", "%"),
        ("http://example.org/<script>", "RFC 3986"),
        ("http://example.org/ünïcode", "RFC 3986"),
        ("http://example.org/" + "a" * 2000, "at most 2000 characters"),
        (None, "as text"),
    ],
)
def test_the_strict_parser_refuses_every_odd_url_with_one_line(url, reason):
    with pytest.raises(BadURL, match=reason) as refusal:
        parse_url(url)
    assert "\n" not in str(refusal.value)


@pytest.mark.parametrize(
    "url, normalised",
    [
        ("HTTP://Example.ORG:80", "http://example.org/"),
        ("https://example.org:443/v1", "https://example.org/v1"),
        ("http://example.org:8080?x=1", "http://example.org:8080/?x=1"),
        ("http://Bücher.example/hook", "http://xn--bcher-kva.example/hook"),
        ("http://[0:0:0:0:0:0:0:1]:8313/v1", "http://[::1]:8313/v1"),
        ("https://api.openai.com/v1/", "https://api.openai.com/v1/"),
        ("http://example.org/a%2Fb;c=d@e", "http://example.org/a%2Fb;c=d@e"),
    ],
)
def test_what_the_parser_accepts_it_normalises_so_one_url_is_checked_stored_and_requested(url, normalised):
    assert parse_url(url).url == normalised
    assert parse_url(normalised).url == normalised


# --- the guarded client against real listeners ----------------------------------------------------


def post(client: httpx2.Client, url: str, **options) -> httpx2.Response:
    return client.post(url, json={"messages": []}, **options)


def test_a_refused_address_is_never_connected_to(listener, settings):
    settings.MARGINALIA_OUTBOUND_ALLOW = []
    server = listener("--answer", "SCORE: 1")
    # (0177.0.0.1 never gets this far: httpx2's own parser refuses a dotted quad with leading zeros.)
    for host in ("127.0.0.1", "localhost", "2130706433", "0x7f000001", "127.1", "0x7f.1", "[::ffff:127.0.0.1]"):
        with guarded_client(Policy.from_settings(), timeout=5) as client, pytest.raises(OutboundRefused):
            post(client, f"http://{host}:{server.port}/v1/chat/completions")
    assert server.requests() == []


def test_an_allowed_local_model_server_is_reached(listener, settings):
    settings.MARGINALIA_OUTBOUND_ALLOW = ["127.0.0.1"]
    server = listener("--answer", "SCORE: 1")
    with guarded_client(Policy.from_settings(), timeout=5) as client:
        response = post(client, f"{server.base_url}/chat/completions")
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == "SCORE: 1"
    assert [request["status"] for request in server.requests()] == [200]


def test_redirects_are_not_followed_and_a_followed_one_is_checked_again_at_every_hop(listener, settings):
    settings.MARGINALIA_OUTBOUND_ALLOW = ["localhost"]  # by name: 127.0.0.1 itself stays refused
    target = listener("--answer", "SCORE: 1")
    redirecting = listener("--status", "302", "--location", f"http://127.0.0.1:{target.port}/v1/chat/completions")
    url = f"http://localhost:{redirecting.port}/v1/chat/completions"
    with guarded_client(Policy.from_settings(), timeout=5) as client:
        answered = post(client, url)
        with pytest.raises(OutboundRefused, match=re.escape("127.0.0.1 is a loopback address")):
            post(client, url, follow_redirects=True)
    assert answered.status_code == 302
    assert len(redirecting.requests()) == 2 and target.requests() == []


def test_the_connection_goes_to_the_address_that_was_checked_with_no_second_lookup(listener):
    """A name that resolves to an allowed address when checked and to another one a moment
    later (DNS rebinding) gains nothing: the guard resolves once per connection and connects to
    what it checked. The resolver here is a scripted DNS answer: nothing leaves 127.0.0.1."""
    server = listener("--answer", "SCORE: 1")
    answers = {"model.test": [[ipaddress.ip_address("127.0.0.1")], [ipaddress.ip_address("10.9.9.9")]]}
    lookups = []

    def rebinding_resolver(host: str, port: int):
        lookups.append(host)
        return answers[host].pop(0)

    policy = Policy(networks=(ipaddress.ip_network("127.0.0.1/32"),), resolver=rebinding_resolver)
    with guarded_client(policy, timeout=5) as client:
        response = post(client, f"http://model.test:{server.port}/v1/chat/completions")
    with guarded_client(policy, timeout=5) as client, pytest.raises(OutboundRefused, match=re.escape("10.9.9.9")):
        post(client, f"http://model.test:{server.port}/v1/chat/completions")
    assert response.status_code == 200 and lookups == ["model.test", "model.test"]
    assert [request["host"] for request in server.requests()] == [f"model.test:{server.port}"]


def test_a_name_that_resolves_to_one_refused_address_among_allowed_ones_is_refused(listener):
    server = listener("--answer", "SCORE: 1")
    policy = Policy(
        networks=(ipaddress.ip_network("127.0.0.1/32"),),
        resolver=lambda host, port: [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("169.254.169.254")],
    )
    with guarded_client(policy, timeout=5) as client, pytest.raises(OutboundRefused) as refused:
        post(client, f"http://model.test:{server.port}/v1/chat/completions")
    assert "resolves to 169.254.169.254, which is a cloud metadata address" in str(refused.value)
    assert server.requests() == []


def test_a_proxy_in_the_environment_is_not_used(listener, settings, monkeypatch):
    settings.MARGINALIA_OUTBOUND_ALLOW = ["127.0.0.1"]
    server, proxy = listener("--answer", "SCORE: 1"), listener("--answer", "PROXIED")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
    with guarded_client(Policy.from_settings(), timeout=5) as client:
        response = post(client, f"{server.base_url}/chat/completions")
    assert response.json()["choices"][0]["message"]["content"] == "SCORE: 1"
    assert proxy.requests() == [] and len(server.requests()) == 1


def test_a_host_that_does_not_resolve_is_a_connection_error_to_retry_not_a_refusal():
    def nothing(host, port):
        raise UnresolvableHost(f"cannot resolve {host}")

    with guarded_client(Policy(resolver=nothing), timeout=5) as client, pytest.raises(httpx2.ConnectError):
        post(client, "http://model.test/v1/chat/completions")
