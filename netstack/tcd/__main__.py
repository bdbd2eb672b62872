"""``python -m netstack.tcd send|recv``: TCD's end hosts on real sockets (:mod:`netstack.tcd.live`)."""

import sys

from .live import main

sys.exit(main())
