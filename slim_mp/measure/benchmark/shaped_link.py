"""A network link of a given bandwidth on this machine: a network namespace joined by a veth pair, shaped by ``tc``.

The cluster benchmark (``cluster_suite``) runs its parameter server inside the namespace, so every
byte between the worker (this process, in the root namespace) and the parameter server crosses the
veth pair, whose two ends each carry a token-bucket filter (``tc qdisc ... tbf rate``): a full-duplex
link of ``gbits`` Gbit/s each way, as between two machines on one switch.

Plumbing, with the commands an operator would type (``ip``, ``tc``); it needs root (or
CAP_NET_ADMIN) and the ``ip`` and ``tc`` tools. Where the machine refuses any step, ``ShapedLink``
undoes what it made and raises ``ShapedLinkRefused`` with the command and the system's own words.
Every name carries this process's pid, and the two addresses are a private /30 chosen from it, so
runs in parallel do not collide; ``__exit__`` removes the pair and the namespace whatever ended the
block (an error, Ctrl-C, SIGTERM turned into an exception).
"""

import dataclasses
import os
import shutil
import subprocess
import time
from typing import List, Sequence

from slim_mp.config_fields import ArgumentError, argument

# The private 10.213.0.0/16 block, cut into /30s: one per pid (modulo the 16384 of them).
_NETWORK_PREFIX = (10, 213)
_SUBNETS = 2 ** 14
_COMMAND_SECONDS = 30.0
# The token bucket: up to 1 ms of the rate in one burst (at least 64 KiB, so a segmentation-offloaded packet fits),
# and packets queue for at most this long before the bucket drops them (TCP then slows down, as on a real link).
_BURST_SECONDS = 0.001
_MIN_BURST_BYTES = 64 * 1024
_QUEUE_MS = 50
_GONE_SECONDS = 5.0


class ShapedLinkRefused(RuntimeError):
    """The machine does not let this process make the link (not root, no ``ip``/``tc``, no namespaces)."""


@dataclasses.dataclass(frozen=True)
class LinkNames:
    """What a shaped link of one process is called: its namespace, the two ends of the veth pair and their addresses."""

    namespace: str
    root_device: str
    namespace_device: str
    root_address: str
    namespace_address: str


def link_names(pid: int) -> LinkNames:
    """The names and the /30 of process ``pid``'s link (device names stay within Linux's 15 characters)."""
    subnet = pid % _SUBNETS
    prefix = f"{_NETWORK_PREFIX[0]}.{_NETWORK_PREFIX[1]}.{subnet >> 6}"
    first = (subnet & 63) * 4  # the /30's network address; .1 and .2 of it are its two hosts
    return LinkNames(namespace=f"slim_mp_link_{pid}", root_device=f"smr{pid}", namespace_device=f"smn{pid}",
                     root_address=f"{prefix}.{first + 1}", namespace_address=f"{prefix}.{first + 2}")


def check_link_gbits(gbits: float) -> float:
    """``gbits`` if it is a positive number of Gbit/s; ArgumentError naming ``link_gbits`` otherwise."""
    if isinstance(gbits, bool) or not isinstance(gbits, (int, float)) or not 0 < gbits < float("inf"):
        raise ArgumentError(f"{argument('link_gbits')}={gbits!r} is not a positive bandwidth; pass the link's "
                            "Gbit/s each way, e.g. 1 or 0.5.")
    return float(gbits)


def token_bucket(gbits: float) -> List[str]:
    """The ``tc qdisc add`` arguments after the device: a token-bucket filter of ``gbits`` Gbit/s."""
    rate_bits = int(round(gbits * 1e9))
    burst = max(int(rate_bits / 8 * _BURST_SECONDS), _MIN_BURST_BYTES)
    return ["root", "tbf", "rate", f"{rate_bits}bit", "burst", str(burst), "latency", f"{_QUEUE_MS}ms"]


