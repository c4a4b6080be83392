"""A host of its own on this machine, for the vanished-host tests: a network namespace joined to
this one by a veth pair, whose traffic can be dropped without a reset.

As root only (``ip netns add``). The pair is ``10.231.N.1`` here, ``10.231.N.2`` inside, one
``/30`` per namespace (``N`` from this process's pid, so two test runs do not meet). A cut is a
``blackhole`` queueing discipline on the sending end (``tc``): every packet that end sends is
dropped and its sender told nothing, as a pulled cable or a frozen VM does. No ``iptables`` or
``netem`` is needed. ``close()`` deletes the pair and the namespace whatever state they are in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

# Both ends of the pair, by who sends on them.
HOST_TO_NS, NS_TO_HOST = "host", "ns"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def why_not() -> str | None:
    """One line saying why no namespace can be made here, or None when one can."""
    if os.geteuid() != 0:
        return "not root: network namespaces need root (ip netns add)"
    for tool in ("ip", "tc", "ss"):
        if shutil.which(tool) is None:
            return f"no {tool} here: apt-get install iproute2"
    probe = Namespace.make(suffix="probe")
    try:
        probe.cut(HOST_TO_NS)
    except subprocess.CalledProcessError as exc:
        return f"tc cannot drop packets here ({exc.stderr.strip()})"
    finally:
        probe.close()
    return None


@dataclass
class Namespace:
    name: str
    host_dev: str
    ns_dev: str
    host_addr: str
    ns_addr: str

    @classmethod
    def make(cls, suffix: str = "") -> Namespace:
        """The namespace and its veth pair, both ends up, with a loopback inside."""
        n = os.getpid() % 250 + (1 if suffix else 0)
        tag = f"{os.getpid() % 100_000}{suffix[:1]}"
        made = cls(f"wq{tag}", f"wqh{tag}", f"wqn{tag}", f"10.231.{n}.1", f"10.231.{n}.2")
        made.close()  # what a run killed before its cleanup left
        try:
            _ip("netns", "add", made.name)
            _ip("link", "add", made.host_dev, "type", "veth", "peer", "name", made.ns_dev)
            _ip("link", "set", made.ns_dev, "netns", made.name)
            _ip("addr", "add", f"{made.host_addr}/30", "dev", made.host_dev)
            _ip("link", "set", made.host_dev, "up")
            _ip("-n", made.name, "addr", "add", f"{made.ns_addr}/30", "dev", made.ns_dev)
            _ip("-n", made.name, "link", "set", made.ns_dev, "up")
            _ip("-n", made.name, "link", "set", "lo", "up")
        except BaseException:
            made.close()
            raise
        return made

    @property
    def network(self) -> str:
        """Both ends' addresses, as a CIDR."""
        return self.host_addr.rsplit(".", 1)[0] + ".0/30"

    def command(self, *args: str) -> list[str]:
        """``args`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *args]

    def _tc(self, end: str, *args: str) -> None:
        if end == HOST_TO_NS:
            line = ["tc", "qdisc", *args[:1], "dev", self.host_dev, *args[1:]]
        else:
            line = self.command("tc", "qdisc", *args[:1], "dev", self.ns_dev, *args[1:])
        subprocess.run(line, capture_output=True, text=True, timeout=30, check=True)

    def cut(self, *ends: str) -> None:
        """Drop every packet sent on ``ends`` (``HOST_TO_NS``, ``NS_TO_HOST``), silently."""
        for end in ends:
            self._tc(end, "add", "root", "blackhole")

    def mend(self, *ends: str) -> None:
        """Let ``ends`` send again."""
        for end in ends:
            self._tc(end, "del", "root")

    def established(self, port: int) -> set[str]:
        """The local ends of the TCP connections established from inside to ``port`` here."""
        done = subprocess.run(
            self.command("ss", "-Htn", "state", "established", "dst", f"{self.host_addr}:{port}"),
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return {line.split()[2] for line in done.stdout.splitlines() if line.strip()}

    def close(self) -> None:
        """Delete the pair (both ends go together) and the namespace, if they exist."""
        _ip("link", "del", self.host_dev, check=False)
        _ip("netns", "del", self.name, check=False)
