"""Keys and authenticated frames: the key file, per-purpose key derivation, and sealing/opening
frames with an AES-CMAC trailer and a replay window.

``keys`` reads and writes key files and derives per-protocol AES keys (``KeyRing.derive``);
``frame`` is sans-IO: a ``Sealer`` appends trailers, an ``Opener`` (one per sending peer) checks
and strips them. The wire layout is :mod:`headers.auth`; ``netstack keys`` manages the files.
"""

from .frame import (
    FORGED,
    REASONS,
    REPLAYED,
    STALE_ERA,
    TRUNCATED,
    UNKNOWN_KEY,
    AuthFailure,
    Opener,
    Sealer,
    era_now,
    mac,
)
from .keys import (
    PURPOSE_DTA_REPORTER,
    PURPOSE_LG_LINK,
    PURPOSE_ONEPIPE_CONTROLLER,
    PURPOSE_ONEPIPE_DOMAIN,
    DerivedKeys,
    KeyFileError,
    KeyRing,
    describe,
    generate,
    load,
    rotate,
)

__all__ = [
    "FORGED", "REASONS", "REPLAYED", "STALE_ERA", "TRUNCATED", "UNKNOWN_KEY",
    "AuthFailure", "Opener", "Sealer", "era_now", "mac",
    "PURPOSE_DTA_REPORTER", "PURPOSE_LG_LINK", "PURPOSE_ONEPIPE_CONTROLLER", "PURPOSE_ONEPIPE_DOMAIN",
    "DerivedKeys", "KeyFileError", "KeyRing", "describe", "generate", "load", "rotate",
]