def namespace_exists(namespace: str) -> bool:
    """True while network namespace ``namespace`` exists (``ip netns list`` names it)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=_COMMAND_SECONDS)
    return any(line.split()[0] == namespace for line in listed.stdout.splitlines() if line.strip())


def device_exists(device: str) -> bool:
    """True while network device ``device`` exists in this (the root) namespace."""
    return subprocess.run(["ip", "link", "show", "dev", device], capture_output=True,
                          timeout=_COMMAND_SECONDS).returncode == 0


def _run(command: Sequence[str]) -> None:
    """Run ``command``; ShapedLinkRefused with the command and its error output when it fails."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=_COMMAND_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ShapedLinkRefused(f"`{' '.join(command)}` could not run: {error}") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        raise ShapedLinkRefused(f"`{' '.join(command)}` failed: {said}")


class ShapedLink:
    """A namespace joined to this one by a veth pair shaped to ``gbits`` Gbit/s each way, for the ``with`` block.

    ``names`` says where each end is; ``in_namespace(command)`` is ``command`` run inside the namespace.
    """

    def __init__(self, gbits: float, pid: int = 0) -> None:
        self.gbits = check_link_gbits(gbits)
        self.names = link_names(pid or os.getpid())
        self._made = {"namespace": False, "pair": False}  # what this link made, and so removes (nothing else)

    def in_namespace(self, command: Sequence[str]) -> List[str]:
        """``command`` run inside the link's namespace (``ip netns exec`` executes it in place: same pid)."""
        return ["ip", "netns", "exec", self.names.namespace, *command]

    def __enter__(self) -> "ShapedLink":
        missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
        if missing:
            raise ShapedLinkRefused(f"no {' or '.join(missing)} command on this machine (package iproute2)")
        if hasattr(os, "geteuid") and os.geteuid() != 0:
            raise ShapedLinkRefused("network namespaces and tc need root (this process runs as uid "
                                    f"{os.geteuid()})")
        names = self.names
        rate = token_bucket(self.gbits)
        try:
            _run(["ip", "netns", "add", names.namespace])
            self._made["namespace"] = True
            _run(["ip", "link", "add", names.root_device, "type", "veth", "peer", "name", names.namespace_device])
            self._made["pair"] = True
            _run(["ip", "link", "set", names.namespace_device, "netns", names.namespace])
            _run(["ip", "addr", "add", f"{names.root_address}/30", "dev", names.root_device])
            _run(["ip", "link", "set", names.root_device, "up"])
            _run(self.in_namespace(["ip", "addr", "add", f"{names.namespace_address}/30", "dev",
                                    names.namespace_device]))
            _run(self.in_namespace(["ip", "link", "set", names.namespace_device, "up"]))
            _run(self.in_namespace(["ip", "link", "set", "lo", "up"]))
            _run(["tc", "qdisc", "add", "dev", names.root_device, *rate])
            _run(self.in_namespace(["tc", "qdisc", "add", "dev", names.namespace_device, *rate]))
        except BaseException:
            self.tear_down()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.tear_down()

    def tear_down(self) -> None:
        """Remove the veth pair and the namespace this link made (the kernel removes the queues with them).

        Deleting one end of a veth pair deletes both (the one moved into the namespace goes with it too);
        a namespace is removed in the background, so this waits (a few seconds at most) until neither is
        listed. Raises RuntimeError if one is still there.
        """
        names = self.names
        pair, namespace = self._made["pair"], self._made["namespace"]
        if pair and device_exists(names.root_device):
            subprocess.run(["ip", "link", "del", names.root_device], capture_output=True, timeout=_COMMAND_SECONDS)
        if namespace:
            subprocess.run(["ip", "netns", "del", names.namespace], capture_output=True, timeout=_COMMAND_SECONDS)
        self._made = {"namespace": False, "pair": False}
        deadline = time.monotonic() + _GONE_SECONDS
        while (pair and device_exists(names.root_device)) or (namespace and namespace_exists(names.namespace)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the shaped link's namespace {names.namespace} or device {names.root_device} is "
                                   f"still there after {_GONE_SECONDS:g} s; remove them with `ip netns del "
                                   f"{names.namespace}` and `ip link del {names.root_device}`.")
            time.sleep(0.1)
