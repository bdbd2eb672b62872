"""``python -m netstack.bench.dta --role naive|query``: the helper processes (naive collector, query process)."""

import sys

from .naive import helper_main

sys.exit(helper_main())
