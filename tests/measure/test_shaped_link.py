"""The shaped link: its names and its token bucket, then the real thing where the machine allows it.

Where this process may make network namespaces (root, ``ip`` and ``tc``), a link is made, bytes go
through it to a receiver inside the namespace no faster than its rate, and nothing is left behind;
where the machine refuses, those tests skip with the machine's reason.
"""

import ipaddress
import os
import socket
import subprocess
import sys
import time

import pytest

from slim_mp.config_fields import ArgumentError
from slim_mp.measure.benchmark.shaped_link import (ShapedLink, ShapedLinkRefused, check_link_gbits, device_exists,
                                                   link_names, namespace_exists, token_bucket)

# Reads until its sender closes, then prints how many bytes came.
_RECEIVER = """
import socket, sys
server = socket.socket()
server.bind((sys.argv[1], 0))
server.listen(1)
print(server.getsockname()[1], flush=True)
connection, _ = server.accept()
total = 0
while True:
    chunk = connection.recv(1 << 16)
    if not chunk:
        break
    total += len(chunk)
print(total, flush=True)
"""
RATE_GBITS = 0.04  # 5 MB/s: 2 MB take 0.4 s
PAYLOAD_BYTES = 2_000_000


@pytest.mark.parametrize("pid", [1, 4242, 4194304, 2 ** 22 - 1])
def test_link_names_fit_linux_and_the_two_ends_share_one_private_30(pid):
    names = link_names(pid)
    assert len(names.root_device) <= 15 and len(names.namespace_device) <= 15
    root, inside = ipaddress.ip_address(names.root_address), ipaddress.ip_address(names.namespace_address)
    network = ipaddress.ip_network(f"{names.root_address}/30", strict=False)
    assert inside in network and root.is_private and {root, inside} == set(network.hosts())
    assert str(pid) in names.namespace


def test_two_processes_get_different_names_and_addresses():
    first, second = link_names(4242), link_names(4243)
    assert len({first.namespace, second.namespace, first.root_address, second.root_address}) == 4


def test_the_token_bucket_has_the_rate_in_bits_and_a_burst_of_a_millisecond_or_64_kib():
    assert token_bucket(1) == ["root", "tbf", "rate", "1000000000bit", "burst", "125000", "latency", "50ms"]
    assert token_bucket(0.01)[5] == str(64 * 1024)


@pytest.mark.parametrize("gbits", [0, -1.0, float("nan"), float("inf"), True, "1"])
def test_a_bandwidth_that_is_not_positive_is_an_argument_error(gbits):
    with pytest.raises(ArgumentError, match="link_gbits"):
        check_link_gbits(gbits)


@pytest.fixture
def shaped_link():
    """A link of ``RATE_GBITS`` for the test, or a skip with the machine's reason."""
    try:
        with ShapedLink(RATE_GBITS) as link:
            yield link
    except ShapedLinkRefused as refused:
        pytest.skip(f"the machine refuses a shaped link: {refused}")
    assert not namespace_exists(link.names.namespace) and not device_exists(link.names.root_device)


def test_bytes_cross_the_link_no_faster_than_its_rate(shaped_link):
    receiver = subprocess.Popen(shaped_link.in_namespace([sys.executable, "-c", _RECEIVER,
                                                          shaped_link.names.namespace_address]),
                                stdout=subprocess.PIPE, text=True)
    try:
        port = int(receiver.stdout.readline())
        started = time.perf_counter()
        with socket.create_connection((shaped_link.names.namespace_address, port), timeout=30) as sock:
            sock.sendall(b"x" * PAYLOAD_BYTES)
        received = int(receiver.stdout.readline())
        seconds = time.perf_counter() - started
    finally:
        receiver.kill()
        receiver.wait()
    assert received == PAYLOAD_BYTES
    # A lower bound only (a loaded machine is slower, never faster): the bucket's burst lets 64 KiB through at once.
    assert seconds >= 0.8 * PAYLOAD_BYTES * 8 / (RATE_GBITS * 1e9), seconds


def test_an_error_inside_the_block_still_removes_the_link(shaped_link):
    link = ShapedLink(RATE_GBITS, pid=os.getpid() + 1)  # beside the fixture's (this pid's)
    with pytest.raises(RuntimeError, match="inside"):
        with link:
            assert namespace_exists(link.names.namespace)
            raise RuntimeError("inside")
    assert not namespace_exists(link.names.namespace) and not device_exists(link.names.root_device)


def test_a_link_whose_names_are_taken_is_refused_and_leaves_the_other_alone(shaped_link):
    with pytest.raises(ShapedLinkRefused, match="ip netns add"):
        with ShapedLink(RATE_GBITS, pid=os.getpid()):
            pass
    assert namespace_exists(shaped_link.names.namespace) and device_exists(shaped_link.names.root_device)
