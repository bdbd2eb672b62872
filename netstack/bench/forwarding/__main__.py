"""``python -m netstack.bench.forwarding --role gen|bare``: the benchmark's helper processes."""

import sys

from .helpers import helper_main

sys.exit(helper_main())
