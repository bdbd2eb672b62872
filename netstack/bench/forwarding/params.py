"""The numbers of ``netstack bench forwarding``: the paths, sizes and rounds, the goal, the test
frames' addresses, the emulated links, the waits, and the Linux socket constants used."""

from __future__ import annotations

#: Paths in the order they are measured; ``--only`` selects among them by substring.
PATHS = ("bare", "bridge", "switch1", "switch2")
PATH_LABELS = {
    "bare": "bare Python forwarder",
    "bridge": "Linux bridge",
    "switch1": "1 switch daemon",
    "switch2": "2 switch daemons",
}
DEFAULT_SIZES = (64, 1500)
DEFAULT_DURATION_S = 3.0
#: Rounds per run: this VM's forwarding rates vary by +-20 % from one measurement to the next
#: (measured), so every path is measured this many times, alternating, and medians reported.
DEFAULT_ROUNDS = 3
#: The goal (issue 19): one switch daemon forwards at least as fast as the bare Python forwarder
#: (batched ring I/O beats a per-packet recv/send loop), measured in the same run.
GOAL_RATIO = 1.0
#: Documented, not measured here (no P4 toolchain on this machine): BMv2 simple_switch's
#: forwarding rate as its maintainers and docs/architecture.md ("The live runtime") quote it, for scale.
BMV2_REFERENCE = {
    "frames_per_s_low": 80_000,
    "frames_per_s_high": 100_000,
    "what": "BMv2 simple_switch (P4 behavioural model), documented rate; NOT measured in this run",
    "source": "p4lang/behavioral-model performance notes; docs/architecture.md 'The live runtime'",
}

#: Smallest / largest frame we can send: Ethernet + IPv4 + UDP headers; MTU 1500 + Ethernet.
MIN_SIZE = 42
MAX_SIZE = 1514
UDP_PORT = 47_999
SUBNET = "10.77.0"
GEN_IP = f"{SUBNET}.1"
SINK_IP = f"{SUBNET}.2"
#: Destination IP of the test frames: in the subnet but assigned to nobody, so the sink's
#: kernel drops them silently (forwarding is off in the namespace: no ICMP goes back through
#: the device under test). The destination MAC is the sink's, so switches forward by FDB.
TARGET_IP = f"{SUBNET}.99"
#: Emulated links of the switch topologies: fast enough that the pacer is never the limit
#: (an 84-byte frame takes 6.7 ns), no propagation delay, a buffer far above one batch.
LINK_RATE = "100Gbit"
LINK_BUFFER = "64MB"
#: Frames still in flight when the generator stops get this long to arrive.
DRAIN_S = 0.3
#: The switch daemon folds PACKET_STATISTICS into its counters once per second.
STATS_WAIT_S = 1.2
GEN_BATCH = 256
#: Loss above which the device under test (not the generator) limited the rate.
SATURATION_LOSS = 0.01

SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
SO_ATTACH_FILTER = 26
ETH_P_ALL = 0x0003
MSG_DONTWAIT = 0x40
