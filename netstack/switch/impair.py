"""The 'switch' impairment backend: seeded Bernoulli / Gilbert-Elliott loss and corruption.

The live testbed (docs/architecture.md "The live runtime") injects corruption in the kernel
(netem or nft) on the veth; this model does the same inside the switch, on a port's egress,
so that an experiment is reproducible bit for bit from its seed and runs on any kernel.
Corruption overwrites one byte with a *different* value: a single-byte error is a burst
shorter than 32 bits, which CRC32 always detects, so the peer's software FCS check drops
every corrupted frame and counts it as an FCS error — corruption becomes corruption loss, as
on the links of LinkGuardian §2.

The model is consulted once per frame on the wire (data, PFC and idle frames alike: a
corrupting link does not choose what it corrupts).

A frame that survives can then be *shaped* as tc-netem(8) shapes it (:meth:`Impairment.hold_ns`,
:meth:`Impairment.duplicates`): an extra delay with uniform jitter, netem's ``reorder`` (a
frame sent at once past the held ones) and duplication. A link configured without them draws
no extra random numbers, so the loss/corruption stream of a seed is what it always was.
"""

from __future__ import annotations

import random
from enum import IntEnum

from .config import ImpairmentConfig


class Verdict(IntEnum):
    DELIVER = 0
    LOSE = 1
    CORRUPT = 2


class Impairment:
    """One port's egress impairment, with its own seeded generator."""

    __slots__ = ("_rng", "bad", "bad_frames", "cfg", "corrupted", "duplicated", "frames", "lost", "reordered", "shapes")

    def __init__(self, cfg: ImpairmentConfig, stream: str = "") -> None:
        self.cfg = cfg
        #: whether surviving frames are shaped (held, reordered, duplicated): read once per frame
        self.shapes = cfg.shapes
        # A str seed is hashed with SHA-512 by random.Random (independent of PYTHONHASHSEED),
        # so "seed/port" gives each port its own reproducible stream.
        self._rng = random.Random(f"{cfg.seed}/{stream}")
        self.bad = False
        self.frames = 0
        self.lost = 0
        self.corrupted = 0
        self.bad_frames = 0
        #: frames sent ahead of the held ones by ``reorder``, and frames sent twice
        self.reordered = 0
        self.duplicated = 0

    def decide(self) -> Verdict:
        """Advance the Gilbert-Elliott chain by one frame and draw that frame's fate."""
        cfg = self.cfg
        rnd = self._rng.random
        self.frames += 1
        if cfg.p_good_to_bad:
            if self.bad:
                if rnd() < cfg.p_bad_to_good:
                    self.bad = False
            elif rnd() < cfg.p_good_to_bad:
                self.bad = True
        if self.bad:
            self.bad_frames += 1
            loss, corrupt = cfg.loss_bad, cfg.corrupt_bad
        else:
            loss, corrupt = cfg.loss, cfg.corrupt
        if not (loss or corrupt):
            return Verdict.DELIVER
        u = rnd()
        if u < loss:
            self.lost += 1
            return Verdict.LOSE
        if u < loss + corrupt:
            self.corrupted += 1
            return Verdict.CORRUPT
        return Verdict.DELIVER

    def hold_ns(self) -> int:
        """How much longer than the link's own delay the next surviving frame is held: ``delay_ns``
        plus a uniform draw in [-jitter_ns, +jitter_ns] (at least 0), or 0 when ``reorder`` picks it
        to go at once (netem: "reorder 25%" sends a quarter of the frames immediately, the rest
        delayed)."""
        cfg = self.cfg
        rnd = self._rng.random
        if cfg.reorder and rnd() < cfg.reorder:
            self.reordered += 1
            return 0
        hold = cfg.delay_ns
        if cfg.jitter_ns:
            hold += round((2.0 * rnd() - 1.0) * cfg.jitter_ns)
        return hold if hold > 0 else 0

    def duplicates(self) -> bool:
        """Whether the next surviving frame leaves twice (netem's ``duplicate``)."""
        p = self.cfg.duplicate
        if p and self._rng.random() < p:
            self.duplicated += 1
            return True
        return False

    def corrupt(self, frame: bytes) -> bytes:
        """``frame`` with one random byte replaced by a different value."""
        if not frame:
            return frame
        buf = bytearray(frame)
        i = self._rng.randrange(len(buf))
        buf[i] ^= self._rng.randrange(1, 256)
        return bytes(buf)

    def expected_rates(self) -> tuple[float, float]:
        """Stationary (loss, corrupt) probabilities: what the measured rates converge to."""
        cfg = self.cfg
        if not cfg.p_good_to_bad:
            return cfg.loss, cfg.corrupt
        pi_bad = cfg.p_good_to_bad / (cfg.p_good_to_bad + cfg.p_bad_to_good)
        pi_good = 1.0 - pi_bad
        return (pi_good * cfg.loss + pi_bad * cfg.loss_bad, pi_good * cfg.corrupt + pi_bad * cfg.corrupt_bad)
